"""The Nsight Systems loader's orchestration: the table readers (:mod:`.gpu` kernels / memcpy / memset,
:mod:`.host` CUDA API / OS runtime / CPU samples / scheduling, :mod:`.nvtx` NVTX, :mod:`.meta` processes,
threads, GPUs, metadata) mapped onto the trace model, with launches (flows) and steps (see
:mod:`nbprof.sources.nsys`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import TraceFormatError
from ...trace import schema
from ...trace.model import LoadReport, Trace
from .db import _Db, _int_col, _names, _text_value
from .frames import _frame
from .gpu import read_kernels, read_memcpy, read_memset
from .host import read_cpu_samples, read_osrt, read_runtime, read_sched
from .meta import _threads, read_gpus, read_meta
from .nvtx import _assign_steps, read_nvtx

#: event tables the loader reads, for the "absent tables" note (nsys writes no table without rows)
_EVENT_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                 "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API", "COMPOSITE_EVENTS", "SCHED_EVENTS")

#: the readers of event tables, in the order their events are concatenated: side table name -> reader
_READERS = (("kernels", read_kernels), ("memcpy", read_memcpy), ("memset", read_memset), ("runtime", read_runtime),
            ("nvtx", read_nvtx), ("osrt", read_osrt))


def _strings(db: _Db, spath: str, report: LoadReport) -> dict[int, str | None]:
    """``StringIds`` (id -> text), after checking that the file is an Nsight Systems export, and the note of
    the event tables absent from it.

    Raises
    ------
    TraceFormatError
        When ``StringIds`` (with ``id`` and ``value``) is missing.
    """
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
    return strings


def _load(db: _Db, spath: str, report: LoadReport) -> Trace:
    """The ``Trace`` of the export ``db`` (``report`` is ``db.report``): events of every reader in ``_READERS``
    sorted by (start, longest first), steps, flows, threads, metadata, side tables (``trace.tables``)."""
    strings = _strings(db, spath, report)
    meta_export = db.kv("META_DATA_EXPORT") or db.kv("EXPORT_META_DATA")
    tables: dict[str, pd.DataFrame] = {}
    parts: list[pd.DataFrame] = []
    for key, reader in _READERS:
        part, table = reader(db, strings)
        if table is not None:
            tables[key] = table
        if part is not None:
            parts.append(part)
    for key, side in (("cpu_samples", read_cpu_samples(db, strings)), ("sched", read_sched(db))):
        if side is not None:
            tables[key] = side
    if not parts and not tables:
        raise TraceFormatError(spath, None, "no Nsight Systems event tables (kernels, CUDA API, NVTX, OS runtime, "
                               "CPU samples) found: is this an nsys export?")
    events = pd.concat(parts, ignore_index=True) if parts else _frame(0, {})
    events = events.sort_values(["ts_ns", "dur_ns"], ascending=[True, False], kind="stable").reset_index(drop=True)
    _assign_steps(events, tables.get("nvtx"))
    events = _typed(events)
    flows = _flows(events)
    _unlaunched(events, flows, report)
    procs = db.read("PROCESSES", ["globalPid", "pid", "name"], required=("pid", "name"))
    host_pids = set(events.loc[events["device"] < 0, "pid"].unique().tolist())
    for key in ("cpu_samples", "sched"):
        if key in tables:
            host_pids |= set(tables[key]["pid"].unique().tolist())
    threads = _threads(db, strings, procs, events, host_pids)
    if procs is not None:
        tables["processes"] = pd.DataFrame({"pid": _int_col(procs, "pid"), "name": _names(procs, "name", strings)})
    gpus, devprops = read_gpus(db)
    if gpus is not None:
        tables["gpus"] = gpus
    meta = read_meta(db, spath, meta_export, devprops)
    events["rank"] = np.int32(meta.rank)
    return Trace(events=events, flows=flows, memory=schema.empty_frame(schema.MEMORY_COLUMNS),
                 counters=schema.empty_frame(schema.COUNTER_COLUMNS), threads=threads, meta=meta, report=report,
                 tables=tables)


def _typed(events: pd.DataFrame) -> pd.DataFrame:
    """``events`` with the dtypes of ``schema.EVENT_COLUMNS`` (categories; missing numbers -1, or NaN)."""
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
    """``ac2g`` flows (``schema.FLOW_COLUMNS``): each runtime call -> the device op with its correlation id."""
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
