"""The one view registry: view name -> (live builder, static builder, title).

The dashboard (live widgets), the static page (``nbprof.viz.static``), the report notebooks
(``nbprof.viz.embed.show``) and ``Trace.show`` all find views here (:data:`VIEW_REGISTRY`, a
:class:`nbprof.registry.Registry` of :class:`ViewSpec`). Builders are ``"module:function"``
strings, imported on first use, so building the registry imports no view module (and no Bokeh):

- live builder: ``f(trace, *, theme, width) -> NbprofView`` (ipywidgets);
- static builder: ``f(trace, *, theme, width) -> bokeh LayoutDOM`` (browser-side interaction only).

Views registered with ``ranks=True`` (distributed, all-ranks timeline) take the job instead of one trace:
a sequence of traces (one per rank), a ``MultiRankTrace`` or a single ``Trace`` (one rank); the
dashboard hands them every rank it was given. Views registered with ``pair=True`` (diff) take two traces
``(before, after)``; they are not in the dashboard of one trace.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..registry import Registry, import_target

__all__ = ["ViewSpec", "VIEW_REGISTRY", "register", "get", "names", "trace_views", "live", "static", "call_entry", "VIEWS",
           "ranks_of", "default_views"]


@dataclass(frozen=True)
class ViewSpec:
    """One registered view."""

    name: str
    title: str
    live: str
    static: str
    ranks: bool = False
    pair: bool = False

    def live_builder(self) -> Callable[..., Any]:
        """The imported live builder."""
        builder: Callable[..., Any] = import_target(self.live)
        return builder

    def static_builder(self) -> Callable[..., Any]:
        """The imported static builder."""
        builder: Callable[..., Any] = import_target(self.static)
        return builder


#: view name -> its :class:`ViewSpec` (the entry's target); an unknown name raises ``ValueError`` listing them
VIEW_REGISTRY = Registry("view", error=ValueError)


def register(name: str, *, title: str, live: str, static: str, ranks: bool = False, pair: bool = False) -> ViewSpec:
    """Add (or replace) the view ``name``; ``live`` / ``static`` are ``"module:function"`` strings; ``ranks``: the
    builders take all ranks of a job; ``pair``: they take two traces ``(before, after)`` (see the module doc)."""
    spec = ViewSpec(name, title, live, static, ranks, pair)
    VIEW_REGISTRY.register(name, spec, live=live, static=static)
    return spec


def names() -> tuple[str, ...]:
    """Registered view names, in registration order."""
    return VIEW_REGISTRY.keys()


def trace_views() -> tuple[str, ...]:
    """The views of one trace (neither ``ranks`` nor ``pair``), in registration order: the dashboard's, read at
    call time, so a view registered after import appears too."""
    return tuple(n for n in names() if not (get(n).ranks or get(n).pair))


def get(name: str) -> ViewSpec:
    """The view ``name``.

    Raises
    ------
    ValueError
        Unknown view (the message lists the registered ones).
    """
    spec: ViewSpec = VIEW_REGISTRY.resolve(name)
    return spec


def live(name: str, trace, *, theme: str = "auto", width: int = 1100):
    """Build the live widget of view ``name`` for ``trace``."""
    return get(name).live_builder()(trace, theme=theme, width=width)


def static(name: str, trace, *, theme: str = "light", width: int = 1100):
    """Build the static Bokeh layout of view ``name`` for ``trace``."""
    return get(name).static_builder()(trace, theme=theme, width=width)


for _name, _title, _mod, _fn in (
    ("overview", "Overview", "overview", "overview_view"),
    ("operators", "Operators", "operators", "operators_view"),
    ("kernels", "GPU Kernel", "kernels", "kernels_view"),
    ("timeline", "Timeline", "timeline", "timeline"),
    ("memory", "Memory", "memory", "memory_view"),
    ("critical_path", "Critical path", "critical_path", "critical_path_view"),
    ("roofline", "Roofline", "roofline", "roofline_view"),
):
    register(_name, title=_title, live=f"nbprof.viz.{_mod}:{_fn}", static=f"nbprof.viz.{_mod}:static_view")
register("modules", title="Modules", live="nbprof.viz.modules:modules_view", static="nbprof.viz.modules:static_view")
register("call_stack", title="Call stack", live="nbprof.viz.modules:call_stack_view",
         static="nbprof.viz.modules:call_stack_static_view")

#: the trace views nbprof registers, in the dashboard's order (the dashboard reads :func:`trace_views`, which
#: also holds views registered later)
VIEWS = names()
#: multi-rank views (``ranks=True``): in the dashboard when the trace has collectives / several ranks are given
register("distributed", title="Distributed", live="nbprof.viz.distributed:distributed_view",
         static="nbprof.viz.distributed:static_view", ranks=True)
register("ranks_timeline", title="All ranks", live="nbprof.viz.ranks_timeline:ranks_timeline_view",
         static="nbprof.viz.ranks_timeline:static_view", ranks=True)
register("ranks_overview", title="All ranks (overview)", live="nbprof.viz.ranks_overview:ranks_overview_view",
         static="nbprof.viz.ranks_overview:static_view", ranks=True)
# two traces (before, after): the first argument of its builders is the pair
register("diff", title="Diff", live="nbprof.viz.compare:diff_view", static="nbprof.viz.compare:static_view", pair=True)


def call_entry(names_: tuple[str, ...], trace, *args: Any, **kwargs: Any) -> Any:
    """Call the first ``nbprof.viz.<name>`` entry point of ``names_`` that exists, with ``trace``.

    Raises
    ------
    NotImplementedError
        When none exists.
    """
    viz = importlib.import_module("nbprof.viz")
    for name in names_:
        fn = getattr(viz, name, None)
        if isinstance(fn, types.ModuleType):  # a submodule shadowing its function
            fn = getattr(fn, name, None)
        if callable(fn):
            return fn(trace, *args, **kwargs)
    msg = (
        f"nbprof.viz.{names_[0]} is not available in this nbprof installation; "
        "the data is in result.table(), result.operators() and result.trace"
    )
    raise NotImplementedError(msg)



def ranks_of(job: Any) -> list:
    """The traces of a job, one per rank: a ``Trace`` -> ``[trace]``; a ``MultiRankTrace`` -> its full traces;
    a sequence of traces -> a list of them.

    Raises
    ------
    ValueError
        No trace at all.
    """
    from ..trace.model import Trace

    if isinstance(job, Trace):
        return [job]
    out = list(job.traces()) if callable(getattr(job, "traces", None)) else list(job)
    if not out:
        raise ValueError("no trace given: a job needs at least one rank's trace")
    return out


def default_views(trace: Any, n_ranks: int = 1) -> tuple[str, ...]:
    """The dashboard's (and static page's) views for ``trace`` (the first rank of ``n_ranks``): :data:`VIEWS`,
    then ``distributed`` when the trace has collectives (``nbprof.trace.predicates.is_communication``) or
    several ranks are given, then ``ranks_timeline`` when several ranks are given."""
    from ..trace import predicates as pred

    out = list(trace_views())
    if n_ranks > 1 or bool(pred.is_communication(trace.events).any()):
        out.append("distributed")
    if n_ranks > 1:
        out.append("ranks_timeline")
    return tuple(out)
