"""GPU Kernel view analyses (issue 21): ``kernels.gpu_metrics`` and ``kernels.kernel_table`` against
torch-tb-profiler 0.4.3's own parser (``RunProfileData``) on the same files, as the Overview test does."""

from __future__ import annotations

import gzip
import json
import logging

import numpy as np
import pandas as pd
import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis import kernels

tbp = pytest.importorskip("torch_tb_profiler.profiler.data", reason="torch-tb-profiler (test oracle) not installed")

V100_NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
V100_NW4 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
H100_QWEN = "AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"

_cache: dict = {}


def _read_json(path):
    with open(path, "rb") as f:
        data = f.read()
    return json.loads(gzip.decompress(data) if str(path).endswith(".gz") else data)


def _modernised(raw):
    """Today's Kineto categories in 0.4.3's vocabulary (as in test_analysis_steps)."""
    out = []
    for e in raw["traceEvents"]:
        c = e.get("cat")
        if c in ("cuda_runtime", "cuda_driver"):
            e["cat"] = "Runtime"
        elif c == "user_annotation":
            e["cat"] = "cpu_op"
        elif c == "gpu_user_annotation":
            continue
        out.append(e)
    raw["traceEvents"] = out
    return raw


def _both(rel, modernise=False):
    if rel not in _cache:
        path = corpus_path(rel)
        raw = _read_json(path)
        logging.disable(logging.WARNING)
        try:
            prof = tbp.RunProfileData.from_json("worker0", "span", _modernised(raw) if modernise else raw)
        finally:
            logging.disable(logging.NOTSET)
        _cache[rel] = (prof, nbprof.load(path))
    return _cache[rel]


@pytest.mark.parametrize("rel", [V100_NW0, V100_NW4])
def test_gpu_metrics_equal_tb_plugin_on_v100_resnet50(rel):
    prof, t = _both(rel)
    g = prof.gpu_metrics_parser
    m = kernels.gpu_metrics(t)
    assert list(m.device) == sorted(g.gpu_ids) == [0]
    r = m.iloc[0]
    # 2021 trace: integer µs, so the ns windows and unions are exact
    assert r.utilization_ratio == pytest.approx(g.gpu_utilization[0], rel=1e-12)
    assert r.est_sm_efficiency_ratio == pytest.approx(g.avg_approximated_sm_efficiency_per_device[0], rel=1e-12)
    # the plugin keeps occupancy in %; nbprof's occupancy_ratio column is float32
    assert r.est_achieved_occupancy_ratio == pytest.approx(g.avg_occupancy_per_device[0] / 100, rel=1e-7)
    assert r.tensor_core_kernel_ratio == prof.tc_ratio[0] == 0.0  # FP32 ResNet-50 on V100: no Tensor Core kernel
    assert r.tensor_core_eligible_ratio == pytest.approx(prof.tc_eligible_ops_kernel_ratio, rel=1e-12)
    assert 0.6 < r.tensor_core_eligible_ratio < 0.7  # convolutions: two thirds of the kernel time
    for c in kernels.GPU_METRIC_COLUMNS:
        assert 0.0 <= r[c] <= 1.0


def test_gpu_metrics_reflect_the_dataloader_fix():
    m0 = kernels.gpu_metrics(_both(V100_NW0)[1]).iloc[0]
    m4 = kernels.gpu_metrics(_both(V100_NW4)[1]).iloc[0]
    # tb-plugin Overview of these samples: GPU utilisation 55.51 % with num_workers=0, 70.27 % with 4
    assert round(m0.utilization_ratio * 100, 2) == 55.51 and round(m4.utilization_ratio * 100, 2) == 70.27
    assert round(m0.est_sm_efficiency_ratio * 100, 2) == 54.68 and round(m4.est_sm_efficiency_ratio * 100, 2) == 69.22


@pytest.mark.parametrize("rel", [V100_NW0, V100_NW4])
def test_kernel_table_equals_tb_plugin(rel):
    prof, t = _both(rel)
    ours = kernels.kernel_table(t)
    theirs = prof.kernel_stat.reset_index()
    assert len(ours) == len(theirs) > 60
    assert list(ours.name) == list(theirs.name)  # same order: total duration descending
    np.testing.assert_array_equal(ours.calls, theirs["count"])
    np.testing.assert_array_equal(ours.total_ns, theirs["sum"].to_numpy() * 1000)
    np.testing.assert_array_equal(ours.max_ns, theirs["max"].to_numpy() * 1000)
    np.testing.assert_array_equal(ours.min_ns, theirs["min"].to_numpy() * 1000)
    np.testing.assert_allclose(ours.mean_ns, theirs["mean"].to_numpy() * 1000, rtol=1e-12)
    np.testing.assert_array_equal(ours.tensor_cores_used, theirs["tc_used"])
    np.testing.assert_allclose(ours.mean_blocks_per_sm, theirs["blocks_per_sm"], rtol=1e-12)
    np.testing.assert_allclose(ours.mean_est_achieved_occupancy_ratio, theirs["occupancy"] / 100, rtol=1e-6)
    top = ours.iloc[0]
    assert top["name"].startswith("void cudnn::detail::dgrad_engine") and top.total_ns == theirs["sum"].iloc[0] * 1000


@pytest.mark.parametrize("rel", [V100_NW0, V100_NW4])
def test_kernel_operator_table_equals_tb_plugin(rel):
    prof, t = _both(rel)
    ours = kernels.kernel_table(t, by="kernel_operator")
    rows = [dict(name=a.name, operator=a.op_name, grid=str(a.grid), block=str(a.block),
                 registers=int(a.regs_per_thread or 0), shared_mem_bytes=int(a.shared_memory or 0),
                 p_calls=a.calls, p_total=a.total_duration * 1000, p_max=a.max_duration * 1000,
                 p_min=a.min_duration * 1000, p_bps=a.avg_blocks_per_sm, p_occ=a.avg_occupancy / 100,
                 p_tc=a.tc_used, p_elig=a.op_tc_eligible) for a in prof.kernel_list_groupby_name_op]
    theirs = pd.DataFrame(rows)
    assert (ours.operator != kernels.NO_OPERATOR).all()  # every kernel of these traces has its operator
    keys = ["name", "operator", "grid", "block", "registers", "shared_mem_bytes"]
    m = theirs.merge(ours, on=keys, how="outer", indicator=True)
    assert (m["_merge"] == "both").all() and len(m) == len(ours) == len(theirs) > 200
    np.testing.assert_array_equal(m.calls, m.p_calls)
    np.testing.assert_array_equal(m.total_ns, m.p_total)
    np.testing.assert_array_equal(m.max_ns, m.p_max)
    np.testing.assert_array_equal(m.min_ns, m.p_min)
    np.testing.assert_array_equal(m.tensor_cores_used, m.p_tc)
    np.testing.assert_array_equal(m.operator_tensor_core_eligible, m.p_elig)
    np.testing.assert_allclose(m.mean_blocks_per_sm, m.p_bps, rtol=1e-12)
    np.testing.assert_allclose(m.mean_est_achieved_occupancy_ratio, m.p_occ, rtol=1e-6)
    assert ours.calls.sum() == len(t.events[t.events.cat == "kernel"])
    assert ours.total_ns.is_monotonic_decreasing


def test_tensor_core_ratios_on_an_h100_trace():
    """A bf16 LLM on H100 (sm90 xmma GEMMs): the Tensor Core path, against 0.4.3 on the modernised trace."""
    prof, t = _both(H100_QWEN, modernise=True)
    r = kernels.gpu_metrics(t).iloc[0]
    # float µs in the file -> int ns here: agreement to ~1e-6
    assert r.tensor_core_kernel_ratio == pytest.approx(prof.tc_ratio[0], rel=1e-5)
    assert r.tensor_core_eligible_ratio == pytest.approx(prof.tc_eligible_ops_kernel_ratio, rel=1e-5)
    assert r.utilization_ratio == pytest.approx(prof.gpu_metrics_parser.gpu_utilization[0], rel=1e-5)
    assert 0.2 < r.tensor_core_kernel_ratio < 0.4
    kt = kernels.kernel_table(t)
    tc_share = kt.loc[kt.tensor_cores_used, "total_ns"].sum() / kt.total_ns.sum()
    assert tc_share == pytest.approx(prof.tc_used_ratio, rel=1e-5)


def test_cpu_only_trace_has_no_kernel_rows():
    t = nbprof.load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")
    m = kernels.gpu_metrics(t)
    assert m.empty and list(m.columns)[-5:] == list(kernels.GPU_METRIC_COLUMNS)
    for by in ("kernel", "kernel_operator"):
        kt = kernels.kernel_table(t, by=by)
        assert kt.empty and "mean_blocks_per_sm" in kt.columns
    with pytest.raises(ValueError, match="by must be one of"):
        kernels.kernel_table(t, by="stream")


def test_blocks_per_sm_is_loaded():
    _prof, t = _both(V100_NW0)
    k = t.events[t.events.cat == "kernel"]
    assert k.blocks_per_sm.dtype == np.float64 and k.blocks_per_sm.notna().all()
    first = k.iloc[0]  # cask_cudnn::computeOffsetsKernel: "blocks per SM": 0.625, occupancy 8 %
    assert first.blocks_per_sm == 0.625 and first.occupancy_ratio == pytest.approx(0.08)


def test_kernel_operator_is_the_enclosing_op_when_runtime_ids_are_correlation_ids():
    """PARAM's et_replay Kineto traces write each runtime call's correlation id as its External id: an id match
    names an unrelated op (0.4.3 takes it), so nbprof uses the op that holds the runtime call."""
    from nbprof.trace import predicates as pred

    t = nbprof.load(corpus_path("facebookresearch__param/et_replay/tests/inputs/linear_kineto.json.gz"))
    ev = t.events
    rt = ev[pred.is_runtime(ev)]
    assert (rt.external_id == rt.correlation).all()
    ko = kernels.kernel_operators(t)
    assert (ko.operator != kernels.NO_OPERATOR).all() and ko.launched.all()
    # every kernel's operator holds its launch in time
    k = ev.iloc[ko.event.to_numpy()]
    launch = rt.drop_duplicates("correlation").set_index("correlation").reindex(k.correlation.to_numpy())
    op = ev.iloc[ko.op_event.to_numpy()]
    assert (op.ts_ns.to_numpy() <= launch.ts_ns.to_numpy()).all()
    assert (launch.ts_ns.to_numpy() + launch.dur_ns.to_numpy() <= op.ts_ns.to_numpy() + op.dur_ns.to_numpy() + 1).all()
    counts = ko.operator.value_counts()
    assert counts["aten::mm"] == 1640 and counts["aten::addmm"] == 840  # the linear layers' GEMMs
