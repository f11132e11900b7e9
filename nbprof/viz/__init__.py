"""nbprof viewers: live ipywidgets (Bokeh figures through ``jupyter_bokeh.BokehModel``) and static HTML.

``timeline``, ``operators_view``, ``kernels_view``, ``memory_view``, ``overview_view``, ``critical_path_view``,
``compare_view`` (two traces) and ``dashboard`` return ipywidgets
(with a ``text/plain`` fallback); ``to_html`` writes a standalone page with BokehJS inline.
Viewers only display: the numbers come from ``nbprof.analysis``. Every trace view is registered in
``nbprof.viz.registry`` (live builder, static builder, title).
"""

from __future__ import annotations

from .._deps import require

for _mod in ("bokeh", "ipywidgets", "jupyter_bokeh"):  # one clear error naming the `viz` extra, before any import
    require(_mod, "viz", "nbprof.viz (the viewers)")

from . import registry  # noqa: E402
from ._base import NbprofView, load_bokehjs  # noqa: E402
from .compare import compare_view  # noqa: E402
from .critical_path import critical_path_view  # noqa: E402
from .dashboard import Dashboard, dashboard  # noqa: E402
from .kernels import kernels_view  # noqa: E402
from .memory import memory_view  # noqa: E402
from .operators import operators_view  # noqa: E402
from .overview import overview_view  # noqa: E402
from .registry import call_entry  # noqa: E402
from .static import to_html  # noqa: E402
from .timeline import TimelineModel, TimelineView, timeline  # noqa: E402

__all__ = ["timeline", "operators_view", "kernels_view", "compare_view", "memory_view", "overview_view",
           "critical_path_view", "dashboard", "to_html", "TimelineModel", "TimelineView", "Dashboard", "NbprofView",
           "load_bokehjs", "registry", "call_entry"]
