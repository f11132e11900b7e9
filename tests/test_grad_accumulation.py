"""A loop that accumulates gradients (4 micro-batches per ``optimizer.step()``), unmodified (no ``prof.step()``):
its steps are its optimizer steps from the first one on, with the micro-batches as parts of a step -- in the live
step hooks (and so in the automatic profiler steps of ``nbprof report --script``) and in the steps detected in a
trace profiled without a schedule. Real torch 2.13 CPU runs of ``tests/workloads/unmodified_accum.py``."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

import nbprof
from nbprof.capture.step_hooks import StepHooks
from nbprof.trace import iterations

ACCUM = str(Path(__file__).resolve().parent / "workloads" / "unmodified_accum.py")


def _batches_and_optimizer_steps(trace) -> list[tuple[int, int]]:
    """Per step of ``trace`` (its ``step`` column): (DataLoader batches, optimizer steps)."""
    ev = trace.events
    names = ev["name"].astype(str)
    out = []
    for s in trace.steps:
        n = names[ev["step"] == s]
        out.append((int(n.str.startswith("enumerate(DataLoader)").sum()), int(n.str.startswith("Optimizer.step#").sum())))
    return out


def test_step_hooks_end_steps_at_optimizer_steps_only(monkeypatch):
    """5 optimizer steps of 4 micro-batches: 5 steps, each ended by the optimizer and holding 4 batches' waits.
    Before: 3 one-batch DataLoader steps, then a one-batch optimizer step, then 4 four-batch ones (8 steps)."""
    monkeypatch.setattr(sys, "argv", [ACCUM, "--steps", "5", "--accum", "4"])
    ends = []
    with StepHooks(ends.append) as hooks:
        runpy.run_path(ACCUM, run_name="__main__")
    assert hooks.error_count == 0
    assert [e.source for e in ends] == ["optimizer"] * 5
    assert all(e.data_wait_ns > 0 for e in ends)
    # the hooks are gone: backward and the DataLoader run unpatched again
    import torch
    from torch.utils.data import dataloader

    assert torch.autograd.backward.__module__ == "torch.autograd"
    assert dataloader._BaseDataLoaderIter.__next__.__module__ == "torch.utils.data.dataloader"


def test_backward_without_an_optimizer_falls_back_to_one_step_per_batch():
    """A hand-written update (backward, no torch.optim): the first MAX_MICROBATCHES batches wait for an optimizer
    step that never comes and make one step; from then on each batch is a step (80 batches: 1 + 16 steps)."""
    import torch

    from nbprof.capture.step_hooks import MAX_MICROBATCHES

    model = torch.nn.Linear(4, 1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(80, 4)), batch_size=1)
    ends = []
    with StepHooks(ends.append):
        for (x,) in loader:
            model(x).sum().backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.01 * p.grad
                    p.grad = None
    assert MAX_MICROBATCHES == 64 and len(ends) == 1 + 80 - MAX_MICROBATCHES
    assert {e.source for e in ends} == {"dataloader"}


def test_trace_profiled_without_schedule_has_one_step_per_optimizer_step(monkeypatch, tmp_path):
    """torch.profiler without a schedule around the unmodified loop (no ProfilerStep): 5 steps from the optimizer
    step, each with its 4 micro-batches."""
    from torch.profiler import ProfilerActivity, profile

    monkeypatch.setattr(sys, "argv", [ACCUM, "--steps", "5", "--accum", "4"])
    out = tmp_path / "accum.pt.trace.json"
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        runpy.run_path(ACCUM, run_name="__main__")
    prof.export_chrome_trace(str(out))
    tr = nbprof.load(out)
    src = iterations.step_source(tr)
    assert (src.source, src.steps) == ("optimizer_step", 5)
    assert _batches_and_optimizer_steps(tr) == [(4, 1)] * 5


@pytest.mark.slow
def test_report_script_schedule_flags_record_whole_accumulated_steps(tmp_path, monkeypatch, capsys):
    """``nbprof report --script ... --wait 0 --warmup 0 --active 2``: the flags reach the capture (ProfilerStep#0
    and #1 recorded, not the default #4..#8), and each recorded step holds 4 micro-batches and its optimizer step
    (before: one batch each and no optimizer step)."""
    from nbprof import cli
    from nbprof.report import run_workload

    args = cli._parser()[0].parse_args(["report", "--script", ACCUM, "--no-nsys", "--wait", "0", "--warmup", "0",
                                        "--active", "2", "--script-args", "--steps", "4"])
    flags = cli._capture_args(args)
    assert flags == ["--wait", "0", "--warmup", "0", "--active", "2"]
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    art = run_workload(args.script, args.script_args, tmp_path / "out", use_nsys=False, tensorboard=False,
                       log=lambda _m: None, capture_args=flags)
    tr = nbprof.load(art.trace)
    ev = tr.events
    assert sorted(ev.loc[ev["name"].astype(str).str.startswith("ProfilerStep#"), "name"].astype(str)) == [
        "ProfilerStep#0", "ProfilerStep#1"]
    assert _batches_and_optimizer_steps(tr) == [(4, 1), (4, 1)]


def test_report_schedule_flags_need_a_script(tmp_path, capsys):
    from nbprof import cli

    rc = cli.main(["report", "--wait", "2", "--active", "3", "--trace", str(tmp_path / "t.json")])
    assert rc == 2
    assert "--wait --active: a schedule applies to --script only" in capsys.readouterr().err
    rc = cli.main(["report", "--script", ACCUM, "--watch", "--whole-run"])
    assert rc == 2 and "--watch chooses its own capture windows" in capsys.readouterr().err
