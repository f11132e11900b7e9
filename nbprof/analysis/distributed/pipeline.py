"""Pipeline-parallel bubbles, the FSDP annotation pattern, and the ranks' aligned timeline."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...trace import predicates as pred
from ...trace.model import Trace
from .. import _intervals as iv
from .comms import collectives
from .reductions import compute_intervals, job_reductions
from .waits import wait_transfer

_PP_COLUMNS = ["rank", "step", "window_ns", "compute_ns", "bubble_ns", "p2p_wait_ns", "idle_ns", "bubble_ratio",
               "microbatches", "stages", "theory_ratio"]


#: microbatch computation annotations: ``Forward 3``/``Backward 3`` (torch.distributed.pipelining's single-stage
#: schedules, GPipe and 1F1B) and ``PP:<stage><F|B|I|W><mb>`` (its multi-stage action schedules)
_MB_COMPUTE = re.compile(r"^(?:(Forward|Backward) (\d+)|PP:\d+(F|B|I|W)(\d+))$")


def _microbatch_compute(trace: Trace) -> tuple[pd.DataFrame, iv.Intervals]:
    """(microbatch annotations with ``fwd`` and ``mb`` columns, blocking P2P inside them to subtract).

    The blocking part of P2P on the calling thread: ``c10d::send``/``recv_`` calls and the ``gloo:recv``
    (NCCL: none on the host; recv waits are device kernels, not computation) -- not ``gloo:send``, which
    spans the asynchronous send while computation goes on."""
    ev = trace.events
    names = ev["name"].astype(str)
    m = names.str.extract(_MB_COMPUTE)
    hit = m.notna().any(axis=1).to_numpy() & (ev["device"].to_numpy() < 0)
    ann = ev.loc[hit, ["ts_ns", "dur_ns", "name", "step"]].copy()
    mm = m[hit]
    ann["fwd"] = (mm[0] == "Forward").to_numpy() | (mm[2] == "F").to_numpy()
    ann["mb"] = mm[1].fillna(mm[3]).astype(int).to_numpy()
    block = ((names.str.match(r"^c10d::(?:send|recv|recv_any_source)_?$") | (names == "gloo:recv")).to_numpy()
             & (ev["device"].to_numpy() < 0))
    b = ev.loc[block]
    return ann, iv.merge(b["ts_ns"].to_numpy(np.int64), (b["ts_ns"] + b["dur_ns"]).to_numpy(np.int64))


def _p2p_intervals(trace: Trace) -> iv.Intervals:
    """Point-to-point communication of one rank: ``c10d::send``/``recv_`` calls, ``gloo:send``/``gloo:recv``
    annotations, NCCL ``SendRecv`` kernels (from :func:`collectives`)."""
    ev = trace.events
    names = ev["name"].astype(str)
    host = names.str.match(r"^c10d::(?:send|recv|recv_any_source)_?$").to_numpy() & (ev["device"].to_numpy() < 0)
    c = collectives(trace)
    p2p = c[c["collective"].isin(["send", "recv", "send_recv"]) | c["backend_name"].isin(["gloo:send", "gloo:recv"])]
    s = np.concatenate([ev.loc[host, "ts_ns"].to_numpy(np.int64), p2p["ts_ns"].to_numpy(np.int64)])
    e = np.concatenate([(ev.loc[host, "ts_ns"] + ev.loc[host, "dur_ns"]).to_numpy(np.int64),
                        (p2p["ts_ns"] + p2p["dur_ns"]).to_numpy(np.int64)])
    return iv.merge(s, e)


def _no_pipeline(reason: str) -> pd.DataFrame:
    out = pd.DataFrame(columns=_PP_COLUMNS)
    out.attrs["reason"] = reason
    return out


def pipeline_bubbles(traces: Sequence[Trace], *, microbatches: int | None = None) -> pd.DataFrame:
    """Pipeline-parallel bubbles per stage (rank) and step, against the schedule's theory.

    One trace per pipeline stage (one stage per rank). In each ``ProfilerStep`` the pipeline's window is
    the same for every stage: from the first computation start to the last computation end over all
    stages, on the absolute clock (``meta.origin_ns``). A stage's **bubble** is the window minus its own
    computation: the schedule's microbatch annotations (``Forward <i>``/``Backward <i>``, ``PP:<s>F<i>``...
    from ``torch.distributed.pipelining``) less the blocking P2P inside them (``c10d::send``/``recv_``,
    ``gloo:recv``); without them, device kernels that are not communication on GPU traces and host ops
    that neither are nor contain ``c10d::`` calls on CPU traces (:func:`overlap`'s basis). The bubble splits into
    ``p2p_wait_ns`` (covered by its point-to-point send/recv: ``c10d::send``/``recv_``, ``gloo:send``/
    ``gloo:recv``, NCCL ``SendRecv`` kernels, which mix transfer and waiting) and ``idle_ns`` (nothing ran).

    Theory for GPipe and 1F1B with ``p`` stages and ``m`` microbatches: bubble fraction
    ``(p - 1) / (m + p - 1)`` (Huang et al., GPipe, 2019; Narayanan et al., PipeDream-Flush/1F1B, 2021;
    Megatron-LM ``docs``), with equal-cost stages.

    Parameters
    ----------
    traces : sequence of Trace
        One per stage, ordered by rank (= stage).
    microbatches : int, optional
        ``m``; default the number of distinct forward microbatch indices annotated per step (what
        ``torch.distributed.pipelining`` schedules record); -1 and a NaN theory if neither.

    Returns
    -------
    pandas.DataFrame
        One row per rank and step: ``rank, step, window_ns, compute_ns, bubble_ns, p2p_wait_ns, idle_ns``
        (int64 ns; ``bubble_ns == p2p_wait_ns + idle_ns``), ``bubble_ratio = bubble_ns / window_ns``,
        ``microbatches, stages, theory_ratio``. Steps present on every stage only. Empty (with these
        columns) and the reason in ``attrs["reason"]`` when there is no pipeline to measure: fewer than
        two stages with an absolute origin, or no pipeline-parallel pattern (no microbatch annotation
        and no point-to-point send/recv on any rank: a data-parallel job's gaps are not pipeline bubbles).
    """
    ts = [t for t in traces if t.meta.origin_ns is not None]
    if len(ts) < 2:
        return _no_pipeline(f"{len(ts)} stage(s) with an absolute clock origin; a pipeline needs two")
    found = [(t, *_microbatch_compute(t), _p2p_intervals(t)) for t in ts]
    if not any(len(ann) or len(p2p[0]) for _t, ann, _b, p2p in found):
        return _no_pipeline("no pipeline-parallel pattern: no microbatch annotation (Forward <i>/Backward <i>, "
                            "PP:<s>F<i>) and no point-to-point send/recv on any of the "
                            f"{len(ts)} ranks")
    p = len(ts)
    per: dict[int, dict[int, tuple[iv.Intervals, iv.Intervals, int]]] = {}
    for t, ann, blocking, p2p in found:
        o = int(t.meta.origin_ns or 0)
        ev = t.events
        steps = ev[pred.is_step_row(ev)]
        if len(ann):  # the schedule's own microbatch annotations, less their blocking P2P
            comp = iv.subtract(iv.merge(ann["ts_ns"].to_numpy(np.int64),
                                        (ann["ts_ns"] + ann["dur_ns"]).to_numpy(np.int64)), blocking)
        else:
            comp = compute_intervals(t, set())
        fwd = ann[ann["fwd"]]
        d: dict[int, tuple[iv.Intervals, iv.Intervals, int]] = {}
        for _, st in steps.iterrows():
            s, e = int(st["ts_ns"]), int(st["ts_ns"] + st["dur_ns"])
            win = iv.merge(np.array([s]), np.array([e]))
            c = iv.intersect(comp, win)
            q = iv.intersect(p2p, win)
            nmb = int(fwd.loc[(fwd["ts_ns"] >= s) & (fwd["ts_ns"] < e), "mb"].nunique())
            d[int(st["step"])] = ((c[0] + o, c[1] + o), (q[0] + o, q[1] + o), nmb)
        per[int(t.meta.rank)] = d
    common = sorted(set.intersection(*(set(d) for d in per.values())))
    rows = []
    for step in common:
        starts = [per[r][step][0][0] for r in per if len(per[r][step][0][0])]
        ends = [per[r][step][0][1] for r in per if len(per[r][step][0][1])]
        if not starts:
            continue
        w0, w1 = int(min(x.min() for x in starts)), int(max(x.max() for x in ends))
        win = iv.merge(np.array([w0]), np.array([w1]))
        for r in sorted(per):
            comp, p2p, nmb = per[r][step]
            cn = iv.total_ns(comp)
            gaps = iv.subtract(win, comp)
            wait = iv.total_ns(iv.intersect(gaps, p2p))
            bubble = (w1 - w0) - cn
            m = microbatches if microbatches is not None else (nmb or None)
            rows.append(dict(rank=r, step=step, window_ns=w1 - w0, compute_ns=cn, bubble_ns=bubble,
                             p2p_wait_ns=wait, idle_ns=bubble - wait,
                             bubble_ratio=bubble / (w1 - w0) if w1 > w0 else float("nan"),
                             microbatches=m if m is not None else -1, stages=p,
                             theory_ratio=(p - 1) / (m + p - 1) if m else float("nan")))
    return pd.DataFrame(rows, columns=_PP_COLUMNS)


_FSDP_ANN = re.compile(r"^FSDP::(?:(pre_forward|pre_backward|all_gather|post_backward_reduce) \((.*)\)"
                       r"|(backward_prefetch for) (.*))$")


@dataclass
class FsdpPattern:
    """Result of :func:`fsdp_pattern`.

    Attributes
    ----------
    detected : bool
        FSDP2's ``FSDP::`` annotations are in the trace.
    units : pandas.DataFrame
        One row per step and FSDP unit (the module label FSDP2 writes, ``"0"``, ``"layers.3"``...):
        ``step, unit, forward_all_gathers`` (parameter all-gathers issued in its pre-forward),
        ``backward_all_gathers`` (re-gathers for backward, in its pre-backward or prefetched),
        ``prefetched`` (of those, issued by the previous unit's ``backward_prefetch``),
        ``reduce_scatters`` (its ``post_backward_reduce``).
    overlap : pandas.DataFrame
        One row per step: ``step, all_gather_ns, all_gather_overlap_ns, reduce_scatter_ns,
        reduce_scatter_overlap_ns`` (execution of the ``all_gather*``/``reduce_scatter*`` collectives and
        its intersection with computation, :func:`overlap`'s basis; int64 ns), ``all_gather_overlap_ratio``,
        ``reduce_scatter_overlap_ratio`` (NaN without such collectives).
    """

    detected: bool
    units: pd.DataFrame
    overlap: pd.DataFrame


def fsdp_pattern(trace: Trace) -> FsdpPattern:
    """FSDP2 (``fully_shard``) pattern of one rank: per-unit all-gathers / reduce-scatters and prefetch overlap.

    FSDP2 (``torch/distributed/fsdp/_fully_shard``) annotates ``FSDP::pre_forward (<unit>)``,
    ``FSDP::all_gather (<unit>)``, ``FSDP::pre_backward (<unit>)``, ``FSDP::backward_prefetch for <unit>``
    and ``FSDP::post_backward_reduce (<unit>)``; each ``all_gather`` is attributed to the unit it names
    and to the phase of the annotation that encloses it. The expected pattern per step: one forward
    all-gather and one reduce-scatter per unit, backward all-gathers for units resharded after forward
    (all but the last by default), most of them prefetched. Overlap is how much of the collectives'
    execution ran under computation (prefetch working: high ``all_gather_overlap_ratio``).
    """
    ev = trace.events
    host = ev[ev["device"] < 0]
    names = host["name"].astype(str)
    m = names.str.extract(_FSDP_ANN)
    m[0] = m[0].fillna(m[2])
    m[1] = m[1].fillna(m[3])
    hit = m[0].notna().to_numpy()
    unit_cols = ["step", "unit", "forward_all_gathers", "backward_all_gathers", "prefetched", "reduce_scatters"]
    ov_cols = ["step", "all_gather_ns", "all_gather_overlap_ns", "all_gather_overlap_ratio", "reduce_scatter_ns",
               "reduce_scatter_overlap_ns", "reduce_scatter_overlap_ratio"]
    a = host.loc[hit, ["ts_ns", "dur_ns", "step"]].assign(kind=m.loc[hit, 0].to_numpy(), unit=m.loc[hit, 1].str.strip().to_numpy())
    a = a.sort_values("ts_ns", kind="stable")
    rows: dict[tuple[int, str], dict[str, Any]] = {}

    def row(step: int, unit: str) -> dict[str, Any]:
        return rows.setdefault((step, unit), dict(step=step, unit=unit, forward_all_gathers=0, backward_all_gathers=0,
                                                  prefetched=0, reduce_scatters=0))

    phases = a[a["kind"] != "all_gather"]
    ps, pe = phases["ts_ns"].to_numpy(), (phases["ts_ns"] + phases["dur_ns"]).to_numpy()
    pk = phases["kind"].to_numpy()
    for r in a.itertuples(index=False):
        if r.kind == "post_backward_reduce":
            row(int(r.step), r.unit)["reduce_scatters"] += 1
        if r.kind != "all_gather":
            continue
        inside = np.flatnonzero((ps <= r.ts_ns) & (pe >= r.ts_ns + r.dur_ns))
        kind = pk[inside[-1]] if inside.size else "pre_forward"
        u = row(int(r.step), r.unit)
        if kind == "pre_forward":
            u["forward_all_gathers"] += 1
        else:
            u["backward_all_gathers"] += 1
            u["prefetched"] += int(kind == "backward_prefetch for")
    units = pd.DataFrame(list(rows.values()), columns=unit_cols)
    c = collectives(trace)
    comm_tids = set(int(x) for x in c.loc[c["device"] < 0, "tid"]) if len(c) else set()
    comp = compute_intervals(trace, comm_tids)
    ov_rows = []
    for step in sorted(set(int(s) for s in c["step"]) if len(c) else []):
        cs = c[c["step"] == step]
        d: dict[str, Any] = dict(step=step)
        for fam, key in (("all_gather", "all_gather"), ("reduce_scatter", "reduce_scatter")):
            f = cs[cs["collective"].astype(str).str.contains(fam)]
            ints = iv.merge(f["ts_ns"].to_numpy(np.int64), (f["ts_ns"] + f["dur_ns"]).to_numpy(np.int64)) if len(f) else iv.empty()
            tot, ovl = iv.total_ns(ints), iv.total_ns(iv.intersect(ints, comp))
            d[f"{key}_ns"], d[f"{key}_overlap_ns"] = tot, ovl
            d[f"{key}_overlap_ratio"] = ovl / tot if tot else float("nan")
        ov_rows.append(d)
    return FsdpPattern(bool(hit.any()), units, pd.DataFrame(ov_rows, columns=ov_cols))


_RT_COLUMNS = ["rank", "ts_ns", "dur_ns", "name", "cat", "tid", "device", "stream", "step"]


_LINK_COLUMNS = ["collective", "k", "rank", "ts_ns", "dur_ns", "wait_ns", "last_rank", "pg_name"]


def ranks_clock(traces: Any, *, align: str = "end") -> tuple[dict[int, int], pd.DataFrame]:
    """The common time axis of several ranks: per-rank shifts and the matched collectives on that axis.

    A rank's event at ``ts_ns`` (relative to its own origin) is at ``ts_ns + shifts[rank]`` on the common
    axis: its absolute Kineto clock (``meta.origin_ns``, ``baseTimeNanoseconds``), minus
    :func:`wait_transfer`'s ``clock_offset_ns`` when ``align="end"`` (collectives complete together on all
    ranks; the median over matched instances), made relative to the earliest event of the job (0).

    Parameters
    ----------
    traces : sequence of Trace, or mapping of table name to frame
        One per rank, or their concatenated reductions (``rank_info``, ``collectives``); ranks without an
        absolute origin are left out.
    align : {"end", "none"}

    Returns
    -------
    (shifts, links)
        ``shifts``: rank -> int64 ns to add to its ``ts_ns``; ``links``: one row per collective instance
        and rank, ``collective, k, rank, ts_ns, dur_ns`` (execution on the common axis), ``wait_ns,
        last_rank, pg_name`` -- the rows of one ``(collective, pg_name, k)`` are the same collective on
        each rank (:func:`wait_transfer`'s matching).

    Raises
    ------
    ValueError
        Unknown ``align``.
    """
    if align not in ("none", "end"):
        msg = f"align must be 'none' or 'end', got {align!r}"
        raise ValueError(msg)
    red = job_reductions(traces, ("rank_info", "collectives"))
    info = red["rank_info"]
    info = info[info["origin_ns"] >= 0]
    wt = wait_transfer(red, align=align)
    offsets = (wt.groupby("rank")["clock_offset_ns"].first().to_dict() if len(wt) else {})
    raw = {int(r): int(o) - int(offsets.get(int(r), 0)) for r, o in zip(info["rank"], info["origin_ns"])}
    firsts = [raw[int(r)] + int(f) for r, f, n in zip(info["rank"], info["first_ts_ns"], info["events"]) if n]
    zero = min(firsts) if firsts else 0
    shifts = {r: v - zero for r, v in raw.items()}
    links = wt.assign(ts_ns=(wt["arrival_abs_ns"] - zero).astype(np.int64))[_LINK_COLUMNS] if len(wt) else \
        pd.DataFrame(columns=_LINK_COLUMNS)
    return shifts, links.reset_index(drop=True)


def ranks_timeline(traces: Sequence[Trace], *, align: str = "end") -> tuple[pd.DataFrame, pd.DataFrame]:
    """All ranks on one clock: the data of a stacked multi-rank timeline (:func:`ranks_clock` applied).

    Each rank's events are moved onto one time axis: absolute Kineto clock (``meta.origin_ns +
    ts_ns``), refined by :func:`wait_transfer`'s ``clock_offset_ns`` when ``align="end"`` (collectives
    complete together on all ranks), then made relative to the earliest event of the job.

    Parameters
    ----------
    traces : sequence of Trace
        One per rank, each with an absolute origin (others are left out).
    align : {"end", "none"}

    Returns
    -------
    (events, links) : tuple of pandas.DataFrame
        ``events``: ``rank, ts_ns, dur_ns, name, cat, tid, device, stream, step`` (int64 ns on the common
        axis, every event of every rank -- a view aggregates them for its level of detail,
        ``nbprof.viz.ranks_timeline``);
        ``links``: one row per collective instance and rank, ``collective, k, rank, ts_ns, dur_ns``
        (execution on the common axis), ``wait_ns, last_rank, pg_name`` -- the rows of one
        ``(collective, pg_name, k)`` are the same collective on each rank, to be linked across ranks.

    Raises
    ------
    ValueError
        Unknown ``align``.
    """
    shifts, links = ranks_clock(traces, align=align)
    parts = []
    for t in traces:
        if t.meta.origin_ns is None:
            continue
        r = int(t.meta.rank)
        ev = t.events[["ts_ns", "dur_ns", "name", "cat", "tid", "device", "stream", "step"]].copy()
        ev["ts_ns"] = ev["ts_ns"].astype(np.int64) + shifts[r]
        ev.insert(0, "rank", r)
        parts.append(ev)
    if not parts:
        return pd.DataFrame(columns=_RT_COLUMNS), links
    events = pd.concat(parts, ignore_index=True)
    events["ts_ns"] = events["ts_ns"].astype(np.int64)
    events = events.sort_values(["ts_ns", "rank"], kind="stable").reset_index(drop=True)
    return events[_RT_COLUMNS], links
