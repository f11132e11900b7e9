"""The host-side edges of :func:`~nbprof.analysis.critical_path.graph.build_graph`: ``host`` (consecutive
markers of one thread), ``wake`` (another thread woke this one up) and ``fwdbwd`` (forward op -> its backward
op); see the package docstring for each kind and its source of truth."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .edges import _enqueue_edges, _host_event_at, _wake_edges
from .model import FWDBWD, HOST, WAKE
from .nodes import EdgeBlock, Selection, block


class Intervals(NamedTuple):
    """The host intervals: marker ``a_idx[e]`` -> the next marker of its thread (one ``host`` edge ``e``).

    ``u_*`` / ``v_*``: the interval's first / second marker (``*_ev`` the host event index, ``*_st`` a start,
    ``*_node`` the node, ``*_time`` ns); ``own_local`` the innermost open event over it (-1 none); ``dt`` its
    length, ns; ``gap_like``: outside any op (or only inside a ``ProfilerStep`` range). ``m_*``: per marker in
    call-stack order (event, start flag, thread key, time ns, node)."""

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
        gap_like=(own_local < 0) | step_range_h[np.clip(own_local, 0, None)], m_ev=m_ev, m_thread=m_thread,
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


def host_edges(sel: Selection) -> HostEdges | None:
    """The ``host`` edges (one per interval; owner the innermost open event's row, HTA's weight, replay weight
    the interval's length or, for a gap another thread woke up, the wake-up latency, ns) and the ``wake`` edges
    (replay only), or None when the window has no host events."""
    if sel.kh == 0:
        return None
    iv = intervals(sel)
    wk_src, wk_dst, wk_lat, wk_edge = _wakes(sel, iv)
    # the first marker of a thread that starts after others: woken up the same way
    first_m = np.flatnonzero(np.concatenate([[True], ~iv.same]))
    f_src, f_dst, f_lat, _ = _wake_edges(iv.m_time, iv.m_node, iv.m_thread, sel.pid_all[sel.host_rows][iv.m_ev],
                                         first_m - 1, np.ones(first_m.size, bool), first=True)
    wdt = iv.dt.copy()
    wdt[wk_edge] = np.minimum(wdt[wk_edge], wk_lat)  # the gap then only costs the wake-up latency
    # the last interval inside each host event (ends at its end, owned by it): a wait shortens it below
    last_in = np.flatnonzero((~iv.v_st) & (iv.own_local == iv.v_ev))
    own = iv.own_local
    host = block(iv.u_node, iv.v_node, HOST, owner=np.where(own >= 0, sel.host_rows[np.clip(own, 0, None)], -1),
                 hta_w=_hta_host_weights(sel, iv), wmin=wdt)
    wake = block(np.concatenate([wk_src, f_src]), np.concatenate([wk_dst, f_dst]), WAKE,
                 wmin=np.concatenate([wk_lat, f_lat]))
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

