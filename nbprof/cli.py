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
    args = p.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
