"""Table readers of the Nsight Systems loader: kernels, memcpy/memset, CUDA runtime/driver, NVTX, OSRT,
CPU samples, scheduling, processes and GPUs, mapped onto the trace model (see :mod:`nbprof.sources.nsys`)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ...errors import TraceFormatError
from ...trace import schema
from ...trace.model import LoadReport, Trace, TraceMeta
from ...trace.steps import assign_steps
from .db import _Db, _int_col, _names, _text_value, decode_global_id

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

#: NVTX_EVENTS.eventType values (NvtxEventType in the schema reference).
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND = 34, 59, 60, 70, 71
NVTX_DOMAIN_CREATE = 75
#: OSRT_API.eventClass of an OS runtime call (31/32 are "profiling started/finished" markers).
OSRT_CALL_CLASS = 27

_STEP_RE = re.compile(r"^(?:ProfilerStep#|step[ #_:]?)(\d+)$", re.IGNORECASE)
_VERSION_SUFFIX = re.compile(r"_v\d{4,5}$")


def _frame(n: int, cols: dict[str, Any]) -> pd.DataFrame:
    """A schema-complete events frame of ``n`` rows from the given columns (others defaulted)."""
    data = {}
    for col, (dtype, _u, _d) in schema.EVENT_COLUMNS.items():
        if col in cols:
            v = cols[col]
            data[col] = (np.full(n, v) if np.isscalar(v) or v is None else np.asarray(v, dtype=object if dtype == "category" else None))
        elif dtype == "category":
            data[col] = np.full(n, None, dtype=object)
        elif dtype.startswith("float"):
            data[col] = np.full(n, np.nan)
        else:
            data[col] = np.full(n, -1)
    return pd.DataFrame(data)


def _dims(df: pd.DataFrame, prefix: str) -> list[str | None]:
    cols = [f"{prefix}{a}" for a in "XYZ"]
    if not all(c in df for c in cols):
        return [None] * len(df)
    x, y, z = (_int_col(df, c) for c in cols)
    return [f"{a},{b},{c}" for a, b, c in zip(x, y, z)]

#: event tables the loader reads, for the "absent tables" note (nsys writes no table without rows)
_EVENT_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                 "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API", "COMPOSITE_EVENTS", "SCHED_EVENTS")


def _durations(db: _Db, df: pd.DataFrame, table: str) -> tuple[np.ndarray, np.ndarray]:
    """(start, dur) of a range table; ``end < start`` (or no end) gives dur 0 (reported)."""
    start, end = _int_col(df, "start"), _int_col(df, "end")
    bad = end < start
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = (f"{int(bad.sum())} rows of {table} end before they start or have no end (first: row #{i} read, "
               f"start {int(start[i])}, end {int(end[i])}): duration set to 0")
        if db.strict:
            db.fail(msg, table)
        db.report.add(f"negative_dur:{table}", "repaired", int(bad.sum()), msg)
    return start, np.where(bad, 0, end - start)


def _load(db: _Db, spath: str, report: LoadReport) -> Trace:
    if "StringIds" not in db.names:
        raise TraceFormatError(spath, None, "no StringIds table: not an Nsight Systems SQLite export", table="StringIds")
    if not {"id", "value"} <= set(db.columns("StringIds")):
        raise TraceFormatError(spath, None, f"StringIds has columns {db.columns('StringIds')}, expected id and value: "
                               "not an Nsight Systems SQLite export", table="StringIds")
    absent = [t for t in _EVENT_TABLES if db.table(t) is None]
    if absent:
        report.add("absent_tables", "assumed", len(absent), "tables absent from the export (nsys writes no table "
                   f"without rows): {', '.join(absent)}; those kinds of event are empty")
    db._table = "StringIds"
    try:
        strings: dict[int, str | None] = {}
        for i, v in db.con.execute("SELECT id, value FROM StringIds"):
            if isinstance(i, int):
                strings[i] = _text_value(v)
    finally:
        db.flush_text_issues()
    meta_export = db.kv("META_DATA_EXPORT") or db.kv("EXPORT_META_DATA")
    tables: dict[str, pd.DataFrame] = {}
    parts: list[pd.DataFrame] = []

    # ------------------------------------------------------------------ kernels
    k = db.read("CUPTI_ACTIVITY_KIND_KERNEL", [
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName", "shortName",
        "mangledName", "registersPerThread", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
        "staticSharedMemory", "dynamicSharedMemory", "contextId", "launchType"], required=("start", "end"))
    if k is not None and len(k):
        dem = _names(k, "demangledName", strings)
        short = _names(k, "shortName", strings)
        name = dem.where(dem.notna(), short)
        start, kdur = _durations(db, k, "CUPTI_ACTIVITY_KIND_KERNEL")
        shm = np.maximum(_int_col(k, "staticSharedMemory", 0), 0) + np.maximum(_int_col(k, "dynamicSharedMemory", 0), 0)
        dev, stream = _int_col(k, "deviceId"), _int_col(k, "streamId")
        parts.append(_frame(len(k), {
            "ts_ns": start, "dur_ns": kdur, "name": name.to_numpy(), "cat": schema.KERNEL,
            "ph": "X", "pid": dev, "tid": stream, "device": dev, "stream": stream,
            "correlation": _int_col(k, "correlationId"), "grid": _dims(k, "grid"), "block": _dims(k, "block"),
            "registers": _int_col(k, "registersPerThread"), "shared_mem_bytes": shm,
        }))
        gp = _int_col(k, "globalPid", 0)
        tables["kernels"] = pd.DataFrame({
            "ts_ns": start, "dur_ns": kdur, "correlation": _int_col(k, "correlationId"), "device": dev, "stream": stream,
            "pid": decode_global_id(gp)[0], "demangled_name": dem, "short_name": short,
            "mangled_name": _names(k, "mangledName", strings), "context": _int_col(k, "contextId"),
            "static_shared_mem_bytes": _int_col(k, "staticSharedMemory"),
            "dynamic_shared_mem_bytes": _int_col(k, "dynamicSharedMemory"),
        })

    # ------------------------------------------------------------------ memcpy / memset
    m = db.read("CUPTI_ACTIVITY_KIND_MEMCPY", [
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "copyKind", "srcKind",
        "dstKind", "srcDeviceId", "dstDeviceId", "contextId"], required=("start", "end"))
    if m is not None and len(m):
        (start, mdur), kind = _durations(db, m, "CUPTI_ACTIVITY_KIND_MEMCPY"), _int_col(m, "copyKind", 0)
        dev, stream = _int_col(m, "deviceId"), _int_col(m, "streamId")
        names = [MEMCPY_KIND_NAMES.get(int(x), f"[CUDA memcpy kind {int(x)}]") for x in kind]
        parts.append(_frame(len(m), {
            "ts_ns": start, "dur_ns": mdur, "name": names, "cat": schema.GPU_MEMCPY,
            "ph": "X", "pid": dev, "tid": stream, "device": dev, "stream": stream,
            "correlation": _int_col(m, "correlationId"), "bytes": _int_col(m, "bytes"),
        }))
        tables["memcpy"] = pd.DataFrame({
            "ts_ns": start, "dur_ns": mdur, "correlation": _int_col(m, "correlationId"),
            "device": dev, "stream": stream, "pid": decode_global_id(_int_col(m, "globalPid", 0))[0],
            "bytes": _int_col(m, "bytes"), "copy_kind": kind, "name": names,
            "src_kind": [MEM_KIND_NAMES.get(int(x), "Unknown") for x in _int_col(m, "srcKind", 7)],
            "dst_kind": [MEM_KIND_NAMES.get(int(x), "Unknown") for x in _int_col(m, "dstKind", 7)],
            "src_device": _int_col(m, "srcDeviceId"), "dst_device": _int_col(m, "dstDeviceId"),
        })
    s = db.read("CUPTI_ACTIVITY_KIND_MEMSET", [
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "memKind", "value"],
        required=("start", "end"))
    if s is not None and len(s):
        start, sdur = _durations(db, s, "CUPTI_ACTIVITY_KIND_MEMSET")
        dev, stream = _int_col(s, "deviceId"), _int_col(s, "streamId")
        parts.append(_frame(len(s), {
            "ts_ns": start, "dur_ns": sdur, "name": MEMSET_NAME, "cat": schema.GPU_MEMSET,
            "ph": "X", "pid": dev, "tid": stream, "device": dev, "stream": stream,
            "correlation": _int_col(s, "correlationId"), "bytes": _int_col(s, "bytes"),
        }))
        tables["memset"] = pd.DataFrame({
            "ts_ns": start, "dur_ns": sdur, "correlation": _int_col(s, "correlationId"),
            "device": dev, "stream": stream, "pid": decode_global_id(_int_col(s, "globalPid", 0))[0],
            "bytes": _int_col(s, "bytes"), "value": _int_col(s, "value"),
            "mem_kind": [MEM_KIND_NAMES.get(int(x), "Unknown") for x in _int_col(s, "memKind", 7)],
        })

    # ------------------------------------------------------------------ CUDA API
    r = db.read("CUPTI_ACTIVITY_KIND_RUNTIME", ["start", "end", "eventClass", "globalTid", "correlationId",
                                                "nameId", "returnValue"], required=("start", "end"))
    if r is not None and len(r):
        raw = _names(r, "nameId", strings).fillna("[unknown]")
        clean = raw.map(lambda v: _VERSION_SUFFIX.sub("", v))
        start, rdur = _durations(db, r, "CUPTI_ACTIVITY_KIND_RUNTIME")
        pid, tid = decode_global_id(_int_col(r, "globalTid", 0))
        cat = np.where(clean.str.startswith("cu") & ~clean.str.startswith("cuda"), schema.CUDA_DRIVER, schema.CUDA_RUNTIME)
        parts.append(_frame(len(r), {
            "ts_ns": start, "dur_ns": rdur, "name": clean.to_numpy(), "cat": cat, "ph": "X",
            "pid": pid, "tid": tid, "correlation": _int_col(r, "correlationId"),
        }))
        tables["runtime"] = pd.DataFrame({
            "ts_ns": start, "dur_ns": rdur, "pid": pid, "tid": tid,
            "correlation": _int_col(r, "correlationId"), "name": clean, "api_name": raw,
            "name_id": _int_col(r, "nameId"), "event_class": _int_col(r, "eventClass"),
            "return_value": _int_col(r, "returnValue", 0),
        })

    # ------------------------------------------------------------------ NVTX
    nv = db.read("NVTX_EVENTS", ["rowid", "start", "end", "eventType", "rangeId", "category", "color", "text", "globalTid",
                                 "endGlobalTid", "textId", "domainId", "uint64Value", "int64Value", "doubleValue",
                                 "uint32Value", "int32Value", "floatValue", "jsonText", "jsonTextId"],
                 required=("start",))
    if nv is not None and len(nv):
        tables["nvtx"] = nvtx = _nvtx_table(nv, strings)
        keep = nvtx[nvtx["style"].isin(["PushPop", "StartEnd", "Mark"])]
        if len(keep):
            maxts = int(max(nvtx["ts_ns"].max(), nvtx["end_ns"].max()))
            end = keep["end_ns"].where(keep["end_ns"] >= 0, maxts)
            dur = np.where(keep["style"] == "Mark", 0, end - keep["ts_ns"])
            parts.append(_frame(len(keep), {
                "ts_ns": keep["ts_ns"].to_numpy(), "dur_ns": dur, "name": keep["name"].to_numpy(), "cat": schema.NVTX,
                "ph": np.where(keep["style"] == "Mark", "i", "X"), "pid": keep["pid"].to_numpy(),
                "tid": keep["tid"].to_numpy(),
            }))
            unterminated = int(((keep["style"] != "Mark") & (keep["end_ns"] < 0)).sum())
            if unterminated:
                report.add("nvtx_unterminated", "assumed", unterminated,
                           f"{unterminated} NVTX ranges have no end; they are taken to end at the last NVTX "
                           "timestamp (as nsys stats does)")

    # ------------------------------------------------------------------ OS runtime
    o = db.read("OSRT_API", ["start", "end", "eventClass", "globalTid", "nameId", "returnValue", "nestingLevel"],
                required=("start", "end"))
    if o is not None and len(o):
        if "eventClass" in o:
            o = o[o["eventClass"] == OSRT_CALL_CLASS].reset_index(drop=True)
        start, odur = _durations(db, o, "OSRT_API")
        pid, tid = decode_global_id(_int_col(o, "globalTid", 0))
        nm = _names(o, "nameId", strings).fillna("[unknown]")
        parts.append(_frame(len(o), {
            "ts_ns": start, "dur_ns": odur, "name": nm.to_numpy(), "cat": schema.OSRT,
            "ph": "X", "pid": pid, "tid": tid,
        }))
        tables["osrt"] = pd.DataFrame({"ts_ns": start, "dur_ns": odur, "pid": pid, "tid": tid,
                                       "name": nm, "name_id": _int_col(o, "nameId"),
                                       "return_value": _int_col(o, "returnValue", 0),
                                       "nesting_level": _int_col(o, "nestingLevel", 0)})

    # ------------------------------------------------------------------ CPU samples, scheduling
    cs = _cpu_samples(db, strings)
    if cs is not None:
        tables["cpu_samples"] = cs
    sc = db.read("SCHED_EVENTS", ["start", "cpu", "isSchedIn", "globalTid"], required=("start",))
    if sc is not None and len(sc):
        pid, tid = decode_global_id(_int_col(sc, "globalTid", 0))
        tables["sched"] = pd.DataFrame({"ts_ns": _int_col(sc, "start"), "cpu": _int_col(sc, "cpu"), "pid": pid,
                                        "tid": tid, "sched_in": _int_col(sc, "isSchedIn", 0).astype(bool)})

    if not parts and not tables:
        raise TraceFormatError(spath, None, "no Nsight Systems event tables (kernels, CUDA API, NVTX, OS runtime, "
                               "CPU samples) found: is this an nsys export?")
    events = pd.concat(parts, ignore_index=True) if parts else _frame(0, {})
    events = events.sort_values(["ts_ns", "dur_ns"], ascending=[True, False], kind="stable").reset_index(drop=True)
    _assign_steps(events, tables.get("nvtx"))
    events = _typed(events)
    flows = _flows(events)
    _unlaunched(events, flows, report)

    # ------------------------------------------------------------------ threads, processes, meta
    procs = db.read("PROCESSES", ["globalPid", "pid", "name"], required=("pid", "name"))
    host_pids = set(events.loc[events["device"] < 0, "pid"].unique().tolist())
    for key in ("cpu_samples", "sched"):
        if key in tables:
            host_pids |= set(tables[key]["pid"].unique().tolist())
    threads = _threads(db, strings, procs, events, host_pids)
    if procs is not None:
        tables["processes"] = pd.DataFrame({"pid": _int_col(procs, "pid"), "name": _names(procs, "name", strings)})
    gpus = db.read("TARGET_INFO_GPU", ["id", "name", "totalMemory", "smCount", "computeMajor", "computeMinor",
                                       "maxThreadsPerBlock", "maxRegistersPerBlock", "maxShmemPerBlock",
                                       "maxShmemPerBlockOptin", "maxShmemPerSm", "maxRegistersPerSm",
                                       "threadsPerWarp", "maxWarpsPerSm", "maxBlocksPerSm", "l2CacheSize",
                                       "memoryBandwidth", "clockRate", "busLocation", "uuid", "chipName", "cuDevice"])
    devprops = []
    if gpus is not None:
        tables["gpus"] = gpus
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
    origin = None
    st = db.read("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"])
    if st is not None and len(st):
        origin = int(st["utcEpochNs"].iloc[0]) if pd.notna(st["utcEpochNs"].iloc[0]) else None
    details = db.read("ANALYSIS_DETAILS", ["duration", "startTime", "stopTime"])
    extra: dict[str, Any] = {"export_meta": meta_export, "sqlite_path": spath}
    if details is not None and len(details):
        extra["analysis_details"] = {k2: int(v) for k2, v in details.iloc[0].items() if pd.notna(v)}
    ranks = db.read("MPI_RANKS", ["globalTid", "rank"], required=("rank",))
    rank, rank_source = 0, "assumed"
    if ranks is not None and len(ranks):
        rv = ranks["rank"].dropna()
        if rv.nunique() == 1 and 0 <= rv.iloc[0] < 2**31:
            rank, rank_source = int(rv.iloc[0]), "MPI_RANKS"
        else:
            report.add("rank_assumed", "assumed", int(len(ranks)), f"MPI_RANKS holds {rv.nunique()} usable rank "
                       f"values ({sorted(rv.unique().tolist())[:4]}): rank 0 assumed")
    version = meta_export.get("EXPORT_PRODUCT_VERSION")
    schema_version = _schema_version(db, meta_export.get("EXPORT_SCHEMA_VERSION"))
    meta = TraceMeta(
        source_path=spath, source_format="nsys",
        producer=f"Nsight Systems {version}" if version else "Nsight Systems", origin_ns=origin,
        rank=rank, rank_source=rank_source, device_properties=devprops,
        schema_version=schema_version, extra=extra,
    )
    events["rank"] = np.int32(rank)
    return Trace(events=events, flows=flows, memory=schema.empty_frame(schema.MEMORY_COLUMNS),
                 counters=schema.empty_frame(schema.COUNTER_COLUMNS), threads=threads, meta=meta, report=report,
                 tables=tables)


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


def _nvtx_table(nv: pd.DataFrame, strings: dict[int, str | None]) -> pd.DataFrame:
    """Decode NVTX_EVENTS: names with domains as ``nsys stats`` forms them, style, payloads."""
    et = _int_col(nv, "eventType")
    gtid = _int_col(nv, "globalTid", 0)
    pid, tid = decode_global_id(gtid)
    text = _names(nv, "text", strings)
    if "textId" in nv:
        tid_text = _names(nv, "textId", strings)
        text = tid_text.where(tid_text.notna(), text)
    dom = _int_col(nv, "domainId", 0)
    # domain names: eventType 75 rows, keyed by (domainId, process) -- nvtxsum joins on the pid bits
    dnames: dict[tuple[int, int], str] = {}
    for d, p, t in zip(dom[et == NVTX_DOMAIN_CREATE], pid[et == NVTX_DOMAIN_CREATE], text[et == NVTX_DOMAIN_CREATE]):
        dnames.setdefault((int(d), int(p)), t)
    domain = [dnames.get((int(d), int(p))) for d, p in zip(dom, pid)]
    name = [(f"{d}:{t}" if t is not None else f"{d}:None") if d is not None else t for d, t in zip(domain, text)]
    style = np.select([np.isin(et, [NVTX_PUSHPOP, NVTXT_PUSHPOP]), np.isin(et, [NVTX_STARTEND, NVTXT_STARTEND]),
                       et == NVTX_MARK, et == NVTX_DOMAIN_CREATE], ["PushPop", "StartEnd", "Mark", "DomainCreate"],
                      "Other")
    payload = pd.Series([None] * len(nv), dtype=object)
    ptype = pd.Series([None] * len(nv), dtype=object)
    for col, kind in (("floatValue", "float"), ("doubleValue", "double"), ("int32Value", "int32"),
                      ("uint32Value", "uint32"), ("int64Value", "int64"), ("uint64Value", "uint64")):
        if col in nv:
            has = nv[col].notna()
            payload[has.to_numpy()] = nv.loc[has, col].to_numpy()
            ptype[has.to_numpy()] = kind
    end_g = _int_col(nv, "endGlobalTid", -1)
    end_tid = np.where(end_g >= 0, end_g % 0x1000000, -1)
    return pd.DataFrame({
        "ts_ns": _int_col(nv, "start"), "end_ns": _int_col(nv, "end"), "name": name, "text": text,
        "domain": domain, "domain_id": dom, "style": style, "event_type": et, "range_id": _int_col(nv, "rangeId"),
        "category": _int_col(nv, "category"), "color": _int_col(nv, "color"), "pid": pid, "tid": tid,
        "end_tid": end_tid, "global_tid": gtid, "row_id": _int_col(nv, "rowid"), "payload": payload, "payload_type": ptype,
        "json_text": _names(nv, "jsonTextId", strings) if "jsonTextId" in nv else None,
    })


def _cpu_samples(db: _Db, strings: dict[int, str | None]) -> pd.DataFrame | None:
    ce = db.read("COMPOSITE_EVENTS", ["id", "start", "cpu", "threadState", "globalTid", "cpuCycles"], required=("id", "start"))
    if ce is None or not len(ce):
        return None
    pid, tid = decode_global_id(_int_col(ce, "globalTid", 0))
    out = pd.DataFrame({"id": _int_col(ce, "id"), "ts_ns": _int_col(ce, "start"), "cpu": _int_col(ce, "cpu"),
                        "pid": pid, "tid": tid, "thread_state": _int_col(ce, "threadState")})
    cc = db.read("SAMPLING_CALLCHAINS", ["id", "symbol", "module", "stackDepth"], required=("id", "stackDepth"))
    if cc is not None and len(cc):
        cc = cc.sort_values(["id", "stackDepth"])
        sym = _names(cc, "symbol", strings).fillna("[unknown]")
        mod = _names(cc, "module", strings).fillna("")
        # rows are sorted by (id, depth): one slice per sample, joined from plain lists (no per-group Series)
        ids = _int_col(cc, "id")
        syms = sym.to_numpy(dtype=object)
        mods = mod.to_numpy(dtype=object)
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        ends = np.r_[starts[1:], len(ids)]
        keys = ids[starts]
        leaf = pd.Series(syms[starts], index=keys)
        leaf_mod = pd.Series(mods[starts], index=keys)
        stack = pd.Series([";".join(reversed(syms[a:b].tolist())) for a, b in zip(starts, ends)], index=keys)  # root first
        out["symbol"] = out["id"].map(leaf)
        out["module"] = out["id"].map(leaf_mod)
        out["call_stack"] = out["id"].map(stack)
    return out


def _step_ranges(nvtx: pd.DataFrame | None) -> pd.DataFrame:
    """The NVTX ranges named ``step N``/``ProfilerStep#N`` (or ``step`` with an integer payload) as a
    ``steps.assign_steps`` ranges frame with ``pid``. An NVTX end is inclusive (an event starting at
    it is inside), ``end_ns`` exclusive: it is the NVTX end + 1 ns."""
    cols = {"step": np.zeros(0, np.int32), "start_ns": np.zeros(0, np.int64), "end_ns": np.zeros(0, np.int64),
            "pid": np.zeros(0, np.int64)}
    if nvtx is None or not len(nvtx):
        return pd.DataFrame(cols)
    rng = nvtx[nvtx["style"].isin(["PushPop", "StartEnd"]) & (nvtx["end_ns"] >= 0)]
    nums = []
    for text, pl in zip(rng["text"], rng["payload"]):
        m = _STEP_RE.match(str(text or ""))
        if m:
            nums.append(int(m.group(1)))
        elif str(text or "").lower() == "step" and (k := _int_payload(pl)) is not None:
            nums.append(k)
        else:
            nums.append(-1)
    num = np.array(nums, dtype=np.int64)
    ok = num >= 0
    return pd.DataFrame({
        "step": num[ok].astype(np.int32),
        "start_ns": rng["ts_ns"].to_numpy()[ok].astype(np.int64),
        "end_ns": rng["end_ns"].to_numpy()[ok].astype(np.int64) + 1,
        "pid": rng["pid"].to_numpy()[ok].astype(np.int64),
    })


def _assign_steps(events: pd.DataFrame, nvtx: pd.DataFrame | None) -> None:
    """``step`` by ``nbprof.trace.steps.assign_steps`` from the NVTX step ranges (``_step_ranges``),
    per process: host events (NVTX ranges aside, but the step ranges themselves) of the same pid
    inside a range get its number; device rows get the step of the runtime call that launched them
    (by correlation id), else -1."""
    ranges = _step_ranges(nvtx)
    cat = events["cat"].astype(str).to_numpy()
    host = events["device"].to_numpy() < 0
    is_nvtx = cat == schema.NVTX
    # the step ranges' own rows: NVTX rows of their pid starting at their start
    own = np.zeros(len(events), dtype=bool)
    nv = np.flatnonzero(is_nvtx)
    if len(nv) and len(ranges):
        own[nv] = pd.MultiIndex.from_arrays([events["pid"].to_numpy()[nv], events["ts_ns"].to_numpy()[nv]]).isin(
            pd.MultiIndex.from_arrays([ranges["pid"].to_numpy(), ranges["start_ns"].to_numpy()]))
    correlated = ~host & (events["correlation"].to_numpy() >= 0)
    assign_steps(events, ranges, timed=host & (~is_nvtx | own), correlated=correlated)


def _int_payload(pl: Any) -> int | None:
    """An NVTX payload that is a whole number >= 0 (else None)."""
    try:
        f = float(pl)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(f) if np.isfinite(f) and f.is_integer() and 0 <= f < 2**62 else None


def _typed(events: pd.DataFrame) -> pd.DataFrame:
    out = {}
    for col, (dtype, _u, _d) in schema.EVENT_COLUMNS.items():
        v = events[col]
        if dtype == "category":
            out[col] = pd.Categorical(v.where(pd.notna(v), None).astype(object))
        else:
            out[col] = pd.to_numeric(v, errors="coerce").fillna(-1 if not dtype.startswith("float") else np.nan).astype(dtype)
    return pd.DataFrame(out)


def _unlaunched(events: pd.DataFrame, flows: pd.DataFrame, report: LoadReport) -> None:
    """Note the device ops (kernels, copies, sets) whose correlation id has no CUDA runtime/driver record
    (CUDA API tracing off, or calls before the capture started): kept, without a launch (``no_launch``)."""
    dv = (events["device"].to_numpy() >= 0) & events["cat"].isin([schema.KERNEL, schema.GPU_MEMCPY, schema.GPU_MEMSET]).to_numpy()
    if not dv.any():
        return
    launched = np.isin(events["correlation"].to_numpy()[dv], flows["id"].to_numpy())
    n = int((~launched).sum())
    if n:
        report.add("no_launch", "assumed", n, f"{n} of {int(dv.sum())} device ops have no CUDA runtime/driver record "
                   "with their correlation id (API tracing off, or launched before the capture): kept without a launch")


def _flows(events: pd.DataFrame) -> pd.DataFrame:
    corr = events["correlation"].to_numpy()
    cat = events["cat"].astype(str).to_numpy()
    rt = np.isin(cat, list(schema.RUNTIME_CATEGORIES)) & (corr >= 0)
    dv = (events["device"].to_numpy() >= 0) & (corr >= 0)
    if not rt.any() or not dv.any():
        return schema.empty_frame(schema.FLOW_COLUMNS)
    src = events.loc[rt, ["correlation", "ts_ns", "pid", "tid"]].drop_duplicates("correlation")
    dst = events.loc[dv, ["correlation", "ts_ns", "pid", "tid"]].drop_duplicates("correlation")
    j = src.merge(dst, on="correlation", suffixes=("_s", "_d"))
    return pd.DataFrame({
        "id": j["correlation"].astype("int64"), "cat": pd.Categorical(["ac2g"] * len(j)),
        "src_ts_ns": j["ts_ns_s"].astype("int64"), "src_pid": j["pid_s"].astype("int64"),
        "src_tid": j["tid_s"].astype("int64"), "dst_ts_ns": j["ts_ns_d"].astype("int64"),
        "dst_pid": j["pid_d"].astype("int64"), "dst_tid": j["tid_d"].astype("int64"),
    })


def _threads(db: _Db, strings: dict[int, str | None], procs: pd.DataFrame | None, events: pd.DataFrame,
             host_pids: set[int]) -> pd.DataFrame:
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
