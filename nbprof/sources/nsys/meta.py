"""Processes, threads, GPUs and session metadata of the Nsight Systems loader (``PROCESSES``, ``ThreadNames``,
``TARGET_INFO_GPU``, ``TARGET_INFO_SESSION_START_TIME``, ``ANALYSIS_DETAILS``, ``MPI_RANKS``, the export's
meta data) (see :mod:`nbprof.sources.nsys`)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ...trace.model import TraceMeta
from .db import _Db, _int_col, _names, decode_global_id


def read_gpus(db: _Db) -> tuple[pd.DataFrame | None, list[dict[str, Any]]]:
    """``TARGET_INFO_GPU`` as read (the ``gpus`` side table, None when absent) and as
    ``TraceMeta.device_properties`` (Kineto's ``deviceProperties`` keys; id: the CUDA device, else the row id;
    missing values left out)."""
    gpus = db.read("TARGET_INFO_GPU", ["id", "name", "totalMemory", "smCount", "computeMajor", "computeMinor",
                                       "maxThreadsPerBlock", "maxRegistersPerBlock", "maxShmemPerBlock",
                                       "maxShmemPerBlockOptin", "maxShmemPerSm", "maxRegistersPerSm",
                                       "threadsPerWarp", "maxWarpsPerSm", "maxBlocksPerSm", "l2CacheSize",
                                       "memoryBandwidth", "clockRate", "busLocation", "uuid", "chipName", "cuDevice"])
    devprops: list[dict[str, Any]] = []
    if gpus is None:
        return None, devprops
    for g in gpus.to_dict("records"):
        gid = g.get("cuDevice") if pd.notna(g.get("cuDevice")) else g.get("id")
        d = {"id": int(gid) if pd.notna(gid) else 0,
             "name": g.get("name"), "totalGlobalMem": g.get("totalMemory"), "numSms": g.get("smCount"),
             "computeMajor": g.get("computeMajor"), "computeMinor": g.get("computeMinor"),
             "maxThreadsPerBlock": g.get("maxThreadsPerBlock"), "regsPerBlock": g.get("maxRegistersPerBlock"),
             "regsPerMultiprocessor": g.get("maxRegistersPerSm"), "warpSize": g.get("threadsPerWarp"),
             "sharedMemPerBlock": g.get("maxShmemPerBlock"), "sharedMemPerBlockOptin": g.get("maxShmemPerBlockOptin"),
             "sharedMemPerMultiprocessor": g.get("maxShmemPerSm"),
             "maxThreadsPerMultiprocessor": (g["maxWarpsPerSm"] * g["threadsPerWarp"]
                                             if pd.notna(g.get("maxWarpsPerSm")) and pd.notna(g.get("threadsPerWarp")) else None),
             "l2CacheSize": g.get("l2CacheSize"), "memoryBandwidth": g.get("memoryBandwidth"),
             "clockRate": g.get("clockRate"), "busLocation": g.get("busLocation"), "uuid": g.get("uuid"),
             "chipName": g.get("chipName")}
        devprops.append({kk: _plain(v) for kk, v in d.items() if v is not None and not (isinstance(v, float) and np.isnan(v))})
    return gpus, devprops


def _rank(db: _Db) -> tuple[int, str]:
    """The rank (``MPI_RANKS`` when it holds one usable value) and its source; else 0, "assumed" (reported when
    ``MPI_RANKS`` has rows)."""
    ranks = db.read("MPI_RANKS", ["globalTid", "rank"], required=("rank",))
    if ranks is None or not len(ranks):
        return 0, "assumed"
    rv = ranks["rank"].dropna()
    if rv.nunique() == 1 and 0 <= rv.iloc[0] < 2**31:
        return int(rv.iloc[0]), "MPI_RANKS"
    db.report.add("rank_assumed", "assumed", int(len(ranks)), f"MPI_RANKS holds {rv.nunique()} usable rank "
                  f"values ({sorted(rv.unique().tolist())[:4]}): rank 0 assumed")
    return 0, "assumed"


def read_meta(db: _Db, spath: str, meta_export: dict[str, Any], devprops: list[dict[str, Any]]) -> TraceMeta:
    """The ``TraceMeta`` of the export: origin (session start, Unix epoch ns), rank, producer and schema
    version (from the export's meta data ``meta_export``), ``devprops``; ``extra``: the export meta data, the
    sqlite path and ``ANALYSIS_DETAILS`` (ns)."""
    origin = None
    st = db.read("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"])
    if st is not None and len(st):
        origin = int(st["utcEpochNs"].iloc[0]) if pd.notna(st["utcEpochNs"].iloc[0]) else None
    details = db.read("ANALYSIS_DETAILS", ["duration", "startTime", "stopTime"])
    extra: dict[str, Any] = {"export_meta": meta_export, "sqlite_path": spath}
    if details is not None and len(details):
        extra["analysis_details"] = {k2: int(v) for k2, v in details.iloc[0].items() if pd.notna(v)}
    rank, rank_source = _rank(db)
    version = meta_export.get("EXPORT_PRODUCT_VERSION")
    return TraceMeta(
        source_path=spath, source_format="nsys",
        producer=f"Nsight Systems {version}" if version else "Nsight Systems", origin_ns=origin,
        rank=rank, rank_source=rank_source, device_properties=devprops,
        schema_version=_schema_version(db, meta_export.get("EXPORT_SCHEMA_VERSION")), extra=extra,
    )


def _plain(v: Any) -> Any:
    """A numpy/pandas scalar as the Python value (metadata holds plain JSON-able values)."""
    return v.item() if hasattr(v, "item") else v


def _schema_version(db: _Db, v: Any) -> int | None:
    """``EXPORT_SCHEMA_VERSION`` ("3.7.1") -> 3; an unreadable value -> None (reported)."""
    if v is None or v == "":
        return None
    m = re.match(r"\s*(\d{1,9})(?:\.|\s*$)", str(v))
    if m:
        return int(m.group(1))
    msg = f"EXPORT_SCHEMA_VERSION {str(v)[:40]!r} is not a version number: schema version unknown"
    if db.strict:
        db.fail(msg, "META_DATA_EXPORT")
    db.report.add("bad_schema_version", "assumed", 1, msg)
    return None


def _threads(db: _Db, strings: dict[int, str | None], procs: pd.DataFrame | None, events: pd.DataFrame,
             host_pids: set[int]) -> pd.DataFrame:
    """``Trace.threads`` (``pid, tid, name, kind``): the named processes and threads (``PROCESSES``,
    ``ThreadNames``) of the host pids, a ``"stream s"`` thread per device stream and a ``"GPU n"`` process per
    device; one row per (pid, tid, kind)."""
    rows = []
    if procs is not None and len(procs):
        for p, n in zip(_int_col(procs, "pid"), _names(procs, "name", strings)):
            if int(p) in host_pids:
                rows.append((int(p), int(p), str(n), "process"))
    tn = db.read("ThreadNames", ["nameId", "globalTid"])
    if tn is not None and len(tn):
        pid, tid = decode_global_id(_int_col(tn, "globalTid", 0))
        for p, t, n in zip(pid, tid, _names(tn, "nameId", strings)):
            if int(p) in host_pids:
                rows.append((int(p), int(t), str(n), "thread"))
    devs = events.loc[events["device"] >= 0, ["device", "stream"]].drop_duplicates()
    for d, st in zip(devs["device"], devs["stream"]):
        rows.append((int(d), int(st), f"stream {int(st)}", "thread"))
    for d in sorted(set(devs["device"].tolist())):
        rows.append((int(d), int(d), f"GPU {int(d)}", "process"))
    df = pd.DataFrame(rows, columns=["pid", "tid", "name", "kind"]).drop_duplicates(["pid", "tid", "kind"])
    return df.reset_index(drop=True)
