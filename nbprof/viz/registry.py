"""The one view registry: view name -> (live builder, static builder, title).

The dashboard (live widgets), the static page (``nbprof.viz.static``), the report notebooks
(``nbprof.viz.embed.show``) and ``Trace.show`` all find views here (:data:`VIEW_REGISTRY`, a
:class:`nbprof.registry.Registry` of :class:`ViewSpec`). Builders are ``"module:function"``
strings, imported on first use, so building the registry imports no view module (and no Bokeh):

- live builder: ``f(trace, *, theme, width) -> NbprofView`` (ipywidgets);
- static builder: ``f(trace, *, theme, width) -> bokeh LayoutDOM`` (browser-side interaction only).

Views registered with ``ranks=True`` (distributed, all-ranks timeline, all-ranks overview) take the job instead of
one trace: a sequence of traces (one per rank), a ``MultiRankTrace`` or a single ``Trace`` (one rank); the
dashboard hands them every rank it was given. A job dataset opened with ``nbprof.open_job`` (an ``nbprof.Job``) is
an input too, and no view loads every rank's full trace for it (:class:`JobInput`): the views registered with
``job=True`` (distributed, all-ranks overview) take the ``Job`` and read its per-rank reductions, the other
``ranks`` views (all-ranks timeline) take the full traces of the ranks they show (:func:`zoom_ranks`), and the
views of one trace take one rank's full trace, read when first needed. Views registered with ``pair=True`` (diff) take two traces
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
           "ranks_of", "default_views", "is_job", "zoom_ranks", "JobInput"]


@dataclass(frozen=True)
class ViewSpec:
    """One registered view."""

    name: str
    title: str
    live: str
    static: str
    ranks: bool = False
    pair: bool = False
    job: bool = False

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


def register(name: str, *, title: str, live: str, static: str, ranks: bool = False, pair: bool = False,
             job: bool = False) -> ViewSpec:
    """Add (or replace) the view ``name``; ``live`` / ``static`` are ``"module:function"`` strings; ``ranks``: the
    builders take all ranks of a job; ``pair``: they take two traces ``(before, after)``; ``job``: a ``ranks`` view
    whose builders also take an ``nbprof.Job`` (its reductions, no full trace; see the module doc)."""
    spec = ViewSpec(name, title, live, static, ranks, pair, job)
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
         static="nbprof.viz.distributed:static_view", ranks=True, job=True)
register("ranks_timeline", title="All ranks", live="nbprof.viz.ranks_timeline:ranks_timeline_view",
         static="nbprof.viz.ranks_timeline:static_view", ranks=True)
register("ranks_overview", title="All ranks (overview)", live="nbprof.viz.ranks_overview:ranks_overview_view",
         static="nbprof.viz.ranks_overview:static_view", ranks=True, job=True)
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
    if is_job(job):
        raise TypeError("ranks_of would read every rank's full trace of a job dataset: use JobInput(job)")
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


def is_job(obj: Any) -> bool:
    """Whether ``obj`` is a job dataset opened with ``nbprof.open_job`` (an ``nbprof.job.Job``; imported on call,
    so building the registry imports no job module)."""
    from ..job import Job

    return isinstance(obj, Job)


def zoom_ranks(job: Any, n: int = 2) -> list[int]:
    """The ranks whose full traces the views of a job dataset show: ``job.zoom_ranks(n)``
    (:meth:`nbprof.job.Job.zoom_ranks`, the one rule)."""
    return list(job.zoom_ranks(n))


class JobInput:
    """What the views of a job take, read lazily: built from a ``Trace``, a sequence of traces (one per rank), a
    ``MultiRankTrace`` or an ``nbprof.Job`` (:func:`is_job`).

    For a job dataset no full trace is read until a view needs one, and never every rank's: :meth:`view_input`
    hands ``job=True`` views the ``Job`` (they read its reductions), the other ``ranks`` views the full traces of
    :func:`zoom_ranks`, and the views of one trace :attr:`trace`, the full trace of :attr:`rank` (``job.trace``,
    read once). Traces given in memory are handed on as before (:func:`ranks_of`).

    Attributes
    ----------
    job : nbprof.Job or None
        The job dataset, None for traces given in memory.
    rank : int
        The rank the views of one trace show: the one asked for, default the lowest rank (for traces in memory:
        the first given).
    rank_ids : list of int
        Every rank of the job (the ranks of the traces given).

    Raises
    ------
    ValueError
        No rank at all, or ``rank`` is not one of the job's.
    """

    def __init__(self, obj: Any, rank: int | None = None) -> None:
        self.job = obj if is_job(obj) else None
        self._loaded: dict[int, Any] = {}
        if self.job is not None:
            self.rank_ids = [int(r) for r in self.job.ranks]
            if not self.rank_ids:
                raise ValueError(f"the job dataset at {getattr(obj, 'path', '?')!r} has no loaded rank")
            self._traces: list | None = None
        else:
            self._traces = ranks_of(obj)
            self.rank_ids = [int(getattr(t.meta, "rank", i)) for i, t in enumerate(self._traces)]
        if rank is not None and int(rank) not in self.rank_ids:
            raise ValueError(f"rank {rank} is not one of the job's ranks {self.rank_ids[:16]}")
        self.rank = int(rank) if rank is not None else (min(self.rank_ids) if self.job is not None
                                                         else self.rank_ids[0])

    @property
    def n_ranks(self) -> int:
        """How many ranks the job has."""
        return len(self.rank_ids)

    def full_trace(self, rank: int) -> Any:
        """Rank ``rank``'s full ``Trace`` (a job's: ``job.trace(rank)``, read once and kept)."""
        if self._traces is not None:
            return self._traces[self.rank_ids.index(int(rank))]
        if int(rank) not in self._loaded:
            self._loaded[int(rank)] = self.job.trace(int(rank))  # type: ignore[union-attr]
        return self._loaded[int(rank)]

    @property
    def trace(self) -> Any:
        """The full trace the views of one trace show (:attr:`rank`'s)."""
        return self.full_trace(self.rank)

    @property
    def loaded(self) -> list[int]:
        """The ranks whose full trace was read from the job dataset so far (empty for traces in memory)."""
        return sorted(self._loaded)

    def traces(self) -> list:
        """The full traces the ``ranks`` views that need them get: every trace given in memory; a job's
        :func:`zoom_ranks` (with :attr:`rank`'s, which is read anyway)."""
        if self._traces is not None:
            return list(self._traces)
        assert self.job is not None
        return [self.full_trace(r) for r in sorted({self.rank, *zoom_ranks(self.job)})]

    def view_input(self, name: str) -> Any:
        """What view ``name``'s builders take (see the class doc)."""
        spec = get(name)
        if not spec.ranks:
            return self.trace
        if self.job is not None and spec.job:
            return self.job
        return self.traces()

    def default_views(self) -> tuple[str, ...]:
        """The default views: :func:`default_views` for traces in memory; for a job dataset the all-ranks overview
        first, then the views of one trace, ``distributed`` (several ranks, or collectives in the reductions) and
        ``ranks_timeline`` (several ranks) -- told from the manifest and the reductions, no trace read."""
        if self.job is None:
            return default_views(self.trace, self.n_ranks)
        out = ["ranks_overview", *trace_views()]
        if self.n_ranks > 1 or len(self.job.table("collectives")):
            out.append("distributed")
        if self.n_ranks > 1:
            out.append("ranks_timeline")
        return tuple(out)
