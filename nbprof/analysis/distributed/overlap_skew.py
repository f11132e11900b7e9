"""Compute/communication overlap, collective skew across ranks, the ZeRO-stage guess and memory per rank."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...trace import predicates as pred
from ...trace.model import Trace
from .. import _intervals as iv
from ..steps import step_times, step_windows
from ..utilization import _before_last_step
from .comms import _as_list, collectives

#: HTA's ``NCCL_COMPUTE_KERNEL_RE`` exclusion (communication, memcpy/memset, sync and MTIA ``dma*`` kernels are
#: not compute)
_HTA_NON_COMPUTE = re.compile(r"^(nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)|(dma)")


def _compute_intervals(trace: Trace, comm_tids: set[int], keep_corr: set[int] | None = None,
                       before_ns: int | None = None) -> iv.Intervals:
    ev = trace.events
    if trace.has_device:
        is_kernel = pred.is_kernel(ev)
        k = ev[is_kernel & ~pred.is_communication(ev, where="device")]
        # HTA's NCCL_COMPUTE_KERNEL_RE exclusion, kept verbatim for parity with get_comm_comp_overlap
        memlike = pred.name_mask(k["name"], _HTA_NON_COMPUTE.match)  # once per distinct name
        k = k[~memlike]
        if keep_corr is not None:
            k = k[k["correlation"].isin(keep_corr)]
        return iv.merge(k["ts_ns"].to_numpy(), (k["ts_ns"] + k["dur_ns"]).to_numpy())
    host = ev[pred.is_host_op(ev, annotations=False)]
    host = host[~host["tid"].isin(comm_tids)]
    if before_ns is not None:
        host = host[host["ts_ns"] < before_ns]
    is_comm = pred.name_mask(host["name"], lambda n: n.startswith("c10d::") or n == "record_param_comms")
    comm_ops = host[is_comm]
    cand = host[~is_comm]
    if len(comm_ops) and len(cand):
        cs = np.sort(comm_ops["ts_ns"].to_numpy())
        st = cand["ts_ns"].to_numpy()
        en = st + cand["dur_ns"].to_numpy()
        contains = np.searchsorted(cs, en, side="left") - np.searchsorted(cs, st, side="left") > 0
        cand = cand[~contains]
    comp = iv.merge(cand["ts_ns"].to_numpy(), (cand["ts_ns"] + cand["dur_ns"]).to_numpy())
    if len(comm_ops):
        comp = iv.subtract(comp, iv.merge(comm_ops["ts_ns"].to_numpy(),
                                          (comm_ops["ts_ns"] + comm_ops["dur_ns"]).to_numpy()))
    return comp


def overlap(traces: Trace | Iterable[Trace], *, until_last_step: bool = False) -> pd.DataFrame:
    """Compute/communication overlap and exposed communication per rank.

    Parameters
    ----------
    traces : Trace or iterable of Trace
    until_last_step : bool, default False
        Keep only what was launched before the last ``ProfilerStep`` starts -- HTA's default
        (``TraceAnalysis(include_last_profiler_step=False)``), for like-for-like comparisons with
        HTA's ``get_comm_comp_overlap``. No effect with fewer than two steps.

    Returns
    -------
    pandas.DataFrame
        ``rank, comm_ns`` (union of collective execution intervals), ``compute_ns`` (union of computation,
        see module docstring), ``overlap_ns`` (their intersection), ``exposed_comm_ns = comm_ns -
        overlap_ns``, ``comm_comp_overlap_ratio = overlap_ns / comm_ns`` (HTA's
        ``comp_comm_overlap_ratio``; NaN without communication), ``exposed_comm_ratio`` (exposed over
        the trace span), ``span_ns``, ``basis`` ("gpu_kernels" or "cpu_ops").
    """
    rows = []
    for t in _as_list(traces):
        c = collectives(t)
        last, keep = _before_last_step(t) if until_last_step else (None, None)
        if len(c) and last is not None:
            gpu_rows = c["device"] >= 0
            c = c[(gpu_rows & c["correlation"].isin(keep)) | (~gpu_rows & (c["ts_ns"] < last))]
        comm = iv.merge(c["ts_ns"].to_numpy(np.int64), (c["ts_ns"] + c["dur_ns"]).to_numpy(np.int64)) if len(c) else iv.empty()
        comm_tids = set(int(x) for x in c.loc[c["device"] < 0, "tid"]) if len(c) else set()
        comp = _compute_intervals(t, comm_tids, keep, last)
        ov = iv.total_ns(iv.intersect(comm, comp))
        cn = iv.total_ns(comm)
        span = t.duration_ns
        rows.append(dict(rank=t.meta.rank, comm_ns=cn, compute_ns=iv.total_ns(comp), overlap_ns=ov,
                         exposed_comm_ns=cn - ov, comm_comp_overlap_ratio=ov / cn if cn else float("nan"),
                         exposed_comm_ratio=(cn - ov) / span if span else float("nan"), span_ns=span,
                         basis="gpu_kernels" if t.has_device else "cpu_ops"))
    return pd.DataFrame(rows, columns=["rank", "comm_ns", "compute_ns", "overlap_ns", "exposed_comm_ns",
                                       "comm_comp_overlap_ratio", "exposed_comm_ratio", "span_ns", "basis"])


_STEP_BREAKDOWN_COLUMNS = ["rank", "step", "step_ns", "compute_ns", "overlapped_comm_ns", "exposed_comm_ns", "idle_ns",
                           "basis"]


def step_breakdown(traces: Trace | Iterable[Trace]) -> pd.DataFrame:
    """Per rank and ``ProfilerStep``: computation, overlapped and exposed communication, idle.

    The categories of the PyTorch TensorBoard plugin's Distributed view ("Computation", "Overlapping",
    "Communication", "Other"; ``tb_plugin/torch_tb_profiler``, 0.4.3), on :func:`overlap`'s basis: in each
    step window, ``comm`` = the union of collective executions (:func:`collectives`), ``comp`` = the union
    of computation (GPU kernels that are not communication; on CPU traces host ops outside the
    communication threads that neither are nor contain ``c10d::`` calls);
    ``overlapped_comm_ns = |comm ∩ comp|``, ``compute_ns = |comp| - overlapped``, ``exposed_comm_ns =
    |comm| - overlapped``, ``idle_ns`` = the rest of the window.

    Returns
    -------
    pandas.DataFrame
        One row per rank and step: ``rank, step, step_ns`` (the step window,
        :func:`nbprof.analysis.steps.step_windows`), ``compute_ns, overlapped_comm_ns, exposed_comm_ns,
        idle_ns`` (int64 ns; they sum to ``step_ns``), ``basis`` ("gpu_kernels" or "cpu_ops"). Traces without
        host events give no rows (empty, with these columns).
    """
    rows = []
    for t in _as_list(traces):
        steps = step_windows(t)
        if steps.empty:
            continue
        c = collectives(t)
        comm = iv.merge(c["ts_ns"].to_numpy(np.int64), (c["ts_ns"] + c["dur_ns"]).to_numpy(np.int64)) if len(c) else iv.empty()
        comm_tids = set(int(x) for x in c.loc[c["device"] < 0, "tid"]) if len(c) else set()
        comp = _compute_intervals(t, comm_tids)
        both = iv.intersect(comm, comp)
        basis = "gpu_kernels" if t.has_device else "cpu_ops"
        s0 = steps["start_ns"].to_numpy(np.int64)
        s1 = steps["end_ns"].to_numpy(np.int64)
        c_in = iv.overlap_with_windows(comm, s0, s1)
        p_in = iv.overlap_with_windows(comp, s0, s1)
        b_in = iv.overlap_with_windows(both, s0, s1)
        for i, st in enumerate(steps["step"].to_numpy(np.int64)):
            n = int(s1[i] - s0[i])
            cn, pn, bn = int(c_in[i]), int(p_in[i]), int(b_in[i])
            rows.append(dict(rank=int(t.meta.rank), step=int(st), step_ns=n, compute_ns=pn - bn, overlapped_comm_ns=bn,
                             exposed_comm_ns=cn - bn, idle_ns=n - (cn + pn - bn), basis=basis))
    out = pd.DataFrame(rows, columns=_STEP_BREAKDOWN_COLUMNS)
    for k in _STEP_BREAKDOWN_COLUMNS[:-1]:
        out[k] = out[k].astype(np.int64)
    return out


def collective_skew(traces: Sequence[Trace]) -> pd.DataFrame:
    """Arrival skew of matched collectives across ranks.

    Instances and arrivals are :func:`nbprof.analysis.distributed.wait_transfer`'s (its one definition):
    the k-th call of a collective in a process group on one rank is matched with the k-th on the others,
    and a rank *arrives* when its collective starts executing (the NCCL kernel's start; the ``gloo:<op>``
    annotation's), on the absolute clock (``meta.origin_ns``, Kineto ``baseTimeNanoseconds``; clocks of
    different hosts assumed synchronised). The last rank to arrive is the one the others wait for.

    Returns
    -------
    pandas.DataFrame
        ``collective, pg_name, k, ranks, first_rank, last_rank, spread_ns`` (last minus first arrival,
        int64 ns) and one ``lag_ns_r{R}`` column per rank (arrival minus the first arrival). Only instances
        seen on every rank compared; empty when fewer than two ranks have an absolute origin.
    """
    from .waits import wait_transfer

    cols = ["collective", "pg_name", "k", "ranks", "first_rank", "last_rank", "spread_ns"]
    wt = wait_transfer(list(traces))
    if wt.empty:
        return pd.DataFrame(columns=cols)
    piv = wt.pivot_table(index=["collective", "pg_name", "k"], columns="rank", values="arrival_abs_ns",
                         aggfunc="first").dropna()
    if piv.empty or piv.shape[1] < 2:
        return pd.DataFrame(columns=cols)
    vals = piv.to_numpy(dtype=np.int64)
    first = vals.min(axis=1)
    out = pd.DataFrame({
        "collective": piv.index.get_level_values(0),
        "pg_name": piv.index.get_level_values(1),
        "k": piv.index.get_level_values(2).astype(int),
        "ranks": vals.shape[1],
        "first_rank": piv.columns.to_numpy()[vals.argmin(axis=1)],
        "last_rank": piv.columns.to_numpy()[vals.argmax(axis=1)],
        "spread_ns": (vals.max(axis=1) - first).astype(np.int64),
    })
    for j, r in enumerate(piv.columns):
        out[f"lag_ns_r{int(r)}"] = (vals[:, j] - first).astype(np.int64)
    return out.sort_values(["collective", "pg_name", "k"]).reset_index(drop=True)


def skew(traces: Sequence[Trace], *, recurrence: float = 0.5) -> pd.DataFrame:
    """Per-rank skew, with the straggler verdict of :func:`nbprof.analysis.distributed.stragglers`.

    Who is a straggler has one definition, :func:`~nbprof.analysis.distributed.stragglers`' (the rank
    that causes the most of the others' wait, in more than ``recurrence`` of the steps); this frame
    reports it beside the arrival statistics of :func:`collective_skew` (the same arrivals).

    Parameters
    ----------
    traces : sequence of Trace
        One per rank.
    recurrence : float
        Passed to :func:`~nbprof.analysis.distributed.stragglers`.

    Returns
    -------
    pandas.DataFrame
        ``rank, steps, step_mean_ns`` (:func:`nbprof.analysis.steps.step_times`), ``step_mean_skew_ns`` (its mean step
        minus the fastest rank's), ``comm_ns, exposed_comm_ns`` (from :func:`overlap`),
        ``matched_collectives``, ``last_arrival_count``, ``last_arrival_ratio``, ``mean_lag_ns``
        (mean arrival lag behind the first rank, see :func:`collective_skew`), ``caused_wait_ns`` (the
        others' wait at the instances it arrived last at, int64 ns), ``straggler`` (bool, from
        :func:`~nbprof.analysis.distributed.stragglers`).
    """
    from .waits import stragglers, wait_transfer

    traces = list(traces)
    ov = overlap(traces).set_index("rank")
    wt = wait_transfer(traces)
    cs = collective_skew(traces)
    sg = stragglers(wt, recurrence=recurrence).set_index("rank")
    rows = []
    for t in traces:
        st = step_times(t)
        r = t.meta.rank
        lagcol = f"lag_ns_r{r}"
        nmatch = len(cs) if lagcol in cs else 0
        last = int((cs["last_rank"] == r).sum()) if nmatch else 0
        rows.append(dict(
            rank=r, steps=len(st), step_mean_ns=float(st.mean()) if len(st) else float("nan"),
            comm_ns=int(ov.loc[r, "comm_ns"]) if r in ov.index else 0,
            exposed_comm_ns=int(ov.loc[r, "exposed_comm_ns"]) if r in ov.index else 0,
            matched_collectives=nmatch, last_arrival_count=last,
            last_arrival_ratio=last / nmatch if nmatch else float("nan"),
            mean_lag_ns=float(cs[lagcol].mean()) if nmatch else float("nan"),
            caused_wait_ns=int(sg.loc[r, "caused_wait_ns"]) if r in sg.index else 0,
            straggler=bool(sg.loc[r, "straggler"]) if r in sg.index else False,
        ))
    df = pd.DataFrame(rows, columns=["rank", "steps", "step_mean_ns", "comm_ns", "exposed_comm_ns",
                                     "matched_collectives", "last_arrival_count", "last_arrival_ratio",
                                     "mean_lag_ns", "caused_wait_ns", "straggler"])
    df.insert(3, "step_mean_skew_ns", df["step_mean_ns"] - df["step_mean_ns"].min())
    df["straggler"] = df["straggler"].astype(bool)
    return df


@dataclass
class ZeroPattern:
    """Result of :func:`zero_stage_pattern`.

    Attributes
    ----------
    stage : str
        ``"zero3"`` (parameters all-gathered per module every step + gradients reduce-scattered),
        ``"zero1_or_2"`` (gradients all-reduced or reduce-scattered, then the updated partitions
        all-gathered once per step), ``"ddp_or_zero0"`` (only all-reduce), ``"unknown"``.
    per_step : pandas.DataFrame
        Calls per step of each collective (``step`` index, one column per collective).
    evidence : dict
        Mean calls per step of all_gather / reduce_scatter / all_reduce families.
    """

    stage: str
    per_step: pd.DataFrame
    evidence: dict[str, Any] = field(default_factory=dict)


def zero_stage_pattern(trace: Trace) -> ZeroPattern:
    """Guess the ZeRO stage from the collectives issued per ProfilerStep.

    DeepSpeed's patterns (DeepSpeed 0.19.8 on 2 ranks, the comms-logger samples in
    ../shared/notes/samples): stages 1 and 2 issue per step one gradient ``all_reduce`` (bucketed), a
    scalar ``all_reduce`` (grad norm) and one ``all_gather_into_tensor`` of the updated partitions;
    stage 3 gathers parameters per module (several ``all_gather_into_tensor`` per step, forward and
    backward) and ``reduce_scatter_tensor``\\ s the gradients. Stages 1 and 2 differ in when gradients
    are reduced, not in which collectives, so they are reported together.
    """
    c = collectives(trace)
    c = c[c["step"] >= 0] if len(c) else c
    if c.empty:
        return ZeroPattern("unknown", pd.DataFrame(), {})
    per = c.groupby(["step", "collective"]).size().unstack(fill_value=0)
    fam = c.groupby(["step", "family"]).size().unstack(fill_value=0)
    mean = {f: float(fam[f].mean()) if f in fam else 0.0 for f in ("all_gather", "reduce_scatter", "all_reduce")}
    rs_api = any("reduce_scatter" in str(x) for x in per.columns)
    ag = mean["all_gather"]
    if ag >= 2 and (rs_api or mean["reduce_scatter"] > 0):
        stage = "zero3"
    elif ag >= 1 and (mean["all_reduce"] > 0 or mean["reduce_scatter"] > 0):
        stage = "zero1_or_2"
    elif mean["all_reduce"] > 0 and ag == 0:
        stage = "ddp_or_zero0"
    else:
        stage = "unknown"
    return ZeroPattern(stage, per, dict(mean_calls_per_step=mean, reduce_scatter_called=rs_api))


def memory_per_rank(traces: Trace | Iterable[Trace]) -> pd.DataFrame:
    """Peak memory per rank and device from each trace's ``[memory]`` events (``profile_memory=True``).

    Returns
    -------
    pandas.DataFrame
        ``rank, device_type, device, peak_allocated_bytes, peak_reserved_bytes`` (from
        :func:`nbprof.analysis.memory.memory_peak`); ranks without memory events are absent.
    """
    from ..memory import memory_peak

    rows = []
    for t in _as_list(traces):
        mp = memory_peak(t)
        for _, r in mp.iterrows():
            rows.append(dict(rank=t.meta.rank, device_type=int(r["device_type"]), device=int(r["device"]),
                             peak_allocated_bytes=int(r["peak_allocated_bytes"]),
                             peak_reserved_bytes=int(r["peak_reserved_bytes"])))
    return pd.DataFrame(rows, columns=["rank", "device_type", "device", "peak_allocated_bytes", "peak_reserved_bytes"])
