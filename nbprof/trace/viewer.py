"""Where ``Trace.show`` finds its viewer: a ``"module:function"`` string, imported on first use.

The trace model never imports a viewer; ``nbprof.viz`` is the default target and another front end
can take its place with :func:`set_viewer`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["set_viewer", "viewer", "DEFAULT_VIEWER"]

#: ``f(trace, view=None, **kwargs) -> widget``: the dashboard of ``nbprof.viz``
DEFAULT_VIEWER = "nbprof.viz.dashboard:show_trace"

_TARGET = [DEFAULT_VIEWER]


def set_viewer(target: str) -> None:
    """Make ``Trace.show`` call ``target`` (``"package.module:function"``)."""
    if ":" not in target:
        msg = f"viewer target {target!r} must be 'package.module:function'"
        raise ValueError(msg)
    _TARGET[0] = target


def viewer() -> Callable[..., Any]:
    """The registered viewer function.

    Raises
    ------
    MissingDependencyError
        When a third-party package the viewer needs (bokeh, ipywidgets, jupyter_bokeh) is missing.
    """
    mod, fn = _TARGET[0].split(":")
    try:
        module = importlib.import_module(mod)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "nbprof":
            raise
        from .._deps import missing
        from ..errors import MissingDependencyError

        if isinstance(exc, MissingDependencyError):
            raise

        raise missing(exc.name or mod, "viz", f"the trace viewer ({mod})", exc) from exc
    func: Callable[..., Any] = getattr(module, fn)
    return func
