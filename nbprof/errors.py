"""One exception hierarchy for nbprof.

Every loader error carries the ``path`` of the file and where in it the
problem sits (``offset`` = byte offset for JSON, ``table`` for SQLite), as
attributes and not only in the message, so callers can act on them.
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
    "NbprofWarning",
    "LoadRepairWarning",
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


class NbprofWarning(UserWarning):
    """Base class of nbprof's warnings (``warnings.simplefilter("error", NbprofWarning)`` makes them errors)."""


class LoadRepairWarning(NbprofWarning):
    """Issued when a loader repaired or dropped something (see ``Trace.report``).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("t.json: truncated at byte 80", LoadRepairWarning)
    >>> caught[0].category.__name__
    'LoadRepairWarning'
    """
