"""Detected steps are named and shown like the profiler's (issue 31's gaps): one step label
(:func:`nbprof.trace.iterations.step_label`) for findings, messages and views, and evidence rows that span a detected
step as a ``ProfilerStep#N`` row spans its step."""

from __future__ import annotations

import pytest
from _support.paths import corpus_path
from test_iterations import V100_NW0, _without_profiler_steps

import nbprof
from nbprof.analysis import advisor, evidence, steps
from nbprof.trace.iterations import step_label


@pytest.fixture(scope="module")
def v100_pair(tmp_path_factory):
    """The V100 ResNet-50 (num_workers=0) as recorded, and with its ProfilerStep events removed."""
    path = corpus_path(V100_NW0)
    return nbprof.load(path), nbprof.load(_without_profiler_steps(path, tmp_path_factory.mktemp("v100")))


def test_step_label_names_the_step_source(v100_pair):
    orig, tr = v100_pair
    assert step_label(orig, [5, 6, 7, 8, 9, 10]) == "ProfilerStep#5..#10 (6 steps)"
    assert step_label(orig, 7) == "ProfilerStep#7"
    assert step_label(tr, range(6)) == "steps 0..5 (6 steps, optimizer.step)"
    assert step_label(tr, [3]) == "step 3 (optimizer.step)"
    assert step_label(tr, []) == "whole trace"


def test_advisor_where_of_detected_steps_names_them_by_their_source(v100_pair):
    """The same findings on both; where the profiler's steps read ``ProfilerStep#5..#10``, the detected ones read
    ``steps 0..5 (..., optimizer.step)`` (they read ``ProfilerStep#0..#5``: steps the trace does not have)."""
    orig, tr = v100_pair
    fo = {f.rule: f.where for f in advisor.advise(orig, quantify=False)}
    ft = {f.rule: f.where for f in advisor.advise(tr, quantify=False)}
    assert set(fo) == set(ft) and {"dataloader", "host_sync", "optimizer_loop"} <= set(ft)
    for rule in ("dataloader", "host_sync", "optimizer_loop"):
        assert fo[rule] == "ProfilerStep#5..#10 (6 steps)"
        assert ft[rule] == "steps 0..5 (6 steps, optimizer.step)"
    assert not any("ProfilerStep" in w for w in ft.values())


def test_evidence_rows_of_detected_steps_span_their_windows(v100_pair):
    """Each detected step's evidence rows (the first-starting and last-ending row of that step) span its step
    window: within 50 µs of its start and exactly to its end (the device work it launched); they were none."""
    orig, tr = v100_pair
    assert len(evidence.step_rows(orig, [5, 6])) == 2  # the ProfilerStep rows, as before
    w = steps.step_windows(tr)
    assert len(w) == 6
    for r in w.itertuples(index=False):
        rows = evidence.step_rows(tr, [r.step])
        assert len(rows) == 2
        lo, hi = evidence.interval(tr, rows, pad_ratio=0)  # padded by the 1 µs minimum
        assert r.host_start_ns <= lo + 1000 <= r.host_start_ns + 50_000
        assert hi - 1000 == r.end_ns
    rows = evidence.step_rows(tr, range(6))
    lo, hi = evidence.interval(tr, rows, pad_ratio=0)
    assert hi - 1000 == int(w["end_ns"].iloc[-1]) and lo + 1000 - int(w["host_start_ns"].iloc[0]) <= 50_000


def test_tensorboard_step_scalars_of_detected_steps(v100_pair, tmp_path):
    """The TensorBoard run of the stripped trace plots its 6 detected steps with THE step times, and says where the
    steps came from."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from nbprof.tensorboard import write_scalars

    _orig, tr = v100_pair
    w = write_scalars(tr, tmp_path, "stripped")
    assert "step_breakdown" not in w.skipped and "nbprof/step_time_ms" in w.scalar_tags
    ea = EventAccumulator(str(tmp_path / "stripped"), size_guidance={"tensors": 0})
    ea.Reload()
    from tensorboard.util import tensor_util

    got = {e.step: float(tensor_util.make_ndarray(e.tensor_proto)) for e in ea.Tensors("nbprof/step_time_ms")}
    want = steps.step_times(tr)
    assert sorted(got) == list(range(6))
    assert [got[k] for k in range(6)] == pytest.approx((want / 1e6).tolist(), rel=1e-6)
