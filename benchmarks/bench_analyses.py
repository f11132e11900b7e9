"""The report's verdict analyses on one trace, this checkout against a baseline checkout, in one run (issue 20).

Times, on a trace loaded once per process: ``verdict(trace)``, ``advise(trace)`` (its rules and one what-if
replay per scenario: the report's first cell) and ``critical_path(trace)`` (HTA's path with slack, the
dashboard's critical-path tab), each in a fresh subprocess per checkout (``PYTHONPATH``), the two checkouts
alternating ``--repeat`` times; prints the best wall and CPU (``process_time``: less sensitive to a shared
machine's load) time of each and the ratio baseline / this checkout, and
checks that both give the same findings (rule, predicted saving) and the same critical path.

Usage::

    git archive <commit> nbprof | tar -x -C /tmp/nbprof_base        # the baseline's package
    python benchmarks/bench_analyses.py --baseline /tmp/nbprof_base --events 1160000
    python benchmarks/bench_analyses.py --baseline /tmp/nbprof_base --trace some.pt.trace.json.gz
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import json, sys, time
import nbprof
from nbprof.analysis import advisor
from nbprof.analysis.critical_path import critical_path
from nbprof.analysis.verdict import verdict
tr = nbprof.load(sys.argv[1])
out = {}
def timed(key, fn):
    t, c = time.perf_counter(), time.process_time()
    r = fn()
    out[key], out[key + "_cpu"] = time.perf_counter() - t, time.process_time() - c
    return r
v = timed("verdict_s", lambda: verdict(tr))
fs = timed("advise_s", lambda: advisor.advise(tr))
cp = timed("critical_path_s", lambda: critical_path(tr))
out["findings"] = [[f.rule, f.predicted_saving_ns] for f in fs]
out["bound"] = v.bound
out["path"] = [int(x) for x in cp.row_ids[:1000]] + [int(cp.length_ns), int(cp.hta_length_ns), len(cp.row_ids)]
out["slack_sum"] = int(cp.slack_ns.sum())
print(json.dumps(out))
"""

_KEYS = ("verdict_s", "advise_s", "critical_path_s")
_ALL = _KEYS + tuple(k + "_cpu" for k in _KEYS)


def _run(pythonpath: str, trace: str) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath)
    r = subprocess.run([sys.executable, "-c", _CHILD, trace], env=env, check=True, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="a directory holding the baseline's nbprof package")
    ap.add_argument("--trace")
    ap.add_argument("--events", type=int, default=1_160_000)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args(argv)
    here = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory(prefix="nbprof_bench_analyses_") as tmp:
        trace = a.trace
        if not trace:
            trace = str(Path(tmp) / "gen.pt.trace.json")
            from gen_kineto import generate  # beside this script

            generate(trace, a.events)
        best: dict[str, dict[str, float]] = {"baseline": {}, "this": {}}
        last: dict[str, dict] = {}
        for _ in range(a.repeat):
            for side, path in (("baseline", a.baseline), ("this", here)):
                r = _run(path, trace)
                last[side] = r
                for k in _ALL:
                    best[side][k] = min(best[side].get(k, float("inf")), r[k])
    same_findings = last["baseline"]["findings"] == last["this"]["findings"]
    same_path = last["baseline"]["path"] == last["this"]["path"] and \
        last["baseline"]["slack_sum"] == last["this"]["slack_sum"]
    print(f"trace: {trace} ({os.path.getsize(trace) / 1e6:.0f} MB)" if a.trace else f"trace: {a.events} events")
    print(f"{'best of ' + str(a.repeat):16s} {'baseline':>9s} {'this':>9s} {'ratio':>6s}   "
          f"{'CPU: base':>9s} {'this':>9s} {'ratio':>6s}")
    for k in (*_KEYS, "total"):
        if k == "total":
            b, t = (sum(best["baseline"][x] for x in _KEYS), sum(best["this"][x] for x in _KEYS))
            bc, tc = (sum(best["baseline"][x + "_cpu"] for x in _KEYS), sum(best["this"][x + "_cpu"] for x in _KEYS))
        else:
            b, t, bc, tc = best["baseline"][k], best["this"][k], best["baseline"][k + "_cpu"], best["this"][k + "_cpu"]
        print(f"{k:16s} {b:8.2f}s {t:8.2f}s {b / t:5.1f}x   {bc:8.2f}s {tc:8.2f}s {bc / tc:5.1f}x")
    print(f"same findings and savings: {same_findings}; same critical path and slack: {same_path}")
    return 0 if same_findings and same_path else 1


if __name__ == "__main__":
    sys.exit(main())
