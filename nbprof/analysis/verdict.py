"""The verdict: what bounds the average training step, in numbers.

Built on :func:`nbprof.analysis.steps.step_breakdown` (priority counting: an instant of a step belongs
to the first active role of Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec, so
every non-kernel part is time the GPU's compute does **not** hide) and
:func:`nbprof.analysis.utilization.gpu_utilization`. The eight breakdown columns are grouped into
six parts:

========================  ==========================================================
``gpu_compute``           ``kernel_ns`` (compute kernels)
``memcpy``                ``memcpy_ns + memset_ns`` (not hidden by kernels)
``communication``         ``communication_ns`` (exposed collectives)
``host``                  ``runtime_ns + cpu_exec_ns`` (CPU ops and runtime/launch calls, GPU idle)
``dataloader``            ``dataloader_ns`` (waiting for the next batch)
``idle``                  ``other_ns`` (neither host nor device active)
========================  ==========================================================

The **bound** is the largest stall (every part but ``gpu_compute``) when it takes at least
:data:`STALL_RATIO` of the step or more than the kernels; otherwise ``gpu_compute``. A stall of a
third of the step is what a fix removes, even when kernels run the other two thirds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.model import Trace
from . import steps as st
from .utilization import gpu_utilization

__all__ = ["BOUNDS", "PARTS", "STALL_RATIO", "Verdict", "Contributor", "verdict"]

#: part -> the step-breakdown columns it sums
PARTS: dict[str, tuple[str, ...]] = {
    "gpu_compute": ("kernel_ns",),
    "communication": ("communication_ns",),
    "memcpy": ("memcpy_ns", "memset_ns"),
    "host": ("runtime_ns", "cpu_exec_ns"),
    "dataloader": ("dataloader_ns",),
    "idle": ("other_ns",),
}
#: the bounds a verdict can name (the parts, plus ``none`` for a trace without steps)
BOUNDS = (*PARTS, "none")
#: a stall taking at least this share of the average step is the bound
STALL_RATIO = 0.25


@dataclass(frozen=True)
class Contributor:
    """An event name that makes up the bound: total duration inside the steps, count, and row ids."""

    name: str
    total_ns: int
    count: int
    row_ids: tuple[int, ...] = ()


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
        The largest event names of the bound (row ids are ``trace.events`` index labels, largest first).
    world_size : int
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
    if bound == "host":
        if runtime_first:
            return np.asarray(pred.is_runtime(ev))
        # host ops that are not the step itself or the DataLoader
        return np.asarray(host & ~pred.is_step_row(ev) & ~pred.name_mask(names, st._is_dataloader))
    return np.zeros(len(ev), dtype=bool)


def _contributors(trace: Trace, mask: np.ndarray, windows: pd.DataFrame, top: int) -> tuple[Contributor, ...]:
    ev = trace.events
    if not mask.any() or windows.empty:
        return ()
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    lo, hi = int(windows["start_ns"].min()), int(windows["end_ns"].max())
    m = mask & (end > lo) & (ts < hi)
    if not m.any():
        return ()
    dur = np.clip(np.minimum(end[m], hi) - np.maximum(ts[m], lo), 0, None)
    sub = pd.DataFrame({"name": ev["name"].astype(object).to_numpy()[m], "dur": dur, "row": ev.index.to_numpy()[m]})
    g = sub.groupby("name", sort=False)["dur"].agg(["sum", "count"]).sort_values("sum", ascending=False).head(top)
    out = []
    for name, r in g.iterrows():
        rows = sub[sub["name"] == name].nlargest(5, "dur")["row"]
        out.append(Contributor(str(name), int(r["sum"]), int(r["count"]), tuple(int(x) for x in rows)))
    return tuple(out)


def verdict(trace: Trace, *, breakdown: pd.DataFrame | None = None, top: int = 3) -> Verdict:
    """The bound of the average step, with its numbers and the events that make it up.

    Parameters
    ----------
    trace : nbprof.Trace
    breakdown : pandas.DataFrame, optional
        The steps to average (default ``steps.steady_breakdown(trace)``: the steady state, warm-up left out).
    top : int, default 3
        How many contributing event names to return.

    Returns
    -------
    Verdict
        ``bound="none"`` (zeros) when the trace has no host events to make a step of.
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
    stalls = {p: v for p, v in parts.items() if p != "gpu_compute"}
    top_stall = max(stalls, key=lambda p: stalls[p])
    if step_ns > 0 and (stalls[top_stall] >= STALL_RATIO * step_ns or stalls[top_stall] > parts["gpu_compute"]):
        bound = top_stall
    else:
        bound = "gpu_compute"
    runtime_first = float(avg["runtime_ns"]) >= float(avg["cpu_exec_ns"])
    mask = _bound_mask(trace, bound, runtime_first)
    win = bd[["start_ns", "end_ns"]]
    contrib = _contributors(trace, mask, win, top)
    ratio = parts[bound] / step_ns if step_ns > 0 else float("nan")
    return Verdict(bound, parts[bound], ratio, step_ns, int(len(bd)), parts, busy, has_device, contrib, ws)
