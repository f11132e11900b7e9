"""What the model calls but never imports: its viewer (``Trace.show``) and its writers (``Trace.save``,
``to_chrome_trace``, ``to_perfetto``, ``sql``).

:data:`HOOKS` is a :class:`nbprof.registry.Registry` of ``"module:function"`` targets, imported on first
call. The façade (``nbprof/__init__.py``) registers nbprof's own: ``viewer`` -> ``nbprof.viz.dashboard:show_trace``,
``save`` / ``chrome`` / ``perfetto`` / ``sql`` -> ``nbprof.export``; so the arrows from the model to the writers
and the viewer are the façade's, and the layer test sees them there. Another front end can take the viewer's
place with :func:`set_viewer`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..registry import Registry

__all__ = ["HOOKS", "set_viewer", "viewer", "call"]

#: hook name -> ``"module:function"``: ``viewer`` ``f(trace, view=None, **kwargs) -> widget``; ``save``
#: ``f(trace, path) -> str``; ``chrome`` / ``perfetto`` ``f(trace, path) -> ExportReport``; ``sql``
#: ``f(trace, query, tables=None) -> DataFrame``
HOOKS = Registry("trace hook", error=LookupError)


def set_viewer(target: str) -> None:
    """Make ``Trace.show`` call ``target`` (``"package.module:function"``).

    Raises
    ------
    ValueError
        ``target`` is not ``"package.module:function"``.
    """
    if ":" not in target:
        msg = f"viewer target {target!r} must be 'package.module:function'"
        raise ValueError(msg)
    HOOKS.register("viewer", target)


def viewer() -> Callable[..., Any]:
    """The registered viewer function.

    Raises
    ------
    MissingDependencyError
        When a third-party package the viewer needs (bokeh, ipywidgets, jupyter_bokeh) is missing.
    """
    try:
        func: Callable[..., Any] = HOOKS.resolve("viewer")
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "nbprof":
            raise
        from .._deps import missing
        from ..errors import MissingDependencyError

        if isinstance(exc, MissingDependencyError):
            raise
        mod = str(HOOKS.entry("viewer").target).split(":")[0]
        raise missing(exc.name or mod, "viz", f"the trace viewer ({mod})", exc) from exc
    return func


def call(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call the hook ``name`` (a writer) with ``args``; an unregistered name raises ``LookupError``."""
    return HOOKS.resolve(name)(*args, **kwargs)
