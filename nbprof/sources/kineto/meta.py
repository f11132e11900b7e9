"""``TraceMeta`` from a Kineto file's top-level metadata: rank, world size, devices, flags."""

from __future__ import annotations

import os
import re
from typing import Any

import pandas as pd

from ...trace.model import LoadReport, TraceMeta

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)", re.I)


def rank_from_filename(path: str) -> int | None:
    """``rank-3.json``, ``rank_3``, ``trace_rank3`` -> 3; ``worker0.<ts>.pt.trace.json`` -> None."""
    m = _RANK_IN_NAME.search(os.path.basename(path))
    return int(m.group(1)) if m else None


_RANK_LIMIT = 2**31  # ranks are int32 in the events table

_FLAG_KEYS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")


def _intish(v: Any, what: str, report: LoadReport) -> Any:
    """``distributedInfo`` rank/world_size written as a decimal string (``"3"``) -> that int, noted; else as is."""
    if isinstance(v, str) and v.strip().isdigit():
        report.add(f"string_{what}", "assumed", 1, f"distributedInfo.{what} was the string {v!r}: read as {int(v)}")
        return int(v)
    return v


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
    given, ws = _intish(dist.get("rank"), "rank", report), _intish(dist.get("world_size"), "world_size", report)
    if isinstance(given, int) and not isinstance(given, bool) and not 0 <= given < _RANK_LIMIT:
        report.add("rank_invalid", "assumed", 1,
                   f"distributedInfo.rank {given} is outside 0..2**31-1 (the int32 rank column): ignored")
        given = None
    if rank is not None:
        r, src = int(rank), "given"
    elif isinstance(given, int) and not isinstance(given, bool):
        r, src = int(given), "distributedInfo"
    else:
        fr = rank_from_filename(path)
        if fr is not None:
            r, src = fr, "filename"
            report.add("rank_from_filename", "assumed", 1, f"no distributedInfo.rank: rank {fr} taken from the file name")
        else:
            r, src = 0, "assumed"
            report.add("rank_assumed", "assumed", 1, "no distributedInfo.rank and no rank in the file name: rank assumed 0")
    if isinstance(ws, int) and not isinstance(ws, bool) and ws >= _RANK_LIMIT:
        report.add("world_size_invalid", "assumed", 1,
                   f"distributedInfo.world_size {ws} is above 2**31-1: ignored")
        ws = None
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
