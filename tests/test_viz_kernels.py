"""The GPU Kernel view (issue 21): registered, in the dashboard, metrics line and tables in human units."""

from __future__ import annotations

import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis import kernels

pytest.importorskip("bokeh")

V100_NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"


def _models(lay, name):
    return [m for m in lay.references() if getattr(m, "name", None) == name]


def test_kernels_view_is_registered_and_in_the_dashboard():
    import importlib

    from nbprof.viz import registry

    dashboard = importlib.import_module("nbprof.viz.dashboard")
    assert registry.get("kernels").title == "GPU Kernel"
    assert "kernels" in registry.VIEWS and "kernels" in dashboard.VIEWS


def test_kernels_view_on_v100_resnet50_shows_the_plugin_numbers():
    from nbprof.viz import kernels_view, registry

    t = nbprof.load(corpus_path(V100_NW0))
    v = kernels_view(t, theme="light")
    # tb-plugin 0.4.3 on this sample: GPU Utilization 55.51 %, Est. SM Efficiency 54.68 %, occupancy 49.13 %
    line = v.text.splitlines()[1]
    assert ("GPU 0: GPU utilization 55.51 %, est. SM efficiency 54.68 %, est. achieved occupancy 49.13 %, "
            "kernel time using Tensor Cores 0.00 %, time in Tensor-Core-eligible operators 67.62 %") in line
    lay = registry.static("kernels", t, theme="dark")
    src = _models(lay, "nbprof_kernel_table_source")[0].data
    kt = kernels.kernel_table(t)
    assert src["name"] == kt["name"].astype(str).tolist()
    assert src["total_ns_text"][0] == "80.756 ms" and src["calls_text"][0] == "162"  # human units (nbprof.units)
    assert src["total_ns"][0] == kt["total_ns"].iloc[0] and src["calls"][0] == 162  # the numbers a header sorts by
    assert all(s.endswith(" %") for s in src["mean_est_achieved_occupancy_ratio_text"])
    op = _models(lay, "nbprof_kernel_op_table_source")[0].data
    assert len(op["name"]) == len(kernels.kernel_table(t, by="kernel_operator")) == 226
    assert "aten::cudnn_convolution" in op["operator"]
    assert _models(lay, "nbprof_gpu_metrics")[0].render_as_text  # trace text never becomes HTML


def test_kernels_view_on_a_cpu_only_trace_says_there_are_no_kernels():
    from nbprof.viz import kernels_view, registry

    t = nbprof.load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")
    assert "No device kernels in this trace" in kernels_view(t).text
    lay = registry.static("kernels", t)
    assert "No device kernels" in _models(lay, "nbprof_kernels_empty")[0].text


def test_kernels_view_on_a_gpu_trace_of_data():
    from nbprof.viz import registry

    t = nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")
    v = registry.live("kernels", t, theme="auto")
    assert v.kind == "kernels" and v.tables["metrics"].device.tolist() == [0]
    assert v.static_layout().name == "nbprof_kernels"


def test_report_step2_shows_the_kernels_view(tmp_path):
    from nbprof.report import Artefacts, build_report

    art = Artefacts(trace=str(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"))
    html = build_report(art, tmp_path, progress=False, notebooks=["02_operators_pytorch.ipynb"]).read_text(
        encoding="utf-8")
    assert "nbprof_gpu_metrics" in html and "nbprof_kernel_op_table" in html
    assert "GPU 0: GPU utilization 0.59 %" in html
