"""nbprof.analysis.critical_path: HTA's critical path on HTA's own traces, graph invariants, slack."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.analysis import critical_path as cpm
from nbprof.analysis.critical_path import (
    BREAKDOWN_KINDS,
    build_graph,
    critical_path,
    replay_times,
)

ROOT = Path(__file__).resolve().parents[1]
REFS = ROOT / "tests" / "data" / "hta_critical_path"
GPU = ROOT / "data" / "gpu"
HTA_CP = "facebookresearch__HolisticTraceAnalysis/tests/data/critical_path"
HTA_CASES = ("simple_add", "alexnet", "cuda_event_sync", "cuda_event_sync_multi_stream")
#: The categories HTA has nodes for (nbprof also has user_annotation ranges on the path).
HTA_CATS = ("cpu_op", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset")


def _trace_file(corpus, name: str) -> Path:
    d = corpus(f"{HTA_CP}/{name}")
    files = sorted(p for p in d.iterdir() if p.name.endswith(".json.gz"))
    assert len(files) == 1
    return files[0]


def _sync_args(path: Path) -> pd.DataFrame:
    """The ``cuda_sync`` wait args nbprof's loader does not keep (read here from the raw file)."""
    with gzip.open(path, "rt") as fh:
        d = json.load(fh)
    rows = [(e["args"]["correlation"], e["args"].get("wait_on_stream", -1),
             e["args"].get("wait_on_cuda_event_record_corr_id", -1))
            for e in d["traceEvents"] if e.get("cat") == "cuda_sync"]
    return pd.DataFrame(rows, columns=["correlation", "wait_on_stream", "wait_on_cuda_event_record_corr_id"])


def _keys(trace, events: pd.DataFrame) -> set:
    e = events[events["cat"].astype(str).isin(HTA_CATS)]
    origin = trace.meta.origin_ns
    return set(zip(e["name"].astype(str), (e["ts_ns"] + origin).tolist(), e["dur_ns"].tolist(),
                   e["pid"].tolist(), e["tid"].tolist()))


@pytest.mark.parametrize("name", HTA_CASES)
@pytest.mark.parametrize("with_args", [True, False], ids=["sync-args", "heuristic"])
def test_critical_events_equal_hta(corpus, name, with_args):
    # oracle: HTA 0.5.0 CriticalPathAnalysis (scripts/make_hta_critical_path_refs.py)
    ref = json.loads((REFS / f"{name}.json").read_text())
    path = _trace_file(corpus, name)
    t = nbprof.load(path)
    cp = critical_path(t, annotation=ref["annotation"] or None, instance=ref["instance_id"],
                       sync_args=_sync_args(path) if with_args else None)
    theirs = {(e["name"], e["ts_ns"], e["dur_ns"], e["pid"], e["tid"]) for e in ref["events"]}
    mine = _keys(t, cp.events)
    assert mine == theirs, (sorted(mine - theirs)[:5], sorted(theirs - mine)[:5])
    assert cp.hta_length_ns == ref["length_us"] * 1000


def test_event_sync_edges_present(corpus):
    # cuda_event_sync: cudaEventSynchronize waits on the spin kernel recorded before it (Event Sync),
    # cudaStreamSynchronize on the DtoH copy (Stream Sync), cudaDeviceSynchronize (Context Sync)
    path = _trace_file(corpus, "cuda_event_sync")
    t = nbprof.load(path)
    g = build_graph(t, sync_args=_sync_args(path))
    e = g.edges_frame()
    sync = e[e["kind"] == "sync"]
    names = t.events["name"].astype(str).to_numpy()
    pairs = {(names[s][:30], names[d]) for s, d in zip(sync["src_row"], sync["dst_row"])}
    assert ("at::cuda::(anonymous namespace", "cudaEventSynchronize") in pairs
    assert ("Memcpy DtoH (Device -> Pageabl", "cudaStreamSynchronize") in pairs
    assert any(d == "cudaDeviceSynchronize" for _, d in pairs)


def test_stream_wait_event_edge(corpus):
    path = _trace_file(corpus, "cuda_event_sync_multi_stream")
    t = nbprof.load(path)
    g = build_graph(t, sync_args=_sync_args(path))
    e = g.edges_frame()
    gs = e[e["kind"] == "gpu_sync"]
    assert len(gs) == 1
    ev = t.events
    assert ev["stream"].iloc[gs["src_row"].iloc[0]] != ev["stream"].iloc[gs["dst_row"].iloc[0]]


#: the order build_graph's builders add their edges in (nodes.py, host_edges.py, device_edges.py, sync_edges.py)
BUILD_ORDER = ("host", "wake", "device", "gpu_sync", "launch", "stream", "sync", "fwdbwd")


def _kind_runs(g) -> list[str]:
    names = np.asarray(cpm.EDGE_KINDS)[g.kind].tolist()
    return [names[0]] + [b for a, b in itertools.pairwise(names) if a != b]


def test_edges_come_one_builder_after_another(corpus):
    """Each edge kind is one contiguous block, in the builders' order; one device and one launch edge per op."""
    path = _trace_file(corpus, "cuda_event_sync_multi_stream")
    t = nbprof.load(path)
    g = build_graph(t, sync_args=_sync_args(path))
    assert _kind_runs(g) == ["host", "device", "gpu_sync", "launch", "stream", "sync"]
    n = {k: int((g.kind == cpm.EDGE_KINDS.index(k)).sum()) for k in BUILD_ORDER}
    assert n == {"host": 65, "wake": 0, "device": 6, "gpu_sync": 1, "launch": 6, "stream": 3, "sync": 5, "fwdbwd": 0}
    assert int((t.events["device"].to_numpy()[g.rows] >= 0).sum()) == 6
    cnn = GPU / "cnn_nw0_prep.pt.trace.json.gz"
    if cnn.exists():
        g = build_graph(nbprof.load(cnn))
        assert _kind_runs(g) == ["host", "wake", "device", "launch", "stream", "sync", "fwdbwd"]
        assert int((g.kind == cpm.DEVICE).sum()) == int((g.kind == cpm.LAUNCH).sum()) == 258


GPU_TRACES = ("cnn_nw0_prep", "cnn_nw4_prep", "lm_h200", "cnn_h200", "lm_mem", "ddp_nccl_rank0", "torchprof_lm")


@pytest.fixture(scope="module")
def gpu_traces():
    out = {}
    for n in GPU_TRACES:
        p = GPU / f"{n}.pt.trace.json.gz"
        if p.exists():
            out[n] = nbprof.load(p)
    if not out:
        pytest.skip("data/gpu traces absent")
    return out


def test_graph_invariants_and_exact_replay(gpu_traces):
    for name, t in gpu_traces.items():
        g = build_graph(t)
        assert np.all(g.src < g.dst), name
        assert np.all(np.diff(g.t) >= 0), name  # time order is the topological order
        # replay without change reproduces every measured node time
        assert np.array_equal(replay_times(g), g.t), name
        kinds = set(np.asarray(cpm.EDGE_KINDS)[np.unique(g.kind)])
        assert {"host", "launch", "device", "stream"} <= kinds, (name, kinds)
        assert g.dropped_edges == 0, name


def test_fwdbwd_and_wake_edges(gpu_traces):
    t = gpu_traces.get("cnn_nw0_prep")
    if t is None:
        pytest.skip("cnn_nw0_prep absent")
    g = build_graph(t)
    e = g.edges_frame()
    fb = e[e["kind"] == "fwdbwd"]
    assert len(fb) == int((t.flows["cat"].astype(str) == "fwdbwd").sum())
    tid = t.events["tid"].to_numpy()
    assert (tid[fb["src_row"]] != tid[fb["dst_row"]]).all()  # main thread -> autograd thread
    wk = e[e["kind"] == "wake"]
    assert len(wk) >= len(t.steps)  # the autograd thread wakes the main thread up in every step
    assert (tid[wk["src_row"]] != tid[wk["dst_row"]]).all()


def test_breakdown_slack_and_columns(gpu_traces):
    t = gpu_traces["cnn_nw0_prep"]
    step = t.steps[1]
    for model in ("hta", "replay"):
        cp = critical_path(t, step=step, model=model)
        assert list(cp.breakdown.index) == list(BREAKDOWN_KINDS)
        assert cp.breakdown.dtype == np.int64
        assert int(cp.breakdown.sum()) == cp.length_ns
        assert list(cp.events.columns) == list(t.events.columns)
        assert np.all(np.diff(cp.events["ts_ns"].to_numpy()) >= 0)
        assert np.array_equal(cp.events.index.to_numpy(), t.events.index[cp.row_ids].to_numpy())
        assert cp.slack_ns.index.equals(t.events.index) and cp.slack_ns.dtype == np.int64
    # nw0: the DataLoader (21 ms of a 24 ms step) dominates the wall-clock critical path
    cp = critical_path(t, step=step, model="replay")
    assert cp.breakdown["dataloader"] > 0.8 * cp.length_ns
    win = t.events.iloc[cp.graph.rows]
    assert (cp.slack_ns.iloc[cp.graph.rows] >= 0).all()
    outside = np.setdiff1d(np.arange(len(t.events)), cp.graph.rows)
    assert (cp.slack_ns.iloc[outside] == -1).all()
    # the DataLoader range and the step range bind: no slack
    names = win["name"].astype(str)
    dl = cp.graph.rows[names.str.startswith("enumerate(DataLoader)").to_numpy()]
    assert (cp.slack_ns.iloc[dl] == 0).all()
    # kernels of this host-bound step have slack (the GPU waits for the host)
    k = cp.graph.rows[(win["cat"].astype(str) == "kernel").to_numpy()]
    assert (cp.slack_ns.iloc[k] > 0).mean() > 0.5


def test_hta_path_is_a_path(gpu_traces):
    t = gpu_traces["lm_h200"]
    cp = critical_path(t, step=t.steps[0])
    e = cp.edges
    assert (e["end_ns"].to_numpy()[:-1] <= e["start_ns"].to_numpy()[1:]).all()
    assert cp.hta_length_ns <= cp.length_ns
    assert int(e["hta_w"].sum()) == cp.hta_length_ns


def test_errors(gpu_traces):
    t = gpu_traces["cnn_nw0_prep"]
    with pytest.raises(ValueError, match="ProfilerStep#999"):
        critical_path(t, step=999)
    with pytest.raises(ValueError, match="no event whose name contains"):
        critical_path(t, annotation="no such range")
    with pytest.raises(ValueError, match="model"):
        critical_path(t, model="nope")
    with pytest.raises(ValueError, match="sync_args"):
        build_graph(t, sync_args=pd.DataFrame({"correlation": [1]}))


def test_longest_path_small_dag():
    # 0 -> 1 -> 3, 0 -> 2 -> 3 with the heavier branch through 2; ties go to the first in-edge
    src = np.array([0, 1, 0, 2])
    dst = np.array([1, 3, 2, 3])
    w = np.array([1, 1, 5, 0])
    dist, pred = cpm.longest_path(4, src, dst, w, np.zeros(4, np.int64))
    assert dist.tolist() == [0, 1, 5, 5]
    assert pred.tolist() == [-1, 0, 2, 3]
    w2 = np.array([2, 3, 5, 0])
    dist, pred = cpm.longest_path(4, src, dst, w2, np.zeros(4, np.int64))
    assert dist[3] == 5 and pred[3] == 1  # tie: the first in-edge wins (networkx's rule)
