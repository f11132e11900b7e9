"""GPU activity tables of the Nsight Systems loader: kernels (``CUPTI_ACTIVITY_KIND_KERNEL``), copies
(``CUPTI_ACTIVITY_KIND_MEMCPY``) and sets (``CUPTI_ACTIVITY_KIND_MEMSET``), each as device events and a side
table (see :mod:`nbprof.sources.nsys`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...trace import schema
from .db import _Db, _int_col, _names, decode_global_id
from .frames import Read, _durations, _frame

#: copyKind -> name, as ``nsys stats`` (2022.4 ``nsysstats.MEM_OPER_STRS_CTE``) writes them.
MEMCPY_KIND_NAMES = {
    0: "[CUDA memcpy Unknown]", 1: "[CUDA memcpy HtoD]", 2: "[CUDA memcpy DtoH]", 3: "[CUDA memcpy HtoA]",
    4: "[CUDA memcpy AtoH]", 5: "[CUDA memcpy AtoA]", 6: "[CUDA memcpy AtoD]", 7: "[CUDA memcpy DtoA]",
    8: "[CUDA memcpy DtoD]", 9: "[CUDA memcpy HtoH]", 10: "[CUDA memcpy PtoP]",
    11: "[CUDA Unified Memory memcpy HtoD]", 12: "[CUDA Unified Memory memcpy DtoH]",
    13: "[CUDA Unified Memory memcpy DtoD]",
}
#: srcKind/dstKind/memKind -> name (``nsysstats.MEM_KIND_STRS_CTE``; CUPTI_ACTIVITY_MEMORY_KIND).
MEM_KIND_NAMES = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
                  6: "Managed Static", 7: "Unknown"}
MEMSET_NAME = "[CUDA memset]"


def _dims(df: pd.DataFrame, prefix: str) -> list[str | None]:
    """``"x,y,z"`` of the ``<prefix>X/Y/Z`` columns per row (None each when a column is missing)."""
    cols = [f"{prefix}{a}" for a in "XYZ"]
    if not all(c in df for c in cols):
        return [None] * len(df)
    x, y, z = (_int_col(df, c) for c in cols)
    return [f"{a},{b},{c}" for a, b, c in zip(x, y, z)]


def _mem_kinds(df: pd.DataFrame, col: str) -> list[str]:
    """``MEM_KIND_NAMES`` of column ``col`` per row ("Unknown" for an unknown or missing kind)."""
    return [MEM_KIND_NAMES.get(int(x), "Unknown") for x in _int_col(df, col, 7)]


def _copy_events(df: pd.DataFrame, start: np.ndarray, dur: np.ndarray, name: Any, cat: str, dev: np.ndarray,
                 stream: np.ndarray) -> pd.DataFrame:
    """Copy or set rows ``df`` as device events (``cat``, pid/tid = device/stream, ``correlation``, ``bytes``);
    ``start`` / ``dur`` ns, ``name`` one per row or one for all."""
    return _frame(len(df), {
        "ts_ns": start, "dur_ns": dur, "name": name, "cat": cat,
        "ph": "X", "pid": dev, "tid": stream, "device": dev, "stream": stream,
        "correlation": _int_col(df, "correlationId"), "bytes": _int_col(df, "bytes"),
    })


def read_kernels(db: _Db, strings: dict[int, str | None]) -> Read:
    """``CUPTI_ACTIVITY_KIND_KERNEL``: ``kernel`` events (name: demangled, else short; pid/tid = device/stream;
    grid, block, registers, shared memory bytes) and the ``kernels`` side table (``ts_ns, dur_ns, correlation,
    device, stream, pid, demangled_name, short_name, mangled_name, context, static_shared_mem_bytes,
    dynamic_shared_mem_bytes``; ns, bytes)."""
    k = db.read("CUPTI_ACTIVITY_KIND_KERNEL", [
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName", "shortName",
        "mangledName", "registersPerThread", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
        "staticSharedMemory", "dynamicSharedMemory", "contextId", "launchType"], required=("start", "end"))
    if k is None or not len(k):
        return None, None
    dem = _names(k, "demangledName", strings)
    short = _names(k, "shortName", strings)
    name = dem.where(dem.notna(), short)
    start, kdur = _durations(db, k, "CUPTI_ACTIVITY_KIND_KERNEL")
    shm = np.maximum(_int_col(k, "staticSharedMemory", 0), 0) + np.maximum(_int_col(k, "dynamicSharedMemory", 0), 0)
    dev, stream = _int_col(k, "deviceId"), _int_col(k, "streamId")
    part = _frame(len(k), {
        "ts_ns": start, "dur_ns": kdur, "name": name.to_numpy(), "cat": schema.KERNEL,
        "ph": "X", "pid": dev, "tid": stream, "device": dev, "stream": stream,
        "correlation": _int_col(k, "correlationId"), "grid": _dims(k, "grid"), "block": _dims(k, "block"),
        "registers": _int_col(k, "registersPerThread"), "shared_mem_bytes": shm,
    })
    gp = _int_col(k, "globalPid", 0)
    return part, pd.DataFrame({
        "ts_ns": start, "dur_ns": kdur, "correlation": _int_col(k, "correlationId"), "device": dev, "stream": stream,
        "pid": decode_global_id(gp)[0], "demangled_name": dem, "short_name": short,
        "mangled_name": _names(k, "mangledName", strings), "context": _int_col(k, "contextId"),
        "static_shared_mem_bytes": _int_col(k, "staticSharedMemory"),
        "dynamic_shared_mem_bytes": _int_col(k, "dynamicSharedMemory"),
    })


def read_memcpy(db: _Db, strings: dict[int, str | None]) -> Read:
    """``CUPTI_ACTIVITY_KIND_MEMCPY``: ``gpu_memcpy`` events named by copy kind (``MEMCPY_KIND_NAMES``, with
    ``bytes``) and the ``memcpy`` side table (``ts_ns, dur_ns, correlation, device, stream, pid, bytes,
    copy_kind, name, src_kind, dst_kind, src_device, dst_device``; ns, bytes). ``strings`` is unused (the
    readers share one signature)."""
    m = db.read("CUPTI_ACTIVITY_KIND_MEMCPY", [
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "copyKind", "srcKind",
        "dstKind", "srcDeviceId", "dstDeviceId", "contextId"], required=("start", "end"))
    if m is None or not len(m):
        return None, None
    (start, mdur), kind = _durations(db, m, "CUPTI_ACTIVITY_KIND_MEMCPY"), _int_col(m, "copyKind", 0)
    dev, stream = _int_col(m, "deviceId"), _int_col(m, "streamId")
    names = [MEMCPY_KIND_NAMES.get(int(x), f"[CUDA memcpy kind {int(x)}]") for x in kind]
    part = _copy_events(m, start, mdur, names, schema.GPU_MEMCPY, dev, stream)
    return part, pd.DataFrame({
        "ts_ns": start, "dur_ns": mdur, "correlation": _int_col(m, "correlationId"),
        "device": dev, "stream": stream, "pid": decode_global_id(_int_col(m, "globalPid", 0))[0],
        "bytes": _int_col(m, "bytes"), "copy_kind": kind, "name": names,
        "src_kind": _mem_kinds(m, "srcKind"), "dst_kind": _mem_kinds(m, "dstKind"),
        "src_device": _int_col(m, "srcDeviceId"), "dst_device": _int_col(m, "dstDeviceId"),
    })


def read_memset(db: _Db, strings: dict[int, str | None]) -> Read:
    """``CUPTI_ACTIVITY_KIND_MEMSET``: ``gpu_memset`` events (``MEMSET_NAME``, with ``bytes``) and the ``memset``
    side table (``ts_ns, dur_ns, correlation, device, stream, pid, bytes, value, mem_kind``; ns, bytes).
    ``strings`` is unused (the readers share one signature)."""
    s = db.read("CUPTI_ACTIVITY_KIND_MEMSET", [
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "memKind", "value"],
        required=("start", "end"))
    if s is None or not len(s):
        return None, None
    start, sdur = _durations(db, s, "CUPTI_ACTIVITY_KIND_MEMSET")
    dev, stream = _int_col(s, "deviceId"), _int_col(s, "streamId")
    part = _copy_events(s, start, sdur, MEMSET_NAME, schema.GPU_MEMSET, dev, stream)
    return part, pd.DataFrame({
        "ts_ns": start, "dur_ns": sdur, "correlation": _int_col(s, "correlationId"),
        "device": dev, "stream": stream, "pid": decode_global_id(_int_col(s, "globalPid", 0))[0],
        "bytes": _int_col(s, "bytes"), "value": _int_col(s, "value"), "mem_kind": _mem_kinds(s, "memKind"),
    })
