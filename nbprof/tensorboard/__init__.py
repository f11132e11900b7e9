"""TensorBoard step: write traces + scalars into a logdir, read logdirs back, launch TensorBoard.

The layout is the one ``torch.profiler.tensorboard_trace_handler`` writes and the
(now removed upstream) PyTorch profiler plugin of TensorBoard reads::

    <logdir>/<run>/<worker>.<timestamp>.pt.trace.json[.gz]     Kineto trace (one span)
    <logdir>/<run>/events.out.tfevents.*                       nbprof's scalars and text

so stock TensorBoard shows the scalars and text of every run side by side, and
``torch-tb-profiler`` (where still installed) lists the same runs.

Modules
-------
write
    ``write_run(trace_or_path, logdir, run, worker=None)``, ``write_trace``, ``write_scalars``.
read
    ``discover(logdir)``, ``load_run`` (one Trace), ``load_run_traces``, ``load_logdir``, ``compare_runs``, ``breakdown_side_by_side``.
launch
    ``start(logdir)`` (start or reuse TensorBoard on 127.0.0.1), ``embed``, ``stop``, ``running``;
    also importable as ``nbprof.tensorboard.start`` etc.
"""

from __future__ import annotations

from .read import (
    TRACE_FILE_PATTERN,
    breakdown_side_by_side,
    compare_runs,
    discover,
    load_logdir,
    load_run,
    load_run_traces,
)
from .write import WrittenRun, write_run, write_scalars, write_trace

__all__ = [
    "TRACE_FILE_PATTERN",
    "WrittenRun",
    "write_run",
    "write_trace",
    "write_scalars",
    "discover",
    "load_run",
    "load_run_traces",
    "load_logdir",
    "compare_runs",
    "breakdown_side_by_side",
    "start",
    "embed",
    "stop",
    "running",
    "TensorBoardHandle",
    "TensorBoardStartError",
]


def __getattr__(name: str):  # launch pulls in subprocess/HTTP helpers only when used
    if name in {"start", "embed", "stop", "running", "TensorBoardHandle", "TensorBoardStartError"}:
        from . import launch as _launch

        return getattr(_launch, name)
    raise AttributeError(name)
