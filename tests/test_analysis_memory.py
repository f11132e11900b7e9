"""Memory analyses on real traces (H100 Qwen, 2021 V100 ResNet-50, CPU profiles of the examples)."""

from __future__ import annotations

import gzip
import json

import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis import memory as M

QWEN_H100 = "AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
RESNET_NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"


def _mem_events(path):
    with gzip.open(path, "rt") as f:
        d = json.load(f)
    return d, [e for e in d["traceEvents"] if e.get("name") == "[memory]"]


@pytest.fixture(scope="module")
def qwen():
    path = corpus_path(QWEN_H100)
    return path, nbprof.load(path)


def test_curve_and_peak_h100(qwen):
    path, tr = qwen
    d, mem = _mem_events(path)
    cuda = [e for e in mem if e["args"]["Device Type"] == 1]
    curve = M.memory_curve(tr)
    c = curve[(curve["device_type"] == 1) & (curve["device"] == 0)]
    assert len(c) == len(cuda) == 2250
    assert not c["reconstructed"].any()
    assert c["total_allocated"].tolist() == [e["args"]["Total Allocated"] for e in sorted(cuda, key=lambda e: e["ts"])]
    peak = M.memory_peak(tr).set_index(["device_type", "device"]).loc[(1, 0)]
    want = max(e["args"]["Total Allocated"] for e in cuda)
    assert peak["peak_allocated_bytes"] == want == 2088508416
    assert peak["peak_reserved_bytes"] == max(e["args"]["Total Reserved"] for e in cuda)
    total = d["deviceProperties"][0]["totalGlobalMem"]
    assert peak["device_total_bytes"] == total
    assert peak["peak_ratio"] == pytest.approx(want / total)  # 2.5% of an 80 GB H100
    # the operator active at the peak: the innermost cpu_op around the allocation that reached it
    first = min((e for e in cuda if e["args"]["Total Allocated"] == want), key=lambda e: e["ts"])
    ops = [
        e for e in d["traceEvents"]
        if e.get("cat") == "cpu_op" and e.get("tid") == first["tid"] and e["ts"] <= first["ts"] <= e["ts"] + e["dur"]
    ]
    innermost = min(ops, key=lambda e: e["dur"])
    assert peak["op"] == innermost["name"] == "aten::mul"
    assert peak["annotation"] == "ProfilerStep#6"
    assert peak["step"] == 6


def test_largest_allocations_pair_alloc_and_free(qwen):
    path, tr = qwen
    _, mem = _mem_events(path)
    big = M.largest_allocations(tr, 5)
    assert len(big) == 5
    assert big["bytes"].is_monotonic_decreasing
    top = big.iloc[0]
    mx = max(e["args"]["Bytes"] for e in mem)
    assert top["bytes"] == mx
    # independent pairing: the next event at the same address after the first largest allocation
    alloc = min((e for e in mem if e["args"]["Bytes"] == mx), key=lambda e: e["ts"])
    later = sorted((e for e in mem if e["args"]["Addr"] == alloc["args"]["Addr"] and e["ts"] > alloc["ts"]),
                   key=lambda e: e["ts"])
    assert later[0]["args"]["Bytes"] == -mx
    assert top["freed"]
    assert top["lifetime_ns"] == round((later[0]["ts"] - alloc["ts"]) * 1000)
    assert top["op"] == "aten::mm"


def test_old_trace_curve_is_reconstructed():
    path = corpus_path(RESNET_NW0)
    _, mem = _mem_events(path)
    tr = nbprof.load(path)
    curve = M.memory_curve(tr)
    assert curve["reconstructed"].all()
    cuda = sorted((e for e in mem if e["args"]["Device Type"] == 1), key=lambda e: e["ts"])
    running, peak = 0, 0
    for e in cuda:
        running += e["args"]["Bytes"]
        peak = max(peak, running)
    p = M.memory_peak(tr).set_index(["device_type", "device"]).loc[(1, 0)]
    assert p["peak_allocated_bytes"] == peak
    assert p["reconstructed"]
    assert p["peak_ratio"] == pytest.approx(peak / tr.meta.device_properties[0]["totalGlobalMem"])
    # no Addr in 2021 traces: allocations cannot be paired with their frees
    big = M.largest_allocations(tr, 3)
    assert (~big["freed"]).all() and (big["lifetime_ns"] == -1).all()
    # one row per step and device; steady state: nothing grows from step to step
    g = M.growth_by_step(tr)
    assert sorted(set(g["step"])) == tr.steps
    assert M.suspected_leaks(tr).empty


def test_growth_by_step_cpu_profile_of_the_example():
    tr = nbprof.load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")
    g = M.growth_by_step(tr)
    assert list(g["step"]) == tr.steps
    # the end of one step is where the next one starts
    assert (g["start_allocated_bytes"].to_numpy()[1:] == g["end_allocated_bytes"].to_numpy()[:-1]).all()
    assert (g["peak_allocated_bytes"] >= g["end_allocated_bytes"]).all()
    assert M.suspected_leaks(tr).empty


def test_leak_is_suspected_on_a_real_leaking_loop(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    kept = []
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                 schedule=schedule(wait=1, warmup=1, active=4, repeat=1)) as prof:
        for _ in range(6):
            x = torch.randn(256, 256)
            kept.append(x @ x)  # 256 KiB kept alive every step: a leak
            prof.step()
    path = tmp_path / "leak.pt.trace.json"
    prof.export_chrome_trace(str(path))
    tr = nbprof.load(path)
    leaks = M.suspected_leaks(tr)
    assert len(leaks) == 1 and leaks.loc[0, "device_type"] == 0
    assert leaks.loc[0, "growth_per_step_bytes"] == pytest.approx(256 * 256 * 4, rel=0.05)
    big = M.largest_allocations(tr, 8)
    assert (~big["freed"]).sum() >= 3  # the kept results are never freed


def test_h200_lm_profile_peak_fraction_and_steady_state():
    """A real H200 profile of the example LM (data/gpu, made by this project)."""
    path = DATA / "gpu" / "lm_mem.pt.trace.json.gz"
    d, mem = _mem_events(path)
    tr = nbprof.load(path)
    cuda = [e for e in mem if e["args"]["Device Type"] == 1]
    peak = M.memory_peak(tr).set_index(["device_type", "device"]).loc[(1, 0)]
    want = max(e["args"]["Total Allocated"] for e in cuda)
    total = d["deviceProperties"][0]["totalGlobalMem"]
    assert total > 140e9  # an H200
    assert peak["peak_allocated_bytes"] == want
    assert peak["peak_ratio"] == pytest.approx(want / total)
    assert peak["reserved_ratio"] == pytest.approx(max(e["args"]["Total Reserved"] for e in cuda) / total)
    # a training loop in steady state: after the first step nothing is left behind
    g = M.growth_by_step(tr)
    cuda_g = g[g["device_type"] == 1]
    assert list(cuda_g["step"]) == tr.steps
    assert (cuda_g["growth_bytes"].iloc[1:] == 0).all()
    assert M.suspected_leaks(tr).empty


def test_operator_memory_on_h100(qwen):
    """The memory view's operator table on a real trace: a device's increases are ``operator_summary``'s
    memory columns (one definition); allocations are at least the increase; a record inside calls on two
    threads counts for both (torch's any-thread rule): the Python thread's ``threading.py(359): wait``
    holds all 1,125 CUDA allocations as its own, as the ops of the main thread do together."""
    from nbprof.analysis import operators as O

    _path, tr = qwen
    om = O.operator_memory(tr)
    gpu = om[(om["device_type"] == 1) & (om["device"] == 0)].set_index("name")
    ops = O.operator_summary(tr).set_index("name")
    assert (gpu["increase_bytes"] == ops.loc[gpu.index, "device_mem_bytes"]).all()
    assert (gpu["self_increase_bytes"] == ops.loc[gpu.index, "self_device_mem_bytes"]).all()
    assert (gpu["alloc_bytes"] >= gpu["increase_bytes"]).all() and (gpu["allocs"] >= gpu["self_allocs"]).all()
    n_alloc = int((tr.memory.query("device_type == 1")["bytes"] > 0).sum())
    assert n_alloc == 1125 == int(gpu.loc["threading.py(359): wait", "self_allocs"])
    assert int(gpu["self_allocs"].sum()) == 2 * n_alloc
