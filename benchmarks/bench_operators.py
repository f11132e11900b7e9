"""Operator summary: torch's ``prof.key_averages()`` vs nbprof load + ``operator_summary``.

One process, one profile: ``examples/train_cnn.py``'s ``train()`` is profiled for ``--steps``
steps with stacks (``with_stack`` + ``_ExperimentalConfig(verbose=True)``, so the trace
carries ``Call stack`` args and ``python_function`` events), shapes and memory; the Chrome
trace is exported; then, side by side:

* torch: the first ``prof.key_averages()`` after the profile, as a user pays it: torch
  processes its results lazily, so this call parses the Kineto results into
  ``FunctionEvent`` objects (``_parse_kineto_results``), builds the call tree and
  aggregates (``export_chrome_trace`` does not trigger that processing);
* nbprof: ``nbprof.load(trace)`` + ``operator_summary(trace)`` from the exported file.

Both results are checked to agree (counts exactly, times within 1%) before the ratio is
printed, so the speed is not bought with wrong numbers.

Usage::

    python benchmarks/bench_operators.py --steps 1000
    python benchmarks/bench_operators.py --steps 100 --num-workers 2 --keep /tmp/t.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000, help="profiled (active) steps")
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--keep", default=None, help="write the trace here instead of a temporary file")
    p.add_argument("--torch-timeout", type=float, default=None,
                   help="stop key_averages() after this many seconds; the ratio is then a lower bound")
    p.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    p.add_argument("--plain-stack", action="store_true",
                   help="with_stack without the verbose experimental config (torch 2.13's default: python_function "
                        "events, no 'Call stack' args) - the configuration of the issue's 1000-step / 45 s figure")
    p.add_argument("--no-python-functions", action="store_true",
                   help="operator_summary(python_functions=False): torch <= 2.11 semantics (no python frames as ops)")
    a = p.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    sys.path.insert(0, str(ROOT / "examples"))
    from train_cnn import train

    import nbprof
    from nbprof.analysis.operators import operator_summary

    torch.set_num_threads(1)
    tmp = None
    if a.keep:
        path = Path(a.keep)
    else:
        tmp = tempfile.TemporaryDirectory()
        path = Path(tmp.name) / "bench_operators.pt.trace.json"
    t0 = time.perf_counter()
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        experimental_config=None if a.plain_stack else torch._C._profiler._ExperimentalConfig(verbose=True),
        schedule=schedule(wait=1, warmup=1, active=a.steps, repeat=1),
    ) as prof:
        train(a.steps + 2, num_workers=a.num_workers, profiler=prof)
    t_prof = time.perf_counter() - t0
    t0 = time.perf_counter()
    prof.export_chrome_trace(str(path))
    t_export = time.perf_counter() - t0
    size = os.path.getsize(path)

    # torch processes its results lazily: the first key_averages() parses the Kineto results
    # into FunctionEvents, builds the call tree and aggregates; that is what a user waits for
    gc.collect()
    if a.torch_timeout:
        def _stop(signum, frame):
            raise TimeoutError
        signal.signal(signal.SIGALRM, _stop)
        signal.setitimer(signal.ITIMER_REAL, a.torch_timeout)
    t0 = time.perf_counter()
    try:
        ka = prof.key_averages()
        torch_done = True
    except TimeoutError:
        ka = None
        torch_done = False
    t_torch = time.perf_counter() - t0
    if a.torch_timeout:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if torch_done:
        n_function_events = len(prof.events())
        theirs = [(e.key, e.count, e.cpu_time_total * 1e3, e.self_cpu_time_total * 1e3) for e in ka]
    else:
        n_function_events, theirs = -1, []
    del ka, prof  # free torch's events before nbprof loads the file (peak memory)
    gc.collect()
    t0 = time.perf_counter()
    trace = nbprof.load(path)
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    summary = operator_summary(trace, python_functions=not a.no_python_functions)
    t_summary = time.perf_counter() - t0
    t_nbprof = t_load + t_summary

    # the two must agree before the speed means anything
    ours = summary.set_index("name")
    checked = 0
    mismatches = []
    for key, count, total_ns, self_ns in theirs:
        if key not in ours.index:
            mismatches.append((key, "missing", None, count))
            continue
        row = ours.loc[key]
        if int(row["count"]) != count:
            mismatches.append((key, "count", int(row["count"]), count))
        for want, col in ((total_ns, "total_host_ns"), (self_ns, "self_host_ns")):
            if abs(want) >= 10_000:
                checked += 1
                if abs(row[col] - want) > 0.01 * abs(want):
                    mismatches.append((key, col, int(row[col]), want))
    if torch_done and len(theirs) != len(summary):
        mismatches.append(("<rows>", "rows", len(summary), len(theirs)))
    for m in mismatches[:20]:
        print("MISMATCH", m)

    res = {
        "steps": a.steps,
        "num_workers": a.num_workers,
        "trace_events": len(trace.events) + len(trace.memory),
        "function_events": n_function_events,
        "trace_mb": size / 1e6,
        "profile_s": t_prof,
        "export_s": t_export,
        "key_averages_s": t_torch,
        "nbprof_load_s": t_load,
        "nbprof_summary_s": t_summary,
        "nbprof_total_s": t_nbprof,
        "ratio": t_torch / t_nbprof,
        "torch_finished": torch_done,
        "rows": len(summary),
        "checked_values": checked,
        "mismatches": [list(map(str, m)) for m in mismatches],
    }
    print(
        f"steps={a.steps} num_workers={a.num_workers} events={res['trace_events']} "
        f"(torch FunctionEvents {n_function_events}) trace={res['trace_mb']:.1f} MB\n"
        f"torch key_averages(): {t_torch:.2f} s{'' if torch_done else ' (stopped: still running)'}\n"
        f"nbprof load {t_load:.2f} s + operator_summary {t_summary:.2f} s = {t_nbprof:.2f} s\n"
        f"ratio {'>= ' if not torch_done else ''}{res['ratio']:.1f}x  "
        + (
            f"({len(summary)} rows; {checked} times checked; {len(mismatches)} mismatches)"
            if torch_done else "(not cross-checked)"
        )
    )
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    if tmp is not None:
        tmp.cleanup()
    return res


if __name__ == "__main__":
    main()
