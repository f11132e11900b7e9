"""Kernel launch statistics on real GPU traces; durations cross-checked against HTA."""

from __future__ import annotations

import logging
import os
import warnings

import numpy as np
import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis import launch

V100_NW4 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
BERT_H100 = "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"

_cache: dict = {}


def _load(path):
    if str(path) not in _cache:
        _cache[str(path)] = nbprof.load(path)
    return _cache[str(path)]


def test_launch_stats_v100_values():
    t = _load(corpus_path(V100_NW4))
    s = launch.launch_stats(t)
    # 8868 kernels + 378 memsets + 12 memcpys, all with a launching runtime call
    assert len(s) == 9258
    assert set(s.runtime_name) >= {"cudaLaunchKernel", "cudaMemsetAsync", "cudaMemcpyAsync"}
    assert (s.launch_delay_ns == s.ts_ns - s.runtime_ts_ns).all()
    assert (s.launch_delay_ns == s.delay_after_call_ns + s.runtime_ns).all()
    assert (s.launch_delay_ns >= 0).all()  # a device op never starts before its launch call
    # the V100 runs far ahead of the host: median op waits 2.66 ms in the queue
    assert s.launch_delay_ns.median() == 2_657_000
    assert s.runtime_ns.median() == 12_000
    assert s["short"].mean() == pytest.approx(0.6563, abs=1e-4)


def test_launch_stats_match_hta(tmp_path):
    ta_mod = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis (test oracle) not installed")
    path = corpus_path(BERT_H100)
    os.symlink(path, tmp_path / "rank-0.pt.trace.json.gz")
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hta = ta_mod.TraceAnalysis(trace_dir=str(tmp_path)).get_cuda_kernel_launch_stats(visualize=False)[0]
    finally:
        logging.disable(logging.NOTSET)
    s = launch.launch_stats(_load(path))
    m = s.merge(hta, on="correlation")
    # HTA keeps cudaLaunchKernel/cudaMemcpyAsync/cudaMemsetAsync launches only (not cuLaunchKernel)
    assert len(m) == len(hta) == 39
    # HTA rounds float-µs events inward (ceil start, floor end): allow 2 µs
    np.testing.assert_allclose(m.runtime_ns, m.cpu_duration * 1000, atol=2000)
    np.testing.assert_allclose(m.device_ns, m.gpu_duration * 1000, atol=2000)
    np.testing.assert_allclose(m.delay_after_call_ns.clip(lower=0), m.launch_delay * 1000, atol=2000)


def test_queue_length_v100():
    t = _load(corpus_path(V100_NW4))
    q = launch.queue_length(t)
    assert (q.queue_length >= 0).all()
    assert q.groupby(["device", "stream"]).queue_length.last().eq(0).all()  # everything finishes
    summ = launch.queue_length_summary(t)
    assert list(summ.stream) == [7]
    assert summ.max_queue_length.iloc[0] == 523  # the host enqueues a whole step ahead
    waiting = launch.queue_length_summary(t, count_running=False)
    assert waiting.max_queue_length.iloc[0] == 522  # HTA's definition: the running op excluded
    assert waiting.mean_queue_length.iloc[0] < summ.mean_queue_length.iloc[0]


def test_launch_bound_fires_on_small_bert_inference():
    t = _load(corpus_path(BERT_H100))
    ph = launch.launch_bound_phases(t)
    assert len(ph) == 1
    row = ph.iloc[0]
    # 61 ops, 40 shorter than their launch call; the H100 is busy 7 % of the step
    assert (row.ops, row.short_ops) == (61, 40)
    assert row.busy_ratio == pytest.approx(0.0699, abs=1e-3)
    assert bool(row.launch_bound)


def test_launch_bound_does_not_fire_on_resnet50_training():
    ph = launch.launch_bound_phases(_load(corpus_path(V100_NW4)))
    assert list(ph.step) == [5, 6, 7, 8, 9, 10]
    assert (ph.ops == 1543).all()
    # most kernels are short, but the GPU stays busy (> 56 % of each step): not launch-bound
    assert (ph.short_ratio > 0.6).all()
    assert (ph.busy_ratio > 0.55).all()
    assert not ph.launch_bound.any()


def test_cpu_trace_has_no_launches():
    t = _load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")
    assert launch.launch_stats(t).empty
    assert launch.queue_length(t).empty
    assert launch.launch_bound_phases(t).empty
