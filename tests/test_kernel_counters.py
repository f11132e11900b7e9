"""Kernel hardware counters (nbprof.analysis.kernel_counters): CUPTI range-profiler counters joined to kernel
launches and operators, shown in the GPU Kernel view, and counted DRAM bytes used by the roofline."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.analysis.efficiency import kernel_efficiency, kernel_work
from nbprof.analysis.kernel_counters import counter_table, kernel_counters
from nbprof.trace import predicates as pred

CUPTI = "facebookresearch__HolisticTraceAnalysis/tests/data/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"
TRACELENS = "AMD-AGI__TraceLens/tests/traces/torch_compile_triton/trace.json.gz"


def test_cupti_profiler_counters_join_launches_and_operators(corpus):
    path = corpus(CUPTI)
    tr = nbprof.load(path)
    kc = kernel_counters(tr)
    assert len(kc) == 77 and (kc["kernel_event"] == -1).all()  # range-profiler mode: no kernel activity
    assert (kc["launch_event"] >= 0).all()  # 77 ranges, 77 cudaLaunchKernel: every range joined, in order
    ev = tr.events
    assert set(ev["name"].astype(str).to_numpy()[kc["launch_event"]]) == {"cudaLaunchKernel"}
    assert kc["operator"].value_counts().to_dict() == {
        "aten::cudnn_convolution": 28, "aten::clamp_min_": 14, "aten::addmm": 12, "aten::add_": 10,
        "aten::max_pool2d_with_indices": 6, "aten::native_dropout": 4, "aten::_adaptive_avg_pool2d": 2,
        "aten::relu_": 1}
    # the SASS counters' FLOPs (an FMA counts 2, HTA's rule), recomputed from the file itself
    with gzip.open(path, "rt") as f:
        raw = [e["args"] for e in json.load(f)["traceEvents"] if e.get("cat") == "cuda_profiler_range"]
    want = sum(v * (2 if "fma" in k else 1) for a in raw for k, v in a.items())
    assert kc["counted_flops"].sum() == want == 80231038456
    assert kc["dram_bytes"].isna().all() and kc["achieved_occupancy_ratio"].isna().all()  # not counted here
    ct = counter_table(tr)
    top = ct.iloc[0]
    assert (top["name"], top["operator"], top["calls"]) == ("ampere_sgemm_32x32_sliced1x4_tn", "aten::addmm", 6)
    assert int(ct["calls"].sum()) == 77


def test_counters_reach_the_gpu_kernel_view(corpus):
    pytest.importorskip("bokeh")
    from nbprof.viz.kernels import kernels_view, static_view

    tr = nbprof.load(corpus(CUPTI))
    v = kernels_view(tr)
    assert len(v.tables["counters"]) == len(counter_table(tr)) == 16
    assert "hardware counters (CUPTI range profiler)" in v.text
    assert "ampere_sgemm_32x32_sliced1x4_tn (aten::addmm)" in v.text
    src = [m for m in static_view(tr).references() if getattr(m, "name", None) == "nbprof_kernel_counters_source"]
    assert len(src) == 1
    data = src[0].data
    assert data["name"][0] == "ampere_sgemm_32x32_sliced1x4_tn" and data["counted_flops_text"][0] == "30.16 G"


def test_counted_dram_bytes_replace_modelled_bytes_in_the_roofline(corpus):
    """The TraceLens Triton trace with DRAM counters added to its two RMSNorm kernels (as Kineto writes
    ``dram__bytes_read.sum`` / ``dram__bytes_write.sum`` on a kernel row): those kernels' bytes become the counted
    ones, the others keep the model's."""
    tr = nbprof.load(corpus(TRACELENS))
    before = kernel_work(tr).set_index("event")
    ev = tr.events
    red = np.flatnonzero(pred.is_kernel(ev) & ev["name"].astype(str).str.startswith("triton_red").to_numpy())
    assert len(red) == 2
    extra = pd.DataFrame({"event": np.repeat(red, 2), "key": ["dram__bytes_read.sum", "dram__bytes_write.sum"] * 2,
                          "value": [3.0e8, 1.0e8, 5.0e8, 2.0e8]})
    da = tr.tables.get("device_args")
    tr2 = nbprof.Trace(events=ev, flows=tr.flows, memory=tr.memory, counters=tr.counters, threads=tr.threads,
                       meta=tr.meta, report=tr.report,
                       tables={**tr.tables, "device_args": pd.concat([da, extra], ignore_index=True)
                               if da is not None else extra})
    after = kernel_work(tr2).set_index("event")
    assert after.loc[red, "bytes"].tolist() == [4.0e8, 7.0e8]
    assert set(after.loc[red, "bytes_source"]) == {"counted"}
    others = after.index.difference(red)
    assert set(after.loc[others, "bytes_source"]) == {"model"}
    assert np.allclose(after.loc[others, "bytes"], before.loc[others, "bytes"])
    ke = kernel_efficiency(tr2).set_index("name")
    nm = str(ev["name"].iat[red[0]])
    assert ke.loc[nm, "bytes"] == 4.0e8 and np.isclose(ke.loc[nm, "arithmetic_intensity"], ke.loc[nm, "flops"] / 4.0e8)
