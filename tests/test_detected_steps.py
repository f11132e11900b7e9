"""Detected iterations are the events' steps (issue 31): without ``ProfilerStep#N`` the ``step`` column, the critical
path of one step and the advisor's per-step averages all use the iterations :mod:`nbprof.trace.iterations` finds."""

from __future__ import annotations

import numpy as np
import pytest
from _support.paths import corpus_path
from test_iterations import V100_NW0, _without_profiler_steps

import nbprof
from nbprof.analysis import advisor, critical_path, steps
from nbprof.trace import iterations


def _cpu_loop(tmp_path, n):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    out = tmp_path / "loop.pt.trace.json"
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    prof.export_chrome_trace(str(out))
    return nbprof.load(out)


def test_cpu_loop_without_profiler_step_has_per_event_steps_and_per_step_critical_paths(tmp_path):
    n = 6
    tr = _cpu_loop(tmp_path, n)
    assert iterations.step_source(tr).source == "optimizer_step"
    assert tr.steps == list(range(n)) and tr.meta.extra["steps_detected"] == "optimizer_step"
    ev = tr.events
    # every forward matmul belongs to the iteration whose window holds it: two aten::addmm per step
    mm = ev[ev["name"] == "aten::addmm"]
    assert mm["step"].value_counts().sort_index().tolist() == [2] * n
    r = iterations.iteration_ranges(tr)
    for k in range(n):
        rows = ev[(ev["step"] == k) & (ev["device"] < 0)]
        assert (rows["ts_ns"] >= r.start_ns[k]).all() and (rows["ts_ns"] < r.end_ns[k]).all()
        assert (rows["name"] == "Optimizer.step#SGD.step").sum() == 1
        cp = critical_path.critical_path(tr, step=k)
        assert cp.window == (int(r.start_ns[k]), int(r.end_ns[k]))
        assert 0 < cp.length_ns <= cp.window[1] - cp.window[0]
        assert len(cp.events) and (cp.events["ts_ns"] >= r.start_ns[k]).all()
    with pytest.raises(ValueError, match=r"no step 99 \(optimizer.step\) in the trace"):
        critical_path.critical_path(tr, step=99)
    # the advisor runs on the same steps (its averages are the steady steps')
    assert isinstance(advisor.advise(tr, quantify=False), list)


def test_v100_stripped_critical_path_and_advisor_match_the_profiler_steps(tmp_path):
    """The DataLoader-bound V100 ResNet-50 (num_workers=0) with its ProfilerStep events removed: its 6 optimizer
    iterations are the events' steps; each step's critical path is within 0.5 % of the ProfilerStep's, and the
    advisor still puts the DataLoader first with the same saving (within 10 %, measured 0.0 %)."""
    path = corpus_path(V100_NW0)
    orig = nbprof.load(path)
    tr = nbprof.load(_without_profiler_steps(path, tmp_path))
    assert orig.steps == [5, 6, 7, 8, 9, 10] and tr.steps == [0, 1, 2, 3, 4, 5]
    assert "steps_detected" not in orig.meta.extra and tr.meta.extra["steps_detected"] == "optimizer_step"
    counts = tr.events["step"].value_counts()
    assert counts.drop(-1, errors="ignore").nunique() == 1  # every iteration holds the same number of events
    lo = np.array([critical_path.critical_path(orig, step=s).length_ns for s in orig.steps], dtype=np.float64)
    got = np.array([critical_path.critical_path(tr, step=s).length_ns for s in tr.steps], dtype=np.float64)
    np.testing.assert_allclose(got, lo, rtol=0.005)
    fo, ft = advisor.advise(orig), advisor.advise(tr)
    assert fo[0].rule == ft[0].rule == "dataloader"
    assert ft[0].predicted_saving_ns == pytest.approx(fo[0].predicted_saving_ns, rel=0.10)
    assert "over 6 steps" in ft[0].saving_reason


class _SlowFirstBatch:
    """A map-style dataset whose first item takes 60 ms to load and the others 8 ms (a cold first read)."""

    def __len__(self):
        return 7

    def __getitem__(self, i):
        import time

        import torch

        time.sleep(0.060 if i == 0 else 0.008)
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), torch.randn(8, generator=g)


def test_advisor_averages_the_steady_steps_the_verdict_averages(tmp_path):
    """A real loop with a DataLoader whose first batch is slow: the first step is warm-up (skipped by
    ``steps.steady_state``); the advisor's DataLoader finding averages the same steady steps as the verdict."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from nbprof.analysis import verdict

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(_SlowFirstBatch(), batch_size=1, num_workers=0)
    out = tmp_path / "dl.pt.trace.json"
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    prof.export_chrome_trace(str(out))
    tr = nbprof.load(out)
    assert tr.steps == list(range(7))
    ss = steps.steady_state(tr)
    if not ss["skipped"].iloc[0]:  # a disturbed machine made a later step as slow as the cold first one
        pytest.skip(f"first step not warm-up here: steps {ss['step_ns'].tolist()} ns")
    steady = steps.steady_breakdown(tr)
    assert len(steady) < len(steps.step_breakdown(tr))
    dl = [f for f in advisor.advise(tr, quantify=False) if f.rule == "dataloader"]
    assert len(dl) == 1
    ev = dl[0].evidence
    assert ev["steps"] == len(steady)
    assert ev["avg_step_ns"] == pytest.approx(float(steady["step_ns"].mean()))
    v = verdict.verdict(tr)
    assert (v.steps, v.step_ns) == (len(steady), pytest.approx(ev["avg_step_ns"]))
