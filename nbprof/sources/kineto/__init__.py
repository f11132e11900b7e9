"""PyTorch profiler / Kineto Chrome-trace JSON -> ``Trace``.

Format facts (``libkineto/src/output_json.cpp``; ../shared/notes/formats.md §4.1-4.3):

- top level is an object with ``traceEvents`` plus metadata keys in any order
  (``schemaVersion``, ``deviceProperties``, ``distributedInfo``, ``baseTimeNanoseconds``,
  ``displayTimeUnit``, ``traceName``...), or (legacy autograd profiler) a bare array of events;
- ``ts``/``dur`` are µs with 3 decimals relative to ``baseTimeNanoseconds``
  (old traces: absolute µs; ``displayTimeUnit: "ns"`` traces from HTA's ns-resolution
  fixture still write µs, the unit only tells the viewer how to display);
- CPU events: pid/tid are OS ids; device events: pid = device, tid = stream.

Speed and memory
----------------
Decoding is typed and column-selective. One msgspec pass (cyclic GC paused) decodes every event
into a ``gc=False`` Struct of the top-level fields (``_Event``; the phase as a ``Literal`` of the
Trace Event Format phases, so its str objects are shared) with ``args`` left as ``msgspec.Raw``;
the metadata around ``traceEvents`` is read without parsing the events. The ``args`` are then
decoded per category group, all of a group's args joined into one array and decoded into a small
Struct holding only the keys that group carries (host ops: shapes/stack/sequence/collective;
runtime calls: correlation and ROCm launch geometry; device ops: device/stream/grid/block/...;
``[memory]``: bytes/totals/device/address; ``python_function`` args are never decoded). Columns
come from ``np.fromiter(map(attrgetter(field), structs))`` (no intermediate list) or list
comprehensions compiled per field name; a key present in no event of a group costs one
``list.count``; subsets are taken with ``itertools.compress``; categoricals are coded by one
dict lookup per value (a new value takes the next code in ``__missing__``).

Large traces (events arrays of 64 MB or more, Linux, two usable CPUs) are decoded and extracted
in two processes: the array is cut at event boundaries into sixteen runs, which this process
and a forked child (in its copy-on-write pages) take one at a time from a queue, so files whose
regions differ in cost per byte leave neither idle; each run is decoded in place (its bounding
commas turned into ``[``/``]``, restored afterwards: no copy of the bytes). Each run sorts its
rows by time, the child's columns come back through shared memory (pickle protocol 5
out-of-band buffers), and the sorted runs are merged by one stable sort. A run that needs any
repair or report entry sends the whole file through the one-process path, which reports with
whole-file offsets; results are identical either way (tested). ``NBPROF_LOAD_PROCESSES=1`` keeps
every load in one process. The decoded objects are freed before the events table is assembled,
which keeps the peak memory near that of the decode. Measured numbers: ``benchmarks/README.md``.

Time precision
--------------
Times become int64 ns. ``ts`` is decoded as float64 µs, which is exact to well below 1 ns for
values under 2**43 µs (101 days) when the integer µs are split off before rounding
(``_us_to_ns``): all current traces, whose ``ts`` are relative to ``baseTimeNanoseconds``. Old traces write
absolute µs since the epoch (~1.7e15), where float64
steps are 0.25 µs; when such values carry a fraction (``1712195495519689.047``) the ``ts``
texts are decoded a second time as raw bytes and converted to ns with integer arithmetic, so
no nanosecond is lost. ``dur`` stays float64 µs (values are small, exact to the ns).

Tolerance
---------
When the fast decode fails, ``_tolerant_decode`` walks the events array: it decodes the good
events in bulk, isolates each bad event between event boundaries, repairs it (NaN/Infinity/inf
tokens -> null, raw control characters escaped, unescaped quotes inside string values escaped;
invalid UTF-8 is replaced with U+FFFD before) or drops it, and reports every repair or drop with
its count and first byte offset in ``Trace.report``. A truncated file (job killed while writing)
keeps every complete event. An element of ``traceEvents`` that is not an event (``1``, ``null``,
``[]``, ``"x"``) is dropped alone (``not_an_event``), in linear time wherever it is; nesting too
deep to decode drops its event; a UTF-8 byte order mark is read as whitespace (``utf8_bom``);
bytes after the JSON document are ignored (``trailing_bytes``). Numbers written as strings are
read by one rule (``columns``: noted), non-numeric string ids and ids beyond 64 bits get their own
stable ids (reported with the mapping); events whose ``ts`` is more than a day from the trace's
median (``"ts": 0`` in absolute-µs traces, kineto#109) leave every table (``ts_outlier``).
``strict=True`` raises ``TraceFormatError(path, offset, reason)`` on the first defect instead
(assumptions such as "rank assumed 0" never raise). Only ``nbprof.errors`` exceptions escape.

Modules
-------
``reading`` (files, gzip, mmap), ``structs`` (typed msgspec event structs, decoders), ``context``
(per-load state, report/strict), ``decode`` (whole-file decode), ``repair`` (tolerant decode),
``args`` (args keys, structs and columns per category group), ``columns`` (arrays and
categoricals from structs), ``side_tables`` (flows, memory, counters, threads), ``extract`` (one
run of events -> ``_Part``), ``times`` (µs -> exact ns, origin), ``meta`` (``TraceMeta``),
``finish`` (parts -> ``Trace``), ``parallel`` (the two-process path). What a step is lives in
``nbprof.trace.steps``.
"""

from __future__ import annotations

import mmap
import os
from typing import Any

from ...errors import TraceFormatError
from ...trace.model import LoadReport, Trace
from .context import _Ctx, _gc_paused
from .decode import _decode, _split_top, _trailing_bytes
from .extract import _extract
from .finish import _finish
from .meta import rank_from_filename
from .parallel import _EVENT_BOUNDARY, _parallel_extract, _parallel_ok
from .reading import _first_char, _read_buffer, read_bytes

__all__ = ["load_kineto", "read_bytes", "rank_from_filename"]

# ``_EVENT_BOUNDARY`` and ``_split_top`` are here for the tests; ``load_kineto`` looks ``_read_buffer``
# and ``_parallel_extract`` up in this namespace, so tests may replace them on this package (other
# names where they are used: e.g. ``reading._POPULATE_MIN_BYTES``).
_FOR_TESTS = (_EVENT_BOUNDARY, _split_top)


def load_kineto(
    path: str | os.PathLike[str],
    *,
    strict: bool = False,
    rank: int | None = None,
    data: bytes | None = None,
) -> Trace:
    """Load a PyTorch profiler / Kineto Chrome-trace JSON file (``.json`` or ``.json.gz``).

    Parameters
    ----------
    path : str or PathLike
        The trace file (``*.pt.trace.json[.gz]``, ``*.json[.gz]``); object form with
        ``traceEvents`` (metadata keys in any order) or the legacy bare array of events.
    strict : bool, default False
        Raise ``TraceFormatError`` instead of repairing or dropping anything (NaN tokens,
        control characters, unescaped quotes, invalid UTF-8, truncation, a UTF-8 byte order
        mark, bytes after the JSON document, elements of ``traceEvents`` that are not events,
        nesting too deep to decode, integers above 64 bits, non-numeric ids, timestamps far
        outside the trace, negative durations). Assumptions that need no repair ("rank assumed
        0", "no ProfilerStep", numbers written as strings) are only noted in the report.
    rank : int, optional
        Override the rank (otherwise from ``distributedInfo``, else the file name, else 0).
    data : bytes, optional
        The (decompressed) file content, when already in memory (then always one process).

    Returns
    -------
    Trace
        Tables in int64 ns relative to the first event (``meta.origin_ns`` is the absolute
        origin: ``baseTimeNanoseconds`` + first ``ts``, or the absolute µs of old traces);
        see ``nbprof.trace.schema``. ``Trace.report`` lists every repair, drop and assumption
        with counts and byte offsets.

    Raises
    ------
    FileNotFoundError
        When the file does not exist.
    TraceFormatError
        When the file is empty, holds no events, is not a JSON trace, or (strict mode) on the
        first defect, with ``path``, byte ``offset`` and ``reason``.

    Notes
    -----
    Events arrays of 64 MB or more are decoded by this process and a forked child, which share
    the array's runs (Linux, two usable CPUs; module docstring); set ``NBPROF_LOAD_PROCESSES=1`` to keep
    the load in one process. The result is the same.
    """
    spath = os.fspath(path)
    report = LoadReport(path=spath)
    buf: bytes | bytearray | mmap.mmap = _read_buffer(spath, report) if data is None else data
    if strict and not report.clean:
        raise TraceFormatError(spath, report.issues[0].offset, report.issues[0].message)
    if buf[:3] == _BOM:  # read as whitespace: every byte offset stays the file's
        if strict:
            raise TraceFormatError(spath, 0, "the file starts with a UTF-8 byte order mark (EF BB BF), which JSON does not allow")
        if not isinstance(buf, (bytearray, mmap.mmap)):
            buf = bytearray(buf)
        buf[:3] = b"   "
        report.add("utf8_bom", "repaired", 1,
                   "1 UTF-8 byte order mark (EF BB BF) at the start of the file: read as whitespace", offset=0)
    if not _first_char(buf):
        raise TraceFormatError(spath, 0, "file is empty (0 bytes of JSON): no trace was written")
    try:
        return _load(spath, buf, report, strict, rank)
    except RecursionError as exc:  # a decode this module does not guard: never let it escape
        raise TraceFormatError(spath, None, f"JSON nested too deeply to decode ({exc})") from exc


_BOM = b"\xef\xbb\xbf"


def _load(spath: str, data: Any, report: LoadReport, strict: bool, rank: int | None) -> Trace:
    """``load_kineto`` once the bytes are read: decode (one or two processes), extract, finish."""
    with _gc_paused():
        ctx = _Ctx(spath, report, strict, data)
        quick = _split_top(data) if _first_char(data) == b"{" else None
        parts = None
        if quick is not None and not strict and _parallel_ok(data, quick):
            parts = _parallel_extract(data, ctx, quick[0], quick[1])
        if parts is not None and quick is not None:  # (parts only come from a located span)
            ctx.array_start, meta, exact_ts = quick[0], dict(quick[2]), None
        else:
            events, meta, exact_ts = _decode(data, ctx, quick)
        if quick is not None and (parts is not None or ctx.quick_ok):  # the events span decoded: its end is right
            _trailing_bytes(data, quick[1], ctx)
        if parts is None:
            holder = [events]  # _extract frees the decoded events half-way; hold no other reference
            del events
            parts = [_extract(holder, ctx)]
        data = quick = None
        ctx.release()
        trace = _finish(parts, meta, ctx, rank, exact_ts)
    return trace
