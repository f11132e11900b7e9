"""Operator summary: torch's ``prof.key_averages()`` vs nbprof load + ``operator_summary``.

One process, one profile: ``examples/train_cnn.py``'s ``train()`` is profiled for ``--steps``
steps with stacks (``with_stack`` + ``_ExperimentalConfig(verbose=True)``, so the trace
carries ``Call stack`` args and ``python_function`` events), shapes and memory; the Chrome
trace is exported; then, side by side:

* torch: the first ``prof.key_averages()`` after the profile, as a user pays it: torch
  processes its results lazily, so this call parses the Kineto results into
  ``FunctionEvent`` objects (``_parse_kineto_results``), builds the call tree and
  aggregates (``export_chrome_trace`` does not trigger that processing);
* nbprof: ``nbprof.load(trace)`` + ``operator_summary(trace)`` from the exported file, timed
  twice: in a fresh Python process started by this script (imports not timed, as torch's are
  not: what ``nbprof report`` or a notebook that opens the trace pays), and in this process
  after ``key_averages()`` (a heap that torch's 1.4 M freed ``FunctionEvent`` objects left
  fragmented, which slows any allocation-heavy Python code: ~25% for nbprof here).

Both nbprof results are checked to agree with torch's (counts exactly, times within 1%) before
the ratios are printed, so the speed is not bought with wrong numbers.

Usage::

    python benchmarks/bench_operators.py --steps 1000
    python benchmarks/bench_operators.py --steps 100 --num-workers 2 --keep /tmp/t.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _nbprof_timed(path: Path, python_functions: bool) -> tuple[float, float, object, int]:
    """``nbprof.load`` + ``operator_summary`` on ``path``: (load s, summary s, summary, table rows)."""
    import nbprof
    from nbprof.analysis.operators import operator_summary

    t0 = time.perf_counter()
    trace = nbprof.load(path)
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    summary = operator_summary(trace, python_functions=python_functions)
    t_summary = time.perf_counter() - t0
    return t_load, t_summary, summary, len(trace.events) + len(trace.memory)


def _fresh_process(path: Path, python_functions: bool) -> tuple[float, float, object, int]:
    """``_nbprof_timed`` in a new interpreter (this file with ``--nbprof-only``), result by pickle."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "result.pkl"
        cmd = [sys.executable, __file__, "--nbprof-only", str(path), "--out", str(out)]
        if not python_functions:
            cmd.append("--no-python-functions")
        subprocess.run(cmd, check=True)
        with open(out, "rb") as f:
            return pickle.load(f)


def _cross_check(theirs: list[tuple], summary, torch_done: bool) -> tuple[int, list]:
    """torch's (key, count, total ns, self ns) rows vs nbprof's summary: (values checked, mismatches)."""
    ours = summary.set_index("name")
    checked = 0
    mismatches: list = []
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
    return checked, mismatches


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nbprof-only", default=None, help=argparse.SUPPRESS)  # the fresh-process measurement
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
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
    if a.nbprof_only:
        sys.path.insert(0, str(ROOT))
        import nbprof  # imported before the clock starts, as torch is
        from nbprof.analysis.operators import operator_summary

        res = _nbprof_timed(Path(a.nbprof_only), not a.no_python_functions)
        with open(a.out, "wb") as f:
            pickle.dump(res, f)
        return {}

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    sys.path.insert(0, str(ROOT / "examples"))
    from train_cnn import train

    import nbprof  # noqa: F401 - imported before any clock starts
    from nbprof.analysis.operators import operator_summary  # noqa: F401

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
    pyf = not a.no_python_functions
    fresh = _fresh_process(path, pyf)
    t_load_in, t_summary_in, summary_in, n_rows = _nbprof_timed(path, pyf)
    t_load, t_summary, summary = fresh[:3]
    t_nbprof, t_nbprof_in = t_load + t_summary, t_load_in + t_summary_in

    # the two must agree before the speed means anything
    checked, mismatches = _cross_check(theirs, summary, torch_done)
    checked_in, mismatches_in = _cross_check(theirs, summary_in, torch_done)
    for m in (mismatches + mismatches_in)[:20]:
        print("MISMATCH", m)

    res = {
        "steps": a.steps,
        "num_workers": a.num_workers,
        "trace_events": n_rows,
        "function_events": n_function_events,
        "trace_mb": size / 1e6,
        "profile_s": t_prof,
        "export_s": t_export,
        "key_averages_s": t_torch,
        "nbprof_load_s": t_load,
        "nbprof_summary_s": t_summary,
        "nbprof_total_s": t_nbprof,
        "ratio": t_torch / t_nbprof,
        "nbprof_in_process_load_s": t_load_in,
        "nbprof_in_process_summary_s": t_summary_in,
        "nbprof_in_process_total_s": t_nbprof_in,
        "ratio_in_process": t_torch / t_nbprof_in,
        "torch_finished": torch_done,
        "rows": len(summary),
        "checked_values": checked,
        "mismatches": [list(map(str, m)) for m in mismatches + mismatches_in],
    }
    print(
        f"steps={a.steps} num_workers={a.num_workers} events={res['trace_events']} "
        f"(torch FunctionEvents {n_function_events}) trace={res['trace_mb']:.1f} MB\n"
        f"torch key_averages(): {t_torch:.2f} s{'' if torch_done else ' (stopped: still running)'}\n"
        f"nbprof, fresh process: load {t_load:.2f} s + operator_summary {t_summary:.2f} s = {t_nbprof:.2f} s\n"
        f"nbprof, this process after key_averages(): load {t_load_in:.2f} s + operator_summary "
        f"{t_summary_in:.2f} s = {t_nbprof_in:.2f} s\n"
        f"ratio {'>= ' if not torch_done else ''}{res['ratio']:.1f}x fresh process, "
        f"{res['ratio_in_process']:.1f}x in this process  "
        + (
            f"({len(summary)} rows; {checked} + {checked_in} times checked; "
            f"{len(mismatches) + len(mismatches_in)} mismatches)"
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
