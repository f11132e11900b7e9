"""One exception hierarchy for nbprof, and the error policy.

Policy (every module follows it; ``tests/test_contracts.py`` checks the hierarchy):

- Only nbprof errors escape nbprof on purpose: every class here subclasses :class:`NbprofError` and the
  builtin a caller would catch (``ValueError``, ``FileNotFoundError``, ``ModuleNotFoundError``,
  ``RuntimeError``), so ``except ValueError`` keeps working. All of them live in this module.
- A user's exception (raised in a profiled function, a workload, a trainer callback) is re-raised as it is,
  never wrapped or swallowed.
- Loading keeps every sound event. By default a loader repairs or drops what it must and lists each repair,
  drop and assumption in the load report (``trace.report``); there is no warning for them (the report is the
  one channel). ``strict=True`` raises :class:`TraceFormatError` where tolerant mode would report. A file that
  cannot be read at all is a :class:`TraceFormatError` carrying the ``path`` and where in it the problem
  sits (``offset`` = byte offset for JSON, ``table`` for SQLite) as attributes, not only in the message.
- A missing optional package is a :class:`MissingDependencyError` naming the pip extra.
- An analysis asked about events the trace lacks returns an empty frame (a kernel summary of a CPU-only
  profile); :class:`EmptyProfileError` only when it cannot answer at all (no events).
- Errors keep their attributes through pickling (multiprocessing, Dask).
- Warnings (:class:`NbprofWarning`) only ask the user to change a setting (e.g. a DeepSpeed config section
  nbprof translated); the CLI maps bad input (a format error, a missing package, :class:`ReportInputError`)
  to exit 2 and a failed run (:class:`ReportError`, :class:`CaptureError`) to exit 3.
"""

from __future__ import annotations

__all__ = [
    "NbprofError",
    "TraceFormatError",
    "TraceFileNotFoundError",
    "SchemaError",
    "EmptyProfileError",
    "CaptureError",
    "MissingDependencyError",
    "ReportError",
    "ReportInputError",
    "TensorBoardStartError",
    "NbprofWarning",
]


class NbprofError(Exception):
    """Base class of every error nbprof raises on purpose.

    Examples
    --------
    >>> try:
    ...     raise EmptyProfileError("no events")
    ... except NbprofError as err:
    ...     print(type(err).__name__)
    EmptyProfileError
    """


class TraceFormatError(NbprofError, ValueError):
    """Raised when a trace file cannot be read (or, in strict mode, needs repair).

    Attributes
    ----------
    path : str
        The file.
    offset : int or None
        Byte offset in the (decompressed) file where the problem starts.
    reason : str
        What was found and what was expected.
    table : str or None
        For SQLite sources, the table concerned.
    event_index : int or None
        Index of the offending event in ``traceEvents`` when known.

    Examples
    --------
    >>> err = TraceFormatError("t.json", 120, "invalid character")
    >>> err.offset
    120
    """

    def __init__(
        self,
        path: str,
        offset: int | None,
        reason: str,
        *,
        table: str | None = None,
        event_index: int | None = None,
    ) -> None:
        self.path = str(path)
        self.offset = offset
        self.reason = reason
        self.table = table
        self.event_index = event_index
        where = []
        if offset is not None:
            where.append(f"byte {offset}")
        if table is not None:
            where.append(f"table {table}")
        if event_index is not None:
            where.append(f"event #{event_index}")
        loc = f" at {', '.join(where)}" if where else ""
        super().__init__(f"{self.path}{loc}: {reason}")

    def __reduce__(self):  # keep attributes through pickling (multiprocessing, Dask)
        return (
            _rebuild_trace_format_error,
            (self.path, self.offset, self.reason, self.table, self.event_index),
        )


def _rebuild_trace_format_error(path, offset, reason, table, event_index):
    return TraceFormatError(path, offset, reason, table=table, event_index=event_index)


class TraceFileNotFoundError(NbprofError, FileNotFoundError):
    """Raised when a trace, report or log file to be read does not exist.

    Also a ``FileNotFoundError`` (``errno``, ``filename`` set), so ``except FileNotFoundError`` and
    ``except OSError`` keep working.

    Examples
    --------
    >>> import errno
    >>> err = TraceFileNotFoundError(errno.ENOENT, "no such trace file", "run.json")
    >>> isinstance(err, FileNotFoundError), err.filename, str(err)
    (True, 'run.json', "[Errno 2] no such trace file: 'run.json'")
    """


class SchemaError(NbprofError, ValueError):
    """Raised when a table does not match the trace schema (a bug in a source).

    Examples
    --------
    >>> SchemaError("events.ts_ns: dtype float64, expected int64")
    SchemaError('events.ts_ns: dtype float64, expected int64')
    """


class EmptyProfileError(NbprofError, ValueError):
    """Raised when an analysis needs events of a kind the trace does not hold.

    A kernel summary asked for on a CPU-only profile is *not* an error (it
    returns an empty frame); a step breakdown on a trace with no events at all is.

    Examples
    --------
    >>> EmptyProfileError("the trace holds no events")
    EmptyProfileError('the trace holds no events')
    """


class CaptureError(NbprofError, RuntimeError):
    """Raised when running a profiler (torch.profiler, nsys) fails.

    Examples
    --------
    >>> CaptureError("torch.profiler could not start: RuntimeError: ...")
    CaptureError('torch.profiler could not start: RuntimeError: ...')
    """


class MissingDependencyError(NbprofError, ModuleNotFoundError):
    """Raised when an optional package is needed; the message names the pip extra.

    Also a ``ModuleNotFoundError``, so ``except ImportError`` keeps working.

    Examples
    --------
    >>> err = MissingDependencyError("profiling needs PyTorch; hint: pip install 'nbprof[torch]'", name="torch")
    >>> isinstance(err, ModuleNotFoundError), err.name
    (True, 'torch')
    """


class ReportError(NbprofError, RuntimeError):
    """Raised when a report notebook (or the profiled workload) fails.

    Attributes
    ----------
    notebook : str or None
        The executed notebook with the error, kept for inspection (None when no notebook ran).

    Examples
    --------
    >>> err = ReportError("02_operators_pytorch.ipynb failed", notebook="out/02_operators_pytorch.ipynb")
    >>> err.notebook
    'out/02_operators_pytorch.ipynb'
    """

    def __init__(self, msg: str, notebook: str | None = None) -> None:
        super().__init__(msg)
        self.notebook = notebook


class ReportInputError(ReportError):
    """Raised when a given input is not a trace nbprof can read (a folder, a missing file, an unknown format),
    before anything runs: a bad input (``nbprof report`` exits 2), not a failed run (exit 3)."""


class TensorBoardStartError(NbprofError, RuntimeError):
    """Raised when TensorBoard could not be started (port taken, exited early, not ready in time).

    Attributes
    ----------
    port : int or None
    stderr : str
        The last lines TensorBoard wrote to stderr (may be empty).

    Examples
    --------
    >>> err = TensorBoardStartError("port 6006 is taken", port=6006)
    >>> err.port
    6006
    """

    def __init__(self, message: str, *, port: int | None = None, stderr: str = "") -> None:
        self.port = port
        self.stderr = stderr
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        super().__init__(message + (f"\n--- tensorboard stderr (last lines) ---\n{tail}" if tail else ""))


class NbprofWarning(UserWarning):
    """Base class of nbprof's warnings (``warnings.simplefilter("error", NbprofWarning)`` makes them errors)."""
