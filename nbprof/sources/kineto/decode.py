"""Decoding a whole file in this process: the typed fast path, else the tolerant walk (``repair``).

The metadata around ``traceEvents`` is read without parsing the events (``_split_top``); the
events array is then decoded once into ``_Event`` Structs (``_LooseEvent`` when a ``ts``/``dur``
is a string). A decode error sends the file to ``repair._tolerant_decode``, or (strict mode)
raises ``TraceFormatError`` at the error's byte offset.
"""

from __future__ import annotations

import re
from typing import Any, cast

import msgspec
import numpy as np

from ...errors import TraceFormatError
from .context import _Ctx
from .reading import _first_char
from .repair import (
    _MALFORMED_AT,
    _VALIDATION_AT,
    _deep_at,
    _events_array_start,
    _fix_utf8,
    _nth_event_offset,
    _tolerant_decode,
)
from .structs import _ANY_DECODER, _EVENT_DECODER, _LOOSE_EVENT_DECODER, _TOP_DECODER, _Event
from .times import _BIG_FRACTIONAL_TS, _maybe_exact_ts


def _decode_span(span: Any, ctx: _Ctx) -> list[_Event]:
    """The events array (typed); string-typed ``ts``/``dur`` switch to ``_LooseEvent`` (checked later)."""
    try:
        return _EVENT_DECODER.decode(span)
    except msgspec.ValidationError:
        ctx.loose = True
        return cast("list[_Event]", _LOOSE_EVENT_DECODER.decode(span))  # _LooseEvent is an _Event


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
                ctx.quick_ok = True
                return events, meta, _maybe_exact_ts(data, raw_events, events)
            top = _TOP_DECODER.decode(data)
            raw_events = top.pop("traceEvents", None)
            if raw_events is None:
                raise TraceFormatError(ctx.path, 0, "no 'traceEvents' key in the top-level object: not a Kineto trace")
            ctx.array_start = _events_array_start(data)
            events = _decode_span(raw_events, ctx)
            meta = {k: _ANY_DECODER.decode(v) for k, v in top.items()}
        return events, meta, _maybe_exact_ts(data, raw_events, events)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        deep = isinstance(exc, RecursionError)
        msg = "JSON is nested deeper than the decoder allows" if deep else str(exc)
        if first not in (b"{", b"["):
            raise TraceFormatError(ctx.path, 0, f"not a JSON trace (starts with {bytes(data[:16])!r})") from exc
        if ctx.strict:
            if deep:
                at = _deep_at(data, 0 if ctx.array_start is None else ctx.array_start - 1)
                raise TraceFormatError(ctx.path, at, msg) from exc
            off = _strict_offset(data, msg, ctx)
            # one offset only: msgspec's "(byte N)" counts from wherever the decode started
            reason = _MALFORMED_AT.sub("", msg).replace(" - at `$", " at `traceEvents").strip()
            m = _VALIDATION_AT.search(msg)
            raise TraceFormatError(ctx.path, off, reason, event_index=int(m.group(1)) if m else None) from exc
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
    metadata; an earlier one, inside the last event, leaves unbalanced braces). When none is, and
    bytes follow the document, the ``]`` whose object ends furthest into the file. The caller
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
    trailing: tuple[int, int, dict[str, Any]] | None = None  # (document end, p, meta)
    for _ in range(256):
        p = data.rfind(b"]", lo, p)
        if p < 0:
            break
        meta, trail = _decode_top(head, data[p + 1 :])
        if isinstance(meta, dict) and meta.get("traceEvents") == []:
            if trail is None:
                found = (p, meta)
            elif trailing is None or p + 1 + trail > trailing[0]:
                trailing = (p + 1 + trail, p, meta)
    if found is None and trailing is not None:
        # bytes after the document (reported by ``_trailing_bytes``): the ``]`` whose document reaches furthest
        found = trailing[1:]
    if found is None:
        return None
    p, meta = found
    del meta["traceEvents"]
    return start, p + 1, meta


_TRAILING_AT = re.compile(r"trailing characters \(byte (\d+)\)")


def _decode_top(head: Any, tail: Any) -> tuple[Any, int | None]:
    """The top-level document ``head + [] + tail`` (the events array left out), decoded; None when it
    is not JSON. Bytes after the document's end are left out: the second value is the offset in
    ``tail`` where they start (None when there are none)."""
    doc = bytes(head) + b"[]" + bytes(tail)
    try:
        return _ANY_DECODER.decode(doc), None
    except msgspec.DecodeError as exc:
        m = _TRAILING_AT.search(str(exc))
        if m is None:
            return None, None
    except RecursionError:
        return None, None
    at = int(m.group(1)) - 1  # msgspec names the byte after the first trailing one
    try:
        return _ANY_DECODER.decode(doc[:at]), at - len(head) - 2
    except (msgspec.DecodeError, RecursionError):
        return None, None


def _trailing_bytes(data: Any, end: int, ctx: _Ctx) -> None:
    """Report (strict mode: raise) bytes after the end of the JSON document whose events array ends
    at ``end``: they are ignored (kind ``trailing_bytes``, count = bytes, offset = the first one)."""
    if _first_char(data) == b"[":
        ws = _WS_END.match(data, end)  # ``\s*`` always matches
        tail_at = ws.end() if ws is not None else end
        at = tail_at if tail_at < len(data) else None
    else:
        head = data[: _events_array_start(data) - 1]
        _meta, rel = _decode_top(head, memoryview(data)[end:])
        at = None if rel is None else end + rel
    if at is None:
        return
    n = len(data) - at
    if ctx.strict:
        raise TraceFormatError(ctx.path, at, f"{n} bytes after the end of the JSON document")
    ctx.report.add("trailing_bytes", "dropped", n,
                   f"{n} bytes after the end of the JSON document (e.g. {bytes(data[at : at + 16])!r}) were ignored",
                   offset=at)


_WS_END = re.compile(rb"\s*")


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
