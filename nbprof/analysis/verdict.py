"""The verdict: what bounds the average training step, in numbers.

Built on :func:`nbprof.analysis.steps.step_breakdown` (priority counting: an instant of a step belongs
to the first active role of Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec, so
every non-kernel part is time the GPU's compute does **not** hide) and
:func:`nbprof.analysis.utilization.gpu_utilization`. The eight breakdown columns are grouped into
parts, two of them carved out of another part by what the time really is (issue 30):

========================  ==========================================================
``gpu_compute``           ``kernel_ns`` (compute kernels)
``memcpy``                ``memcpy_ns + memset_ns`` (not hidden by kernels)
``communication``         ``communication_ns`` (exposed collectives, gloo's host ops included)
``host``                  ``runtime_ns + cpu_exec_ns`` less ``sync_wait`` (host work while no device op runs;
                          on a CPU-only trace: the model's own operators, its compute)
``sync_wait``             the part of ``host`` spent blocked in a sync call (``aten::item``,
                          ``cudaStreamSynchronize``, a synchronous ``cudaMemcpy`` ...) while no device op runs: the
                          host *waits*, on work outside the window or another process, it does not work
``dataloader``            ``dataloader_ns`` (waiting for the next batch)
``python``                the part of ``other_ns`` covered by ``python_function`` frames (``with_stack=True``):
                          host work in Python outside any torch op (:attr:`Verdict.python_frame` names it)
``idle``                  the rest of ``other_ns``: no op, no frame (host code nothing names, or a sleep)
========================  ==========================================================

The **bound** is the part that the first ranked finding's fix shrinks (``Finding.part`` of the first finding with
:attr:`~nbprof.analysis.findings.Finding.ranked`, the advisor's one ranking: the largest predicted saving, at least
:data:`~nbprof.analysis.findings.MIN_SAVING_RATIO` of the step) when the part holds at least half of it; otherwise
the largest part. :attr:`Verdict.bound_reason` says why when the two differ. A part within
:data:`CLOSE_RATIO` of the bound's share is :attr:`Verdict.co_bound` (both are shown instead of a flip at a
threshold). A trace too short to judge (its steps together < :data:`MIN_PROFILED_NS`, or only the profiler's own events)
gets bound ``too_short``; one step gets :attr:`Verdict.caveat`. With several ranks, the straggler
(:func:`nbprof.analysis.distributed.stragglers`) is :attr:`Verdict.straggler`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.model import Trace
from ..trace.schema import USER_ANNOTATION
from ..units import fmt_pct_text as pct
from . import _intervals as iv
from . import pyframes
from . import steps as st
from .findings import MIN_SAVING_RATIO, Finding, rank, ranked_on, saving_on
from .operators import event_self_ns
from .utilization import gpu_utilization

__all__ = ["BOUNDS", "PARTS", "CLOSE_RATIO", "MIN_SAVING_RATIO", "MIN_PROFILED_NS", "Verdict", "Contributor",
           "Straggler", "verdict"]

#: part -> the step-breakdown columns it sums (``sync_wait`` and ``python`` are carved out of ``host`` and
#: ``other_ns``: see the module docstring)
PARTS: dict[str, tuple[str, ...]] = {
    "gpu_compute": ("kernel_ns",),
    "communication": ("communication_ns",),
    "memcpy": ("memcpy_ns", "memset_ns"),
    "host": ("runtime_ns", "cpu_exec_ns"),
    "sync_wait": (),
    "dataloader": ("dataloader_ns",),
    "python": (),
    "idle": ("other_ns",),
}
#: the bounds a verdict can name (the parts, ``too_short``, and ``none`` for a trace without steps)
BOUNDS = (*PARTS, "too_short", "none")
#: a part at least this fraction of the bound's share is shown with it ("host 41% / DataLoader 38%")
CLOSE_RATIO = 0.8
#: profiled steps that together last less than this are too short to judge (timer resolution, profiler overhead
#: per op); many short steps (a tiny batch, decode steps) together are not
MIN_PROFILED_NS = 1_000_000
#: host events of the profiler itself (a trace of only these has nothing of the job)
_PROFILER_NAMES = ("ProfilerStep#", "[memory]", "Activity Buffer Request", "cudaDeviceSynchronize", "[pgo]",
                   "Iteration Start", "Record Window End")


@dataclass(frozen=True)
class Contributor:
    """An event name that makes up the bound: its self time inside the steps (``self_ns``: each event's
    :func:`nbprof.analysis.operators.event_self_ns`, torch's "Self CPU" for a host op -- its children on its
    thread left out, ``python_functions=False``: torch 2.11's; a device op's duration; at most the part of it inside
    the steps), the number of its events, and the row ids of its longest ones. ``ProfilerStep#N`` ranges are never
    contributors, and nor is a user range (``record_function``) inside which another host event of the bound starts,
    on its thread or another: it wraps them (``## backward ##`` while the autograd thread runs the backward ops,
    ``DistributedDataParallel.forward``, ``Optimizer.step#...``)."""

    name: str
    self_ns: int
    count: int
    row_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Straggler:
    """The rank the others wait for (:func:`nbprof.analysis.distributed.stragglers`): ``rank``, the steps it was
    last in of ``steps``, and the wait it caused the others per step (ns)."""

    rank: int
    straggler_steps: int
    steps: int
    caused_wait_ns: float


@dataclass(frozen=True)
class Verdict:
    """What bounds the average step.

    Attributes
    ----------
    bound : str
        One of :data:`BOUNDS`.
    bound_ns : float
        The bound's share of the average step, ns (``gpu_compute``: the kernels' share).
    bound_ratio : float
        ``bound_ns / step_ns``.
    step_ns : float
        Average step, ns.
    steps : int
        Steps averaged.
    parts_ns : dict
        Part -> average ns per step (sums to ``step_ns``).
    gpu_busy_ratio : float
        Busy / span over all devices (NaN without device ops).
    has_device : bool
    contributors : tuple of Contributor
        The event names of the bound with the most self time (:class:`Contributor`; row ids are ``trace.events``
        index labels, longest first), largest first.
    world_size : int
    co_bound : str
        A part within :data:`CLOSE_RATIO` of the bound's share (shown with it), ``""`` when none.
    bound_reason : str
        Why the bound is not the largest part (the first finding's fix saves the most), or why there is none.
    caveat : str
        What limits the verdict (one step only), ``""`` when nothing does.
    python_frame : str
        The Python frame (``file.py(LINE): function``) that best names the ``python`` part, ``""`` without frames.
    sync_names : tuple of str
        The sync calls of the ``sync_wait`` part.
    straggler : Straggler or None
        With several ranks: the rank the others wait for.
    first_part : str
        The part the first finding's fix shrinks (``""``: no finding with a saving).
    first_rule : str
        The rule of that first finding (``step_io``, ``dataloader``...; ``""``: none): what the verdict's fix is.
    """

    bound: str
    bound_ns: float
    bound_ratio: float
    step_ns: float
    steps: int
    parts_ns: dict[str, float] = field(default_factory=dict)
    gpu_busy_ratio: float = float("nan")
    has_device: bool = False
    contributors: tuple[Contributor, ...] = ()
    world_size: int = 1
    co_bound: str = ""
    bound_reason: str = ""
    caveat: str = ""
    python_frame: str = ""
    sync_names: tuple[str, ...] = ()
    straggler: Straggler | None = None
    first_part: str = ""
    first_rule: str = ""

    def ratio(self, part: str) -> float:
        """Share of the average step of ``part`` (see :data:`PARTS`)."""
        return self.parts_ns.get(part, 0.0) / self.step_ns if self.step_ns > 0 else float("nan")


def _bound_mask(trace: Trace, bound: str, runtime_first: bool) -> np.ndarray:
    ev = trace.events
    names = ev["name"]
    is_kernel = pred.is_kernel(ev)
    is_comm_k = is_kernel & pred.is_communication(ev, where="device")
    host = pred.is_host_op(ev)
    if bound == "gpu_compute":
        return np.asarray(is_kernel & ~is_comm_k)
    if bound == "communication":
        comm_ops = set(st.NCCL_OP_NAMES + st.GLOO_OP_NAMES)
        return np.asarray(is_comm_k | (host & pred.name_mask(names, comm_ops.__contains__)))
    if bound == "memcpy":
        return np.asarray(pred.is_memcpy(ev) | pred.is_memset(ev))
    if bound == "dataloader":
        return np.asarray(host & pred.name_mask(names, st._is_dataloader))
    if bound == "sync_wait":
        from .rules_device import SYNC_MEMCPY
        from .rules_host import SYNC_NAMES

        sync = pred.name_mask(names, lambda n: n in SYNC_NAMES or SYNC_MEMCPY.match(n) is not None)
        return np.asarray(sync & (ev["device"].to_numpy() < 0))
    if bound == "host":
        if runtime_first:
            return np.asarray(pred.is_runtime(ev))
        # host ops that are not the step itself or the DataLoader
        return np.asarray(host & ~pred.is_step_row(ev) & ~pred.name_mask(names, st._is_dataloader))
    return np.zeros(len(ev), dtype=bool)


def _contributors(trace: Trace, mask: np.ndarray, windows: pd.DataFrame, top: int) -> tuple[Contributor, ...]:
    """The ``top`` event names of ``mask`` with the most self time inside the steps (see :class:`Contributor`)."""
    ev = trace.events
    mask = np.asarray(mask, dtype=bool) & ~np.asarray(pred.is_step_row(ev), dtype=bool)  # a step is no contributor
    if not mask.any() or windows.empty:
        return ()
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    lo, hi = int(windows["start_ns"].min()), int(windows["end_ns"].max())
    m = mask & (end > lo) & (ts < hi)
    if not m.any():
        return ()
    # self time (child ops on the same thread left out; Python frames are no part's contributors, so they are looked
    # through), never more than the part inside the steps
    own = np.minimum(event_self_ns(trace, python_functions=False),
                     np.clip(np.minimum(end, hi) - np.maximum(ts, lo), 0, None))
    # a user range inside which another of the bound's host events starts (on its thread or another: ``## backward ##``
    # while the autograd thread works) wraps them: they are the answer, not it
    is_range = m & np.asarray(pred.category_in(ev, (USER_ANNOTATION,)), dtype=bool)
    if is_range.any():
        starts = np.sort(ts[m & np.asarray(pred.is_host(ev), dtype=bool)])
        r = np.flatnonzero(is_range)
        inside = np.searchsorted(starts, end[r], side="left") - np.searchsorted(starts, ts[r], side="left")
        m[r[inside > 1]] = False  # itself, and at least one other
    sub = pd.DataFrame({"name": ev["name"].astype(object).to_numpy()[m], "dur": own[m], "row": ev.index.to_numpy()[m]})
    g = sub.groupby("name", sort=False)["dur"].agg(["sum", "count"]).sort_values("sum", ascending=False)
    g = g[g["sum"] > 0].head(top)
    out = []
    for name, r in g.iterrows():
        rows = sub[sub["name"] == name].nlargest(5, "dur")["row"]
        out.append(Contributor(str(name), int(r["sum"]), int(r["count"]), tuple(int(x) for x in rows)))
    return tuple(out)


def _carve(trace: Trace, bd: pd.DataFrame) -> tuple[float, float, tuple[str, ...], str]:
    """Mean ns per step of ``sync_wait`` (inside ``host``) and ``python`` (inside ``other_ns``), the sync call names,
    and the Python frame that best names the ``python`` time."""
    from .rules_device import SYNC_MEMCPY
    from .rules_host import SYNC_NAMES

    r = st.role_intervals(trace)["roles"]
    ws = bd["start_ns"].to_numpy(np.int64)
    we = bd["end_ns"].to_numpy(np.int64)
    steps_iv = iv.merge(ws, we)
    device = iv.union(iv.union(r["kernel_ns"], r["memcpy_ns"]), iv.union(r["memset_ns"], r["communication_ns"]))
    host_iv = iv.subtract(iv.union(r["runtime_ns"], r["cpu_exec_ns"]), device)
    host_iv = iv.subtract(host_iv, iv.subtract(r["dataloader_ns"], r["runtime_ns"]))
    ev = trace.events
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    sm = np.asarray(pred.name_mask(ev["name"], lambda n: n in SYNC_NAMES or SYNC_MEMCPY.match(n) is not None)
                    & (ev["device"].to_numpy() < 0), dtype=bool)
    sync_iv = iv.intersect(iv.intersect(iv.merge(ts[sm], end[sm]), host_iv), steps_iv)
    names = tuple(sorted({str(n) for n in ev["name"].astype(object).to_numpy()[sm]})) if sm.any() else ()
    covered = iv.union(iv.union(device, iv.union(r["runtime_ns"], r["cpu_exec_ns"])), r["dataloader_ns"])
    other = iv.subtract(steps_iv, covered)
    py_iv = iv.intersect(other, pyframes.coverage(trace))
    frame, _ = pyframes.top_frame(trace, py_iv) if py_iv[0].size else ("", 0)
    n = max(len(bd), 1)
    return iv.total_ns(sync_iv) / n, iv.total_ns(py_iv) / n, names, frame


def _too_short(trace: Trace, step_ns: float, steps: int) -> str:
    """Why the trace is too short to judge, ``""`` when it is not."""
    if step_ns * max(steps, 1) < MIN_PROFILED_NS:
        return (f"{steps} step{'s' if steps != 1 else ''} of {step_ns / 1e3:.0f} µs, under 1 ms in all: too short "
                "to judge")
    ev = trace.events
    host = pred.is_host_op(ev)
    own = pred.name_mask(ev["name"], lambda n: n.startswith(_PROFILER_NAMES))
    if not (host & ~own).any() and not pred.is_device_op(ev).any():
        return "the trace holds only the profiler's own events"
    return ""


def _straggler(ranks: Sequence[Trace] | None) -> Straggler | None:
    if ranks is None or len(ranks) < 2:
        return None
    from .distributed import stragglers

    try:
        s = stragglers(list(ranks))
    except (ValueError, KeyError):
        return None
    if s.empty or not s["straggler"].any():
        return None
    r = s[s["straggler"]].sort_values("caused_wait_ns", ascending=False).iloc[0]
    n = max(int(r["steps"]), 1)
    return Straggler(int(r["rank"]), int(r["straggler_steps"]), n, float(r["caused_wait_ns"]) / n)


def verdict(trace: Trace, *, breakdown: pd.DataFrame | None = None, top: int = 3,
            findings: Sequence[Finding] | None = None, ranks: Sequence[Trace] | None = None) -> Verdict:
    """The bound of the average step, with its numbers and the events that make it up.

    Parameters
    ----------
    trace : nbprof.Trace
    breakdown : pandas.DataFrame, optional
        The steps to average (default ``steps.steady_breakdown(trace)``: the steady state, warm-up left out).
        Given, the findings are ranked by their saving on these steps
        (:func:`nbprof.analysis.findings.rank` with ``steps``: one slow step of a window is judged by what its
        own fix saves, not by the window's mean).
    top : int, default 3
        How many contributing event names to return.
    findings : sequence of Finding, optional
        The advisor's ranked findings (default: ``advisor.advise(trace, ranks=ranks)``, memoised per trace):
        the bound is the part the first one's fix shrinks (see the module docstring).
    ranks : sequence of Trace, optional
        Every rank of the job (``trace`` among them): the straggler.

    Returns
    -------
    Verdict
        ``bound="none"`` (zeros) when the trace has no host events to make a step of; ``"too_short"`` for a trace
        too short to judge (``bound_reason`` says why).
    """
    bd = st.steady_breakdown(trace) if breakdown is None else breakdown
    util = gpu_utilization(trace)
    busy = float(util["busy_ns"].sum()) / float(util["span_ns"].sum()) if len(util) and util["span_ns"].sum() > 0 \
        else float("nan")
    ws = int(getattr(trace.meta, "world_size", 1) or 1)
    has_device = bool(len(util))
    if bd.empty:
        return Verdict("none", 0.0, float("nan"), 0.0, 0, {}, busy, has_device, (), ws)
    avg = st.breakdown_average(bd)
    step_ns = float(avg["step_ns"])
    parts = {p: float(sum(avg[c] for c in cols)) for p, cols in PARTS.items()}
    sync_ns, py_ns, sync_names, frame = _carve(trace, bd)
    sync_ns, py_ns = min(sync_ns, parts["host"]), min(py_ns, parts["idle"])
    parts["host"] -= sync_ns
    parts["sync_wait"] = sync_ns
    parts["idle"] -= py_ns
    parts["python"] = py_ns
    strag = _straggler(ranks)
    short = _too_short(trace, step_ns, int(len(bd)))
    caveat = "one step only: profile more steps for a stable answer" if len(bd) == 1 and not short else ""
    if short:
        return Verdict("too_short", 0.0, float("nan"), step_ns, int(len(bd)), parts, busy, has_device, (), ws,
                       bound_reason=short, straggler=strag)
    largest = max(parts, key=lambda p: parts[p])
    if findings is None:
        from .advisor import advise

        findings = advise(trace, ranks=tuple(ranks) if ranks is not None and len(ranks) > 1 else None)
    on = None if breakdown is None else [int(x) for x in bd["step"]]
    if on is not None:
        findings = rank(findings, steps=on, step_ns=step_ns)
    first = next((f for f in findings if ranked_on(f, on, step_ns)), None)
    first_part = first.part if first is not None and first.part in parts else ""
    bound, reason = largest, ""
    saving = float(saving_on(first, on) or 0) if first is not None else 0.0
    # the first finding names the bound when it saves a real share of the step and its part holds that time
    if first is not None and first_part and parts[first_part] >= 0.5 * saving:
        bound = first_part
        if bound != largest:
            reason = (f"{largest} takes more of the step, but the fix with the largest predicted saving "
                      f"({first.rule}) shrinks {bound}")
    elif first is None:
        reason = f"no finding is predicted to save {pct(MIN_SAVING_RATIO)} of the step: the bound is the largest part"
    elif first_part:  # the fix saves more than the time of its part: it saves by letting other work overlap
        reason = (f"the first fix ({first.rule}) is predicted to save {pct(saving / step_ns if step_ns else 0)} "
                  f"of the step, more than the {first_part} time it removes ({pct(parts[first_part] / step_ns, 1)}): "
                  f"it saves by letting other work overlap, so the bound is the largest part")
    close = sorted((p for p in parts if p != bound and parts[p] > 0
                    and CLOSE_RATIO * max(parts[p], parts[bound]) <= min(parts[p], parts[bound])),
                   key=lambda p: -parts[p])
    runtime_first = float(avg["runtime_ns"]) >= float(avg["cpu_exec_ns"])
    mask = _bound_mask(trace, bound, runtime_first)
    win = bd[["start_ns", "end_ns"]]
    contrib = _contributors(trace, mask, win, top)
    ratio = parts[bound] / step_ns if step_ns > 0 else float("nan")
    return Verdict(bound, parts[bound], ratio, step_ns, int(len(bd)), parts, busy, has_device, contrib, ws,
                   co_bound=close[0] if close else "", bound_reason=reason, caveat=caveat, python_frame=frame,
                   sync_names=sync_names, straggler=strag, first_part=first_part,
                   first_rule=first.rule if first is not None else "")
