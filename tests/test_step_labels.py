"""Detected steps are named and shown like the profiler's (issue 31's gaps): one step label
(:func:`nbprof.trace.iterations.step_label`) for findings, messages and views, and evidence rows that span a detected
step as a ``ProfilerStep#N`` row spans its step."""

from __future__ import annotations

import pytest
from conftest import corpus_path
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
