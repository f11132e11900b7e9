"""The host-side edges of :func:`~nbprof.analysis.critical_path.graph.build_graph`: ``host`` (consecutive
markers of one thread), ``wake`` (another thread woke this one up) and ``fwdbwd`` (forward op -> its backward
op); see the package docstring for each kind and its source of truth."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from .edges import _enqueue_edges, _host_event_at, _wake_edges
from .model import _BIG, FWDBWD, HOST, WAKE
from .nodes import EdgeBlock, Selection, block


class Intervals(NamedTuple):
    """The host intervals: marker ``a_idx[e]`` -> the next marker of its thread (one ``host`` edge ``e``).

    ``u_*`` / ``v_*``: the interval's first / second marker (``*_ev`` the host event index, ``*_st`` a start,
    ``*_node`` the node, ``*_time`` ns); ``own_local`` the innermost open event over it (-1 none); ``dt`` its
    length, ns; ``gap_like``: outside any op (or only inside a ``ProfilerStep`` range). ``m_*``: per marker in
    call-stack order, thread by thread (event, start flag, thread key, time ns, node)."""

    a_idx: np.ndarray
    same: np.ndarray
    u_ev: np.ndarray
    v_ev: np.ndarray
    u_st: np.ndarray
    v_st: np.ndarray
    u_node: np.ndarray
    v_node: np.ndarray
    u_time: np.ndarray
    v_time: np.ndarray
    own_local: np.ndarray
    dt: np.ndarray
    gap_like: np.ndarray
    m_ev: np.ndarray
    m_st: np.ndarray
    m_thread: np.ndarray
    m_time: np.ndarray
    m_node: np.ndarray


class HostEdges(NamedTuple):
    """What :func:`host_edges` returns: the ``host`` and ``wake`` edges, the intervals of the ``host`` edges
    (:class:`Intervals`) and ``last_in``, the ``host`` edges that are the last interval inside their owner
    (they end at its end: a wait on a device op shortens them, :func:`~.sync_edges.sync_edges`)."""

    host: EdgeBlock
    wake: EdgeBlock
    iv: Intervals
    last_in: np.ndarray


def intervals(sel: Selection) -> Intervals:
    """The consecutive marker pairs of each host thread (see :class:`Intervals`); ``sel.kh`` must be > 0."""
    kh, order = sel.kh, sel.order
    m_ev = np.where(order < kh, order, order - kh)
    m_isstart = order < kh
    m_thread = sel.tkey[m_ev]
    same = m_thread[1:] == m_thread[:-1]
    a_idx = np.flatnonzero(same)
    u_ev, v_ev = m_ev[a_idx], m_ev[a_idx + 1]
    u_st, v_st = m_isstart[a_idx], m_isstart[a_idx + 1]
    # owner: innermost open event after marker u (start: itself, end: its parent)
    own_local = np.where(u_st, u_ev, sel.parent[u_ev])
    u_time = np.where(u_st, sel.h_ts[u_ev], sel.h_end[u_ev])
    v_time = np.where(v_st, sel.h_ts[v_ev], sel.h_end[v_ev])
    step_range_h = sel.step_rows_all[sel.host_rows]
    return Intervals(
        a_idx=a_idx, same=same, u_ev=u_ev, v_ev=v_ev, u_st=u_st, v_st=v_st,
        u_node=np.where(u_st, sel.hs(u_ev), sel.he(u_ev)), v_node=np.where(v_st, sel.hs(v_ev), sel.he(v_ev)),
        u_time=u_time, v_time=v_time, own_local=own_local, dt=v_time - u_time,
        gap_like=(own_local < 0) | step_range_h[np.clip(own_local, 0, None)], m_ev=m_ev, m_st=m_isstart,
        m_thread=m_thread,
        m_time=np.where(m_isstart, sel.h_ts[m_ev], sel.h_end[m_ev]),
        m_node=np.where(m_isstart, sel.hs(m_ev), sel.he(m_ev)))


def _hta_host_weights(sel: Selection, iv: Intervals) -> np.ndarray:
    """HTA's weight of each interval (ns): its length when an HTA-eligible event is open over it, except the
    last interval of a blocking call (HTA weighs that wait 0); 0 otherwise."""
    hta_own = np.where(iv.u_st, sel.near[iv.u_ev], sel.hta_parent[iv.u_ev])
    blocking_end = (~iv.v_st) & sel.blocking_h[iv.v_ev] & (hta_own == iv.v_ev)
    return np.where((hta_own >= 0) & ~blocking_end, iv.dt, 0)


def _wakes(sel: Selection, iv: Intervals) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``wake`` edges into the gaps (source node, destination node, latency ns, index of the interval served):
    a gap that ends just after another thread of the process did something; a collective backend's worker
    thread (gloo) woken by the ``c10d::`` op that enqueued its work; the thread waiting for a collective
    woken by the end of the backend range."""
    gap = iv.gap_like & (iv.dt > 0)
    pid_h = sel.pid_all[sel.host_rows]
    wk_src, wk_dst, wk_lat, wk_edge = _wake_edges(iv.m_time, iv.m_node, iv.m_thread, pid_h[iv.m_ev], iv.a_idx, gap)
    c10d_h = np.flatnonzero(sel.host_mask(lambda n: n.startswith("c10d::")))
    backend_h = sel.host_mask(lambda n: n.startswith(("gloo:", "mpi:", "ucc:")))
    v_ev, tk = iv.v_ev, sel.tkey
    q_src, q_edge, q_lat = _enqueue_edges(gap, iv.v_st & backend_h[v_ev], iv.u_time, sel.h_ts[v_ev], tk[v_ev],
                                          pid_h[v_ev], sel.h_ts[c10d_h], sel.hs(c10d_h), tk[c10d_h], pid_h[c10d_h])
    # ... and the thread that waits for the collective (work.wait(), DDP's reducer) resumes when the backend
    # range ends, however late (a loaded machine): the wait is an edge from that end, not the gap's length
    bk_h = np.flatnonzero(backend_h)
    c_src, c_edge, c_lat = _enqueue_edges(gap, np.ones(v_ev.size, bool), iv.u_time, iv.v_time, tk[v_ev],
                                          pid_h[v_ev], sel.h_end[bk_h], sel.he(bk_h), tk[bk_h], pid_h[bk_h])
    return (np.concatenate([wk_src, q_src, c_src]), np.concatenate([wk_dst, iv.v_node[q_edge], iv.v_node[c_edge]]),
            np.concatenate([wk_lat, q_lat, c_lat]), np.concatenate([wk_edge, q_edge, c_edge]))


def _resumes_inside(sel: Selection, iv: Intervals) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``wake`` edges for a thread that resumes from a collective *before* the backend range closes: a gap
    ``(u, v]`` of thread T (not a backend thread) that ends while a backend range (``gloo:``/``mpi:``/``ucc:``) of
    another thread of the process, started at s, is still open (s < v < its end), T having started nothing from
    s to u (it finished the op that enqueued the collective, then waited). The backend completes the work (the future the waiter
    blocks on) before its profiler range closes, and on a busy machine the backend thread can lose its core
    for milliseconds in between (a real 2-rank gloo run: resumed 0.8-3 ms before the range's end in 2 of 8
    all-reduces), so the waiter resumes inside the range. The edge runs from the start of the backend thread's
    interval holding v to v and is tied to that interval (``via``, an index among ``intervals``' edges): it
    weighs the interval's replay weight less the measured tail after v, so the resume moves with the collective
    (shortened by ``balance_ranks``, removed by ``overlap_communication``) -- the wait is an edge to what it
    waits for. Returns the source nodes, the indices of the gaps served (their own weight becomes 0: the thread
    does nothing but wait), the edge weights (ns, as measured) and the tied interval of each."""
    z = np.zeros(0, np.int64)
    bk = np.flatnonzero(sel.host_mask(lambda n: n.startswith(("gloo:", "mpi:", "ucc:"))))
    tk = sel.tkey
    # a backend worker thread waits for work, not for a collective (its gaps are the enqueue hand-offs)
    gap = np.flatnonzero(iv.gap_like & (iv.dt > 0) & ~np.isin(iv.m_thread[iv.a_idx], tk[bk]))
    if gap.size == 0 or bk.size == 0:
        return z, z, z, z
    pid_h = sel.pid_all[sel.host_rows]
    # the latest backend range started before each gap's end, in the gap's process
    shift = np.int64(1) << np.int64(47)
    pinv, _u = pd.factorize(np.concatenate([pid_h[bk], pid_h[iv.v_ev[gap]]]))
    bp, gp = pinv[: bk.size].astype(np.int64), pinv[bk.size:].astype(np.int64)
    t0 = min(int(sel.h_ts[bk].min()), int(iv.v_time[gap].min()))
    o = np.argsort(bp * shift + (sel.h_ts[bk] - t0), kind="stable")
    keys = (bp * shift + (sel.h_ts[bk] - t0))[o]
    v = iv.v_time[gap]
    j = np.searchsorted(keys, gp * shift + (v - t0), side="left") - 1
    ok = j >= 0
    b = bk[o[np.clip(j, 0, None)]]
    s = sel.h_ts[b]
    ok &= (bp[o[np.clip(j, 0, None)]] == gp) & (s < v) & (sel.h_end[b] > v) & (tk[b] != tk[iv.v_ev[gap]])
    # T started nothing from s to u: the latest start marker of its thread at or before u is before s
    ls = pd.Series(np.where(iv.m_st, iv.m_time, -_BIG))
    last_start = ls.groupby(iv.m_thread, sort=False).cummax().to_numpy(np.int64)
    ok &= last_start[iv.a_idx[gap]] < s
    if not ok.any():
        return z, z, z, z
    gap, b, v = gap[ok], b[ok], v[ok]
    # the backend thread's interval holding v: its last marker at or before v (markers are in thread, time order)
    th_inv, th_keys = pd.factorize(iv.m_thread)
    t1 = int(iv.m_time.min())
    mkey = th_inv.astype(np.int64) * shift + (iv.m_time - t1)
    bth = pd.Index(th_keys).get_indexer(tk[b]).astype(np.int64)  # every host event has markers
    m = np.searchsorted(mkey, bth * shift + (v - t1), side="right") - 1
    edge_of = np.full(iv.m_time.size, -1, np.int64)
    edge_of[iv.a_idx] = np.arange(iv.a_idx.size)
    mm = np.clip(m, 0, None)
    good = (m >= 0) & (th_inv[mm] == bth) & (edge_of[mm] >= 0) & (iv.m_time[mm] < v)
    ie = edge_of[mm]
    good &= iv.v_time[np.clip(ie, 0, None)] > v
    return iv.m_node[mm][good], gap[good], (v - iv.m_time[mm])[good], ie[good]


def host_edges(sel: Selection) -> HostEdges | None:
    """The ``host`` edges (one per interval; owner the innermost open event's row, HTA's weight, replay weight
    the interval's length or, for a gap another thread woke up, the wake-up latency, ns; 0 for a gap that
    resumes inside a collective backend range, :func:`_resumes_inside`) and the ``wake`` edges (replay only),
    or None when the window has no host events. The ``host`` block is the first of the graph's edges, so an
    interval's index here is its edge index (the ``via_edge`` of the tied ``wake`` edges)."""
    if sel.kh == 0:
        return None
    iv = intervals(sel)
    wk_src, wk_dst, wk_lat, wk_edge = _wakes(sel, iv)
    # the first marker of a thread that starts after others: woken up the same way
    first_m = np.flatnonzero(np.concatenate([[True], ~iv.same]))
    f_src, f_dst, f_lat, _ = _wake_edges(iv.m_time, iv.m_node, iv.m_thread, sel.pid_all[sel.host_rows][iv.m_ev],
                                         first_m - 1, np.ones(first_m.size, bool), first=True)
    r_src, r_edge, r_w, r_via = _resumes_inside(sel, iv)
    wdt = iv.dt.copy()
    wdt[wk_edge] = np.minimum(wdt[wk_edge], wk_lat)  # the gap then only costs the wake-up latency
    wdt[r_edge] = 0  # ... or nothing: the thread resumes when the collective it waits for completes
    # the last interval inside each host event (ends at its end, owned by it): a wait shortens it below
    last_in = np.flatnonzero((~iv.v_st) & (iv.own_local == iv.v_ev))
    own = iv.own_local
    host = block(iv.u_node, iv.v_node, HOST, owner=np.where(own >= 0, sel.host_rows[np.clip(own, 0, None)], -1),
                 hta_w=_hta_host_weights(sel, iv), wmin=wdt)
    none = np.full(wk_src.size + f_src.size, -1, np.int64)
    wake = block(np.concatenate([wk_src, f_src, r_src]), np.concatenate([wk_dst, f_dst, iv.v_node[r_edge]]), WAKE,
                 wmin=np.concatenate([wk_lat, f_lat, r_w]), via_edge=np.concatenate([none, r_via]))
    return HostEdges(host=host, wake=wake, iv=iv, last_in=last_in)


def fwdbwd_edges(sel: Selection) -> EdgeBlock | None:
    """``fwdbwd`` edges (replay only): forward op end -> backward op start, from ``trace.flows`` of category
    ``fwdbwd`` whose ends are HTA-eligible host events of the window; None when there are none to look at."""
    fl = sel.trace.flows
    if not (len(fl) and sel.kh):
        return None
    f = fl[(fl["cat"].astype(str) == "fwdbwd") & (fl["dst_ts_ns"] >= 0)]
    if not len(f):
        return None
    s_node = _host_event_at(f["src_pid"].to_numpy(np.int64), f["src_tid"].to_numpy(np.int64),
                            f["src_ts_ns"].to_numpy(np.int64), sel.tkey, sel.h_ts, sel.hcat_hta)
    d_node = _host_event_at(f["dst_pid"].to_numpy(np.int64), f["dst_tid"].to_numpy(np.int64),
                            f["dst_ts_ns"].to_numpy(np.int64), sel.tkey, sel.h_ts, sel.hcat_hta)
    ok = (s_node >= 0) & (d_node >= 0)
    return block(sel.he(s_node[ok]), sel.hs(d_node[ok]), FWDBWD)

