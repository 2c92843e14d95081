"""Provides the notebook views (``%npuwatch``): plain view models, HTML/SVG rendering, ipywidgets tree.

Only ``live_view`` imports ipywidgets; every other module here is pure Python over the core model,
so the rendering is testable without a kernel.  The entry points are ``npuwatch.notebook`` (API)
and ``npuwatch.jupyter`` (the magic).
"""
