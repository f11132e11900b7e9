"""`nbprof report` time and peak memory against one load of the same trace (issue 20), in one run.

Generates a Kineto trace (``gen_kineto.py``) unless ``--trace`` is given, then, each in a fresh
subprocess: ``nbprof.load(trace)`` (the reference) and ``nbprof report --trace TRACE -o report.html``.
Prints wall time, the report's time minus one load and their ratio, and the peak memory of each run:
the largest process (``ru_maxrss`` of the children) and the whole process tree (the report's parent plus
its Jupyter kernel: the sum of the tree's RSS, sampled every 0.1 s with psutil). Target (issue 20):
report <= 1 load + 15 s, peak <= 1.5 GB.

Usage::

    python benchmarks/bench_report.py --events 1160000          # the issue's 308 MB trace
    python benchmarks/bench_report.py --events 400000
    python benchmarks/bench_report.py --trace some.pt.trace.json.gz

Set ``PYTHONPATH`` to a checkout to measure that checkout's nbprof.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil


def _tree_rss(proc: psutil.Process) -> int:
    """RSS of ``proc`` and all its descendants, bytes (processes that end meanwhile count 0)."""
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def _run(argv: list[str]) -> tuple[float, float, float]:
    """(wall s, peak RSS of the largest process GiB, peak summed RSS of the process tree GiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = psutil.Process(p.pid)
    tree = 0
    while p.poll() is None:
        tree = max(tree, _tree_rss(proc))
        time.sleep(0.1)
    wall = time.perf_counter() - t
    if p.returncode:
        raise subprocess.CalledProcessError(p.returncode, argv)
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 2**20  # KiB -> GiB
    return wall, peak, max(tree / 2**30, peak)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace")
    ap.add_argument("--events", type=int, default=1_160_000)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nbprof_bench_report_") as tmp:
        trace = a.trace
        if not trace:
            trace = str(Path(tmp) / "gen.pt.trace.json")
            # in this process: a generator child would count in the children's peak RSS measured below
            from gen_kineto import generate  # beside this script

            generate(trace, a.events)
        size = os.path.getsize(trace) / 1e6
        load_s, load_gb, _ = _run([sys.executable, "-c", f"import nbprof; nbprof.load({trace!r})"])
        rep_s, rep_gb, rep_tree = _run([sys.executable, "-m", "nbprof.cli", "report", "--trace", trace, "-o",
                              str(Path(tmp) / "report.html"), "--no-progress"])
    print(f"trace: {size:.0f} MB")
    print(f"load:   {load_s:6.1f} s  peak {load_gb:.2f} GiB")
    print(f"report: {rep_s:6.1f} s  peak {rep_gb:.2f} GiB (largest process), {rep_tree:.2f} GiB (process tree)")
    print(f"report = 1 load + {rep_s - load_s:.1f} s  (ratio report / load {rep_s / load_s:.1f}x; "
          f"target: 1 load + 15 s, peak <= 1.5 GB: {'met' if rep_s - load_s <= 15 and rep_tree <= 1.5e9 / 2**30 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
