"""Advisor rules: each fires on a real trace that has the problem and stays silent on one that does not."""

from __future__ import annotations

import json

import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis import advisor

V100_NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
V100_NW4 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
BERT_H100 = "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
QWEN_H100 = "AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
MI300_BERT = "AMD-AGI__TraceLens/tests/traces/mi300/gaunernst_bert-small-uncased__1016001.json.gz"
RANK0_128 = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz"
NCCL = "facebookresearch__HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz"

_cache: dict = {}


def _t(rel):
    path = DATA / "cpu" / rel if rel.endswith(".pt.trace.json.gz") and "/" not in rel else corpus_path(rel)
    if str(path) not in _cache:
        _cache[str(path)] = nbprof.load(path)
    return _cache[str(path)]


def _run(rel, rule, **th):
    return advisor.advise(_t(rel), rules=[rule], thresholds=th or None)


def test_dataloader_fires_on_num_workers_0():
    (f,) = _run(V100_NW0, "dataloader")
    assert f.severity == "high"
    assert f.evidence["dataloader_ratio"] == pytest.approx(59261.833 / 177592.167, abs=1e-6)
    assert f.evidence["steps"] == 6 and f.where == "ProfilerStep#5..#10 (6 steps)"
    assert "num_workers" in f.next_step and "prefetch_factor" in f.next_step and "pin_memory" in f.next_step
    (c,) = _run("cnn_nw0.pt.trace.json.gz", "dataloader")  # the CPU example, num_workers=0
    assert c.evidence["dataloader_ratio"] > 0.5


def test_dataloader_silent_with_workers():
    assert _run(V100_NW4, "dataloader") == []  # 0.8 % with num_workers=4
    assert _run("lm.pt.trace.json.gz", "dataloader") == []  # synthetic tokens, no DataLoader


def test_host_wait_fires_on_data_stall():
    (f,) = _run(V100_NW0, "host_wait")
    assert f.evidence["device"] == 0 and f.evidence["worst_stream"] == 7
    assert f.evidence["idle_ratio"] == pytest.approx(327_463 / 830_494, abs=0.01)
    assert f.evidence["host_wait_share"] == pytest.approx(0.974, abs=0.005)


def test_host_wait_silent_on_busy_gpu():
    assert _run(QWEN_H100, "host_wait") == []  # busy 92 % of its span


def test_low_utilization_fires_and_is_silent():
    (f,) = _run(BERT_H100, "low_utilization")
    assert f.evidence["utilization_ratio"] == pytest.approx(0.0792, abs=1e-3) and f.severity == "high"
    assert _run(V100_NW0, "low_utilization") == []  # 60.6 %
    assert _run(QWEN_H100, "low_utilization") == []


def test_memcpy_fires_on_pageable_copies():
    (f,) = _run(V100_NW0, "memcpy")
    assert f.evidence["pageable_kinds"] == {"Memcpy HtoD (Pageable -> Device)": 12}
    assert f.evidence["sync_call_count"] == 0  # the copies are cudaMemcpyAsync, but from pageable memory
    assert "pin_memory" in f.next_step


def test_memcpy_silent_on_pinned_copies():
    assert _run(QWEN_H100, "memcpy") == []  # one Memcpy DtoH (Device -> Pinned)
    assert _run("cnn_nw0.pt.trace.json.gz", "memcpy") == []


def test_launch_bound_fires_and_is_silent():
    (f,) = _run(BERT_H100, "launch_bound")
    assert f.evidence["steps"] == [6] and f.evidence["short_ops"] == 40 and f.evidence["ops"] == 61
    assert "CUDA Graphs" in f.next_step
    assert _run(V100_NW4, "launch_bound") == []


def test_communication_fires_and_is_silent():
    (f,) = _run(RANK0_128, "communication")
    assert f.evidence["communication_ratio"] == pytest.approx(0.273, abs=0.005)
    assert f.evidence["world_size"] == 128
    # NCCL present but only ~6 % of the step
    assert _run(NCCL, "communication") == []


def test_memory_peak_rule():
    # No public trace in the corpus comes near 90 % of device memory (the largest, Qwen on an 80 GB
    # H100, peaks at 2.5 %); the rule is exercised on it with a lowered threshold.
    assert _run(QWEN_H100, "memory_peak") == []
    (f,) = _run(QWEN_H100, "memory_peak", memory_peak_ratio=0.02)
    assert f.evidence["peak_allocated_bytes"] == 2_088_508_416
    assert f.evidence["peak_ratio"] == pytest.approx(2_088_508_416 / 85_018_279_936, rel=1e-6)
    assert f.evidence["op"] == "aten::mul" and f.evidence["step"] == 6
    # a CPU profile has no device capacity: never fires
    assert _run("cnn_nw0.pt.trace.json.gz", "memory_peak", memory_peak_ratio=0.0) == []


def test_tensor_cores_fires_on_fp32_v100():
    (f,) = _run(V100_NW4, "tensor_cores")
    assert f.evidence["compute_capability"] == "7.0"
    assert f.evidence["gemm_time_ratio"] > 0.8
    assert f.evidence["tensor_core_ratio"] < 0.01
    assert any("cudnn" in k for k in f.evidence["top_non_tensor_core_kernels"])
    assert "autocast" in f.next_step and "TF32" not in f.next_step  # Volta has no TF32


def test_tensor_cores_silent_where_used_or_unknown():
    # bf16 sm90_xmma GEMMs: silent even when every GEMM share counts
    assert _run(QWEN_H100, "tensor_cores", gemm_time_ratio=0.0) == []
    assert _run(MI300_BERT, "tensor_cores", gemm_time_ratio=0.0) == []  # ROCm: the rule does not apply
    assert _run("cnn_nw0.pt.trace.json.gz", "tensor_cores") == []


def test_advise_all_rules_sorted_and_frame():
    fs = advisor.advise(_t(V100_NW0))
    # efficiency: fp32 convolutions on a Tensor-Core V100, memory-bound elementwise chains; optimizer_loop: torch
    # 1.8's SGD loops over the 161 parameters (483 per-parameter ops per step, no _foreach_ op); host_sync: 13
    # cudaStreamSynchronize/cudaDeviceSynchronize calls hold the host 2% of the step
    assert {f.rule for f in fs} == {"dataloader", "host_wait", "tensor_cores", "memcpy", "efficiency", "optimizer_loop",
                                    "host_sync"}
    # ranked by predicted saving (advisor v2; tests/test_advisor_savings.py checks the values)
    saving = [f.predicted_saving_ns for f in fs if f.predicted_saving_ns is not None]
    assert fs[0].rule == "dataloader" and saving == sorted(saving, reverse=True)
    df = advisor.findings_frame(fs)
    assert list(df.columns) == ["rule", "severity", "title", "where", "next_step", "evidence",
                                "predicted_saving_ns", "saving_reason", "evidence_rows", "part", "code_line", "knob",
                                "step_ns", "ranked"]
    assert df["ranked"].tolist() == [f.ranked for f in fs] and df["ranked"].iloc[0]  # the DataLoader: 33% of the step
    assert len(df) == 8
    json.dumps([f.to_dict() for f in fs])  # evidence is plain JSON
    # the CPU LM (examples/train_transformer.py): AdamW's per-parameter loop (CPU tensors: no foreach by default)
    # and 1768 ops of ~4 µs per step (a small batch); nothing else
    assert {f.rule for f in advisor.advise(_t("lm.pt.trace.json.gz"))} == {"optimizer_loop", "tiny_batch"}


def test_unknown_rule_or_threshold_raises():
    with pytest.raises(ValueError, match="unknown rule"):
        advisor.advise(_t("lm.pt.trace.json.gz"), rules=["nope"])
    with pytest.raises(ValueError, match="unknown threshold"):
        advisor.advise(_t("lm.pt.trace.json.gz"), thresholds={"nope": 1})
