"""Where the iterations of a trace are when it has no ``ProfilerStep#N``: one detector, one step-source record.

``torch.profiler`` writes ``ProfilerStep#N`` only when the loop calls ``prof.step()``; an unmodified script, a
profile without a schedule, an inference server (vLLM, SGLang, HF pipelines) or an nsys report without step
ranges has none, and "per step" would then mean "the whole trace". :func:`detect_iterations` finds the loop from
what repeats, trying these sources in this order (the first that gives two or more iterations wins):

===================  =========  ===============================================================================
source               confidence  an iteration is
===================  =========  ===============================================================================
``profiler_step``    exact      a host ``ProfilerStep#N`` range (what ``prof.step()`` records; always wins)
``optimizer_step``   high       from the end of one ``Optimizer.step#<Cls>.step`` range (torch's
                                ``record_function`` of every ``optimizer.step()``) to the end of the next; the
                                first from the first host op of that thread
``user_range``       medium     a repeated ``record_function`` / NVTX range (same name up to a trailing number:
                                ``step 3``; not nested in itself) whose occurrences cover at least half of the
                                span they lie in; else numbered ranges whose number restarts (``Forward 0..3``
                                per step: micro-batches, parts of an iteration): from one range with the
                                smallest number to the next (the sequence that starts first)
``dataloader``       medium     from one ``enumerate(DataLoader)#...__next__`` to the next
``module_forward``   medium     from one top-level ``nn.Module: <Name>`` forward (``with_stack``/``with_modules``
                                Python frames) to the next of the same name; that name must hold at least half
                                of the top-level modules' time (the model, not one of many flat modules)
``cuda_graph``       medium     from one ``cudaGraphLaunch``/``hipGraphLaunch`` to the next
``kernel_sequence``  low        device only: from one occurrence of the kernel that starts a repeating kernel
                                sequence to the next (decode steps of an inference trace; in a trace of one
                                forward pass the repeating unit is a layer, and the record says so)
``whole_trace``      none       nothing repeats: the host window is one step
===================  =========  ===============================================================================

Start-anchored sources (DataLoader, module forward, graph launch, kernel sequence) end their last iteration at
the last event of that thread (or device) starting before the last marker plus the median period: a long tail
after the loop is not counted in it.

When the source gave no step (every ``step`` -1), ``Trace`` construction makes the iterations the events' steps
(:func:`assign_detected_steps`), so per-step analyses that read the ``step`` column (critical path of one step,
advisor rules, what-if plans) see the same steps as :func:`nbprof.analysis.steps.step_windows`.

Every boundary is a row of ``trace.events`` and an edge of it (its start ``ts_ns`` or its end ``ts_ns + dur_ns``),
so the same iterations can be placed on other event times (a what-if replay moves events, not boundaries' rows).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from . import predicates as pred
from . import schema
from .steps import assign_steps

__all__ = ["SOURCES", "CONFIDENCE", "StepSource", "detect_iterations", "step_source", "BOUNDARY_COLUMNS",
           "iteration_ranges", "assign_detected_steps", "step_label"]


class Trace(Protocol):
    """What this module reads of a :class:`nbprof.Trace` (not imported: ``Trace`` construction calls
    :func:`assign_detected_steps`, so the model imports this module)."""

    events: pd.DataFrame
    memory: pd.DataFrame
    meta: Any
    report: Any

#: The sources, in order of preference.
SOURCES = ("profiler_step", "optimizer_step", "user_range", "dataloader", "module_forward", "cuda_graph",
           "kernel_sequence", "whole_trace")
#: How sure a source is that its windows are the loop's iterations.
CONFIDENCE = {"profiler_step": "exact", "optimizer_step": "high", "user_range": "medium", "dataloader": "medium",
              "module_forward": "medium", "cuda_graph": "medium", "kernel_sequence": "low", "whole_trace": "none"}
#: Columns of :func:`detect_iterations`' boundaries frame.
BOUNDARY_COLUMNS = ("step", "start_row", "start_at_end", "end_row", "end_at_end")

_OPTIMIZER_RE = re.compile(r"^Optimizer\.step#[^.]+\.step$")
#: Ranges that are never an iteration of their own (they have their own source or are parts of one).
_NOT_USER_ITERATION = ("ProfilerStep", "Optimizer.", "enumerate(DataLoader)", "enumerate(DataPipe)", "nccl:", "gloo:",
                       "rccl:", "## ")
#: Shortest repeating kernel sequence taken as an iteration (shorter repeats are loops inside an op).
MIN_KERNEL_PERIOD = 4
#: Share of an anchor kernel's gaps that must equal its period.
PERIOD_AGREEMENT = 0.9
_CACHE = "_nbprof_iterations"
#: A trailing iteration number of a range name (``step 3``, ``iter_12``, ``decode#4``)
_NUMBERED_RE = re.compile(r"[\s#_:=-]*\d+$")
_TRAILING_INT_RE = re.compile(r"(\d{1,18})$")


@dataclass(frozen=True)
class StepSource:
    """Which source defined a trace's steps.

    Attributes
    ----------
    source : str
        One of :data:`SOURCES`.
    marker : str
        The event name the boundaries come from (``"Optimizer.step#SGD.step"``, ``"ProfilerStep#N"``, a kernel
        name ...); empty for ``whole_trace``.
    confidence : str
        :data:`CONFIDENCE` of the source.
    steps : int
        Iterations found.
    side : str
        ``"host"`` (boundaries are host rows; step windows extend them to the device work they launched) or
        ``"device"`` (``kernel_sequence``: the windows are device times).
    note : str
        One sentence for people: what the windows are and, where it applies, why they may not be iterations.
    considered : tuple of (str, int)
        Every source tried before the winner and how many iterations it offered (0: none, 1: one).
    """

    source: str
    marker: str
    confidence: str
    steps: int
    side: str = "host"
    note: str = ""
    considered: tuple[tuple[str, int], ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        head = f"{self.steps} step{'s' if self.steps != 1 else ''} from {self.source}"
        if self.marker:
            head += f" ({self.marker})"
        return f"{head}, confidence {self.confidence}" + (f": {self.note}" if self.note else "")


def _empty_bounds() -> pd.DataFrame:
    return pd.DataFrame({"step": pd.Series(dtype="int64"), "start_row": pd.Series(dtype="int64"),
                         "start_at_end": pd.Series(dtype=bool), "end_row": pd.Series(dtype="int64"),
                         "end_at_end": pd.Series(dtype=bool)})


def _bounds(start_row: Any, start_at_end: Any, end_row: Any, end_at_end: Any) -> pd.DataFrame:
    sr = np.asarray(start_row, dtype=np.int64)
    n = len(sr)
    return pd.DataFrame({"step": np.arange(n, dtype=np.int64), "start_row": sr,
                         "start_at_end": np.broadcast_to(np.asarray(start_at_end, dtype=bool), (n,)).copy(),
                         "end_row": np.asarray(end_row, dtype=np.int64),
                         "end_at_end": np.broadcast_to(np.asarray(end_at_end, dtype=bool), (n,)).copy()})


class _Ctx:
    """Arrays of one trace the detectors share (positions are row positions of ``trace.events``)."""

    def __init__(self, ev: pd.DataFrame) -> None:
        self.ev = ev
        self.ts = ev["ts_ns"].to_numpy(np.int64)
        self.end = self.ts + ev["dur_ns"].to_numpy(np.int64)
        self.host = np.asarray(pred.is_host(ev), dtype=bool)
        self.tid = ev["tid"].to_numpy() if "tid" in ev.columns else np.zeros(len(ev), np.int64)
        self.pid = ev["pid"].to_numpy() if "pid" in ev.columns else np.zeros(len(ev), np.int64)

    def names(self, mask: np.ndarray) -> np.ndarray:
        return np.asarray(self.ev["name"].to_numpy()[mask], dtype=object)

    def outermost(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` (positions) in time order without those nested in an earlier one (same pid/tid)."""
        rows = rows[np.argsort(self.ts[rows], kind="stable")]
        if len(rows) < 2:
            return rows
        # a row is nested when it starts before the latest end of the earlier rows of its thread
        key = pd.MultiIndex.from_arrays([self.pid[rows], self.tid[rows]]).codes
        g = pd.Series(self.end[rows]).groupby([key[0], key[1]], sort=False)
        prev_end = g.cummax().groupby([key[0], key[1]], sort=False).shift(1)
        keep = prev_end.isna().to_numpy() | (self.ts[rows] >= prev_end.fillna(0).to_numpy(np.int64))
        return np.asarray(rows[keep])

    def thread_rows(self, row: int) -> np.ndarray:
        """Host rows of ``row``'s pid/tid."""
        return np.flatnonzero(self.host & (self.pid == self.pid[row]) & (self.tid == self.tid[row]))


def _most_frequent(ctx: _Ctx, rows: np.ndarray) -> np.ndarray:
    """The rows of the most frequent name among ``rows`` (ties: the one whose first row is latest), on the
    pid/tid of its first row, outermost only, in time order."""
    if not len(rows):
        return rows
    names = ctx.names(rows)
    vc = pd.Series(names).value_counts()
    best = vc[vc == vc.iloc[0]].index
    if len(best) > 1:
        first = {n: ctx.ts[rows[names == n]].min() for n in best}
        best = [max(first, key=lambda n: first[n])]
    sel = rows[names == best[0]]
    r0 = sel[np.argmin(ctx.ts[sel])]
    sel = sel[(ctx.pid[sel] == ctx.pid[r0]) & (ctx.tid[sel] == ctx.tid[r0])]
    return ctx.outermost(sel)


def _end_anchored(ctx: _Ctx, marks: np.ndarray) -> pd.DataFrame:
    """Iteration k from the end of marker k-1 (the first: the thread's first host op) to the end of marker k."""
    th = ctx.thread_rows(int(marks[0]))
    first = th[np.argmin(ctx.ts[th])]
    starts = np.concatenate([[first], marks[:-1]])
    at_end = np.ones(len(marks), dtype=bool)
    at_end[0] = False
    return _bounds(starts, at_end, marks, True)


def _start_anchored(ctx: _Ctx, marks: np.ndarray, pool: np.ndarray) -> pd.DataFrame:
    """Iteration k from the start of marker k to the start of marker k+1; the last one to the latest end of the
    ``pool`` rows (positions) that start before the last marker plus the median period."""
    ts = ctx.ts[marks]
    period = int(np.median(np.diff(ts)))
    last = int(marks[-1])
    cand = pool[(ctx.ts[pool] >= ctx.ts[last]) & (ctx.ts[pool] < ctx.ts[last] + period)]
    tail = int(cand[np.argmax(ctx.end[cand])]) if len(cand) else last
    if ctx.end[tail] < ctx.end[last]:
        tail = last
    end_rows = np.concatenate([marks[1:], [tail]])
    at_end = np.zeros(len(marks), dtype=bool)
    at_end[-1] = True
    return _bounds(marks, False, end_rows, at_end)


def _optimizer(ctx: _Ctx) -> tuple[pd.DataFrame, str]:
    rows = np.flatnonzero(ctx.host & pred.name_mask(ctx.ev["name"], _OPTIMIZER_RE.match))
    marks = _most_frequent(ctx, rows)
    if len(marks) < 2:
        return _empty_bounds(), ""
    return _end_anchored(ctx, marks), str(ctx.ev["name"].iloc[marks[0]])


def _user_range(ctx: _Ctx) -> tuple[pd.DataFrame, str]:
    cand = ctx.host & pred.category_in(ctx.ev, (schema.USER_ANNOTATION, schema.NVTX)) & ~pred.name_mask(
        ctx.ev["name"], lambda s: s.startswith(_NOT_USER_ITERATION))
    rows = np.flatnonzero(cand)
    if len(rows) < 2:
        return _empty_bounds(), ""
    # "step 3", "iteration_12", "decode#4": one range per iteration, numbered -- grouped without the number
    raw = ctx.names(rows)
    names = np.array([_NUMBERED_RE.sub("", str(n)) for n in raw], dtype=object)
    best, best_cover = None, 0
    restarts: list[np.ndarray] = []
    for name in pd.unique(pd.Series(names)[pd.Series(names).duplicated()]):
        sel = rows[names == name]
        r0 = sel[np.argmin(ctx.ts[sel])]
        sel = ctx.outermost(sel[(ctx.pid[sel] == ctx.pid[r0]) & (ctx.tid[sel] == ctx.tid[r0])])
        if len(sel) < 2:
            continue
        num = _range_numbers(ctx, sel)
        if num is not None and len(np.unique(num)) < len(num):
            # the number restarts ("Forward 0..3, Forward 0..3"): it indexes the parts of an iteration
            # (micro-batches, layers), not iterations; each restart at the smallest number starts one
            first = sel[num == num.min()]
            if len(first) >= 2:
                restarts.append(first)
            continue
        cover = int((ctx.end[sel] - ctx.ts[sel]).sum())
        span = int(ctx.end[sel].max() - ctx.ts[sel].min())
        if span > 0 and cover >= 0.5 * span and cover > best_cover:
            best, best_cover = sel, cover
    if best is None and restarts:  # the part sequence that starts first (forward before backward)
        first = min(restarts, key=lambda r: int(ctx.ts[r[0]]))
        return _start_anchored(ctx, first, ctx.thread_rows(int(first[0]))), str(ctx.ev["name"].iloc[first[0]])
    if best is None:
        return _empty_bounds(), ""
    return _bounds(best, False, best, True), str(ctx.ev["name"].iloc[best[0]])


def _range_numbers(ctx: _Ctx, rows: np.ndarray) -> np.ndarray | None:
    """The trailing numbers of the names of ``rows`` (int64), or None when one has none."""
    out = []
    for n in ctx.names(rows):
        m = _TRAILING_INT_RE.search(str(n))
        if m is None:
            return None
        out.append(int(m.group(1)))
    return np.asarray(out, dtype=np.int64)


def _start_source(ctx: _Ctx, mask: np.ndarray, top_level: bool = False) -> tuple[pd.DataFrame, str]:
    rows = np.flatnonzero(mask)
    if top_level:
        rows = ctx.outermost(rows)
    marks = _most_frequent(ctx, rows)
    if len(marks) < 2:
        return _empty_bounds(), ""
    if top_level and 2 * int((ctx.end[marks] - ctx.ts[marks]).sum()) < int((ctx.end[rows] - ctx.ts[rows]).sum()):
        return _empty_bounds(), ""  # many top-level modules, none the model: a flat structure, not a loop
    return _start_anchored(ctx, marks, ctx.thread_rows(int(marks[0]))), str(ctx.ev["name"].iloc[marks[0]])


def _kernel_sequence(ctx: _Ctx) -> tuple[pd.DataFrame, str, str]:
    """The repeating kernel sequence of the busiest device: each kernel name's occurrence gaps (in kernels);
    a name whose gaps agree on one period (:data:`PERIOD_AGREEMENT`) of at least :data:`MIN_KERNEL_PERIOD`
    kernels anchors iterations; the anchor covering most kernels (count x period) wins, ties to the longer
    period."""
    ev = ctx.ev
    k = np.flatnonzero(pred.is_kernel(ev))
    if len(k) < 2 * MIN_KERNEL_PERIOD:
        return _empty_bounds(), "", ""
    dev = ev["device"].to_numpy()[k]
    vals, counts = np.unique(dev, return_counts=True)
    k = k[dev == vals[np.argmax(counts)]]
    k = k[np.argsort(ctx.ts[k], kind="stable")]
    codes = pd.Categorical(ev["name"].to_numpy()[k]).codes.astype(np.int64) if not isinstance(
        ev["name"].dtype, pd.CategoricalDtype) else ev["name"].cat.codes.to_numpy()[k].astype(np.int64)
    m = len(k)
    pos = np.arange(m, dtype=np.int64)
    order = np.lexsort((pos, codes))
    c_sorted, p_sorted = codes[order], pos[order]
    same = c_sorted[1:] == c_sorted[:-1]
    gaps = pd.DataFrame({"code": c_sorted[1:][same], "gap": (p_sorted[1:] - p_sorted[:-1])[same]})
    if gaps.empty:
        return _empty_bounds(), "", ""
    per = gaps.groupby(["code", "gap"]).size().rename("n").reset_index()
    tot = gaps.groupby("code").size().rename("total")
    per = per.join(tot, on="code").sort_values(["code", "n"], ascending=[True, False]).drop_duplicates("code")
    per = per[(per["gap"] >= MIN_KERNEL_PERIOD) & (per["n"] >= PERIOD_AGREEMENT * per["total"])]
    if per.empty:
        return _empty_bounds(), "", ""
    per = per.assign(cover=np.minimum((per["total"] + 1) * per["gap"], m))
    per = per.sort_values(["cover", "gap"], ascending=[False, False])
    best = per.iloc[0]
    if best["cover"] < 0.5 * m:
        return _empty_bounds(), "", ""
    anchor_pos = p_sorted[c_sorted == int(best["code"])]
    marks = k[anchor_pos]
    last_pos = min(int(anchor_pos[-1]) + int(best["gap"]) - 1, m - 1)
    end_rows = np.concatenate([marks[1:], [k[last_pos]]])
    at_end = np.zeros(len(marks), dtype=bool)
    at_end[-1] = True
    note = f"a sequence of {int(best['gap'])} kernels repeats {len(marks)} times"
    fwd = np.flatnonzero(ctx.host & pred.name_mask(ev["name"], lambda s: s.startswith("nn.Module: ")))
    tops = ctx.outermost(fwd)
    if len(tops) and len(_most_frequent(ctx, tops)) < 2:
        top = str(ev["name"].iloc[tops[np.argmax(ctx.end[tops] - ctx.ts[tops])]])
        note += (f" inside one forward pass ({top}): these are probably its layers, not separate iterations "
                 "(the trace holds one forward)")
    return _bounds(marks, False, end_rows, at_end), str(ev["name"].iloc[marks[0]]), note


def _detect(trace: Trace) -> tuple[pd.DataFrame, StepSource]:
    ev = trace.events
    if not len(ev):
        return _empty_bounds(), StepSource("whole_trace", "", "none", 0, note="the trace has no events")
    ctx = _Ctx(ev)
    step_rows = np.flatnonzero(np.asarray(pred.is_step_row(ev), dtype=bool))
    if len(step_rows):
        return _empty_bounds(), StepSource("profiler_step", "ProfilerStep#N", "exact", len(step_rows),
                                           note="the profiler's own step ranges (prof.step())")
    considered: list[tuple[str, int]] = []
    names = ev["name"]
    tries: tuple[tuple[str, Callable[[], tuple[pd.DataFrame, str]]], ...] = (
        ("optimizer_step", lambda: _optimizer(ctx)),
        ("user_range", lambda: _user_range(ctx)),
        ("dataloader", lambda: _start_source(ctx, ctx.host & pred.name_mask(
            names, lambda s: s.startswith(("enumerate(DataLoader)#", "enumerate(DataPipe)#")) and
            s.endswith("__next__")))),
        ("module_forward", lambda: _start_source(ctx, ctx.host & pred.name_mask(
            names, lambda s: s.startswith("nn.Module: ")), top_level=True)),
        ("cuda_graph", lambda: _start_source(ctx, ctx.host & pred.is_graph_launch(ctx.ev))),
    )
    for source, fn in tries:
        b, marker = fn()
        if len(b) >= 2:
            note = {"optimizer_step": "each iteration ends where its optimizer step ends",
                    "user_range": "each iteration is one occurrence of this range (of numbered parts that restart, "
                                  "such as micro-batches: from one part of the smallest number to the next)",
                    "dataloader": "each iteration starts where the DataLoader hands over a batch",
                    "module_forward": "each iteration starts with a forward of the top-level module",
                    "cuda_graph": "each iteration starts with a CUDA graph launch"}[source]
            return b, StepSource(source, marker, CONFIDENCE[source], len(b), "host", note, tuple(considered))
        considered.append((source, len(b)))
    b, marker, note = _kernel_sequence(ctx)
    if len(b) >= 2:
        return b, StepSource("kernel_sequence", marker, "low", len(b), "device", note, tuple(considered))
    considered.append(("kernel_sequence", len(b)))
    return _empty_bounds(), StepSource("whole_trace", "", "none", 1 if ctx.host.any() else 0, "host",
                                       "no ProfilerStep and nothing repeats: the host window is one step",
                                       tuple(considered))


def detect_iterations(trace: Trace) -> tuple[pd.DataFrame, StepSource]:
    """The iterations of ``trace`` (see the module docstring for the sources and their order).

    Parameters
    ----------
    trace : nbprof.Trace

    Returns
    -------
    (pandas.DataFrame, StepSource)
        Boundaries, one row per iteration in time order: ``step`` (0, 1, ...), ``start_row``/``end_row`` (int64
        positions in ``trace.events``), ``start_at_end``/``end_at_end`` (bool: the boundary is that row's end
        ``ts_ns + dur_ns``, else its start ``ts_ns``). Empty for ``profiler_step`` (the ``ProfilerStep#N`` rows
        are the steps) and ``whole_trace``. And the :class:`StepSource` record, also added once to
        ``trace.report`` (kind ``"steps_detected"``, action ``"assumed"``) when the steps were not the
        profiler's. Computed once per Trace (kept in ``trace.__dict__``, keyed on its events frame).
    """
    d = trace.__dict__
    owner = (id(trace.events), len(trace.events))
    hit = d.get(_CACHE)
    if hit is not None and hit[0] == owner:
        return hit[1], hit[2]
    bounds, src = _detect(trace)
    d[_CACHE] = (owner, bounds, src)
    if src.source != "profiler_step" and trace.report is not None and trace.report.get("steps_detected") is None:
        trace.report.add("steps_detected", "assumed", src.steps, f"{src.steps} steps: no ProfilerStep#N; {src}")
    return bounds, src


def step_source(trace: Trace) -> StepSource:
    """The :class:`StepSource` of ``trace`` (which source defined its steps, with what confidence)."""
    return detect_iterations(trace)[1]


#: What a step of each source is, in a step label (:func:`step_label`)
_SOURCE_WORD = {"optimizer_step": "optimizer.step", "user_range": "range", "dataloader": "DataLoader batch",
                "module_forward": "module forward", "cuda_graph": "CUDA graph launch",
                "kernel_sequence": "kernel sequence"}


def step_label(trace: Trace, steps: Any) -> str:
    """THE label of a step or a run of steps of ``trace`` for people, by the trace's step source: the profiler's
    ``"ProfilerStep#3"`` / ``"ProfilerStep#3..#8 (6 steps)"``; a detected one ``"step 3 (optimizer.step)"`` /
    ``"steps 0..5 (6 steps, optimizer.step)"`` (the source's word; a user range's label names the range,
    ``"step 2 (range 'step 0')"``); ``"whole trace"`` for no step and for a trace in which nothing repeats.
    Every finding's ``where``, error message and view that names steps takes its label from here.

    Parameters
    ----------
    trace : nbprof.Trace
    steps : int or iterable of int
        Step numbers (the ``step`` column's values), in the order to show; the first and the last are named.

    Returns
    -------
    str
    """
    st = [int(steps)] if isinstance(steps, (int, np.integer)) else [int(s) for s in steps]
    src = step_source(trace)
    if not st or src.source == "whole_trace":
        return "whole trace"
    if src.source == "profiler_step":
        if len(st) == 1:
            return f"ProfilerStep#{st[0]}"
        return f"ProfilerStep#{st[0]}..#{st[-1]} ({len(st)} steps)"
    word = _SOURCE_WORD.get(src.source, src.source)
    if src.source == "user_range":
        word = f"range {src.marker!r}"
    if len(st) == 1:
        return f"step {st[0]} ({word})"
    return f"steps {st[0]}..{st[-1]} ({len(st)} steps, {word})"


def iteration_ranges(trace: Trace) -> pd.DataFrame:
    """The detected iterations of ``trace`` as a :mod:`nbprof.trace.steps` ranges frame.

    Returns
    -------
    pandas.DataFrame
        ``step`` (int32: 0, 1, ...), ``start_ns``, ``end_ns`` (int64 ns, end exclusive): each iteration's
        boundaries (:func:`detect_iterations`; host times, or device times when the source's ``side`` is
        ``"device"``), before any extension to device work. Empty for ``profiler_step`` and ``whole_trace``.
    """
    b, _ = detect_iterations(trace)
    ev = trace.events
    if not len(b):
        return pd.DataFrame({"step": np.zeros(0, np.int32), "start_ns": np.zeros(0, np.int64),
                             "end_ns": np.zeros(0, np.int64)})
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    sr, er = b["start_row"].to_numpy(np.int64), b["end_row"].to_numpy(np.int64)
    return pd.DataFrame({"step": b["step"].to_numpy(np.int32),
                         "start_ns": np.where(b["start_at_end"].to_numpy(bool), end[sr], ts[sr]),
                         "end_ns": np.where(b["end_at_end"].to_numpy(bool), end[er], ts[er])})


def assign_detected_steps(trace: Trace) -> None:
    """Make the detected iterations the step of each event when no source set one (called once, by ``Trace``
    construction): the ``step`` column of ``trace.events`` (and ``trace.memory``) then says which iteration of
    :func:`iteration_ranges` an event belongs to, as it says which ``ProfilerStep#N`` it belongs to otherwise,
    so every per-step analysis (critical path, advisor rules, what-if) sees the same steps as
    :func:`nbprof.analysis.steps.step_windows`.

    Host iterations are assigned as ``ProfilerStep`` ranges are (:func:`nbprof.trace.steps.assign_steps`: rows by
    time, device rows by the correlation id of their launch); device iterations (``kernel_sequence``) the other
    way round: device rows by time, host rows by the correlation id of the device row they launched.

    Changes nothing when an event already has a step (>= 0: the source's ``ProfilerStep#N``/NVTX step ranges),
    when nothing repeats, or when the events frame lacks a column of ``nbprof.trace.schema.EVENT_COLUMNS``.
    When it assigns, ``trace.meta.extra["steps_detected"]`` is the source's name (:data:`SOURCES`): the steps are
    not the source's own step ranges.
    """
    ev = trace.events
    if not isinstance(ev, pd.DataFrame) or not len(ev) or not set(schema.EVENT_COLUMNS) <= set(ev.columns):
        return
    if (ev["step"].to_numpy() >= 0).any():
        return
    r = iteration_ranges(trace)
    if not len(r):
        return
    mem = trace.memory if isinstance(trace.memory, pd.DataFrame) and "ts_ns" in trace.memory.columns else None
    dev = ev["device"].to_numpy() >= 0
    src = step_source(trace)
    if src.side == "device":
        assign_steps(ev, r, memory=mem, timed=dev, correlated=~dev)
    else:
        assign_steps(ev, r, memory=mem)
    extra = getattr(trace.meta, "extra", None)
    if isinstance(extra, dict):
        extra["steps_detected"] = src.source
