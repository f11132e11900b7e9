"""The ``nbprof`` command: thin glue over the library (argument parsing only)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _fail(cmd: str, msg: str, rc: int = 1) -> int:
    """Print ``nbprof <cmd>: error: <msg>`` on stderr (no traceback) and return ``rc``."""
    print(f"nbprof {cmd}: error: {msg}", file=sys.stderr)
    return rc


def _cmd_summary(args: argparse.Namespace) -> int:
    """Load one trace and print its summary (JSON) and load report.

    Anything that stops the load (missing file, a directory/FIFO/device, an unreadable or, with
    ``--strict``, an imperfect trace) is one ``nbprof summary: error: ...`` line on stderr and exit
    status 2 -- never a traceback.
    """
    from . import load
    from .errors import NbprofError

    try:
        tr = load(args.trace, strict=bool(args.strict))
    except FileNotFoundError as exc:
        return _fail("summary", str(exc), 2)
    except NbprofError as exc:
        hint = ""
        if args.strict:
            hint = "\nhint: without --strict nbprof repairs what it can and lists the repairs in the load report"
        return _fail("summary", f"cannot read the trace: {exc}{hint}", 2)
    except OSError as exc:  # no permission, I/O error, ...
        return _fail("summary", f"cannot read {args.trace!r}: {exc.strerror or exc}", 2)
    print(json.dumps(tr.summary(), indent=1, default=str))
    print(str(tr.report))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    """Profile the bundled CNN example on this machine and print the trace summary."""
    import importlib.util

    from . import load
    from .report import ReportError, bundled_example, run_workload

    try:
        script = bundled_example("train_cnn.py")
    except ReportError as exc:
        return _fail("demo", f"{exc}\nhint: or profile your own script with `nbprof report --script your_script.py`", 2)
    if importlib.util.find_spec("torch") is None:
        return _fail("demo", f"the demo trains a small CNN with PyTorch, which is not installed in {sys.executable}\n"
                     "hint: pip install 'nbprof[examples]'", 2)
    out = os.path.join(os.path.abspath(args.out), time.strftime("demo-%Y%m%d-%H%M%S"))
    try:
        art = run_workload(str(script), (), out, steps=args.steps, use_nsys=False, tensorboard=False)
    except ReportError as exc:
        return _fail("demo", str(exc))
    tr = load(art.trace)
    print(repr(tr))
    print(json.dumps(tr.summary(), indent=1, default=str))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    """Run the workflow notebooks (on a fresh run of --script, or on given artefacts) into one HTML page."""
    from .report import Artefacts, ReportError, build_report, run_workload

    out = os.path.abspath(args.out)
    # every given path is checked before anything runs (a workload can take minutes)
    given = [("script", args.script)] + [(f, getattr(args, f)) for f in ("trace", "compare_trace", "nsys_report", "logdir", "ds_log")]
    given += [("ds_trace", p) for p in args.ds_trace]
    for field, val in given:
        if val and not os.path.exists(val):
            flag = "--nsys" if field == "nsys_report" else "--" + field.replace("_", "-")
            return _fail("report", f"{flag} {val!r} does not exist", 2)
    if not (args.script or args.trace or args.nsys_report or args.logdir or args.ds_log or args.ds_trace):
        return _fail("report", "nothing to report on: give --script or at least one of "
                     "--trace/--nsys/--logdir/--ds-log/--ds-trace", 2)
    try:
        if args.script:
            art = run_workload(args.script, args.script_args, os.path.join(out, time.strftime("run-%Y%m%d-%H%M%S")),
                               steps=args.steps, use_nsys=not args.no_nsys)
        else:
            art = Artefacts()
        for field in ("trace", "compare_trace", "nsys_report", "logdir", "ds_log"):
            val = getattr(args, field)
            if val:
                setattr(art, field, os.path.abspath(val))
        art.ds_traces += [os.path.abspath(p) for p in args.ds_trace]
        for n in art.notes:
            print("note:", n)
        html = build_report(art, out, progress=not args.no_progress, output=args.output)
    except ReportError as exc:
        print(f"nbprof report: error: {exc}", file=sys.stderr)
        if exc.notebook:
            print(f"the executed notebook with the error is kept at {exc.notebook}", file=sys.stderr)
        return 1
    print(f"report: {html}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nbprof`` console script."""
    p = argparse.ArgumentParser(
        prog="nbprof",
        description="Notebook-first performance workbench for AI training.",
        epilog=(
            "examples:\n"
            "  nbprof summary run.pt.trace.json.gz          # what a trace holds, and what the loader repaired\n"
            "  nbprof report --trace run.pt.trace.json.gz   # one offline HTML report from an existing trace\n"
            "  nbprof report --script train.py --steps 20   # profile a script, then report\n"
            "in Jupyter: %load_ext nbprof, then %%torchprof or %nsys (see README.md)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="load a trace and print its summary and load report")
    s.add_argument(
        "trace",
        help="a trace file: Kineto JSON (.json, .json.gz), Nsight Systems (.sqlite, .nsys-rep), "
        "CUDA allocator snapshot (.pickle), export_memory_timeline rows (.raw.json.gz)",
    )
    s.add_argument("--strict", action="store_true", help="fail on the first defect instead of repairing it (every format)")
    s.set_defaults(func=_cmd_summary)
    d = sub.add_parser("demo", help="profile the bundled example CNN and summarise it")
    d.add_argument("--steps", type=int, default=8, help="training steps to run (default 8)")
    d.add_argument("--out", default="results", help="folder for the trace (default ./results; files are never overwritten)")
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
    r.add_argument("--ds-trace", action="append", default=[], help="per-rank trace of a distributed job (repeatable), or a folder of them")
    r.add_argument("--no-nsys", action="store_true", help="do not run Nsight Systems on --script")
    r.add_argument("--no-progress", action="store_true", help="no progress bar while the notebooks run")
    r.add_argument("--out", default="results", help="output folder (a new report-<time> folder is made inside)")
    r.add_argument("-o", "--output", default=None, help="write the report to this .html file instead of a folder")
    r.set_defaults(func=_cmd_report)
    args = p.parse_args(argv)
    from .errors import NbprofError

    try:
        return int(args.func(args) or 0)
    except NbprofError as exc:  # nbprof's own errors carry the file and where: no traceback needed
        return _fail(args.cmd, str(exc))


if __name__ == "__main__":
    sys.exit(main())
