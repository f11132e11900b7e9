"""kernel_summary on real GPU traces, checked against statistics computed here with plain json."""

from __future__ import annotations

import gzip
import json
import statistics

import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.analysis.kernels import kernel_summary

BERT_H100 = "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
RESNET_NW4 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"


def _kernels(path, cat="kernel"):
    with gzip.open(path, "rt") as f:
        evs = json.load(f)["traceEvents"]
    return [e for e in evs if e.get("cat") == cat and e.get("ph") == "X"]


def test_by_name_matches_plain_json_h100():
    path = corpus_path(BERT_H100)
    ks = _kernels(path)
    durs_all = [round(e["dur"] * 1000) for e in ks]
    name = max({e["name"] for e in ks}, key=lambda n: sum(round(e["dur"] * 1000) for e in ks if e["name"] == n))
    durs = [round(e["dur"] * 1000) for e in ks if e["name"] == name]
    s = kernel_summary(nbprof.load(path))
    assert s["instances"].sum() == len(ks) == 60  # MANIFEST: kernels=60
    top = s.iloc[0]
    assert top["name"] == name
    assert top["instances"] == len(durs) == 17
    assert top["total_ns"] == sum(durs)
    assert top["min_ns"] == min(durs) and top["max_ns"] == max(durs)
    assert top["med_ns"] == pytest.approx(statistics.median(durs))
    assert top["avg_ns"] == pytest.approx(statistics.mean(durs))
    assert top["std_ns"] == pytest.approx(statistics.stdev(durs))
    assert top["gpu_time_ratio"] == pytest.approx(sum(durs) / sum(durs_all))
    assert s["gpu_time_ratio"].sum() == pytest.approx(1.0)
    # sorted by total time, descending
    assert s["total_ns"].is_monotonic_decreasing
    # a kernel seen once has a zero standard deviation, not NaN
    assert (s.loc[s["instances"] == 1, "std_ns"] == 0).all()


def test_by_stream_and_device_resnet50_v100():
    path = corpus_path(RESNET_NW4)
    ks = _kernels(path, cat="Kernel")  # 2021 trace: capitalised categories
    tr = nbprof.load(path)
    by_stream = kernel_summary(tr, by="stream")
    want = {}
    for e in ks:
        key = (e["args"]["device"], e["args"]["stream"])
        want.setdefault(key, []).append(round(e["dur"] * 1000))
    got = {(int(r.device), int(r.stream)): (int(r.instances), int(r.total_ns)) for r in by_stream.itertuples()}
    assert got == {k: (len(v), sum(v)) for k, v in want.items()}
    by_dev = kernel_summary(tr, by="device")
    assert list(by_dev["device"]) == [0]
    assert by_dev.loc[0, "instances"] == len(ks) == 8868  # MANIFEST: kernels=8868
    assert by_dev.loc[0, "gpu_time_ratio"] == pytest.approx(1.0)
    # memcpy/memset on request
    with_copies = kernel_summary(tr, by="device", categories=("kernel", "gpu_memcpy", "gpu_memset"))
    assert with_copies.loc[0, "instances"] == 8868 + 12 + 378


def test_cpu_trace_has_empty_summary_and_bad_key():
    tr = nbprof.load(corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/rank_non_gpu/rank_non_gpu.json.gz"))
    s = kernel_summary(tr)
    assert s.empty and list(s.columns)[:2] == ["name", "instances"]
    with pytest.raises(ValueError, match="by must be"):
        kernel_summary(tr, by="kernel")


@pytest.mark.corpus
def test_operator_tensor_cores_on_h100_bf16():
    """Per-operator Tensor Core shares on the H100 bf16 Qwen trace: the operators' own kernel times add up to
    ``gpu_metrics``' Tensor Core kernel ratio (one definition of a kernel's operator and of a Tensor Core
    kernel), and each op's total covers its self."""
    from nbprof.analysis import kernels as K

    t = nbprof.load(corpus_path("AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))
    o = K.operator_tensor_cores(t)
    assert (o["total_kernel_ns"] >= o["self_kernel_ns"]).all() and (o["total_tensor_core_ns"] >= o["self_tensor_core_ns"]).all()
    ratio = o["self_tensor_core_ns"].sum() / o["self_kernel_ns"].sum()
    assert ratio == pytest.approx(K.gpu_metrics(t).iloc[0]["tensor_core_kernel_ratio"], rel=1e-12) and ratio > 0
    assert bool(o.set_index("name").loc["aten::mm", "tensor_core_eligible"])
