"""Profile any Python script with torch.profiler: ``python -m nbprof.capture.script --trace OUT -- script.py args``.

The script runs as ``__main__`` (``runpy.run_path``) inside a torch.profiler capture session
(``nbprof.capture.torch_profiler.Session``: files only). The script needs no change: its steps come from
process-global hooks (``nbprof.capture.auto_steps``: each ``optimizer.step()``, else each ``DataLoader``
batch, ends a ``ProfilerStep#N``, also an NVTX range for an nsys + Kineto merge), and the schedule
(default: skip 3 steps, warm up 1, record 5) stops the profiler afterwards while the script runs on; the
wall times of the unprofiled and profiled steps go into the trace (``nbprof_capture``) for the
profiler-overhead estimate. A script that calls ``nbprof.step()`` or runs its own torch.profiler keeps
its own steps. ``--whole-run`` records the whole run as one window instead. The script's exit status is
kept; an exception it raises is printed as Python prints it (the script's own frames) and exits 1.
"""

from __future__ import annotations

import argparse
import runpy
import sys


def format_script_exception(exc: BaseException, script: str) -> str:
    """The traceback of an exception ``script`` raised, as Python prints it for the script run alone: the frames
    from the first one in ``script`` on (nbprof's and runpy's frames above it left out; all of them when no
    frame is in ``script``)."""
    import os
    import traceback

    target = os.path.realpath(script)
    tb = exc.__traceback__
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))


def raised_in(exc: BaseException, script: str) -> bool:
    """Whether a frame of ``exc``'s traceback runs code of ``script`` (the script raised it, not nbprof)."""
    import os

    target = os.path.realpath(script)
    tb = exc.__traceback__
    while tb is not None:
        if os.path.realpath(tb.tb_frame.f_code.co_filename) == target:
            return True
        tb = tb.tb_next
    return False


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the script's exit status (2 when the script or torch is missing)."""
    ap = argparse.ArgumentParser(prog="python -m nbprof.capture.script", description=__doc__.splitlines()[0])
    ap.add_argument("--trace", required=True, help="Chrome-trace output (.json or .json.gz); never overwritten")
    ap.add_argument("--activities", default=None,
                    help="comma-separated: cpu, cuda, gpu (default cpu,gpu where torch sees an accelerator, else cpu)")
    ap.add_argument("--no-memory", action="store_true", help="do not record [memory] events")
    ap.add_argument("--wait", type=int, default=3, metavar="N", help="steps skipped before warm-up (default 3)")
    ap.add_argument("--warmup", type=int, default=1, metavar="N", help="warm-up steps, profiled and discarded (default 1)")
    ap.add_argument("--active", type=int, default=5, metavar="N", help="steps recorded (default 5)")
    ap.add_argument("--whole-run", action="store_true",
                    help="no automatic steps: record the whole run (one window unless the script calls nbprof.step())")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    import os

    from ..errors import MissingDependencyError
    from .options import ProfileOptions
    from .torch_profiler import Session, _import_torch

    if not os.path.isfile(a.script):
        print(f"{ap.prog}: error: script {a.script!r}: no such file", file=sys.stderr)
        return 2
    try:
        torch = _import_torch()
    except MissingDependencyError as exc:
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 2
    if a.activities is None:  # not asked for: no "a GPU was requested" note on a CPU-only machine
        accel = getattr(torch, "accelerator", None)
        has_gpu = accel.is_available() if accel is not None else torch.cuda.is_available()
        a.activities = "cpu,gpu" if has_gpu else "cpu"
    sys.argv = [a.script, *args]
    code = 0
    sched = {} if a.whole_run else {"wait": a.wait, "warmup": a.warmup, "active": a.active, "auto_steps": True}
    try:
        options = ProfileOptions(activities=(a.activities,), trace=a.trace, record_shapes=True,
                                 profile_memory=not a.no_memory, quiet=True, **sched).validated()
    except ValueError as exc:
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 2
    session = Session(options)
    with session:  # capture only: the trace file is written, nothing is loaded
        try:
            runpy.run_path(a.script, run_name="__main__")
        except SystemExit as exc:  # keep the script's status, still export the trace
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception as exc:  # the script raised: its traceback as Python shows it, status 1, trace exported
            if not raised_in(exc, a.script):
                raise
            sys.stderr.write(format_script_exception(exc, a.script))
            return 1  # the profile's notes ("nothing was recorded", ...) would not be the story
    for note in session.notes:
        print(f"nbprof: {note}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
