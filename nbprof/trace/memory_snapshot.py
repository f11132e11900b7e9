"""Memory data of the trace model: a CUDA caching-allocator snapshot and ``export_memory_timeline`` rows.

Plain tables (pandas) and a load report, produced by ``nbprof.sources.memory_snapshot`` and read by
``nbprof.analysis.memory_snapshot``: the analyses depend on the model, not on the file reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .model import LoadReport

__all__ = ["MemorySnapshot", "MemoryTimeline", "TIMELINE_CATEGORIES", "TIMELINE_ACTIONS"]

#: export_memory_timeline category index -> name (torch ``_CATEGORY_TO_COLORS`` order).
TIMELINE_CATEGORIES = [
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
]
#: export_memory_timeline action code -> name (torch ``Action`` enum values).
TIMELINE_ACTIONS = {1: "preexisting", 2: "create", 3: "increment_version", 4: "destroy"}

@dataclass
class MemorySnapshot:
    """A CUDA caching-allocator snapshot in tables.

    Attributes
    ----------
    events : pandas.DataFrame
        One row per allocator trace entry, in recorded order per device: ``device`` (int16), ``idx`` (int64,
        order), ``ts_ns`` (int64, ns relative to the first entry; -1 if the entry has no time), ``action``
        (categorical, see module docstring), ``addr`` (int64, -1 if none), ``size_bytes`` (int64), ``stream``
        (int64), ``frames_id`` (int64 into ``frames``, -1 if none), ``device_free_bytes`` (int64, OOM rows only,
        else -1).
    segments : pandas.DataFrame
        ``device, address, total_size_bytes, allocated_size_bytes, active_size_bytes, requested_size_bytes,
        stream, segment_type, pool_id, is_expandable, n_blocks``.
    blocks : pandas.DataFrame
        ``device, segment_address, address, size_bytes, requested_size_bytes, state, frames_id``.
    frames : pandas.DataFrame
        ``frames_id, stack`` (text, innermost first, ``name (file:line)`` joined by " <- "), ``top_user_frame``
        (the innermost Python frame outside torch, else the innermost Python frame, else the aten op), ``op``
        (the innermost ``at::_ops::X`` dispatcher frame as ``aten::X``, "" if none), ``depth``.
    origin_us : int or None
        Absolute time (µs, from ``time_us``) of ``ts_ns == 0``.
    source_path : str
    report : LoadReport
    extra : dict
        Other top-level keys (e.g. ``allocator_settings``), kept as read.
    """

    events: pd.DataFrame
    segments: pd.DataFrame
    blocks: pd.DataFrame
    frames: pd.DataFrame
    origin_us: int | None
    source_path: str
    report: LoadReport
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def devices(self) -> list[int]:
        """Devices with segments or trace entries, ascending."""
        d = set(self.segments["device"].tolist()) | set(self.events["device"].tolist())
        return sorted(int(x) for x in d)

    def summary(self) -> dict[str, Any]:
        """A small dict like ``Trace.summary``: path, devices, counts, reserved/allocated bytes, OOMs.

        ``reserved_bytes`` and ``allocated_bytes`` sum ``segments.total_size_bytes`` and
        ``segments.allocated_size_bytes`` (the allocator state when the snapshot was taken).
        """
        acts = self.events["action"].astype(str) if len(self.events) else pd.Series([], dtype=str)
        return {
            "path": self.source_path,
            "kind": "CUDA caching-allocator snapshot",
            "devices": self.devices,
            "trace_entries": int(len(self.events)),
            "segments": int(len(self.segments)),
            "blocks": int(len(self.blocks)),
            "reserved_bytes": int(self.segments["total_size_bytes"].sum()) if len(self.segments) else 0,
            "allocated_bytes": int(self.segments["allocated_size_bytes"].sum()) if len(self.segments) else 0,
            "oom_events": int((acts == "oom").sum()),
            "clean_load": self.report.clean,
        }

    def __repr__(self) -> str:
        return (
            f"<nbprof.MemorySnapshot {self.source_path}: {len(self.events)} trace entries, "
            f"{len(self.segments)} segments, {len(self.blocks)} blocks, devices {self.devices}>"
        )


@dataclass
class MemoryTimeline:
    """``export_memory_timeline`` raw output: ``events`` with ``ts_ns`` (int64, ns relative to the first
    timed row; -1 = pre-existing), ``action`` (categorical), ``bytes`` (int64, negative on destroy),
    ``category`` (categorical, ``TIMELINE_CATEGORIES``)."""

    events: pd.DataFrame
    origin_ns: int | None
    source_path: str
    report: LoadReport

    def summary(self) -> dict[str, Any]:
        """A small dict like ``Trace.summary``: path, rows, span (ns) and rows per category."""
        ev = self.events
        timed = ev["ts_ns"][ev["ts_ns"] >= 0] if len(ev) else ev.get("ts_ns", pd.Series([], dtype="int64"))
        cats = ev["category"].value_counts(sort=False) if len(ev) else {}
        return {
            "path": self.source_path,
            "kind": "export_memory_timeline rows",
            "rows": int(len(ev)),
            "duration_ns": int(timed.max() - timed.min()) if len(timed) else 0,
            "categories": {str(k): int(v) for k, v in dict(cats).items() if v},
            "clean_load": self.report.clean,
        }
