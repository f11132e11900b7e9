"""The dependency graph: :func:`build_graph` (nodes, the host / launch / device / stream / sync /
gpu_sync / fwdbwd / wake edges; see the package docstring for each kind and its source of truth)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ...trace import schema
from ...trace.iterations import iteration_ranges, step_label
from ...trace.model import Trace
from ...trace.predicates import is_communication, is_step_row, step_number
from ...trace.predicates import name_mask as _name_mask
from .._memo import clear as clear_memo
from .._memo import per_trace
from ..steps import _is_dataloader
from .edges import (
    _enqueue_edges,
    _event_record_targets,
    _host_event_at,
    _next_launch_op,
    _prev_launch_op,
    _tighten,
    _wake_edges,
)
from .model import (
    _BIG,
    _DEV_CATS,
    _HOST_CATS,
    _HTA_HOST_CATS,
    _SYNC_NAMES,
    BLOCKING_CALLS,
    DEVICE,
    FWDBWD,
    GPU_SYNC,
    HOST,
    LAUNCH,
    LAUNCH_NAMES,
    SKEW_MAX_NS,
    STREAM,
    SYNC,
    WAKE,
    Graph,
    _Lookup,
)


def _marker_sequence(tkey: np.ndarray, ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Call-stack order of the start/end markers of host events, per thread.

    Returns ``order`` over 2k markers (marker i < k is the start of event i, i >= k the end of event
    i-k) sorted by (thread, time, ends before starts, outer starts first, inner ends first), and the
    per-event parent (index into the events, -1 top level) from the depth of each start.
    """
    k = ts.size
    # start rank: (thread, ts, -dur)
    srank = np.empty(k, dtype=np.int64)
    so = np.lexsort((-(end - ts), ts, tkey))
    srank[so] = np.arange(k)
    m_t = np.concatenate([ts, end])
    m_thread = np.concatenate([tkey, tkey])
    m_isstart = np.concatenate([np.ones(k, np.int8), np.zeros(k, np.int8)])
    m_tie = np.concatenate([srank, -srank])
    order = np.lexsort((m_tie, m_isstart, m_t, m_thread))
    # depth after each marker within a thread
    step = np.where(m_isstart[order] == 1, 1, -1).astype(np.int64)
    th = m_thread[order]
    newth = np.ones(order.size, dtype=bool)
    newth[1:] = th[1:] != th[:-1]
    cs = np.cumsum(step)
    base = np.maximum.accumulate(np.where(newth, np.arange(order.size), 0))
    before = np.where(base > 0, cs[base - 1], 0)
    depth_after = cs - before  # depth after the marker, within its thread
    parent = np.full(k, -1, dtype=np.int64)
    is_s = m_isstart[order] == 1
    spos = np.flatnonzero(is_s)
    sev = order[spos]
    sdepth = depth_after[spos]  # 1 = top level
    # parent: the last start at depth d-1 on the same thread before this start
    for d in range(2, int(sdepth.max()) + 1 if sdepth.size else 0):
        if d <= 1:
            continue
        cur = sdepth == d
        cand = np.flatnonzero(sdepth == d - 1)
        if cand.size == 0:
            continue
        j = np.searchsorted(spos[cand], spos[cur], side="right") - 1
        ok = j >= 0
        pj = cand[np.clip(j, 0, None)]
        ok &= th[spos[pj]] == th[spos[cur]]
        parent[sev[cur][ok]] = sev[pj[ok]]
    return order, parent, depth_after


def _window(trace: Trace, step: int | None, annotation: str | None, instance: int | tuple[int, int],
            window: tuple[int, int] | None) -> tuple[int, int]:
    """The (start_ns, end_ns) host window the graph is clipped to: HTA 0.5.0's definition (``critical_path``'s
    ``ProfilerStep#N`` host range, its annotation instances, or the whole trace), kept on purpose apart from
    :func:`nbprof.analysis.steps.step_windows`, THE step window elsewhere (host steps extended to the end of
    the device work they launched), so that the critical path reproduces HTA's. Without ``ProfilerStep#N``, step
    N is the host range of detected iteration N (:func:`nbprof.trace.iterations.iteration_ranges`, the
    ranges the events' ``step`` column comes from)."""
    ev = trace.events
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    if window is not None:
        return int(window[0]), int(window[1])
    names = ev["name"]
    if step is not None:
        mask = is_step_row(ev) & _name_mask(names, lambda n: step_number(n) == int(step))
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            it = iteration_ranges(trace) if not is_step_row(ev).any() else None
            if it is not None and (it["step"] == int(step)).any():
                r = it[it["step"] == int(step)].iloc[0]
                return int(r["start_ns"]), int(r["end_ns"])
            raise ValueError(f"no {step_label(trace, int(step))} in the trace (steps: {trace.steps})")
        return int(ts[idx].min()), int(end[idx].max())
    if annotation:
        mask = _name_mask(names, lambda n: annotation in n)
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            raise ValueError(f"no event whose name contains {annotation!r}")
        lo, hi = (instance, instance) if isinstance(instance, int) else instance
        sel = idx[lo:hi + 1]
        if sel.size == 0:
            raise ValueError(f"annotation {annotation!r} has {idx.size} instances, asked for {instance}")
        return int(ts[sel].min()), int(end[sel].max())
    if len(ev) == 0:
        return 0, 0
    return int(ts.min()), int(end.max())


def _sync_args_frame(trace: Trace, sync_args: pd.DataFrame | None) -> pd.DataFrame | None:
    if sync_args is None:
        sync_args = getattr(trace, "tables", {}).get("cuda_sync")
    if sync_args is None or len(sync_args) == 0:
        return None
    need = {"correlation", "wait_on_stream", "wait_on_cuda_event_record_corr_id"}
    missing = need - set(sync_args.columns)
    if missing:
        raise ValueError(f"sync_args lacks columns {sorted(missing)}")
    return sync_args


def build_graph(trace: Trace, step: int | None = None, *, annotation: str | None = None,
                instance: int | tuple[int, int] = 0, window: tuple[int, int] | None = None,
                sync_args: pd.DataFrame | None = None) -> Graph:
    """The dependency graph of ``trace`` (whole trace, one step, an annotation or a time window).

    Parameters
    ----------
    trace : nbprof.Trace
    step : int, optional
        Restrict to ``ProfilerStep#<step>``: host events starting inside its host range and device
        ops launched inside it (HTA's window rule).
    annotation : str, optional
        HTA's ``annotation``: the window of the events whose name *contains* it, instance
        ``instance`` (an int or an inclusive ``(first, last)`` pair) in trace order.
    window : (int, int), optional
        Explicit ``(start_ns, end_ns)``.
    sync_args : pandas.DataFrame, optional
        ``correlation, wait_on_stream, wait_on_cuda_event_record_corr_id`` of the ``cuda_sync`` rows
        (Kineto args). Default: ``trace.tables["cuda_sync"]`` if present, else the heuristic of the
        module docstring.

    Returns
    -------
    Graph

    Raises
    ------
    ValueError
        When the step or annotation is not in the trace.
    """
    ev = trace.events
    n_ev = len(ev)
    w0, w1 = _window(trace, step, annotation, instance, window)
    ts_all = ev["ts_ns"].to_numpy(np.int64)
    dur_all = ev["dur_ns"].to_numpy(np.int64)
    end_all = ts_all + dur_all
    cat = ev["cat"]
    cat_codes = cat.cat.codes.to_numpy() if isinstance(cat.dtype, pd.CategoricalDtype) else None

    def cat_is(names: Iterable[str]) -> np.ndarray:
        if cat_codes is not None:
            cats = list(cat.cat.categories)
            ids = [cats.index(c) for c in names if c in cats]
            return np.isin(cat_codes, ids) if ids else np.zeros(n_ev, bool)
        return np.asarray(cat.isin(list(names)).to_numpy(), dtype=bool)

    dev_col = ev["device"].to_numpy()
    host_ev = cat_is(_HOST_CATS) & (dev_col < 0)
    is_rt_all = cat_is(schema.RUNTIME_CATEGORIES) & (dev_col < 0)
    is_dev_all = cat_is(_DEV_CATS) & (dev_col >= 0)
    is_sync_row = cat_is((schema.CUDA_SYNC,))
    corr_all = ev["correlation"].to_numpy(np.int64)
    pid_all = ev["pid"].to_numpy(np.int64)
    tid_all = ev["tid"].to_numpy(np.int64)
    stream_all = ev["stream"].to_numpy(np.int64)
    names = ev["name"]
    step_rows_all = is_step_row(ev)
    comm_all = np.asarray(is_communication(ev), dtype=bool)

    # ---- runtime <-> device op (correlation); HTA: the runtime with that correlation
    rt_rows = np.flatnonzero(is_rt_all & (corr_all >= 0))
    rt_by_corr = _Lookup(corr_all[rt_rows], rt_rows)
    dev_rows_all = np.flatnonzero(is_dev_all & (corr_all >= 0))
    launcher_all = rt_by_corr.get(corr_all[dev_rows_all])
    has_l = launcher_all >= 0
    dev_rows_all = dev_rows_all[has_l]
    launcher_all = launcher_all[has_l]

    # ---- selection (HTA's clipping)
    host_sel = host_ev & (dur_all > 0) & (ts_all >= w0) & (ts_all <= w1)
    l_ts = ts_all[launcher_all]
    dsel = (l_ts >= w0) & (l_ts <= w1) & (dur_all[launcher_all] > 0) & host_sel[launcher_all]
    dev_rows = dev_rows_all[dsel]
    dev_launcher = launcher_all[dsel]
    host_rows = np.flatnonzero(host_sel)

    # ---- host markers
    tkey = pid_all[host_rows] * (1 << 32) + (tid_all[host_rows] & 0xFFFFFFFF)
    h_ts = ts_all[host_rows]
    h_end = end_all[host_rows]
    kh = host_rows.size
    order, parent, _depth = _marker_sequence(tkey, h_ts, h_end)
    # innermost HTA-eligible ancestor-or-self of each host event
    hcat_hta = cat_is(_HTA_HOST_CATS)[host_rows]
    hta_self = np.where(hcat_hta, np.arange(kh), -1)
    # propagate: nearest eligible ancestor (pointer jumping over parent chain)
    near = hta_self.copy()
    anc = parent.copy()
    need = near < 0
    while True:
        act = np.flatnonzero(need & (anc >= 0))
        if act.size == 0:
            break
        a = anc[act]
        got = hta_self[a] >= 0
        near[act[got]] = hta_self[a[got]]
        need[act[got]] = False
        anc[act] = parent[a]
    hta_parent = np.full(kh, -1, dtype=np.int64)  # nearest eligible strict ancestor
    has_p = parent >= 0
    hta_parent[has_p] = near[parent[has_p]]

    # ---- device ops
    kd = dev_rows.size
    d_ts = ts_all[dev_rows]
    d_end = end_all[dev_rows]
    d_dev = dev_col[dev_rows].astype(np.int64)
    d_stream = stream_all[dev_rows]
    # launcher position among host_rows
    host_pos = np.full(n_ev, -1, dtype=np.int64)
    host_pos[host_rows] = np.arange(kh)
    d_lpos = host_pos[dev_launcher]

    # ---- nodes: host markers 0..2kh-1 (start i / end kh+i), device 2kh + (start j / end kd+j)
    # global node order: time, then a tie rank (host markers in call-stack order; device start < end)
    n_nodes = 2 * kh + 2 * kd
    node_t = np.concatenate([h_ts, h_end, d_ts, d_end])
    tie = np.empty(n_nodes, dtype=np.int64)
    mrank = np.empty(2 * kh, dtype=np.int64)
    mrank[order] = np.arange(2 * kh)
    tie[: 2 * kh] = mrank
    tie[2 * kh:] = np.concatenate([np.zeros(kd, np.int64), np.ones(kd, np.int64)])
    # host markers sorted before device nodes at equal time (launch: runtime start then op start)
    grp = np.concatenate([np.zeros(2 * kh, np.int64), np.ones(2 * kd, np.int64)])
    norder = np.lexsort((tie, grp, node_t))
    pos = np.empty(n_nodes, dtype=np.int64)
    pos[norder] = np.arange(n_nodes)
    t_sorted = node_t[norder]
    rows_local = np.concatenate([host_rows, host_rows, dev_rows, dev_rows])
    node_row = rows_local[norder]

    def hs(i: np.ndarray) -> np.ndarray:  # host start node (sorted id)
        return np.asarray(pos[i])

    def he(i: np.ndarray) -> np.ndarray:
        return np.asarray(pos[kh + i])

    def ds(j: np.ndarray) -> np.ndarray:
        return np.asarray(pos[2 * kh + j])

    def de(j: np.ndarray) -> np.ndarray:
        return np.asarray(pos[2 * kh + kd + j])

    ev_local = np.arange(kh)
    ev_dev = np.arange(kd)
    blocking_h = _name_mask(names, lambda n: n in BLOCKING_CALLS)[host_rows] & cat_is(schema.RUNTIME_CATEGORIES)[host_rows]
    launch_h = _name_mask(names, lambda n: n in LAUNCH_NAMES)[host_rows]

    srcs: list[np.ndarray] = []
    dsts: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    htaw: list[np.ndarray] = []
    wmins: list[np.ndarray] = []
    vias: list[np.ndarray] = []  # per edge: the device op (index j) its replay weight is tied to, -1 none

    def _none(k: int) -> np.ndarray:
        return np.full(k, -1, np.int64)

    # ---- host edges: consecutive markers per thread
    if kh:
        m_ev = np.where(order < kh, order, order - kh)
        m_isstart = order < kh
        m_thread = tkey[m_ev]
        same = m_thread[1:] == m_thread[:-1]
        a_idx = np.flatnonzero(same)
        u_ev, v_ev = m_ev[a_idx], m_ev[a_idx + 1]
        u_st, v_st = m_isstart[a_idx], m_isstart[a_idx + 1]
        u_node = np.where(u_st, hs(u_ev), he(u_ev))
        v_node = np.where(v_st, hs(v_ev), he(v_ev))
        # owner: innermost open event after marker u (start: itself, end: its parent)
        own_local = np.where(u_st, u_ev, parent[u_ev])
        # HTA owner: innermost HTA-eligible open event after marker u
        hta_own = np.where(u_st, near[u_ev], hta_parent[u_ev])
        dt = np.where(v_st, h_ts[v_ev], h_end[v_ev]) - np.where(u_st, h_ts[u_ev], h_end[u_ev])
        blocking_end = (~v_st) & blocking_h[v_ev] & (hta_own == v_ev)
        hw = np.where((hta_own >= 0) & ~blocking_end, dt, 0)
        # wake edges: a gap outside any op (or only inside a ProfilerStep range) that ends just after
        # another thread of the process did something: that thread woke this one up
        step_range_h = step_rows_all[host_rows]
        gap_like = (own_local < 0) | step_range_h[np.clip(own_local, 0, None)]
        m_time = np.where(m_isstart, h_ts[m_ev], h_end[m_ev])
        m_node = np.where(m_isstart, hs(m_ev), he(m_ev))
        wk_src, wk_dst, wk_lat, wk_edge = _wake_edges(m_time, m_node, m_thread, pid_all[host_rows][m_ev], a_idx,
                                                      gap_like & (dt > 0))
        # the first marker of a thread that starts after others: woken up the same way
        first_m = np.flatnonzero(np.concatenate([[True], ~same]))
        f_src, f_dst, f_lat, _ = _wake_edges(m_time, m_node, m_thread, pid_all[host_rows][m_ev], first_m - 1,
                                             np.ones(first_m.size, bool), first=True)
        # a collective backend's worker thread (gloo) idles until a c10d:: op enqueues its work
        u_time = np.where(u_st, h_ts[u_ev], h_end[u_ev])
        c10d_h = np.flatnonzero(_name_mask(names, lambda n: n.startswith("c10d::"))[host_rows])
        backend_h = _name_mask(names, lambda n: n.startswith(("gloo:", "mpi:", "ucc:")))[host_rows]
        pid_h = pid_all[host_rows]
        q_src, q_edge, q_lat = _enqueue_edges(gap_like & (dt > 0), v_st & backend_h[v_ev], u_time, h_ts[v_ev],
                                              tkey[v_ev], pid_h[v_ev], h_ts[c10d_h], hs(c10d_h), tkey[c10d_h],
                                              pid_h[c10d_h])
        # ... and the thread that waits for the collective (work.wait(), DDP's reducer) resumes when the backend
        # range ends, however late (a loaded machine): the wait is an edge from that end, not the gap's length
        bk_h = np.flatnonzero(backend_h)
        v_time = np.where(v_st, h_ts[v_ev], h_end[v_ev])
        c_src, c_edge, c_lat = _enqueue_edges(gap_like & (dt > 0), np.ones(v_ev.size, bool), u_time, v_time,
                                              tkey[v_ev], pid_h[v_ev], h_end[bk_h], he(bk_h), tkey[bk_h], pid_h[bk_h])
        wk_src, wk_dst, wk_lat, wk_edge = (np.concatenate([wk_src, q_src, c_src]),
                                           np.concatenate([wk_dst, v_node[q_edge], v_node[c_edge]]),
                                           np.concatenate([wk_lat, q_lat, c_lat]),
                                           np.concatenate([wk_edge, q_edge, c_edge]))
        wdt = dt.copy()
        wdt[wk_edge] = np.minimum(wdt[wk_edge], wk_lat)  # the gap then only costs the wake-up latency
        # the last interval inside each host event (ends at its end, owned by it): a wait shortens it below
        last_in = np.flatnonzero((~v_st) & (own_local == v_ev))
        srcs.append(u_node)
        dsts.append(v_node)
        kinds.append(np.full(a_idx.size, HOST, np.int8))
        owners.append(np.where(own_local >= 0, host_rows[np.clip(own_local, 0, None)], -1))
        htaw.append(hw)
        wmins.append(wdt)
        vias.append(_none(a_idx.size))
        wk_src, wk_dst, wk_lat = (np.concatenate([wk_src, f_src]), np.concatenate([wk_dst, f_dst]),
                                  np.concatenate([wk_lat, f_lat]))
        srcs.append(wk_src)
        dsts.append(wk_dst)
        kinds.append(np.full(wk_src.size, WAKE, np.int8))
        owners.append(np.full(wk_src.size, -1, np.int64))
        htaw.append(np.full(wk_src.size, -1, np.int64))
        wmins.append(wk_lat)
        vias.append(_none(wk_src.size))
    # ---- device edges
    if kd:
        # span
        srcs.append(ds(ev_dev))
        dsts.append(de(ev_dev))
        kinds.append(np.full(kd, DEVICE, np.int8))
        owners.append(dev_rows)
        htaw.append(d_end - d_ts)
        wmins.append(d_end - d_ts)
        vias.append(_none(kd))

    # HTA kernel-loop state per device op
    so = np.lexsort((d_ts, d_stream, d_dev))  # per (device, stream) in time order
    prev = np.full(kd, -1, dtype=np.int64)
    if kd > 1:
        samestream = (d_dev[so][1:] == d_dev[so][:-1]) & (d_stream[so][1:] == d_stream[so][:-1])
        prev[so[1:][samestream]] = so[:-1][samestream]
    # queue length (HTA TraceCounters, full trace, per stream id)
    launch_all_mask = _name_mask(names, lambda n: n in LAUNCH_NAMES)[launcher_all]
    q_rt_rows = launcher_all[launch_all_mask]
    q_dev_rows = dev_rows_all[launch_all_mask]
    q_stream = stream_all[q_dev_rows]
    q_t = np.concatenate([ts_all[q_rt_rows], ts_all[q_dev_rows]])
    q_s = np.concatenate([q_stream, q_stream])
    q_d = np.concatenate([np.ones(q_rt_rows.size, np.int64), -np.ones(q_dev_rows.size, np.int64)])
    q_row = np.concatenate([q_rt_rows, q_dev_rows])
    qo = np.lexsort((q_t, q_s))
    qcs = np.cumsum(q_d[qo])
    qnew = np.ones(qo.size, dtype=bool)
    qnew[1:] = q_s[qo][1:] != q_s[qo][:-1]
    qbase = np.maximum.accumulate(np.where(qnew, np.arange(qo.size), 0)) if qo.size else qo
    qlen = qcs - np.where(qbase > 0, qcs[qbase - 1], 0) if qo.size else qcs
    qval = np.full(n_ev, -99, dtype=np.int64)
    qval[q_row[qo]] = qlen
    q_rt = qval[dev_launcher]
    q_k = qval[dev_rows]

    # ---- sync sources
    sync_args_df = _sync_args_frame(trace, sync_args)
    gpu_sync_src = np.full(kd, -1, dtype=np.int64)  # device-op index of the op to wait for (Stream Wait Event)
    sync_pairs_src, sync_pairs_dst_h, sync_hta = [], [], []
    sync_rows = np.flatnonzero(is_sync_row)
    dev_index_of_row = np.full(n_ev, -1, dtype=np.int64)
    dev_index_of_row[dev_rows] = np.arange(kd)
    if sync_rows.size and kd:
        s_name = names.iloc[sync_rows].astype(str).to_numpy()
        s_corr = corr_all[sync_rows]
        s_rt = rt_by_corr.get(s_corr)
        s_end = end_all[sync_rows]
        s_stream = stream_all[sync_rows]
        s_stream = np.where(s_stream >= 0, s_stream, np.where(dev_col[sync_rows] >= 0, -1, tid_all[sync_rows]))
        s_dev = pid_all[sync_rows]
        in_win_ctx = (ts_all[sync_rows] >= w0) & (ts_all[sync_rows] <= w1) & (dur_all[sync_rows] > 0)
        # per-stream op start times (window ops)
        key_ds = d_dev[so] * (1 << 32) + (d_stream[so] & 0xFFFFFFFF)
        ts_so = d_ts[so]
        streams = np.unique(key_ds)
        # Stream Sync / Context Sync: last window op started before the sync row's end
        for kind_name, per_stream in (("Stream Sync", True), ("Context Sync", False)):
            sel = np.flatnonzero((s_name == kind_name) & (s_rt >= 0))
            if per_stream is False:
                sel = sel[in_win_ctx[sel]]
            for sk in streams:
                m = key_ds == sk
                if not m.any():
                    continue
                sts = ts_so[m]
                sidx = so[m]
                st_dev, st_stream = d_dev[sidx[0]], d_stream[sidx[0]]
                sel2 = sel[s_stream[sel] == st_stream] if per_stream else sel[s_dev[sel] == st_dev]
                if sel2.size == 0:
                    continue
                j = np.searchsorted(sts, s_end[sel2], side="left") - 1
                ok = j >= 0
                sync_pairs_src.append(sidx[j[ok]])
                sync_pairs_dst_h.append(host_pos[s_rt[sel2[ok]]])
                sync_hta.append(np.ones(int(ok.sum()), bool))
        # Event Sync / Stream Wait Event: the op recorded by the cudaEventRecord waited on
        ev_sel = np.flatnonzero(np.isin(s_name, ["Event Sync", "Stream Wait Event"]) & (s_rt >= 0))
        if ev_sel.size:
            rec_corr, rec_stream = _event_record_targets(
                trace, sync_rows[ev_sel], s_rt[ev_sel], sync_args_df, names, corr_all, ts_all, pid_all, tid_all,
                stream_all, dev_rows_all, launcher_all)
            # launches per (gpu, stream) in the full trace, by launcher ts
            rec_rows = rt_by_corr.get(rec_corr)
            for ii, si in enumerate(ev_sel):
                rr = int(rec_rows[ii])
                if rec_corr[ii] < 0 or rec_stream[ii] < 0 or rr < 0:
                    continue
                src_dev_row = _prev_launch_op(int(s_dev[si]), int(rec_stream[ii]), ts_all[rr], dev_rows_all,
                                              launcher_all, ts_all, pid_all, stream_all, launch_all_mask)
                if src_dev_row < 0:
                    continue
                src_j = dev_index_of_row[src_dev_row]
                if src_j < 0:
                    continue
                if s_name[si] == "Event Sync":
                    if not in_win_ctx[si] or host_pos[s_rt[si]] < 0:
                        continue
                    sync_pairs_src.append(np.array([src_j]))
                    sync_pairs_dst_h.append(np.array([host_pos[s_rt[si]]]))
                    sync_hta.append(np.array([True]))
                else:
                    call = s_rt[si]
                    dest_row = _next_launch_op(int(pid_all[call]), int(tid_all[call]), int(s_stream[si]),
                                               ts_all[call], dev_rows_all, launcher_all, ts_all, pid_all,
                                               tid_all, stream_all, launch_all_mask)
                    if dest_row < 0:
                        continue
                    dj = dev_index_of_row[dest_row]
                    if dj < 0 or s_end[si] > d_ts[dj]:
                        continue
                    gpu_sync_src[dj] = src_j
    elif kd:
        # no cuda_sync rows: synchronising calls by name wait on every stream of the device
        sync_call = np.flatnonzero(_name_mask(names, lambda n: n in _SYNC_NAMES)[host_rows])
        key_ds = d_dev[so] * (1 << 32) + (d_stream[so] & 0xFFFFFFFF)
        for sk in pd.unique(key_ds):
            m = key_ds == sk
            sts = d_ts[so][m]
            sidx = so[m]
            j = np.searchsorted(sts, h_end[sync_call], side="left") - 1
            ok = j >= 0
            sync_pairs_src.append(sidx[j[ok]])
            sync_pairs_dst_h.append(sync_call[ok])
            sync_hta.append(np.zeros(int(ok.sum()), bool))
    # blocking copies (replay only): a copy/memset call that covers its own op (by correlation): the op starts
    # inside the call and ends before it returns, or at most SKEW_MAX_NS after (clock skew) when the call
    # lasted at least 90 % of the op (an asynchronous copy returns long before its op ends)
    if kd:
        copy_op = cat_is((schema.GPU_MEMCPY, schema.GPU_MEMSET))[dev_rows]
        c_dur = h_end[d_lpos] - h_ts[d_lpos]
        bl = copy_op & (d_ts >= h_ts[d_lpos]) & (d_ts < h_end[d_lpos]) & (
            (d_end <= h_end[d_lpos])
            | ((d_end - h_end[d_lpos] <= SKEW_MAX_NS) & (10 * c_dur >= 9 * (d_end - d_ts))))
        sync_pairs_src.append(ev_dev[bl])
        sync_pairs_dst_h.append(d_lpos[bl])
        sync_hta.append(np.zeros(int(bl.sum()), bool))

    # ---- launch / stream / gpu_sync edges with HTA's choice
    if kd:
        g_src = gpu_sync_src
        has_g = g_src >= 0
        g_end = np.where(has_g, d_end[np.clip(g_src, 0, None)], -_BIG)
        rt_ts = h_ts[d_lpos]
        has_prev = prev >= 0
        prev_end = np.where(has_prev, d_end[np.clip(prev, 0, None)], -_BIG)
        cond_launch = (q_rt == 1) & (q_k == 0) & (~has_prev | (prev_end < rt_ts)) & (~has_g | (g_end < rt_ts))
        cond_kk = ~cond_launch & has_prev & (~has_g | (g_end < prev_end))
        # gpu_sync edges
        gi = np.flatnonzero(has_g)
        srcs.append(de(g_src[gi]))
        dsts.append(ds(gi))
        kinds.append(np.full(gi.size, GPU_SYNC, np.int8))
        owners.append(np.full(gi.size, -1, np.int64))
        htaw.append(np.zeros(gi.size, np.int64))
        wmins.append(np.zeros(gi.size, np.int64))
        vias.append(_none(gi.size))
        # launch edges (all; HTA weight only where HTA adds it). The replay's floor: the median delay of
        # launches of computation/copies onto an empty stream; a communication kernel's "launch delay" is
        # mostly its wait for the other ranks (tens of ms after an NCCL launch), not the launch itself
        ldelay = d_ts - rt_ts
        d_comm = comm_all[dev_rows]
        bound_l = cond_launch & (ldelay >= 0)
        lq_of = bound_l & ~d_comm if (bound_l & ~d_comm).any() else bound_l
        lq = int(np.median(ldelay[lq_of])) if lq_of.any() else int(max(0, ldelay.min()))
        srcs.append(hs(d_lpos))
        dsts.append(ds(ev_dev))
        kinds.append(np.full(kd, LAUNCH, np.int8))
        owners.append(host_rows[d_lpos])
        htaw.append(np.where(cond_launch, ldelay, -1))
        wmins.append(np.minimum(ldelay, lq))
        vias.append(_none(kd))
        # stream edges; ops that overlap on one stream in the measurement (the next starts before the
        # previous ends): from the previous op's start, tied to its duration (clamped, not dropped)
        pi = np.flatnonzero(has_prev)
        gap = d_ts[pi] - prev_end[pi]
        # the replay's floor: the median gap behind an op launched while its predecessor still ran (truly
        # queued; HTA's queue-length test also counts launch-bound gaps when its counters disagree)
        gq_mask = (rt_ts[pi] < prev_end[pi]) & (gap >= 0)
        gq = int(np.median(gap[gq_mask])) if gq_mask.any() else 0
        ovl = gap < 0
        srcs.append(np.where(ovl, ds(prev[pi]), de(prev[pi])))
        dsts.append(ds(pi))
        kinds.append(np.full(pi.size, STREAM, np.int8))
        owners.append(dev_rows[prev[pi]])
        htaw.append(np.where(cond_kk[pi] & ~ovl, np.maximum(gap, 0), -1))
        wmins.append(np.where(ovl, d_ts[pi] - d_ts[prev[pi]], np.minimum(np.maximum(gap, 0), gq)))
        vias.append(np.where(ovl, prev[pi], -1))
    else:
        lq = gq = 0
    # sync edges
    if sync_pairs_src:
        s_src = np.concatenate(sync_pairs_src).astype(np.int64)
        s_dsth = np.concatenate(sync_pairs_dst_h).astype(np.int64)
        s_hta = np.concatenate(sync_hta)
        ok = s_dsth >= 0
        s_src, s_dsth, s_hta = s_src[ok], s_dsth[ok], s_hta[ok]
        # keep one edge per (src, dst); HTA flag if any
        if s_src.size:
            key = s_src * (kh + 1) + s_dsth
            dfk = pd.DataFrame({"k": key, "h": s_hta}).groupby("k", sort=False)["h"].max()
            s_src = (dfk.index.to_numpy() // (kh + 1)).astype(np.int64)
            s_dsth = (dfk.index.to_numpy() % (kh + 1)).astype(np.int64)
            s_hta = dfk.to_numpy()
        # A wait is an edge, not a duration: a call waited when its latest source op ended after the
        # call's last interval began; that interval then weighs only the return latency (from the later
        # of its start and the op's end to the return) and every sync edge into the call that latency,
        # so the call returns when the op ends, plus that latency. A call that did not wait keeps its
        # host time and its sync edges weigh 0. Under clock skew (the op ends after the return, at most
        # SKEW_MAX_NS) the edge runs from the op's start, weighing the op's duration less the skew.
        w_sync = np.zeros(s_src.size, np.int64)
        skew = np.zeros(s_src.size, bool)
        if s_src.size:
            over = d_end[s_src] - h_end[s_dsth]
            skew = (over > 0) & (over <= SKEW_MAX_NS) & (d_ts[s_src] < h_end[s_dsth])
            ok = (over <= 0) | skew  # the others run backwards and are dropped below
            d_last = np.full(kh, -_BIG, np.int64)
            np.maximum.at(d_last, s_dsth[ok], d_end[s_src[ok]])
            if kh:
                u_last = np.full(kh, _BIG, np.int64)
                u_last[v_ev[last_in]] = u_time[last_in]
                waited = d_last > u_last
                le = last_in[waited[v_ev[last_in]]]
                c = v_ev[le]
                wdt[le] = np.minimum(wdt[le], np.maximum(0, h_end[c] - np.maximum(u_time[le], d_last[c])))
                w_sync = np.where(waited[s_dsth], np.maximum(0, h_end[s_dsth] - d_last[s_dsth]), 0)
            w_sync = np.where(skew, h_end[s_dsth] - d_ts[s_src], w_sync)
        srcs.append(np.where(skew, ds(s_src), de(s_src)))
        dsts.append(he(s_dsth))
        kinds.append(np.full(s_src.size, SYNC, np.int8))
        owners.append(host_rows[s_dsth])
        htaw.append(np.where(s_hta & ~skew, 0, -1))
        wmins.append(w_sync)
        vias.append(np.where(skew, s_src, -1))

    # ---- fwdbwd flows: forward op end -> backward op start (replay only)
    fl = trace.flows
    if len(fl) and kh:
        f = fl[(fl["cat"].astype(str) == "fwdbwd") & (fl["dst_ts_ns"] >= 0)]
        if len(f):
            s_node = _host_event_at(f["src_pid"].to_numpy(np.int64), f["src_tid"].to_numpy(np.int64),
                                    f["src_ts_ns"].to_numpy(np.int64), tkey, h_ts, hcat_hta)
            d_node = _host_event_at(f["dst_pid"].to_numpy(np.int64), f["dst_tid"].to_numpy(np.int64),
                                    f["dst_ts_ns"].to_numpy(np.int64), tkey, h_ts, hcat_hta)
            ok = (s_node >= 0) & (d_node >= 0)
            s_node, d_node = s_node[ok], d_node[ok]
            srcs.append(he(s_node))
            dsts.append(hs(d_node))
            kinds.append(np.full(s_node.size, FWDBWD, np.int8))
            owners.append(np.full(s_node.size, -1, np.int64))
            htaw.append(np.full(s_node.size, -1, np.int64))
            wmins.append(np.zeros(s_node.size, np.int64))
            vias.append(_none(s_node.size))

    if srcs:
        src = np.concatenate(srcs).astype(np.int64)
        dst = np.concatenate(dsts).astype(np.int64)
        kind = np.concatenate(kinds).astype(np.int8)
        owner = np.concatenate(owners).astype(np.int64)
        hta_w = np.concatenate(htaw).astype(np.int64)
        wmin = np.concatenate(wmins).astype(np.int64)
        via = np.concatenate(vias).astype(np.int64)
    else:
        src = dst = owner = hta_w = wmin = via = np.zeros(0, np.int64)
        kind = np.zeros(0, np.int8)
    fwd = src < dst
    dropped = int((~fwd).sum())
    # replay weights: never more than measured; the binding edge of each node absorbs the rest
    meas = t_sorted[dst] - t_sorted[src]
    wmin = np.minimum(wmin, meas)
    wmin = _tighten(t_sorted, src, dst, wmin)
    # weights tied to a device op: via its device edge, offset so that the unchanged replay is exact
    dep_via = dep_off = None
    if (via >= 0).any():
        dev_edge = np.full(kd, -1, np.int64)
        de_idx = np.flatnonzero(kind == DEVICE)
        dev_edge[_dev_index(dev_rows, owner[de_idx])] = de_idx
        dep_via = np.where(via >= 0, dev_edge[np.clip(via, 0, None)], -1)
        dep_off = np.where(dep_via >= 0, wmin - wmin[np.clip(dep_via, 0, None)], 0)

    # ---- per-event flags and node steps
    rows = np.concatenate([host_rows, dev_rows])
    start_nodes = np.concatenate([hs(ev_local), ds(ev_dev)]) if rows.size else np.zeros(0, np.int64)
    end_nodes = np.concatenate([he(ev_local), de(ev_dev)]) if rows.size else np.zeros(0, np.int64)
    dl = _name_mask(names, _is_dataloader)[rows] & (dev_col[rows] < 0)
    is_comm = comm_all[rows]
    is_launch_call = np.zeros(rows.size, bool)
    if kd:
        is_launch_call[d_lpos] = True
    is_launch_call[:kh] |= launch_h
    is_blocking = np.zeros(rows.size, bool)
    is_blocking[:kh] = blocking_h
    step_col = ev["step"].to_numpy(np.int64)
    ev_step = np.concatenate([step_col[host_rows], step_col[dev_launcher]])
    node_step = np.empty(n_nodes, np.int64)
    node_step[start_nodes] = ev_step
    node_step[end_nodes] = ev_step
    return Graph(rows=rows, start=start_nodes, end=end_nodes, t=t_sorted, node_row=node_row, src=src, dst=dst,
                 kind=kind, owner=owner, hta_w=hta_w, wmin=wmin, node_step=node_step, is_dataloader=dl,
                 is_comm=is_comm, is_launch_call=is_launch_call, is_blocking=is_blocking,
                 is_step_range=step_rows_all[rows], dropped_edges=dropped,
                 window=(w0, w1), queued_gap_ns=int(gq), launch_delay_ns=int(lq), dep_via=dep_via, dep_off=dep_off)


def _dev_index(dev_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Index into ``dev_rows`` of each of ``rows`` (all present)."""
    o = np.argsort(dev_rows, kind="stable")
    return np.asarray(o[np.searchsorted(dev_rows[o], rows)])


@per_trace
def whole_graph(trace: Trace) -> Graph:
    """``build_graph(trace)`` (the whole trace, default arguments), built once per trace (the memo of
    :mod:`nbprof.analysis._memo`): :func:`~nbprof.analysis.critical_path.critical_path` of the whole trace and
    every :func:`nbprof.analysis.whatif.predict` of it share one graph (issue 20).

    Returns
    -------
    Graph
    """
    return build_graph(trace)


def clear_whole_graphs() -> None:
    """Forget every memoised result (:func:`nbprof.analysis._memo.clear`), the whole-trace graphs with them."""
    clear_memo()
