"""Iteration detection (``nbprof.trace.iterations.detect_iterations``) on a large trace without ``ProfilerStep``.

The generated trace (``gen_kineto.generate``) has ``ProfilerStep#N`` ranges; they are taken out of the loaded
events so that every source is tried in turn (optimizer steps, repeated ranges, DataLoader, module forwards,
graph launches, the kernel-sequence search): the slowest path. Prints the best of ``--repeat`` wall and CPU
(``process_time``) times, each on a fresh copy of the trace (the result is kept per Trace), and what was found.

Usage::

    python benchmarks/bench_iterations.py --events 1160000
    python benchmarks/bench_iterations.py --trace some.pt.trace.json.gz
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_160_000, help="generate a trace of about this many events")
    ap.add_argument("--trace", default=None, help="use this trace instead of a generated one")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nbprof
    from nbprof.trace import predicates as pred
    from nbprof.trace.iterations import detect_iterations

    with tempfile.TemporaryDirectory() as tmp:
        path = args.trace
        if path is None:
            from gen_kineto import generate

            path = os.path.join(tmp, "bench.pt.trace.json")
            generate(path, args.events)
        tr = nbprof.load(path)
    ev = tr.events
    no_steps = ev[~pred.is_step_name(ev)].reset_index(drop=True)
    # the generated Python frames rotate through nn.Module names (module_forward then answers); without them
    # every source is tried, down to the kernel-sequence search: the slowest path
    no_frames = no_steps[no_steps["cat"].astype(str) != "python_function"].reset_index(drop=True)
    for label, events in (("ProfilerStep rows removed", no_steps),
                          ("ProfilerStep and python_function rows removed", no_frames)):
        best_wall, best_cpu, src = float("inf"), float("inf"), None
        for _ in range(args.repeat):
            t2 = copy.copy(tr)
            t2.__dict__ = {k: v for k, v in tr.__dict__.items() if not k.startswith("_nbprof")}
            t2.report = copy.deepcopy(tr.report)
            t2.events = events
            w, c = time.perf_counter(), time.process_time()
            _, src = detect_iterations(t2)
            best_wall, best_cpu = min(best_wall, time.perf_counter() - w), min(best_cpu, time.process_time() - c)
        print(f"{len(events):,} events ({label}): detect_iterations best of {args.repeat}: "
              f"wall {best_wall:.3f} s, cpu {best_cpu:.3f} s; {src}")
        print(f"  considered before it: {src.considered if src else ()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
