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
Decoding is typed and column-selective: one msgspec pass (cyclic GC paused) decodes every
event into ``gc=False`` Structs holding only the fields nbprof keeps (``_Event``/``_Args``;
unknown keys are skipped by the decoder, the metadata around ``traceEvents`` is read without
a second parse of the events). Columns are then read per category group, only the fields that
group carries (host ops: shapes/stack/sequence/collective; runtime calls: correlation and
ROCm launch geometry; device ops: device/stream/grid/block/registers/...; ``python_function``:
none), with list comprehensions compiled per field name and ``np.fromiter``; categoricals are
coded with ``dict.fromkeys`` over the values and built from codes. The decoded events (and
the file bytes) are freed before the events table is assembled and sorted, which keeps the
peak memory near the decode's. Measured numbers: ``benchmarks/README.md``.

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
import os
import re
import zlib
from contextlib import contextmanager
from operator import attrgetter, itemgetter
from typing import Any, Iterator

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


class _Args(msgspec.Struct, gc=False, frozen=True):
    """The ``args`` keys nbprof keeps, for every category (absent keys cost nothing but a default).

    Which keys a category carries (formats.md §4.2): host ops (cpu_op, user_annotation, old
    ``Operator``): External id, Sequence number, Fwd thread id, Input Dims/type, Call stack,
    Module Hierarchy, flops, collective fields (record_param_comms); runtime calls: External id,
    correlation (ROCm's hipLaunchKernel also grid/block/shared memory; Triton launches a "grid"
    string); device ops: External id, correlation, device, stream, bytes, grid, block, registers,
    shared memory, occupancy, NCCL collective fields; ``[memory]``: Bytes, Total Allocated/Reserved,
    Device Type/Id, Addr; ``M`` events: name, labels.
    """

    external_id: _Int = msgspec.field(default=-1, name="External id")
    external_id_old: _Int = msgspec.field(default=-1, name="external id")
    correlation: _Int = -1
    device: _Int = -1
    stream: _Int = -1
    seq: _Int = msgspec.field(default=-1, name="Sequence number")
    fwd_tid: _Int = msgspec.field(default=-1, name="Fwd thread id")
    input_dims: msgspec.Raw = msgspec.field(default=_EMPTY_RAW, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=_EMPTY_RAW, name="Input type")
    call_stack: str | None = msgspec.field(default=None, name="Call stack")
    module: str | None = msgspec.field(default=None, name="Module Hierarchy")
    flops: _Num = _NAN
    nbytes: _Num = msgspec.field(default=-1, name="bytes")
    grid: msgspec.Raw = _EMPTY_RAW
    block: msgspec.Raw = _EMPTY_RAW
    registers: _Num = msgspec.field(default=-1, name="registers per thread")
    shared_mem: _Num = msgspec.field(default=-1, name="shared memory")
    occupancy: _Num = msgspec.field(default=_NAN, name="est. achieved occupancy %")
    collective: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: _Int = msgspec.field(default=-1, name="In msg nelems")
    out_nelems: _Int = msgspec.field(default=-1, name="Out msg nelems")
    group_size: _Int = msgspec.field(default=-1, name="Group size")
    dtype: str | None = None
    pg_name: str | None = msgspec.field(default=None, name="Process Group Name")
    mem_bytes: _Num = msgspec.field(default=-1, name="Bytes")
    total_alloc: _Num = msgspec.field(default=-1, name="Total Allocated")
    total_reserved: _Num = msgspec.field(default=-1, name="Total Reserved")
    device_type: _Num = msgspec.field(default=-1, name="Device Type")
    device_id: _Num = msgspec.field(default=-1, name="Device Id")
    addr: _Num = msgspec.field(default=-1, name="Addr")
    mname: str | int | float | None = msgspec.field(default=None, name="name")
    labels: str | int | float | None = None


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str | int | float | None = ""
    pid: int | str | None = -1
    tid: int | str | None = -1
    ts: float | str | None = None
    dur: float | str | None = None
    id: int | float | str | None = None
    s: str | None = None
    args: _Args = _NO_ARGS


class _EventRawArgs(msgspec.Struct, gc=False):
    """Same event with undecoded args: used when one event's args have unexpected types."""

    ph: str = ""
    cat: str | None = None
    name: str | int | float | None = ""
    pid: int | str | None = -1
    tid: int | str | None = -1
    ts: float | str | None = None
    dur: float | str | None = None
    id: int | float | str | None = None
    s: str | None = None
    args: msgspec.Raw = _EMPTY_RAW


class _CounterArgs(msgspec.Struct, gc=False):
    ph: str = ""
    args: msgspec.Raw = _EMPTY_RAW


class _TsOnly(msgspec.Struct, gc=False):
    ts: msgspec.Raw = _EMPTY_RAW


_EVENT_DECODER = msgspec.json.Decoder(list[_Event])
_ONE_EVENT_DECODER = msgspec.json.Decoder(_Event)
_TS_DECODER = msgspec.json.Decoder(list[_TsOnly])
_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_ANY_DECODER = msgspec.json.Decoder()
_LENIENT_EVENT_DECODER = msgspec.json.Decoder(_EventRawArgs)
_COUNTER_DECODER = msgspec.json.Decoder(list[_CounterArgs])


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
            return data.rindex(b"]", start - 1, start - 1 + int(m.group(1))) + 1
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
                ev, bad_args = _decode_one(cand)
                return ev, used + (["bad_args"] if bad_args else [])
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
            events.extend(_EVENT_DECODER.decode(mv[seg:]))
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
                events.extend(_EVENT_DECODER.decode(mv[seg:end]))  # the array itself is fine now
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
                events.extend(_EVENT_DECODER.decode(mv[seg : comma + 1]))
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
                events.append(_decode_one(rest)[0])
                truncated_at = n
            except (msgspec.DecodeError, msgspec.ValidationError):
                truncated_at = cstart
            end = None
            break
        chunk = bytes(buf[cstart:chunk_end])
        try:
            ev, bad_args = _decode_one(chunk)
            if bad_args:
                if strict:
                    raise TraceFormatError(path, cstart, "event args of unexpected types", event_index=len(events))
                repairs.setdefault("bad_args", []).append(cstart)
            events.append(ev)
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


def _first_bad(values: list[Any], ok: Any) -> int | None:
    for i, v in enumerate(values):
        if not ok(v):
            return i
    return None


def _to_int_array(
    values: list[Any], name: str, ctx: _Ctx, rows: np.ndarray | None = None
) -> np.ndarray:
    """list of int|float|str|None -> int64 with -1 for missing.

    Fast path ``np.fromiter``; else strings like ``"12"`` are parsed, floats truncated,
    unsigned 64-bit values keep their bit pattern, larger integers become -1 (reported).
    """
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.empty(len(values), dtype=np.int64)
    bad: list[int] = []
    nstr = 0
    for i, v in enumerate(values):
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
            nstr += 1
    if bad:
        k = int(rows[bad[0]]) if rows is not None else None
        if ctx.strict:
            ctx.fail(f"{len(bad)} values of {name!r} are integers above 64 bits (e.g. {values[bad[0]]})", k)
        ctx.report.add(
            f"bigint_{name}", "repaired", len(bad),
            f"{len(bad)} values of {name!r} were integers above 64 bits: set to -1",
            offset=ctx.event_offset(k),
        )
    return out


def _to_float(values: list[Any], what: str, ctx: _Ctx, rows: np.ndarray | None) -> np.ndarray:
    """float|int|str|None values -> float64 with NaN for missing; string-typed values parsed and reported."""
    try:
        if str not in set(map(type, values)):  # np.fromiter would parse "12.5" silently
            return np.fromiter(values, dtype=np.float64, count=len(values))
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
        k = int(rows[strs[0]])
        if ctx.strict:
            ctx.fail(f"{len(strs)} events have string-typed {what!r} (e.g. {values[strs[0]]!r})", k)
        ctx.report.add(
            f"string_{what}", "repaired", len(strs),
            f"{len(strs)} events had string-typed '{what}': converted to numbers",
            offset=ctx.event_offset(k),
        )
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


def _take(objs: list[Any], idx: np.ndarray) -> list[Any]:
    """``[objs[i] for i in idx]`` at C speed."""
    n = len(idx)
    if n == 0:
        return []
    if n == 1:
        return [objs[int(idx[0])]]
    if n == len(objs):
        return objs
    return list(itemgetter(*idx.tolist())(objs))


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
        f = _GETTERS[attr] = eval(f"lambda xs: [x.{attr} for x in xs]")  # noqa: S307 - attr is one of our field names
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
        The (decompressed) file content, when already in memory.

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
    """
    spath = os.fspath(path)
    report = LoadReport(path=spath)
    if data is None:
        data = read_bytes(spath, report)
    if strict and not report.clean:
        raise TraceFormatError(spath, report.issues[0].offset, report.issues[0].message)
    if not _first_char(data):
        raise TraceFormatError(spath, 0, "file is empty (0 bytes of JSON): no trace was written")
    with _gc_paused():
        ctx = _Ctx(spath, report, strict, data)
        events, meta, exact_ts = _decode(data, ctx)
        data = None  # noqa: F841 - the bytes go once the events no longer reference them
        holder = [events]  # _build frees the decoded events half-way; hold no other reference
        del events
        trace = _build(holder, meta, ctx, rank, exact_ts)
    return trace


def _decode(data: bytes, ctx: _Ctx) -> tuple[list[_Event], dict[str, Any], np.ndarray | None]:
    first = _first_char(data)
    try:
        if first == b"[":
            ctx.array_start = data.index(b"[") + 1
            events = _EVENT_DECODER.decode(data)
            meta: dict[str, Any] = {}
            raw_events: Any = data
        else:
            quick = _split_top(data)
            if quick is not None:  # one pass over the events instead of two
                ctx.array_start, end, meta = quick
                raw_events = memoryview(data)[ctx.array_start - 1 : end]
                events = _EVENT_DECODER.decode(raw_events)
                return events, meta, _maybe_exact_ts(data, raw_events, events)
            top = _TOP_DECODER.decode(data)
            raw_events = top.pop("traceEvents", None)
            if raw_events is None:
                raise TraceFormatError(ctx.path, 0, "no 'traceEvents' key in the top-level object: not a Kineto trace")
            ctx.array_start = _events_array_start(data)
            events = _EVENT_DECODER.decode(raw_events)
            meta = {k: _ANY_DECODER.decode(v) for k, v in top.items()}
        return events, meta, _maybe_exact_ts(data, raw_events, events)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        msg = str(exc)
        if first not in (b"{", b"["):
            raise TraceFormatError(ctx.path, 0, f"not a JSON trace (starts with {data[:16]!r})") from exc
        if ctx.strict:
            off = _strict_offset(data, msg, ctx)
            raise TraceFormatError(ctx.path, off, msg) from exc
        ctx.fast = False
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


def _decode_one(chunk: bytes) -> tuple[_Event, bool]:
    """One event; if only its args have unexpected types, the event with default args (flag True)."""
    try:
        return _ONE_EVENT_DECODER.decode(chunk), False
    except msgspec.ValidationError:
        e = _LENIENT_EVENT_DECODER.decode(chunk)  # raises again when the event itself is bad
        return _Event(ph=e.ph, cat=e.cat, name=e.name, pid=e.pid, tid=e.tid, ts=e.ts, dur=e.dur, id=e.id, s=e.s), True


# per category group: (args attribute, column, kind) with kind int | intish | float | str | raw
_FIELDS = {
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
}
_ARG_COLUMNS = {
    "external_id": "int", "correlation": "int", "device": "int", "stream": "int", "seq": "int", "fwd_tid": "int",
    "input_dims": "raw", "input_types": "raw", "call_stack": "str", "module": "str", "flops": "float",
    "bytes": "int", "grid": "raw", "block": "raw", "registers": "int", "shared_mem_bytes": "int",
    "occupancy_ratio": "float", "collective": "str", "msg_in_nelems": "int", "msg_out_nelems": "int",
    "group_size": "int", "dtype": "str", "pg_name": "str",
}
_NO_ARGS_CATEGORIES = frozenset({schema.PYTHON_FUNCTION})
_RT_GROUP = schema.RUNTIME_CATEGORIES | {schema.CUDA_SYNC}
_KNOWN_PHASES = frozenset({"X", "i", "I", "s", "f", "t", "M", "C"})


_NO_CATEGORIES = pd.Index([], dtype="float64")


class _CatColumn:
    """Builds a categorical column from per-group value lists without an n-sized object array."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lut: dict[Any, int] = {}
        self.codes: np.ndarray | None = None

    def put(self, rows: np.ndarray | None, values: list[Any]) -> None:
        lut = self.lut
        for u in dict.fromkeys(values):
            if u not in lut:
                lut[u] = len(lut)
        codes = np.fromiter(map(lut.__getitem__, values), dtype=np.int32, count=len(values))
        if rows is None:
            self.codes = codes
            return
        if self.codes is None:
            self.codes = np.full(self.n, -1, dtype=np.int32)
            self.lut.setdefault(None, len(self.lut))
            self.codes[:] = self.lut[None]
        self.codes[rows] = codes

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
    """Attribute ``attr`` of every object as int64 (-1 missing), C-level when all are ints."""
    try:
        vals = _col(objs, attr)
        return np.fromiter(vals, dtype=np.int64, count=len(objs))
    except (TypeError, ValueError, OverflowError):
        return _to_int_array(vals, name, ctx, rows)


def _floats(objs: list[Any], attr: str, name: str, ctx: _Ctx, rows: np.ndarray | None) -> np.ndarray:
    try:
        vals = _col(objs, attr)
        if str in set(map(type, vals)):  # np.fromiter would parse "12.5" silently: report it
            raise TypeError
        return np.fromiter(vals, dtype=np.float64, count=len(objs))
    except (TypeError, ValueError):
        return _to_float(vals, name, ctx, rows)


def _canon_cat(c: Any) -> str | None:
    return None if c is None else schema.canonical_category(c if isinstance(c, str) else str(c))


def _build(holder: list[list[_Event]], meta: dict[str, Any], ctx: _Ctx, rank: int | None,
           exact_ts: np.ndarray | None) -> Trace:
    """Decoded events -> Trace. Small tables first; the decoded events are freed before the events
    table is assembled and sorted, which keeps the peak memory near that of the decode."""
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
        ins = _take(evs, inst)
        mem_i = np.array([n == "[memory]" for n in _col(ins, "name")], dtype=bool)
        is_mem[inst] = mem_i
        is_global[inst] = np.array([s == "g" for s in _col(ins, "s")], dtype=bool) & ~mem_i
    # global instants ("Iteration Start", "Record Window End") are viewer markers, not activity:
    # left out of the events table (torch-tb-profiler drops them too).
    rows_e = np.flatnonzero((is_x | is_i) & ~is_mem & ~is_global)
    E = _take(evs, rows_e)
    nE = len(E)

    # --- time: float64 µs (exact ns below 2**40 µs) or exact integer ns for big fractional ts
    ts_all = _floats(evs, "ts", "ts", ctx, np.arange(n_all))
    ok_all = np.isfinite(ts_all)
    ok_e = ok_all[rows_e]
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
    missing_ts = int(np.count_nonzero(~ok_e))
    if missing_ts:
        k = int(rows_e[np.flatnonzero(~ok_e)[0]])
        if ctx.strict:
            ctx.fail(f"{missing_ts} events have no usable 'ts'", k)
        report.add("missing_ts", "dropped", missing_ts, f"{missing_ts} events had no usable 'ts' and were dropped",
                   offset=ctx.event_offset(k))

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
        k = int(rows_e[np.flatnonzero(neg)[0]])
        if ctx.strict:
            ctx.fail(f"{n_neg} events have negative 'dur' (e.g. {dur_us[np.flatnonzero(neg)[0]]})", k)
        report.add("negative_dur", "repaired", n_neg, f"{n_neg} events had negative dur (e.g. -1): clamped to 0",
                   offset=ctx.event_offset(k))
    if n_missing_dur:
        report.add("missing_dur", "repaired", n_missing_dur, f"{n_missing_dur} complete events had no dur: set to 0")
    dur_f[neg] = 0
    del dur_us

    flows = _build_flows(_take(evs, np.flatnonzero(is_flow)), t_all[is_flow], ctx)
    mrows = np.flatnonzero(is_mem)
    memory = _build_memory(_take(evs, mrows), t_all[mrows], ctx, mrows)
    crows = np.flatnonzero(is_c)
    counters = _build_counters(_take(evs, crows), t_all[crows], ctx, crows)
    threads = _build_threads(_take(evs, np.flatnonzero(is_m)), ctx)
    ctx.release()

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
    cat = _cat_of(cats_raw, _canon_cat)
    del cats_raw
    name = _cat_of(_col(E, "name"))
    cat_codes = np.asarray(cat.codes)
    cat_list = list(cat.categories)

    def in_set(s: frozenset[str] | set[str]) -> np.ndarray:
        lut = np.array([c in s for c in cat_list] + [False], dtype=bool)
        return lut[cat_codes]  # code -1 -> last entry (False)

    is_dev = in_set(schema.DEVICE_CATEGORIES)
    is_rt = in_set(_RT_GROUP) & ~is_dev
    no_args = in_set(_NO_ARGS_CATEGORIES)
    is_op = ~(is_dev | is_rt | no_args)

    cols: dict[str, Any] = {}
    for col, kind in _ARG_COLUMNS.items():
        if kind == "int":
            cols[col] = np.full(nE, -1, dtype=np.int64)
        elif kind == "float":
            cols[col] = np.full(nE, np.nan)
        else:
            cols[col] = _CatColumn(nE)
    args_e = _col(E, "args")
    for mask, what in ((is_op, "host op"), (is_rt, "runtime"), (is_dev, "device")):
        rows = np.flatnonzero(mask)
        if not rows.size:
            continue
        args = _take(args_e, rows)
        for attr, col, kind in _FIELDS[what]:
            if kind == "int":
                v = _ints(args, attr, col, ctx, rows_e[rows])
                if attr == "external_id":  # 2021 traces spell it "external id"
                    old = _ints(args, "external_id_old", col, ctx, rows_e[rows])
                    v = np.where((v == -1) & (old != -1), old, v)
                cols[col][rows] = v
            elif kind == "intish":
                cols[col][rows] = _intish(_col(args, attr), col, ctx)
            elif kind == "float":
                cols[col][rows] = _num_or_nan(_col(args, attr))
            elif kind == "raw":
                vals = _col(args, attr)
                if any(map(len, vals)):  # Raw() of an absent key has length 0
                    cols[col].put(rows, _raw_texts(vals))
            else:
                vals = _col(args, attr)
                if vals.count(None) != len(vals):
                    cols[col].put(rows, vals)
        del args
    del args_e

    pid = _ints(E, "pid", "pid", ctx, rows_e)
    tid = _ints(E, "tid", "tid", ctx, rows_e)
    del E, evs  # the decoded events (and the file bytes their Raw values point into) go here
    dev_arg, stream_arg = cols["device"], cols["stream"]
    device = np.where(is_dev, np.where(dev_arg >= 0, dev_arg, pid), -1)
    stream = np.where(is_dev, np.where(stream_arg >= 0, stream_arg, tid), -1)
    pid = np.where(is_dev, device, pid)  # device rows: pid = device, tid = stream
    tid = np.where(is_dev, stream, tid)
    occ = cols["occupancy_ratio"] / 100.0
    ph_e = _CatColumn(nE)
    ph_e.lut, ph_e.codes = ph_lut, ph_codes[rows_e]
    data = {
        "ts_ns": t_all[rows_e],
        "dur_ns": dur_f.astype(np.int64),
        "name": name,
        "cat": cat,
        "ph": ph_e.finish(),
        "pid": pid,
        "tid": tid,
        "device": device.astype(np.int16),
        "stream": stream,
        "correlation": cols["correlation"],
        "external_id": cols["external_id"],
        "step": np.full(nE, -1, dtype=np.int32),
        "rank": np.zeros(nE, dtype=np.int32),
        "seq": cols["seq"],
        "fwd_tid": cols["fwd_tid"],
        "input_dims": cols["input_dims"].finish(_compact_json_text),
        "input_types": cols["input_types"].finish(_compact_json_text),
        "call_stack": cols["call_stack"].finish(),
        "module": cols["module"].finish(),
        "flops": cols["flops"],
        "bytes": cols["bytes"],
        "grid": cols["grid"].finish(_compact_json_text),
        "block": cols["block"].finish(_compact_json_text),
        "registers": cols["registers"].astype(np.int32),
        "shared_mem_bytes": cols["shared_mem_bytes"],
        "occupancy_ratio": occ.astype(np.float32),
        "collective": cols["collective"].finish(),
        "msg_in_nelems": cols["msg_in_nelems"],
        "msg_out_nelems": cols["msg_out_nelems"],
        "group_size": cols["group_size"].astype(np.int32),
        "dtype": cols["dtype"].finish(),
        "pg_name": cols["pg_name"].finish(),
    }
    del cols
    keep = ok_e if missing_ts else None
    ts_v = data["ts_ns"] if keep is None else data["ts_ns"][keep]
    order = None
    if ts_v.size > 1 and not (ts_v[1:] >= ts_v[:-1]).all():
        order = np.argsort(ts_v, kind="stable")
    if keep is not None:
        sel = np.flatnonzero(keep)
        order = sel if order is None else sel[order]
    if order is not None:
        for k in list(data):  # one column at a time: the old array is freed right away
            v = data[k]
            data[k] = v.take(order) if isinstance(v, pd.Categorical) else v[order]
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


def _build_flows(F: list[_Event], ts_ns: np.ndarray, ctx: _Ctx) -> pd.DataFrame:
    """Pair flow starts (``ph: s``) with their finishes (``f``/``t``), losslessly.

    Within one (category, id), events are taken in time order and each finish pairs with the latest
    start before it; Kineto reuses ids (one start with several finishes, e.g. a graph launch, or the
    same id again later), so every start and every finish appears in exactly one row: a start without
    finish keeps ``dst_*`` = -1, a finish without start keeps ``src_*`` = -1. ``async``/``async_cpu_to_gpu``
    (2021-2023 spellings) are read as ``ac2g``. Rows are ordered by source time (orphan finishes by theirs).
    """
    if not F:
        return schema.empty_frame(schema.FLOW_COLUMNS)
    ids = _col(F, "id")
    try:
        fid = np.fromiter(ids, dtype=np.int64, count=len(F))
    except (TypeError, ValueError, OverflowError):
        ids = [int(v) if isinstance(v, float) and np.isfinite(v) else v for v in ids]
        fid = _to_int_array(ids, "flow id", ctx)
    cat = _cat_of(_col(F, "cat"), lambda c: "ac2g" if c in ("async", "async_cpu_to_gpu") else str(c or ""))
    ccode = np.asarray(cat.codes).astype(np.int64)
    is_s = np.array([p == "s" for p in _col(F, "ph")], dtype=bool)
    pid = _ints(F, "pid", "pid", ctx)
    tid = _ints(F, "tid", "tid", ctx)
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
            "cat": cat.take(any_idx) if hasattr(cat, "take") else cat[any_idx],
            "src_ts_ns": side(ts, src_idx),
            "src_pid": side(pid, src_idx),
            "src_tid": side(tid, src_idx),
            "dst_ts_ns": side(ts, dst_idx),
            "dst_pid": side(pid, dst_idx),
            "dst_tid": side(tid, dst_idx),
        }
    )


def _build_memory(M: list[_Event], ts_ns: np.ndarray, ctx: _Ctx, rows: np.ndarray) -> pd.DataFrame:
    if not M:
        return schema.empty_frame(schema.MEMORY_COLUMNS)
    args = _col(M, "args")

    def ints(attr: str, nm: str) -> np.ndarray:
        return _intish(_col(args, attr), nm, ctx)

    df = pd.DataFrame(
        {
            "ts_ns": ts_ns,
            "pid": _ints(M, "pid", "pid", ctx, rows),
            "tid": _ints(M, "tid", "tid", ctx, rows),
            "device_type": ints("device_type", "Device Type").astype(np.int8),
            "device": ints("device_id", "Device Id").astype(np.int16),
            "addr": ints("addr", "Addr"),
            "bytes": ints("mem_bytes", "Bytes"),
            "total_allocated": ints("total_alloc", "Total Allocated"),
            "total_reserved": ints("total_reserved", "Total Reserved"),
            "step": np.full(len(M), -1, dtype=np.int32),
        }
    )
    ts_v = df["ts_ns"].to_numpy()
    if ts_v.size > 1 and not (ts_v[1:] >= ts_v[:-1]).all():
        df = df.take(np.argsort(ts_v, kind="stable"))
    return df.reset_index(drop=True)


def _build_counters(C: list[_Event], ts_ns: np.ndarray, ctx: _Ctx, rows: np.ndarray) -> pd.DataFrame:
    """Chrome-trace ``C`` events: one row per (event, series) with its numeric value.

    Counter args are free-form, so they are read in a second pass over the raw events (only
    when the trace has ``C`` events; Kineto traces of PyTorch have none).
    """
    if not C:
        return schema.empty_frame(schema.COUNTER_COLUMNS)
    raw_args: list[Any] = [None] * len(C)
    if ctx.fast and ctx.array_start is not None:
        try:
            allc = _COUNTER_DECODER.decode(memoryview(ctx.data)[ctx.array_start - 1 : _array_end(ctx.data, ctx.array_start)])
            raw_args = [allc[i].args for i in rows.tolist()]
        except (msgspec.DecodeError, msgspec.ValidationError, IndexError):
            pass
    out = []
    for e, t, r in zip(C, ts_ns.tolist(), raw_args):
        try:
            a = _ANY_DECODER.decode(r) if r is not None and len(r) else {}
        except msgspec.DecodeError:
            a = {}
        if not isinstance(a, dict) or not a:
            a = {"": None}
        for k, v in a.items():
            val = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan
            out.append((t, str(e.name), str(k), val, e.pid))
    df = pd.DataFrame(out, columns=["ts_ns", "name", "series", "value", "pid"])
    return pd.DataFrame(
        {
            "ts_ns": df["ts_ns"].astype(np.int64),
            "name": _cat_of(df["name"].tolist()),
            "series": _cat_of(df["series"].tolist()),
            "value": df["value"].astype(np.float64),
            "pid": _to_int_array(df["pid"].tolist(), "pid", ctx),
        }
    )


def _build_threads(Mv: list[_Event], ctx: _Ctx) -> pd.DataFrame:
    keep = [e for e in Mv if e.name in ("process_name", "thread_name", "process_labels")]
    args = _col(keep, "args")
    kinds = {"process_name": "process", "thread_name": "thread", "process_labels": "process_labels"}
    rows = []
    for e, a in zip(keep, args):
        val = a.labels if e.name == "process_labels" else a.mname
        rows.append((e.pid, e.tid, "" if val is None else str(val), kinds[e.name]))
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
    dev = events[(events["device"] >= 0) & (events["cat"].isin(["kernel", "gpu_memcpy", "gpu_memset"]))]
    if len(dev) < 2:
        return
    d = dev.sort_values(["device", "stream", "ts_ns"], kind="stable")
    t = d["ts_ns"].to_numpy()
    end = t + d["dur_ns"].to_numpy()
    dv, sv = d["device"].to_numpy(), d["stream"].to_numpy()
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
