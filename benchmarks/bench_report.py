"""`nbprof report` time and peak memory against one load of the same trace (issue 20), in one run.

Generates a Kineto trace (``gen_kineto.py``) unless ``--trace`` is given, then, each in a fresh
subprocess: ``nbprof.load(trace)`` (the reference) and ``nbprof report --trace TRACE -o report.html``.
Prints wall time, the report's time minus one load, and peak RSS of each process tree's largest
process (``ru_maxrss`` of the children). Target (issue 20): report <= 1 load + 15 s, peak <= 1.5 GB.

Usage::

    python benchmarks/bench_report.py --events 400000
    python benchmarks/bench_report.py --trace some.pt.trace.json.gz

Set ``PYTHONPATH`` to a checkout to measure that checkout's nbprof.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 2**20  # KiB -> GiB
    return wall, peak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace")
    ap.add_argument("--events", type=int, default=400_000)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nbprof_bench_report_") as tmp:
        trace = a.trace
        if not trace:
            trace = str(Path(tmp) / "gen.pt.trace.json")
            subprocess.run([sys.executable, str(Path(__file__).with_name("gen_kineto.py")), trace,
                            "--events", str(a.events)], check=True, stdout=subprocess.DEVNULL)
        size = os.path.getsize(trace) / 1e6
        load_s, load_gb = _run([sys.executable, "-c", f"import nbprof; nbprof.load({trace!r})"])
        rep_s, rep_gb = _run([sys.executable, "-m", "nbprof.cli", "report", "--trace", trace, "-o",
                              str(Path(tmp) / "report.html"), "--no-progress"])
    print(f"trace: {size:.0f} MB")
    print(f"load:   {load_s:6.1f} s  peak {load_gb:.2f} GiB")
    print(f"report: {rep_s:6.1f} s  peak {rep_gb:.2f} GiB (largest process)  = 1 load + {rep_s - load_s:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
