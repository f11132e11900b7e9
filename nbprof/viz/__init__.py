"""nbprof viewers: live ipywidgets (Bokeh figures through ``jupyter_bokeh.BokehModel``) and static HTML.

``timeline``, ``operators_view``, ``memory_view``, ``overview_view`` and ``dashboard`` return ipywidgets
(with a ``text/plain`` fallback); ``to_html`` writes a standalone page with BokehJS inline.
Viewers only display: the numbers come from ``nbprof.analysis``.
"""

from __future__ import annotations

from ._base import load_bokehjs
from .timeline import TimelineModel, timeline

__all__ = ["timeline", "TimelineModel", "load_bokehjs", "operators_view", "memory_view", "overview_view",
           "dashboard", "to_html"]


def __getattr__(name):
    if name == "operators_view":
        from .operators import operators_view
        return operators_view
    if name == "memory_view":
        from .memory import memory_view
        return memory_view
    if name == "overview_view":
        from .overview import overview_view
        return overview_view
    if name == "dashboard":
        from .dashboard import dashboard
        return dashboard
    if name == "to_html":
        from .static import to_html
        return to_html
    raise AttributeError(f"module 'nbprof.viz' has no attribute {name!r}")
