"""Shared by the merge tests: one real run of ``examples/train_cnn.py`` profiled by nsys and torch.profiler at
once, through the report's ``--script`` capture path (:func:`nbprof.report.run_workload`)."""

from __future__ import annotations

from pathlib import Path

from _support.nsys import agents_running, assert_no_new_agent, nsys_or_skip
from _support.paths import ROOT

#: synthetic CPU cost per sample (ms) and batch size: the main thread preprocesses 64 x 0.2 ms = 12.8 ms a step
PREPROCESS_MS = 0.2
BATCH = 64
STEPS = 8  # the script's schedule profiles steps 2..7 (wait 1, warmup 1)


def capture_pair(out: Path) -> tuple[str, str]:
    """(nsys SQLite export, Kineto trace) of one run with ``--num-workers 0 --preprocess-ms 0.2``; skips
    (with the reason) when nsys is not obtainable; asserts that no nsys agent of the run survives."""
    nsys_or_skip()
    from nbprof.report import run_workload

    before = set(agents_running())
    for attempt in range(2):  # nsys 2022.4 once failed here in its ProcessWaiter (sem_open ENOENT): one more try
        art = run_workload(str(ROOT / "examples" / "train_cnn.py"),
                           ["--num-workers", "0", "--preprocess-ms", str(PREPROCESS_MS), "--batch-size", str(BATCH)],
                           out / f"try{attempt}", steps=STEPS, tensorboard=False, log=lambda *_: None)
        assert_no_new_agent(before)
        if art.nsys_report:
            break
    assert art.nsys_report and art.trace, art.notes
    return art.nsys_report, art.trace
