"""Compute/communication overlap, collective skew across ranks, the ZeRO-stage guess and memory per rank."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...trace.model import Trace
from .. import _intervals as iv
from .comms import collectives
from .reductions import comm_compute, intersect, job_reductions, rank_arrays
from .waits import stragglers, wait_transfer

_OVERLAP_COLUMNS = ["rank", "comm_ns", "compute_ns", "overlap_ns", "exposed_comm_ns", "comm_comp_overlap_ratio",
                    "exposed_comm_ratio", "span_ns", "basis"]


def overlap(traces: Any, *, until_last_step: bool = False) -> pd.DataFrame:
    """Compute/communication overlap and exposed communication per rank.

    Parameters
    ----------
    traces : Trace, iterable of Trace, or mapping of table name to frame
        The ranks' traces or their concatenated reductions (``rank_info``, ``collectives``, ``compute``;
        :mod:`~nbprof.analysis.distributed.reductions`).
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
    red = job_reductions(traces, ("rank_info", "collectives", "compute"))
    sets = comm_compute(red, until_last_step=until_last_step)
    rows = []
    for info in red["rank_info"].itertuples(index=False):
        r = int(info.rank)
        comm, comp = sets[r]
        ov = iv.total_ns(intersect(comm, comp))
        cn = iv.total_ns(comm)
        span = int(info.span_ns)
        rows.append(dict(rank=r, comm_ns=cn, compute_ns=iv.total_ns(comp), overlap_ns=ov,
                         exposed_comm_ns=cn - ov, comm_comp_overlap_ratio=ov / cn if cn else float("nan"),
                         exposed_comm_ratio=(cn - ov) / span if span else float("nan"), span_ns=span,
                         basis="gpu_kernels" if info.has_device else "cpu_ops"))
    return pd.DataFrame(rows, columns=_OVERLAP_COLUMNS)


_STEP_BREAKDOWN_COLUMNS = ["rank", "step", "step_ns", "compute_ns", "overlapped_comm_ns", "exposed_comm_ns", "idle_ns",
                           "basis"]


def step_breakdown(traces: Any) -> pd.DataFrame:
    """Per rank and ``ProfilerStep``: computation, overlapped and exposed communication, idle.

    The categories of the PyTorch TensorBoard plugin's Distributed view ("Computation", "Overlapping",
    "Communication", "Other"; ``tb_plugin/torch_tb_profiler``, 0.4.3), on :func:`overlap`'s basis: in each
    step window, ``comm`` = the union of collective executions (:func:`collectives`), ``comp`` = the union
    of computation (GPU kernels that are not communication; on CPU traces host ops outside the
    communication threads that neither are nor contain ``c10d::`` calls);
    ``overlapped_comm_ns = |comm ∩ comp|``, ``compute_ns = |comp| - overlapped``, ``exposed_comm_ns =
    |comm| - overlapped``, ``idle_ns`` = the rest of the window.

    Parameters
    ----------
    traces : Trace, iterable of Trace, or mapping of table name to frame
        The ranks' traces or their concatenated reductions (``rank_info``, ``steps``, ``collectives``,
        ``compute``).

    Returns
    -------
    pandas.DataFrame
        One row per rank and step: ``rank, step, step_ns`` (the step window,
        :func:`nbprof.analysis.steps.step_windows`), ``compute_ns, overlapped_comm_ns, exposed_comm_ns,
        idle_ns`` (int64 ns; they sum to ``step_ns``), ``basis`` ("gpu_kernels" or "cpu_ops"). Traces without
        host events give no rows (empty, with these columns).
    """
    red = job_reductions(traces, ("rank_info", "steps", "collectives", "compute"))
    sets = comm_compute(red)
    steps_of = rank_arrays(red["steps"], ("step", "start_ns", "end_ns"))
    cols: dict[str, list[np.ndarray]] = {c: [] for c in _STEP_BREAKDOWN_COLUMNS}
    for info in red["rank_info"].itertuples(index=False):
        r = int(info.rank)
        steps = steps_of.get(r)
        if steps is None:
            continue
        comm, comp = sets[r]
        both = intersect(comm, comp)
        basis = "gpu_kernels" if info.has_device else "cpu_ops"
        s0 = steps["start_ns"].astype(np.int64)
        s1 = steps["end_ns"].astype(np.int64)
        cn = iv.overlap_with_windows(comm, s0, s1)
        pn = iv.overlap_with_windows(comp, s0, s1)
        bn = iv.overlap_with_windows(both, s0, s1)
        n = s1 - s0
        for k, v in (("rank", np.full(len(n), r, dtype=np.int64)), ("step", steps["step"].astype(np.int64)),
                     ("step_ns", n), ("compute_ns", pn - bn), ("overlapped_comm_ns", bn),
                     ("exposed_comm_ns", cn - bn), ("idle_ns", n - (cn + pn - bn))):
            cols[k].append(v)
        cols["basis"].append(np.full(len(n), basis, dtype=object))
    if not cols["rank"]:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "basis" else "int64") for c in _STEP_BREAKDOWN_COLUMNS})
    out = pd.DataFrame({k: np.concatenate(v) for k, v in cols.items()})
    return out.astype({k: np.int64 for k in _STEP_BREAKDOWN_COLUMNS[:-1]})


def collective_skew(traces: Any) -> pd.DataFrame:
    """Arrival skew of matched collectives across ranks.

    Instances and arrivals are :func:`nbprof.analysis.distributed.wait_transfer`'s (its one definition):
    the k-th call of a collective in a process group on one rank is matched with the k-th on the others,
    and a rank *arrives* when its collective starts executing (the NCCL kernel's start; the ``gloo:<op>``
    annotation's), on the absolute clock (``meta.origin_ns``, Kineto ``baseTimeNanoseconds``; clocks of
    different hosts assumed synchronised). The last rank to arrive is the one the others wait for.

    Parameters
    ----------
    traces : sequence of Trace, or mapping of table name to frame
        One per rank, or their concatenated reductions (``rank_info``, ``collectives``).

    Returns
    -------
    pandas.DataFrame
        ``collective, pg_name, k, ranks, first_rank, last_rank, spread_ns`` (last minus first arrival,
        int64 ns) and one ``lag_ns_r{R}`` column per rank (arrival minus the first arrival). Only instances
        seen on every rank compared; empty when fewer than two ranks have an absolute origin.
    """
    cols = ["collective", "pg_name", "k", "ranks", "first_rank", "last_rank", "spread_ns"]
    wt = traces if isinstance(traces, pd.DataFrame) else wait_transfer(traces)
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
    lags = pd.DataFrame((vals - first[:, None]).astype(np.int64), columns=[f"lag_ns_r{int(r)}" for r in piv.columns])
    out = pd.concat([out, lags], axis=1)
    return out.sort_values(["collective", "pg_name", "k"]).reset_index(drop=True)


def skew(traces: Any, *, recurrence: float = 0.5) -> pd.DataFrame:
    """Per-rank skew, with the straggler verdict of :func:`nbprof.analysis.distributed.stragglers`.

    Who is a straggler has one definition, :func:`~nbprof.analysis.distributed.stragglers`' (the rank
    that causes the most of the others' wait, in more than ``recurrence`` of the steps); this frame
    reports it beside the arrival statistics of :func:`collective_skew` (the same arrivals).

    Parameters
    ----------
    traces : sequence of Trace, or mapping of table name to frame
        One per rank, or their concatenated reductions (``rank_info``, ``steps``, ``collectives``,
        ``compute``).
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
    red = job_reductions(traces, ("rank_info", "steps", "collectives", "compute"))
    ov = overlap(red).set_index("rank")
    wt = wait_transfer(red)
    cs = collective_skew(wt)
    sg = stragglers(wt, recurrence=recurrence).set_index("rank")
    st = red["steps"].groupby("rank")["step_ns"].agg(["size", "mean"])
    n_steps, step_mean = st["size"].to_dict(), st["mean"].to_dict()
    lasts = cs["last_rank"].value_counts().to_dict() if len(cs) else {}
    lag_mean = cs.filter(like="lag_ns_r").mean().to_dict() if len(cs) else {}
    comm, exposed = ov["comm_ns"].to_dict(), ov["exposed_comm_ns"].to_dict()
    caused, strag = sg["caused_wait_ns"].to_dict(), sg["straggler"].to_dict()
    rows = []
    for r in red["rank_info"]["rank"].astype(int).tolist():
        lagcol = f"lag_ns_r{r}"
        nmatch = len(cs) if lagcol in lag_mean else 0
        last = int(lasts.get(r, 0)) if nmatch else 0
        ns = int(n_steps.get(r, 0))
        rows.append(dict(
            rank=r, steps=ns, step_mean_ns=float(step_mean[r]) if ns else float("nan"),
            comm_ns=int(comm.get(r, 0)), exposed_comm_ns=int(exposed.get(r, 0)),
            matched_collectives=nmatch, last_arrival_count=last,
            last_arrival_ratio=last / nmatch if nmatch else float("nan"),
            mean_lag_ns=float(lag_mean[lagcol]) if nmatch else float("nan"),
            caused_wait_ns=int(caused.get(r, 0)), straggler=bool(strag.get(r, False)),
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


def zero_stage_pattern(trace: Trace | pd.DataFrame) -> ZeroPattern:
    """Guess the ZeRO stage from the collectives issued per ProfilerStep.

    DeepSpeed's patterns (DeepSpeed 0.19.8 on 2 ranks, the comms-logger samples in
    ../shared/notes/samples): stages 1 and 2 issue per step one gradient ``all_reduce`` (bucketed), a
    scalar ``all_reduce`` (grad norm) and one ``all_gather_into_tensor`` of the updated partitions;
    stage 3 gathers parameters per module (several ``all_gather_into_tensor`` per step, forward and
    backward) and ``reduce_scatter_tensor``\\ s the gradients. Stages 1 and 2 differ in when gradients
    are reduced, not in which collectives, so they are reported together.

    ``trace`` is one rank's trace or its collectives (:func:`collectives`, or the rank's rows of the
    ``collectives`` reduction table: ``step, collective, family`` are read).
    """
    c = trace if isinstance(trace, pd.DataFrame) else collectives(trace)
    c = c[c["step"] >= 0] if len(c) else c
    if c.empty:
        return ZeroPattern("unknown", pd.DataFrame(), {})
    per = c.groupby(["step", "collective"]).size().unstack(fill_value=0)
    fam = c.groupby(["step", "family"]).size().unstack(fill_value=0)
    mean = {f: float(fam[f].mean()) if f in fam else 0.0 for f in _ZERO_FAMILIES}
    rs_api = any("reduce_scatter" in str(x) for x in per.columns)
    return ZeroPattern(_zero_stage(mean, rs_api), per, dict(mean_calls_per_step=mean, reduce_scatter_called=rs_api))


_ZERO_FAMILIES = ("all_gather", "reduce_scatter", "all_reduce")


def _zero_stage(mean: dict[str, float], rs_api: bool) -> str:
    """The stage rule of :func:`zero_stage_pattern` from the mean calls per step of each family."""
    ag = mean["all_gather"]
    if ag >= 2 and (rs_api or mean["reduce_scatter"] > 0):
        return "zero3"
    if ag >= 1 and (mean["all_reduce"] > 0 or mean["reduce_scatter"] > 0):
        return "zero1_or_2"
    if mean["all_reduce"] > 0 and ag == 0:
        return "ddp_or_zero0"
    return "unknown"


def zero_stages(traces: Any) -> dict[int, str]:
    """:func:`zero_stage_pattern`'s ``stage`` of every rank at once (rank -> stage, in the reductions' rank
    order), from the traces or the job's reductions (``rank_info``, ``collectives``)."""
    red = job_reductions(traces, ("rank_info", "collectives"))
    c = red["collectives"]
    c = c[c["step"] >= 0]
    fam = c.groupby(["rank", "step", "family"]).size().unstack(fill_value=0)
    mean = fam.groupby(level="rank").mean()
    rs_api = c["collective"].astype(str).str.contains("reduce_scatter", regex=False).groupby(c["rank"]).any()
    out = {}
    for r in red["rank_info"]["rank"].astype(int).tolist():
        if r not in mean.index:
            out[r] = "unknown"
            continue
        m = {f: float(mean.loc[r, f]) if f in mean.columns else 0.0 for f in _ZERO_FAMILIES}
        out[r] = _zero_stage(m, bool(rs_api.get(r, False)))
    return out


def memory_per_rank(traces: Any) -> pd.DataFrame:
    """Peak memory per rank and device from each trace's ``[memory]`` events (``profile_memory=True``).

    ``traces``: the ranks' traces or their concatenated reductions (the ``memory`` table).

    Returns
    -------
    pandas.DataFrame
        ``rank, device_type, device, peak_allocated_bytes, peak_reserved_bytes`` (from
        :func:`nbprof.analysis.memory.memory_peak`); ranks without memory events are absent.
    """
    return job_reductions(traces, ("memory",))["memory"].reset_index(drop=True)
