"""Write traces and per-run scalars/text into a TensorBoard logdir.

Layout (``torch.profiler.tensorboard_trace_handler``, torch/profiler/profiler.py)::

    <logdir>/<run>/<worker>.<time_ns>.pt.trace.json[.gz]
    <logdir>/<run>/events.out.tfevents.<...>          (tensorboard.summary.writer.EventFileWriter)

Traces are never re-encoded when they come from a Kineto file: the source bytes are
copied as they are (gzip stays gzip). Nothing is ever overwritten: files are created
with ``O_EXCL`` and a clash moves the timestamp on by 1 ns.

Scalars and text use TensorBoard's own TF-free writer stack (``EventFileWriter`` +
the scalar and text plugins' ``*_pb`` summary builders), so TensorFlow is not needed.
Each group of tags is written only when its analysis applies to the trace; ``WrittenRun.skipped``
says why a group was left out. The Markdown of the text tags comes from ``nbprof.results.tensorboard``.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from typing import Any

from ..analysis.advisor import advise
from ..analysis.memory import memory_peak
from ..analysis.operators import operator_summary
from ..analysis.steps import step_breakdown
from ..analysis.utilization import gpu_utilization
from ..errors import EmptyProfileError, NbprofError
from ..results.tensorboard import findings_markdown, md_escape, operators_markdown, summary_markdown
from ..trace.iterations import step_source
from ..trace.model import Trace

__all__ = ["WrittenRun", "write_run", "write_trace", "write_scalars", "md_escape", "TAG_PREFIX", "STEP_CATEGORIES"]

TAG_PREFIX = "nbprof"

#: step-breakdown columns (``nbprof.analysis.steps.step_breakdown``) written as scalars, in display order
STEP_CATEGORIES = (
    "kernel",
    "memcpy",
    "memset",
    "communication",
    "runtime",
    "dataloader",
    "cpu_exec",
    "other",
)

_RUN_BAD = re.compile(r"(^|[\\/])\.\.([\\/]|$)")
_WORKER_OK = re.compile(r"^[A-Za-z0-9_\-]+$")


@dataclass
class WrittenRun:
    """What ``write_run`` / ``write_trace`` / ``write_scalars`` wrote.

    Attributes
    ----------
    logdir, run : str
    run_dir : str
        ``<logdir>/<run>``.
    worker : str or None
    trace_path : str or None
        The ``<worker>.<time_ns>.pt.trace.json[.gz]`` file written (None when only scalars were written).
    events_path : str or None
        The ``events.out.tfevents.*`` file written (None when scalars were not written).
    scalar_tags : list of str
    text_tags : list of str
    skipped : dict
        Tag group -> reason it was not written (analysis missing, no steps, no device...).
    """

    logdir: str
    run: str
    run_dir: str
    worker: str | None = None
    trace_path: str | None = None
    events_path: str | None = None
    scalar_tags: list[str] = field(default_factory=list)
    text_tags: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"<WrittenRun {self.run!r} in {self.logdir}: trace={os.path.basename(self.trace_path or '-')}, "
            f"{len(self.scalar_tags)} scalar tags, {len(self.text_tags)} text tags, skipped={sorted(self.skipped)}>"
        )


# --------------------------------------------------------------------------- paths


def _run_dir(logdir: str | os.PathLike[str], run: str) -> str:
    if not isinstance(run, str) or not run.strip() or os.path.isabs(run) or _RUN_BAD.search(run):
        msg = f"run name {run!r} must be a relative directory name inside the logdir (no '..', not absolute)"
        raise ValueError(msg)
    d = os.path.join(os.fspath(logdir), run)
    os.makedirs(d, exist_ok=True)
    return d


def _check_worker(worker: str) -> str:
    # the plugin's WORKER_PATTERN is ``^(.*?)(\.\d+)?\.pt\.trace\.json``: a '.' in the worker name would
    # shift the span; a path separator would leave the run directory.
    if not _WORKER_OK.match(worker):
        msg = f"worker name {worker!r} may only hold letters, digits, '_' and '-' (the plugin splits on '.')"
        raise ValueError(msg)
    return worker


def _create_exclusive(run_dir: str, worker: str, suffix: str, ts_ns: int | None = None) -> tuple[str, int]:
    """Create ``<run_dir>/<worker>.<ts>.<suffix>`` exclusively (never overwrite); return (path, fd)."""
    ts = time.time_ns() if ts_ns is None else int(ts_ns)
    for _ in range(1000):
        path = os.path.join(run_dir, f"{worker}.{ts}{suffix}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            ts += 1
            continue
        return path, fd
    msg = f"could not find a free file name for worker {worker!r} in {run_dir}"
    raise NbprofError(msg)


def _default_worker(trace: Trace | None, src: str | None) -> str:
    from .read import TRACE_FILE_PATTERN

    if src:
        m = TRACE_FILE_PATTERN.match(os.path.basename(src))
        if m and m.group(1) and _WORKER_OK.match(m.group(1)):
            return m.group(1)
    rank = trace.meta.rank if trace is not None else 0
    return f"worker{rank}"


# --------------------------------------------------------------------------- traces


def write_trace(
    trace_or_path: Trace | str | os.PathLike[str] | Any,
    logdir: str | os.PathLike[str],
    run: str,
    worker: str | None = None,
    *,
    timestamp_ns: int | None = None,
) -> WrittenRun:
    """Put one trace into ``<logdir>/<run>/<worker>.<time_ns>.pt.trace.json[.gz]``.

    Parameters
    ----------
    trace_or_path : Trace, path, or torch.profiler.profile
        A Kineto trace file (copied byte for byte; ``.gz`` stays compressed), a ``Trace``
        loaded from a Kineto file (its source file is copied byte for byte), or a finished
        ``torch.profiler.profile`` (exported with ``export_chrome_trace``, as
        ``tensorboard_trace_handler`` does).
    logdir : path
        TensorBoard log directory (created when missing).
    run : str
        Run name: a relative directory inside ``logdir`` (may contain ``/``).
    worker : str, optional
        Worker name; default: the worker part of the source file name when it follows the
        ``<worker>.<ts>.pt.trace.json`` pattern, else ``worker<rank>``.
    timestamp_ns : int, optional
        The span timestamp in the file name (default ``time.time_ns()``, as torch does).
        The plugin numbers a worker's spans 1..n in the string order of these timestamps.

    Returns
    -------
    WrittenRun
        With ``trace_path`` set.

    Raises
    ------
    ValueError
        Bad run or worker name; a ``Trace`` not loaded from a Kineto JSON file.
    FileNotFoundError
        The source file is gone.
    """
    trace: Trace | None = None
    src: str | None = None
    if isinstance(trace_or_path, Trace):
        trace = trace_or_path
        src = trace.meta.source_path or None
        if trace.meta.source_format != "kineto" or not src:
            msg = (
                f"write_trace copies the Kineto file a Trace was loaded from; this Trace comes from "
                f"{trace.meta.source_format or 'an unknown source'} ({src or 'no file'}), which the "
                "TensorBoard profiler layout cannot hold losslessly. Write its scalars with write_scalars()."
            )
            raise ValueError(msg)
    elif hasattr(trace_or_path, "export_chrome_trace"):
        prof = trace_or_path
        w = _check_worker(worker or "worker0")
        rd = _run_dir(logdir, run)
        path, fd = _create_exclusive(rd, w, ".pt.trace.json", timestamp_ns)
        os.close(fd)
        prof.export_chrome_trace(path)  # the exclusive create reserved the name; torch writes into it
        return WrittenRun(os.fspath(logdir), run, rd, w, trace_path=path)
    else:
        src = os.fspath(trace_or_path)
    if not os.path.exists(src):
        msg = f"no such trace file: {src!r}"
        raise FileNotFoundError(msg)
    w = _check_worker(worker or _default_worker(trace, src))
    rd = _run_dir(logdir, run)
    with open(src, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    path, fd = _create_exclusive(rd, w, ".pt.trace.json.gz" if gz else ".pt.trace.json", timestamp_ns)
    with open(src, "rb") as fin, os.fdopen(fd, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return WrittenRun(os.fspath(logdir), run, rd, w, trace_path=path)


# --------------------------------------------------------------------------- scalars


class _Events:
    """Thin wrapper over TensorBoard's TF-free ``EventFileWriter`` and the plugins' summary builders."""

    def __init__(self, run_dir: str) -> None:
        try:
            from tensorboard.compat.proto import event_pb2
            from tensorboard.plugins.scalar.summary_v2 import scalar_pb
            from tensorboard.plugins.text.summary_v2 import text_pb
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError as exc:
            from .._deps import missing

            raise missing("tensorboard", "tensorboard", "writing TensorBoard scalars", exc) from exc
        self._event_pb2, self._scalar_pb, self._text_pb = event_pb2, scalar_pb, text_pb
        self._w = EventFileWriter(run_dir, filename_suffix=".nbprof")
        self.path: str = self._w._file_name  # the writer exposes no getter for it
        self.scalar_tags: list[str] = []
        self.text_tags: list[str] = []
        self._described: set[str] = set()
        self.wall_time = time.time()

    def scalar(self, tag: str, value: float, step: int, description: str) -> None:
        desc = description if tag not in self._described else None
        self._described.add(tag)
        ev = self._event_pb2.Event(
            wall_time=self.wall_time, step=int(step), summary=self._scalar_pb(tag, float(value), description=desc)
        )
        self._w.add_event(ev)
        if tag not in self.scalar_tags:
            self.scalar_tags.append(tag)

    def text(self, tag: str, markdown: str, step: int, description: str) -> None:
        ev = self._event_pb2.Event(
            wall_time=self.wall_time, step=int(step), summary=self._text_pb(tag, markdown, description=description)
        )
        self._w.add_event(ev)
        if tag not in self.text_tags:
            self.text_tags.append(tag)

    def close(self) -> None:
        self._w.close()


def _device_label(dev: int, device_type: int | None = None) -> str:
    # Kineto/c10 DeviceType: 0 = CPU, 1 = CUDA; device -1 = host rows
    if int(dev) < 0 or device_type == 0:
        return "cpu"
    return f"device{int(dev)}"


def write_scalars(
    trace: Trace,
    logdir: str | os.PathLike[str],
    run: str,
    *,
    top_operators: int = 15,
    written: WrittenRun | None = None,
) -> WrittenRun:
    """Write nbprof's per-run scalars and text for ``trace`` into ``<logdir>/<run>/events.out.tfevents.*``.

    Tags (all under ``nbprof/``; the scalar step is the step number where the value is per step -- the ``N`` of
    ``ProfilerStep#N``, else the detected iteration's, :func:`nbprof.trace.iterations.step_source` -- else 0):

    ``nbprof/step_time_ms``
        Per step: ``step_ns`` of ``nbprof.analysis.steps.step_breakdown`` (torch-tb-profiler Overview semantics).
    ``nbprof/step_breakdown/<category>_ms``
        Per step: ``kernel, memcpy, memset, communication, runtime, dataloader, cpu_exec, other``
        (``<category>_ns`` columns of the same frame), so runs compare category by category.
    ``nbprof/gpu_utilization/device<N>``
        ``utilization_ratio`` of ``nbprof.analysis.utilization.gpu_utilization`` (busy / span); only for
        traces with device activity.
    ``nbprof/memory_peak/<device>_mib``
        Peak allocated memory per device (``nbprof.analysis.memory.memory_peak``), MiB (2**20 bytes).
    ``nbprof/top_operators`` (text)
        Markdown table of ``nbprof.analysis.operators.operator_summary``, top ``top_operators`` rows.
    ``nbprof/advisor`` (text)
        Markdown table of ``nbprof.analysis.advisor.advise`` findings.
    ``nbprof/summary`` (text)
        Source file, producer, rank, events, steps, duration, devices, load report.

    A group whose analysis does not apply (no steps: no ``ProfilerStep#N`` and nothing repeats, no device,
    no ``[memory]`` events, ``EmptyProfileError`` from the analysis), is skipped and the reason recorded
    in ``WrittenRun.skipped``; any other exception from an analysis propagates.

    Parameters
    ----------
    trace : Trace
    logdir : path
    run : str
        Run name (relative directory in ``logdir``).
    top_operators : int, default 15
    written : WrittenRun, optional
        A result of ``write_trace`` to complete (used by ``write_run``).

    Returns
    -------
    WrittenRun
        ``events_path``, ``scalar_tags``, ``text_tags`` and ``skipped`` filled in.

    Raises
    ------
    MissingDependencyError
        When the ``tensorboard`` package is not installed.
    """
    rd = _run_dir(logdir, run)
    out = written or WrittenRun(os.fspath(logdir), run, rd)
    ev = _Events(rd)
    out.events_path = ev.path
    groups = [
        ("step_breakdown", _write_steps),
        ("gpu_utilization", _write_gpu_utilization),
        ("memory_peak", _write_memory_peak),
        ("top_operators", lambda t, e: _write_top_operators(t, e, top_operators)),
        ("advisor", _write_advisor),
    ]
    try:
        for group, fn in groups:
            try:
                reason = fn(trace, ev)
            except EmptyProfileError as exc:  # the analysis found nothing of the kind it needs
                reason = f"{type(exc).__name__}: {exc}"
            if reason:
                out.skipped[group] = reason
        ev.text(
            f"{TAG_PREFIX}/summary", summary_markdown(trace, out.trace_path), 0, "What this run's trace holds (Trace.summary())."
        )
    finally:
        ev.close()
    out.scalar_tags, out.text_tags = ev.scalar_tags, ev.text_tags
    return out


# Each group writer returns None when it wrote its tags, else the reason it did not.


def _write_steps(trace: Trace, ev: _Events) -> str | None:
    src = step_source(trace)
    if src.source == "whole_trace":  # one window, not steps: nothing per step to plot
        return f"no steps ({src.note})"
    df = step_breakdown(trace)
    if df is None or len(df) == 0:
        return "step_breakdown returned no steps"
    for _, r in df.iterrows():
        st = int(r["step"])
        ev.scalar(
            f"{TAG_PREFIX}/step_time_ms",
            r["step_ns"] / 1e6,
            st,
            f"Step time (ms) per step (steps from {src.source}): nbprof.analysis.steps.step_breakdown `step_ns`.",
        )
        for cat in STEP_CATEGORIES:
            col = f"{cat}_ns"
            if col in df.columns:
                ev.scalar(
                    f"{TAG_PREFIX}/step_breakdown/{cat}_ms",
                    r[col] / 1e6,
                    st,
                    f"Time of step spent in `{cat}` (ms), torch-tb-profiler Overview step-breakdown "
                    "semantics (nbprof.analysis.steps.step_breakdown).",
                )
    return None


def _write_gpu_utilization(trace: Trace, ev: _Events) -> str | None:
    if not trace.has_device:
        return "no device (GPU) activity in the trace"
    df = gpu_utilization(trace)
    if df.empty:
        return "gpu_utilization returned no devices"
    for _, r in df.iterrows():
        ev.scalar(
            f"{TAG_PREFIX}/gpu_utilization/{_device_label(r['device'])}",
            r["utilization_ratio"],
            0,
            "GPU busy time / profiled span (ratio 0..1), nbprof.analysis.utilization.gpu_utilization.",
        )
    return None


def _write_memory_peak(trace: Trace, ev: _Events) -> str | None:
    if trace.memory.empty:
        return "no [memory] events (profile_memory was off)"
    df = memory_peak(trace)
    if df.empty or "peak_allocated_bytes" not in df.columns:
        return f"memory_peak returned no peak (columns: {list(df.columns)})"
    for _, r in df.iterrows():
        ev.scalar(
            f"{TAG_PREFIX}/memory_peak/{_device_label(r['device'], r.get('device_type'))}_mib",
            float(r["peak_allocated_bytes"]) / 2**20,
            0,
            "Peak allocated memory (MiB = 2^20 bytes), nbprof.analysis.memory.memory_peak `peak_allocated_bytes`.",
        )
    return None


def _write_top_operators(trace: Trace, ev: _Events, top: int) -> str | None:
    df = operator_summary(trace)
    if df.empty:
        return "no operators (cpu_op events) in the trace"
    ev.text(
        f"{TAG_PREFIX}/top_operators",
        operators_markdown(df, top),
        0,
        "Top operators by total host time (nbprof.analysis.operators.operator_summary).",
    )
    return None


def _write_advisor(trace: Trace, ev: _Events) -> str | None:
    ev.text(
        f"{TAG_PREFIX}/advisor",
        findings_markdown(list(advise(trace))),
        0,
        "nbprof advisor findings (nbprof.analysis.advisor.advise).",
    )
    return None


def write_run(
    trace_or_path: Trace | str | os.PathLike[str] | Any,
    logdir: str | os.PathLike[str],
    run: str,
    worker: str | None = None,
    *,
    scalars: bool = True,
    top_operators: int = 15,
) -> WrittenRun:
    """Write a trace and its scalars/text as one TensorBoard run (the ``--tensorboard LOGDIR`` integration point).

    Equivalent to ``write_trace`` followed by ``write_scalars`` on the loaded trace. A ``Trace`` from
    another source than a Kineto file (e.g. Nsight Systems) gets its scalars and text only
    (``skipped["trace"]`` says so): the profiler layout cannot hold it losslessly.

    Parameters
    ----------
    trace_or_path : Trace, path, or torch.profiler.profile
        See ``write_trace``. A path or profiler is loaded with ``nbprof.load`` for the scalars.
    logdir : path
    run : str
    worker : str, optional
    scalars : bool, default True
        Also write ``nbprof/*`` scalars and text (see ``write_scalars``).
    top_operators : int, default 15

    Returns
    -------
    WrittenRun

    Raises
    ------
    ValueError, FileNotFoundError
        See ``write_trace``.
    TraceFormatError
        When the trace cannot be loaded for the scalars (the trace file stays written).
    """
    if isinstance(trace_or_path, Trace) and (
        trace_or_path.meta.source_format != "kineto" or not trace_or_path.meta.source_path
    ):
        # e.g. an Nsight Systems trace: the profiler layout cannot hold it losslessly, the scalars still apply
        written = WrittenRun(os.fspath(logdir), run, _run_dir(logdir, run), worker)
        written.skipped["trace"] = (
            f"a {trace_or_path.meta.source_format or 'non-Kineto'} trace has no Kineto file to copy; "
            "only the scalars and text were written"
        )
    else:
        written = write_trace(trace_or_path, logdir, run, worker)
    if scalars:
        if isinstance(trace_or_path, Trace):
            trace = trace_or_path
        else:
            from ..sources import load

            src = written.trace_path if hasattr(trace_or_path, "export_chrome_trace") else os.fspath(trace_or_path)
            if src is None:
                raise NbprofError("the profiler wrote no trace file to load")
            trace = load(src)
        write_scalars(trace, logdir, run, top_operators=top_operators, written=written)
    return written
