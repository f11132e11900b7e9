"""The graph model of :mod:`nbprof.analysis.critical_path`: edge and breakdown kinds, the call-name sets
of HTA, :class:`Graph`, and two lookups shared by the graph, the path and :mod:`nbprof.analysis.whatif`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ...trace import schema

#: Edge kinds, codes in ``Graph.kind``.
EDGE_KINDS = ("host", "launch", "device", "stream", "sync", "gpu_sync", "fwdbwd", "collective", "wake")
HOST, LAUNCH, DEVICE, STREAM, SYNC, GPU_SYNC, FWDBWD, COLLECTIVE, WAKE = range(9)

#: A host gap that ends at most this long after another thread's marker (same process) is taken as
#: that thread waking this one up (``wake`` edge).
WAKE_MAX_NS = 1_000_000

#: A device op that ends at most this long after the host call that waited for it returned is taken as
#: the host's and the device's clocks disagreeing (Kineto's CPU/GPU clock conversion; 58 µs seen on the
#: kineto V100 ``resnet50_num_workers_4`` sample), not as the call returning early: the wait edge is kept,
#: from the op's start, weighing its duration less that skew (``Graph.dep_via``).
SKEW_MAX_NS = 100_000

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

#: The runtime calls that make a stream wait for an event (``cudaStreamWaitEvent``: "makes all future work
#: submitted to stream wait for all work captured in event", CUDA Runtime API, Stream Management); the
#: inferred-wait rule of :func:`~.device_edges.inferred_wait_sources` looks for them.
WAIT_EVENT_NAMES = frozenset({"cudaStreamWaitEvent", "hipStreamWaitEvent"})
#: Inferred waits (:func:`~.device_edges.inferred_wait_sources`): a device op starting more than this long
#: after both its launch call returned and its stream predecessor ended was held back by something else.
INFER_WAIT_IDLE_NS = 50_000
#: ... and the op of another stream it waited for ended at most this long before it started.
INFER_WAIT_LAG_NS = 20_000

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
    dep_via, dep_off : ndarray int64 (m,), optional
        Weights tied to another edge: an edge ``e`` with ``dep_via[e] >= 0`` weighs
        ``max(0, w[dep_via[e]] + dep_off[e])`` in a replay, ``dep_via[e]`` being a device op's ``device`` edge
        or a host interval. Used where the measurement's order would make the edge run backwards: a stream
        edge between ops that overlap on one stream (from the earlier op's start: the later op may start once
        the earlier one has run all but the measured overlap), a wait edge under clock skew (from the op's
        start: its duration less the skew) and the ``wake`` edge of a thread that resumed from a collective
        before the backend's range closed (from the start of the backend interval holding the resume: its
        length less the measured tail). ``None``: no such edge. :func:`dependent_weights` applies them.
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
    dep_via: np.ndarray | None = None
    dep_off: np.ndarray | None = None

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


def dependent_weights(g: Graph, w: np.ndarray) -> np.ndarray:
    """``w`` (replay weights of ``g``'s edges, any numeric dtype) with the edges tied to another edge
    (``g.dep_via``: a device op's, a host interval) recomputed from its weight in ``w``: ``max(0, w[via] + off)``.
    A copy."""
    w = np.array(w, copy=True)
    if g.dep_via is None or g.dep_off is None:
        return w
    d = np.flatnonzero(g.dep_via >= 0)
    if d.size:
        w[d] = np.maximum(0, w[g.dep_via[d]] + g.dep_off[d])
    return w


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
