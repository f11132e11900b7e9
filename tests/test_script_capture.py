"""Profiling an *unmodified* script (``python -m nbprof.capture.script``, ``nbprof report --script``): steps from
the optimizer / DataLoader hooks, the schedule, the step wall times in the trace and the profiler's overhead;
under real nsys, the merge aligned on the NVTX step ranges. Real torch, real scripts (tests/workloads)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from _support.timing_guard import until_right

import nbprof
from nbprof.analysis.overhead import capture_metadata, profiler_overhead
from nbprof.capture import script as capture_script
from nbprof.results.overhead import overhead_html, overhead_sentence

WORKLOADS = Path(__file__).resolve().parent / "workloads"
LM, CNN = str(WORKLOADS / "unmodified_lm.py"), str(WORKLOADS / "unmodified_cnn.py")


def _capture(monkeypatch, tmp_path, script: str, *args: str, sched=("--wait", "2", "--warmup", "1", "--active", "3")):
    """Run ``python -m nbprof.capture.script`` in this process; returns (exit code, trace path)."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # main() sets the script's argv
    out = tmp_path / "t.json.gz"
    code = capture_script.main(["--trace", str(out), "--activities", "cpu", *sched, script, "--", *args])
    return code, out


def _profiler_steps(trace) -> list[tuple[int, int]]:
    ev = trace.events
    ps = ev[ev["name"].astype(str).str.startswith("ProfilerStep#")]
    return [(int(n.split("#")[1]), int(d)) for n, d in zip(ps["name"].astype(str), ps["dur_ns"])]


def test_lm_steps_from_the_optimizer_hook(monkeypatch, tmp_path):
    def run(attempt):
        d = tmp_path / f"try{attempt}"
        d.mkdir()
        code, out = _capture(monkeypatch, d, LM, "--steps", "9")
        assert code == 0
        return nbprof.load(out)

    def wrong(tr):  # a preemption between the hook's clock read and Kineto's step boundary (a busy machine)
        wall = {s["step"]: s["wall_ns"] for s in capture_metadata(tr)["steps"]}
        off = [(n, dur, wall.get(n)) for n, dur in _profiler_steps(tr)[:-1]
               if n in wall and abs(dur - wall[n]) > 0.02 * dur + 2_000_000]
        return f"ProfilerStep vs hook wall time (step, ns, ns): {off}" if off else ""

    tr = until_right(run, what="the LM capture's step times", wrong=wrong)
    steps = _profiler_steps(tr)
    # wait 2 + warm-up 1: steps 3, 4, 5 recorded, then the profiler stopped while the script ran on
    assert [s for s, _ in steps] == [3, 4, 5]
    meta = capture_metadata(tr)
    assert meta["step_source"] == "optimizer" and meta["steps_seen"] == 9 and meta["auto_steps_off"] is None
    phases = [(s["step"], s["phase"]) for s in meta["steps"]]
    assert phases == [(0, "wait"), (1, "wait"), (2, "warmup"), (3, "active"), (4, "active"), (5, "active"),
                      (6, "after"), (7, "after"), (8, "after")]
    # the same steps, timed twice: ProfilerStep#N by Kineto, the hook's wall time by perf_counter (the last
    # recorded ProfilerStep also holds the profiler's stop)
    wall = {s["step"]: s["wall_ns"] for s in meta["steps"]}
    for n, dur in steps[:-1]:
        assert abs(dur - wall[n]) <= 0.02 * dur + 2_000_000, (n, dur, wall[n])
    ov = profiler_overhead(tr)
    assert ov is not None and ov.profiled_steps == (3, 4, 5) and ov.unprofiled_steps == (1, 6, 7, 8)
    assert ov.step_source == "optimizer" and ov.ratio > 0
    assert "Profiler overhead: profiled steps took" in overhead_sentence(ov)
    # the advisor's profiler_overhead finding is the same quantity (one definition), listed apart (no saving)
    from nbprof.analysis import advisor

    found = [f for f in advisor.advise(tr) if f.rule == "profiler_overhead"]
    assert len(found) == int(ov.distorted)
    if found:
        assert found[0].evidence["ratio"] == ov.ratio and not found[0].quantified
        assert found[0].evidence["profiled_step_ns"] == ov.profiled_median_ns


def test_cnn_slow_dataset_data_wait(monkeypatch, tmp_path):
    code, out = _capture(monkeypatch, tmp_path, CNN, "--steps", "5", "--sleep-ms", "2",
                         sched=("--wait", "1", "--warmup", "0", "--active", "2"))
    assert code == 0
    tr = nbprof.load(out)
    assert [s for s, _ in _profiler_steps(tr)] == [1, 2]
    meta = capture_metadata(tr)
    assert meta["steps_seen"] == 5
    # 8 samples of >= 2 ms each per batch, fetched inside the step
    assert all(s["data_wait_ns"] >= 16_000_000 for s in meta["steps"])
    # the wait is in the trace too: the DataLoader's own annotation inside each recorded step
    ev = tr.events
    dl = ev[ev["name"].astype(str).str.startswith("enumerate(DataLoader)")]
    assert len(dl) >= 2 and (dl["dur_ns"] >= 16_000_000).all()


def test_script_own_steps_win(monkeypatch, tmp_path):
    src = tmp_path / "own.py"
    src.write_text(
        "import torch, nbprof\n"
        "m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(6):\n"
        "    m(torch.randn(2, 4)).sum().backward(); opt.step(); nbprof.step()\n")
    code, out = _capture(monkeypatch, tmp_path, str(src), sched=("--wait", "0", "--warmup", "0", "--active", "5"))
    assert code == 0
    tr = nbprof.load(out)
    meta = capture_metadata(tr)
    assert meta["auto_steps_off"].startswith("nbprof.step() was called")
    # step 0 ended at the first optimizer step (before the script's first nbprof.step()); the rest are the script's
    assert [s for s, _ in _profiler_steps(tr)][:3] == [0, 1, 2]


def test_no_step_boundary_says_so(monkeypatch, tmp_path, capfd):
    src = tmp_path / "plain.py"
    src.write_text("import torch\nfor _ in range(3):\n    torch.mm(torch.randn(8, 8), torch.randn(8, 8))\n")
    code, out = _capture(monkeypatch, tmp_path, str(src))
    assert code == 0 and not out.exists()
    assert "no step boundary was found" in capfd.readouterr().err
    code, out2 = _capture(monkeypatch, tmp_path, str(src), sched=("--whole-run",))
    assert code == 0 and out2.exists()
    whole = nbprof.load(out2)
    assert capture_metadata(whole) is None  # no automatic steps, no step times, no overhead stated
    assert profiler_overhead(whole) is None and overhead_html(whole) == ""


@pytest.mark.nsys
@pytest.mark.slow
@pytest.mark.parametrize("script", [LM, CNN], ids=["lm", "cnn"])
def test_report_script_under_nsys_merges_on_step_ranges(script, tmp_path, monkeypatch):
    """``nbprof report --script`` on an unmodified script under real nsys: the NVTX step ranges pair with
    Kineto's ProfilerStep#N and the clocks align within 50 µs (the merge's own residual)."""
    from _support.nsys import agents_running, assert_no_new_agent, nsys_or_skip

    nsys_or_skip()
    from nbprof.report import run_workload
    from nbprof.sources import load
    from nbprof.trace.merge import merge

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = set(agents_running())
    seen = []
    # a run whose fit is off by more than 50 µs was disturbed (on a shared 2-core machine a thread preempted
    # between the NVTX call and the profiler's, at several steps): one more run, then the assertion holds
    for attempt in range(4):
        # nsys 2022.4 once failed here in its ProcessWaiter (sem_open ENOENT): that attempt is repeated too
        art = run_workload(script, ["--steps", "11"], tmp_path / f"try{attempt}", use_nsys=True, tensorboard=False,
                           log=lambda _m: None)
        assert_no_new_agent(before)
        if not art.nsys_report:
            continue
        kin, ns = load(art.trace), load(art.nsys_report)
        assert [s for s, _ in _profiler_steps(kin)] == [4, 5, 6, 7, 8]  # default: skip 3, warm up 1, record 5
        m = merge(ns, kin)
        al = m.meta.extra["merge"]
        # a preempted thread can also cost a pair (4 of 5 steps paired once beside other jobs): rerun too
        seen.append((al["anchor"], al["pairs"], al["residual_max_ns"]))
        if (al["anchor"] == "nvtx" and al["pairs"] >= 5 and al["residual_max_ns"] < 50_000) or len(seen) == 3:
            break
    assert seen, art.notes
    assert al["anchor"] == "nvtx" and al["pairs"] >= 5, f"(anchor, pairs, residual max ns) of each run: {seen}; {al}"
    assert seen[-1][2] < 50_000, f"(anchor, pairs, residual max ns) of each run: {seen}; last alignment {al}"
    ov = profiler_overhead(m)
    assert ov is not None and ov.profiled_steps == (4, 5, 6, 7, 8)
    assert "profiled steps took" in overhead_html(m)


@pytest.mark.slow
def test_report_script_without_steps_profiles_the_whole_run(tmp_path, monkeypatch):
    """``nbprof report --script`` on a script with no optimizer and no DataLoader: nothing to step on, so the
    run is profiled again as one window, and the report's notes say why."""
    from nbprof.report import run_workload

    src = tmp_path / "plain.py"
    src.write_text("import torch\nfor _ in range(3):\n    torch.mm(torch.randn(8, 8), torch.randn(8, 8))\n")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    art = run_workload(str(src), (), tmp_path / "out", use_nsys=False, tensorboard=False, log=lambda _m: None)
    assert Path(art.trace).exists()
    assert any(n.startswith("no training step was found") for n in art.notes)
    ev = nbprof.load(art.trace).events
    assert (ev["name"] == "aten::mm").sum() == 3
