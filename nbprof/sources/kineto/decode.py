"""Decoding a whole file in this process: the typed fast path, else the tolerant walk (``repair``).

The metadata around ``traceEvents`` is read without parsing the events (``_split_top``); the
events array is then decoded once into ``_Event`` Structs (``_LooseEvent`` when a ``ts``/``dur``
is a string). A decode error sends the file to ``repair._tolerant_decode``, or (strict mode)
raises ``TraceFormatError`` at the error's byte offset.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import numpy as np

from ...errors import TraceFormatError
from .context import _Ctx
from .reading import _first_char
from .repair import _MALFORMED_AT, _VALIDATION_AT, _events_array_start, _fix_utf8, _nth_event_offset, _tolerant_decode
from .structs import _ANY_DECODER, _EVENT_DECODER, _LOOSE_EVENT_DECODER, _TOP_DECODER, _Event
from .times import _BIG_FRACTIONAL_TS, _maybe_exact_ts


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
