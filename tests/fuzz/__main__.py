"""``python -m tests.fuzz --seed N --cases K --time-budget S [--formats ...] [--out DIR]``.

Prints per-format counts per outcome and the distinct failure classes; writes each failing case
(input bytes, traceback, case.json with the replay command) under ``--out`` (default
``fuzz-failures/``, git-ignored). Exit status 1 when any case is FOREIGN, HANG,
WROTE-NEXT-TO-INPUT or ACCOUNTING.
"""

from __future__ import annotations

import argparse
import signal
import sys

from .engine import FORMATS, failure_total, format_kinds, format_summary, read_json, run_fuzz


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=1000, help="total cases, split over the formats")
    ap.add_argument("--time-budget", type=float, default=None, help="stop starting cases after S seconds")
    ap.add_argument("--formats", nargs="+", choices=FORMATS, default=None)
    ap.add_argument("--out", default="fuzz-failures", help="folder for failing cases ('' for none)")
    ap.add_argument("--timeout", type=float, default=5.0, help="per-case time limit in seconds")
    ap.add_argument("--analyses-rate", type=float, default=1.0, help="fraction of loaded cases that run the analyses")
    ap.add_argument("--html-rate", type=float, default=0.05, help="fraction of loaded cases that write the static page")
    ap.add_argument("--keep", type=int, default=3, help="failing cases kept per failure class")
    ap.add_argument("--replay", default=None, help="FORMAT:INDEX: run one case (and its format's seed cases), print its traceback")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes running cases at once")
    ap.add_argument("--json", default=None, help="also write the result as JSON here (and the result so far every "
                    "250 cases, \"partial\": true)")
    ap.add_argument("--stop-after", type=int, default=None, help="stop starting cases once N are done (with --json: "
                    "a long run in parts, continued by --resume)")
    ap.add_argument("--resume", default=None, help="a --json file of an earlier, stopped run with the same --seed and "
                    "--cases: run only the cases it has not done and add its counts")
    a = ap.parse_args(argv)
    replay = None
    if a.replay:
        f, _, i = a.replay.partition(":")
        replay = (f, int(i))

    def _term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)  # a stopped run still prints and writes what it has done
    res = run_fuzz(seed=a.seed, cases=a.cases, time_budget=a.time_budget, formats=a.formats, out_dir=a.out or None,
                   timeout=a.timeout, analyses_rate=a.analyses_rate, html_rate=a.html_rate, keep_per_signature=a.keep,
                   replay=replay, progress=True, jobs=a.jobs, log=lambda s: print(s, flush=True),
                   checkpoint=a.json if replay is None else None, resume=read_json(a.resume) if a.resume else None,
                   stop_after=a.stop_after)
    print(format_kinds(res), flush=True)
    print(format_summary(res), flush=True)
    return 1 if failure_total(res) else 0


if __name__ == "__main__":
    sys.exit(main())
