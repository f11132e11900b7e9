"""Critical path of a trace (or of one step): the dependency graph, the longest path, slack.

The graph
---------
Every selected event becomes two *nodes*, its start and its end (times in int64 ns). Nodes are kept in
time order (ties: host markers in call-stack order, a device op's start before its end), and every edge
runs forward in that order, so the order is a topological order of the DAG. An edge that would run
backwards in time is re-anchored where the physics allows (a stream edge between ops that overlap on one
stream runs from the earlier op's start; a wait edge whose op ends at most ``SKEW_MAX_NS`` after the call
returns -- clock skew -- from the op's start; both tied to the op's duration, ``Graph.dep_via``; a thread that
resumes from a collective before the backend's range closes, from the range's start, tied to its length), and
otherwise dropped and counted in ``dropped_edges``.

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
    (a runtime call whose own copy/memset op, by correlation id, starts inside the call and ends before
    it returns -- or at most ``SKEW_MAX_NS`` after when the call lasted 90 % of the op -- e.g.
    ``cudaMemcpy`` to pageable memory, ``hipMemcpyWithStream``) always gets one from its op. In the replay
    a wait is this edge, not the call's duration (:mod:`nbprof.analysis.whatif`).
``gpu_sync``
    ``cudaStreamWaitEvent``: the op recorded by the waited-on ``cudaEventRecord`` -> the next op
    launched on the waiting stream from the same thread (Kineto ``Stream Wait Event`` rows). A
    ``cudaStreamWaitEvent`` call with no such row (profiles without them) is inferred from timing, for the
    replay only: :func:`~.device_edges.inferred_wait_sources` (the inferred-wait rule, its 50 µs / 20 µs
    thresholds and why).
``fwdbwd``
    End of a forward op -> start of its backward op (``trace.flows`` of category ``fwdbwd``), which
    links the autograd thread to the main thread.
``wake``
    Another thread of the same process -> the end of a host gap on this thread: a gap outside any
    op (or inside only a ``ProfilerStep`` range), or the very first marker of a thread, that ends at
    most ``WAKE_MAX_NS`` (1 ms) after the other thread's latest marker is taken as that thread
    waking this one up (the main thread resuming when the autograd thread finishes ``backward``,
    the autograd thread starting when the main thread calls it). A gap that ends where a collective
    backend's thread starts a collective (``gloo:<op>``) is woken by the latest ``c10d::`` op that
    started on another thread during it, however long ago (the backend idles until work is enqueued);
    a gap in which a backend range (``gloo:``/``mpi:``/``ucc:``) of another thread ends is woken by the
    latest such end, however late (the thread waiting for the collective resumes when it completes); a gap
    that ends while such a range is still open (the backend completed the work, then lost its core before
    closing its range), its thread having started nothing since the range began, is woken from the backend
    interval holding its end, with a weight tied to that interval (``Graph.dep_via``: its length less the
    measured tail after the resume), and the gap itself weighs 0
    (:func:`~.host_edges._resumes_inside`).
    Kineto records no such event:
    this is an inference from timing, used by the replay only (the gap then costs only the wake-up
    latency, so a faster waker wakes it earlier).
``collective``
    Given several ranks (``critical_path([tr0, tr1, ...])``, :mod:`.ranks`): the k-th collective
    kernel of a communicator (``pg_name``) on each rank is one barrier: each rank's k-th kernel start
    -> every other rank's k-th kernel end, weighing the measured time between them. The ranks'
    clocks are aligned by their absolute origins (``meta.origin_ns``).

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
* HTA has no graph for several ranks; nbprof's (``collective`` edges) is its own extension.
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

from .graph import build_graph, clear_whole_graphs, whole_graph
from .longest import LongestPlan, longest_path, longest_plan, replay_times
from .model import (
    BLOCKING_CALLS,
    BREAKDOWN_KINDS,
    COLLECTIVE,
    DEVICE,
    EDGE_KINDS,
    FWDBWD,
    GPU_SYNC,
    HOST,
    LAUNCH,
    LAUNCH_NAMES,
    SKEW_MAX_NS,
    STREAM,
    SYNC,
    WAKE,
    WAKE_MAX_NS,
    Graph,
    dependent_weights,
    inside_ranges,
)
from .path import CriticalPath, path_of_graph
from .ranks import add_collective_edges, critical_path, critical_path_ranks, merge_ranks
from .slack import event_slack, tail_lengths

__all__ = [
    "BLOCKING_CALLS",
    "BREAKDOWN_KINDS",
    "COLLECTIVE",
    "DEVICE",
    "EDGE_KINDS",
    "FWDBWD",
    "GPU_SYNC",
    "HOST",
    "LAUNCH",
    "LAUNCH_NAMES",
    "SKEW_MAX_NS",
    "STREAM",
    "SYNC",
    "WAKE",
    "WAKE_MAX_NS",
    "CriticalPath",
    "add_collective_edges",
    "critical_path_ranks",
    "merge_ranks",
    "path_of_graph",
    "Graph",
    "build_graph",
    "clear_whole_graphs",
    "whole_graph",
    "critical_path",
    "event_slack",
    "dependent_weights",
    "inside_ranges",
    "LongestPlan",
    "longest_path",
    "longest_plan",
    "replay_times",
    "tail_lengths",
]
