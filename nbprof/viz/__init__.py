"""nbprof viewers: live ipywidgets (Bokeh figures through ``jupyter_bokeh.BokehModel``) and static HTML.

``timeline``, ``operators_view``, ``kernels_view``, ``memory_view``, ``overview_view``, ``critical_path_view``,
``compare_view`` (two traces) and ``dashboard`` return ipywidgets
(with a ``text/plain`` fallback); ``to_html`` writes a standalone page with BokehJS inline.
Viewers only display: the numbers come from ``nbprof.analysis``. Every trace view is registered in
``nbprof.viz.registry`` (live builder, static builder, title).
"""

from __future__ import annotations

from . import registry
from ._base import NbprofView, load_bokehjs
from .compare import compare_view
from .critical_path import critical_path_view
from .dashboard import Dashboard, dashboard
from .kernels import kernels_view
from .memory import memory_view
from .operators import operators_view
from .overview import overview_view
from .registry import call_entry
from .static import to_html
from .timeline import TimelineModel, TimelineView, timeline

__all__ = ["timeline", "operators_view", "kernels_view", "compare_view", "memory_view", "overview_view",
           "critical_path_view", "dashboard", "to_html", "TimelineModel", "TimelineView", "Dashboard", "NbprofView",
           "load_bokehjs", "registry", "call_entry"]
