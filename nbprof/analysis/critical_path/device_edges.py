"""The device-side edges of :func:`~nbprof.analysis.critical_path.graph.build_graph`: ``device`` (an op's
span), ``launch`` (runtime call -> its op), ``stream`` (ops in order on one stream) and ``gpu_sync`` (the op a
``cudaStreamWaitEvent`` waits for -> the next op of the waiting stream), with HTA's choice between them (its
kernel-loop state: the queue length of each stream); see the package docstring for each kind."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...trace import schema
from ...trace.predicates import name_mask as _name_mask
from .model import (
    _BIG,
    DEVICE,
    GPU_SYNC,
    INFER_WAIT_IDLE_NS,
    INFER_WAIT_LAG_NS,
    LAUNCH,
    LAUNCH_NAMES,
    STREAM,
    WAIT_EVENT_NAMES,
)
from .nodes import EdgeBlock, Selection, block, concat_blocks


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


def inferred_wait_sources(sel: Selection, st: StreamState, gpu_sync_src: np.ndarray) -> np.ndarray:
    """The inferred-wait rule: per selected op, the op of another stream it waited for through a
    ``cudaStreamWaitEvent`` the trace has no ``Stream Wait Event`` row for (-1 none; replay only).

    CUDA semantics (CUDA Runtime API, Stream Management, ``cudaStreamWaitEvent``: "Makes all future work
    submitted to stream wait for all work captured in event"; ``cudaEventRecord``: the event captures the
    contents of the stream it is recorded on at the time of the call; HIP's ``hipStreamWaitEvent`` likewise):
    after that call, the next op launched on the waiting stream cannot start before the last op recorded on
    the other stream ends. Kineto writes that dependency as a ``Stream Wait Event`` device row (the source of
    ``gpu_sync_src``, :func:`~.sync_edges.sync_sources`); some profiles (e.g. HTA's ``trace_diff`` DLRM
    traces: ``cudaStreamWaitEvent`` calls, no such rows, no ``cudaEventRecord``) lack both the row and the
    record, so which event is unknown. Op ``j`` on stream S (device D) is then taken as waiting when:

    * it has no ``gpu_sync_src`` already (an op with a ``Stream Wait Event`` source is left as it is);
    * it has a predecessor ``p`` on S in the window, and starts more than ``INFER_WAIT_IDLE_NS`` (50 µs)
      after both its launch call returned and ``p`` ended: neither the host nor its own stream held it back
      (launch latency and the stream's queued gap are a few µs; 50 µs leaves them out);
    * its launching thread called ``cudaStreamWaitEvent`` / ``hipStreamWaitEvent`` (``WAIT_EVENT_NAMES``)
      between ``p``'s launch call and its own (the wait is issued before the launch it holds back), a call
      with no ``Stream Wait Event`` row of its correlation id (a recorded wait is
      :func:`~.sync_edges.sync_sources`' to resolve, or to leave unresolved: on HTA's ``simple_add`` trace,
      whose waits are all recorded, no edge is inferred and the graph is unchanged).

    Its source is the op ``k`` on another stream of D whose end is the latest at or before ``j``'s start,
    at most ``INFER_WAIT_LAG_NS`` (20 µs: the device-side wait resolves within µs) before it, and later than
    ``p``'s end (else ``p`` explains the start as well); none when no op qualifies. ``k`` must end at or before
    ``j`` starts (its end node before ``j``'s start node): a source past the start would make the edge run
    backwards. The edge is the replay's, not HTA's (``hta_w`` -1; HTA's launch / stream choice keeps using
    ``gpu_sync_src`` only), so the HTA-compatible critical path is unchanged; in the replay the waiting op then
    starts when ``k`` ends, and a faster ``k`` (a shorter collective, overlapped communication) starts it
    earlier instead of the wait staying a fixed stream gap (issue 30).

    Returns
    -------
    ndarray int64 (kd,)
        Per selected op, the index (into the selected ops) of the op it waits for, -1 none.
    """
    out = np.full(sel.kd, -1, np.int64)
    prev = st.prev
    if sel.kd < 2:
        return out
    wait_h = np.flatnonzero(sel.host_mask(lambda n: n in WAIT_EVENT_NAMES))
    swe = np.flatnonzero(sel.cat_is((schema.CUDA_SYNC,)) & _name_mask(sel.names, lambda n: n == "Stream Wait Event"))
    wait_h = wait_h[~np.isin(sel.corr_all[sel.host_rows[wait_h]], sel.corr_all[swe])]  # a recorded wait is not inferred
    if wait_h.size == 0:
        return out
    d_ts, d_end = sel.d_ts, sel.d_end
    l_ts, l_end, l_key = sel.h_ts[sel.d_lpos], sel.h_end[sel.d_lpos], sel.tkey[sel.d_lpos]
    pc = np.clip(prev, 0, None)
    cand = np.flatnonzero((gpu_sync_src < 0) & (prev >= 0) & (d_ts - l_end > INFER_WAIT_IDLE_NS)
                          & (d_ts - d_end[pc] > INFER_WAIT_IDLE_NS))
    if cand.size == 0:
        return out
    # a wait call on the launching thread in [predecessor's launch, own launch)
    w_key, w_ts = sel.tkey[wait_h], sel.h_ts[wait_h]
    waits = {int(key): np.sort(w_ts[w_key == key]) for key in np.unique(w_key)}
    # the other streams' ops of each device, by end
    eo = np.lexsort((d_end, sel.d_dev))
    e_dev, e_end = sel.d_dev[eo], d_end[eo]
    ds_node, de_node = sel.ds(np.arange(sel.kd)), sel.de(np.arange(sel.kd))
    for j in cand:
        wt = waits.get(int(l_key[j]))
        p = int(prev[j])
        if wt is None:
            continue
        w = np.searchsorted(wt, l_ts[j], side="left") - 1
        if w < 0 or wt[w] < l_ts[p]:
            continue
        lo = int(np.searchsorted(e_dev, sel.d_dev[j], side="left"))
        hi = int(np.searchsorted(e_dev, sel.d_dev[j], side="right"))
        a0 = lo + int(np.searchsorted(e_end[lo:hi], d_ts[j] - INFER_WAIT_LAG_NS, side="left"))
        a1 = lo + int(np.searchsorted(e_end[lo:hi], d_ts[j], side="right"))
        ks = eo[a0:a1]
        ks = ks[(sel.d_stream[ks] != sel.d_stream[j]) & (d_end[ks] > d_end[p]) & (de_node[ks] < ds_node[j])]
        if ks.size:
            out[j] = ks[np.argmax(d_end[ks])]
    return out


def launch_stream_edges(sel: Selection, st: StreamState, gpu_sync_src: np.ndarray,
                        inferred_src: np.ndarray | None = None) -> tuple[list[EdgeBlock], int, int]:
    """The ``gpu_sync``, ``launch`` and ``stream`` edges (in that order) of the selected ops, with HTA's weight
    where HTA takes that edge (a launch onto an empty, idle stream; else the stream edge unless the waited-on
    op ends later), and the replay's floors: ``launch_delay_ns`` (median delay of launches of computation or
    copies onto an empty stream) and ``queued_gap_ns`` (median gap behind an op launched while its predecessor
    ran). ``gpu_sync_src``: per op, the op it waits for (-1 none); ``inferred_src``: per op, the op it waits for
    by the inferred-wait rule (:func:`inferred_wait_sources`; -1 none), a ``gpu_sync`` edge of the replay only
    (``hta_w`` -1), after HTA's, that leaves HTA's launch / stream choice as it is. Returns (blocks,
    launch_delay_ns, queued_gap_ns); no blocks and 0, 0 without device ops."""
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
    if inferred_src is not None and (inferred_src >= 0).any():
        ii = np.flatnonzero(inferred_src >= 0)
        gpu_sync = concat_blocks([gpu_sync, block(sel.de(inferred_src[ii]), sel.ds(ii), GPU_SYNC)])
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
