"""Step breakdown vs torch-tb-profiler 0.4.3's Overview numbers (the oracle parses the same files)."""

from __future__ import annotations

import gzip
import json
import logging

import numpy as np
import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis import steps
from nbprof.trace import iterations

tbp = pytest.importorskip("torch_tb_profiler.profiler.data", reason="torch-tb-profiler (test oracle) not installed")

V100_NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
V100_NW4 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
ALEXNET = ("facebookresearch__HolisticTraceAnalysis/tests/data/critical_path/alexnet/"
           "benchmark_result_2869224_1695835535_trace.json.gz")
MI250 = "facebookresearch__HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
NCCL = "facebookresearch__HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz"

# torch-tb-profiler's ProfileRole order (Kernel ... Other, Total) == nbprof's breakdown columns + step_ns
ORDER = [*steps.BREAKDOWN_COLUMNS, "step_ns"]


def _read_json(path):
    with open(path, "rb") as f:
        data = f.read()
    if str(path).endswith(".gz"):
        data = gzip.decompress(data)
    return json.loads(data)


def _oracle(trace_json):
    logging.disable(logging.WARNING)
    try:
        prof = tbp.RunProfileData.from_json("worker0", "span", trace_json)
    finally:
        logging.disable(logging.NOTSET)
    return [int(n) for n in prof.steps_names], np.array([c.costs for c in prof.steps_costs], dtype=float)


def _modernised(path):
    """The trace in 0.4.3's vocabulary: its parser ignores cuda_runtime/cuda_driver and user_annotation
    (they did not exist in 2021). Renaming them lets the oracle check the default semantics."""
    raw = _read_json(path)
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


def _ours_us(df):
    return df[ORDER].to_numpy(dtype=float) / 1000.0


_cache: dict = {}


def _load(path):
    key = str(path)
    if key not in _cache:
        _cache[key] = nbprof.load(path)
    return _cache[key]


@pytest.mark.parametrize("rel", [V100_NW0, V100_NW4])
def test_v100_resnet50_equals_tb_plugin_exactly(rel):
    path = corpus_path(rel)
    names, costs = _oracle(_read_json(path))
    t = _load(path)
    df = steps.step_breakdown(t)
    assert list(df.step) == names == [5, 6, 7, 8, 9, 10]
    # 2021 trace: integer µs, so nbprof's ns are exact multiples of 1000 and must match to the ns
    np.testing.assert_array_equal(_ours_us(df), costs)
    # legacy mode is identical here: the 2021 trace has no user_annotation rows
    np.testing.assert_array_equal(_ours_us(steps.step_breakdown(t, legacy_tb_plugin=True)), costs)
    # the eight parts tile each step
    assert (df[list(steps.BREAKDOWN_COLUMNS)].sum(axis=1) == df.step_ns).all()


def test_v100_dataloader_share_drops_with_workers():
    nw0 = steps.breakdown_ratios(steps.step_breakdown(_load(corpus_path(V100_NW0))))
    nw4 = steps.breakdown_ratios(steps.step_breakdown(_load(corpus_path(V100_NW4))))
    # tb-plugin Overview of these samples: 33.4 % DataLoader with num_workers=0, 0.8 % with 4
    assert nw0["dataloader_ratio"] == pytest.approx(59261.833 / 177592.167, abs=1e-6)
    assert nw4["dataloader_ratio"] == pytest.approx(1186.167 / 141068.0, abs=1e-6)
    assert nw0["dataloader_ratio"] > 0.30 and nw4["dataloader_ratio"] < 0.01
    # kernel time per step is the same model on the same GPU: ~98.6 ms vs ~99.1 ms
    a0 = steps.breakdown_average(steps.step_breakdown(_load(corpus_path(V100_NW0))))
    assert a0["kernel_ns"] == pytest.approx(98588.667e3, abs=1)
    assert a0["step_ns"] == pytest.approx(177592.167e3, abs=1)


@pytest.mark.parametrize("name", ["cnn_nw0", "cnn_nw2", "lm"])
def test_cpu_profiles_equal_tb_plugin_in_legacy_mode(name):
    path = DATA / "cpu" / f"{name}.pt.trace.json.gz"
    names, costs = _oracle(_read_json(path))
    df = steps.step_breakdown(_load(path), legacy_tb_plugin=True)
    assert list(df.step) == names
    # float µs (3 decimals) -> int ns: each interval end may round by 1 ns; allow 50 ns per step
    np.testing.assert_allclose(_ours_us(df), costs, rtol=0, atol=0.05)


@pytest.mark.parametrize("name", ["cnn_nw0", "cnn_nw2"])
def test_cpu_profiles_default_mode_equals_oracle_on_modernised_trace(name):
    path = DATA / "cpu" / f"{name}.pt.trace.json.gz"
    names, costs = _oracle(_modernised(path))
    df = steps.step_breakdown(_load(path))
    assert list(df.step) == names
    np.testing.assert_allclose(_ours_us(df), costs, rtol=0, atol=0.05)


def test_cpu_dataloader_share_drops_with_workers():
    r0 = steps.breakdown_ratios(steps.step_breakdown(_load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")))
    r2 = steps.breakdown_ratios(steps.step_breakdown(_load(DATA / "cpu" / "cnn_nw2.pt.trace.json.gz")))
    # examples/train_cnn.py with --num-workers 0 vs 2: the DataLoader (user_annotation
    # enumerate(DataLoader)#..__next__) share falls from ~61 % to ~20 % of the step
    assert r0["dataloader_ratio"] > 0.5
    assert r2["dataloader_ratio"] < 0.3
    assert r0["dataloader_ratio"] - r2["dataloader_ratio"] > 0.3
    # tb-plugin 0.4.3 drops user_annotation rows, so it reports no DataLoader time at all
    legacy = steps.breakdown_ratios(
        steps.step_breakdown(_load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz"), legacy_tb_plugin=True))
    assert legacy["dataloader_ratio"] == 0
    # CPU-only: no device roles
    assert r0[["kernel_ratio", "memcpy_ratio", "memset_ratio", "runtime_ratio"]].sum() == 0


@pytest.mark.parametrize("rel", [MI250])
def test_modern_gpu_traces_equal_oracle_on_modernised_trace(rel):
    path = corpus_path(rel)
    names, costs = _oracle(_modernised(path))
    df = steps.step_breakdown(_load(path))
    assert list(df.step) == names
    np.testing.assert_allclose(_ours_us(df), costs, rtol=0, atol=0.05)


def test_trace_without_steps_is_one_window_extended_to_device_work():
    """torch-tb-profiler 0.4.3 (``legacy_tb_plugin``): a trace without ProfilerStep is one whole-window step.
    By default the iterations are detected: this PARAM AlexNet benchmark runs a warm-up and a measured forward
    (``[param|...|warmup|forward]``, ``[param|...|measure|forward]``), the same 39-kernel sequence twice."""
    path = corpus_path(ALEXNET)
    t = _load(path)
    assert t.steps == [0, 1]  # the detected (device) iterations are the events' steps
    src = iterations.step_source(t)
    assert (src.source, src.steps, src.side) == ("kernel_sequence", 2, "device")
    detected = steps.step_breakdown(t)
    assert len(detected) == 2 and detected.step.tolist() == [0, 1]
    assert steps.step_windows(t).device_ops.tolist() == [40, 40]
    df = steps.step_breakdown(t, legacy_tb_plugin=True)
    assert len(df) == 1 and df.step.iloc[0] == 0
    ev = t.events
    host = ev[(ev.device < 0) & (ev.cat == "cpu_op")]  # 0.4.3: user_annotation ranges are not host ops
    assert df.start_ns.iloc[0] == host.ts_ns.min()
    # extended past the last host op to the end of the device work it launched
    assert df.end_ns.iloc[0] >= (host.ts_ns + host.dur_ns).max()
    assert df.runtime_ns.iloc[0] > 0.9 * df.step_ns.iloc[0]  # a cudaDeviceSynchronize-heavy benchmark


def test_nccl_kernels_count_as_communication():
    path = corpus_path(NCCL)
    names, costs = _oracle(_modernised(path))
    df = steps.step_breakdown(_load(path))
    ours = _ours_us(df)
    assert list(df.step) == names == [4, 5, 6]
    # 0.4.3 links NCCL kernels to communication only through an External id match; nbprof also by
    # kernel name, so ~10 ms per step moves from Kernel to Communication and nothing else changes
    k, c = steps.BREAKDOWN_COLUMNS.index("kernel_ns"), steps.BREAKDOWN_COLUMNS.index("communication_ns")
    assert (ours[:, c] > costs[:, c] + 5000).all()
    np.testing.assert_allclose(ours[:, k] + ours[:, c] + ours[:, 1] + ours[:, 2],
                               costs[:, k] + costs[:, c] + costs[:, 1] + costs[:, 2], atol=0.05)
    for col in ("runtime_ns", "dataloader_ns", "cpu_exec_ns", "other_ns", "step_ns"):
        j = ORDER.index(col)
        np.testing.assert_allclose(ours[:, j], costs[:, j], atol=0.05)


def test_empty_trace_gives_empty_frame():
    t = _load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")
    from dataclasses import replace

    empty = replace(t, events=t.events.iloc[0:0])
    df = steps.step_breakdown(empty)
    assert df.empty and list(df.columns) == list(steps.COLUMNS)
