"""Wait vs transfer per collective across ranks, its summary, and the recurring stragglers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .reductions import job_reductions

_WT_COLUMNS: list[str] = ["collective", "k", "rank", "step", "ranks", "arrival_abs_ns", "last_arrival_abs_ns", "last_rank",
               "dur_ns", "wait_ns", "transfer_ns", "clock_offset_ns", "consistent", "pg_name"]


def _end_offsets(a: pd.DataFrame) -> dict[int, int]:
    """Per-rank clock offset from matched collectives: the median over instances of (own end - the lowest
    rank's end). A collective completes at about the same moment on every rank, whatever the arrivals."""
    end = a.assign(end=a["start_abs_ns"] + a["dur_ns"]).pivot_table(
        index=["collective", "pg", "k"], columns="rank", values="end", aggfunc="first")
    ref = end.columns.min()
    out = {}
    for r in end.columns:
        d = (end[r] - end[ref]).dropna()
        out[int(r)] = int(np.median(d.to_numpy())) if len(d) else 0
    return out


def wait_transfer(traces: Any, *, align: str = "none") -> pd.DataFrame:
    """Split each collective instance, per rank, into **waiting** for the last rank and **transfer**.

    The k-th executed call of a collective on one rank is matched with the k-th of the same collective
    on the others (as in :func:`collective_skew`). A rank *arrives* when its collective starts executing
    (the NCCL kernel's start, or the start of the ``gloo:<op>`` annotation on gloo's worker thread --
    :func:`collectives`' ``start_abs_ns``) on the absolute clock (``meta.origin_ns``, Kineto
    ``baseTimeNanoseconds``). No rank can finish before the last one has arrived, so

    - ``wait_ns = min(max(last_arrival - own_arrival, 0), dur_ns)`` -- time spent waiting for the
      slowest rank (tb-plugin's "Synchronizing");
    - ``transfer_ns = dur_ns - wait_ns`` -- the rest ("Data Transfer"); ``wait_ns + transfer_ns ==
      dur_ns`` always.

    Clocks of different hosts are assumed synchronised (NTP/PTP) unless ``align="end"``. A rank whose
    collective ended before the last rank even arrived is impossible on one clock: such rows have
    ``consistent`` False (host clocks apart, or instances mismatched) and their ``wait_ns`` is capped at
    ``dur_ns``.

    Parameters
    ----------
    traces : sequence of Trace, or mapping of table name to frame
        One per rank, or their concatenated reductions (:mod:`~nbprof.analysis.distributed.reductions`:
        ``rank_info``, ``collectives``); ranks without an absolute origin or without collectives are left out.
    align : {"none", "end"}
        ``"end"``: shift each rank's clock by the median, over matched instances, of its collective end
        minus the lowest rank's (collectives complete together on all ranks); the shift is
        ``clock_offset_ns``. Its error is the spread of completions (about a millisecond between gloo
        worker threads on a loaded CPU): for hosts whose clocks are apart by more than that.
        ``"none"`` (default): the Kineto clocks as they are.

    Returns
    -------
    pandas.DataFrame
        One row per collective instance and rank: ``collective, k`` (instance), ``rank``, ``step``
        (the rank's ProfilerStep, -1 outside), ``ranks`` (ranks matched), ``arrival_abs_ns``,
        ``last_arrival_abs_ns``, ``last_rank`` (the rank that arrived last), ``dur_ns, wait_ns,
        transfer_ns`` (int64 ns), ``clock_offset_ns`` (subtracted from the rank's clock; 0 unless
        ``align="end"``), ``consistent`` (bool, see above), ``pg_name`` (the process group, "" when the
        trace does not name it: the k-th call is counted per collective *and* process group, so data- and
        tensor-parallel groups are not mixed). Only instances seen on at least two ranks; empty (with these
        columns) otherwise.

    Raises
    ------
    ValueError
        Unknown ``align``.

    Sources: the "Synchronizing vs Data Transfer" split of the PyTorch TensorBoard profiler plugin
    (``tb_plugin/torch_tb_profiler/profiler/communication.py``); HTA issue #360.
    """
    if align not in ("none", "end"):
        msg = f"align must be 'none' or 'end', got {align!r}"
        raise ValueError(msg)
    red = job_reductions(traces, ("rank_info", "collectives"))
    info = red["rank_info"]
    c = red["collectives"]
    c = c[c["rank"].isin(info.loc[info["origin_ns"] >= 0, "rank"])]
    if c["rank"].nunique() < 2:
        return pd.DataFrame(columns=_WT_COLUMNS)
    c = c.assign(pg=c["pg_name"].fillna("").astype(str))
    # the k-th call of a collective in a process group, per rank (rows are in execution order per rank)
    c = c.assign(k=c.groupby(["rank", "collective", "pg"], sort=False).cumcount())
    a = c[["rank", "collective", "pg", "k", "step", "start_abs_ns", "dur_ns"]]
    a = a.drop_duplicates(["collective", "pg", "k", "rank"]).reset_index(drop=True)
    offsets = _end_offsets(a) if align == "end" else {}
    a["clock_offset_ns"] = a["rank"].map(lambda r: offsets.get(int(r), 0)).astype(np.int64)
    a["start_abs_ns"] = a["start_abs_ns"].astype(np.int64) - a["clock_offset_ns"]
    g = a.groupby(["collective", "pg", "k"], sort=False)
    a["ranks"] = g["rank"].transform("size").astype(np.int64)
    a = a[a["ranks"] >= 2].copy()
    if a.empty:
        return pd.DataFrame(columns=_WT_COLUMNS)
    g = a.groupby(["collective", "pg", "k"], sort=False)
    a["last_arrival_abs_ns"] = g["start_abs_ns"].transform("max").astype(np.int64)
    idx = g["start_abs_ns"].idxmax()
    last_rank = a.loc[idx, ["collective", "pg", "k", "rank"]].rename(columns={"rank": "last_rank"})
    a = a.merge(last_rank, on=["collective", "pg", "k"], how="left")
    dur = a["dur_ns"].to_numpy(np.int64)
    raw = np.clip(a["last_arrival_abs_ns"].to_numpy(np.int64) - a["start_abs_ns"].to_numpy(np.int64), 0, None)
    wait = np.minimum(raw, dur)
    out = pd.DataFrame({
        "collective": a["collective"].astype(str).to_numpy(),
        "k": a["k"].to_numpy(np.int64),
        "rank": a["rank"].to_numpy(np.int64),
        "step": a["step"].to_numpy(np.int64),
        "ranks": a["ranks"].to_numpy(np.int64),
        "arrival_abs_ns": a["start_abs_ns"].to_numpy(np.int64),
        "last_arrival_abs_ns": a["last_arrival_abs_ns"].to_numpy(np.int64),
        "last_rank": a["last_rank"].to_numpy(np.int64),
        "dur_ns": dur,
        "wait_ns": wait.astype(np.int64),
        "transfer_ns": (dur - wait).astype(np.int64),
        "clock_offset_ns": a["clock_offset_ns"].to_numpy(np.int64),
        "consistent": raw <= dur,
        "pg_name": a["pg"].to_numpy(),
    })
    return out.sort_values(["collective", "pg_name", "k", "rank"], kind="stable").reset_index(drop=True)


def wait_transfer_summary(wt: pd.DataFrame) -> pd.DataFrame:
    """Per rank and collective kind, from :func:`wait_transfer`'s frame.

    Returns
    -------
    pandas.DataFrame
        ``rank, collective, count, dur_ns, wait_ns, transfer_ns`` (int64 ns totals), ``wait_ratio``
        (wait over duration; NaN for zero duration), ``mean_wait_ns``.
    """
    cols = ["rank", "collective", "count", "dur_ns", "wait_ns", "transfer_ns", "wait_ratio", "mean_wait_ns"]
    if wt.empty:
        return pd.DataFrame(columns=cols)
    s = wt.groupby(["rank", "collective"], sort=True).agg(
        count=("k", "size"), dur_ns=("dur_ns", "sum"), wait_ns=("wait_ns", "sum"),
        transfer_ns=("transfer_ns", "sum"), mean_wait_ns=("wait_ns", "mean")).reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        s["wait_ratio"] = np.where(s["dur_ns"] > 0, s["wait_ns"] / s["dur_ns"].where(s["dur_ns"] > 0, 1), np.nan)
    return s[cols]


def stragglers(traces: Any, *, recurrence: float = 0.5) -> pd.DataFrame:
    """The rank the others wait for, step after step.

    In each step (the ``step`` of the instance on its last-arriving rank; instances outside a step form
    step -1), the wait each rank *causes* is the others' :func:`wait_transfer` ``wait_ns`` summed over the
    instances at which it arrived last; the step's straggler is the rank causing the most wait (none when
    nobody waited).

    Parameters
    ----------
    traces : sequence of Trace, the job's reductions (a mapping, see :func:`wait_transfer`), or the frame of
        :func:`wait_transfer`
    recurrence : float
        A rank is a ``straggler`` when it is the step's straggler in more than this fraction of steps.

    Returns
    -------
    pandas.DataFrame
        One row per rank: ``rank, steps`` (steps with matched collectives), ``straggler_steps`` (steps it
        was the straggler), ``recurrence`` (their fraction), ``longest_run`` (most consecutive steps as
        straggler), ``caused_wait_ns`` (others' wait it caused, int64 ns), ``own_wait_ns`` (its own wait),
        ``last_arrivals`` (instances it arrived last at), ``straggler`` (bool).
    """
    wt = traces if isinstance(traces, pd.DataFrame) else wait_transfer(traces)
    cols = ["rank", "steps", "straggler_steps", "recurrence", "longest_run", "caused_wait_ns", "own_wait_ns",
            "last_arrivals", "straggler"]
    if wt.empty:
        return pd.DataFrame(columns=cols)
    ranks = sorted(int(r) for r in wt["rank"].unique())
    keys = ["collective", "pg_name", "k"] if "pg_name" in wt.columns else ["collective", "k"]
    inst_step = wt[wt["rank"] == wt["last_rank"]].set_index(keys)["step"]
    w = wt.join(inst_step.rename("inst_step"), on=keys)
    others = w[w["rank"] != w["last_rank"]]
    caused = others.groupby(["inst_step", "last_rank"])["wait_ns"].sum().unstack(fill_value=0)
    steps = sorted(int(s) for s in w["inst_step"].unique())
    per_step: list[int | None] = []
    for s in steps:
        if s in caused.index and caused.loc[s].max() > 0:
            per_step.append(int(caused.loc[s].idxmax()))
        else:
            per_step.append(None)
    own = w.groupby("rank")["wait_ns"].sum()
    lasts = w[w["rank"] == w["last_rank"]].groupby("rank").size()
    total_caused = caused.sum(axis=0)
    rows = []
    for r in ranks:
        flags = [p == r for p in per_step]
        run = best = 0
        for f in flags:
            run = run + 1 if f else 0
            best = max(best, run)
        n = sum(flags)
        rows.append(dict(
            rank=r, steps=len(steps), straggler_steps=n, recurrence=n / len(steps) if steps else float("nan"),
            longest_run=best,
            caused_wait_ns=int(total_caused[r]) if r in total_caused.index else 0,
            own_wait_ns=int(own.get(r, 0)),
            last_arrivals=int(lasts.get(r, 0)),
        ))
    df = pd.DataFrame(rows, columns=cols[:-1])
    df["straggler"] = (len(ranks) > 1) & (df["recurrence"] > recurrence)
    return df
