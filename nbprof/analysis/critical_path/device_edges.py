"""The device-side edges of :func:`~nbprof.analysis.critical_path.graph.build_graph`: ``device`` (an op's
span), ``launch`` (runtime call -> its op), ``stream`` (ops in order on one stream) and ``gpu_sync`` (the op a
``cudaStreamWaitEvent`` waits for -> the next op of the waiting stream), with HTA's choice between them (its
kernel-loop state: the queue length of each stream); see the package docstring for each kind."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...trace.predicates import name_mask as _name_mask
from .model import _BIG, DEVICE, GPU_SYNC, LAUNCH, LAUNCH_NAMES, STREAM
from .nodes import EdgeBlock, Selection, block


class StreamState(NamedTuple):
    """Per selected device op: ``so`` the ops sorted by (device, stream, start), ``prev`` the previous op on
    its (device, stream) (-1 first), ``q_rt`` / ``q_k`` HTA's queue length of its stream at its launch call /
    at the op (-99 unknown); ``launch_all_mask``: per launched op of the trace (``sel.dev_rows_all``), whether
    its call is a launch (``LAUNCH_NAMES``)."""

    so: np.ndarray
    prev: np.ndarray
    launch_all_mask: np.ndarray
    q_rt: np.ndarray
    q_k: np.ndarray


def device_edges(sel: Selection) -> EdgeBlock | None:
    """One ``device`` edge per selected op, start -> end, weighing its duration (ns; HTA's and the replay's),
    owner the op's row; None when the window has no device ops."""
    if sel.kd == 0:
        return None
    j = np.arange(sel.kd)
    return block(sel.ds(j), sel.de(j), DEVICE, owner=sel.dev_rows, hta_w=sel.d_end - sel.d_ts,
                 wmin=sel.d_end - sel.d_ts)


def stream_state(sel: Selection) -> StreamState:
    """Stream order of the selected ops and HTA's queue lengths (``TraceCounters``: launches minus ops started,
    per stream id over the whole trace, in time order); see :class:`StreamState`."""
    kd, d_dev, d_stream = sel.kd, sel.d_dev, sel.d_stream
    so = np.lexsort((sel.d_ts, d_stream, d_dev))  # per (device, stream) in time order
    prev = np.full(kd, -1, dtype=np.int64)
    if kd > 1:
        samestream = (d_dev[so][1:] == d_dev[so][:-1]) & (d_stream[so][1:] == d_stream[so][:-1])
        prev[so[1:][samestream]] = so[:-1][samestream]
    launch_all_mask = _name_mask(sel.names, lambda n: n in LAUNCH_NAMES)[sel.launcher_all]
    q_rt_rows = sel.launcher_all[launch_all_mask]
    q_dev_rows = sel.dev_rows_all[launch_all_mask]
    q_stream = sel.stream_all[q_dev_rows]
    q_t = np.concatenate([sel.ts_all[q_rt_rows], sel.ts_all[q_dev_rows]])
    q_s = np.concatenate([q_stream, q_stream])
    q_d = np.concatenate([np.ones(q_rt_rows.size, np.int64), -np.ones(q_dev_rows.size, np.int64)])
    q_row = np.concatenate([q_rt_rows, q_dev_rows])
    qo = np.lexsort((q_t, q_s))
    qcs = np.cumsum(q_d[qo])
    qnew = np.ones(qo.size, dtype=bool)
    qnew[1:] = q_s[qo][1:] != q_s[qo][:-1]
    qbase = np.maximum.accumulate(np.where(qnew, np.arange(qo.size), 0)) if qo.size else qo
    qlen = qcs - np.where(qbase > 0, qcs[qbase - 1], 0) if qo.size else qcs
    qval = np.full(sel.ts_all.size, -99, dtype=np.int64)
    qval[q_row[qo]] = qlen
    return StreamState(so=so, prev=prev, launch_all_mask=launch_all_mask, q_rt=qval[sel.dev_launcher],
                       q_k=qval[sel.dev_rows])


def launch_stream_edges(sel: Selection, st: StreamState,
                        gpu_sync_src: np.ndarray) -> tuple[list[EdgeBlock], int, int]:
    """The ``gpu_sync``, ``launch`` and ``stream`` edges (in that order) of the selected ops, with HTA's weight
    where HTA takes that edge (a launch onto an empty, idle stream; else the stream edge unless the waited-on
    op ends later), and the replay's floors: ``launch_delay_ns`` (median delay of launches of computation or
    copies onto an empty stream) and ``queued_gap_ns`` (median gap behind an op launched while its predecessor
    ran). ``gpu_sync_src``: per op, the op it waits for (-1 none). Returns (blocks, launch_delay_ns,
    queued_gap_ns); no blocks and 0, 0 without device ops."""
    if sel.kd == 0:
        return [], 0, 0
    d_ts, d_end, prev = sel.d_ts, sel.d_end, st.prev
    has_g = gpu_sync_src >= 0
    g_end = np.where(has_g, d_end[np.clip(gpu_sync_src, 0, None)], -_BIG)
    rt_ts = sel.h_ts[sel.d_lpos]
    has_prev = prev >= 0
    prev_end = np.where(has_prev, d_end[np.clip(prev, 0, None)], -_BIG)
    cond_launch = (st.q_rt == 1) & (st.q_k == 0) & (~has_prev | (prev_end < rt_ts)) & (~has_g | (g_end < rt_ts))
    cond_kk = ~cond_launch & has_prev & (~has_g | (g_end < prev_end))
    gi = np.flatnonzero(has_g)
    gpu_sync = block(sel.de(gpu_sync_src[gi]), sel.ds(gi), GPU_SYNC, hta_w=np.zeros(gi.size, np.int64))
    # launch edges (all; HTA weight only where HTA adds it). A communication kernel's "launch delay" is
    # mostly its wait for the other ranks (tens of ms after an NCCL launch), not the launch itself
    ldelay = d_ts - rt_ts
    bound_l = cond_launch & (ldelay >= 0)
    comp_l = bound_l & ~sel.comm_all[sel.dev_rows]
    lq_of = comp_l if comp_l.any() else bound_l
    lq = int(np.median(ldelay[lq_of])) if lq_of.any() else int(max(0, ldelay.min()))
    launch = block(sel.hs(sel.d_lpos), sel.ds(np.arange(sel.kd)), LAUNCH, owner=sel.host_rows[sel.d_lpos],
                   hta_w=np.where(cond_launch, ldelay, -1), wmin=np.minimum(ldelay, lq))
    # stream edges; ops that overlap on one stream in the measurement (the next starts before the
    # previous ends): from the previous op's start, tied to its duration (clamped, not dropped)
    pi = np.flatnonzero(has_prev)
    gap = d_ts[pi] - prev_end[pi]
    # the replay's floor: the median gap behind an op launched while its predecessor still ran (truly
    # queued; HTA's queue-length test also counts launch-bound gaps when its counters disagree)
    gq_mask = (rt_ts[pi] < prev_end[pi]) & (gap >= 0)
    gq = int(np.median(gap[gq_mask])) if gq_mask.any() else 0
    ovl = gap < 0
    pp = prev[pi]
    stream = block(np.where(ovl, sel.ds(pp), sel.de(pp)), sel.ds(pi), STREAM, owner=sel.dev_rows[pp],
                   hta_w=np.where(cond_kk[pi] & ~ovl, np.maximum(gap, 0), -1),
                   wmin=np.where(ovl, d_ts[pi] - d_ts[pp], np.minimum(np.maximum(gap, 0), gq)),
                   via=np.where(ovl, pp, -1))
    return [gpu_sync, launch, stream], lq, gq
