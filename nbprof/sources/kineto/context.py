"""Per-load state (``_Ctx``): the path, the load report, strict mode, and byte offsets of events.

Every repair, drop or assumption goes through ``_Ctx.defect`` (the report, with the first
event's byte offset) or, in strict mode, ``_Ctx.fail`` (``TraceFormatError``).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import numpy as np

from ...errors import TraceFormatError
from ...trace.model import LoadReport
from .reading import read_bytes
from .structs import _RAW_LIST_DECODER


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

    def __init__(self, path: str, report: LoadReport, strict: bool, data: bytes | None) -> None:
        self.path = path
        self.report = report
        self.strict = strict
        self.data: bytes | None = data
        self.fast = True  # events decoded in one pass: event index == position in traceEvents
        self.loose = False  # events are _LooseEvent: ts/dur may be strings
        self.array_start: int | None = None
        self.quick_ok = False  # the events span found by ``decode._split_top`` decoded as it is
        # assumptions noted by ``note`` (kind -> [count, first event index, template, example]), emitted
        # by ``finish`` in one order whichever process read the events (``emit_notes``)
        self.notes: dict[str, list[Any]] = {}
        # id column -> {stored int64 id: the value as written} for ids not stored as themselves (u64,
        # texts, integers beyond 64 bits): the ``id_values`` side table (``columns._to_int_array``)
        self.id_values: dict[str, dict[int, int | str]] = {}

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
            return _raw_offset(self.data, raws[k], self.array_start)
        except (msgspec.DecodeError, IndexError, RecursionError):
            return None

    def note(self, kind: str, count: int, k: int | None, template: str, example: Any) -> None:
        """An assumption about ``count`` values, the first in event ``k`` of this run: kept until
        ``finish`` emits it (``template`` formats with ``count`` and ``example``). Never raises."""
        have = self.notes.get(kind)
        if have is None:
            self.notes[kind] = [count, k, template, example]
            return
        have[0] += count
        if k is not None and (have[1] is None or k < have[1]):
            have[1], have[3] = k, example

    def defect(self, kind: str, action: str, count: int, message: str, k: int | None, reason: str) -> None:
        """``count`` values repaired or dropped (``action``), the first in event ``k``: recorded in the
        load report with that event's byte offset, or (strict mode) raised as ``reason``."""
        if self.strict:
            self.fail(reason, k)
        self.report.add(kind, action, count, message, offset=self.event_offset(k))

    def fail(self, reason: str, k: int | None = None) -> None:
        """Strict mode: raise ``TraceFormatError`` for event ``k`` (an index into ``traceEvents``)."""
        raise TraceFormatError(self.path, self.event_offset(k), reason, event_index=k)


def _raw_offset(data: Any, raw: msgspec.Raw, start: int = 0) -> int | None:
    """Byte offset in ``data`` of a ``msgspec.Raw`` decoded from it (a view into its buffer: the
    difference of the two addresses, checked), else of the first copy of its bytes after ``start``."""
    try:
        a = np.frombuffer(raw, dtype=np.uint8)
        base = np.frombuffer(data, dtype=np.uint8)
        off = a.ctypes.data - base.ctypes.data
        if 0 <= off <= len(data) - len(a) and data[off : off + len(a)] == bytes(a):
            return off
    except (TypeError, ValueError, BufferError):
        pass
    pos = data.find(bytes(raw), start)
    return pos if pos >= 0 else None


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
