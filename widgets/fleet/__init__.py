"""Provides the views of ``npuwatch fleet``: the node table as plain rows (``rows``), the terminal
fleet app (``app``: ``run_fleet_app``) and its node screen (``node_screen``).

The notebook's fleet view is ``npuwatch.widgets.notebook.fleet_view``; both render the rows of
``rows.fleet_rows`` over a ``npuwatch.fleet.model.FleetSnapshot``, so they read the same.
"""
