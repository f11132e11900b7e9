"""The ``nbprof`` command: thin glue over the library (argument parsing only)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _cmd_summary(args: argparse.Namespace) -> int:
    from . import load

    tr = load(args.trace, strict=args.strict)
    print(json.dumps(tr.summary(), indent=1, default=str))
    print(str(tr.report))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    """Profile the bundled CNN example on this machine and print the trace summary."""
    from . import load

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    trace_path = os.path.join(out, f"demo_cnn.{time.strftime('%Y%m%d-%H%M%S')}.pt.trace.json.gz")
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "train_cnn.py")
    argv = [sys.executable, script, "--steps", str(args.steps), "--profile", trace_path, "--profile-memory"]
    print("running:", " ".join(argv), flush=True)
    subprocess.run(argv, check=True)
    tr = load(trace_path)
    print(repr(tr))
    print(json.dumps(tr.summary(), indent=1, default=str))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    """Run the workflow notebooks (on a fresh run of --script, or on given artefacts) into one HTML page."""
    from .report import Artefacts, ReportError, build_report, run_workload

    out = os.path.abspath(args.out)
    try:
        if args.script:
            art = run_workload(args.script, args.script_args, os.path.join(out, time.strftime("run-%Y%m%d-%H%M%S")),
                               steps=args.steps, use_nsys=not args.no_nsys)
        else:
            art = Artefacts()
        for field in ("trace", "compare_trace", "nsys_report", "logdir", "ds_log"):
            val = getattr(args, field)
            if val:
                if not os.path.exists(val):
                    print(f"nbprof report: --{field.replace('_', '-')} {val!r} does not exist", file=sys.stderr)
                    return 2
                setattr(art, field, os.path.abspath(val))
        art.ds_traces += [os.path.abspath(p) for p in args.ds_trace]
        if not (art.trace or art.nsys_report or art.logdir or art.ds_log or art.ds_traces):
            print("nbprof report: give --script or at least one of --trace/--nsys/--logdir/--ds-log/--ds-trace", file=sys.stderr)
            return 2
        for n in art.notes:
            print("note:", n)
        html = build_report(art, out, progress=not args.no_progress)
    except ReportError as exc:
        print(f"nbprof report failed: {exc}", file=sys.stderr)
        if exc.notebook:
            print(f"the executed notebook with the error is kept at {exc.notebook}", file=sys.stderr)
        return 1
    print(f"report: {html}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nbprof`` console script."""
    p = argparse.ArgumentParser(prog="nbprof", description="Notebook-first performance workbench for AI training.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="load a trace and print its summary and load report")
    s.add_argument("trace")
    s.add_argument("--strict", action="store_true", help="fail on the first defect instead of repairing")
    s.set_defaults(func=_cmd_summary)
    d = sub.add_parser("demo", help="profile the bundled example CNN and summarise it")
    d.add_argument("--steps", type=int, default=8)
    d.add_argument("--out", default="results")
    d.set_defaults(func=_cmd_demo)
    r = sub.add_parser("report", help="run the four-step workflow notebooks and write one offline HTML report")
    r.add_argument("--script", help="training script to profile first (e.g. examples/train_cnn.py)")
    r.add_argument("--script-args", nargs=argparse.REMAINDER, default=[], help="arguments for --script (put last)")
    r.add_argument("--steps", type=int, default=None, help="--steps N passed to scripts that take it")
    r.add_argument("--trace", help="existing Kineto trace (.json[.gz])")
    r.add_argument("--compare-trace", help="a second trace to compare with (before/after)")
    r.add_argument("--nsys", dest="nsys_report", help="existing Nsight Systems report (.nsys-rep or .sqlite)")
    r.add_argument("--logdir", help="existing TensorBoard logdir")
    r.add_argument("--ds-log", help="existing DeepSpeed log (flops profiler / comms logger output)")
    r.add_argument("--ds-trace", action="append", default=[], help="per-rank trace of a distributed job (repeatable)")
    r.add_argument("--no-nsys", action="store_true", help="do not run Nsight Systems on --script")
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--out", default="results", help="output folder (a new report-<time> folder is made inside)")
    r.set_defaults(func=_cmd_report)
    args = p.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
