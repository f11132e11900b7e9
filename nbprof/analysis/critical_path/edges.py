"""Edge helpers of :func:`~nbprof.analysis.critical_path.graph.build_graph`: wake-up inference, host event
lookup for flows, the ``cudaEventRecord`` an event wait refers to, and the replay-weight tightening."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace.model import Trace
from ...trace.predicates import name_mask as _name_mask
from .model import _BIG, WAKE_MAX_NS


def _wake_edges(m_time: np.ndarray, m_node: np.ndarray, m_thread: np.ndarray, m_pid: np.ndarray, a_idx: np.ndarray,
                cand: np.ndarray, first: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``wake`` edges for the host gaps ``cand`` (edge i runs from marker ``a_idx[i]`` to the next;
    ``first``: the next markers are the first of their threads, the gap starts at -infinity).

    For a gap ``(a, b]`` on thread T: the latest marker of another thread of the same process at or
    before ``b``; an edge from it when it lies after ``a`` and at most ``WAKE_MAX_NS`` before ``b``.
    Returns source nodes, destination nodes, latencies (ns) and the indices of the gaps they serve.
    """
    z = np.zeros(0, np.int64)
    ci = np.flatnonzero(cand)
    if ci.size == 0 or m_time.size == 0:
        return z, z, z, z
    pinv, upid = pd.factorize(m_pid)
    if pd.unique(m_thread).size == upid.size:  # one thread per process: nobody to wake anyone
        return z, z, z, z
    shift = np.int64(1) << np.int64(47)
    key = pinv.astype(np.int64) * shift + m_time
    po = np.argsort(key, kind="stable")
    ks = key[po]
    th = m_thread[po]
    pp = pinv[po]
    # index of the latest earlier marker on a different thread (same process), per sorted position
    run_start = np.ones(po.size, bool)
    run_start[1:] = th[1:] != th[:-1]
    rs_idx = np.maximum.accumulate(np.where(run_start, np.arange(po.size), 0))
    prev_diff = rs_idx - 1
    bad = prev_diff >= 0
    bad[bad] = pp[prev_diff[bad]] != pp[bad]
    prev_diff[~bad & (prev_diff >= 0)] = prev_diff[~bad & (prev_diff >= 0)]
    prev_diff[bad] = -1
    a_pos, b_pos = a_idx[ci], a_idx[ci] + 1
    b_t = m_time[b_pos]
    a_t = np.full(b_t.size, -_BIG) if first else m_time[a_pos]
    kb = pinv[b_pos].astype(np.int64) * shift + b_t
    j = np.searchsorted(ks, kb, side="right") - 1
    same_t = th[j] == m_thread[b_pos]
    j = np.where(same_t, prev_diff[j], j)
    ok = j >= 0
    jj = np.clip(j, 0, None)
    ok &= pp[jj] == pinv[b_pos]
    tj = ks[jj] - pp[jj].astype(np.int64) * shift
    ok &= (tj > a_t) & (b_t - tj <= WAKE_MAX_NS)
    src_node = m_node[po[jj]]
    return src_node[ok], m_node[b_pos][ok], (b_t - tj)[ok], ci[ok]


def _host_event_at(pid: np.ndarray, tid: np.ndarray, t: np.ndarray, tkey: np.ndarray, h_ts: np.ndarray,
                   eligible: np.ndarray) -> np.ndarray:
    """Index of the host event (among the graph's, HTA-eligible) starting exactly at ``t`` on (pid, tid)."""
    key = pid * (1 << 32) + (tid & 0xFFFFFFFF)
    idx = np.flatnonzero(eligible)
    if idx.size == 0:
        return np.full(t.size, -1, np.int64)
    o = np.lexsort((h_ts[idx], tkey[idx]))
    sk, st = tkey[idx][o], h_ts[idx][o]
    # search composite key
    comp = pd.MultiIndex.from_arrays([sk, st])
    q = pd.MultiIndex.from_arrays([key, t])
    j = comp.get_indexer(q) if comp.is_unique else _first_indexer(sk, st, key, t)
    return np.where(j >= 0, idx[o][np.clip(j, 0, None)], -1)


def _first_indexer(sk: np.ndarray, st: np.ndarray, key: np.ndarray, t: np.ndarray) -> np.ndarray:
    df = pd.DataFrame({"k": sk, "t": st, "i": np.arange(sk.size)}).drop_duplicates(["k", "t"], keep="first")
    m = pd.DataFrame({"k": key, "t": t}).merge(df, on=["k", "t"], how="left")
    return np.asarray(m["i"].fillna(-1).to_numpy(np.int64))


def _prev_launch_op(gpu: int, stream: int, t: int, dev_rows_all: np.ndarray, launcher_all: np.ndarray,
                    ts_all: np.ndarray, pid_all: np.ndarray, stream_all: np.ndarray, launch_mask: np.ndarray) -> int:
    """Device op (row) of the last launch on (gpu, stream) whose call started at or before ``t``."""
    m = launch_mask & (pid_all[dev_rows_all] == gpu) & (stream_all[dev_rows_all] == stream)
    if not m.any():
        return -1
    lt = ts_all[launcher_all[m]]
    rows = dev_rows_all[m]
    o = np.argsort(lt, kind="stable")
    j = np.searchsorted(lt[o], t, side="right") - 1
    return int(rows[o][j]) if j >= 0 else -1


def _next_launch_op(pid: int, tid: int, stream: int, t: int, dev_rows_all: np.ndarray, launcher_all: np.ndarray,
                    ts_all: np.ndarray, pid_all: np.ndarray, tid_all: np.ndarray, stream_all: np.ndarray,
                    launch_mask: np.ndarray) -> int:
    """Device op (row) of the first launch from (pid, tid) onto ``stream`` whose call starts at or after ``t``."""
    la = launcher_all
    m = launch_mask & (pid_all[la] == pid) & (tid_all[la] == tid) & (stream_all[dev_rows_all] == stream)
    if not m.any():
        return -1
    lt = ts_all[la[m]]
    rows = dev_rows_all[m]
    o = np.argsort(lt, kind="stable")
    j = np.searchsorted(lt[o], t, side="left")
    return int(rows[o][j]) if j < rows.size else -1


def _event_record_targets(trace: Trace, sync_rows: np.ndarray, call_rows: np.ndarray, sync_args: pd.DataFrame | None,
                          names: pd.Series, corr_all: np.ndarray, ts_all: np.ndarray, pid_all: np.ndarray,
                          tid_all: np.ndarray, stream_all: np.ndarray, dev_rows_all: np.ndarray,
                          launcher_all: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(record correlation, record stream) per Event Sync / Stream Wait Event row."""
    n = sync_rows.size
    rec_corr = np.full(n, -1, np.int64)
    rec_stream = np.full(n, -1, np.int64)
    if sync_args is not None:
        sa = sync_args.drop_duplicates("correlation", keep="last").set_index("correlation")
        c = corr_all[sync_rows]
        got = sa.reindex(c)
        rec_corr = got["wait_on_cuda_event_record_corr_id"].fillna(-1).to_numpy(np.int64)
        rec_stream = got["wait_on_stream"].fillna(-1).to_numpy(np.int64)
        return rec_corr, rec_stream
    # heuristic: last cudaEventRecord on the waiting thread, on the stream of that thread's last launch
    rec = np.flatnonzero(_name_mask(names, lambda s: s == "cudaEventRecord"))
    for i in range(n):
        call = call_rows[i]
        m = rec[(pid_all[rec] == pid_all[call]) & (tid_all[rec] == tid_all[call]) & (ts_all[rec] <= ts_all[call])]
        if m.size == 0:
            continue
        r = m[np.argmax(ts_all[m])]
        rec_corr[i] = corr_all[r]
        la = launcher_all
        mm = (pid_all[la] == pid_all[call]) & (tid_all[la] == tid_all[call]) & (ts_all[la] <= ts_all[r])
        if mm.any():
            k = np.flatnonzero(mm)[np.argmax(ts_all[la[mm]])]
            rec_stream[i] = stream_all[dev_rows_all[k]]
    return rec_corr, rec_stream


def _tighten(t: np.ndarray, src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Raise the weight of each node's binding in-edge so that ``max(t[u] + w) == t[v]`` (measured)."""
    if src.size == 0:
        return w
    cand = t[src] + w
    n = t.size
    best = np.full(n, -_BIG, dtype=np.int64)
    np.maximum.at(best, dst, cand)
    deficit = t[dst] - best[dst]
    # one edge per node: the first edge reaching the max
    is_max = cand == best[dst]
    idx = np.flatnonzero(is_max)
    firsts = np.full(n, src.size, dtype=np.int64)
    np.minimum.at(firsts, dst[idx], idx)
    first = firsts[firsts < src.size]
    w = w.copy()
    w[first] += deficit[first]
    return w


def _enqueue_edges(cand: np.ndarray, v_start: np.ndarray, u_time: np.ndarray, v_time: np.ndarray,
                   v_tkey: np.ndarray, v_pid: np.ndarray, e_time: np.ndarray, e_node: np.ndarray, e_tkey: np.ndarray,
                   e_pid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``wake`` edges for the hand-offs between a thread and a collective backend's worker thread: a host gap
    ``cand & v_start`` (``u_time``..``v_time``) is ended by the latest event ``e_*`` (times, nodes, thread keys,
    pids) on another thread of the process that falls inside the gap, however long ago. Two uses: a gap that
    ends where a backend thread starts a collective (``gloo:<op>``) was enqueued by the latest ``c10d::`` op
    started during it (the worker idles until the work arrives); a gap of the thread that waits for a
    collective (``work.wait()``, DDP's reducer) is ended by the latest backend range *end* inside it (it
    resumes when the collective completes). Returns the source nodes, the edge indices served and the
    latencies (ns)."""
    z = np.zeros(0, np.int64)
    ci = np.flatnonzero(cand & v_start)
    if ci.size == 0 or e_time.size == 0:
        return z, z, z
    shift = np.int64(1) << np.int64(47)
    t0 = min(int(e_time.min()), int(v_time[ci].min()))
    o = np.argsort(e_pid * shift + (e_time - t0), kind="stable")
    keys = (e_pid * shift + (e_time - t0))[o]
    j = np.searchsorted(keys, v_pid[ci] * shift + (v_time[ci] - t0), side="right") - 1
    ok = j >= 0
    jj = o[np.clip(j, 0, None)]
    ok &= (e_pid[jj] == v_pid[ci]) & (e_tkey[jj] != v_tkey[ci]) & (e_time[jj] > u_time[ci])
    return e_node[jj[ok]], ci[ok], (v_time[ci] - e_time[jj])[ok]
