"""``Trace`` -> Chrome Trace Event Format JSON (what ``chrome://tracing``, Perfetto's UI and TensorBoard read).

Format facts: the Trace Event Format document (Google, "Trace Event Format", sections "Duration Events",
"Complete Events", "Instant Events", "Counter Events", "Flow Events", "Metadata Events") and the Kineto
writer ``libkineto/src/output_json.cpp`` (its key spellings: ``baseTimeNanoseconds``, ``deviceProperties``,
``distributedInfo``, ``External id``, ``correlation``, ``device``, ``stream``, ``[memory]`` events with
``Bytes``/``Total Allocated``/``Total Reserved``/``Device Type``/``Device Id``/``Addr``; flows ``s``/``f``
with ``bp: "e"``).

What is written
---------------
- one ``X`` (complete) event per duration row of ``Trace.events`` and one ``i`` (instant, ``s: "t"``) per
  instant row; ``ts``/``dur`` are µs relative to the trace origin, as floats carrying the ns:
  ``ts = ts_ns / 1000`` printed as the shortest decimal that reads back to the same float64, so
  ``round(ts * 1000) == ts_ns`` exactly for ``|ts| < 2**43`` µs (101 days; float64 spacing there is below
  0.001 µs) -- nbprof's loader and any reader that rounds µs * 1000 to the nearest integer get the
  integer ns back; a reader that truncates may be 1 ns low;
- ``baseTimeNanoseconds`` = ``Trace.meta.origin_ns`` (when known), so absolute times are kept as Kineto keeps them;
- ``pid``/``tid`` lanes: host rows keep their pid/tid, device rows pid = device, tid = stream, and the
  args ``device``/``stream`` (Kineto's); slices that overlap on one thread or stream go on extra lanes
  (:mod:`nbprof.export.lanes`) with their own ``tid`` (the largest tid of the pid plus one, and so on)
  named ``"<thread or stream name> (overlap k)"`` by ``thread_name`` metadata, so no viewer drops one;
- args nbprof keeps as columns, under Kineto's keys (``External id``, ``correlation``, ``Input Dims``,
  ``Call stack``, ``grid``/``block`` as ``[x, y, z]``, ``est. achieved occupancy %`` ...);
- ``M`` events ``process_name``/``thread_name``/``process_labels`` from ``Trace.threads``;
- ids (``External id``, ``correlation``, flow ids ...) as the source wrote them where that is a 64-bit integer:
  an unsigned id above 2**63-1 as that integer (``nbprof.trace.ids``); a text id or one beyond 64 bits as
  the int64 id it was given;
- flows ``s``/``f`` from ``Trace.flows`` (ids and categories as loaded; each end on the lane of the
  slice it starts/ends at; a start shared by several rows -- one launch, several finishes -- written once);
- counters ``C`` from ``Trace.counters`` (one event per name, pid and time, one arg per series);
- memory: one ``[memory]`` instant (category ``cpu_instant_event``) per row of ``Trace.memory``.

Reading the file back with ``nbprof.load`` gives the same events (times, durations, names, categories,
pid, device, stream, ids), flows, counters and memory rows; ``tid`` of rows moved to an overflow lane is
the lane's tid.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

import numpy as np
import pandas as pd

from ..atomic import atomic_write
from ..trace.ids import exact_ids
from ..trace.model import Trace
from ..trace.schema import CATEGORY_NAMES_KEY
from . import ExportReport
from .lanes import Lanes, assign_lanes

__all__ = ["write_chrome_trace", "chrome_trace_dict", "lane_tids"]


def _obj(s: pd.Series) -> list[Any]:
    """A column as Python values, None where missing."""
    a = s.astype(object).to_numpy()
    return [None if (v is None or (isinstance(v, float) and v != v)) else v for v in a]


def lane_tids(trace: Trace, lanes: Lanes) -> dict[tuple[int, int, int, bool], int]:
    """(pid, tid, lane, device row) -> the tid the lane is written with.

    Lane 0 keeps its tid; overflow lanes of a pid take the tids after the largest tid the pid uses (events
    and ``Trace.threads``), and so does lane 0 of a device stream whose (pid, tid) a host thread also uses
    (a trace whose CPU pid equals a device index), so host and device rows never share a track.
    """
    tr = lanes.tracks
    mx = pd.concat([trace.events[["pid", "tid"]], trace.threads[["pid", "tid"]].astype("int64")])
    used: dict[int, int] = mx.groupby("pid")["tid"].max().astype("int64").to_dict() if len(mx) else {}
    host = {(int(p), int(t)) for p, t, d in zip(tr["pid"], tr["tid"], tr["device"]) if not d}
    out: dict[tuple[int, int, int, bool], int] = {}
    for p, t, ln, d in zip(tr["pid"].tolist(), tr["tid"].tolist(), tr["lane"].tolist(), tr["device"].tolist()):
        if ln == 0 and not (d and (p, t) in host):
            out[(p, t, 0, bool(d))] = t
        else:
            nxt = int(used.get(p, 0)) + 1
            used[p] = nxt
            out[(p, t, ln, bool(d))] = nxt
    return out


def _grid(v: Any) -> Any:
    """``"x,y,z"`` -> ``[x, y, z]`` (Kineto writes arrays); other text as is."""
    parts = str(v).split(",")
    try:
        return [int(x) for x in parts]
    except ValueError:
        return str(v)


def _json_text(v: Any) -> Any:
    """Compact JSON text (``Input Dims``) -> the JSON value; other text as is."""
    try:
        return json.loads(v)
    except (TypeError, ValueError):
        return v


# events column -> (Kineto args key, converter, missing test)
_ARG_COLS: list[tuple[str, str, str]] = [
    ("external_id", "External id", "int"), ("correlation", "correlation", "int"),
    ("seq", "Sequence number", "int"), ("fwd_tid", "Fwd thread id", "int"),
    ("input_dims", "Input Dims", "jsontext"), ("input_types", "Input type", "jsontext"),
    ("concrete_inputs", "Concrete Inputs", "jsontext"),
    ("call_stack", "Call stack", "str"), ("module", "Module Hierarchy", "str"), ("flops", "flops", "float"),
    ("bytes", "bytes", "int"), ("grid", "grid", "grid"), ("block", "block", "grid"),
    ("registers", "registers per thread", "int"), ("shared_mem_bytes", "shared memory", "int"),
    ("occupancy_ratio", "est. achieved occupancy %", "pct"), ("blocks_per_sm", "blocks per SM", "float"),
    ("collective", "Collective name", "str"),
    ("msg_in_nelems", "In msg nelems", "int"), ("msg_out_nelems", "Out msg nelems", "int"),
    ("group_size", "Group size", "int"), ("dtype", "dtype", "str"), ("pg_name", "Process Group Name", "str"),
]


#: id columns written as the source wrote them (``nbprof.trace.ids``: u64 ids above 2**63-1, texts)
_ID_COLS = frozenset({"external_id", "correlation", "seq", "fwd_tid"})


def _args(trace: Trace, ev: pd.DataFrame, device_args: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """Each row's Kineto ``args``: the columns of ``_ARG_COLS`` under Kineto's keys; ``device``/``stream``
    on device rows except ``gpu_user_annotation`` ones (Kineto writes none there; HTA counts a row that
    has them as a kernel; the caller adds them to one moved to an overflow lane, whose tid is not its
    stream); and the side table ``device_args`` (``queued``, ``context``, ``warps per SM``, hardware
    counters) under the keys as read (integral values as integers). Ids are written as the source wrote
    them (``nbprof.trace.ids.exact_ids``)."""
    n = len(ev)
    args: list[dict[str, Any]] = [{} for _ in range(n)]
    cats = ev["cat"].cat
    annot = np.array([c == "gpu_user_annotation" for c in cats.categories] + [False], dtype=bool)
    dev = (ev["device"].to_numpy() >= 0) & ~annot[cats.codes.to_numpy()]
    dv, st = ev["device"].to_numpy().tolist(), ev["stream"].to_numpy().tolist()
    for i in np.flatnonzero(dev).tolist():
        args[i]["device"] = dv[i]
        args[i]["stream"] = st[i]
    if device_args is not None and len(device_args):
        for i, k, v in zip(device_args["event"].tolist(), device_args["key"].astype(str).tolist(),
                           device_args["value"].tolist()):
            if 0 <= i < n:
                args[i][k] = int(v) if v.is_integer() and abs(v) < 2**53 else v
    for col, key, kind in _ARG_COLS:
        s = ev[col]
        if kind == "int":
            a = s.to_numpy(np.int64)
            al = exact_ids(trace, col, a, u64=True) if col in _ID_COLS else a.tolist()
            for i in np.flatnonzero(a != -1).tolist():
                args[i][key] = al[i]
        elif kind in ("float", "pct"):
            a = s.to_numpy(np.float64)
            mul = 100.0 if kind == "pct" else 1.0
            fl = a.tolist()
            for i in np.flatnonzero(~np.isnan(a)).tolist():
                args[i][key] = fl[i] * mul
        else:
            vals = _obj(s)
            conv = _grid if kind == "grid" else _json_text if kind == "jsontext" else str
            for j, v in enumerate(vals):
                if v is not None:
                    args[j][key] = conv(v)
    return args


def _endpoint_lanes(trace: Trace, lanes: Lanes, tids: dict[tuple[int, int, int, bool], int]) -> Any:
    """(pid, tid, ts) -> [(correlation, written tid)] of the slices starting there, or None when every
    slice is written with its own tid."""
    if all(k[1] == v for k, v in tids.items()):
        return None
    ev = trace.events
    key_of: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    dev = (ev["device"].to_numpy() >= 0).tolist()
    for i, (p, t, ts, c, ln) in enumerate(zip(ev["pid"].to_numpy().tolist(), ev["tid"].to_numpy().tolist(),
                                              ev["ts_ns"].to_numpy().tolist(), ev["correlation"].to_numpy().tolist(),
                                              lanes.lane.tolist())):
        key_of.setdefault((p, t, ts), []).append((c, tids[(p, t, ln, dev[i])]))
    return key_of


def _flow_lane(key_of: Any, p: int, t: int, ts: int, fid: int, cat: str) -> int:
    """The tid to write a flow end with: that of the slice starting there (ac2g: the one with the flow's
    correlation id first), else the flow's own tid."""
    if key_of is None:
        return t
    cands = key_of.get((p, t, ts))
    if not cands:
        return t
    if cat == "ac2g":
        for c, lt in cands:
            if c == fid:
                return int(lt)
    return int(cands[0][1])


def chrome_trace_dict(trace: Trace) -> tuple[dict[str, Any], ExportReport]:
    """The Chrome trace of ``trace`` as a JSON-ready dict, and what it holds (see the module docstring).

    Returns
    -------
    (dict, ExportReport)
        ``{"traceEvents": [...], "baseTimeNanoseconds": ..., ...}``; the report's ``path`` is empty.
    """
    ev = trace.events
    lanes = assign_lanes(ev)
    tids = lane_tids(trace, lanes)
    rep = ExportReport(path="", format="chrome", slices=len(ev), tracks=len(lanes.tracks),
                       overflow_lanes=lanes.overflow)
    out: list[dict[str, Any]] = []

    # metadata: process / thread names, then the overflow lanes' names
    names: dict[tuple[int, int], str] = {}
    for p, t, nm, kind in zip(trace.threads["pid"], trace.threads["tid"], trace.threads["name"], trace.threads["kind"]):
        p, t = int(p), int(t)
        if kind == "process":
            out.append({"ph": "M", "name": "process_name", "pid": p, "tid": t, "args": {"name": str(nm)}})
        elif kind == "thread":
            names[(p, t)] = str(nm)
            out.append({"ph": "M", "name": "thread_name", "pid": p, "tid": t, "args": {"name": str(nm)}})
        elif kind == "process_labels":
            out.append({"ph": "M", "name": "process_labels", "pid": p, "tid": t, "args": {"labels": str(nm)}})
    for (p, t, ln, dev), lt in tids.items():
        if lt == t:
            continue
        base = (f"stream {t}" if dev else None) or names.get((p, t)) or f"thread {t}"
        out.append({"ph": "M", "name": "thread_name", "pid": p, "tid": lt,
                    "args": {"name": base if ln == 0 else f"{base} (overlap {ln + 1})"}})

    # events
    if len(ev):
        ts_us = ev["ts_ns"].to_numpy(np.int64) / 1000.0
        dur_us = ev["dur_ns"].to_numpy(np.int64) / 1000.0
        name, cat, ph = _obj(ev["name"]), _obj(ev["cat"]), _obj(ev["ph"])
        spelled = trace.meta.extra.get(CATEGORY_NAMES_KEY)
        if isinstance(spelled, dict) and spelled:  # the file's own spellings (2021's "Runtime"), as read
            cat = [spelled.get(c, c) if isinstance(spelled.get(c, c), str) else c for c in cat]
        pid, tid = ev["pid"].to_numpy(np.int64).tolist(), ev["tid"].to_numpy(np.int64).tolist()
        args = _args(trace, ev, (trace.tables or {}).get("device_args"))
        lane = lanes.lane.tolist()
        devl = (ev["device"].to_numpy() >= 0).tolist()
        tsl, dul = ts_us.tolist(), dur_us.tolist()
        for i in range(len(ev)):
            p, t = pid[i], tid[i]
            e: dict[str, Any] = {"ph": "i" if ph[i] == "i" else "X", "cat": cat[i] or "", "name": name[i] or "",
                                 "pid": p, "tid": tids[(p, t, lane[i], devl[i])], "ts": tsl[i]}
            if e["ph"] == "X":
                e["dur"] = dul[i]
            else:
                e["s"] = "t"
            if devl[i] and e["tid"] != t and "stream" not in args[i]:
                # a gpu_user_annotation moved to an overflow lane: its stream is not its tid any more
                args[i]["device"], args[i]["stream"] = p, t
            if args[i]:
                e["args"] = args[i]
            out.append(e)

    # flows
    fl = trace.flows
    key_of = _endpoint_lanes(trace, lanes, tids)
    starts: set[tuple[int, str, int, int, int]] = set()
    fid_out = exact_ids(trace, "flows.id", fl["id"].to_numpy(np.int64), u64=True)  # as written
    for row, fid_w in zip(fl.itertuples(index=False), fid_out):
        fid, fcat = int(row.id), str(row.cat)
        skey = (fid, fcat, int(row.src_pid), int(row.src_tid), int(row.src_ts_ns))
        # one start paired with several finishes (a graph launch) is one ``s`` event, as it was read
        if (row.src_pid != -1 or row.src_ts_ns != -1) and skey not in starts:
            starts.add(skey)
            t = _flow_lane(key_of, int(row.src_pid), int(row.src_tid), int(row.src_ts_ns), fid, fcat)
            out.append({"ph": "s", "id": fid_w, "cat": fcat, "name": fcat, "pid": int(row.src_pid), "tid": t,
                        "ts": row.src_ts_ns / 1000.0})
        if row.dst_pid != -1 or row.dst_ts_ns != -1:
            t = _flow_lane(key_of, int(row.dst_pid), int(row.dst_tid), int(row.dst_ts_ns), fid, fcat)
            out.append({"ph": "f", "id": fid_w, "cat": fcat, "name": fcat, "pid": int(row.dst_pid), "tid": t,
                        "ts": row.dst_ts_ns / 1000.0, "bp": "e"})
        rep.flows += 1

    # counters: one C event per (name, pid, ts), one arg per series
    co = trace.counters
    if len(co):
        cur: dict[str, Any] | None = None
        for ts_ns, nm, series, val, p in zip(co["ts_ns"].to_numpy(), _obj(co["name"]), _obj(co["series"]),
                                             co["value"].to_numpy(np.float64), co["pid"].to_numpy()):
            key = (int(ts_ns), nm or "", int(p))
            v = None if np.isnan(val) else float(val)
            if cur is None or cur["_key"] != key or (series or "") in cur["args"]:
                cur = {"ph": "C", "name": key[1], "pid": key[2], "ts": key[0] / 1000.0, "args": {}, "_key": key}
                out.append(cur)
            cur["args"][series or ""] = v
        for e in out:
            e.pop("_key", None)
        rep.counters = len(co)

    # memory: Kineto's [memory] instants
    me = trace.memory
    if len(me):
        cols = {k: me[k].to_numpy(np.int64).tolist() for k in ("ts_ns", "pid", "tid", "device_type", "device", "addr",
                                                       "bytes", "total_allocated", "total_reserved")}
        for i in range(len(me)):
            a: dict[str, Any] = {"Device Type": cols["device_type"][i], "Device Id": cols["device"][i],
                                 "Addr": cols["addr"][i], "Bytes": cols["bytes"][i]}
            if cols["total_allocated"][i] != -1:
                a["Total Allocated"] = cols["total_allocated"][i]
            if cols["total_reserved"][i] != -1:
                a["Total Reserved"] = cols["total_reserved"][i]
            out.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                        "pid": cols["pid"][i], "tid": cols["tid"][i], "ts": cols["ts_ns"][i] / 1000.0,
                        "args": a})
        rep.memory = len(me)

    m = trace.meta
    doc: dict[str, Any] = {"schemaVersion": 1}
    if m.device_properties:
        doc["deviceProperties"] = m.device_properties
    if m.distributed_info:
        doc["distributedInfo"] = m.distributed_info
    doc["displayTimeUnit"] = "ns"
    if m.origin_ns is not None:
        doc["baseTimeNanoseconds"] = int(m.origin_ns)
    doc["nbprof_export"] = {"source_path": m.source_path, "source_format": m.source_format, "producer": m.producer,
                            "rank": m.rank, "world_size": m.world_size}
    doc["traceEvents"] = out
    return doc, rep


def _plain_number(v: Any) -> Any:
    """numpy scalars and arrays as Python values (the stdlib JSON writer's ``default``)."""
    if isinstance(v, (np.generic, np.ndarray)):
        return v.tolist()
    raise TypeError(f"not JSON serializable: {type(v).__name__}")


def write_chrome_trace(trace: Trace, path: str | os.PathLike[str]) -> ExportReport:
    """Write ``trace`` as Chrome Trace Event Format JSON (gzip-compressed when ``path`` ends in ``.gz``).

    See the module docstring for what is written and the 1 ns rounding rule of ``ts``/``dur`` (µs floats).

    Parameters
    ----------
    trace : Trace
        From any source (Kineto, repaired Kineto, nsys, memory snapshots, merged traces).
    path : str or PathLike
        The file to write (replaced if it exists).

    Returns
    -------
    ExportReport
        Counts of slices, tracks, overflow lanes, flows, counters and memory events written.

    Raises
    ------
    OSError
        When the file cannot be written.
    """
    import orjson

    doc, rep = chrome_trace_dict(trace)
    try:
        data = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:  # an integer beyond 64 bits in metadata as read (distributedInfo...): written as it is
        data = json.dumps(doc, default=_plain_number, separators=(",", ":")).encode()
    p = os.fspath(path)
    rep.path = p
    if p.lower().endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)
    atomic_write(p, data)  # a failed export leaves no partial file (nbprof.atomic)
    return rep
