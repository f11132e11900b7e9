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
(``_us_to_ns``): all current traces, whose ``ts`` are relative to ``baseTimeNanoseconds``. Old traces write absolute µs since the epoch (~1.7e15), where float64
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
keeps every complete event. ``strict=True`` raises ``TraceFormatError(path, offset, reason)``
on the first defect instead (assumptions such as "rank assumed 0" never raise).
"""

from __future__ import annotations

import gc
import gzip
import mmap
import os
import pickle
import re
import signal
import sys
import threading
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any, Literal

import msgspec
import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..trace import schema
from ..trace.model import LoadReport, Trace, TraceMeta

__all__ = ["load_kineto", "read_bytes", "rank_from_filename"]

# --------------------------------------------------------------------------- typed decode

_EMPTY_RAW = msgspec.Raw()
_EMPTY_OBJ = msgspec.Raw(b"{}")
_Int = int | str | None
_Num = int | float | str | None
_NAN = float("nan")


# Every phase of the Trace Event Format (Google's "Trace Event Format" document): decoded as one
# shared str object each, which makes the phase column cheap to code. Another value makes the
# decode fall back to ``_LooseEvent`` (any string), whose phase is reported as unsupported.
_Phase = Literal["X", "B", "E", "i", "I", "C", "b", "n", "e", "s", "t", "f", "S", "T", "p", "F", "P",
                 "N", "O", "D", "M", "V", "v", "R", "c", "(", ")", ""]


class _Event(msgspec.Struct, gc=False):
    """One trace event, ``args`` left undecoded: they are decoded per category group (``_ARG_STRUCTS``)."""

    ph: _Phase = ""  # no "ph": reported as an unsupported phase
    cat: str | None = None
    name: str | int | float | None = ""
    pid: int | str | None = -1
    tid: int | str | None = -1
    ts: float | None = None
    dur: float | None = None
    id: int | float | str | None = None
    s: str | None = None
    args: msgspec.Raw = _EMPTY_OBJ


class _LooseEvent(_Event, gc=False):
    """The same event with any phase string and string-typed ``ts``/``dur`` allowed (reported and
    converted by ``_to_float``)."""

    ph: str = ""
    ts: float | str | None = None
    dur: float | str | None = None


# The ``args`` keys nbprof keeps: attribute -> (JSON key, type, default). Which keys a category
# carries (formats.md §4.2): host ops (cpu_op, user_annotation, old ``Operator``): External id,
# Sequence number, Fwd thread id, Input Dims/type, Call stack, Module Hierarchy, flops, collective
# fields (record_param_comms); runtime calls: External id, correlation (ROCm's hipLaunchKernel also
# grid/block/shared memory; Triton launches a "grid" string); device ops: External id, correlation,
# device, stream, bytes, grid, block, registers, shared memory, occupancy, NCCL collective fields;
# ``[memory]``: Bytes, Total Allocated/Reserved, Device Type/Id, Addr; ``M`` events: name, labels.
_ARG_SPEC: dict[str, tuple[str, Any, Any]] = {
    "external_id": ("External id", _Int, -1),
    "external_id_old": ("external id", _Int, -1),  # 2021 traces
    "correlation": ("correlation", _Int, -1),
    "device": ("device", _Int, -1),
    "stream": ("stream", _Int, -1),
    "seq": ("Sequence number", _Int, -1),
    "fwd_tid": ("Fwd thread id", _Int, -1),
    "input_dims": ("Input Dims", msgspec.Raw, _EMPTY_RAW),
    "input_types": ("Input type", msgspec.Raw, _EMPTY_RAW),
    "call_stack": ("Call stack", str | None, None),
    "module": ("Module Hierarchy", str | None, None),
    "flops": ("flops", _Num, _NAN),
    "nbytes": ("bytes", _Num, -1),
    "grid": ("grid", msgspec.Raw, _EMPTY_RAW),
    "block": ("block", msgspec.Raw, _EMPTY_RAW),
    "registers": ("registers per thread", _Num, -1),
    "shared_mem": ("shared memory", _Num, -1),
    "occupancy": ("est. achieved occupancy %", _Num, _NAN),
    "collective": ("Collective name", str | None, None),
    "in_nelems": ("In msg nelems", _Int, -1),
    "out_nelems": ("Out msg nelems", _Int, -1),
    "group_size": ("Group size", _Int, -1),
    "dtype": ("dtype", str | None, None),
    "pg_name": ("Process Group Name", str | None, None),
    "mem_bytes": ("Bytes", _Num, -1),
    "total_alloc": ("Total Allocated", _Num, -1),
    "total_reserved": ("Total Reserved", _Num, -1),
    "device_type": ("Device Type", _Num, -1),
    "device_id": ("Device Id", _Num, -1),
    "addr": ("Addr", _Num, -1),
    "mname": ("name", str | int | float | None, None),
    "labels": ("labels", str | int | float | None, None),
}

# per category group: (args attribute, events column, kind) with kind int | intish | float | str | raw;
# "int" external_id also reads the 2021 spelling
_FIELDS: dict[str, list[tuple[str, str, str]]] = {
    "host op": [
        ("external_id", "external_id", "int"), ("seq", "seq", "int"), ("fwd_tid", "fwd_tid", "int"),
        ("input_dims", "input_dims", "raw"), ("input_types", "input_types", "raw"),
        ("call_stack", "call_stack", "str"), ("module", "module", "str"), ("flops", "flops", "float"),
        ("collective", "collective", "str"), ("in_nelems", "msg_in_nelems", "int"),
        ("out_nelems", "msg_out_nelems", "int"), ("group_size", "group_size", "int"),
        ("dtype", "dtype", "str"), ("pg_name", "pg_name", "str"), ("grid", "grid", "raw"),
    ],
    "runtime": [
        ("external_id", "external_id", "int"), ("correlation", "correlation", "int"), ("grid", "grid", "raw"),
        ("block", "block", "raw"), ("shared_mem", "shared_mem_bytes", "intish"),
    ],
    "device": [
        ("external_id", "external_id", "int"), ("correlation", "correlation", "int"),
        ("device", "device", "int"), ("stream", "stream", "int"), ("nbytes", "bytes", "intish"),
        ("grid", "grid", "raw"), ("block", "block", "raw"), ("registers", "registers", "intish"),
        ("shared_mem", "shared_mem_bytes", "intish"), ("occupancy", "occupancy_ratio", "float"),
        ("collective", "collective", "str"), ("in_nelems", "msg_in_nelems", "int"),
        ("out_nelems", "msg_out_nelems", "int"), ("group_size", "group_size", "int"),
        ("dtype", "dtype", "str"), ("pg_name", "pg_name", "str"),
    ],
    "memory": [
        ("device_type", "device_type", "intish"), ("device_id", "device", "intish"), ("addr", "addr", "intish"),
        ("mem_bytes", "bytes", "intish"), ("total_alloc", "total_allocated", "intish"),
        ("total_reserved", "total_reserved", "intish"),
    ],
    "metadata": [("mname", "name", "str"), ("labels", "labels", "str")],
}


def _args_struct(group: str) -> type:
    """A ``gc=False`` Struct with only the args keys ``group`` reads (unknown keys are skipped)."""
    attrs = [a for a, _c, _k in _FIELDS[group]]
    if "external_id" in attrs:
        attrs.append("external_id_old")
    fields = [(a, _ARG_SPEC[a][1], msgspec.field(default=_ARG_SPEC[a][2], name=_ARG_SPEC[a][0])) for a in attrs]
    return msgspec.defstruct(f"_{group.title().replace(' ', '')}Args", fields, gc=False)


_ARG_STRUCTS = {g: _args_struct(g) for g in _FIELDS}
_ARG_LIST_DECODERS = {g: msgspec.json.Decoder(list[t]) for g, t in _ARG_STRUCTS.items()}
_ARG_ONE_DECODERS = {g: msgspec.json.Decoder(t) for g, t in _ARG_STRUCTS.items()}


class _TsOnly(msgspec.Struct, gc=False):
    ts: msgspec.Raw = _EMPTY_RAW


_EVENT_DECODER = msgspec.json.Decoder(list[_Event])
_LOOSE_EVENT_DECODER = msgspec.json.Decoder(list[_LooseEvent])
_ONE_EVENT_DECODER = msgspec.json.Decoder(_LooseEvent)
_TS_DECODER = msgspec.json.Decoder(list[_TsOnly])
_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_ANY_DECODER = msgspec.json.Decoder()


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic GC: millions of small objects otherwise triple load time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Ctx:
    """Per-load state: path, report, strict flag and what is needed to locate an event's bytes."""

    def __init__(self, path: str, report: LoadReport, strict: bool, data: bytes) -> None:
        self.path = path
        self.report = report
        self.strict = strict
        self.data = data
        self.fast = True  # events decoded in one pass: event index == position in traceEvents
        self.loose = False  # events are _LooseEvent: ts/dur may be strings
        self.array_start: int | None = None

    def release(self) -> None:
        """Drop the file bytes (re-read on demand by ``event_offset``)."""
        self.data = None

    def event_offset(self, k: int | None) -> int | None:
        """Byte offset of event ``k`` of ``traceEvents`` (fast path only; used for strict errors)."""
        if k is None or not self.fast or self.array_start is None:
            return None
        if self.data is None:
            try:
                self.data = read_bytes(self.path)
            except (OSError, TraceFormatError):
                return None
        try:
            end = _array_end(self.data, self.array_start)
            raws = _RAW_LIST_DECODER.decode(memoryview(self.data)[self.array_start - 1 : end])
            pos = self.data.find(bytes(raws[k]), self.array_start)
            return pos if pos >= 0 else None
        except (msgspec.DecodeError, IndexError):
            return None

    def defect(self, kind: str, action: str, count: int, message: str, k: int | None, reason: str) -> None:
        """``count`` values repaired or dropped (``action``), the first in event ``k``: recorded in the
        load report with that event's byte offset, or (strict mode) raised as ``reason``."""
        if self.strict:
            self.fail(reason, k)
        self.report.add(kind, action, count, message, offset=self.event_offset(k))

    def fail(self, reason: str, k: int | None = None) -> None:
        """Strict mode: raise ``TraceFormatError`` for event ``k`` (an index into ``traceEvents``)."""
        raise TraceFormatError(self.path, self.event_offset(k), reason, event_index=k)


def _array_end(data: bytes, start: int) -> int:
    """Offset just past the ``]`` closing the events array that opens at ``start - 1``."""
    try:
        _RAW_LIST_DECODER.decode(memoryview(data)[start - 1 :])
        return len(data)
    except msgspec.DecodeError as exc:
        m = re.search(r"trailing characters \(byte (\d+)\)", str(exc))
        if m:
            return data.rfind(b"]", start - 1, start - 1 + int(m.group(1))) + 1
        raise


# --------------------------------------------------------------------------- bytes


def read_bytes(path: str | os.PathLike[str], report: LoadReport | None = None) -> bytes:
    """Read a file, gunzipping ``.gz`` (or gzip magic) content.

    A truncated gzip stream (job killed while writing) yields what could be
    decompressed, noted in ``report`` (kind ``gzip_truncated``).

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    TraceFormatError
        When the gzip stream is corrupt before any data could be read.
    """
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        d = zlib.decompressobj(wbits=31)
        try:
            out = d.decompress(raw)
        except zlib.error:
            out = b""
        if not out:
            raise TraceFormatError(str(path), 0, f"corrupt gzip stream: {exc}") from exc
        if report is not None:
            report.add(
                "gzip_truncated",
                "repaired",
                1,
                f"gzip stream ends early ({exc}): the {len(raw)}-byte file decompressed to the first "
                f"{len(out)} bytes of the trace",
                offset=len(out),
            )
        return out


_POPULATE_MIN_BYTES = 64 << 20


def _read_buffer(path: str, report: LoadReport) -> bytearray | mmap.mmap:
    """``read_bytes`` into a mutable buffer (read in place for plain files; one copy after gunzip).

    A plain file of ``_POPULATE_MIN_BYTES`` or more goes into anonymous memory mapped with
    ``MAP_POPULATE`` (Linux): the kernel provides all its pages in one call instead of one page
    fault per 4 KiB as the read first touches them (580 MB: 0.27 s instead of 0.40 s here). The
    file itself is never mapped, so it may change on disk while it is being loaded.
    """
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            f.seek(0)
            size = os.fstat(f.fileno()).st_size
            buf: bytearray | mmap.mmap
            if size >= _POPULATE_MIN_BYTES and hasattr(mmap, "MAP_POPULATE"):
                buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
            else:
                buf = bytearray(size)
            n = f.readinto(buf)
            if n < size:  # the file shrank while being read
                return bytearray(memoryview(buf)[:n])
            return buf
    return bytearray(read_bytes(path, report))


# --------------------------------------------------------------------------- tolerant path

_NONFINITE = re.compile(rb"(?<=[:\[,\s])-?(?:NaN|nan|Infinity|inf)(?=\s*[,}\]])")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_CTRL = re.compile(rb"[\x00-\x1f]")
_VALUE_START = re.compile(rb'"[^"\\\n]*"\s*:\s*"')
_VALUE_END = re.compile(rb'"(?=\s*(?:,\s*"([^"\\\n]*)"\s*:|\}|\]|,\s*$))')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_CLOSE = re.compile(rb"\}\s*\]")
_NON_ASCII = re.compile(rb"[\x80-\xff]+")
_MALFORMED_AT = re.compile(r"\(byte (\d+)\)")
_VALIDATION_AT = re.compile(r"at `\$\[(\d+)\]")


def _escape_ctrl_in_strings(chunk: bytes) -> bytes:
    def fix(m: re.Match[bytes]) -> bytes:
        return _CTRL.sub(lambda c: b"\\u%04x" % c.group(0)[0], m.group(0))

    return _STRING.sub(fix, chunk)


_KINETO_KEYS = frozenset({b"ph", b"cat", b"name", b"pid", b"tid", b"ts", b"dur", b"args", b"id", b"bp", b"s"})


def _escape_inner_quotes(chunk: bytes) -> bytes:
    """Escape double quotes inside ``"key": "value"`` strings (kineto#1459: frame names with ``"``).

    For each string value, the candidate closing quotes are those followed by ``,"key":``, ``}``
    or ``]``; the first candidate that makes the whole event decodable wins, else the first one
    followed by a Kineto event key (``"pid":``...), else the first one. Quotes before it are escaped.
    """
    out = chunk
    pos = 0
    for _ in range(64):
        m = _VALUE_START.search(out, pos)
        if m is None:
            break
        vstart = m.end()
        first_quote = re.compile(rb'(?<!\\)"').search(out, vstart)
        if first_quote is None:
            break
        if _VALUE_END.match(out, first_quote.start()):  # a well-formed value: keep it
            pos = first_quote.end()
            continue
        cands = list(_VALUE_END.finditer(out, vstart))[:16]
        if not cands:
            break
        chosen: tuple[int, bytes] | None = None
        for c in cands:
            fixed = re.sub(rb'(?<!\\)"', rb'\\"', out[vstart : c.start()])
            trial = out[:vstart] + fixed + out[c.start() :]
            try:
                _ONE_EVENT_DECODER.decode(trial)
                return trial
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass
            if chosen is None and c.group(1) in _KINETO_KEYS:
                chosen = (c.start(), fixed)
        if chosen is None:
            c = cands[0]
            chosen = (c.start(), re.sub(rb'(?<!\\)"', rb'\\"', out[vstart : c.start()]))
        end, fixed = chosen
        out = out[:vstart] + fixed + out[end:]
        pos = vstart + len(fixed) + 1
    return out


def _fix_utf8(data: bytes) -> tuple[bytes, list[int]]:
    """Replace invalid UTF-8 sequences with U+FFFD; return the new bytes and the bad offsets."""
    bad: list[int] = []
    parts: list[bytes] = []
    last = 0
    for m in _NON_ASCII.finditer(data):
        run = m.group(0)
        try:
            run.decode("utf-8")
            continue
        except UnicodeDecodeError as exc:
            # the run may end mid-character only if the next byte is ASCII: then it is invalid too
            bad.append(m.start() + exc.start)
        parts.append(data[last : m.start()])
        parts.append(run.decode("utf-8", "replace").encode("utf-8"))
        last = m.end()
    if not bad:
        return data, bad
    parts.append(data[last:])
    return b"".join(parts), bad


_REPAIRS = (
    ("nonfinite", lambda b: _NONFINITE.sub(b"null", b)),
    ("control_chars", _escape_ctrl_in_strings),
    ("unescaped_quotes", _escape_inner_quotes),
)

_REPAIR_TEXT = {
    "nonfinite": "events had NaN/Infinity/inf tokens (not JSON): read as null",
    "invalid_utf8": "invalid UTF-8 sequences: replaced with U+FFFD",
    "control_chars": "events had raw control characters inside strings: escaped",
    "unescaped_quotes": "events had unescaped double quotes inside strings: escaped",
    "bad_args": "events had args of unexpected types (e.g. a list where a number belongs): their args were ignored",
}


def _repair_chunk(chunk: bytes) -> tuple[_Event | None, list[str]]:
    """Apply the repairs cumulatively; return the event and the repair kinds that changed bytes."""
    used: list[str] = []
    cand = chunk
    for kind, fn in _REPAIRS:
        new = fn(cand)
        if new != cand:
            used.append(kind)
            cand = new
            try:
                return _decode_one(cand), used
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
    return None, used


_WS = re.compile(rb"\s*")


def _first_char(data: bytes) -> bytes:
    """The first non-whitespace byte (b"" if none), without copying the data."""
    i = _WS.match(data).end()
    return data[i : i + 1]


def _events_array_start(data: bytes) -> int:
    """Offset just after the ``[`` opening the events array (bare array or ``traceEvents``), or -1."""
    m = re.match(rb"\s*\[", data)
    if m:
        return m.end()
    m = re.search(rb'"traceEvents"\s*:\s*\[', data)
    return m.end() if m else -1


def _tolerant_decode(
    data: bytes, path: str, report: LoadReport, strict: bool, first_error: str
) -> tuple[list[_Event], dict[str, Any], bytes]:
    """Decode what can be decoded; return (events, metadata, the repaired bytes).

    The events array is decoded in bulk from a cursor; at each error the bad event is
    isolated between ``},{`` boundaries (the boundary before the error that leaves a
    decodable prefix, and the next one after it), repaired or dropped, and decoding resumes
    after it. Work stays linear in the file size.
    """
    if "UTF-8" in first_error:
        data, bad = _fix_utf8(data)
        if bad:
            report.add("invalid_utf8", "repaired", len(bad),
                       f"{len(bad)} {_REPAIR_TEXT['invalid_utf8']}", offset=bad[0])
    start = _events_array_start(data)
    if start < 0:
        raise TraceFormatError(path, 0, f"no 'traceEvents' array and not a JSON array of events ({first_error})")
    buf = bytearray(data)
    mv = memoryview(buf)
    n = len(buf)
    events: list[_Event] = []
    repairs: dict[str, list[int]] = {}
    dropped: list[int] = []
    seg = start - 1  # position of a '[' opening the remaining events
    end: int | None = None  # offset just past the array's closing ']'
    truncated_at: int | None = None
    guard = 0
    while True:
        guard += 1
        if guard > 10_000_000:  # pragma: no cover - defensive
            break
        try:
            events.extend(_LOOSE_EVENT_DECODER.decode(mv[seg:]))
            end = n
            break
        except msgspec.ValidationError as exc:
            m = _VALIDATION_AT.search(str(exc))
            err_at = _nth_event_offset(buf, seg, int(m.group(1))) if m else None
            if err_at is None:
                err_at = seg + 1
            err_at += 1  # inside the event
        except msgspec.DecodeError as exc:
            msg = str(exc)
            m = _MALFORMED_AT.search(msg)
            if "trailing characters" in msg and m:
                # msgspec reports the byte after the first trailing character: the ']' is before it
                end = buf.rindex(b"]", seg, seg + int(m.group(1))) + 1
                events.extend(_LOOSE_EVENT_DECODER.decode(mv[seg:end]))  # the array itself is fine now
                break
            if "truncated" in msg:
                err_at = n
            elif m:
                err_at = seg + int(m.group(1))
            else:
                err_at = n
        # --- prefix: the last boundary before err_at that leaves a decodable prefix
        cstart = None
        bounds = [b for b in _BOUNDARY.finditer(buf, seg, err_at)]
        for b in reversed(bounds[-8:]):
            comma = buf.index(b",", b.start())
            buf[comma : comma + 1] = b"]"
            try:
                events.extend(_LOOSE_EVENT_DECODER.decode(mv[seg : comma + 1]))
                cstart = b.end() - 1
                break
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            finally:
                buf[comma : comma + 1] = b","
        if cstart is None:
            first = buf.find(b"{", seg)
            cstart = first if first >= 0 else n
            if re.match(rb"\[\s*\]", buf[seg : seg + 64]):
                end = _array_end(bytes(buf), seg + 1)
                break
        # --- the bad event: up to the next boundary (or the array close) after err_at
        nxt = _BOUNDARY.search(buf, max(err_at, cstart + 1))
        close = _CLOSE.search(buf, max(err_at, cstart + 1))
        chunk_end, is_last = None, False
        if nxt is not None and (close is None or nxt.start() < close.start()):
            chunk_end = nxt.start() + 1
        elif close is not None:
            chunk_end, is_last = close.start() + 1, True
        if chunk_end is None:  # truncated file: the rest is the partial last event
            if strict:
                raise TraceFormatError(path, n, f"file is truncated at byte {n}: the last event is incomplete "
                                       f"and traceEvents is not closed ({first_error})")
            rest = bytes(buf[cstart:]).rstrip(b", \n\r\t")
            try:  # the file may end right after a complete event (and its comma)
                events.append(_decode_one(rest))
                truncated_at = n
            except (msgspec.DecodeError, msgspec.ValidationError):
                truncated_at = cstart
            end = None
            break
        chunk = bytes(buf[cstart:chunk_end])
        try:
            events.append(_decode_one(chunk))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if strict:
                raise TraceFormatError(path, cstart, f"invalid event: {exc}", event_index=len(events)) from exc
            ev, used = _repair_chunk(chunk)
            if ev is None:
                dropped.append(cstart)
            else:
                events.append(ev)
                for u in used:
                    repairs.setdefault(u, []).append(cstart)
        if is_last:
            end = close.end()
            break
        comma = buf.index(b",", chunk_end)
        buf[comma : comma + 1] = b"["
        seg = comma
    for kind, offs in repairs.items():
        report.add(kind, "repaired", len(offs), f"{len(offs)} {_REPAIR_TEXT[kind]}", offset=offs[0])
    if dropped:
        report.add("unparseable_event", "dropped", len(dropped),
                   f"{len(dropped)} events could not be parsed or repaired and were dropped", offset=dropped[0])
    if end is None:
        at = truncated_at if truncated_at is not None else n
        pct = 100.0 * at / max(n, 1)
        report.add(
            "truncated", "repaired", 1,
            f"truncated at byte {n}: recovered {pct:.1f}% of the bytes as {len(events)} complete events; "
            "the partial last event and any metadata after traceEvents are missing",
            offset=n,
        )
    meta = _read_meta(bytes(buf), start, end, report)
    return events, meta, bytes(buf)


def _nth_event_offset(buf: bytearray, seg: int, k: int) -> int | None:
    """Offset of the k-th event of the array opening at ``seg`` (syntax must be valid up to it)."""
    try:
        raws = _RAW_LIST_DECODER.decode(memoryview(buf)[seg : _array_end(bytes(buf), seg + 1)])
    except msgspec.DecodeError:
        return None
    if k >= len(raws):
        return None
    pos = bytes(buf).find(bytes(raws[k]), seg)
    return pos if pos >= 0 else None


def _read_meta(data: bytes, start: int, end: int | None, report: LoadReport) -> dict[str, Any]:
    """Top-level metadata keys around the events array (any order), when the top is an object."""
    if _first_char(data) == b"[":
        return {}
    head = data[: start - 1]
    tail = data[end:] if end is not None else b"}"
    candidates = [head + b"[]" + tail, _NONFINITE.sub(b"null", head + b"[]" + tail), head + b"[]}"]
    for i, cand in enumerate(candidates):
        try:
            meta = _ANY_DECODER.decode(cand)
        except msgspec.DecodeError:
            continue
        if i == 2 and end is not None:
            report.add("metadata_partial", "dropped", 1, "metadata after traceEvents could not be read")
        if isinstance(meta, dict):
            meta.pop("traceEvents", None)
            return meta
        return {}
    report.add("metadata_unreadable", "dropped", 1, "top-level metadata could not be read")
    return {}


# --------------------------------------------------------------------------- columns


_INT_BLOCK = 1 << 16


def _to_int_array(
    values: list[Any], name: str, ctx: _Ctx, rows: np.ndarray | None = None, *, tried: bool = False
) -> np.ndarray:
    """list of int|float|str|None -> int64 with -1 for missing.

    Fast path ``np.fromiter``; else strings like ``"12"`` are parsed, floats truncated,
    unsigned 64-bit values keep their bit pattern, larger integers become -1 (reported). The
    plain ints among them still go through ``np.fromiter``, in blocks of ``_INT_BLOCK`` values
    (a trace's one ``"pid": "Spans"`` row must not send a million values through the type check).
    """
    n = len(values)
    if not tried:  # (``tried``: the caller's own np.fromiter already failed)
        try:
            return np.fromiter(values, dtype=np.int64, count=n)
        except (TypeError, ValueError, OverflowError):
            pass
    out = np.empty(n, dtype=np.int64)
    todo: list[int] = []  # positions of the values that are not plain ints
    for a in range(0, n, _INT_BLOCK):  # blocks: one odd value sends only its block to the type check
        block = values[a : a + _INT_BLOCK]
        k = len(block)
        try:
            out[a : a + k] = np.fromiter(block, dtype=np.int64, count=k)
            continue
        except (TypeError, ValueError, OverflowError):
            pass
        is_int = np.fromiter(map(is_, map(type, block), repeat(int, k)), dtype=bool, count=k)
        try:
            out[a : a + k][is_int] = np.fromiter(compress(block, is_int.tolist()), dtype=np.int64)
            todo += (np.flatnonzero(~is_int) + a).tolist()
        except OverflowError:  # ints beyond 64 bits: the whole block through the loop
            todo += range(a, a + k)
    bad: list[int] = []
    for i in todo:
        v = values[i]
        if v is None:
            out[i] = -1
        elif isinstance(v, int):
            if -(2**63) <= v < 2**63:
                out[i] = v
            elif 0 <= v < 2**64:  # unsigned 64-bit ids/addresses: keep the bit pattern
                out[i] = v - 2**64
            else:
                out[i] = -1
                bad.append(i)
        elif isinstance(v, float):
            out[i] = int(v) if np.isfinite(v) and abs(v) < 2**63 else -1
        elif isinstance(v, str) and v[:2].lower() == "0x":  # ROCm streams: "0x0"
            try:
                out[i] = int(v, 16) if int(v, 16) < 2**63 else -1
            except ValueError:
                out[i] = -1
        else:
            m = re.search(r"-?\d+", str(v))
            out[i] = int(m.group(0)) if m and abs(int(m.group(0))) < 2**63 else -1
    if bad:
        ctx.defect(f"bigint_{name}", "repaired", len(bad),
                   f"{len(bad)} values of {name!r} were integers above 64 bits: set to -1",
                   int(rows[bad[0]]) if rows is not None else None,
                   f"{len(bad)} values of {name!r} are integers above 64 bits (e.g. {values[bad[0]]})")
    return out


def _to_float(values: list[Any], what: str, ctx: _Ctx, rows: np.ndarray | None) -> np.ndarray:
    """float|int|str|None values -> float64 with NaN for missing; string-typed values parsed and reported."""
    try:
        if str not in set(map(type, values)):  # np.array would parse "12.5" silently
            return np.array(values, dtype=np.float64)  # None -> NaN
    except (TypeError, ValueError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    strs: list[int] = []
    for i, v in enumerate(values):
        if v is None:
            out[i] = np.nan
        elif isinstance(v, str):
            strs.append(i)
            try:
                out[i] = float(v)
            except ValueError:
                out[i] = np.nan
        else:
            out[i] = v
    if strs and rows is not None:
        ctx.defect(f"string_{what}", "repaired", len(strs),
                   f"{len(strs)} events had string-typed '{what}': converted to numbers", int(rows[strs[0]]),
                   f"{len(strs)} events have string-typed {what!r} (e.g. {values[strs[0]]!r})")
    return out


def _intish(values: list[Any], name: str, ctx: _Ctx) -> np.ndarray:
    """int or float (``"registers per thread": 32.0``) -> int64, -1 missing."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        pass
    return _to_int_array([int(v) if isinstance(v, float) and np.isfinite(v) and abs(v) < 2**63 else v
                          for v in values], name, ctx)


def _num_or_nan(values: list[Any]) -> np.ndarray:
    try:
        return np.fromiter(values, dtype=np.float64, count=len(values))
    except (TypeError, ValueError):
        out = np.full(len(values), np.nan)
        for i, v in enumerate(values):
            try:
                out[i] = float(v) if v is not None else np.nan
            except (TypeError, ValueError):
                pass
        return out


def _raw_texts(values: list[msgspec.Raw]) -> list[str]:
    """msgspec.Raw JSON values -> their text ('' when absent), in one join/split."""
    if not values:
        return []
    return b"\x00".join(values).decode("utf-8", "replace").split("\x00")


def _compact_json_text(s: Any) -> str | None:
    if not s:
        return None
    if "\n" in s or "  " in s:
        s = re.sub(r"\s+", "", s)
    if "," in s and ", " not in s:
        s = s.replace(",", ", ")
    return s


def _select(objs: list[Any], mask: np.ndarray) -> list[Any]:
    """``[o for o, m in zip(objs, mask) if m]`` at C speed (``itertools.compress``: half the time of
    ``itemgetter`` over the indices)."""
    return list(compress(objs, mask.tolist()))


_GETTERS: dict[str, Any] = {}


def _col(objs: list[Any], attr: str) -> list[Any]:
    """One attribute of every Struct, as a list.

    A list comprehension with the attribute name in its code (compiled once per name) uses
    CPython's specialised attribute access: ~30 ns per element, about half of
    ``map(attrgetter(name), objs)``.
    """
    f = _GETTERS.get(attr)
    if f is None:
        if not attr.isidentifier():
            raise ValueError(attr)
        f = _GETTERS[attr] = eval(f"lambda xs: [x.{attr} for x in xs]")  # attr is one of our field names
    return f(objs)


_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)", re.I)
_STEP_RE = re.compile(r"ProfilerStep\s*#\s*(\d+)")
_BIG_FRACTIONAL_TS = re.compile(rb'"ts"\s*:\s*"?-?\d{13,}\.\d')
_EXACT_TS_MIN_US = 2.0**43  # below this, _us_to_ns recovers the exact 3-decimal ns from float64 µs


def rank_from_filename(path: str) -> int | None:
    """``rank-3.json``, ``rank_3``, ``trace_rank3`` -> 3; ``worker0.<ts>.pt.trace.json`` -> None."""
    m = _RANK_IN_NAME.search(os.path.basename(path))
    return int(m.group(1)) if m else None


def _us_to_ns(ts: np.ndarray) -> np.ndarray:
    """float64 µs (3 decimals as written by Kineto) -> exact int64 ns, for ``|ts| < 2**43`` µs.

    Below 2**43 µs a float64's spacing is at most 2**-10 µs, so the float is within 0.49 ns of the
    decimal text. Splitting off the integer µs (exact) and rounding the fraction's ns recovers the
    written digits exactly; ``rint(ts * 1000)`` would not (the product rounds at ~1e15 ns).
    """
    ip = np.floor(ts)
    return ip.astype(np.int64) * 1000 + np.rint((ts - ip) * 1000.0).astype(np.int64)


def _exact_ts_ns(texts: list[str]) -> np.ndarray:
    """Decimal µs texts -> int64 absolute ns by integer arithmetic (``-1`` sentinel never used: NaN-free).

    Returns float64 NaN-able? No: returns an int64 array and a validity mask packed as (values, ok).
    """
    out = np.zeros(len(texts), dtype=np.int64)
    for i, t in enumerate(texts):
        t = t.strip().strip('"')
        ip, dot, fr = t.partition(".")
        try:
            if ip.lstrip("-").isdigit() and (not fr or fr.isdigit()):
                sign = -1 if ip.startswith("-") else 1
                frac = int((fr + "000")[:3]) + (1 if len(fr) > 3 and fr[3] >= "5" else 0)
                out[i] = int(ip) * 1000 + sign * frac
            else:
                out[i] = int(round(float(t) * 1000.0))
        except (ValueError, OverflowError):
            out[i] = 0
    return out


# --------------------------------------------------------------------------- main entry


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
        control characters, unescaped quotes, invalid UTF-8, truncation, integers above
        64 bits, string-typed ``ts``/``dur``, negative durations). Assumptions that need no
        repair ("rank assumed 0", "no ProfilerStep") are only noted in the report.
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
    if data is None:
        data = _read_buffer(spath, report)
    if strict and not report.clean:
        raise TraceFormatError(spath, report.issues[0].offset, report.issues[0].message)
    if not _first_char(data):
        raise TraceFormatError(spath, 0, "file is empty (0 bytes of JSON): no trace was written")
    with _gc_paused():
        ctx = _Ctx(spath, report, strict, data)
        quick = _split_top(data) if _first_char(data) == b"{" else None
        parts = None
        if quick is not None and not strict and _parallel_ok(data, quick):
            parts = _parallel_extract(data, ctx, quick[0], quick[1])
        if parts is not None:
            ctx.array_start, meta, exact_ts = quick[0], quick[2], None
        else:
            events, meta, exact_ts = _decode(data, ctx, quick)
            holder = [events]  # _extract frees the decoded events half-way; hold no other reference
            del events
            parts = [_extract(holder, ctx)]
        data = quick = None
        ctx.release()
        trace = _finish(parts, meta, ctx, rank, exact_ts)
    return trace


# --------------------------------------------------------------------------- two processes

_PARALLEL_MIN_BYTES = 64 << 20
_CHUNKS = 16  # runs of the events array, taken one at a time by whichever process is free
_EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def _parallel_ok(data: bytes, quick: tuple[int, int, dict[str, Any]]) -> bool:
    """Load in two processes? Large events arrays read by nbprof (a mutable buffer) on Linux with two usable CPUs.
    ``NBPROF_LOAD_PROCESSES=1`` turns it off (``=2`` forces it for any size, for tests)."""
    env = os.environ.get("NBPROF_LOAD_PROCESSES", "")
    if env == "1" or not isinstance(data, (bytearray, mmap.mmap)) or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    start, end, _meta = quick
    return env == "2" or (end - start >= _PARALLEL_MIN_BYTES and len(os.sched_getaffinity(0)) >= 2)


def _extract_span(span: memoryview, path: str, keep: list[Any] | None = None) -> _Part | None:
    """Decode and extract one run of events on its own; None when it needs any repair or report.
    ``keep``: see ``_extract``."""
    sub = _Ctx(path, LoadReport(path=path), False, None)
    sub.fast = False  # offsets are not needed: a part with any report entry is not used
    try:
        holder = [_EVENT_DECODER.decode(span)]
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    del span
    part = _extract(holder, sub, keep)
    return part if not sub.report.issues else None


def _parallel_extract(data: bytearray | mmap.mmap, ctx: _Ctx, start: int, end: int) -> list[_Part] | None:
    """The events array decoded and extracted in two processes at once: this one and a forked child.

    The array is cut into ``_CHUNKS`` runs at event boundaries ``},{`` after each equal share of
    its bytes; the two processes take the runs one at a time from a queue (a pipe holding one byte
    per run index: a one-byte read from a pipe goes to exactly one reader), so the one that
    finishes its run first takes the next (a file's regions differ in cost per byte: host ops with
    shapes first, Python frames later; a fixed split left one process idle up to a second at the
    end). Each run is decoded in place as an array of its own: its bounding commas are turned
    into ``[`` and ``]`` (the child in its own copy-on-write pages; here they are restored after
    the decode), so nothing is copied. A boundary that is not between two top-level events (inside
    a string or a nested object) leaves the runs around it undecodable. The child sends its parts
    back (``_send_part``) and exits. A run that needs any repair or report entry, or a child that
    fails, gives None: the caller then loads the whole file in one process, which reports with the
    byte offsets of the whole file; so do absolute-µs timestamps with fractions
    (``_maybe_exact_ts``). ``ctx`` is left untouched. Returns the parts in file order.
    """
    cuts = [start - 1]  # positions of each run's opening "[" (a comma but for the first run)
    for i in range(1, _CHUNKS):
        m = _EVENT_BOUNDARY.search(data, max(cuts[-1] + 1, start + (end - start) * i // _CHUNKS), end)
        if m is None:
            break
        cuts.append(data.find(b",", m.start()))
    if len(cuts) < 2:
        return None
    runs = list(zip(cuts, [*cuts[1:], end - 1]))  # (opening "[", closing "]") positions

    def extract(k: int, keep: list[Any] | None) -> _Part | None:
        a, b = runs[k]
        old = data[a], data[b]
        data[a], data[b] = 0x5B, 0x5D  # "[", "]"
        try:
            return _extract_span(memoryview(data)[a : b + 1], ctx.path, keep)
        finally:
            data[a], data[b] = old

    shm = mmap.mmap(-1, end - start)  # shared, anonymous: pages exist once written
    qr, qw = os.pipe()  # the queue of run indices
    os.write(qw, bytes(range(len(runs))))
    os.close(qw)

    def work(keep: list[Any] | None) -> list[tuple[int, _Part | None]]:
        done: list[tuple[int, _Part | None]] = []
        while not done or done[-1][1] is not None:  # a run that needs a repair ends it: all fall back
            k = os.read(qr, 1)
            if not k:
                break
            done.append((k[0], extract(k[0], keep)))
        return done

    rfd, wfd = os.pipe()
    try:
        with warnings.catch_warnings():
            # Python >= 3.12 warns on fork() of a multi-threaded process (a Jupyter kernel): the child
            # takes no lock, runs only msgspec/numpy/pickle and leaves with os._exit.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        for fd in (rfd, wfd, qr):
            os.close(fd)
        return None
    if pid == 0:  # pragma: no cover - the child (its result is what the parent tests)
        code = 1
        try:
            os.close(rfd)
            keep: list[Any] = []  # the decoded objects: left to os._exit instead of freed one by one
            theirs = work(keep)
            with os.fdopen(wfd, "wb") as f:
                _send_part(theirs, f, shm)
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    done = False
    try:
        try:
            mine = work(None)
        finally:
            os.close(qr)
        with os.fdopen(rfd, "rb") as f:
            rfd = -1
            theirs = _recv_part(f, shm)
        done = True
    finally:
        if rfd >= 0:
            os.close(rfd)
        if done:  # the child has sent everything; reap it without waiting for it to unmap its memory
            threading.Thread(target=os.waitpid, args=(pid, 0), daemon=True).start()
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if theirs is None:
        return None
    by_run = dict(mine + theirs)
    if len(by_run) != len(runs) or any(p is None for p in by_run.values()):
        return None
    parts = [by_run[k] for k in range(len(runs))]
    if any(p.ns_abs is None for p in parts) and _BIG_FRACTIONAL_TS.search(data):
        return None  # absolute µs with fractions: the one-process path decodes the ts texts exactly
    return parts


def _send_part(part: Any, f: Any, shm: mmap.mmap) -> None:
    """Child side: the part's (or parts') arrays go into the shared mapping ``shm`` (pickle protocol 5 out-of-band
    buffers), the rest of the pickle and the buffers' places through the pipe ``f``; everything
    through the pipe when the arrays do not fit."""
    bufs: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(part, protocol=5, buffer_callback=bufs.append)
    places: list[tuple[int, int]] | None = []
    pos = 0
    try:
        for b in bufs:
            raw = b.raw()
            n = raw.nbytes
            if pos + n > len(shm):
                raise BufferError("shared buffer full")
            shm[pos : pos + n] = raw
            places.append((pos, n))
            pos = (pos + n + 63) & ~63
    except BufferError:  # too large or not contiguous
        payload, places = pickle.dumps(part, protocol=5), None
    pickle.dump((payload, places), f, protocol=5)


def _recv_part(f: Any, shm: mmap.mmap) -> Any:
    """Parent side of ``_send_part`` (arrays stay views of ``shm`` until ``_finish`` joins them)."""
    try:
        payload, places = pickle.load(f)
    except (EOFError, pickle.UnpicklingError):
        return None  # the child failed before sending
    if places is None:
        return pickle.loads(payload)
    view = memoryview(shm)
    return pickle.loads(payload, buffers=[view[o : o + n] for o, n in places])


def _decode_span(span: Any, ctx: _Ctx) -> list[_Event]:
    """The events array (typed); string-typed ``ts``/``dur`` switch to ``_LooseEvent`` (checked later)."""
    try:
        return _EVENT_DECODER.decode(span)
    except msgspec.ValidationError:
        ctx.loose = True
        return _LOOSE_EVENT_DECODER.decode(span)


def _decode(
    data: bytes, ctx: _Ctx, quick: tuple[int, int, dict[str, Any]] | None
) -> tuple[list[_Event], dict[str, Any], np.ndarray | None]:
    """All events of the file in this process: fast typed decode, else the tolerant walk.

    ``quick``: ``_split_top``'s (array start, array end, metadata), when it found them.
    """
    first = _first_char(data)
    try:
        if first == b"[":
            ctx.array_start = data.index(b"[") + 1
            events = _decode_span(data, ctx)
            meta: dict[str, Any] = {}
            raw_events: Any = data
        else:
            if quick is not None:  # one pass over the events instead of two
                ctx.array_start, end, meta = quick
                meta = dict(meta)
                raw_events = memoryview(data)[ctx.array_start - 1 : end]
                events = _decode_span(raw_events, ctx)
                return events, meta, _maybe_exact_ts(data, raw_events, events)
            top = _TOP_DECODER.decode(data)
            raw_events = top.pop("traceEvents", None)
            if raw_events is None:
                raise TraceFormatError(ctx.path, 0, "no 'traceEvents' key in the top-level object: not a Kineto trace")
            ctx.array_start = _events_array_start(data)
            events = _decode_span(raw_events, ctx)
            meta = {k: _ANY_DECODER.decode(v) for k, v in top.items()}
        return events, meta, _maybe_exact_ts(data, raw_events, events)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        msg = str(exc)
        if first not in (b"{", b"["):
            raise TraceFormatError(ctx.path, 0, f"not a JSON trace (starts with {bytes(data[:16])!r})") from exc
        if ctx.strict:
            off = _strict_offset(data, msg, ctx)
            raise TraceFormatError(ctx.path, off, msg) from exc
        ctx.fast = False
        ctx.loose = True
        events, meta, fixed = _tolerant_decode(data, ctx.path, ctx.report, ctx.strict, msg)
        if _BIG_FRACTIONAL_TS.search(fixed[:1_000_000]):
            ctx.report.add("ts_precision", "assumed", 1,
                           "absolute µs timestamps decoded as float64 after a repair: ns digits may be off by <= 250 ns")
        return events, meta, None


def _split_top(data: bytes) -> tuple[int, int, dict[str, Any]] | None:
    """Locate the ``traceEvents`` array and read the metadata around it without parsing the events.

    The array's closing ``]`` is the earliest ``]`` in the file's last 64 KiB for which
    "head + [] + tail" is a JSON object (a later ``]`` may close an array inside trailing
    metadata; an earlier one, inside the last event, leaves unbalanced braces). The caller
    decodes exactly that span, so a wrong guess only costs the fallback to a full parse.
    """
    m = re.search(rb'"traceEvents"\s*:\s*\[', data[: 1 << 24])
    if m is None:
        return None
    start = m.end()
    head = data[: start - 1]
    lo = max(start - 1, len(data) - (1 << 16))
    p = len(data)
    found: tuple[int, dict[str, Any]] | None = None
    for _ in range(256):
        p = data.rfind(b"]", lo, p)
        if p < 0:
            break
        try:
            meta = _ANY_DECODER.decode(head + b"[]" + data[p + 1 :])
        except msgspec.DecodeError:
            continue
        if isinstance(meta, dict) and meta.get("traceEvents") == []:
            found = (p, meta)
    if found is None:
        return None
    p, meta = found
    del meta["traceEvents"]
    return start, p + 1, meta


def _strict_offset(data: bytes, msg: str, ctx: _Ctx) -> int | None:
    """Byte offset for a strict-mode decode error."""
    if "UTF-8" in msg:
        _fixed, bad = _fix_utf8(data)
        return bad[0] if bad else None
    if "truncated" in msg:
        return len(data)
    m = _VALIDATION_AT.search(msg)
    if m and ctx.array_start is not None:
        return _nth_event_offset(bytearray(data), ctx.array_start - 1, int(m.group(1)))
    m = _MALFORMED_AT.search(msg)
    if m:
        off = int(m.group(1))
        if _first_char(data) != b"{":
            return off  # the bare array was decoded from byte 0
        try:  # a syntax error anywhere: the whole-file parse gives its absolute offset
            _TOP_DECODER.decode(data)
        except msgspec.DecodeError as exc:
            m2 = _MALFORMED_AT.search(str(exc))
            return int(m2.group(1)) if m2 else (len(data) if "truncated" in str(exc) else None)
        # the file parses: the error came from decoding the events span alone
        return off if ctx.array_start is None else ctx.array_start - 1 + off
    return None


def _maybe_exact_ts(data: bytes, raw_events: Any, events: list[_Event]) -> np.ndarray | None:
    """Absolute ns of every event's ts decoded exactly, when float64 µs would lose ns digits."""
    big = False
    for e in events[:64] + events[-64:]:
        if isinstance(e.ts, float) and abs(e.ts) >= _EXACT_TS_MIN_US:
            big = True
            break
    if not big or not _BIG_FRACTIONAL_TS.search(data):
        return None
    raws = _TS_DECODER.decode(raw_events)
    return _exact_ts_ns(_raw_texts([r.ts for r in raws]))


def _decode_one(chunk: bytes) -> _Event:
    """One event (string-typed ``ts``/``dur`` allowed; its args are decoded later, per category group)."""
    return _ONE_EVENT_DECODER.decode(chunk)


_ARG_COLUMNS = {
    "external_id": "int", "correlation": "int", "device": "int", "stream": "int", "seq": "int", "fwd_tid": "int",
    "input_dims": "raw", "input_types": "raw", "call_stack": "str", "module": "str", "flops": "float",
    "bytes": "int", "grid": "raw", "block": "raw", "registers": "int", "shared_mem_bytes": "int",
    "occupancy_ratio": "float", "collective": "str", "msg_in_nelems": "int", "msg_out_nelems": "int",
    "group_size": "int", "dtype": "str", "pg_name": "str",
}
_NO_ARGS_CATEGORIES = frozenset({schema.PYTHON_FUNCTION})
_RT_GROUP = schema.RUNTIME_CATEGORIES | {schema.CUDA_SYNC}


_NO_CATEGORIES = pd.Index([], dtype="float64")


class _Codes(dict):
    """value -> code, a new value taking the next code on first lookup (codes in order of first appearance)."""

    def __missing__(self, value: Any) -> int:
        code = self[value] = len(self)
        return code


class _CatColumn:
    """Builds a categorical column from per-group value lists without an n-sized object array."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lut: dict[Any, int] = _Codes()
        self.codes: np.ndarray | None = None

    def put(self, rows: np.ndarray | None, values: list[Any]) -> None:
        lut = self.lut
        # one dict lookup per value (hits stay in C; ~30% less than numbering the uniques first)
        codes = np.fromiter(map(lut.__getitem__, values), dtype=np.int32, count=len(values))
        if rows is None:
            self.codes = codes
            return
        if self.codes is None:
            self.codes = np.full(self.n, -1, dtype=np.int32)
            self.lut.setdefault(None, len(self.lut))
            self.codes[:] = self.lut[None]
        self.codes[rows] = codes

    @staticmethod
    def concat(cols: list[_CatColumn], take: np.ndarray | None = None) -> _CatColumn:
        """The columns one after the other (value codes remapped onto one dictionary), then the
        rows at positions ``take`` of that, when given."""
        if len(cols) == 1 and take is None:
            return cols[0]
        out = _CatColumn(sum(c.n for c in cols) if take is None else len(take))
        if all(c.codes is None for c in cols):
            return out
        lut, pieces = out.lut, []
        for c in cols:
            if c.n == 0:  # no rows, but its values are categories as in a one-process load
                for u in c.lut:
                    lut.setdefault(u, len(lut))
                continue
            if c.codes is None:
                pieces.append(np.full(c.n, lut.setdefault(None, len(lut)), dtype=np.int32))
            else:
                remap = np.array([lut.setdefault(u, len(lut)) for u in c.lut], dtype=np.int32)
                pieces.append(remap[c.codes])
        out.codes = np.concatenate(pieces)
        if take is not None:
            out.codes = out.codes[take]
        return out

    def finish(self, transform: Any = None) -> pd.Categorical:
        """``transform`` maps each unique value to its text (None = missing); default str()."""
        if self.codes is None:
            # an all-missing column has float64 (empty) categories, as pd.Categorical([None, ...]) and
            # a parquet round trip give
            return pd.Categorical.from_codes(np.full(self.n, -1, dtype=np.int8), categories=_NO_CATEGORIES)
        uniq = list(self.lut)
        if transform is not None:
            texts = [transform(u) for u in uniq]
        else:
            texts = [u if isinstance(u, str) else (None if u is None else str(u)) for u in uniq]
        final: dict[str, int] = {}
        remap = np.empty(len(texts) + 1, dtype=np.int32)
        for i, t in enumerate(texts):
            remap[i] = -1 if t is None else final.setdefault(t, len(final))
        remap[-1] = -1
        codes = self.codes if bool((remap[:-1] == np.arange(len(texts))).all()) else remap[self.codes]
        k = len(final)
        dtype = np.int8 if k < 127 else (np.int16 if k < 32767 else np.int32)
        cats = pd.Index(list(final)) if final else _NO_CATEGORIES
        return pd.Categorical.from_codes(codes.astype(dtype), categories=cats)


def _cat_of(values: list[Any], transform: Any = None) -> pd.Categorical:
    c = _CatColumn(len(values))
    c.put(None, values)
    return c.finish(transform)


def _ints(objs: list[Any], attr: str, name: str, ctx: _Ctx, rows: np.ndarray | None = None) -> np.ndarray:
    """Attribute ``attr`` of every object as int64 (-1 missing), C-level when all are ints.

    ``np.fromiter(map(attrgetter))`` converts each value while it is in cache and builds no list
    (~25% faster than a list comprehension then ``np.fromiter``); other values take
    ``_to_int_array`` (whose blocks keep the plain ints at C speed).
    """
    try:
        return np.fromiter(map(attrgetter(attr), objs), dtype=np.int64, count=len(objs))
    except (TypeError, ValueError, OverflowError):
        return _to_int_array(_col(objs, attr), name, ctx, rows, tried=True)


def _floats(objs: list[Any], attr: str, name: str, ctx: _Ctx, rows: np.ndarray | None) -> np.ndarray:
    """Attribute ``attr`` as float64 (NaN missing); string values (``_LooseEvent``) parsed and reported."""
    if not ctx.loose:  # typed float | None: np.fromiter takes them, a None raises
        try:
            return np.fromiter(map(attrgetter(attr), objs), dtype=np.float64, count=len(objs))
        except (TypeError, ValueError):
            pass
    return _to_float(_col(objs, attr), name, ctx, rows)


def _canon_cat(c: Any) -> str | None:
    return None if c is None else schema.canonical_category(c if isinstance(c, str) else str(c))


class _Part:
    """What ``_extract`` reads from one contiguous run of decoded events, before the trace origin is known.

    Over the run's ``n`` events: ``ts_us`` (float64 µs, NaN where unusable) and the masks ``is_e``
    (rows of the events table), ``is_m`` (``M`` metadata), ``is_flow``, ``is_mem`` (``[memory]``),
    ``is_c`` (counters); ``ns_abs``: ``ts_us`` as exact int64 ns (0 where unusable), or None when a
    value is beyond 2**43 µs; ``e_rows``: the run's positions of the ``events`` rows, in their
    order (sorted by ``ns_abs`` when it is known); ``const``: the numeric ``events`` columns that
    hold one value, with that value as a 1-row array (their ``events`` entry is None; ``_join``
    fills them). ``events``: the events table's columns for the ``is_e`` rows except ``ts_ns``
    (categoricals as ``_CatColumn``, finished once all parts are joined); ``flows`` and
    ``memory``: their columns for their rows (no times); ``counters``: (row among the run's ``C``
    events, name, series, value, pid) tuples; ``threads``: (pid, tid, name, kind) tuples.
    """

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _json_array(raws: list[msgspec.Raw]) -> bytes:
    """``[raw0,raw1,...]`` in one join (the brackets ride on the first and last items: no second copy)."""
    if len(raws) < 2:
        return b"[" + b"".join(raws) + b"]"
    return b",".join([b"[" + bytes(raws[0]), *raws[1:-1], bytes(raws[-1]) + b"]"])


def _decode_args(raws: list[msgspec.Raw], group: str, ctx: _Ctx, rows: np.ndarray) -> list[Any]:
    """The ``args`` of one category group, decoded in one pass into that group's Struct.

    An event whose args have unexpected types (e.g. a list where a number belongs) gets default
    args, reported as ``bad_args`` (strict mode raises). ``rows``: the events' indices in the run.
    """
    try:
        return _ARG_LIST_DECODERS[group].decode(_json_array(raws))
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    one, default = _ARG_ONE_DECODERS[group], _ARG_STRUCTS[group]()
    out, bad = [], []
    for i, r in enumerate(raws):
        try:
            out.append(one.decode(r))
        except (msgspec.DecodeError, msgspec.ValidationError):
            out.append(default)
            bad.append(i)
    ctx.defect("bad_args", "repaired", len(bad), f"{len(bad)} {_REPAIR_TEXT['bad_args']}", int(rows[bad[0]]),
               f"{len(bad)} events have args of unexpected types")
    return out


class _ArgColumns(dict):
    """Args columns of ``n`` rows by name; a numeric one appears (-1 or NaN in every row) when first written."""

    DEFAULTS: dict[str, Any] = {"int": -1, "float": np.nan}

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def __missing__(self, col: str) -> np.ndarray:
        v = self[col] = np.full(self.n, self.DEFAULTS[_ARG_COLUMNS[col]])
        return v


def _arg_columns(args: list[Any], group: str, ctx: _Ctx, rows: np.ndarray, cols: dict[str, Any],
                 at: np.ndarray | None) -> None:
    """Write the columns of ``_FIELDS[group]`` from decoded ``args`` into ``cols`` (at rows ``at``, or whole)."""
    sel = slice(None) if at is None else at
    n = len(args)
    for attr, col, kind in _FIELDS[group]:
        vals = _col(args, attr)
        if attr == "external_id":
            old = _col(args, "external_id_old")
            if old.count(-1) != n:  # 2021 traces spell it "external id"
                v, o = _to_int_array(vals, col, ctx, rows), _to_int_array(old, col, ctx, rows)
                cols[col][sel] = np.where((v == -1) & (o != -1), o, v)
                continue
        if vals.count(_ARG_SPEC[attr][2]) == n:  # the key is in none of them (the default is one object)
            continue
        if kind == "int":
            cols[col][sel] = _to_int_array(vals, col, ctx, rows)
        elif kind == "intish":
            cols[col][sel] = _intish(vals, col, ctx)
        elif kind == "float":
            cols[col][sel] = _num_or_nan(vals)
        elif kind == "raw":
            cols[col].put(at, _raw_texts(vals))
        else:
            cols[col].put(at, vals)


def _extract(holder: list[list[_Event]], ctx: _Ctx, keep: list[Any] | None = None) -> _Part:
    """Decoded events of one run -> ``_Part`` (columns, per-row reports). The events are freed half-way,
    or moved to ``keep`` (a process about to exit skips freeing millions of objects)."""
    report = ctx.report
    evs = holder.pop()
    n_all = len(evs)
    ph_col = _CatColumn(n_all)
    ph_col.put(None, _col(evs, "ph"))
    ph_lut, ph_codes = ph_col.lut, ph_col.codes

    def is_ph(*phs: str) -> np.ndarray:
        lut = np.array([u in phs for u in ph_lut], dtype=bool)
        return lut[ph_codes] if n_all else np.zeros(0, dtype=bool)

    is_x = is_ph("X")
    is_i = is_ph("i", "I")
    is_flow = is_ph("s", "f", "t")
    is_m = is_ph("M")
    is_c = is_ph("C")
    known = is_x | is_i | is_flow | is_m | is_c
    n_other = n_all - int(known.sum())
    if n_other:
        kinds = sorted({str(evs[i].ph) for i in np.flatnonzero(~known)[:1000].tolist()})
        report.add("unsupported_phase", "dropped", n_other,
                   f"{n_other} events with phase {', '.join(kinds)} (not written by Kineto) were ignored")
    inst = np.flatnonzero(is_i)
    is_mem = np.zeros(n_all, dtype=bool)
    is_global = np.zeros(n_all, dtype=bool)
    if inst.size:
        ins = _select(evs, is_i)
        mem_i = np.array([n == "[memory]" for n in _col(ins, "name")], dtype=bool)
        is_mem[inst] = mem_i
        is_global[inst] = np.array([s == "g" for s in _col(ins, "s")], dtype=bool) & ~mem_i
    # global instants ("Iteration Start", "Record Window End") are viewer markers, not activity:
    # left out of the events table (torch-tb-profiler drops them too).
    is_e = (is_x | is_i) & ~is_mem & ~is_global
    rows_e = np.flatnonzero(is_e)
    E = _select(evs, is_e)
    nE = len(E)

    ts_all = _floats(evs, "ts", "ts", ctx, np.arange(n_all))
    ok_e = np.isfinite(ts_all[rows_e])
    missing_ts = int(np.count_nonzero(~ok_e))
    if missing_ts:
        ctx.defect("missing_ts", "dropped", missing_ts, f"{missing_ts} events had no usable 'ts' and were dropped",
                   int(rows_e[np.flatnonzero(~ok_e)[0]]), f"{missing_ts} events have no usable 'ts'")

    # --- durations: instants 0; missing -> 0; negative (e.g. -1) -> clamped to 0
    dur_us = _floats(E, "dur", "dur", ctx, rows_e)
    dur_f = np.rint(dur_us * 1000.0)
    x_e = is_x[rows_e]
    missing_dur = ~np.isfinite(dur_f)
    n_missing_dur = int(np.count_nonzero(missing_dur & x_e & ok_e))
    dur_f[missing_dur] = 0
    neg = dur_f < 0
    n_neg = int(np.count_nonzero(neg & ok_e))
    if n_neg:
        first_neg = int(np.flatnonzero(neg)[0])
        ctx.defect("negative_dur", "repaired", n_neg, f"{n_neg} events had negative dur (e.g. -1): clamped to 0",
                   int(rows_e[first_neg]), f"{n_neg} events have negative 'dur' (e.g. {dur_us[first_neg]})")
    if n_missing_dur:
        report.add("missing_dur", "repaired", n_missing_dur, f"{n_missing_dur} complete events had no dur: set to 0")
    dur_f[neg] = 0
    del dur_us

    frows = np.flatnonzero(is_flow)
    flows = _flow_columns(_select(evs, is_flow), is_ph("s")[frows], ctx)
    mrows = np.flatnonzero(is_mem)
    memory = _memory_columns(_select(evs, is_mem), ctx, mrows)
    counters = _counter_rows(_select(evs, is_c))
    threads = _thread_rows(_select(evs, is_m), ctx)

    # --- categories, names
    cats_raw = _col(E, "cat")
    if cats_raw.count(None):
        # legacy autograd-profiler traces (bare array) have no "cat"; CPU ops sit in pid "CPU functions"
        pids = _col(E, "pid")
        legacy = [i for i, (c, p) in enumerate(zip(cats_raw, pids)) if c is None and p == "CPU functions"]
        for i in legacy:
            cats_raw[i] = schema.CPU_OP
        if legacy:
            report.add("legacy_cpu_functions", "assumed", len(legacy),
                       f"{len(legacy)} events without a category in pid \"CPU functions\" (legacy autograd "
                       "profiler export) read as cpu_op")
    cat = _CatColumn(nE)
    cat.put(None, cats_raw)
    del cats_raw
    name = _CatColumn(nE)
    name.put(None, _col(E, "name"))
    canon = [_canon_cat(u) for u in cat.lut]

    def in_set(s: frozenset[str] | set[str]) -> np.ndarray:
        lut = np.array([c in s for c in canon] + [False], dtype=bool)
        return lut[cat.codes] if cat.codes is not None else np.zeros(nE, dtype=bool)

    is_dev = in_set(schema.DEVICE_CATEGORIES)
    is_rt = in_set(_RT_GROUP) & ~is_dev
    no_args = in_set(_NO_ARGS_CATEGORIES)
    is_op = ~(is_dev | is_rt | no_args)

    cols = _ArgColumns(nE)
    for col, kind in _ARG_COLUMNS.items():
        if kind not in ("int", "float"):
            cols[col] = _CatColumn(nE)
    args_e = _col(E, "args")
    for mask, group in ((is_op, "host op"), (is_rt, "runtime"), (is_dev, "device")):
        rows = np.flatnonzero(mask)
        if rows.size:
            args = _decode_args(_select(args_e, mask), group, ctx, rows_e[rows])
            _arg_columns(args, group, ctx, rows_e[rows], cols, rows)
            if keep is not None:
                keep.append(args)
            del args
    del args_e

    for col, kind in _ARG_COLUMNS.items():  # a key in no event: one row stands for all (``const``)
        if kind in ("int", "float") and col not in cols:
            cols[col] = np.full(min(nE, 1), _ArgColumns.DEFAULTS[kind])
    pid = _ints(E, "pid", "pid", ctx, rows_e)
    tid = _ints(E, "tid", "tid", ctx, rows_e)
    if keep is not None:
        keep += [E, evs]
    del E, evs  # the decoded events (and the file bytes their Raw values point into) go here
    dev_arg, stream_arg = cols["device"], cols["stream"]
    device = np.where(is_dev, np.where(dev_arg >= 0, dev_arg, pid), -1)
    stream = np.where(is_dev, np.where(stream_arg >= 0, stream_arg, tid), -1)
    ph_e = _CatColumn(nE)
    ph_e.lut, ph_e.codes = ph_lut, ph_codes[rows_e]
    events = {
        "dur_ns": dur_f.astype(np.int64),
        "name": name,
        "cat": cat,
        "ph": ph_e,
        "pid": np.where(is_dev, device, pid),  # device rows: pid = device, tid = stream
        "tid": np.where(is_dev, stream, tid),
        "device": device.astype(np.int16),
        "stream": stream,
        "correlation": cols["correlation"],
        "external_id": cols["external_id"],
        "seq": cols["seq"],
        "fwd_tid": cols["fwd_tid"],
        "input_dims": cols["input_dims"],
        "input_types": cols["input_types"],
        "call_stack": cols["call_stack"],
        "module": cols["module"],
        "flops": cols["flops"],
        "bytes": cols["bytes"],
        "grid": cols["grid"],
        "block": cols["block"],
        "registers": cols["registers"].astype(np.int32),
        "shared_mem_bytes": cols["shared_mem_bytes"],
        "occupancy_ratio": (cols["occupancy_ratio"] / 100.0).astype(np.float32),
        "collective": cols["collective"],
        "msg_in_nelems": cols["msg_in_nelems"],
        "msg_out_nelems": cols["msg_out_nelems"],
        "group_size": cols["group_size"].astype(np.int32),
        "dtype": cols["dtype"],
        "pg_name": cols["pg_name"],
    }
    # numeric columns holding one value (most args columns of a CPU trace; an args key in no
    # event is one row already): that value in ``const``, the column left to ``_join``
    const = {}
    for k, v in events.items():
        if isinstance(v, np.ndarray) and len(v) and (
                len(v) < nE or v.min() == v.max() or (np.isnan(v.min(initial=0.0)) and np.isnan(v).all())):
            const[k] = v[:1]
            events[k] = None
    fin = np.isfinite(ts_all)
    small = not fin.any() or float(np.abs(ts_all[fin]).max()) < _EXACT_TS_MIN_US
    ns_abs = _us_to_ns(np.where(fin, ts_all, 0.0)) if small else None
    e_rows = rows_e
    if ns_abs is not None:  # sort the rows by time here (in parallel with the other runs)
        ts_e = ns_abs[rows_e]
        if ts_e.size > 1 and not (ts_e[1:] >= ts_e[:-1]).all():
            o = np.argsort(ts_e, kind="stable")
            e_rows = rows_e[o]
            for k, v in events.items():
                if isinstance(v, _CatColumn):
                    if v.codes is not None:
                        v.codes = v.codes[o]
                elif v is not None:
                    events[k] = v[o]
    return _Part(n=n_all, ts_us=ts_all, ns_abs=ns_abs, e_rows=e_rows, const=const, is_e=is_e, is_m=is_m, is_flow=is_flow, is_mem=is_mem, is_c=is_c,
                 events=events, flows=flows, memory=memory, counters=counters, threads=threads)


# events-table categoricals: column -> text of each unique value (None: str(), missing stays missing)
_CAT_TRANSFORMS: dict[str, Any] = {
    "name": None, "cat": _canon_cat, "ph": None, "input_dims": _compact_json_text,
    "input_types": _compact_json_text, "call_stack": None, "module": None, "grid": _compact_json_text,
    "block": _compact_json_text, "collective": None, "dtype": None, "pg_name": None,
}


def _join(parts: list[_Part], table: str, take: np.ndarray | None = None) -> dict[str, Any]:
    """One table's columns over all parts (categoricals merged, not finished): one after the other,
    then the rows at positions ``take`` of that, when given."""
    out = {}
    for k in getattr(parts[0], table):
        vs = [getattr(p, table)[k] for p in parts]
        if table == "events" and any(v is None for v in vs):  # constant in some parts (``const``)
            c = [p.const.get(k) for p in parts]
            if all(x is not None for x in c) and all(np.array_equal(x, c[0], equal_nan=True) for x in c):
                rows = sum(len(p.e_rows) for p in parts) if take is None else len(take)
                out[k] = np.full(rows, c[0][0], dtype=c[0].dtype)
                continue
            vs = [np.full(len(p.e_rows), x[0], dtype=x.dtype) if v is None else v for v, x, p in zip(vs, c, parts)]
        if isinstance(vs[0], _CatColumn):
            out[k] = vs[0] if len(vs) == 1 and take is None else _CatColumn.concat(vs, take)
        else:
            v = _concat(vs)
            out[k] = v if take is None else v[take]
    return out


def _finish(parts: list[_Part], meta: dict[str, Any], ctx: _Ctx, rank: int | None,
            exact_ts: np.ndarray | None) -> Trace:
    """Parts (in file order) -> Trace: the origin and int64-ns times, flow pairing, sorting, steps."""
    report = ctx.report
    n_all = sum(p.n for p in parts)
    ts_all = _concat([p.ts_us for p in parts])
    is_e, is_m = _concat([p.is_e for p in parts]), _concat([p.is_m for p in parts])
    is_flow, is_mem, is_c = (_concat([getattr(p, k) for p in parts]) for k in ("is_flow", "is_mem", "is_c"))
    rows_e = np.flatnonzero(is_e)
    ok_all = np.isfinite(ts_all)
    ok_e = ok_all[rows_e]
    missing_ts = not ok_e.all()

    # --- time: float64 µs (exact ns below 2**43 µs) or exact integer ns for big fractional ts
    pool = rows_e[ok_e] if ok_e.any() else np.flatnonzero(ok_all & ~is_m)
    base_ns = meta.get("baseTimeNanoseconds")
    has_base = isinstance(base_ns, (int, float)) and not isinstance(base_ns, bool)
    if exact_ts is not None:
        origin_exact = int(exact_ts[pool].min()) if pool.size else 0
        t_all = exact_ts - origin_exact
        if has_base:
            origin_abs: int | None = int(base_ns) + origin_exact
        else:
            origin_abs = origin_exact if origin_exact > 10**18 else None
    elif all(p.ns_abs is not None for p in parts):  # every |ts| < 2**43 µs: exact ns computed by the parts
        ns_all = _concat([p.ns_abs for p in parts])
        origin_rel_ns = int(ns_all[pool].min()) if pool.size else 0
        t_all = np.where(ok_all, ns_all - origin_rel_ns, 0)
        del ns_all
        origin_abs = int(base_ns) + origin_rel_ns if has_base else None
    else:
        origin_us = float(ts_all[pool].min()) if pool.size else 0.0
        if abs(origin_us) < _EXACT_TS_MIN_US and (not pool.size or abs(float(ts_all[pool].max())) < _EXACT_TS_MIN_US):
            ns_all = _us_to_ns(np.where(ok_all, ts_all, origin_us))
            origin_rel_ns = int(_us_to_ns(np.array([origin_us]))[0])
            t_all = ns_all - origin_rel_ns
        else:  # integer-µs absolute timestamps (old traces): no fraction to lose
            t_all = np.rint((np.where(ok_all, ts_all, origin_us) - origin_us) * 1000.0).astype(np.int64)
            whole = int(origin_us)  # integer arithmetic: origin_us * 1000 would round above 2**53
            origin_rel_ns = whole * 1000 + int(round((origin_us - whole) * 1000.0))
        if has_base:
            origin_abs = int(base_ns) + origin_rel_ns
        elif origin_us > 1e15:  # absolute µs since the epoch (old traces)
            origin_abs = origin_rel_ns
        else:
            origin_abs = None
    del ts_all

    flows = _pair_flows(_join(parts, "flows"), t_all[is_flow], ctx)
    memory = _memory_frame(_join(parts, "memory"), t_all[is_mem])
    c_ts = t_all[is_c]
    c_rows, off = [], 0
    for p in parts:
        c_rows += [(int(c_ts[off + r]), *rest) for r, *rest in p.counters]
        off += int(np.count_nonzero(p.is_c))
    counters = _counter_frame(c_rows, ctx)
    threads = _thread_frame([t for p in parts for t in p.threads], ctx)

    offs = np.cumsum([0] + [p.n for p in parts[:-1]])
    ts_parts = [t_all[o + p.e_rows] for o, p in zip(offs, parts)]
    ok_e = _concat([ok_all[o + p.e_rows] for o, p in zip(offs, parts)])  # in the rows' order
    ts_e = _concat(ts_parts)
    # the table's rows: by time, stable (ties in file order), without the events that have no
    # usable ts. Runs whose times are exact arrive sorted (``_extract``), so the sort mostly merges
    # sorted runs (~10 ms per million rows); the columns are gathered once, in ``_join``.
    take = None
    if ts_e.size > 1 and not bool((ts_e[1:] >= ts_e[:-1]).all()):
        take = np.argsort(ts_e, kind="stable")
    if missing_ts:
        take = np.flatnonzero(ok_e) if take is None else take[ok_e[take]]
    data = _join(parts, "events", take)
    for p in parts:
        p.events = None
    data = {"ts_ns": ts_e if take is None else ts_e[take], **data}
    del t_all, ts_parts, ts_e
    for k, transform in _CAT_TRANSFORMS.items():
        data[k] = data[k].finish(transform)
    nE = len(data["ts_ns"])
    data["step"] = np.full(nE, -1, dtype=np.int32)
    data["rank"] = np.zeros(nE, dtype=np.int32)
    data = {k: data[k] for k in schema.EVENT_COLUMNS}
    events = pd.DataFrame(data, copy=False)
    del data

    tmeta = _build_meta(meta, ctx.path, report, origin_abs, rank, events)
    events["rank"] = np.int32(tmeta.rank)
    if events.empty and memory.empty:
        raise TraceFormatError(
            ctx.path, None if ctx.array_start is None else ctx.array_start - 1,
            f"the trace holds no events ({n_all} event objects decoded, none of them a duration, instant "
            "or [memory] event): nothing was profiled"
            + (f"; load report: {'; '.join(i.message for i in report.issues)}" if report.issues else ""),
        )
    _assign_steps(events, memory, report)
    _check_overlaps(events, report)
    return Trace(events=events, flows=flows, memory=memory, counters=counters, threads=threads, meta=tmeta,
                 report=report)


def _flow_columns(F: list[_Event], is_s: np.ndarray, ctx: _Ctx) -> dict[str, Any]:
    """Flow events (``ph`` s/f/t; ``is_s`` marks the starts) -> id, category, start flag, pid, tid
    (times are added by ``_finish``)."""
    n = len(F)
    try:
        fid = np.fromiter(map(attrgetter("id"), F), dtype=np.int64, count=n)
    except (TypeError, ValueError, OverflowError):
        ids = [int(v) if isinstance(v, float) and np.isfinite(v) else v for v in _col(F, "id")]
        fid = _to_int_array(ids, "flow id", ctx)
    cat = _CatColumn(n)
    if n:
        cat.put(None, _col(F, "cat"))
    return {
        "id": fid,
        "cat": cat,
        "is_s": is_s,
        "pid": _ints(F, "pid", "pid", ctx),
        "tid": _ints(F, "tid", "tid", ctx),
    }


def _flow_cat(c: Any) -> str:
    return "ac2g" if c in ("async", "async_cpu_to_gpu") else str(c or "")


def _pair_flows(cols: dict[str, Any], ts_ns: np.ndarray, ctx: _Ctx) -> pd.DataFrame:
    """Pair flow starts (``ph: s``) with their finishes (``f``/``t``), losslessly.

    Within one (category, id), events are taken in time order and each finish pairs with the latest
    start before it; Kineto reuses ids (one start with several finishes, e.g. a graph launch, or the
    same id again later), so every start and every finish appears in exactly one row: a start without
    finish keeps ``dst_*`` = -1, a finish without start keeps ``src_*`` = -1. ``async``/``async_cpu_to_gpu``
    (2021-2023 spellings) are read as ``ac2g``. Rows are ordered by source time (orphan finishes by theirs).
    """
    fid = cols["id"]
    if not len(fid):
        return schema.empty_frame(schema.FLOW_COLUMNS)
    cat = cols["cat"].finish(_flow_cat)
    ccode = np.asarray(cat.codes).astype(np.int64)
    is_s, pid, tid = cols["is_s"], cols["pid"], cols["tid"]
    ncat = max(len(cat.categories), 1)
    # one sortable key per (category, id); ids are < 2**56 in every real trace
    key = fid * ncat + np.where(ccode < 0, 0, ccode)
    ts = np.asarray(ts_ns, dtype=np.int64)
    order = np.lexsort((~is_s, ts, key))  # by key, then time, a start before a finish at the same time
    k, s_o = key[order], is_s[order]
    pos = np.arange(len(order))
    last_s = np.maximum.accumulate(np.where(s_o, pos, -1))
    f_at = np.flatnonzero(~s_o)
    src_at = last_s[f_at]
    paired = (src_at >= 0) & (k[np.clip(src_at, 0, None)] == k[f_at])
    used = np.zeros(len(order), dtype=bool)
    used[src_at[paired]] = True
    lone_s = np.flatnonzero(s_o & ~used)
    # rows: (source position or -1, finish position or -1), in sorted-order positions
    src_pos = np.concatenate([np.where(paired, src_at, -1), lone_s])
    dst_pos = np.concatenate([f_at, np.full(len(lone_s), -1)])
    src_idx = np.where(src_pos >= 0, order[np.clip(src_pos, 0, None)], -1)
    dst_idx = np.where(dst_pos >= 0, order[np.clip(dst_pos, 0, None)], -1)
    any_idx = np.where(src_idx >= 0, src_idx, dst_idx)
    row_order = np.lexsort((np.where(dst_idx >= 0, ts[np.clip(dst_idx, 0, None)], -1), ts[any_idx]))
    src_idx, dst_idx, any_idx = src_idx[row_order], dst_idx[row_order], any_idx[row_order]

    def side(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.where(idx >= 0, a[np.clip(idx, 0, None)], -1).astype(np.int64)

    return pd.DataFrame(
        {
            "id": fid[any_idx],
            "cat": cat.take(any_idx),
            "src_ts_ns": side(ts, src_idx),
            "src_pid": side(pid, src_idx),
            "src_tid": side(tid, src_idx),
            "dst_ts_ns": side(ts, dst_idx),
            "dst_pid": side(pid, dst_idx),
            "dst_tid": side(tid, dst_idx),
        }
    )


_MEMORY_INTS = {"device_type": np.int8, "device": np.int16, "addr": np.int64, "bytes": np.int64,
                "total_allocated": np.int64, "total_reserved": np.int64}


def _memory_columns(M: list[_Event], ctx: _Ctx, rows: np.ndarray) -> dict[str, np.ndarray]:
    """``[memory]`` instants -> pid, tid and the int64 args columns (-1 missing; times added by ``_finish``)."""
    cols: dict[str, np.ndarray] = {k: np.full(len(M), -1, dtype=np.int64) for k in _MEMORY_INTS}
    if M:
        args = _decode_args(_col(M, "args"), "memory", ctx, rows)
        _arg_columns(args, "memory", ctx, rows, cols, None)
    return {"pid": _ints(M, "pid", "pid", ctx, rows), "tid": _ints(M, "tid", "tid", ctx, rows),
            **{k: cols[k].astype(t) for k, t in _MEMORY_INTS.items()}}


def _memory_frame(cols: dict[str, np.ndarray], ts_ns: np.ndarray) -> pd.DataFrame:
    if not len(ts_ns):
        return schema.empty_frame(schema.MEMORY_COLUMNS)
    df = pd.DataFrame({"ts_ns": ts_ns, **cols, "step": np.full(len(ts_ns), -1, dtype=np.int32)})
    if ts_ns.size > 1 and not (ts_ns[1:] >= ts_ns[:-1]).all():
        df = df.take(np.argsort(ts_ns, kind="stable"))
    return df.reset_index(drop=True)


def _counter_rows(C: list[_Event]) -> list[tuple[Any, ...]]:
    """Chrome-trace ``C`` events -> (row, name, series, value, pid) per (event, series); args are free-form."""
    out = []
    for i, e in enumerate(C):
        try:
            a = _ANY_DECODER.decode(e.args)
        except msgspec.DecodeError:
            a = {}
        if not isinstance(a, dict) or not a:
            a = {"": None}
        for k, v in a.items():
            val = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan
            out.append((i, str(e.name), str(k), val, e.pid))
    return out


def _counter_frame(rows: list[tuple[Any, ...]], ctx: _Ctx) -> pd.DataFrame:
    """(ts_ns, name, series, value, pid) tuples -> the counters table (one row per event and series)."""
    if not rows:
        return schema.empty_frame(schema.COUNTER_COLUMNS)
    df = pd.DataFrame(rows, columns=["ts_ns", "name", "series", "value", "pid"])
    return pd.DataFrame(
        {
            "ts_ns": df["ts_ns"].astype(np.int64),
            "name": _cat_of(df["name"].tolist()),
            "series": _cat_of(df["series"].tolist()),
            "value": df["value"].astype(np.float64),
            "pid": _to_int_array(df["pid"].tolist(), "pid", ctx),
        }
    )


_THREAD_KINDS = {"process_name": "process", "thread_name": "thread", "process_labels": "process_labels"}


def _thread_rows(Mv: list[_Event], ctx: _Ctx) -> list[tuple[Any, ...]]:
    """``M`` events naming processes/threads -> (pid, tid, name, kind) tuples."""
    keep = [e for e in Mv if e.name in _THREAD_KINDS]
    if not keep:
        return []
    args = _decode_args(_col(keep, "args"), "metadata", ctx, np.full(len(keep), -1))
    rows = []
    for e, a in zip(keep, args):
        val = a.labels if e.name == "process_labels" else a.mname
        rows.append((e.pid, e.tid, "" if val is None else str(val), _THREAD_KINDS[e.name]))
    return rows


def _thread_frame(rows: list[tuple[Any, ...]], ctx: _Ctx) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["pid_raw", "tid_raw", "name", "kind"])
    df["pid"] = _to_int_array(df["pid_raw"].tolist(), "pid", ctx) if len(df) else np.array([], np.int64)
    df["tid"] = _to_int_array(df["tid_raw"].tolist(), "tid", ctx) if len(df) else np.array([], np.int64)
    return df[["pid", "tid", "name", "kind"]].drop_duplicates().reset_index(drop=True)


_FLAG_KEYS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")


def _build_meta(
    meta: dict[str, Any], path: str, report: LoadReport, origin_abs: int | None, rank: int | None, events: pd.DataFrame
) -> TraceMeta:
    dist = meta.get("distributedInfo") or {}
    if not isinstance(dist, dict):
        dist = {}
    devprops = meta.get("deviceProperties") or meta.get("computeProperties") or []
    if not isinstance(devprops, list):
        devprops = []
    flags = {k: meta[k] for k in _FLAG_KEYS if k in meta}
    extra = {k: v for k, v in meta.items() if k not in {"distributedInfo", "deviceProperties", "schemaVersion", *_FLAG_KEYS}}
    if rank is not None:
        r, src = int(rank), "given"
    elif isinstance(dist.get("rank"), int) and not isinstance(dist.get("rank"), bool):
        r, src = int(dist["rank"]), "distributedInfo"
    else:
        fr = rank_from_filename(path)
        if fr is not None:
            r, src = fr, "filename"
            report.add("rank_from_filename", "assumed", 1, f"no distributedInfo.rank: rank {fr} taken from the file name")
        else:
            r, src = 0, "assumed"
            report.add("rank_assumed", "assumed", 1, "no distributedInfo.rank and no rank in the file name: rank assumed 0")
    ws = dist.get("world_size")
    world = int(ws) if isinstance(ws, int) and ws > 0 else max(1, r + 1 if src != "assumed" else 1)
    rocm = any(k.startswith(("hip_", "roctracer")) for k in meta) or any(
        "AMD" in str(d.get("name", "")) for d in devprops if isinstance(d, dict)
    )
    producer = "PyTorch/Kineto (ROCm)" if rocm else "PyTorch/Kineto"
    if meta.get("Framework"):
        producer += f" ({meta['Framework']})"
    sv = meta.get("schemaVersion")
    return TraceMeta(
        source_path=path,
        source_format="kineto",
        producer=producer,
        origin_ns=origin_abs,
        rank=r,
        world_size=world,
        rank_source=src,
        distributed_info=dist,
        device_properties=[d for d in devprops if isinstance(d, dict)],
        schema_version=sv if isinstance(sv, int) else None,
        flags=flags,
        extra=extra,
    )


def _assign_steps(events: pd.DataFrame, memory: pd.DataFrame, report: LoadReport) -> None:
    """Set ``step`` from ``ProfilerStep#N`` ranges: host rows by time, device rows via correlation.

    Device rows whose launching runtime call has no step fall back to time containment.
    A trace without ``ProfilerStep#N`` keeps step -1 everywhere, noted in the report.
    """
    if events.empty:
        return
    names = events["name"]
    cats = names.cat.categories
    step_codes = [i for i, c in enumerate(cats) if isinstance(c, str) and _STEP_RE.search(c)]
    if not step_codes:
        report.add("no_steps", "assumed", 0,
                   "no ProfilerStep#N events (profiler used without schedule/step()): step is -1 for every event")
        return
    is_step = names.cat.codes.isin(step_codes).to_numpy() & (events["device"].to_numpy() < 0)
    st = events.loc[is_step, ["ts_ns", "dur_ns", "name"]].copy()
    st["n"] = [int(_STEP_RE.search(str(n)).group(1)) for n in st["name"]]
    st = st.sort_values("ts_ns").drop_duplicates("n")
    starts = st["ts_ns"].to_numpy()
    ends = starts + st["dur_ns"].to_numpy()
    nums = st["n"].to_numpy().astype(np.int32)

    def by_time(ts: np.ndarray) -> np.ndarray:
        i = np.searchsorted(starts, ts, side="right") - 1
        ok = (i >= 0) & (ts < ends[np.clip(i, 0, None)])
        return np.where(ok, nums[np.clip(i, 0, None)], -1).astype(np.int32)

    ts = events["ts_ns"].to_numpy()
    step = by_time(ts)
    dev = events["device"].to_numpy() >= 0
    if dev.any():
        corr = events["correlation"].to_numpy()
        host_rt = (~dev) & (corr >= 0)
        lut = pd.Series(step[host_rt], index=corr[host_rt])
        lut = lut[~lut.index.duplicated()]
        mapped = lut.reindex(corr[dev]).to_numpy()
        dev_step = np.where(np.isnan(mapped), step[dev], mapped).astype(np.int32)
        step[dev] = dev_step
    events["step"] = step
    if len(memory):
        memory["step"] = by_time(memory["ts_ns"].to_numpy())


def _check_overlaps(events: pd.DataFrame, report: LoadReport) -> None:
    """Flag device ops on one stream that start before the previous one ends (ROCm deferred stamps).

    Rows are kept as recorded; busy-time analyses must take the union of intervals per stream
    (AMD-AGI/TraceLens#669: summing raw ``dur`` over-counts).
    """
    cats = events["cat"].cat
    busy = np.array([c in ("kernel", "gpu_memcpy", "gpu_memset") for c in cats.categories] + [False], dtype=bool)
    sel = np.flatnonzero(busy[cats.codes.to_numpy()] & (events["device"].to_numpy() >= 0))
    if len(sel) < 2:
        return
    t, dv, sv = (events[c].to_numpy()[sel] for c in ("ts_ns", "device", "stream"))
    o = np.lexsort((t, sv, dv))  # by device, stream, then time (stable)
    t, dv, sv = t[o], dv[o], sv[o]
    end = t + events["dur_ns"].to_numpy()[sel][o]
    same = (dv[1:] == dv[:-1]) & (sv[1:] == sv[:-1])
    # running max of ends within a stream, so an op overlapping any earlier op counts once
    grp = np.concatenate([[0], np.cumsum(~same)])
    run_end = pd.Series(end).groupby(grp).cummax().to_numpy()
    ov = same & (t[1:] < run_end[:-1])
    n = int(ov.sum())
    if n:
        over_ns = int(np.clip(np.minimum(end[1:], run_end[:-1]) - t[1:], 0, None)[ov].sum())
        report.add(
            "overlapping_device_ops",
            "flagged",
            n,
            f"{n} device ops start before an earlier op on the same stream ends ({over_ns} ns overlap in all); "
            "kept as recorded, busy-time analyses take the union of intervals so overlap is never double-counted",
        )
