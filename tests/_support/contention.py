"""The CPU-contention before/after captures (issue 30), shared by ``tests/test_cpu_contention.py`` and the validation
harness (``tests/harness/pairs.py``): ``tests/workloads/contended_loop.py`` pinned to one CPU, with busy processes
pinned to the same CPU or more intra-op threads than that CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbprof

from .paths import ROOT

WORKLOAD = ROOT / "tests" / "workloads" / "contended_loop.py"


def loop_cpu() -> int:
    """The CPU the pairs pin the loop (and its busy processes) to: the highest this process may use."""
    return max(os.sched_getaffinity(0))


def capture_contended(out: Path, cpu: int, *, hogs: int = 0, threads: int = 1) -> nbprof.Trace:
    """Run the loop pinned to ``cpu`` with ``hogs`` busy processes pinned there too (started here: other processes,
    not the loop's children, killed after it) and ``threads`` intra-op threads; load and return its trace (written to
    ``out``, through nbprof's capture with automatic steps: the run-queue numbers are in it).

    Raises ``subprocess.CalledProcessError`` / ``TimeoutExpired`` (300 s) when the loop fails."""
    procs = [subprocess.Popen([sys.executable, str(WORKLOAD), "--hog", "--cpu", str(cpu)], stdout=subprocess.PIPE,
                              text=True) for _ in range(hogs)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        subprocess.run([sys.executable, str(WORKLOAD), str(out), "--cpu", str(cpu), "--threads", str(threads)],
                       check=True, capture_output=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(threads)))
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return nbprof.load(out)
