# ruff: noqa: E501  (the peer's inline events, one per line)
"""torch-tb-profiler's ``test_profiler.py`` Distributed and DataPipe cases as nbprof tests (issue 34).

Peer: pytorch/kineto ``tb_plugin/test/test_profiler.py`` at 041e7ce99f15 (the last commit with
``tb_plugin/``); line numbers below are that file's. Its ``TestDistributed`` builds two workers' traces
inline (``EVENTS``, carried verbatim; nbprof needs each worker's rank and a shared clock origin, so each
file also gets ``distributedInfo`` and one ``baseTimeNanoseconds``: tb-plugin assumes both) and asserts,
per worker, ``has_communication``, the number of communication nodes, the step's Overview costs, and the
Distributed view: ``steps_to_overlap`` [computation, overlapping, communication, other] (µs),
``steps_to_wait`` [data transfer, synchronizing] (µs) and the ``comm_ops`` rows [name, calls, total size,
avg size, total latency, avg latency, total transfer, avg transfer] (bytes, µs).

nbprof's counterparts: :func:`nbprof.analysis.distributed.collectives` (nodes, sizes),
:func:`nbprof.analysis.steps.step_breakdown` (Overview costs), :func:`~nbprof.analysis.distributed.overlap`
(computation only = compute - overlap, overlapping, communication only = exposed, other = span - union),
:func:`~nbprof.analysis.distributed.wait_transfer` and :func:`~nbprof.analysis.distributed.collective_summary`.

Matched (asserted with the peer's value): every Overview cost (46 values), has_communication and node
counts (13), the overlap view of both gloo cases (16), the comm-ops names, calls and sizes (48; the name
without its ``nccl:``/``gloo:`` prefix: nbprof names the collective, tb-plugin the host op), the DataPipe
range (1), and test_all_categories' Overview, operator and kernel values (47): 171 of 242 asserted
values; the 69 others below and 2 in :func:`test_all_categories_overview_operators_kernels`; 19 of 22 in
:func:`test_operator_relations_and_runtime_attribution`. In all 190 of 264. The other ``TestProfiler``
cases, ``TestMemoryCurve`` and ``TestModuleView`` are in ``test_peer_tb_plugin_views.py`` (637 of 642).

Deliberately different (asserted with nbprof's value; tb-plugin's beside it):

- NCCL overlap (8 values): tb-plugin counts communication as the host ``nccl:<op>`` calls inside the
  Overview step (host window [0, 235] µs) -- worker 0 [30, 75, 75, 55]; NCCL calls return at once and the
  transfer is the kernel, so nbprof uses the NCCL kernels over the whole trace: [32, 129, 1443, 114].
- Waits (12 values): tb-plugin's latency of a collective runs from the host call's start to the kernel's
  end and its waits come from that (nccl worker 0 [1169, 464]); nbprof splits each execution (kernel or
  ``gloo:`` range) into waiting for the last rank and transfer (:func:`wait_transfer`): [1172, 400].
- Comm-ops latency and transfer (48 values): tb-plugin's latency is that host-to-kernel span and, for two
  ``gloo:`` ranges running at once on two threads, their union (gloo broadcast worker 0: 63 µs for 3 calls);
  nbprof sums each call's execution (92 µs): per call is what a size/bandwidth table needs.
- DataPipe (1 value): see :func:`test_datapipe_is_a_dataloader_range`.
"""

from __future__ import annotations

import json

import pytest

import nbprof
from nbprof.analysis import distributed as D
from nbprof.analysis import kernels as K
from nbprof.analysis import operators as O
from nbprof.analysis import steps as S

#: (case, worker) -> the events of the peer's json_content0 / json_content1 (test_profiler.py 2033-2112,
#: 2138-2226, 2255-2343)
EVENTS = {
    ('nccl', 0): [
        {"ph": "X", "cat": "cpu_op", "name": "nccl:broadcast", "pid": 23803, "tid": "23803", "ts": 0, "dur": 75, "args": {"External id": 146, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "Kernel", "name": "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)", "pid": 0, "tid": "stream 16", "ts": 16, "dur": 16, "args": {"device": 0, "correlation": 28506, "external id": 146}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 23803, "tid": "23803", "ts": 100, "dur": 20, "args": {"External id": 24504, "Input Dims": [[1000], [1000], []], "Input type": ["float", "float", "Int"]}},
        {"ph": "X", "cat": "Kernel", "name": "void at::native::vectorized_elementwise_kernel", "pid": 0, "tid": "stream 7", "ts": 130, "dur": 161, "args": {"device": 0, "correlation": 99765, "external id": 24504}},
        {"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": 23803, "tid": "25166", "ts": 160, "dur": 75, "args": {"External id": 2513, "Input Dims": [[2049000]], "Input type": ["float"]}},
        {"ph": "X", "cat": "Kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "pid": 0, "tid": "stream 16", "ts": 162, "dur": 1556, "args": {"device": 0, "correlation": 33218, "external id": 2513}},
    ],
    ('nccl', 1): [
        {"ph": "X", "cat": "cpu_op", "name": "nccl:broadcast", "pid": 23803, "tid": "23803", "ts": 0, "dur": 20, "args": {"External id": 146, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "Kernel", "name": "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)", "pid": 0, "tid": "stream 16", "ts": 8, "dur": 31, "args": {"device": 0, "correlation": 28506, "external id": 146}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 23803, "tid": "23803", "ts": 25, "dur": 20, "args": {"External id": 24504, "Input Dims": [[1000], [1000], []], "Input type": ["float", "float", "Int"]}},
        {"ph": "X", "cat": "Kernel", "name": "void at::native::vectorized_elementwise_kernel", "pid": 0, "tid": "stream 7", "ts": 30, "dur": 161, "args": {"device": 0, "correlation": 99765, "external id": 24504}},
        {"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": 23803, "tid": "25166", "ts": 160, "dur": 75, "args": {"External id": 2513, "Input Dims": [[2049000]], "Input type": ["float"]}},
        {"ph": "X", "cat": "Kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "pid": 0, "tid": "stream 16", "ts": 562, "dur": 1058, "args": {"device": 0, "correlation": 33218, "external id": 2513}},
    ],
    ('gloo_gpu', 0): [
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23803", "ts": 16, "dur": 38, "args": {"External id": 165, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23805", "ts": 25, "dur": 36, "args": {"External id": 166, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23803", "ts": 66, "dur": 18, "args": {"External id": 167, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 23803, "tid": "23800", "ts": 0, "dur": 20, "args": {"External id": 24504, "Input Dims": [[1000], [1000], []], "Input type": ["float", "float", "Int"]}},
        {"ph": "X", "cat": "Kernel", "name": "void at::native::vectorized_elementwise_kernel", "pid": 0, "tid": "stream 7", "ts": 30, "dur": 101, "args": {"device": 0, "correlation": 99765, "external id": 24504}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 23803, "tid": "23805", "ts": 110, "dur": 18, "args": {"External id": 2513, "Input Dims": [[2049000]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 23803, "tid": "23803", "ts": 120, "dur": 36, "args": {"External id": 2516, "Input Dims": [[2049000]], "Input type": ["float"]}},
    ],
    ('gloo_gpu', 1): [
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23803", "ts": 20, "dur": 28, "args": {"External id": 256, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23805", "ts": 28, "dur": 30, "args": {"External id": 257, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23803", "ts": 77, "dur": 6, "args": {"External id": 258, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 23803, "tid": "23800", "ts": 0, "dur": 30, "args": {"External id": 24504, "Input Dims": [[1000], [1000], []], "Input type": ["float", "float", "Int"]}},
        {"ph": "X", "cat": "Kernel", "name": "void at::native::vectorized_elementwise_kernel", "pid": 0, "tid": "stream 7", "ts": 70, "dur": 70, "args": {"device": 0, "correlation": 99765, "external id": 24504}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 23803, "tid": "23805", "ts": 88, "dur": 38, "args": {"External id": 2513, "Input Dims": [[2049000]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 23803, "tid": "23803", "ts": 130, "dur": 16, "args": {"External id": 2516, "Input Dims": [[2049000]], "Input type": ["float"]}},
    ],
    ('gloo_cpu', 0): [
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23803", "ts": 16, "dur": 38, "args": {"External id": 165, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23805", "ts": 25, "dur": 36, "args": {"External id": 166, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23803", "ts": 66, "dur": 18, "args": {"External id": 167, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 23803, "tid": "23800", "ts": 0, "dur": 20, "args": {"External id": 24504, "Input Dims": [[1000], [1000], []], "Input type": ["float", "float", "Int"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 23803, "tid": "23800", "ts": 30, "dur": 101, "args": {"External id": 24505}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 23803, "tid": "23805", "ts": 110, "dur": 18, "args": {"External id": 2513, "Input Dims": [[2049000]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 23803, "tid": "23803", "ts": 120, "dur": 36, "args": {"External id": 2516, "Input Dims": [[2049000]], "Input type": ["float"]}},
    ],
    ('gloo_cpu', 1): [
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23803", "ts": 20, "dur": 28, "args": {"External id": 256, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23805", "ts": 28, "dur": 30, "args": {"External id": 257, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "pid": 23803, "tid": "23803", "ts": 77, "dur": 6, "args": {"External id": 258, "Input Dims": [[53120]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 23803, "tid": "23800", "ts": 0, "dur": 30, "args": {"External id": 24504, "Input Dims": [[1000], [1000], []], "Input type": ["float", "float", "Int"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 23803, "tid": "23800", "ts": 70, "dur": 70, "args": {"External id": 24505}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 23803, "tid": "23805", "ts": 88, "dur": 38, "args": {"External id": 2513, "Input Dims": [[2049000]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 23803, "tid": "23803", "ts": 130, "dur": 16, "args": {"External id": 2516, "Input Dims": [[2049000]], "Input type": ["float"]}},
    ],
}

#: case -> worker -> the peer's assertions (value, line); "ours" where nbprof deliberately differs
PEER = {
    "nccl": {
        0: {"nodes": (2, 2115), "costs": ([105, 0, 0, 75, 0, 0, 20, 35, 235], 2116),
            "overlap": ([30, 75, 75, 55], 2126), "overlap_ours": [32, 129, 1443, 114],
            "wait": ([1169, 464], 2128), "wait_ours": [1172, 400],
            "ops": ([["nccl:broadcast", 1, 212480, 212480, 75, 75, 36, 36],
                     ["nccl:all_reduce", 1, 8196000, 8196000, 1558, 1558, 1133, 1133]], 2130),
            "ops_ours": {"broadcast": [16, 16, 16, 16], "all_reduce": [1556, 1556, 1156, 1156]}},
        1: {"nodes": (2, 2121), "costs3": (74, 2122),
            "overlap": ([121, 40, 74, 0], 2127), "overlap_ours": [152, 9, 1080, 379],
            "wait": ([1169, 3], 2129), "wait_ours": [1081, 8],
            "ops": ([["nccl:broadcast", 1, 212480, 212480, 39, 39, 36, 36],
                     ["nccl:all_reduce", 1, 8196000, 8196000, 1133, 1133, 1133, 1133]], 2133),
            "ops_ours": {"broadcast": [31, 31, 23, 23], "all_reduce": [1058, 1058, 1058, 1058]}},
    },
    "gloo_gpu": {
        0: {"nodes": (5, 2232), "costs": ([101, 0, 0, 39, 0, 0, 16, 0, 156], 2233),
            "overlap": ([31, 70, 39, 16], 2243), "wait": ([75, 34], 2245), "wait_ours": [118, 28],
            "ops": ([["gloo:broadcast", 3, 637440, 212480, 63, 21, 41, 14],
                     ["gloo:all_reduce", 2, 16392000, 8196000, 46, 23, 34, 17]], 2247),
            "ops_ours": {"broadcast": [92, 92 / 3, 74, 74 / 3], "all_reduce": [54, 27, 44, 22]}},
        1: {"nodes": (5, 2238), "costs": ([70, 0, 0, 44, 0, 0, 20, 12, 146], 2239),
            "overlap": ([16, 54, 44, 32], 2244), "wait": ([78, 20], 2246), "wait_ours": [96, 22],
            "ops": ([["gloo:broadcast", 3, 637440, 212480, 44, 15, 44, 15],
                     ["gloo:all_reduce", 2, 16392000, 8196000, 54, 27, 34, 17]], 2250),
            "ops_ours": {"broadcast": [64, 64 / 3, 64, 64 / 3], "all_reduce": [54, 27, 32, 16]}},
    },
    "gloo_cpu": {
        0: {"nodes": (5, 2349), "costs": ([0, 0, 0, 109, 0, 0, 47, 0, 156], 2350),
            "overlap": ([47, 74, 35, 0], 2360), "wait": ([75, 34], 2362), "wait_ours": [118, 28],
            "ops": ([["gloo:broadcast", 3, 637440, 212480, 63, 21, 41, 14],
                     ["gloo:all_reduce", 2, 16392000, 8196000, 46, 23, 34, 17]], 2364),
            "ops_ours": {"broadcast": [92, 92 / 3, 74, 74 / 3], "all_reduce": [54, 27, 44, 22]}},
        1: {"nodes": (5, 2355), "costs": ([0, 0, 0, 98, 0, 0, 36, 12, 146], 2356),
            "overlap": ([36, 64, 34, 12], 2361), "wait": ([78, 20], 2363), "wait_ours": [96, 22],
            "ops": ([["gloo:broadcast", 3, 637440, 212480, 44, 15, 44, 15],
                     ["gloo:all_reduce", 2, 16392000, 8196000, 54, 27, 34, 17]], 2367),
            "ops_ours": {"broadcast": [64, 64 / 3, 64, 64 / 3], "all_reduce": [54, 27, 32, 16]}},
    },
}


def _write(tmp_path, events, rank, backend="nccl"):
    doc = {"schemaVersion": 1, "distributedInfo": {"backend": backend, "rank": rank, "world_size": 2},
           "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": events}
    p = tmp_path / f"worker{rank}.pt.trace.json"
    p.write_text(json.dumps(doc))
    return nbprof.load(p)


@pytest.fixture(params=sorted(PEER))
def case(request, tmp_path):
    backend = "nccl" if request.param == "nccl" else "gloo"
    return request.param, [_write(tmp_path, EVENTS[(request.param, r)], r, backend) for r in (0, 1)]


def _us(ns):
    return int(ns) // 1000


def test_communication_nodes_and_overview_costs(case):
    name, ts = case
    for r, t in enumerate(ts):
        exp = PEER[name][r]
        c = D.collectives(t)
        assert len(c) == exp["nodes"][0]  # has_communication and len(comm_node_list)
        b = S.step_breakdown(t).iloc[0]
        costs = [_us(b[c]) for c in (*S.BREAKDOWN_COLUMNS, "step_ns")]
        if "costs" in exp:
            assert costs == exp["costs"][0]
        else:
            assert costs[3] == exp["costs3"][0]


def test_distributed_overlap_view(case):
    name, ts = case
    ov = D.overlap(ts).set_index("rank")
    for r in (0, 1):
        o = ov.loc[r]
        got = [_us(o.compute_ns - o.overlap_ns), _us(o.overlap_ns), _us(o.exposed_comm_ns),
               _us(o.span_ns - o.compute_ns - o.exposed_comm_ns)]
        exp = PEER[name][r]
        assert got == exp.get("overlap_ours", exp["overlap"][0])


def test_distributed_wait_and_comm_ops(case):
    name, ts = case
    wt = D.wait_transfer(ts)
    cs = D.collective_summary(ts)
    for r in (0, 1):
        exp = PEER[name][r]
        w = wt[wt["rank"] == r]
        assert [_us(w["transfer_ns"].sum()), _us(w["wait_ns"].sum())] == exp["wait_ours"]
        mine = cs[cs["rank"] == r].set_index("collective")
        for row in exp["ops"][0]:
            coll = row[0].split(":", 1)[1]
            m = mine.loc[coll]
            assert [int(m["count"]), m["total_bytes"], m["total_bytes"] / m["count"]] == row[1:4]  # matched
            tr = w.loc[w["collective"] == coll, "transfer_ns"]
            got = [m["total_ns"] / 1e3, m["mean_ns"] / 1e3, tr.sum() / 1e3, tr.mean() / 1e3]
            assert got == pytest.approx(exp["ops_ours"][coll])


def test_nccl_user_annotation_has_communication(tmp_path):
    """test_profiler.py 2371-2386 (kineto#640): an ``nccl:all_reduce`` ``user_annotation`` is communication."""
    from nbprof.trace import predicates as pred
    ev = [{"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 128, "tid": 999,
           "ts": 1686070155939447, "dur": 71, "args": {"External id": 647}}]
    t = _write(tmp_path, ev, 0)
    assert int(pred.is_communication(t.events, where="host").sum()) == 1


ALL_CATEGORIES = [  # test_profiler.py 34-101 (test_all_categories), verbatim
    {"ph": "X", "cat": "Operator", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 13721, "tid": "123", "ts": 100, "dur": 180, "args": {"Input Dims": [], "External id": 2}},
    {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 200, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
    {"ph": "X", "cat": "Operator", "name": "aten::nll_loss_backward", "pid": 13721, "tid": "456", "ts": 340, "dur": 70, "args": {"Input Dims": [[], [32, 1000], [32], [], [], [], []], "External id": 4}},
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 50, "dur": 400, "args": {"Input Dims": [], "External id": 1}},
    {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 405, "dur": 10, "args": {"stream": 7, "correlation": 334, "external id": 4}},
    {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 13721, "tid": "456", "ts": 360, "dur": 20, "args": {"correlation": 334, "external id": 4}},
    {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7", "ts": 420, "dur": 5, "args": {"stream": 7, "correlation": 40344, "external id": 4}},
    {"ph": "X", "cat": "Runtime", "name": "cudaMemsetAsync", "pid": 13721, "tid": "456", "ts": 390, "dur": 10, "args": {"correlation": 40344, "external id": 4}},
    {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 430, "dur": 15, "args": {"correlation": 40348, "external id": 4, "device": 0}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 405, "dur": 5, "args": {"correlation": 40348, "external id": 4}},
]


def test_all_categories_overview_operators_kernels(tmp_path):
    """test_profiler.py 33-161: the step's costs (lines 105-111: Kernel 15, Memcpy 10, Memset 5, Runtime 30,
    DataLoader 180, CpuOp 35, Other 125 µs), per-operator calls / host / device / self host / self device
    durations of ``aten::to`` and ``aten::nll_loss_backward`` by name and by name + input shape
    (lines 113-145), the kernel table (lines 147-161) and has_runtime/kernel/memcpy_or_memset (lines 101-103):
    47 values matched. Deliberately different (2 values):
    the operator lists' length (lines 113-114: 2; nbprof 7): nbprof's table has every host row torch's
    ``key_averages`` has, ``ProfilerStep*``, the DataLoader range and the runtime calls included."""
    p = tmp_path / "worker0.pt.trace.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ALL_CATEGORIES}))
    t = nbprof.load(p)
    from nbprof.trace import predicates as pred
    ev = t.events
    assert pred.is_runtime(ev).any() and pred.is_kernel(ev).any()
    assert ev["cat"].astype(str).isin(["gpu_memcpy", "gpu_memset"]).sum() == 2
    b = S.step_breakdown(t).iloc[0]
    got = {c: _us(b[c]) for c in ("kernel_ns", "memcpy_ns", "memset_ns", "runtime_ns", "dataloader_ns",
                                 "cpu_exec_ns", "other_ns")}
    assert got == {"kernel_ns": 15, "memcpy_ns": 10, "memset_ns": 5, "runtime_ns": 30, "dataloader_ns": 180,
                   "cpu_exec_ns": 35, "other_ns": 125}
    for group_by in ("name", "shapes"):
        ops = O.operator_summary(t, group_by=group_by).set_index("name")
        assert len(ops) == 7  # tb-plugin: 2
        exp = {"aten::to": ("[[2, 8, 5], [], [], [], [], [], [], []]", 1, 60, 0, 60, 0),
               "aten::nll_loss_backward": ("[[], [32, 1000], [32], [], [], [], []]", 1, 70, 30, 70 - 20 - 10 - 5, 30)}
        for name, (shape, calls, host, dev, self_host, self_dev) in exp.items():
            r = ops.loc[name]
            if group_by == "shapes":
                assert r["input_dims"] == shape
            assert (int(r["count"]), _us(r["total_host_ns"]), _us(r["total_device_ns"]), _us(r["self_host_ns"]),
                    _us(r["self_device_ns"])) == (calls, host, dev, self_host, self_dev)
    ks = K.kernel_summary(t)
    assert len(ks) == 1
    k = ks.iloc[0]
    assert k["name"] == "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>"
    assert (int(k["instances"]), _us(k["total_ns"]), _us(k["min_ns"]), _us(k["max_ns"]), k["avg_ns"] / 1e3) == (
        1, 15, 15, 15, 15)
    assert K.kernel_operators(t)["operator"].tolist() == ["aten::nll_loss_backward"]


#: TestProfiler cases (test_profiler.py 164-413), their events verbatim
RELATIONS = {
    'external_id': [
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 120, "dur": 70, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 130, "dur": 5, "args": {"correlation": 334, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 120, "dur": 0, "args": {"correlation": 334, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 130, "dur": 6, "args": {"correlation": 335, "external id": 2, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 120, "dur": 0, "args": {"correlation": 335, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 130, "dur": 7, "args": {"correlation": 336, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 190, "dur": 0, "args": {"correlation": 336, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 130, "dur": 8, "args": {"correlation": 337, "external id": 2, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 190, "dur": 0, "args": {"correlation": 337, "external id": 2}},
    ],
    'operator_relation_same_start': [
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 100, "dur": 70, "args": {"Input Dims": [], "External id": 4}},
    ],
    'operator_relation_same_end': [
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 130, "dur": 70, "args": {"Input Dims": [], "External id": 4}},
    ],
    'remove_dup_nodes': [
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 110, "dur": 80, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 120, "dur": 60, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 130, "dur": 20, "args": {"correlation": 335, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel_64addr", "pid": 0, "tid": "stream 7", "ts": 220, "dur": 8, "args": {"correlation": 335, "external id": 4, "device": 0}},
    ],
    'runtime_called_by_profilerstep': [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "456", "ts": 100, "dur": 300, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 130, "dur": 20, "args": {"correlation": 335, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel_64addr", "pid": 0, "tid": "stream 7", "ts": 220, "dur": 8, "args": {"correlation": 335, "external id": 2, "device": 0}},
    ],
}

def _ops(tmp_path, events):
    p = tmp_path / "worker0.pt.trace.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    t = nbprof.load(p)
    return t, O.operator_summary(t).set_index("name")


def test_operator_relations_and_runtime_attribution(tmp_path):
    """test_profiler.py 164-413. Matched (19 values): device / self-device time by External id (lines 234-240:
    ``aten::mat_mul`` 26 / 14, ``aten::mm`` 12 / 12 µs), self host time of parent and child with the same
    start or end (lines 269-274, 291-296: 30 and 70), the merged duplicate ``aten::mm``'s self device time
    (line 340: 8), a step's costs with a runtime call directly under ``ProfilerStep`` (lines 401-404:
    Kernel 8, Runtime 20, CpuOp 0, Other 272), its kernel count and kernel-by-op rows (lines 408-409).
    Deliberately different (3 values): the operator lists' length (line 339: 1, nbprof 2; lines 406-407: 0,
    nbprof 2): nbprof lists the runtime calls and ``ProfilerStep*`` too, as torch's ``key_averages`` does."""
    t, ops = _ops(tmp_path, RELATIONS["external_id"])
    assert [_us(ops.loc["aten::mat_mul", c]) for c in ("total_device_ns", "self_device_ns")] == [5 + 6 + 7 + 8, 6 + 8]
    assert [_us(ops.loc["aten::mm", c]) for c in ("total_device_ns", "self_device_ns")] == [5 + 7, 5 + 7]
    for case in ("operator_relation_same_start", "operator_relation_same_end"):
        t, ops = _ops(tmp_path, RELATIONS[case])
        assert (_us(ops.loc["aten::mat_mul", "self_host_ns"]), _us(ops.loc["aten::mm", "self_host_ns"])) == (30, 70)
    t, ops = _ops(tmp_path, RELATIONS["remove_dup_nodes"])
    assert int(ops.loc["aten::mm", "count"]) == 1 and _us(ops.loc["aten::mm", "self_device_ns"]) == 8
    assert len(ops) == 2  # tb-plugin: 1 (the runtime call not listed)
    t, ops = _ops(tmp_path, RELATIONS["runtime_called_by_profilerstep"])
    b = S.step_breakdown(t).iloc[0]
    assert [_us(b[c]) for c in ("kernel_ns", "runtime_ns", "cpu_exec_ns", "other_ns")] == [8, 20, 0, 300 - 8 - 20]
    assert sorted(ops.index) == ["ProfilerStep*", "cudaLaunchKernel"]  # tb-plugin: none
    assert int(K.kernel_summary(t)["instances"].sum()) == 1 and len(K.kernel_operators(t)) == 1


def test_datapipe_is_a_dataloader_range(tmp_path):
    """test_profiler.py 2703-2733: ``enumerate(DataPipe)#...`` is a DataLoader range of 23 µs (line 2723,
    matched). tb-plugin also hides it from the operator list (line 2733); nbprof lists it in
    ``operator_summary`` (every host range with its time, as torch's ``key_averages`` does) and charges
    its time to DataLoader in the Overview: deliberately different."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "enumerate(DataPipe)#ShufflerIterDataPipe", "pid": 7557,
           "tid": 7557, "ts": 100, "dur": 23, "args": {"External id": 34}}]
    t = _write(tmp_path, ev, 0)
    assert int(S.step_breakdown(t)["dataloader_ns"].iloc[0]) == 23_000
    assert O.operator_summary(t)["name"].astype(str).tolist() == ["enumerate(DataPipe)#ShufflerIterDataPipe"]
