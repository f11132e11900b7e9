"""Profile any Python script with torch.profiler: ``python -m nbprof.capture.script --trace OUT -- script.py args``.

The script runs as ``__main__`` (``runpy.run_path``) inside a torch.profiler capture session
(``nbprof.capture.torch_profiler.Session``: files only); if it calls
``nbprof.step()`` at the end of each training step, the trace gets ``ProfilerStep#N`` ranges,
otherwise the whole run is one window. The script's exit status and exceptions are preserved.
"""

from __future__ import annotations

import argparse
import runpy
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the script's exit status (2 when the script or torch is missing)."""
    ap = argparse.ArgumentParser(prog="python -m nbprof.capture.script", description=__doc__.splitlines()[0])
    ap.add_argument("--trace", required=True, help="Chrome-trace output (.json or .json.gz); never overwritten")
    ap.add_argument("--activities", default="cpu,gpu", help="comma-separated: cpu, cuda, gpu (default cpu,gpu)")
    ap.add_argument("--no-memory", action="store_true", help="do not record [memory] events")
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
        _import_torch()
    except MissingDependencyError as exc:
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 2
    sys.argv = [a.script, *args]
    code = 0
    options = ProfileOptions(activities=(a.activities,), trace=a.trace, record_shapes=True,
                             profile_memory=not a.no_memory, quiet=True).validated()
    with Session(options):  # capture only: the trace file is written, nothing is loaded
        try:
            runpy.run_path(a.script, run_name="__main__")
        except SystemExit as exc:  # keep the script's status, still export the trace
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code


if __name__ == "__main__":
    sys.exit(main())
