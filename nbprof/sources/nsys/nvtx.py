"""NVTX of the Nsight Systems loader: ``NVTX_EVENTS`` decoded (names with domains as ``nsys stats`` forms them,
styles, payloads) as ``nvtx`` events and the ``nvtx`` side table, and the steps NVTX ranges define (see
:mod:`nbprof.sources.nsys`)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ...trace import schema
from ...trace.steps import assign_steps
from .db import _Db, _int_col, _names, decode_global_id
from .frames import Read, _frame

#: NVTX_EVENTS.eventType values (NvtxEventType in the schema reference).
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND = 34, 59, 60, 70, 71
NVTX_DOMAIN_CREATE = 75

_STEP_RE = re.compile(r"^(?:ProfilerStep#|step[ #_:]?)(\d+)$", re.IGNORECASE)


def read_nvtx(db: _Db, strings: dict[int, str | None]) -> Read:
    """``NVTX_EVENTS``: the ``nvtx`` side table (:func:`_nvtx_table`) and its push/pop, start/end ranges and
    marks as ``nvtx`` events (a mark: an instant, dur 0); a range without an end ends at the last NVTX
    timestamp, as ``nsys stats`` takes it (reported)."""
    nv = db.read("NVTX_EVENTS", ["rowid", "start", "end", "eventType", "rangeId", "category", "color", "text", "globalTid",
                                 "endGlobalTid", "textId", "domainId", "uint64Value", "int64Value", "doubleValue",
                                 "uint32Value", "int32Value", "floatValue", "jsonText", "jsonTextId"],
                 required=("start",))
    if nv is None or not len(nv):
        return None, None
    nvtx = _nvtx_table(nv, strings)
    keep = nvtx[nvtx["style"].isin(["PushPop", "StartEnd", "Mark"])]
    if not len(keep):
        return None, nvtx
    maxts = int(max(nvtx["ts_ns"].max(), nvtx["end_ns"].max()))
    end = keep["end_ns"].where(keep["end_ns"] >= 0, maxts)
    dur = np.where(keep["style"] == "Mark", 0, end - keep["ts_ns"])
    part = _frame(len(keep), {
        "ts_ns": keep["ts_ns"].to_numpy(), "dur_ns": dur, "name": keep["name"].to_numpy(), "cat": schema.NVTX,
        "ph": np.where(keep["style"] == "Mark", "i", "X"), "pid": keep["pid"].to_numpy(),
        "tid": keep["tid"].to_numpy(),
    })
    unterminated = int(((keep["style"] != "Mark") & (keep["end_ns"] < 0)).sum())
    if unterminated:
        db.report.add("nvtx_unterminated", "assumed", unterminated,
                      f"{unterminated} NVTX ranges have no end; they are taken to end at the last NVTX "
                      "timestamp (as nsys stats does)")
    return part, nvtx


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
