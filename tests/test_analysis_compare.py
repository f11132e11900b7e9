"""compare(a, b) on real trace pairs: V100 ResNet-50 num_workers 0 -> 4, HTA's trace_compare base/test."""

from __future__ import annotations

import gzip
import json

import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.analysis.compare import compare
from nbprof.analysis.steps import step_times

NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NW4 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
BASE = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_compare/base/base.json.gz"
TEST = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_compare/test/test.json.gz"


def _events(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


@pytest.fixture(scope="module")
def resnet():
    a, b = corpus_path(NW0), corpus_path(NW4)
    return a, b, compare(nbprof.load(a), nbprof.load(b))


def test_step_time_delta_resnet50(resnet):
    a, b, c = resnet
    host = {}
    for side, path in (("a", a), ("b", b)):
        steps = [e for e in _events(path) if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"]
        durs = [round(e["dur"] * 1000) for e in steps]
        host[side] = sum(durs) / len(durs)
    assert c.steps.loc["steps", "a"] == 6 and c.steps.loc["steps", "b"] == 6
    # the step is the step window (ProfilerStep extended to the device work it launched, torch-tb-profiler's
    # Overview, checked against it in test_analysis_steps): 177.59 -> 141.07 ms, as the breakdown and the diff
    # view say, not the host ranges' 174.83 -> 139.69 ms
    assert c.steps.loc["mean_step_ns", "a"] == pytest.approx(177_592_166.67) != pytest.approx(host["a"])
    assert c.steps.loc["mean_step_ns", "b"] == pytest.approx(141_068_000) != pytest.approx(host["b"])
    assert c.steps.loc["mean_step_ns", "a"] == pytest.approx(c.breakdown.loc["step_ns", "a"])
    assert c.steps.loc["mean_step_ns", "b"] == pytest.approx(c.breakdown.loc["step_ns", "b"])
    assert c.steps.loc["mean_step_ns", "ratio"] == pytest.approx(0.794, abs=0.001)


def test_breakdown_delta_dataloader_collapses(resnet):
    _, _, c = resnet
    assert c.breakdown is not None, c.notes
    dl = c.breakdown.loc["dataloader_ns"]
    # 4 workers: DataLoader time per step drops from ~59 ms to ~1 ms; kernel time barely moves
    assert dl["a"] > 50e6 and dl["b"] < 2e6 and dl["ratio"] < 0.05
    assert c.breakdown.loc["kernel_ns", "ratio"] == pytest.approx(1.0, abs=0.02)
    parts = [r for r in c.breakdown.index if r != "step_ns"]
    assert c.breakdown.loc[parts, "a"].sum() == pytest.approx(c.breakdown.loc["step_ns", "a"])


def test_operator_and_kernel_deltas_resnet50(resnet):
    a, b, c = resnet
    ops = c.operators.set_index("name")
    # the single-process DataLoader iterator exists only without workers
    it = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert ops.loc[it, "status"] == "only_a" and ops.loc[it, "count_a"] == 6 and ops.loc[it, "count_b"] == 0
    assert ops.loc[it, "total_host_ns_delta"] == -ops.loc[it, "total_host_ns_a"]
    assert ops.iloc[0].name == it  # the largest change
    # kernels: instance deltas computed independently per name
    ka = {}
    kb = {}
    for d, path in ((ka, a), (kb, b)):
        for e in _events(path):
            if e.get("cat") == "Kernel":
                d[e["name"]] = d.get(e["name"], 0) + 1
    k = c.kernels.set_index("name")
    for name in list(ka)[:20]:
        assert k.loc[name, "instances_delta"] == kb.get(name, 0) - ka[name]
    assert k["instances_b"].sum() - k["instances_a"].sum() == 8868 - 8772


def test_hta_trace_compare_pair():
    a, b = nbprof.load(corpus_path(BASE)), nbprof.load(corpus_path(TEST))
    c = compare(a, b)
    ops = c.operators.set_index("name")
    # test.json adds a backward pass and an all-to-all that base.json lacks
    assert ops.loc["AddmmBackward0", "status"] == "only_b"
    assert ops.loc["All2All_Pooled_Req", "status"] == "only_b"
    assert ops.loc["nccl:all_reduce", "count_delta"] == -1
    k = c.kernels.set_index("name")
    assert k["instances_a"].sum() == 6 and k["instances_b"].sum() == 5  # MANIFEST: kernels 6 vs 5
    assert k["total_ns_delta"].sum() == (
        kernel_total(corpus_path(TEST)) - kernel_total(corpus_path(BASE))
    )
    # one step definition (steps.step_windows): base's two steps; test.json's second step launched no device op
    # the profiler saw, so (torch-tb-profiler's rule) it is dropped
    assert list(step_times(a)) == [135_000, 117_128_000] and list(step_times(b)) == [135_000]
    assert c.steps.loc["steps", "a"] == 2 and c.steps.loc["steps", "b"] == 1
    assert "Comparison" in repr(c)


def kernel_total(path):
    return sum(round(e["dur"] * 1000) for e in _events(path) if e.get("cat") == "kernel")


def test_compare_cpu_profiles_of_the_example():
    from _support.paths import DATA

    a = nbprof.load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")
    b = nbprof.load(DATA / "cpu" / "cnn_nw2.pt.trace.json.gz")
    c = compare(a, b)
    assert c.kernels.empty and any("kernels" in n for n in c.notes)
    assert c.steps.loc["steps", "a"] == len(a.steps) == 6
    conv = c.operators.set_index("name").loc["aten::conv2d"]
    assert conv["count_a"] == conv["count_b"] == 12  # two convolutions per step, 6 steps
