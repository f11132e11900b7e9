"""GPU utilisation / idle breakdown / temporal breakdown, cross-checked against HTA on the same traces."""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import replace

import numpy as np
import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis import utilization as u
from nbprof.trace import schema

V100_NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
ALEXNET = ("facebookresearch__HolisticTraceAnalysis/tests/data/critical_path/alexnet/"
           "benchmark_result_2869224_1695835535_trace.json.gz")
NCCL = "facebookresearch__HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz"

_cache: dict = {}


def _load(path):
    if str(path) not in _cache:
        _cache[str(path)] = nbprof.load(path)
    return _cache[str(path)]


def _hta(path, tmp_path):
    """HTA's TraceAnalysis on a directory holding only a symlink to the corpus file."""
    ta_mod = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis (test oracle) not installed")
    os.symlink(path, tmp_path / "rank-0.pt.trace.json.gz")
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ta = ta_mod.TraceAnalysis(trace_dir=str(tmp_path))
            temporal = ta.get_temporal_breakdown(visualize=False)
            idle = ta.get_idle_time_breakdown(visualize=False)[0]
    finally:
        logging.disable(logging.NOTSET)
    return temporal, idle


def _as_hta_sees_it(t):
    """HTA (Trace.load_traces) keeps only device ops launched before the last ProfilerStep starts;
    apply the same selection so both tools measure the same ops."""
    ev = t.events
    st = ev[(ev.device < 0) & ev.name.astype(str).str.startswith("ProfilerStep")]
    if st.step.nunique() < 2:
        return t
    rt = ev[ev.cat.isin(list(schema.RUNTIME_CATEGORIES))]
    keep = rt.correlation[rt.ts_ns < st.ts_ns.max()]
    return replace(t, events=ev[(ev.device < 0) | ev.correlation.isin(keep)])


def test_v100_matches_hta_exactly(tmp_path):
    path = corpus_path(V100_NW0)
    h_temp, h_idle = _hta(path, tmp_path)
    t = _as_hta_sees_it(_load(path))
    tb = u.temporal_breakdown(t)
    assert list(tb.device) == [0]
    row = tb.iloc[0]
    # 2021 trace with integer µs: HTA's µs numbers times 1000, to the ns
    assert row.span_ns == h_temp["kernel_time(us)"].iloc[0] * 1000 == 830_494_000
    assert row.idle_ns == h_temp["idle_time(us)"].iloc[0] * 1000 == 327_463_000
    assert row.compute_ns == h_temp["compute_time(us)"].iloc[0] * 1000
    assert row.communication_ns + row.memory_ns == h_temp["non_compute_time(us)"].iloc[0] * 1000
    ib = u.idle_breakdown(t)
    hi = h_idle.set_index(["stream", "idle_category"])["idle_time"]
    for _, r in ib.iterrows():
        assert r.host_wait_ns == hi[(r.stream, "host_wait")] * 1000
        assert r.kernel_wait_ns == hi[(r.stream, "kernel_wait")] * 1000
        assert r.other_ns == hi[(r.stream, "other")] * 1000
    # GPU idle on the num_workers=0 run is ~97 % host wait: the data-loading stall
    assert ib.host_wait_ratio.iloc[0] == pytest.approx(318_934 / 327_463, abs=1e-9)
    util = u.gpu_utilization(t)
    assert util.utilization_ratio.iloc[0] == pytest.approx(1 - 327_463 / 830_494)


def test_alexnet_matches_hta_within_tolerance(tmp_path):
    path = corpus_path(ALEXNET)
    h_temp, h_idle = _hta(path, tmp_path)
    t = _load(path)  # no ProfilerStep: HTA keeps every op
    ib = u.idle_breakdown(t).set_index("stream")
    hi = h_idle.set_index(["stream", "idle_category"])["idle_time"]
    # idle breakdown: identical, to the µs HTA rounds to
    for stream in (7, 20):
        for cat in ("host_wait", "kernel_wait", "other"):
            assert ib.loc[stream, f"{cat}_ns"] == pytest.approx(hi[(stream, cat)] * 1000, abs=1000)
    # temporal: HTA also counts the trace's 41 cuda_sync markers as device activity (nbprof does
    # not: they are not work), which widens its span; tolerance 1 % of the span
    tb = u.temporal_breakdown(t).iloc[0]
    span_h = h_temp["kernel_time(us)"].iloc[0] * 1000
    assert abs(tb.span_ns - span_h) < 0.01 * span_h
    assert abs(tb.idle_ns - h_temp["idle_time(us)"].iloc[0] * 1000) < 0.01 * span_h
    assert tb.compute_ns == pytest.approx(h_temp["compute_time(us)"].iloc[0] * 1000, rel=0.01)
    assert tb.idle_ratio > 0.99  # a benchmark that synchronises between tiny launches


def test_overlapping_kernels_are_not_double_counted():
    t = _load(corpus_path(NCCL))
    d = u.device_ops(t)
    per_stream = u.gpu_utilization(t, by="stream")
    per_dev = u.gpu_utilization(t)
    assert len(per_stream) > 1  # compute + NCCL streams run concurrently
    busy_dev = per_dev.busy_ns.iloc[0]
    assert busy_dev < d.dur_ns.sum()  # summing durations would double-count the overlap
    assert busy_dev <= per_stream.busy_ns.sum()
    assert busy_dev <= per_dev.span_ns.iloc[0]
    # idle per stream is the same number from both functions
    ib = u.idle_breakdown(t)
    merged = per_stream.merge(ib, on=["device", "stream"], suffixes=("", "_ib"))
    assert (merged.idle_ns == merged.idle_ns_ib).all()
    assert (ib.host_wait_ns + ib.kernel_wait_ns + ib.other_ns == ib.idle_ns).all()
    tb = u.temporal_breakdown(t).iloc[0]
    assert tb.compute_ns + tb.communication_ns + tb.memory_ns + tb.idle_ns == tb.span_ns
    assert tb.communication_ns > 0  # ncclKernel_* on a side stream
    assert tb.compute_ns + tb.communication_ns + tb.memory_ns == busy_dev


def test_cpu_only_trace_gives_empty_frames():
    t = _load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")
    assert u.gpu_utilization(t).empty
    assert u.idle_breakdown(t).empty
    assert u.temporal_breakdown(t).empty
    assert "utilization_ratio" in u.gpu_utilization(t).columns


def test_bad_by_raises():
    t = _load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")
    with pytest.raises(ValueError, match="by must be"):
        u.gpu_utilization(t, by="rank")


def test_device_ops_link_runtime_calls():
    d = u.device_ops(_load(corpus_path(V100_NW0)))
    linked = d[d.runtime_ts_ns >= 0]
    assert len(linked) / len(d) > 0.99
    assert (linked.runtime_ts_ns <= linked.ts_ns).all()
    assert set(d.kind) == {"compute", "memory"}
    assert np.isin(d.cat.unique(), ["kernel", "gpu_memcpy", "gpu_memset"]).all()


@pytest.mark.corpus
def test_utilization_timeline_and_sm_efficiency_ranges_on_v100():
    """The two over-time views on the 2021 V100 ResNet-50 sample: the buckets (the plugin's rule: 100 ms
    over its 1.07 s, the last one 166 ms) hold the kernels' whole union, and ``gpu_metrics``' est. SM efficiency is the
    time average of ``sm_efficiency_ranges`` over its window (one definition)."""
    from nbprof.analysis import _intervals as iv
    from nbprof.analysis import kernels as K
    from nbprof.trace import predicates as pred

    t = nbprof.load(corpus_path(V100_NW0))
    tl = u.utilization_timeline(t)
    k = t.events[pred.is_kernel(t.events)]
    s = k["ts_ns"].to_numpy(np.int64)
    assert int(tl["busy_ns"].sum()) == iv.union_ns(s, s + k["dur_ns"].to_numpy(np.int64))
    assert (tl["end_ns"] - tl["ts_ns"]).tolist() == [100_000_000] * 9 + [165_723_000]
    assert ((tl["utilization_ratio"] >= 0) & (tl["utilization_ratio"] <= 1)).all()
    g = K.gpu_metrics(t).iloc[0]
    r = K.sm_efficiency_ranges(t)
    w0, w1 = int(g["window_start_ns"]), int(g["window_end_ns"])
    ov = np.clip(np.minimum(r["end_ns"], w1) - np.maximum(r["ts_ns"], w0), 0, None)
    assert float((r["sm_efficiency_ratio"] * ov).sum() / (w1 - w0)) == pytest.approx(g["est_sm_efficiency_ratio"], rel=1e-12)
