"""nbprof.analysis.efficiency: every formula against a hand-computed value, FLOPs against torch's own
count (CPU profiles made here; real GPU traces by replaying their recorded shapes and concrete inputs
through torch's profiler with ``with_flops=True``), peaks, the efficiency frames and MFU."""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.analysis import efficiency as eff
from nbprof.analysis.operators import _torch_shapes_key

torch = pytest.importorskip("torch")

DATA = Path(__file__).resolve().parents[1] / "data"
F, BF = "float", "c10::BFloat16"


# ------------------------------------------------------------------------------ formulas, by hand

def test_gemm_formulas_hand_computed():
    # mm [8,16]x[16,32]: 2*8*16*32 = 8192 FLOPs; bytes (8*16 + 16*32 + 8*32) * 4 = 3584
    w = eff.work("aten::mm", [[8, 16], [16, 32]], [F, F])
    assert (w.flops, w.bytes, w.kind, w.dtype) == (8192, 3584, "gemm", "fp32")
    # mm with an out= tensor [8,32]: the result is written once, not also read (issue 34: was 3584 + 1024)
    w = eff.work("aten::mm", [[8, 16], [16, 32], [8, 32]], [F, F, F])
    assert (w.flops, w.bytes) == (8192, 3584)
    # addmm: bias 32 adds 128 bytes and one add per output element (8*32 = 256; TraceLens GEMM.flops_func);
    # torch's profiler counts 2*m*k*n only: kept as torch_flops
    w = eff.work("aten::addmm", [[32], [8, 16], [16, 32], [], []], [F, F, F, "Scalar", "Scalar"])
    assert (w.flops, w.bytes, w.torch_flops) == (8448, 3712, 8192)
    # bmm [3,4,5]x[3,5,6]: 2*3*4*5*6 = 720; bytes (60 + 90 + 72) * 2 (bf16) = 444
    w = eff.work("aten::bmm", [[3, 4, 5], [3, 5, 6]], [BF, BF])
    assert (w.flops, w.bytes, w.dtype) == (720, 444, "bf16")
    w = eff.work("aten::baddbmm", [[3, 4, 6], [3, 4, 5], [3, 5, 6], [], []], [F, F, F, "Scalar", "Scalar"])
    assert (w.flops, w.torch_flops) == (720 + 72, 720)
    # linear x[2,5,16] w[32,16] (+ bias [32]: 10*32 adds): 2*10*16*32 = 10240
    assert eff.work("aten::linear", [[2, 5, 16], [32, 16]], [F, F]).flops == 10240
    assert eff.work("aten::linear", [[2, 5, 16], [32, 16], [32]], [F, F, F]).flops == 10240 + 320
    # matmul with broadcast batch [2,1,4,5] @ [3,5,6] -> batch [2,3]: 2*6*4*5*6 = 1440
    assert eff.work("aten::matmul", [[2, 1, 4, 5], [3, 5, 6]], [F, F]).flops == 1440
    assert eff.work("aten::matmul", [[7], [7]], [F, F]).flops == 14


def test_conv_formulas_hand_computed():
    # x [2,3,10,10], w [4,3,3,3], stride 2 pad 1 -> 5x5: 2*2*4*25*3*9 = 10800
    assert eff.conv_out_spatial([10, 10], [3, 3], [2, 2], [1, 1], [1, 1]) == [5, 5]
    w = eff.work("aten::conv2d", [[2, 3, 10, 10], [4, 3, 3, 3], [], [], [], [], []], [F, F, "", "", "", "", ""],
                 out_shape=[2, 4, 5, 5])
    assert w.flops == 10800
    # bytes: x 600 + w 108 + out 200 elements, * 4
    assert w.bytes == (600 + 108 + 200) * 4
    # groups 3: x [2,6,9,9], w [6,2,3,3] -> 7x7: 2*2*6*49*2*9 = 21168
    assert eff.conv_flops([2, 6, 9, 9], [6, 2, 3, 3], [7, 7]) == 21168
    # backward: grad_out [2,4,5,5] -> 2 x 10800
    wb = eff.work("aten::convolution_backward", [[2, 4, 5, 5], [2, 3, 10, 10], [4, 3, 3, 3], [], [], [], [], [], [], []],
                  [F, F, F, "", "", "", "", "", "", ""])
    assert wb.flops == 21600
    # forward conv without an output shape has no model (stride/padding unknown)
    assert eff.work("aten::conv2d", [[2, 3, 10, 10], [4, 3, 3, 3]], [F, F]) is None


def test_attention_formulas_hand_computed():
    # q,k,v [1,2,4,8]: QK^T 2*1*2*4*4*8 = 512, PV 512 -> 1024; backward 2048; causal halves
    q = [1, 2, 4, 8]
    assert eff.sdpa_flops(q, q, q) == 1024
    assert eff.sdpa_flops(q, q, q, backward=True) == 2048
    assert eff.sdpa_flops(q, q, q, causal=True) == 512
    w = eff.work("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], [BF, BF, BF] + [""] * 4)
    assert (w.flops, w.kind, w.dtype) == (1024, "attention", "bf16")
    assert w.bytes == 4 * 64 * 2  # q, k, v, out of 64 bf16 elements
    # the kernel-level entry point lays q/k/v out [B, L, H, E]: same FLOPs for q [1,4,2,8]
    ql = [1, 4, 2, 8]
    assert eff.work("aten::_flash_attention_forward", [ql, ql, ql] + [[]] * 6, [BF] * 3 + [""] * 6).flops == 1024
    # non-square: L=4, S=6 (k, v [1,6,2,8]): 2*1*2*4*6*8 * 2 = 1536
    kl = [1, 6, 2, 8]
    assert eff.work("aten::_efficient_attention_forward", [ql, kl, kl], [BF] * 3).flops == 1536
    wb = eff.work("aten::_scaled_dot_product_flash_attention_backward", [q, q, q, q, q, [1, 2, 4]], [BF] * 6)
    assert wb.flops == 2048


def test_elementwise_reduction_norm_softmax_embedding_hand_computed():
    # broadcast aten::mul/add: one FLOP per output element (128 for [1,16]*[8,16]); torch's profiler rule
    # (numel of the first argument: 16) kept as torch_flops
    w = eff.work("aten::mul", [[1, 16], [8, 16]], [F, F])
    assert (w.flops, w.torch_flops) == (128, 16)
    # copy_(dst, src): src read, dst written (not read): 128*2 + 128*4 for a bf16 -> fp32 copy, 0 FLOPs
    w = eff.work("aten::copy_", [[8, 16], [8, 16], []], [F, BF, "Scalar"])
    assert (w.flops, w.bytes) == (0, 128 * 2 + 128 * 4)
    # reductions write their result: mean over dim [-1] of [4, 10] keepdim reads 40, writes 4 elements
    w = eff.work("aten::mean", [[4, 10], [], [], []], [F, "ScalarList", "Scalar", ""], concrete=["", "[-1]", "True", ""])
    assert (w.flops, w.bytes) == (40, (40 + 4) * 4)
    w = eff.work("aten::mul", [[8, 16], [8, 16]], [F, F])
    assert (w.flops, w.bytes) == (128, 3 * 128 * 4)
    # other elementwise: the broadcast output ([4,3] from [4,1] and [3])
    assert eff.work("aten::sub", [[4, 1], [3]], [F, F]).flops == 12
    assert eff.work("aten::gelu", [[10, 10], []], [F, ""]).flops == 100
    assert eff.work("aten::sum", [[10, 20], [], [], []], [F, "", "", ""]).flops == 200
    assert eff.work("aten::_softmax", [[4, 10], [], []], [F, "", ""]).flops == 200  # 5 * 40
    w = eff.work("aten::native_layer_norm", [[4, 10], [], [10], [10], []], [F, "", F, F, ""])
    assert (w.flops, w.kind) == (200, "norm")
    assert w.bytes == (40 + 10 + 10 + 40) * 4
    assert eff.work("aten::native_layer_norm_backward", [[4, 10], [4, 10]], [F, F]).flops == 320
    assert eff.work("aten::rms_norm", [[4, 10], [], [10], []], [F, "", F, ""]).flops == 160
    assert eff.work("aten::native_batch_norm", [[2, 3, 4, 4], [3], [3]], [F, F, F]).flops == 5 * 96
    # embedding weight [100,8], indices [2,5] (int64): 0 FLOPs; bytes 10*8 (indices) + 2 * 10*8*4
    w = eff.work("aten::embedding", [[100, 8], [2, 5], [], [], []], [F, "long int", "", "", ""])
    assert (w.flops, w.bytes) == (0, 80 + 640)


def test_optimizer_formulas_hand_computed():
    params = [[10, 4], [4]]  # 44 elements
    dims = [params, params, params, params, [], [[]], [], [], [], [], [], [], [], [], []]
    w = eff._optimizer_work("aten::_fused_adamw_", dims, ["TensorList"] * 4)
    assert (w.flops, w.bytes) == (14 * 44, 7 * 44 * 4)
    w = eff._optimizer_work("aten::_foreach_add_", [params, params, []], ["TensorList", "TensorList", "Scalar"])
    assert w.flops == 44


# ---------------------------------------------------------------- FLOPs == torch's own, CPU profiles

def _profile_ops(tmp_path):
    from torch.profiler import profile

    x, w, b = torch.randn(8, 16), torch.randn(32, 16), torch.randn(32)
    a3, b3 = torch.randn(3, 4, 5), torch.randn(3, 5, 6)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, stride=2, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(6, 6, 3, groups=3, dilation=2), torch.nn.Flatten(),
                                torch.nn.Linear(6 * 2 * 2, 10))
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    img = torch.randn(4, 3, 12, 12)
    with profile(record_shapes=True, with_flops=True) as p:
        torch.nn.functional.linear(x, w, b)
        torch.mm(x, w.t())
        torch.bmm(a3, b3)
        torch.baddbmm(torch.randn(3, 4, 6), a3, b3)
        torch.matmul(a3, b3)
        _ = x * x, x + x, x * 2.0, x.add(torch.randn(16)), torch.randn(1, 16) * x
        for i in range(2):
            with torch.profiler.record_function(f"ProfilerStep#{i}"):  # what profile.step() records
                loss = model(img).square().mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
    path = tmp_path / "ops.pt.trace.json"
    p.export_chrome_trace(str(path))
    return p, nbprof.load(path)


def test_flops_equal_torch_on_cpu_profile(tmp_path):
    p, trace = _profile_ops(tmp_path)
    torch_flops = {(e.key, json.dumps(e.input_shapes)): e.flops for e in p.key_averages(group_by_input_shape=True)
                   if e.flops}
    assert len(torch_flops) >= 8
    w = eff.op_work(trace)
    ours = w[~w["merged"]].groupby(["name", "input_dims"], observed=True)["torch_flops"].sum().to_dict()
    for key, f in torch_flops.items():
        assert ours[key] == f, key
    oe = eff.operator_efficiency(trace)
    # the roofline's flops: the broadcast [1,16]*[8,16] mul does 128 FLOPs per call (torch's rule: 16)
    mul = oe[(oe["name"] == "aten::mul") & (oe["input_dims"] == "[[1, 16], [8, 16]]")]
    assert (mul["flops"] / mul["count"]).tolist() == [128.0]
    kinds = set(oe["kind"])
    assert {"gemm", "conv", "elementwise", "optimizer"} <= kinds
    # the backward conv has a model too (2 x forward)
    assert (oe["name"] == "aten::convolution_backward").any()


def test_operator_efficiency_columns_cpu(tmp_path):
    _, trace = _profile_ops(tmp_path)
    pk = eff.peaks(custom={"fp32": 1.0, "bandwidth_gbs": 100.0})  # 1 TFLOP/s, 100 GB/s: ridge 10 FLOP/B
    oe = eff.operator_efficiency(trace, peaks_=pk)
    for c in eff.EFFICIENCY_COLUMNS:
        assert c in oe
    r = oe[(oe["name"] == "aten::mm") & (oe["input_dims"] == "[[8, 16], [16, 32]]")].iloc[0]
    assert r["achieved_tflops_per_s"] == pytest.approx(r["flops"] / r["time_ns"] / 1e3)
    assert r["achieved_gb_per_s"] == pytest.approx(r["bytes"] / r["time_ns"])
    assert r["arithmetic_intensity"] == pytest.approx(8192 / 3584)
    assert r["bound"] == "memory"  # 2.29 FLOP/B < ridge 10
    roof = min(1e12, r["arithmetic_intensity"] * 1e11)
    assert r["peak_ratio"] == pytest.approx(r["flops"] / (r["time_ns"] * 1e-9) / roof)
    # operator_summary's own columns are unchanged (torch's flops kept as recorded_flops)
    assert "recorded_flops" in oe and "total_host_ns" in oe


def test_step_mfu_cpu(tmp_path):
    _, trace = _profile_ops(tmp_path)
    pk = eff.peaks(custom={"fp32": 1.0, "bandwidth_gbs": 100.0})
    m = eff.step_mfu(trace, peaks_=pk)
    assert len(m) == 2
    w = eff.op_work(trace)
    w = w[w["counted"]]
    s0 = int(m["step"].iloc[0])
    mat = w[(w["step"] == s0) & w["kind"].isin(["gemm", "conv", "attention"])]["flops"].sum()
    assert m["model_flops"].iloc[0] == pytest.approx(mat)
    assert m["hardware_flops"].iloc[0] >= m["model_flops"].iloc[0] > 0
    assert m["mfu"].iloc[0] == pytest.approx(mat / (m["step_ns"].iloc[0] * 1e-9 * 1e12))


# --------------------------------------------------------------------- FLOPs == torch's, real traces

_TORCH_COUNTED = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::conv2d", "aten::mul", "aten::add")
_DT = {"float": torch.float32, "double": torch.float64, "c10::Half": torch.float16, "c10::BFloat16": torch.bfloat16,
       "long int": torch.int64, "int": torch.int32, "bool": torch.bool}


def _scalar(text):
    try:
        v = json.loads(text)
    except ValueError:
        return 1
    return v if isinstance(v, (int, float, list)) else 1


def _torch_flops(name, dims, types, concrete):
    """torch's own with_flops count for one call: run the op on zero tensors under the profiler."""
    from torch.profiler import profile

    args = []
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        c = concrete[i] if i < len(concrete) else ""
        if t in _DT and isinstance(d, list) and all(isinstance(x, int) for x in d):
            args.append(torch.zeros(d, dtype=_DT[t]))
        elif c != "":
            args.append(_scalar(c))
        else:
            args.append(None)
    fn = getattr(torch.ops.aten, name.split("::")[1])
    kwargs = {}
    if name == "aten::add" and len(args) == 3:
        kwargs["alpha"] = args.pop()
    if name in ("aten::addmm", "aten::baddbmm") and len(args) == 5:
        kwargs["alpha"] = args.pop()
        kwargs["beta"] = args.pop()
    if name == "aten::conv2d":
        args = args[:7]
    with profile(record_shapes=True, with_flops=True) as p:
        fn(*args, **kwargs)
    return sum(e.flops for e in p.key_averages() if e.key == name)


def _replay_check(path, max_elems=2e7):
    with gzip.open(path, "rt") as f:
        evs = json.load(f)["traceEvents"]
    expected = defaultdict(float)
    cache = {}
    skipped = 0
    ops = sorted((e for e in evs if e.get("cat") == "cpu_op" and e.get("name") in _TORCH_COUNTED),
                 key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    # torch's key_averages folds a same-name child into its parent (_remove_dup_nodes): count it once
    dup = set()
    for i, e in enumerate(ops):
        j = i - 1
        while j >= 0 and ops[j]["tid"] == e["tid"] and ops[j]["ts"] + ops[j]["dur"] < e["ts"] + e["dur"] - 0.002:
            j -= 1
        if j >= 0 and ops[j]["tid"] == e["tid"] and ops[j]["name"] == e["name"]:
            dup.add(i)
    for i, e in enumerate(ops):
        if i in dup:
            continue
        a = e.get("args", {})
        dims, types, conc = a.get("Input Dims", []), a.get("Input type", []), a.get("Concrete Inputs", [])
        key = (e["name"], json.dumps(dims), json.dumps(types), json.dumps(conc))
        if key not in cache:
            n = sum(math.prod(d) for d in dims if isinstance(d, list) and all(isinstance(x, int) for x in d))
            cache[key] = None if n > max_elems else _torch_flops(e["name"], dims, types, conc)
        if cache[key] is None:
            skipped += 1
            continue
        expected[(e["name"], _torch_shapes_key(json.dumps(dims)))] += cache[key]
    trace = nbprof.load(path)
    w = eff.op_work(trace)
    w = w[~w["merged"]]
    ours = w.groupby(["name", "input_dims"])["torch_flops"].sum().to_dict()
    checked = 0
    for k, f in expected.items():
        if f > 0:
            assert ours.get(k) == f, (k, ours.get(k), f)
            checked += 1
    return checked, skipped, trace


REAL = [
    "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "AMD-AGI__TraceLens/tests/traces/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    "AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "AMD-AGI__TraceLens/tests/traces/perf_model/normalization/normalization_layer_test.json.gz",
]


@pytest.mark.parametrize("rel", REAL)
def test_flops_equal_torch_on_real_corpus_traces(rel):
    checked, _skipped, trace = _replay_check(corpus_path(rel))
    if "normalization" not in rel:
        assert checked >= 3


@pytest.mark.parametrize("name", ["lm_mem", "cnn_h200"])
def test_flops_equal_torch_on_real_h200_traces(name):
    checked, _skipped, trace = _replay_check(DATA / "gpu" / f"{name}.pt.trace.json.gz")
    assert checked >= 3
    if name == "cnn_h200":  # conv2d forward: output shape from the descendants, stride/padding from torch
        w = eff.op_work(trace)
        assert (w["name"] == "aten::conv2d").sum() > 0


# ------------------------------------------------------------------------------------------- peaks

def test_peak_table_rows_and_sources():
    t = eff.device_table()
    for key in ("V100-SXM2", "A100-SXM4-80GB", "H100-SXM5", "H100-PCIe", "H200-SXM", "B200", "L4", "L40S",
                "RTX-4090", "MI250X-GCD", "MI300X", "MI325X"):
        row = t[t["key"] == key].iloc[0]
        assert row["source"] and row["bandwidth_gbs"] > 0 and row["fp32"] > 0
    h = t.set_index("key")
    assert h.loc["H100-SXM5", "bf16"] == 989.4 and h.loc["H100-SXM5", "fp8"] == 1978.9  # dense, not 1979/3958
    assert h.loc["H200-SXM", "bandwidth_gbs"] == 4800
    assert h.loc["A100-SXM4-80GB", "tf32"] == 156.0
    assert math.isnan(h.loc["V100-SXM2", "bf16"])


def test_peaks_matched_from_device_properties():
    p = eff.peaks(nbprof.load(DATA / "gpu" / "lm_h200.pt.trace.json.gz"))
    assert p.key == "H200-SXM" and p.known and p.flops_per_s["bf16"] == 989.4e12 and "H200" in p.note
    p = eff.peaks(nbprof.load(corpus_path(REAL[0])))
    assert p.key == "H100-SXM5" and "SM count" not in p.note
    p = eff.peaks(nbprof.load(corpus_path(REAL[1])))
    assert p.key == "MI300X"


def test_peaks_unknown_and_custom(tmp_path):
    trace = nbprof.load(DATA / "gpu" / "lm_h200.pt.trace.json.gz")
    trace.meta.device_properties = [{"id": 0, "name": "Imaginary GPU 9000", "numSms": 7}]
    p = eff.peaks(trace)
    assert not p.known and "not in the peak table" in p.note
    p = eff.peaks(trace, custom={"bf16": 100.0, "fp32": 10.0, "bandwidth_gbs": 1000.0})
    assert p.known and p.flops_per_s["bf16"] == 1e14 and p.bytes_per_s == 1e12
    p = eff.peaks(trace, custom={"key": "L4"})
    assert p.key == "L4"
    with pytest.raises(ValueError, match="unknown peak-table key"):
        eff.peaks(trace, custom={"key": "nope"})
    # SXM vs PCIe by name
    trace.meta.device_properties = [{"id": 0, "name": "NVIDIA H100 PCIe", "numSms": 114}]
    assert eff.peaks(trace).key == "H100-PCIe"
    trace.meta.device_properties = [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "numSms": 108}]
    assert eff.peaks(trace).key == "A100-40GB"
    trace.meta.device_properties = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 66}]
    assert "SM count 66" in eff.peaks(trace).note
    trace.meta.device_properties = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132, "clockRate": 1_410_000_000}]
    assert "recorded clock 1410 MHz" in eff.peaks(trace).note  # nsys: Hz


# ---------------------------------------------------------------------------- kernels, MFU on GPU

def test_kernel_work_shares_add_up_lm_h200():
    trace = nbprof.load(DATA / "gpu" / "lm_h200.pt.trace.json.gz")
    kw = eff.kernel_work(trace)
    w = eff.op_work(trace).set_index("event")
    assert len(kw)
    for op_event, g in kw.groupby("op_event"):
        assert g["bytes"].sum() == pytest.approx(w.loc[op_event, "bytes"])
        assert g["flops"].sum() == pytest.approx(w.loc[op_event, "flops"])
    ke = eff.kernel_efficiency(trace)
    gemm = ke[ke["kind"] == "gemm"]
    assert len(gemm) and (gemm["peak_ratio"] > 0).all() and gemm["bound"].notna().all()
    assert (ke["peak_gb_per_s"] == 4800).all()


def test_mfu_on_h200_lm():
    trace = nbprof.load(DATA / "gpu" / "lm_h200.pt.trace.json.gz")
    m = eff.step_mfu(trace)
    assert len(m) == 3
    assert ((m["mfu"] > 0) & (m["mfu"] < 1)).all()
    assert (m["hfu"] >= m["mfu"]).all()
    assert np.isfinite(m["peak_tflops_per_s"]).all()


def test_recorded_flops_argument_is_used_and_equals_the_model(tmp_path):
    """Traces whose exporter wrote the ``flops`` argument (Kineto of torch 1.x): nbprof's model equals it
    per event, and the frames report it as ``recorded_flops``."""
    p, _ = _profile_ops(tmp_path)
    torch_by_key = {(e.key, json.dumps(e.input_shapes)): e.flops / e.count
                    for e in p.key_averages(group_by_input_shape=True) if e.flops}
    path = tmp_path / "ops.pt.trace.json"
    raw = json.loads(path.read_text())
    n = 0
    for e in raw["traceEvents"]:
        a = e.get("args", {})
        key = (e.get("name"), _torch_shapes_key(json.dumps(a.get("Input Dims"))))
        if e.get("cat") == "cpu_op" and key in torch_by_key:
            a["flops"] = torch_by_key[key]
            n += 1
    path.write_text(json.dumps(raw))
    trace = nbprof.load(path)
    w = eff.op_work(trace)
    rec = w[w["recorded_flops"].notna()]
    assert len(rec) == n >= 10
    assert (rec["torch_flops"] == rec["recorded_flops"]).all()
    oe = eff.operator_efficiency(trace)
    r = oe[oe["recorded_flops"].notna()]
    tf = w[~w["merged"]].groupby(["name", "input_dims"], observed=True)["torch_flops"].sum()
    assert len(r) and (r["recorded_flops"].to_numpy() == tf.reindex(pd.MultiIndex.from_frame(
        r[["name", "input_dims"]])).to_numpy()).all()


def test_advisor_efficiency_rule_on_h200_lm(tmp_path):
    from nbprof.analysis import advisor

    trace = nbprof.load(DATA / "gpu" / "lm_h200.pt.trace.json.gz")
    found = advisor.advise(trace, rules=["efficiency"])
    titles = [f.title for f in found]
    assert any(t.startswith("fp32 matrix ops take") for t in titles)  # the LM runs fp32 GEMMs on an H200
    fp32 = next(f for f in found if f.title.startswith("fp32 matrix"))
    assert fp32.evidence["peak_key"] == "H200-SXM" and fp32.evidence["peak_speedup"] == pytest.approx(989.4 / 67)
    assert "autocast" in fp32.next_step and fp32.evidence_rows
    assert fp32.scenario is not None and "kernels of fp32 matrix ops" in str(fp32.scenario)
    assert all(f.predicted_saving_ns is None or f.predicted_saving_ns >= 0 for f in found)
    json.dumps([f.to_dict() for f in found])  # evidence is JSON-serialisable
    # a CPU trace has no device roof: no efficiency finding
    _, cpu = _profile_ops(tmp_path)
    assert advisor.advise(cpu, rules=["efficiency"]) == []
