"""npuwatch: monitor, diagnose and health-check Huawei Ascend NPUs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from npuwatch.feeds import FeedOptions, open_feed
    from npuwatch.model import Snapshot
    from npuwatch.sampler import Sampler

__all__ = ["FeedOptions", "Sampler", "__version__", "open_feed", "snapshot"]


def snapshot(**options: Any) -> Snapshot:
    """Take one sample of this machine's NPUs; ``options`` as ``FeedOptions`` (``demo=``, ``replay=`` …)."""
    from npuwatch.feeds import FeedOptions, open_feed

    with open_feed(FeedOptions(**options)) as feed:
        return feed.sample()


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext npuwatch``: register the ``%npuwatch`` magic (IPython is imported only now)."""
    from npuwatch.jupyter import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext npuwatch``: stop every live view."""
    from npuwatch.jupyter import unload_ipython_extension as unload

    unload(ipython)


def __getattr__(name: str) -> Any:
    # `npuwatch.Sampler`, `npuwatch.open_feed` without importing them at `import npuwatch` time.
    if name == "Sampler":
        from npuwatch.sampler import Sampler

        return Sampler
    if name in ("FeedOptions", "open_feed"):
        from npuwatch import feeds

        return getattr(feeds, name)
    if name == "notebook":  # `npuwatch.notebook.show()` after a plain `import npuwatch`
        import importlib

        return importlib.import_module("npuwatch.notebook")
    raise AttributeError(f"module 'npuwatch' has no attribute {name!r}")
