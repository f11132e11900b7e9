"""Host tables of the Nsight Systems loader: the CUDA API (``CUPTI_ACTIVITY_KIND_RUNTIME``), OS runtime calls
(``OSRT_API``), CPU samples (``COMPOSITE_EVENTS`` + ``SAMPLING_CALLCHAINS``) and scheduling (``SCHED_EVENTS``)
(see :mod:`nbprof.sources.nsys`)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...trace import schema
from .db import _Db, _int_col, _names, decode_global_id
from .frames import Read, _durations, _frame

#: OSRT_API.eventClass of an OS runtime call (31/32 are "profiling started/finished" markers).
OSRT_CALL_CLASS = 27

_VERSION_SUFFIX = re.compile(r"_v\d{4,5}$")


def read_runtime(db: _Db, strings: dict[int, str | None]) -> Read:
    """``CUPTI_ACTIVITY_KIND_RUNTIME``: ``cuda_runtime`` / ``cuda_driver`` events (``cu*`` but ``cuda*`` is the
    driver API; name without its ``_v<N>`` suffix) and the ``runtime`` side table (``ts_ns, dur_ns, pid, tid,
    correlation, name, api_name, name_id, event_class, return_value``; ns)."""
    r = db.read("CUPTI_ACTIVITY_KIND_RUNTIME", ["start", "end", "eventClass", "globalTid", "correlationId",
                                                "nameId", "returnValue"], required=("start", "end"))
    if r is None or not len(r):
        return None, None
    raw = _names(r, "nameId", strings).fillna("[unknown]")
    clean = raw.map(lambda v: _VERSION_SUFFIX.sub("", v))
    start, rdur = _durations(db, r, "CUPTI_ACTIVITY_KIND_RUNTIME")
    pid, tid = decode_global_id(_int_col(r, "globalTid", 0))
    cat = np.where(clean.str.startswith("cu") & ~clean.str.startswith("cuda"), schema.CUDA_DRIVER, schema.CUDA_RUNTIME)
    part = _frame(len(r), {
        "ts_ns": start, "dur_ns": rdur, "name": clean.to_numpy(), "cat": cat, "ph": "X",
        "pid": pid, "tid": tid, "correlation": _int_col(r, "correlationId"),
    })
    return part, pd.DataFrame({
        "ts_ns": start, "dur_ns": rdur, "pid": pid, "tid": tid,
        "correlation": _int_col(r, "correlationId"), "name": clean, "api_name": raw,
        "name_id": _int_col(r, "nameId"), "event_class": _int_col(r, "eventClass"),
        "return_value": _int_col(r, "returnValue", 0),
    })


def read_osrt(db: _Db, strings: dict[int, str | None]) -> Read:
    """``OSRT_API`` calls (``eventClass`` ``OSRT_CALL_CLASS``): ``osrt`` events and the ``osrt`` side table
    (``ts_ns, dur_ns, pid, tid, name, name_id, return_value, nesting_level``; ns)."""
    o = db.read("OSRT_API", ["start", "end", "eventClass", "globalTid", "nameId", "returnValue", "nestingLevel"],
                required=("start", "end"))
    if o is None or not len(o):
        return None, None
    if "eventClass" in o:
        o = o[o["eventClass"] == OSRT_CALL_CLASS].reset_index(drop=True)
    start, odur = _durations(db, o, "OSRT_API")
    pid, tid = decode_global_id(_int_col(o, "globalTid", 0))
    nm = _names(o, "nameId", strings).fillna("[unknown]")
    part = _frame(len(o), {
        "ts_ns": start, "dur_ns": odur, "name": nm.to_numpy(), "cat": schema.OSRT,
        "ph": "X", "pid": pid, "tid": tid,
    })
    return part, pd.DataFrame({"ts_ns": start, "dur_ns": odur, "pid": pid, "tid": tid,
                               "name": nm, "name_id": _int_col(o, "nameId"),
                               "return_value": _int_col(o, "returnValue", 0),
                               "nesting_level": _int_col(o, "nestingLevel", 0)})


def read_cpu_samples(db: _Db, strings: dict[int, str | None]) -> pd.DataFrame | None:
    """``COMPOSITE_EVENTS`` (CPU samples) as the ``cpu_samples`` side table: ``id, ts_ns, cpu, pid, tid,
    thread_state``, plus ``symbol``, ``module`` (the leaf frame) and ``call_stack`` (``;``-joined, root first)
    from ``SAMPLING_CALLCHAINS`` when present; None when there are no samples."""
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


def read_sched(db: _Db) -> pd.DataFrame | None:
    """``SCHED_EVENTS`` as the ``sched`` side table: ``ts_ns, cpu, pid, tid, sched_in`` (bool); None when
    absent or empty."""
    sc = db.read("SCHED_EVENTS", ["start", "cpu", "isSchedIn", "globalTid"], required=("start",))
    if sc is None or not len(sc):
        return None
    pid, tid = decode_global_id(_int_col(sc, "globalTid", 0))
    return pd.DataFrame({"ts_ns": _int_col(sc, "start"), "cpu": _int_col(sc, "cpu"), "pid": pid,
                         "tid": tid, "sched_in": _int_col(sc, "isSchedIn", 0).astype(bool)})
