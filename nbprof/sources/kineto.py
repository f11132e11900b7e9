"""PyTorch profiler / Kineto Chrome-trace JSON -> ``Trace``.

Format facts (``libkineto/src/output_json.cpp``; ../shared/notes/formats.md §4.1-4.3):

- top level is an object with ``traceEvents`` plus metadata keys in any order
  (``schemaVersion``, ``deviceProperties``, ``distributedInfo``, ``baseTimeNanoseconds``,
  ``displayTimeUnit``, ``traceName``...), or (legacy autograd profiler) a bare array of events;
- ``ts``/``dur`` are µs with 3 decimals relative to ``baseTimeNanoseconds``
  (old traces: absolute µs; ``displayTimeUnit: "ns"`` traces from HTA's ns-resolution
  fixture still write µs, the unit only tells the viewer how to display);
- CPU events: pid/tid are OS ids; device events: pid = device, tid = stream.

Decoding is typed and column-selective (msgspec Structs with only the fields the model
needs, cyclic GC paused), which is what keeps loads within ~1.5x of a bare JSON decode.
When the fast decode fails, a tolerant path splits ``traceEvents`` into single events,
repairs what can be repaired (NaN/Infinity tokens, raw control characters, invalid UTF-8,
unescaped quotes, truncation) and reports every repair or drop with its byte offset.
"""

from __future__ import annotations

import gc
import gzip
import os
import re
import zlib
from contextlib import contextmanager
from typing import Any, Iterator

import msgspec
import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..trace import schema
from ..trace.model import LoadReport, Trace, TraceMeta

__all__ = ["load_kineto", "read_bytes"]

# --------------------------------------------------------------------------- typed decode


_EMPTY_RAW = msgspec.Raw()


class _Args(msgspec.Struct, frozen=True):
    external_id: int | str | None = msgspec.field(default=None, name="External id")
    external_id_old: int | str | None = msgspec.field(default=None, name="external id")
    correlation: int | str | None = None
    device: int | str | None = None
    stream: int | str | None = None
    seq: int | str | None = msgspec.field(default=None, name="Sequence number")
    fwd_tid: int | str | None = msgspec.field(default=None, name="Fwd thread id")
    input_dims: msgspec.Raw = msgspec.field(default=_EMPTY_RAW, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=_EMPTY_RAW, name="Input type")
    call_stack: str | None = msgspec.field(default=None, name="Call stack")
    module: str | None = msgspec.field(default=None, name="Module Hierarchy")
    flops: float | int | str | None = None
    nbytes: int | float | str | None = msgspec.field(default=None, name="bytes")
    grid: msgspec.Raw = _EMPTY_RAW
    block: msgspec.Raw = _EMPTY_RAW
    registers: int | float | str | None = msgspec.field(default=None, name="registers per thread")
    shared_mem: int | float | str | None = msgspec.field(default=None, name="shared memory")
    occupancy: float | int | str | None = msgspec.field(default=None, name="est. achieved occupancy %")
    collective: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: int | str | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: int | str | None = msgspec.field(default=None, name="Out msg nelems")
    group_size: int | str | None = msgspec.field(default=None, name="Group size")
    dtype: str | None = None
    pg_name: str | None = msgspec.field(default=None, name="Process Group Name")
    # [memory] events
    mem_bytes: int | float | str | None = msgspec.field(default=None, name="Bytes")
    total_alloc: int | float | str | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: int | float | str | None = msgspec.field(default=None, name="Total Reserved")
    device_type: int | str | None = msgspec.field(default=None, name="Device Type")
    device_id: int | str | None = msgspec.field(default=None, name="Device Id")
    addr: int | str | None = msgspec.field(default=None, name="Addr")
    # metadata events
    mname: str | int | None = msgspec.field(default=None, name="name")
    labels: str | None = None
    sort_index: int | None = None


_NO_ARGS = _Args()


class _Event(msgspec.Struct):
    ph: str = ""
    cat: str | None = None
    name: str | int | float | None = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | str | None = None
    dur: float | str | None = None
    id: int | str | None = None
    bp: str | None = None
    s: str | None = None
    args: _Args = _NO_ARGS


_EVENT_DECODER = msgspec.json.Decoder(list[_Event])
_ONE_EVENT_DECODER = msgspec.json.Decoder(_Event)
_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
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


# --------------------------------------------------------------------------- bytes


def read_bytes(path: str | os.PathLike[str], report: LoadReport | None = None) -> bytes:
    """Read a file, gunzipping ``.gz`` (or gzip magic) content.

    A truncated gzip stream (job killed while writing) yields what could be
    decompressed, noted in ``report``.

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
                f"gzip stream ends early ({exc}); decompressed the first {len(out)} bytes",
                offset=len(out),
            )
        return out


# --------------------------------------------------------------------------- tolerant path

_NONFINITE = re.compile(rb"(?<=[:\[,\s])-?(?:NaN|nan|Infinity|inf)(?=\s*[,}\]])")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_CTRL = re.compile(rb"[\x00-\x1f]")
_KV_LINE = re.compile(rb'^(\s*"[^"\\]*"\s*:\s*")(.*)("\s*,?\s*)$')
_SPLIT = re.compile(rb"\}\s*,\s*\{")


def _escape_ctrl_in_strings(chunk: bytes) -> bytes:
    def fix(m: re.Match[bytes]) -> bytes:
        s = m.group(0)
        return _CTRL.sub(lambda c: b"\\u%04x" % c.group(0)[0], s)

    return _STRING.sub(fix, chunk)


def _escape_inner_quotes(chunk: bytes) -> bytes:
    out = []
    for line in chunk.split(b"\n"):
        m = _KV_LINE.match(line)
        if m and b'"' in m.group(2).replace(b'\\"', b""):
            inner = re.sub(rb'(?<!\\)"', rb'\\"', m.group(2))
            line = m.group(1) + inner + m.group(3)
        out.append(line)
    return b"\n".join(out)


def _repair_chunk(chunk: bytes) -> tuple[_Event | None, list[str]]:
    """Try the repairs one after another; return the event and the repair kinds used."""
    used: list[str] = []
    cand = chunk
    steps = [
        ("nonfinite", lambda b: _NONFINITE.sub(b"null", b)),
        ("invalid_utf8", lambda b: b.decode("utf-8", "replace").encode("utf-8")),
        ("control_chars", _escape_ctrl_in_strings),
        ("unescaped_quotes", _escape_inner_quotes),
    ]
    for kind, fn in steps:
        new = fn(cand)
        if new != cand:
            used.append(kind)
            cand = new
            try:
                return _ONE_EVENT_DECODER.decode(cand), used
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
    return None, used


_REPAIR_TEXT = {
    "nonfinite": "events had NaN/Infinity/inf tokens (not JSON): read as null",
    "invalid_utf8": "events had invalid UTF-8: replaced with U+FFFD",
    "control_chars": "events had raw control characters inside strings: escaped",
    "unescaped_quotes": "events had unescaped double quotes inside strings: escaped",
}


def _find_events_array(data: bytes) -> tuple[int, int | None]:
    """Return (start, end) byte offsets of the traceEvents array contents (end None if unclosed)."""
    stripped = data.lstrip()
    if stripped[:1] == b"[":
        start = data.index(b"[") + 1
    else:
        m = re.search(rb'"traceEvents"\s*:\s*\[', data)
        if m is None:
            return -1, None
        start = m.end()
    # the array ends at the first ']' at depth 0 after start; find via the last "}" + ws + "]"
    # preceding either the end of file or the next top-level key. Search for the pattern
    # of an event close followed by the array close.
    m = re.compile(rb"\}\s*\]").search(data, start)
    # the first "}]" can be inside a nested array of objects (rare); verify by depth scan cheaply
    while m is not None:
        seg = data[start : m.start() + 1]
        if _balanced(seg):
            return start, m.start() + 1
        m = re.compile(rb"\}\s*\]").search(data, m.end())
    empty = re.compile(rb"\s*\]").match(data, start)
    if empty:
        return start, start
    return start, None


def _balanced(seg: bytes) -> bool:
    # quick check on brace balance ignoring strings
    s = _STRING.sub(b'""', seg)
    return s.count(b"{") == s.count(b"}") and s.count(b"[") == s.count(b"]")


def _tolerant_decode(
    data: bytes, path: str, report: LoadReport, strict: bool, first_error: str
) -> tuple[list[_Event], dict[str, Any]]:
    start, end = _find_events_array(data)
    if start < 0:
        raise TraceFormatError(path, 0, f"no 'traceEvents' array and not a JSON array of events ({first_error})")
    body_end = end if end is not None else len(data)
    body = data[start:body_end]
    # split into single-event chunks at "},{" boundaries
    bounds = [0]
    for m in _SPLIT.finditer(body):
        bounds.append(m.start() + 1)
        bounds.append(m.end() - 1)
    bounds.append(len(body))
    events: list[_Event] = []
    repairs: dict[str, list[int]] = {}
    dropped: list[int] = []
    n_chunks = len(bounds) // 2
    for k in range(n_chunks):
        a, b = bounds[2 * k], bounds[2 * k + 1]
        chunk = body[a:b].strip()
        if k == 0:
            chunk = chunk.lstrip(b", \n\r\t")
        if not chunk:
            continue
        try:
            events.append(_ONE_EVENT_DECODER.decode(chunk))
            continue
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            off = start + a
            if strict:
                raise TraceFormatError(path, off, f"invalid event: {exc}", event_index=k) from exc
            last_truncated = end is None and k == n_chunks - 1
            if last_truncated:
                report.add(
                    "truncated",
                    "dropped",
                    1,
                    "",
                    offset=off,
                )
                continue
            ev, used = _repair_chunk(chunk)
            if ev is None:
                dropped.append(off)
                continue
            events.append(ev)
            for u in used:
                repairs.setdefault(u, []).append(off)
    for kind, offs in repairs.items():
        report.add(kind, "repaired", len(offs), f"{len(offs)} {_REPAIR_TEXT[kind]}", offset=offs[0])
    if dropped:
        report.add(
            "unparseable_event",
            "dropped",
            len(dropped),
            f"{len(dropped)} events could not be parsed or repaired and were dropped",
            offset=dropped[0],
        )
    trunc = report.get("truncated")
    if end is None:
        pct = 100.0 * (trunc.offset if trunc and trunc.offset else len(data)) / max(len(data), 1)
        msg = (
            f"file is truncated at byte {len(data)} (no closing ']' of traceEvents): "
            f"recovered {len(events)} complete events ({pct:.1f}% of the bytes); the trailing "
            "partial event and any metadata after the events are missing"
        )
        if trunc is None:
            report.add("truncated", "repaired", 0, msg, offset=len(data))
        else:
            trunc.message = msg
    # metadata: everything but the events array
    meta: dict[str, Any] = {}
    if data.lstrip()[:1] != b"[":
        head = data[: start - 1]
        tail = data[end + 1 :] if end is not None else b"}"
        meta_bytes = head + b"[]" + tail
        try:
            meta = _ANY_DECODER.decode(meta_bytes)
        except msgspec.DecodeError:
            try:
                meta = _ANY_DECODER.decode(_NONFINITE.sub(b"null", meta_bytes))
            except msgspec.DecodeError:
                try:
                    meta = _ANY_DECODER.decode(head + b"[]}")
                    report.add("metadata_partial", "dropped", 1, "metadata after traceEvents could not be read")
                except msgspec.DecodeError:
                    report.add("metadata_unreadable", "dropped", 1, "top-level metadata could not be read")
                    meta = {}
        if isinstance(meta, dict):
            meta.pop("traceEvents", None)
        else:
            meta = {}
    return events, meta


# --------------------------------------------------------------------------- columns


def _to_int_array(values: list[Any], name: str, report: LoadReport, path: str, strict: bool) -> np.ndarray:
    """list of int|str|None -> int64 with -1 for missing; strings like '12' or 'stream 7' parsed."""
    try:
        arr = np.array([-1 if v is None else v for v in values], dtype=np.int64)
        return arr
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.empty(len(values), dtype=np.int64)
    bad = 0
    for i, v in enumerate(values):
        if v is None:
            out[i] = -1
        elif isinstance(v, int):
            if -(2**63) <= v < 2**63:
                out[i] = v
            elif 0 <= v < 2**64:  # unsigned 64-bit ids: keep the bit pattern
                out[i] = v - 2**64
            else:
                out[i] = -1
                bad += 1
        elif isinstance(v, float):
            out[i] = int(v) if np.isfinite(v) else -1
        else:
            m = re.search(r"-?\d+", str(v))
            out[i] = int(m.group(0)) if m and abs(int(m.group(0))) < 2**63 else -1
    if bad:
        if strict:
            raise TraceFormatError(path, None, f"{bad} integers in {name!r} do not fit in 64 bits")
        report.add(
            f"bigint_{name}", "repaired", bad, f"{bad} values of {name!r} were integers above 64 bits: set to -1"
        )
    return out


def _to_float_ns(values: list[Any], what: str, report: LoadReport, path: str, strict: bool) -> tuple[np.ndarray, np.ndarray]:
    """µs values (float|str|None) -> (float64 µs array with NaN for missing, mask of string-typed)."""
    try:
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64), np.zeros(0, bool)
    except (TypeError, ValueError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    nstr = 0
    nbad = 0
    for i, v in enumerate(values):
        if v is None:
            out[i] = np.nan
        elif isinstance(v, str):
            nstr += 1
            try:
                out[i] = float(v)
            except ValueError:
                out[i] = np.nan
                nbad += 1
        else:
            out[i] = v
    if nstr:
        if strict:
            raise TraceFormatError(path, None, f"{nstr} events have string-typed {what!r}")
        report.add(f"string_{what}", "repaired", nstr, f"{nstr} events had string-typed '{what}': converted to numbers")
    return out, np.zeros(0, bool)


def _raw_text(values: list[Any]) -> pd.Categorical:
    """msgspec.Raw JSON values -> compact text categorical (whitespace removed outside strings)."""
    cache: dict[bytes, str] = {}
    out: list[str | None] = []
    for v in values:
        if v is None or not len(v):
            out.append(None)
            continue
        b = bytes(v)
        s = cache.get(b)
        if s is None:
            s = b.decode("utf-8", "replace")
            if "\n" in s or "  " in s:
                s = re.sub(r"\s+", "", s)
            s = s.replace(",", ", ") if "," in s and ", " not in s else s
            cache[b] = s
        out.append(s)
    return pd.Categorical(out)


def _str_cat(values: list[Any]) -> pd.Categorical:
    return pd.Categorical([None if v is None else (v if isinstance(v, str) else str(v)) for v in values])


def _num_or_nan(values: list[Any]) -> np.ndarray:
    try:
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        out = np.full(len(values), np.nan)
        for i, v in enumerate(values):
            try:
                out[i] = float(v) if v is not None else np.nan
            except (TypeError, ValueError):
                pass
        return out


_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)", re.I)
_STEP_RE = re.compile(r"ProfilerStep\s*#\s*(\d+)")


def rank_from_filename(path: str) -> int | None:
    """``rank-3.json``, ``rank_3``, ``trace_rank3`` -> 3; ``worker0.<ts>.pt.trace.json`` -> None."""
    m = _RANK_IN_NAME.search(os.path.basename(path))
    return int(m.group(1)) if m else None


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
        The trace file (``*.pt.trace.json[.gz]``, ``*.json[.gz]``).
    strict : bool, default False
        Raise ``TraceFormatError`` instead of repairing anything.
    rank : int, optional
        Override the rank (otherwise from ``distributedInfo``, else the file name, else 0).
    data : bytes, optional
        The (decompressed) file content, when already in memory.

    Returns
    -------
    Trace
        Tables in int64 ns relative to the first event; see ``nbprof.trace.schema``.
        ``Trace.report`` lists every repair, drop and assumption.

    Raises
    ------
    FileNotFoundError
        When the file does not exist.
    TraceFormatError
        When nothing can be recovered, or in strict mode on the first defect
        (with ``path``, byte ``offset`` and ``reason``).
    """
    spath = os.fspath(path)
    report = LoadReport(path=spath)
    if data is None:
        data = read_bytes(spath, report)
    if strict and not report.clean:
        raise TraceFormatError(spath, report.issues[0].offset, report.issues[0].message)
    if not data.strip():
        raise TraceFormatError(spath, 0, "file is empty")
    with _gc_paused():
        events, meta = _decode(data, spath, report, strict)
        trace = _build(events, meta, spath, report, strict, rank)
    return trace


def _decode(data: bytes, path: str, report: LoadReport, strict: bool) -> tuple[list[_Event], dict[str, Any]]:
    first = data.lstrip()[:1]
    try:
        if first == b"[":
            return _EVENT_DECODER.decode(data), {}
        top = _TOP_DECODER.decode(data)
        raw_events = top.pop("traceEvents", None)
        events = _EVENT_DECODER.decode(raw_events) if raw_events is not None else []
        meta = {k: _ANY_DECODER.decode(v) for k, v in top.items()}
        if raw_events is None:
            report.add("no_trace_events", "assumed", 0, "no 'traceEvents' key: empty trace")
        return events, meta
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        msg = str(exc)
        if strict:
            m = re.search(r"byte (\d+)", msg)
            off = int(m.group(1)) if m else (len(data) if "truncated" in msg else None)
            raise TraceFormatError(path, off, msg) from exc
        if first not in (b"{", b"["):
            raise TraceFormatError(path, 0, f"not a JSON trace (starts with {data[:16]!r})") from exc
        return _tolerant_decode(data, path, report, strict, msg)


def _build(
    evs: list[_Event], meta: dict[str, Any], path: str, report: LoadReport, strict: bool, rank: int | None
) -> Trace:
    ph = [e.ph for e in evs]
    ph_arr = np.array(ph, dtype=object) if ph else np.array([], dtype=object)
    is_x = ph_arr == "X"
    is_i = (ph_arr == "i") | (ph_arr == "I")
    is_flow = (ph_arr == "s") | (ph_arr == "f") | (ph_arr == "t")
    is_m = ph_arr == "M"
    is_c = ph_arr == "C"
    names_all = [e.name for e in evs]
    is_mem = is_i & (np.array(names_all, dtype=object) == "[memory]") if evs else is_i

    def sub(mask: np.ndarray) -> list[_Event]:
        idx = np.flatnonzero(mask)
        return [evs[i] for i in idx]

    # global instants ("s": "g": "Iteration Start", "Record Window End") are viewer markers, not
    # activity; they are left out of the events table by choice (torch-tb-profiler drops them too).
    is_global = np.array([e.s == "g" for e in evs], dtype=bool) if evs else is_i
    ev_mask = (is_x | is_i) & ~is_mem & ~is_global
    E = sub(ev_mask)
    ts_us, _ = _to_float_ns([e.ts for e in E], "ts", report, path, strict)
    dur_us, _ = _to_float_ns([e.dur for e in E], "dur", report, path, strict)

    # --- time origin. Old traces carry absolute µs; new ones µs relative to baseTimeNanoseconds.
    all_ts = ts_us[np.isfinite(ts_us)]
    base_ns = meta.get("baseTimeNanoseconds")
    origin_us = float(all_ts.min()) if all_ts.size else 0.0
    missing_ts = int(np.count_nonzero(~np.isfinite(ts_us)))
    keep = np.isfinite(ts_us)
    if missing_ts:
        if strict:
            raise TraceFormatError(path, None, f"{missing_ts} events have no usable 'ts'")
        report.add("missing_ts", "dropped", missing_ts, f"{missing_ts} events had no usable 'ts' and were dropped")
    ts_ns = np.rint((ts_us - origin_us) * 1000.0)
    dur_ns_f = np.rint(dur_us * 1000.0)
    # durations: instants 0; missing/NaN -> 0; negative -> clamped
    dur_missing_x = ~np.isfinite(dur_ns_f)
    ph_e = np.array([e.ph for e in E], dtype=object) if E else np.array([], dtype=object)
    x_e = ph_e == "X"
    n_missing_dur = int(np.count_nonzero(dur_missing_x & x_e & keep))
    dur_ns_f[dur_missing_x] = 0
    neg = dur_ns_f < 0
    n_neg = int(np.count_nonzero(neg & keep))
    if n_neg:
        if strict:
            raise TraceFormatError(path, None, f"{n_neg} events have negative 'dur'")
        report.add("negative_dur", "repaired", n_neg, f"{n_neg} events had negative dur (e.g. -1): clamped to 0")
    if n_missing_dur:
        report.add("missing_dur", "repaired", n_missing_dur, f"{n_missing_dur} complete events had no dur: set to 0")
    dur_ns_f[neg] = 0
    if base_ns is not None and isinstance(base_ns, (int, float)):
        origin_abs = int(base_ns) + int(round(origin_us * 1000.0))
    elif origin_us > 1e15:  # absolute µs since the epoch (old traces)
        origin_abs = int(round(origin_us * 1000.0))
    else:
        origin_abs = None

    # --- categories (canonical)
    cats_raw = [e.cat for e in E]
    names = [e.name if isinstance(e.name, str) else (None if e.name is None else str(e.name)) for e in E]
    canon = [schema.CATEGORY_ALIASES.get(c, c) if c is not None else None for c in cats_raw]
    # legacy autograd traces: no cat; pid "CPU functions"
    args = [e.args for e in E]
    pid = _to_int_array([e.pid for e in E], "pid", report, path, strict)
    tid = _to_int_array([e.tid for e in E], "tid", report, path, strict)
    canon_arr = np.array(canon, dtype=object)
    is_dev = np.isin(canon_arr, list(schema.DEVICE_CATEGORIES)) if E else np.zeros(0, bool)
    dev_arg = _to_int_array([a.device for a in args], "device", report, path, strict)
    stream_arg = _to_int_array([a.stream for a in args], "stream", report, path, strict)
    device = np.where(is_dev, np.where(dev_arg >= 0, dev_arg, pid), -1).astype(np.int16)
    stream = np.where(is_dev, np.where(stream_arg >= 0, stream_arg, tid), -1)
    # device rows: pid = device, tid = stream
    pid = np.where(is_dev, device.astype(np.int64), pid)
    tid = np.where(is_dev, stream, tid)
    ext = _to_int_array(
        [a.external_id if a.external_id is not None else a.external_id_old for a in args],
        "External id", report, path, strict,
    )
    corr = _to_int_array([a.correlation for a in args], "correlation", report, path, strict)

    def intcol(vals: list[Any], nm: str) -> np.ndarray:
        return _to_int_array(vals, nm, report, path, strict)

    occ = _num_or_nan([a.occupancy for a in args]) / 100.0
    events = pd.DataFrame(
        {
            "ts_ns": ts_ns.astype(np.int64, copy=False) if keep.all() else np.where(keep, ts_ns, 0).astype(np.int64),
            "dur_ns": dur_ns_f.astype(np.int64),
            "name": pd.Categorical(names),
            "cat": pd.Categorical(canon),
            "ph": pd.Categorical(ph_e.tolist()),
            "pid": pid,
            "tid": tid,
            "device": device,
            "stream": stream.astype(np.int64),
            "correlation": corr,
            "external_id": ext,
            "step": np.full(len(E), -1, dtype=np.int32),
            "rank": np.zeros(len(E), dtype=np.int32),
            "seq": intcol([a.seq for a in args], "Sequence number"),
            "fwd_tid": intcol([a.fwd_tid for a in args], "Fwd thread id"),
            "input_dims": _raw_text([a.input_dims for a in args]),
            "input_types": _raw_text([a.input_types for a in args]),
            "call_stack": _str_cat([a.call_stack for a in args]),
            "module": _str_cat([a.module for a in args]),
            "flops": _num_or_nan([a.flops for a in args]),
            "bytes": _to_int_array(
                [None if a.nbytes is None else (int(a.nbytes) if isinstance(a.nbytes, float) else a.nbytes) for a in args],
                "bytes", report, path, strict,
            ),
            "grid": _raw_text([a.grid for a in args]),
            "block": _raw_text([a.block for a in args]),
            "registers": intcol(
                [None if a.registers is None else (int(a.registers) if isinstance(a.registers, float) else a.registers) for a in args],
                "registers per thread",
            ).astype(np.int32),
            "shared_mem_bytes": intcol(
                [None if a.shared_mem is None else (int(a.shared_mem) if isinstance(a.shared_mem, float) else a.shared_mem) for a in args],
                "shared memory",
            ),
            "occupancy_ratio": occ.astype(np.float32),
            "collective": _str_cat([a.collective for a in args]),
            "msg_in_nelems": intcol([a.in_nelems for a in args], "In msg nelems"),
            "msg_out_nelems": intcol([a.out_nelems for a in args], "Out msg nelems"),
            "group_size": intcol([a.group_size for a in args], "Group size").astype(np.int32),
            "dtype": _str_cat([a.dtype for a in args]),
            "pg_name": _str_cat([a.pg_name for a in args]),
        }
    )
    if not keep.all():
        events = events[keep]
    # drop non-data global instants with string pids (e.g. "Iteration Start", "Record Window End")
    events = events.sort_values("ts_ns", kind="stable").reset_index(drop=True)

    # --- flows
    F = sub(is_flow)
    flows = _build_flows(F, origin_us, report, path, strict)

    # --- memory
    Mm = sub(is_mem)
    memory = _build_memory(Mm, origin_us, report, path, strict)

    # --- counters
    counters = _build_counters(sub(is_c), origin_us, report, path, strict)

    # --- threads/process names
    threads = _build_threads(sub(is_m), report, path, strict)

    # --- metadata
    tmeta = _build_meta(meta, path, report, origin_abs, rank, events)
    events["rank"] = np.int32(tmeta.rank)

    _assign_steps(events, memory)
    _check_overlaps(events, report)
    if events.empty:
        report.add("empty", "assumed", 0, "the trace holds no duration or instant events")
    trace = Trace(events=events, flows=flows, memory=memory, counters=counters, threads=threads, meta=tmeta, report=report)
    return trace


def _build_flows(F: list[_Event], origin_us: float, report: LoadReport, path: str, strict: bool) -> pd.DataFrame:
    if not F:
        return schema.empty_frame(schema.FLOW_COLUMNS)
    ts, _ = _to_float_ns([e.ts for e in F], "ts", report, path, strict)
    df = pd.DataFrame(
        {
            "id": _to_int_array([e.id for e in F], "flow id", report, path, strict),
            "cat": [e.cat or "" for e in F],
            "ph": [e.ph for e in F],
            "ts_ns": np.rint((np.nan_to_num(ts, nan=origin_us) - origin_us) * 1000).astype(np.int64),
            "pid": _to_int_array([e.pid for e in F], "pid", report, path, strict),
            "tid": _to_int_array([e.tid for e in F], "tid", report, path, strict),
        }
    )
    df["cat"] = df["cat"].replace({"async": "ac2g", "async_cpu_to_gpu": "ac2g"})
    s = df[df["ph"] == "s"].drop_duplicates(["cat", "id"], keep="first")
    f = df[df["ph"] != "s"].drop_duplicates(["cat", "id"], keep="last")
    m = s.merge(f, on=["cat", "id"], how="left", suffixes=("_s", "_f"))
    out = pd.DataFrame(
        {
            "id": m["id"].astype(np.int64),
            "cat": pd.Categorical(m["cat"]),
            "src_ts_ns": m["ts_ns_s"].astype(np.int64),
            "src_pid": m["pid_s"].astype(np.int64),
            "src_tid": m["tid_s"].astype(np.int64),
            "dst_ts_ns": m["ts_ns_f"].fillna(-1).astype(np.int64),
            "dst_pid": m["pid_f"].fillna(-1).astype(np.int64),
            "dst_tid": m["tid_f"].fillna(-1).astype(np.int64),
        }
    )
    return out


def _build_memory(M: list[_Event], origin_us: float, report: LoadReport, path: str, strict: bool) -> pd.DataFrame:
    if not M:
        return schema.empty_frame(schema.MEMORY_COLUMNS)
    ts, _ = _to_float_ns([e.ts for e in M], "ts", report, path, strict)
    args = [e.args for e in M]

    def ints(vals: list[Any], nm: str) -> np.ndarray:
        return _to_int_array([int(v) if isinstance(v, float) and np.isfinite(v) else v for v in vals], nm, report, path, strict)

    df = pd.DataFrame(
        {
            "ts_ns": np.rint((ts - origin_us) * 1000).astype(np.int64),
            "pid": _to_int_array([e.pid for e in M], "pid", report, path, strict),
            "tid": _to_int_array([e.tid for e in M], "tid", report, path, strict),
            "device_type": ints([a.device_type for a in args], "Device Type").astype(np.int8),
            "device": ints([a.device_id for a in args], "Device Id").astype(np.int16),
            "addr": ints([a.addr for a in args], "Addr"),
            "bytes": ints([a.mem_bytes for a in args], "Bytes"),
            "total_allocated": ints([a.total_alloc for a in args], "Total Allocated"),
            "total_reserved": ints([a.total_reserved for a in args], "Total Reserved"),
            "step": np.full(len(M), -1, dtype=np.int32),
        }
    )
    return df.sort_values("ts_ns", kind="stable").reset_index(drop=True)


def _build_counters(C: list[_Event], origin_us: float, report: LoadReport, path: str, strict: bool) -> pd.DataFrame:
    if not C:
        return schema.empty_frame(schema.COUNTER_COLUMNS)
    # counters need the full args dict; the typed decoder keeps none of it, so counters carry
    # only their name here (Kineto traces of PyTorch do not write C events).
    ts, _ = _to_float_ns([e.ts for e in C], "ts", report, path, strict)
    return pd.DataFrame(
        {
            "ts_ns": np.rint((ts - origin_us) * 1000).astype(np.int64),
            "name": pd.Categorical([str(e.name) for e in C]),
            "series": pd.Categorical([""] * len(C)),
            "value": np.full(len(C), np.nan),
            "pid": _to_int_array([e.pid for e in C], "pid", report, path, strict),
        }
    )


def _build_threads(Mv: list[_Event], report: LoadReport, path: str, strict: bool) -> pd.DataFrame:
    rows = []
    for e in Mv:
        if e.name in ("process_name", "thread_name", "process_labels"):
            val = e.args.mname if e.name != "process_labels" else e.args.labels
            kind = {"process_name": "process", "thread_name": "thread", "process_labels": "process_labels"}[e.name]
            rows.append((e.pid, e.tid, str(val) if val is not None else "", kind))
    df = pd.DataFrame(rows, columns=["pid_raw", "tid_raw", "name", "kind"])
    df["pid"] = _to_int_array(df["pid_raw"].tolist(), "pid", report, path, strict) if len(df) else np.array([], np.int64)
    df["tid"] = _to_int_array(df["tid_raw"].tolist(), "tid", report, path, strict) if len(df) else np.array([], np.int64)
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
    elif isinstance(dist.get("rank"), int):
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


def _assign_steps(events: pd.DataFrame, memory: pd.DataFrame) -> None:
    """Set ``step`` from ``ProfilerStep#N`` ranges: host rows by time, device rows via correlation.

    Device rows whose launching runtime call has no step fall back to time containment.
    """
    if events.empty:
        return
    names = events["name"]
    cats = names.cat.categories
    step_codes = [i for i, c in enumerate(cats) if isinstance(c, str) and _STEP_RE.search(c)]
    if not step_codes:
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
    """Flag device ops on one stream that start before the previous one ends (ROCm deferred stamps)."""
    dev = events[(events["device"] >= 0) & (events["cat"].isin(["kernel", "gpu_memcpy", "gpu_memset"]))]
    if len(dev) < 2:
        return
    d = dev.sort_values(["device", "stream", "ts_ns"], kind="stable")
    end = (d["ts_ns"] + d["dur_ns"]).to_numpy()
    same = (d["device"].to_numpy()[1:] == d["device"].to_numpy()[:-1]) & (
        d["stream"].to_numpy()[1:] == d["stream"].to_numpy()[:-1]
    )
    ov = same & (d["ts_ns"].to_numpy()[1:] < end[:-1])
    n = int(ov.sum())
    if n:
        report.add(
            "overlapping_device_ops",
            "flagged",
            n,
            f"{n} device ops start before the previous op on the same stream ends; kept as recorded, "
            "busy-time analyses take the union of intervals so overlap is never double-counted",
        )
