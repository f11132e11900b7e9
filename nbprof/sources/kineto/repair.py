"""Tolerant decode: the events array of a file the fast decode rejected, event by event where needed.

``_tolerant_decode`` decodes the good events in bulk, isolates each bad event between event
boundaries, repairs it (NaN/Infinity/inf tokens -> null, raw control characters escaped,
unescaped quotes inside string values escaped; invalid UTF-8 is replaced with U+FFFD before) or
drops it, and reports every repair or drop with its count and first byte offset. A truncated
file (job killed while writing) keeps every complete event. Strict mode raises
``TraceFormatError`` at the first defect instead.
"""

from __future__ import annotations

import re
from typing import Any, cast

import msgspec
import numpy as np

from ...errors import TraceFormatError
from ...trace.model import LoadReport
from .context import _array_end, _raw_offset
from .reading import _first_char
from .structs import _ANY_DECODER, _LOOSE_EVENT_DECODER, _ONE_EVENT_DECODER, _RAW_LIST_DECODER, _Event

_NONFINITE = re.compile(rb"(?<=[:\[,\s])-?(?:NaN|nan|Infinity|inf)(?=\s*[,}\]])")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_CTRL = re.compile(rb"[\x00-\x1f]")
_VALUE_START = re.compile(rb'"[^"\\\n]*"\s*:\s*"')
_VALUE_END = re.compile(rb'"(?=\s*(?:,\s*"([^"\\\n]*)"\s*:|\}|\]|,\s*$))')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_CLOSE = re.compile(rb"\}\s*\]")
# the end of a bad event: its "}" before the next element (an event, or a stray non-object one)
_CHUNK_END = re.compile(rb"\}\s*,\s*[\{\[\d\-ntf]")
_NON_ASCII = re.compile(rb"[\x80-\xff]+")
_MALFORMED_AT = re.compile(r"\(byte (\d+)\)")
_VALIDATION_AT = re.compile(r"at `\$\[(\d+)\]")


def _balanced(chunk: bytes) -> bool:
    """Whether the brackets outside strings of ``chunk`` close as many as they open (linear)."""
    s = _STRING.sub(b'""', chunk)
    return s.count(b"{") + s.count(b"[") == s.count(b"}") + s.count(b"]")


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
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
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


# a backslash that starts no JSON escape (a Windows path "C:\Users\..." in a stack frame): doubled, so the
# text is kept as written
_ESCAPE = re.compile(rb'\\(?:(u[0-9a-fA-F]{4}|["\\/bfnrt])|)')


def _escape_backslashes(chunk: bytes) -> bytes:
    def fix(m: re.Match[bytes]) -> bytes:
        return _ESCAPE.sub(lambda e: e.group(0) if e.group(1) else b"\\\\", m.group(0))

    return _STRING.sub(fix, chunk)


_REPAIRS = (
    ("nonfinite", lambda b: _NONFINITE.sub(b"null", b)),
    ("invalid_escape", _escape_backslashes),
    ("control_chars", _escape_ctrl_in_strings),
    ("unescaped_quotes", _escape_inner_quotes),
)

_REPAIR_TEXT = {
    "nonfinite": "events had NaN/Infinity/inf tokens (not JSON): read as null",
    "invalid_utf8": "invalid UTF-8 sequences: replaced with U+FFFD",
    "control_chars": "events had raw control characters inside strings: escaped",
    "unescaped_quotes": "events had unescaped double quotes inside strings: escaped",
    "invalid_escape": "events had backslashes that start no JSON escape (e.g. a Windows path): kept as backslashes",
    "missing_comma": "places had two events with no comma between them: both kept",
    "trailing_comma": "commas before a closing ']' or '}' (not JSON; e.g. google/perfetto#1822): ignored",
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
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                continue
    return None, used


_BETWEEN = re.compile(rb"\}(\s*)\{")


def _missing_commas(chunk: bytes) -> list[_Event] | None:
    """The events of ``chunk`` when it is several events with the commas between them missing
    (``{...}\n{...}``): commas put where ``}`` meets ``{`` outside strings; None when that decodes to no
    list of at least two events."""
    masked = _STRING.sub(lambda m: b'"' + b" " * (len(m.group(0)) - 2) + b'"', chunk)  # same length
    cuts = [m.start() + 1 for m in _BETWEEN.finditer(masked)]
    if not cuts:
        return None
    pieces, last = [], 0
    for c in cuts:
        pieces.append(chunk[last:c])
        last = c
    pieces.append(chunk[last:])
    try:
        evs = _LOOSE_EVENT_DECODER.decode(b"[" + b",".join(pieces) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return cast("list[_Event]", evs) if len(evs) > 1 else None  # _LooseEvent is an _Event


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
    # always (not only when the first error names UTF-8): an invalid sequence after the first
    # error would fail the bulk decode with no byte offset, and the rest would look truncated
    data, bad = _fix_utf8(data)
    if bad:
        report.add("invalid_utf8", "repaired", len(bad), f"{len(bad)} {_REPAIR_TEXT['invalid_utf8']}", offset=bad[0])
    start = _events_array_start(data)
    if start < 0:
        raise TraceFormatError(path, 0, f"no 'traceEvents' array and not a JSON array of events ({first_error})")
    buf = bytearray(data)
    mv = memoryview(buf)
    n = len(buf)
    events: list[_Event] = []
    repairs: dict[str, list[int]] = {}
    dropped: list[int] = []
    not_events: list[tuple[int, bytes]] = []  # (offset, first bytes) of elements that are not objects
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
            # an element that is not an event (``1``, ``null``, ``[]``, ``"x"``) or has fields of
            # the wrong types: list the elements (``msgspec.Raw``, their exact offsets) and decode
            # the runs between the bad ones
            walked = _walk_elements(buf, mv, seg, events, not_events, dropped)
            if walked is not None:
                close, cut = walked
                if not cut:
                    end = close + 1
                    break
                buf[close : close + 1] = b"["
                seg = close
                continue
            m = _VALIDATION_AT.search(str(exc))
            err_at = _nth_event_offset(buf, seg, int(m.group(1))) if m else None
            if err_at is None:
                err_at = seg + 1
            err_at += 1  # inside the event
        except RecursionError:  # nesting deeper than the decoder allows: locate it, then as a syntax error
            err_at = _deep_at(buf, seg)
            if err_at is None:
                err_at = n
        except msgspec.DecodeError as exc:
            msg = str(exc)
            m = _MALFORMED_AT.search(msg)
            if "trailing characters" in msg and m:
                # msgspec reports the byte after the first trailing character: the ']' is before it
                end = buf.rindex(b"]", seg, seg + int(m.group(1))) + 1
                try:
                    events.extend(_LOOSE_EVENT_DECODER.decode(mv[seg:end]))  # the array itself is fine now
                except msgspec.ValidationError:
                    _walk_elements(buf, mv, seg, events, not_events, dropped)
                if _first_char(buf) == b"[":  # a bare array: what follows it is not JSON
                    at = seg + int(m.group(1)) - 1
                    report.add("trailing_bytes", "dropped", n - at,
                               f"{n - at} bytes after the end of the JSON document (e.g. {bytes(buf[at : at + 16])!r}) "
                               "were ignored", offset=at)
                break
            if "trailing comma" in msg and m:  # "[...,{...},]": the comma goes, every event stays
                close = seg + int(m.group(1))
                comma = close - 1
                while comma > seg and buf[comma] in _JSON_WS:
                    comma -= 1
                if buf[comma] == 0x2C:  # ","
                    buf[comma] = 0x20
                    repairs.setdefault("trailing_comma", []).append(comma)
                    continue
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
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
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
        nxt = _CHUNK_END.search(buf, max(err_at, cstart + 1))
        first_nxt, tries = nxt, 0
        while nxt is not None and tries < 64 and not _balanced(bytes(buf[cstart : nxt.start() + 1])):
            # a "}, true" inside the bad event (an array of objects and values in it), not its end
            nxt, tries = _CHUNK_END.search(buf, nxt.start() + 1), tries + 1
        if nxt is None or tries >= 64:
            nxt = first_nxt
        close_m = _CLOSE.search(buf, max(err_at, cstart + 1))
        if (nxt is not None and close_m is not None and close_m.start() < nxt.start()
                and not _balanced(bytes(buf[cstart : close_m.start() + 1]))):
            close_m = None  # a "}]" inside the bad event (an array of objects in it), not the array's end
        chunk_end, is_last = None, False
        if nxt is not None and (close_m is None or nxt.start() < close_m.start()):
            chunk_end = nxt.start() + 1
        elif close_m is not None:
            chunk_end, is_last = close_m.start() + 1, True
        if chunk_end is None:  # truncated file: the rest is the partial last event
            if strict:
                raise TraceFormatError(path, n, f"file is truncated at byte {n}: the last event is incomplete "
                                       f"and traceEvents is not closed ({first_error})")
            rest = bytes(buf[cstart:]).rstrip(b", \n\r\t")
            try:  # the file may end right after a complete event (and its comma)
                events.append(_decode_one(rest))
                truncated_at = n
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                truncated_at = cstart
            end = None
            break
        chunk = bytes(buf[cstart:chunk_end])
        try:
            events.append(_decode_one(chunk))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            if strict:
                raise TraceFormatError(path, cstart, f"invalid event: {exc}", event_index=len(events)) from exc
            several = _missing_commas(chunk)
            ev, used = (None, []) if several else _repair_chunk(chunk)
            if several:
                events.extend(several)
                repairs.setdefault("missing_comma", []).append(cstart)
            elif ev is None:
                dropped.append(cstart)
            else:
                events.append(ev)
                for u in used:
                    repairs.setdefault(u, []).append(cstart)
        if is_last and close_m is not None:
            end = close_m.end()
            break
        comma = buf.index(b",", chunk_end)
        buf[comma : comma + 1] = b"["
        seg = comma
    for kind, offs in repairs.items():
        report.add(kind, "repaired", len(offs), f"{len(offs)} {_REPAIR_TEXT[kind]}", offset=offs[0])
    if not_events:
        k = len(not_events)
        eg = not_events[0][1].decode("utf-8", "replace")
        report.add("not_an_event", "dropped", k,
                   f"{k} elements of traceEvents were not event objects (e.g. {eg}) and were dropped",
                   offset=not_events[0][0])
    if dropped:
        dropped.sort()
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


_DEEP = 256  # nesting below an event's args deeper than this is where a RecursionError comes from
_DEEP_CHUNK = 1 << 22


def _deep_at(buf: Any, start: int, limit: int = _DEEP) -> int | None:
    """Offset of the first bracket after ``start`` at which JSON nesting (brackets outside strings,
    counted from ``start``) exceeds ``limit``; None when it never does. Vectorised in chunks, linear."""
    depth, in_str, bs_run = 0, False, 0
    n = len(buf)
    for a in range(start, n, _DEEP_CHUNK):
        b = np.frombuffer(memoryview(buf)[a : min(n, a + _DEEP_CHUNK)], dtype=np.uint8)
        m = len(b)
        idx = np.arange(m)
        is_bs = b == 0x5C
        # backslashes directly before each position (a quote after an odd run is escaped)
        last_other = np.maximum.accumulate(np.where(is_bs, -1, idx))
        run = idx - last_other  # run length ending at each position (0 where not a backslash)
        before = np.empty(m, dtype=np.int64)
        before[0] = bs_run
        before[1:] = np.where(last_other[:-1] < 0, run[:-1] + bs_run, run[:-1])
        quote = (b == 0x22) & (before % 2 == 0)
        qc = np.cumsum(quote)
        inside = ((qc - quote) % 2 == 1) ^ in_str  # inside a string (the opening quote excluded)
        step = np.where(~inside & ((b == 0x5B) | (b == 0x7B)), 1, 0) - np.where(~inside & ((b == 0x5D) | (b == 0x7D)), 1, 0)
        d = depth + np.cumsum(step)
        over = np.flatnonzero(d > limit)
        if over.size:
            return a + int(over[0])
        depth = int(d[-1])
        in_str = bool(inside[-1]) ^ bool(quote[-1])
        bs_run = int(run[-1]) + (bs_run if last_other[-1] < 0 else 0) if is_bs[-1] else 0
    return None


_JSON_WS = b" \t\r\n"
_VALUE_SEP = re.compile(rb'[}\]"\w]\s*(,)\s*[\[{"\w-]')


def _raw_elements(buf: bytearray, mv: memoryview, seg: int) -> tuple[list[msgspec.Raw], int, bool] | None:
    """The elements of the array opening at ``seg`` as ``msgspec.Raw`` views of ``buf``, the position
    of the byte closing them, and whether that is a comma turned into ``]`` (a syntax error follows
    it: the caller turns it into the ``[`` of the rest) rather than the array's own ``]``. None when
    no run of elements can be listed."""
    try:
        raws = _RAW_LIST_DECODER.decode(mv[seg:])
        return raws, len(buf.rstrip(_JSON_WS)) - 1, False
    except RecursionError:
        return None
    except msgspec.DecodeError as exc:
        msg = str(exc)
    m = _MALFORMED_AT.search(msg)
    if "trailing characters" in msg and m:
        close = buf.rindex(b"]", seg, seg + int(m.group(1)))
        try:
            return _RAW_LIST_DECODER.decode(mv[seg : close + 1]), close, False
        except (msgspec.DecodeError, RecursionError):
            return None
    err = seg + int(m.group(1)) if m and "truncated" not in msg else len(buf)
    # cut before the syntax error: at an event boundary "},{", else (a stray element between
    # events has none) at any comma between two values
    commas = [buf.index(b",", b.start()) for b in list(_BOUNDARY.finditer(buf, seg, err))[-8:]][::-1]
    if not commas:
        commas = [b.start(1) for b in list(_VALUE_SEP.finditer(buf, seg, err))[-24:]][::-1]
    for comma in commas:
        buf[comma : comma + 1] = b"]"
        try:
            return _RAW_LIST_DECODER.decode(mv[seg : comma + 1]), comma, True
        except (msgspec.DecodeError, RecursionError):
            buf[comma : comma + 1] = b","
    return None


def _walk_elements(buf: bytearray, mv: memoryview, seg: int, events: list[_Event],
                   not_events: list[tuple[int, bytes]], dropped: list[int]) -> tuple[int, bool] | None:
    """Decode the elements of the array opening at ``seg`` around the ones that are not events.

    The elements are listed once (``_raw_elements``); each run between bad elements is decoded in
    place (its bounding separators turned into ``[``/``]``, restored after), so the work is linear
    in the bytes, whatever the number of bad elements. A bad element that is not an object goes to
    ``not_events``, an object that cannot be decoded to ``dropped`` (their byte offsets). Returns
    ``_raw_elements``'s closing position and cut flag, or None when the elements cannot be listed.
    """
    listed = _raw_elements(buf, mv, seg)
    if listed is None:
        return None
    raws, close, cut = listed
    _decode_around_bad(buf, mv, seg, raws, close, events, not_events, dropped)
    del raws  # the Raw views export ``buf``: release them before the caller edits it
    return close, cut


def _decode_around_bad(buf: bytearray, mv: memoryview, seg: int, raws: list[msgspec.Raw], close: int,
                       events: list[_Event], not_events: list[tuple[int, bytes]], dropped: list[int]) -> None:
    """``_walk_elements``'s loop over the listed elements ``raws`` (their array opens at ``seg`` and
    closes at ``close``): each run of good events decoded in place, each bad element recorded."""
    total = len(raws)

    def off(j: int) -> int:
        o = _raw_offset(buf, raws[j], seg)
        return seg + 1 if o is None else o

    def sep_after(j: int) -> int:
        p = off(j) + len(raws[j])
        while buf[p] in _JSON_WS:
            p += 1
        return p

    def sep_before(j: int) -> int:
        p = off(j) - 1
        while buf[p] in _JSON_WS:
            p -= 1
        return p

    i = 0
    while i < total:
        lb = sep_before(i)
        old = buf[lb]
        buf[lb] = 0x5B  # "["
        try:
            try:
                events.extend(_LOOSE_EVENT_DECODER.decode(mv[lb : close + 1]))
                break
            except msgspec.ValidationError as exc:
                m = _VALIDATION_AT.search(str(exc))
                j = i + int(m.group(1)) if m else i
            except (msgspec.DecodeError, RecursionError):
                j = i
            if j > i:  # the good run before the bad element
                c = sep_after(j - 1)
                buf[c] = 0x5D  # "]"
                try:
                    events.extend(_LOOSE_EVENT_DECODER.decode(mv[lb : c + 1]))
                finally:
                    buf[c] = 0x2C  # ","
        finally:
            buf[lb] = old
        raw = bytes(raws[j])
        if raw[:1] != b"{":
            not_events.append((off(j), raw[:24]))
        else:
            try:
                events.append(_decode_one(raw))
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                dropped.append(off(j))
        i = j + 1


def _nth_event_offset(buf: bytearray, seg: int, k: int) -> int | None:
    """Offset of the k-th event of the array opening at ``seg`` (syntax must be valid up to it)."""
    try:
        raws = _RAW_LIST_DECODER.decode(memoryview(buf)[seg : _array_end(bytes(buf), seg + 1)])
    except (msgspec.DecodeError, RecursionError):
        return None
    if k >= len(raws):
        return None
    return _raw_offset(buf, raws[k], seg)


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
        except (msgspec.DecodeError, RecursionError):
            continue
        if i == 2 and end is not None:
            report.add("metadata_partial", "dropped", 1, "metadata after traceEvents could not be read")
        if isinstance(meta, dict):
            meta.pop("traceEvents", None)
            return meta
        return {}
    report.add("metadata_unreadable", "dropped", 1, "top-level metadata could not be read")
    return {}


def _decode_one(chunk: bytes) -> _Event:
    """One event (string-typed ``ts``/``dur`` allowed; its args are decoded later, per category group)."""
    return _ONE_EVENT_DECODER.decode(chunk)
