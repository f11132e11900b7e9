"""torch.compile kernels (nbprof.analysis.compiled): Inductor kernel -> launch -> compiled region, FX graph, module,
source line, and the fused-op work model, on the two corpus Triton traces and a real CPU torch.compile run."""

from __future__ import annotations

import numpy as np
import pytest

import nbprof
from nbprof.analysis.compiled import compiled_kernels
from nbprof.analysis.efficiency import kernel_work, op_work
from nbprof.analysis.efficiency.inductor import inductor_work, parse_kernel_name

TRACELENS = "AMD-AGI__TraceLens/tests/traces/torch_compile_triton/trace.json.gz"
HTA = "facebookresearch__HolisticTraceAnalysis/tests/data/triton_example/triton_example.json.gz"


def test_names_parse_into_kind_and_fused_ops():
    k = parse_kernel_name("triton_per_fused__log_softmax_native_layer_norm_backward_7")
    assert (k.backend, k.kind, k.fused_ops, k.index) == ("triton", "persistent_reduction",
                                                         ("_log_softmax", "native_layer_norm_backward"), 7)
    assert parse_kernel_name("triton_tem_fused_addmm_0").kind == "template"
    assert parse_kernel_name("cpp_fused_add_gelu_3").kind == "cpp"
    assert parse_kernel_name("void at::native::vectorized_elementwise_kernel<4>") is None
    # a template names no per-element work; a looped reduction may read its inputs twice
    assert inductor_work("triton_tem_fused_mm_0", [(4, 16)]) is None
    w = inductor_work("triton_red_fused_sum_0", [(1024, 4096), (8, 32)])
    assert (w.flops, w.bytes, w.bytes_high) == (1024.0, 4128.0, 8224.0)


def test_tracelens_triton_kernels_map_to_their_region_and_graph(corpus):
    tr = nbprof.load(corpus(TRACELENS))
    ck = compiled_kernels(tr)
    assert ck["name"].tolist() == ["triton_red_fused_add_mean_mul_pow_rsqrt_0",
                                   "triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1",
                                   "triton_poi_fused__unsafe_view_mul_silu_2", "triton_poi_fused__unsafe_view_add_3"]
    assert set(ck["region"]) == {"Torch-Compiled Region: 0/0"}
    assert set(ck["fx_graph"]) == {"fal4xpiah2v6blbfmwwonu52dvevbsmlh743q5tkclrt4gcqpzea"}
    ev = tr.events
    # the launch is the Triton launch op of the same name (External id link)
    assert (ev["name"].astype(str).to_numpy()[ck["launch_event"]] == ck["name"].to_numpy()).all()
    assert ck["dur_ns"].tolist() == [77074, 90653, 527382, 140848]
    # RMSNorm over [8, 4096, 2048] bf16: 5 fused ops x 67.1 M elements; buffers x, w, out (+ scalars)
    first = ck.iloc[0]
    assert first["fused_ops"] == "add,mean,mul,pow,rsqrt" and first["kind"] == "reduction"
    assert first["flops"] == 5 * 8 * 4096 * 2048 and first["flops_low"] == 8 * 4096 * 2048
    assert first["bytes"] == (2 * 8 * 4096 * 2048 + 2048) * 2
    # the efficiency tables use the same model: op_work and kernel_work carry it
    ow = op_work(tr)
    tri = ow[ow["name"].astype(str).str.startswith("triton_")]
    assert len(tri) == 4 and set(tri["kind"]) == {"elementwise", "reduction"}
    assert np.allclose(np.sort(tri["flops"].to_numpy()), np.sort(ck["flops"].to_numpy()))
    kw = kernel_work(tr)
    assert np.isclose(kw.loc[kw["event"] == first["event"], "flops"].iloc[0], first["flops"])


def test_hta_triton_example(corpus):
    ck = compiled_kernels(nbprof.load(corpus(HTA)))
    assert len(ck) == 1
    r = ck.iloc[0]
    assert (r["name"], r["kind"], r["fused_ops"], r["region"]) == (
        "triton_poi_fused_add_cos_sin_0", "pointwise", "add,cos,sin", "Torch-Compiled Region: 0/0")
    assert r["dur_ns"] == 1760 and r["flops"] == 300.0 and r["flops_low"] == 100.0


@pytest.mark.slow
def test_cpu_torch_compile_kernels_map_to_region_module_and_source_line(tmp_path):
    """A real torch 2.13 CPU torch.compile (Inductor's C++/OpenMP kernels, profiled by name with
    ``cpp.enable_kernel_profile``): the same Torch-Compiled Region > CompiledFunction > CompiledFxGraph structure.
    Inductor's first compile takes 20-90 s on this machine's 2 shared cores: marked slow."""
    import shutil

    if shutil.which("g++") is None and shutil.which("cc") is None:
        pytest.skip("Inductor's CPU backend needs a C++ compiler (g++ / cc): none on PATH")
    pytest.importorskip("torch")
    import torch
    import torch._dynamo
    import torch._inductor.config as icfg
    from torch.profiler import ProfilerActivity, profile

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(64, 64)

        def forward(self, x):
            return torch.nn.functional.gelu(self.lin(x)).sin() * 2 + x.mean(-1, keepdim=True)

    torch._dynamo.reset()
    m, x = Block(), torch.randn(32, 64)
    with icfg.patch({"cpp.enable_kernel_profile": True}):
        cm = torch.compile(m)
        cm(x)
        with profile(activities=[ProfilerActivity.CPU], with_stack=True, record_shapes=True) as p:
            for _ in range(3):
                cm(x)  # the source line nbprof should name
    path = tmp_path / "compiled_cpu.json"
    p.export_chrome_trace(str(path))
    torch._dynamo.reset()
    ck = compiled_kernels(nbprof.load(path))
    assert len(ck) == 3 and set(ck["backend"]) == {"cpp"}
    assert all("gelu" in f.split(",") and "sin" in f.split(",") for f in ck["fused_ops"])
    assert set(ck["region"]) == {"Torch-Compiled Region: 0/0"} and set(ck["compiled_function"]) == {"CompiledFunction"}
    assert ck["fx_graph"].str.len().min() > 20 and ck["fx_graph"].nunique() == 1
    assert set(ck["module"]) == {"Block_0"}
    assert all(s.startswith("test_compiled.py(") for s in ck["source"]), ck["source"].tolist()
    assert (ck["launch_event"] == ck["event"]).all() and (ck["dur_ns"] > 0).all()
