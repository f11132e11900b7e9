"""The wait edges of :func:`~nbprof.analysis.critical_path.graph.build_graph`: ``sync`` (device op end -> end
of the host call that waited for it) and the sources of ``gpu_sync`` (the op a ``cudaStreamWaitEvent`` waits
for). Sources of truth: Kineto ``cuda_sync`` rows (``Stream Sync``, ``Context Sync``, ``Event Sync``,
``Stream Wait Event``), else the synchronising runtime calls by name; blocking copies always (see the package
docstring)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ...trace import ids, schema
from .device_edges import StreamState
from .edges import _event_record_targets, _next_launch_op, _prev_launch_op
from .host_edges import HostEdges
from .model import _BIG, _SYNC_NAMES, SKEW_MAX_NS, SYNC
from .nodes import EdgeBlock, Selection, block

#: (device op indices, host event indices that waited for them, whether HTA has the edge)
_Pairs = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


class _SyncRows(NamedTuple):
    """The ``cuda_sync`` rows: name, runtime call row (-1 none), end ns, stream (the thread for a context
    sync), device (pid), and whether the row lies in the window with a duration."""

    rows: np.ndarray
    name: np.ndarray
    rt: np.ndarray
    end: np.ndarray
    stream: np.ndarray
    dev: np.ndarray
    in_win: np.ndarray


def _sync_rows(sel: Selection) -> _SyncRows:
    """The ``cuda_sync`` rows of the trace (see :class:`_SyncRows`)."""
    rows = np.flatnonzero(sel.cat_is((schema.CUDA_SYNC,)))
    stream = sel.stream_all[rows]
    stream = np.where(stream >= 0, stream, np.where(sel.dev_col[rows] >= 0, -1, sel.tid_all[rows]))
    ts = sel.ts_all[rows]
    return _SyncRows(rows=rows, name=sel.names.iloc[rows].astype(str).to_numpy(),
                     rt=sel.rt_by_corr.get(sel.corr_all[rows]), end=sel.end_all[rows], stream=stream,
                     dev=sel.pid_all[rows], in_win=(ts >= sel.w0) & (ts <= sel.w1) & (sel.dur_all[rows] > 0))


def _stream_context_pairs(sel: Selection, sr: _SyncRows, st: StreamState) -> _Pairs:
    """``Stream Sync`` / ``Context Sync`` (in the window): the last window op of that stream / of every stream
    of the device that started before the sync row's end -> the row's runtime call (HTA's edges)."""
    pairs: _Pairs = []
    d_dev, d_stream, so = sel.d_dev, sel.d_stream, st.so
    key_ds = d_dev[so] * (1 << 32) + (d_stream[so] & 0xFFFFFFFF)
    ts_so = sel.d_ts[so]
    streams = np.unique(key_ds)
    for kind_name, per_stream in (("Stream Sync", True), ("Context Sync", False)):
        chosen = np.flatnonzero((sr.name == kind_name) & (sr.rt >= 0))
        if per_stream is False:
            chosen = chosen[sr.in_win[chosen]]
        for sk in streams:
            m = key_ds == sk
            if not m.any():
                continue
            sidx = so[m]
            st_dev, st_stream = d_dev[sidx[0]], d_stream[sidx[0]]
            sel2 = chosen[sr.stream[chosen] == st_stream] if per_stream else chosen[sr.dev[chosen] == st_dev]
            if sel2.size == 0:
                continue
            j = np.searchsorted(ts_so[m], sr.end[sel2], side="left") - 1
            ok = j >= 0
            pairs.append((sidx[j[ok]], sel.host_pos[sr.rt[sel2[ok]]], np.ones(int(ok.sum()), bool)))
    return pairs


def _event_wait_pairs(sel: Selection, sr: _SyncRows, st: StreamState, sync_args: pd.DataFrame | None,
                      gpu_sync_src: np.ndarray) -> _Pairs:
    """``Event Sync`` / ``Stream Wait Event``: the op recorded by the ``cudaEventRecord`` waited on (the last
    launch on the recorded stream before the record call) -> the waiting call (``Event Sync``, a ``sync``
    pair) or the next op launched on the waiting stream from the same thread (``Stream Wait Event``: sets
    ``gpu_sync_src`` of that op, in place)."""
    pairs: _Pairs = []
    ev_sel = np.flatnonzero(np.isin(sr.name, ["Event Sync", "Stream Wait Event"]) & (sr.rt >= 0))
    if ev_sel.size == 0:
        return pairs
    a = sel
    dev_index_of_row = np.full(a.ts_all.size, -1, dtype=np.int64)
    dev_index_of_row[a.dev_rows] = np.arange(a.kd)
    rec_corr, rec_stream = _event_record_targets(
        a.trace, sr.rows[ev_sel], sr.rt[ev_sel], sync_args, a.names, a.corr_all, a.ts_all, a.pid_all, a.tid_all,
        a.stream_all, a.dev_rows_all, a.launcher_all)
    rec_rows = a.rt_by_corr.get(rec_corr)
    for ii, si in enumerate(ev_sel):
        rr = int(rec_rows[ii])
        if rec_corr[ii] == ids.MISSING or rec_stream[ii] < 0 or rr < 0:
            continue
        src_dev_row = _prev_launch_op(int(sr.dev[si]), int(rec_stream[ii]), a.ts_all[rr], a.dev_rows_all,
                                      a.launcher_all, a.ts_all, a.pid_all, a.stream_all, st.launch_all_mask)
        src_j = dev_index_of_row[src_dev_row] if src_dev_row >= 0 else -1
        if src_j < 0:
            continue
        call = sr.rt[si]
        if sr.name[si] == "Event Sync":
            if sr.in_win[si] and a.host_pos[call] >= 0:
                pairs.append((np.array([src_j]), np.array([a.host_pos[call]]), np.array([True])))
            continue
        dest_row = _next_launch_op(int(a.pid_all[call]), int(a.tid_all[call]), int(sr.stream[si]), a.ts_all[call],
                                   a.dev_rows_all, a.launcher_all, a.ts_all, a.pid_all, a.tid_all, a.stream_all,
                                   st.launch_all_mask)
        dj = dev_index_of_row[dest_row] if dest_row >= 0 else -1
        if dj >= 0 and sr.end[si] <= a.d_ts[dj]:
            gpu_sync_src[dj] = src_j
    return pairs


def _named_sync_pairs(sel: Selection, st: StreamState) -> _Pairs:
    """Without ``cuda_sync`` rows: a synchronising call by name (``_SYNC_NAMES``) waits on the last op that
    started before it returned on every stream of the device (not HTA's)."""
    pairs: _Pairs = []
    sync_call = np.flatnonzero(sel.host_mask(lambda n: n in _SYNC_NAMES))
    so = st.so
    key_ds = sel.d_dev[so] * (1 << 32) + (sel.d_stream[so] & 0xFFFFFFFF)
    for sk in pd.unique(key_ds):
        m = key_ds == sk
        j = np.searchsorted(sel.d_ts[so][m], sel.h_end[sync_call], side="left") - 1
        ok = j >= 0
        pairs.append((so[m][j[ok]], sync_call[ok], np.zeros(int(ok.sum()), bool)))
    return pairs


def _blocking_copy_pairs(sel: Selection) -> _Pairs:
    """Blocking copies (replay only): a copy/memset call that covers its own op (by correlation): the op starts
    inside the call and ends before it returns, or at most ``SKEW_MAX_NS`` after (clock skew) when the call
    lasted at least 90 % of the op (an asynchronous copy returns long before its op ends)."""
    d_ts, d_end, c0, c1 = sel.d_ts, sel.d_end, sel.h_ts[sel.d_lpos], sel.h_end[sel.d_lpos]
    copy_op = sel.cat_is((schema.GPU_MEMCPY, schema.GPU_MEMSET))[sel.dev_rows]
    bl = copy_op & (d_ts >= c0) & (d_ts < c1) & (
        (d_end <= c1) | ((d_end - c1 <= SKEW_MAX_NS) & (10 * (c1 - c0) >= 9 * (d_end - d_ts))))
    return [(np.arange(sel.kd)[bl], sel.d_lpos[bl], np.zeros(int(bl.sum()), bool))]


def sync_sources(sel: Selection, st: StreamState, sync_args: pd.DataFrame | None) -> tuple[_Pairs, np.ndarray]:
    """The (device op, waiting host event, HTA flag) pairs of the window, in order: ``cuda_sync`` rows (stream
    and context syncs, then event waits) or the synchronising calls by name, then blocking copies; and per
    selected op the op its ``cudaStreamWaitEvent`` waits for (-1 none). No pairs without device ops."""
    gpu_sync_src = np.full(sel.kd, -1, dtype=np.int64)
    if sel.kd == 0:
        return [], gpu_sync_src
    sr = _sync_rows(sel)
    if sr.rows.size:
        pairs = _stream_context_pairs(sel, sr, st) + _event_wait_pairs(sel, sr, st, sync_args, gpu_sync_src)
    else:
        pairs = _named_sync_pairs(sel, st)
    return pairs + _blocking_copy_pairs(sel), gpu_sync_src


def sync_edges(sel: Selection, pairs: _Pairs, host: HostEdges | None) -> tuple[EdgeBlock | None, HostEdges | None]:
    """One ``sync`` edge per distinct (op, waiting call) pair (HTA's if any pair says so), and the ``host``
    edges' replay weights shortened by the waits. A wait is an edge, not a duration: a call waited when its
    latest source op ended after the call's last interval began; that interval then weighs only the return
    latency (from the later of its start and the op's end to the return, ns) and every sync edge into the call
    that latency. A call that did not wait keeps its host time and its sync edges weigh 0. Under clock skew (the
    op ends after the return, at most ``SKEW_MAX_NS``) the edge runs from the op's start, weighing the op's
    duration less the skew (tied to the op: ``via``). Returns the sync edges and ``host`` with those weights
    (a copy); (None, ``host``) without pairs."""
    if not pairs:
        return None, host
    s_src = np.concatenate([p[0] for p in pairs]).astype(np.int64)
    s_dsth = np.concatenate([p[1] for p in pairs]).astype(np.int64)
    s_hta = np.concatenate([p[2] for p in pairs])
    ok = s_dsth >= 0
    s_src, s_dsth, s_hta = s_src[ok], s_dsth[ok], s_hta[ok]
    kh, d_end, h_end = sel.kh, sel.d_end, sel.h_end
    if s_src.size:  # one edge per (src, dst); HTA flag if any
        key = s_src * (kh + 1) + s_dsth
        dfk = pd.DataFrame({"k": key, "h": s_hta}).groupby("k", sort=False)["h"].max()
        s_src = (dfk.index.to_numpy() // (kh + 1)).astype(np.int64)
        s_dsth = (dfk.index.to_numpy() % (kh + 1)).astype(np.int64)
        s_hta = dfk.to_numpy()
    w_sync = np.zeros(s_src.size, np.int64)
    skew = np.zeros(s_src.size, bool)
    if s_src.size:
        over = d_end[s_src] - h_end[s_dsth]
        skew = (over > 0) & (over <= SKEW_MAX_NS) & (sel.d_ts[s_src] < h_end[s_dsth])
        ok = (over <= 0) | skew  # the others run backwards and are dropped by build_graph
        d_last = np.full(kh, -_BIG, np.int64)
        np.maximum.at(d_last, s_dsth[ok], d_end[s_src[ok]])
        if host is not None:
            iv, last_in, wdt = host.iv, host.last_in, host.host.wmin.copy()
            u_last = np.full(kh, _BIG, np.int64)
            u_last[iv.v_ev[last_in]] = iv.u_time[last_in]
            waited = d_last > u_last
            le = last_in[waited[iv.v_ev[last_in]]]
            c = iv.v_ev[le]
            wdt[le] = np.minimum(wdt[le], np.maximum(0, h_end[c] - np.maximum(iv.u_time[le], d_last[c])))
            w_sync = np.where(waited[s_dsth], np.maximum(0, h_end[s_dsth] - d_last[s_dsth]), 0)
            host = host._replace(host=host.host._replace(wmin=wdt))
        w_sync = np.where(skew, h_end[s_dsth] - sel.d_ts[s_src], w_sync)
    edges = block(np.where(skew, sel.ds(s_src), sel.de(s_src)), sel.he(s_dsth), SYNC, owner=sel.host_rows[s_dsth],
                  hta_w=np.where(s_hta & ~skew, 0, -1), wmin=w_sync, via=np.where(skew, s_src, -1))
    return edges, host
