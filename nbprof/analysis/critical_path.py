"""Critical path of a trace (or of one step): the dependency graph, the longest path, slack.

The graph
---------
Every selected event becomes two *nodes*, its start and its end (times in int64 ns). Nodes are kept in
time order (ties: host markers in call-stack order, a device op's start before its end), and every edge
runs forward in that order, so the order is a topological order of the DAG (an edge that would run
backwards in time, e.g. from clock skew, is dropped and counted in ``dropped_edges``).

Selected events: host ``cpu_op``, ``user_annotation``, ``cuda_runtime`` and ``cuda_driver`` rows with
``dur_ns > 0``, and device ``kernel``/``gpu_memcpy``/``gpu_memset`` rows whose launching runtime call
(same ``correlation``) is selected. ``python_function`` rows are left out (they would only subdivide host
time), so are ``cuda_sync`` rows (they become edges) and ``gpu_user_annotation`` ranges (not work).

Edge kinds (``EDGE_KINDS``) and the source of truth of each:

``host``
    Consecutive markers (starts and ends, in call-stack order) on one host thread ``(pid, tid)``: the
    thread does one thing at a time. Source: ``ts_ns``/``dur_ns`` nesting on ``(pid, tid)``. Each such
    interval has an *owner*, the innermost event open over it (-1 between top-level ops).
``launch``
    Runtime call start -> the device op it launched. Source: the CUPTI ``correlation`` id.
``device``
    Device op start -> end (its duration).
``stream``
    End of the previous op -> start of the next op on one ``(device, stream)``: streams run in order.
``sync``
    Device op end -> end of the host call that waited for it. Source: Kineto ``cuda_sync`` rows
    (``Stream Sync``: last op on that stream; ``Context Sync``: last op on every stream; ``Event
    Sync``: the op recorded by the ``cudaEventRecord`` it waits on), joined to their runtime call by
    ``correlation``. Without ``cuda_sync`` rows (profiles recorded without them) the runtime names
    stand in: ``cudaDeviceSynchronize``/``cudaStreamSynchronize``/``cudaEventSynchronize`` wait on the
    last op that started before the call returned on every stream of the device. A *blocking copy*
    (a runtime call whose own device op ends before the call returns, e.g. ``cudaMemcpy`` to pageable
    memory) always gets one from its op.
``gpu_sync``
    ``cudaStreamWaitEvent``: the op recorded by the waited-on ``cudaEventRecord`` -> the next op
    launched on the waiting stream from the same thread (Kineto ``Stream Wait Event`` rows).
``fwdbwd``
    End of a forward op -> start of its backward op (``trace.flows`` of category ``fwdbwd``), which
    links the autograd thread to the main thread.
``wake``
    Another thread of the same process -> the end of a host gap on this thread: a gap outside any
    op (or inside only a ``ProfilerStep`` range), or the very first marker of a thread, that ends at
    most ``WAKE_MAX_NS`` (1 ms) after the other thread's latest marker is taken as that thread
    waking this one up (the main thread resuming when the autograd thread finishes ``backward``,
    the autograd thread starting when the main thread calls it). Kineto records no such event:
    this is an inference from timing, used by the replay only (the gap then costs only the wake-up
    latency, so a faster waker wakes it earlier).
``collective``
    Not built yet: the k-th collective of a communicator on each rank as one barrier needs several
    ranks' traces; one trace is analysed at a time here.

Which ``cudaEventRecord`` an ``Event Sync``/``Stream Wait Event`` waits on, and on which stream that
event was recorded, are Kineto args (``wait_on_cuda_event_record_corr_id``, ``wait_on_stream``) that
nbprof's loader does not keep as columns. :func:`build_graph` takes them as a ``sync_args`` frame (or
``trace.tables["cuda_sync"]`` when a source provides it); without them it assumes the last
``cudaEventRecord`` on the waiting thread before the wait, recorded on the stream of that thread's last
launch before the record (right for PyTorch's usual record-then-wait pattern; wrong when an event is
recorded on a stream the thread never launched on).

The critical path: HTA's definition
-----------------------------------
:func:`critical_path` reproduces Holistic Trace Analysis (HTA 0.5.0,
``hta/analyzers/critical_path_analysis.py``, ``CPGraph``): the longest path of the DAG with HTA's
edge *weights*: a host interval weighs its length when it lies inside an op (``cpu_op``,
``cuda_runtime``, ``cuda_driver``; ``user_annotation`` ranges are transparent) and 0 between top-level
ops (HTA's zero-weight ``DEPENDENCY`` edge) and inside a blocking call (``cudaDeviceSynchronize``,
``cudaStreamSynchronize``, ``cudaEventQuery``, ``cudaEventSynchronize``, ``cudaMemcpy``,
``cudaMemcpyAsync``: HTA's ``BLOCKING_SYNC_CALLS``, whose wait is covered by the sync edge instead); a
device op weighs its duration; a launch edge (launch delay) is used only when the stream was empty at
the launch (HTA's queue-length test: queue length 1 after the launch and 0 after the op starts, the
previous op on the stream ended before the launch), otherwise the stream edge (kernel-kernel delay)
is; sync and gpu_sync edges weigh 0. The window of a step is HTA's: host events that start inside it
and device ops launched inside it. Ties between equally long paths are broken as networkx's
``dag_longest_path`` does for HTA's graph (first predecessor in insertion order: the host edge before
sync edges). The tests check that the set of critical events equals HTA's on HTA's own four
critical-path traces (``tests/data/hta_critical_path``).

Where nbprof differs from HTA, and why:

* ``user_annotation`` ranges (``ProfilerStep#N``, the DataLoader's ``enumerate(DataLoader)#...``) are
  nodes of the graph (they carry zero weight where HTA has no edge), so they can appear in
  ``CriticalPath.events``; HTA has no node for them. Compare on the other categories.
* ``launch`` and ``stream`` edges are both in the graph (the replay needs both constraints); only
  the one HTA would add carries HTA's weight in the longest path, the other is not used there.
* Streams are keyed by ``(device, stream)``; HTA keys its last op per stream by stream id only.
* ``fwdbwd``, ``wake``, blocking-copy and the name-based ``sync`` fallback edges are replay edges only
  (HTA has none of them), so they never change the HTA path.
* HTA has no graph for several ranks either; nbprof analyses one trace at a time (``collective``).
* Inputs, not rules: HTA 0.5.0's trace parser left the last ``ProfilerStep`` range's events out of
  ``benchmarks/gen_kineto.py``'s traces (its dataframe ends where that step starts), so on those files
  HTA's set equals nbprof's on the window HTA kept (``window=``), checked by
  ``benchmarks/bench_critical_path.py``. HTA also rounds µs-with-decimals timestamps to integer µs,
  so its path *length* can differ by those fractions while the critical events are the same.

``CriticalPath.length_ns`` is the wall-clock span of the path (last node time - first node time) and
``breakdown`` splits exactly that span by what the path is doing; ``hta_length_ns`` is HTA's weighted
length (which leaves out host gaps between top-level ops and time inside blocking calls).

Slack
-----
``CriticalPath.slack_ns`` uses the replay model of :mod:`nbprof.analysis.whatif` (every edge weighs
what it measured: gaps are kept): the slack of an event is how much its end may move later without
moving the end of its step (the latest node time of the step), i.e. ``step_end - end - tail`` where
``tail`` is the longest replay path from the event's end to a node of the same step. Events on a
binding chain have 0; -1 marks events outside the graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ..trace import schema
from ..trace.model import Trace
from ..trace.predicates import is_communication, is_step_row, step_number
from ..trace.predicates import name_mask as _name_mask
from .steps import _is_dataloader

#: Edge kinds, codes in ``Graph.kind``.
EDGE_KINDS = ("host", "launch", "device", "stream", "sync", "gpu_sync", "fwdbwd", "collective", "wake")
HOST, LAUNCH, DEVICE, STREAM, SYNC, GPU_SYNC, FWDBWD, COLLECTIVE, WAKE = range(9)

#: A host gap that ends at most this long after another thread's marker (same process) is taken as
#: that thread waking this one up (``wake`` edge).
WAKE_MAX_NS = 1_000_000

#: Breakdown kinds of ``CriticalPath.breakdown`` (ns, they sum to ``length_ns``).
BREAKDOWN_KINDS = ("host_compute", "kernel_launch", "kernel", "memcpy_memset", "sync_wait", "communication",
                   "dataloader", "idle")

#: HTA ``CPGraph.BLOCKING_SYNC_CALLS``: the host interval inside them weighs 0 in HTA's path.
BLOCKING_CALLS = frozenset({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery",
                            "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync"})
#: Runtime calls that wait for device work when the trace has no ``cuda_sync`` rows.
_SYNC_NAMES = frozenset({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
                         "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize"})
#: HTA ``get_runtime_launch_events_query``: the launches that count in its queue length.
LAUNCH_NAMES = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync",
                          "cudaMemsetAsync", "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemsetAsync",
                          "hipMemcpyAsync", "hipMemcpyWithStream",
                          "runFunction - job_prep_and_submit_for_execution"})

_HOST_CATS = (schema.CPU_OP, schema.USER_ANNOTATION, schema.CUDA_RUNTIME, schema.CUDA_DRIVER)
_HTA_HOST_CATS = (schema.CPU_OP, schema.CUDA_RUNTIME, schema.CUDA_DRIVER)
_DEV_CATS = (schema.KERNEL, schema.GPU_MEMCPY, schema.GPU_MEMSET)
_BIG = np.int64(2**62)


# --------------------------------------------------------------------------------------------- graph
@dataclass
class Graph:
    """The dependency graph of a trace window (see the module docstring).

    Attributes
    ----------
    rows : ndarray int64 (k,)
        Positional row ids (into ``trace.events``) of the events in the graph.
    start, end : ndarray int64 (k,)
        Node ids of each event's start and end.
    t : ndarray int64 (n,)
        Measured time of each node, ns; nodes are in topological (time) order.
    node_row : ndarray int64 (n,)
        Row id of each node's event.
    src, dst, kind : ndarray (m,)
        Edges ``src -> dst`` (node ids, ``src < dst``) and their kind code (``EDGE_KINDS``).
    owner : ndarray int64 (m,)
        For ``host`` edges the row id of the innermost event open over the interval (-1 none), for
        ``device`` edges the op's row, else -1.
    hta_w : ndarray int64 (m,)
        HTA's weight of the edge, or -1 when the edge is not in HTA's graph.
    wmin : ndarray int64 (m,)
        Replay weight: what the edge measured, or, for an edge that did not bind, the smallest it
        could be (:mod:`nbprof.analysis.whatif` changes these).
    node_step : ndarray int64 (n,)
        Step of each node (host: the ``ProfilerStep`` range its event starts in; device: the step of
        its launching call), -1 outside steps.
    is_dataloader, is_comm, is_launch_call, is_blocking, is_step_range : ndarray bool (k,)
        Per event of ``rows``.
    dropped_edges : int
        Edges dropped because they ran backwards in time.
    queued_gap_ns, launch_delay_ns : int
        Median gap between an op and the one queued behind it on a stream, and median launch delay
        of launches onto an empty stream (the replay's smallest stream / launch weights), ns.
    window : tuple of int
        ``(start_ns, end_ns)`` analysed.
    """

    rows: np.ndarray
    start: np.ndarray
    end: np.ndarray
    t: np.ndarray
    node_row: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    owner: np.ndarray
    hta_w: np.ndarray
    wmin: np.ndarray
    node_step: np.ndarray
    is_dataloader: np.ndarray
    is_comm: np.ndarray
    is_launch_call: np.ndarray
    is_blocking: np.ndarray
    is_step_range: np.ndarray
    dropped_edges: int = 0
    window: tuple[int, int] = (0, 0)
    queued_gap_ns: int = 0
    launch_delay_ns: int = 0

    @property
    def n_nodes(self) -> int:
        """Number of nodes (2 per event)."""
        return int(self.t.size)

    def edges_frame(self) -> pd.DataFrame:
        """Edges as a frame: ``src, dst, kind`` (name), ``src_row, dst_row, owner, hta_w, wmin`` (ns)."""
        return pd.DataFrame({
            "src": self.src, "dst": self.dst, "kind": np.asarray(EDGE_KINDS, dtype=object)[self.kind],
            "src_row": self.node_row[self.src], "dst_row": self.node_row[self.dst], "owner": self.owner,
            "hta_w": self.hta_w, "wmin": self.wmin,
        })


class _Lookup:
    """int64 key -> int64 value (the last value of a repeated key); -1 for a missing key."""

    def __init__(self, keys: np.ndarray, vals: np.ndarray) -> None:
        o = np.argsort(keys, kind="stable")
        k, v = keys[o], vals[o]
        last = np.ones(k.size, bool)
        last[:-1] = k[1:] != k[:-1]
        self.k, self.v = k[last], v[last]

    def get(self, q: ArrayLike) -> np.ndarray:
        q = np.asarray(q, dtype=np.int64)
        if self.k.size == 0:
            return np.full(q.shape, -1, np.int64)
        j = np.clip(np.searchsorted(self.k, q), 0, self.k.size - 1)
        return np.where(self.k[j] == q, self.v[j], -1).astype(np.int64)


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
            raise ValueError(f"no ProfilerStep#{step} in the trace (steps: {trace.steps})")
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
        wdt = dt.copy()
        wdt[wk_edge] = np.minimum(wdt[wk_edge], wk_lat)  # the gap then only costs the wake-up latency
        srcs.append(u_node)
        dsts.append(v_node)
        kinds.append(np.full(a_idx.size, HOST, np.int8))
        owners.append(np.where(own_local >= 0, host_rows[np.clip(own_local, 0, None)], -1))
        htaw.append(hw)
        wmins.append(wdt)
        wk_src, wk_dst, wk_lat = (np.concatenate([wk_src, f_src]), np.concatenate([wk_dst, f_dst]),
                                  np.concatenate([wk_lat, f_lat]))
        srcs.append(wk_src)
        dsts.append(wk_dst)
        kinds.append(np.full(wk_src.size, WAKE, np.int8))
        owners.append(np.full(wk_src.size, -1, np.int64))
        htaw.append(np.full(wk_src.size, -1, np.int64))
        wmins.append(wk_lat)
    # ---- device edges
    if kd:
        # span
        srcs.append(ds(ev_dev))
        dsts.append(de(ev_dev))
        kinds.append(np.full(kd, DEVICE, np.int8))
        owners.append(dev_rows)
        htaw.append(d_end - d_ts)
        wmins.append(d_end - d_ts)

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
    # blocking copies: a call whose own op ends before it returns (replay only)
    if kd:
        bl = (d_end <= h_end[d_lpos]) & (d_ts >= h_ts[d_lpos])
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
        # launch edges (all; HTA weight only where HTA adds it)
        ldelay = d_ts - rt_ts
        bound_l = cond_launch & (ldelay >= 0)
        lq = int(np.median(ldelay[bound_l])) if bound_l.any() else (int(max(0, ldelay.min())) if kd else 0)
        srcs.append(hs(d_lpos))
        dsts.append(ds(ev_dev))
        kinds.append(np.full(kd, LAUNCH, np.int8))
        owners.append(host_rows[d_lpos])
        htaw.append(np.where(cond_launch, ldelay, -1))
        wmins.append(np.minimum(ldelay, lq))
        # stream edges
        pi = np.flatnonzero(has_prev)
        gap = d_ts[pi] - prev_end[pi]
        gq_mask = cond_kk[pi] & (gap >= 0)
        gq = int(np.median(gap[gq_mask])) if gq_mask.any() else 0
        srcs.append(de(prev[pi]))
        dsts.append(ds(pi))
        kinds.append(np.full(pi.size, STREAM, np.int8))
        owners.append(dev_rows[prev[pi]])
        htaw.append(np.where(cond_kk[pi], np.maximum(gap, 0), -1))
        wmins.append(np.minimum(np.maximum(gap, 0), gq))
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
        # replay weight: the post-latency after the latest source
        lat = h_end[s_dsth] - d_end[s_src]
        srcs.append(de(s_src))
        dsts.append(he(s_dsth))
        kinds.append(np.full(s_src.size, SYNC, np.int8))
        owners.append(host_rows[s_dsth])
        htaw.append(np.where(s_hta, 0, -1))
        wmins.append(np.maximum(lat, 0))

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

    if srcs:
        src = np.concatenate(srcs).astype(np.int64)
        dst = np.concatenate(dsts).astype(np.int64)
        kind = np.concatenate(kinds).astype(np.int8)
        owner = np.concatenate(owners).astype(np.int64)
        hta_w = np.concatenate(htaw).astype(np.int64)
        wmin = np.concatenate(wmins).astype(np.int64)
    else:
        src = dst = owner = hta_w = wmin = np.zeros(0, np.int64)
        kind = np.zeros(0, np.int8)
    fwd = src < dst
    dropped = int((~fwd).sum())
    src, dst, kind, owner, hta_w, wmin = src[fwd], dst[fwd], kind[fwd], owner[fwd], hta_w[fwd], wmin[fwd]
    # replay weights: never more than measured; the binding edge of each node absorbs the rest
    meas = t_sorted[dst] - t_sorted[src]
    wmin = np.minimum(wmin, meas)
    wmin = _tighten(t_sorted, src, dst, wmin)

    # ---- per-event flags and node steps
    rows = np.concatenate([host_rows, dev_rows])
    start_nodes = np.concatenate([hs(ev_local), ds(ev_dev)]) if rows.size else np.zeros(0, np.int64)
    end_nodes = np.concatenate([he(ev_local), de(ev_dev)]) if rows.size else np.zeros(0, np.int64)
    dl = _name_mask(names, _is_dataloader)[rows] & (dev_col[rows] < 0)
    is_comm = is_communication(ev)[rows]
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
                 window=(w0, w1), queued_gap_ns=int(gq), launch_delay_ns=int(lq))


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


# ----------------------------------------------------------------------------------- longest paths
def longest_path(n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray,
                 base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longest paths in a DAG whose nodes ``0..n-1`` are in topological order (``src < dst``).

    ``dist[v] = base[v]`` for a node without in-edges, else ``max(dist[u] + w)`` over its in-edges
    (ties: the first in-edge in array order). Nodes with one in-edge are resolved by pointer jumping
    (vectorised, log depth rounds); only nodes with several in-edges go through a Python loop.

    Returns
    -------
    dist : ndarray int64 (n,)
    pred_edge : ndarray int64 (n,)
        The in-edge each node's longest path arrives by, -1 for sources.
    """
    m = src.size
    indeg = np.bincount(dst, minlength=n) if m else np.zeros(n, np.int64)
    order = np.argsort(dst, kind="stable")
    s_src, s_w = src[order], w[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(indeg, out=ptr[1:])
    pred_edge = np.full(n, -1, dtype=np.int64)
    single = indeg == 1
    anc = np.arange(n, dtype=np.int64)
    acc = np.zeros(n, dtype=np.int64)
    sv = np.flatnonzero(single)
    anc[sv] = s_src[ptr[sv]]
    acc[sv] = s_w[ptr[sv]]
    pred_edge[sv] = order[ptr[sv]]
    act = sv
    while act.size:
        a = anc[act]
        acc[act] += acc[a]
        anc[act] = anc[a]
        act = act[anc[anc[act]] != anc[act]]
    # roots: sources and merge nodes; resolve merges in order
    dist_root = base.astype(np.int64).copy()
    merges = np.flatnonzero(indeg >= 2)
    if merges.size:
        e_lo = ptr[merges]
        e_hi = ptr[merges + 1]
        cnt = e_hi - e_lo
        eidx = np.repeat(e_lo - np.cumsum(np.concatenate([[0], cnt[:-1]])), cnt) + np.arange(cnt.sum())
        r_k = anc[s_src[eidx]].tolist()
        c_k = (acc[s_src[eidx]] + s_w[eidx]).tolist()
        e_ord = order[eidx].tolist()
        D = dist_root.tolist()
        mlist = merges.tolist()
        cl = cnt.tolist()
        argm = [0] * len(mlist)
        k = 0
        for i, mnode in enumerate(mlist):
            best = D[r_k[k]] + c_k[k]
            arg = e_ord[k]
            k2 = k + 1
            for kk in range(k2, k + cl[i]):
                val = D[r_k[kk]] + c_k[kk]
                if val > best:
                    best = val
                    arg = e_ord[kk]
            k += cl[i]
            D[mnode] = best
            argm[i] = arg
        dist_root = np.asarray(D, dtype=np.int64)
        pred_edge[merges] = np.asarray(argm, dtype=np.int64)
    dist = dist_root[anc] + acc
    return dist, pred_edge


def _walk_back(pred_edge: np.ndarray, src: np.ndarray, end_node: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and edges of the path ending at ``end_node`` (following ``pred_edge``), in path order."""
    pn = np.where(pred_edge >= 0, src[np.clip(pred_edge, 0, None)], -1).tolist()
    nodes: list[int] = []
    v = int(end_node)
    while v >= 0:
        nodes.append(v)
        v = pn[v]
    path = np.asarray(nodes[::-1], dtype=np.int64)
    return path, pred_edge[path[1:]]


def replay_times(g: Graph, w: np.ndarray | None = None, mask: np.ndarray | None = None) -> np.ndarray:
    """Node times when the graph is replayed with edge weights ``w`` (default: the measured
    ``g.wmin``); ``mask`` drops edges. Sources keep their measured time."""
    w = g.wmin if w is None else w
    src, dst = g.src, g.dst
    if mask is not None:
        src, dst, w = src[mask], dst[mask], w[mask]
    n = g.n_nodes
    dist, _ = longest_path(n, src, dst, w, g.t)
    return np.asarray(dist, dtype=np.int64)


def tail_lengths(g: Graph, w: np.ndarray | None = None, same_step: bool = True) -> np.ndarray:
    """Longest replay path from each node to any later node (of the same step when ``same_step``), ns."""
    w = g.wmin if w is None else w
    n = g.n_nodes
    src, dst = g.src, g.dst
    keep = np.ones(src.size, bool)
    if same_step:
        keep = g.node_step[src] == g.node_step[dst]
    rs = (n - 1 - dst[keep])
    rd = (n - 1 - src[keep])
    dist, _ = longest_path(n, rs, rd, w[keep], np.zeros(n, np.int64))
    return np.asarray(dist[::-1], dtype=np.int64)


# ------------------------------------------------------------------------------------ the result
@dataclass
class CriticalPath:
    """The critical path of a trace window.

    Attributes
    ----------
    events : pandas.DataFrame
        Rows of ``trace.events`` on the path (its columns, its index), in time order (by start).
    row_ids : ndarray int64
        Their positional row ids in ``trace.events``.
    length_ns : int
        Wall-clock span of the path, ns (first node to last node).
    hta_length_ns : int
        HTA's weighted length of the path, ns.
    breakdown : pandas.Series
        int64 ns per ``BREAKDOWN_KINDS`` (host_compute, kernel_launch, kernel, memcpy_memset, sync_wait,
        communication, dataloader, idle); sums to ``length_ns``.
    slack_ns : pandas.Series
        int64, aligned with ``trace.events`` (same index): how much each event could grow without
        lengthening its step, ns; -1 for events not in the graph.
    edges : pandas.DataFrame
        The path's edges: ``kind, src_row, dst_row, start_ns, end_ns, hta_w, part`` (breakdown kind).
    graph : Graph
    window : tuple of int
    """

    events: pd.DataFrame
    row_ids: np.ndarray
    length_ns: int
    hta_length_ns: int
    breakdown: pd.Series
    slack_ns: pd.Series
    edges: pd.DataFrame
    graph: Graph
    window: tuple[int, int]

    def __repr__(self) -> str:
        top = self.breakdown.sort_values(ascending=False)
        parts = ", ".join(f"{k} {v / 1e6:.3f} ms" for k, v in top.items() if v > 0)
        return f"<CriticalPath {len(self.row_ids)} events, {self.length_ns / 1e6:.3f} ms: {parts}>"


def critical_path(trace: Trace, step: int | None = None, *, annotation: str | None = None,
                  instance: int | tuple[int, int] = 0, window: tuple[int, int] | None = None,
                  sync_args: pd.DataFrame | None = None, slack: bool = True, model: str = "hta") -> CriticalPath:
    """The critical path of a trace or of one step (HTA's definition; see the module docstring).

    Parameters
    ----------
    trace : nbprof.Trace
    step : int, optional
        ``N`` of ``ProfilerStep#N``: analyse that step only. Default: the whole trace.
    annotation, instance, window, sync_args
        See :func:`build_graph`.
    model : {"hta", "replay"}
        ``"hta"`` (default): HTA's weighted longest path (host gaps and blocking calls weigh 0, so
        the path may cover only part of a host-bound step). ``"replay"``: the chain of *binding*
        constraints of the replay model, walked back from the window's last node: every edge
        weighs what it measured, so the path covers the window's wall-clock span from the source it
        starts at, DataLoader waits and host gaps included (``hta_length_ns`` is then the same span).
    slack : bool, default True
        Compute ``slack_ns`` (one more pass over the graph); all -1 when False.

    Returns
    -------
    CriticalPath

    Raises
    ------
    ValueError
        When the step or annotation is not in the trace, or the window holds no event.
    """
    g = build_graph(trace, step, annotation=annotation, instance=instance, window=window, sync_args=sync_args)
    n = g.n_nodes
    if n == 0:
        raise ValueError(f"no event to analyse in the window {g.window}")
    if model == "hta":
        hm = g.hta_w >= 0
        dist, pred = longest_path(n, g.src[hm], g.dst[hm], g.hta_w[hm], np.zeros(n, np.int64))
        end_node = int(np.argmax(dist))
    elif model == "replay":
        hm = np.ones(g.src.size, bool)
        rep, pred = longest_path(n, g.src, g.dst, g.wmin, g.t)
        end_node = int(np.argmax(rep))
        dist = None
    else:
        raise ValueError(f"model must be 'hta' or 'replay', not {model!r}")
    path, pedges = _walk_back(pred, g.src[hm], end_node)
    if dist is None:
        dist = rep - rep[path[0]]
    eidx = np.flatnonzero(hm)[pedges] if pedges.size else pedges
    ev = trace.events
    mark = np.zeros(len(ev), bool)
    mark[g.node_row[path]] = True
    rows_on = np.flatnonzero(mark)
    ts = ev["ts_ns"].to_numpy(np.int64)
    rows_on = rows_on[np.lexsort((rows_on, ts[rows_on]))]
    events = ev.iloc[rows_on]
    # breakdown along the path (wall clock between consecutive nodes)
    parts = _edge_parts(g, eidx, ev)
    seg = g.t[g.dst[eidx]] - g.t[g.src[eidx]]
    bd = pd.Series(np.bincount(parts, weights=seg, minlength=len(BREAKDOWN_KINDS)).astype(np.int64)
                   if eidx.size else np.zeros(len(BREAKDOWN_KINDS), np.int64), index=list(BREAKDOWN_KINDS))
    # float64 bincount is exact below 2**53 ns (104 days)
    length = int(g.t[path[-1]] - g.t[path[0]]) if path.size else 0
    edges = pd.DataFrame({
        "kind": pd.Categorical.from_codes(g.kind[eidx].astype(np.int64), categories=list(EDGE_KINDS)),
        "src_row": g.node_row[g.src[eidx]], "dst_row": g.node_row[g.dst[eidx]],
        "start_ns": g.t[g.src[eidx]], "end_ns": g.t[g.dst[eidx]], "hta_w": g.hta_w[eidx],
        "part": pd.Categorical.from_codes(parts, categories=list(BREAKDOWN_KINDS)),
    })
    sl = pd.Series(np.full(len(ev), -1, np.int64), index=ev.index, name="slack_ns")
    if slack:
        sl = pd.Series(event_slack(g, len(ev)), index=ev.index, name="slack_ns")
    return CriticalPath(events=events, row_ids=rows_on.astype(np.int64), length_ns=length,
                        hta_length_ns=int(dist[end_node]), breakdown=bd, slack_ns=sl, edges=edges, graph=g,
                        window=g.window)


def event_slack(g: Graph, n_events: int, w: np.ndarray | None = None) -> np.ndarray:
    """Slack of every event (array over ``n_events`` positional rows, -1 outside the graph), ns."""
    tail = tail_lengths(g, w)
    t = g.t
    steps = g.node_step
    out = np.full(n_events, -1, np.int64)
    if t.size == 0:
        return out
    inv = steps - steps.min()
    step_end = np.full(int(inv.max()) + 1, -_BIG)
    np.maximum.at(step_end, inv, t)
    f = step_end[inv] - t - tail
    out[g.rows] = np.maximum(f[g.end], 0)
    return out


def inside_ranges(ev: pd.DataFrame, range_rows: np.ndarray, query_rows: np.ndarray,
                  query_t: np.ndarray) -> np.ndarray:
    """For each query (time ``query_t`` on the thread of event ``query_rows``): does it fall inside one of
    the host events ``range_rows`` of the same ``(pid, tid)``, ``[ts, ts + dur)``? Vectorised (bool array)."""
    if range_rows.size == 0 or query_rows.size == 0:
        return np.zeros(query_rows.size, bool)
    pid = ev["pid"].to_numpy(np.int64)
    tid = ev["tid"].to_numpy(np.int64)
    rk = pid[range_rows] * (1 << 32) + (tid[range_rows] & 0xFFFFFFFF)
    qk = pid[query_rows] * (1 << 32) + (tid[query_rows] & 0xFFFFFFFF)
    _u, inv = np.unique(np.concatenate([rk, qk]), return_inverse=True)
    rt, qt = inv[: rk.size].astype(np.int64), inv[rk.size:].astype(np.int64)
    shift = np.int64(1) << np.int64(47)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    keep = end[range_rows] > ts[range_rows]
    order = np.argsort(rt[keep] * shift + ts[range_rows][keep], kind="stable")
    s0 = (rt[keep] * shift + ts[range_rows][keep])[order]
    e0 = (rt[keep] * shift + end[range_rows][keep])[order]
    run_end = np.maximum.accumulate(e0) if e0.size else e0
    a = qt * shift + np.asarray(query_t, np.int64)
    k = np.searchsorted(s0, a, side="right") - 1
    return np.asarray((k >= 0) & (a < run_end[np.clip(k, 0, None)]), dtype=bool)


def _edge_parts(g: Graph, eidx: np.ndarray, ev: pd.DataFrame) -> np.ndarray:
    """Breakdown kind of each path edge: int codes into ``BREAKDOWN_KINDS``.

    Host intervals: ``dataloader`` inside a DataLoader range; else by the innermost open event:
    ``kernel_launch`` (a launching runtime call), ``sync_wait`` (a blocking call), ``communication``
    (``nccl:``/``gloo:`` ops), ``host_compute`` (any other op or annotation), ``idle`` (none, or only
    the ``ProfilerStep`` range). Launch edges: ``kernel_launch``; device spans: ``kernel`` /
    ``memcpy_memset`` / ``communication``; sync edges: ``sync_wait``; stream gaps, wake, fwdbwd: ``idle``.
    """
    code = {k: i for i, k in enumerate(BREAKDOWN_KINDS)}
    out = np.full(eidx.size, code["idle"], dtype=np.int64)
    if eidx.size == 0:
        return out
    kind = g.kind[eidx]
    own = g.owner[eidx]
    op = np.full(eidx.size, -1, np.int64)
    v = own >= 0
    op[v] = _Lookup(g.rows, np.arange(g.rows.size)).get(own[v])
    cat = ev["cat"]
    cats = list(cat.cat.categories) if isinstance(cat.dtype, pd.CategoricalDtype) else None
    own_c = np.clip(own, 0, None)
    if cats is not None:
        cc = cat.cat.codes.to_numpy()[own_c]

        def is_cat(name: str) -> np.ndarray:
            return np.asarray(cc == (cats.index(name) if name in cats else -99))
    else:
        cv = cat.to_numpy(dtype=object)[own_c]

        def is_cat(name: str) -> np.ndarray:
            return np.asarray(cv == name)
    h = kind == HOST
    dl_rows = g.rows[g.is_dataloader]
    inside_dl = np.zeros(eidx.size, bool)
    if dl_rows.size and h.any():
        hi = np.flatnonzero(h)
        inside_dl[hi] = inside_ranges(ev, dl_rows, g.node_row[g.src[eidx[hi]]], g.t[g.src[eidx[hi]]])
    valid = op >= 0
    opc = np.clip(op, 0, None)
    launch = valid & g.is_launch_call[opc]
    block = valid & g.is_blocking[opc]
    comm = valid & g.is_comm[opc]
    step_only = valid & is_cat(schema.USER_ANNOTATION) & g.is_step_range[opc]
    out[h & valid & ~step_only] = code["host_compute"]
    out[h & launch] = code["kernel_launch"]
    out[h & block] = code["sync_wait"]
    out[h & comm] = code["communication"]
    out[inside_dl] = code["dataloader"]
    out[kind == LAUNCH] = code["kernel_launch"]
    d = kind == DEVICE
    out[d & is_cat(schema.KERNEL)] = code["kernel"]
    out[d & (is_cat(schema.GPU_MEMCPY) | is_cat(schema.GPU_MEMSET))] = code["memcpy_memset"]
    out[d & comm] = code["communication"]
    out[(kind == SYNC) | (kind == GPU_SYNC)] = code["sync_wait"]
    return out
