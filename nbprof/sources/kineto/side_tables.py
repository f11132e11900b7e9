"""The tables besides ``events``: flows (paired ``s``/``f``), memory (``[memory]`` instants),
counters (``C`` events) and threads (``M`` process/thread names).

``_extract`` calls the ``*_columns``/``*_rows`` functions per run of events (no times yet);
``_finish`` builds the frames (``*_frame``, ``_pair_flows``) once the times are known.
"""

from __future__ import annotations

from operator import attrgetter, index
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ...trace import schema
from .args import _arg_columns, _decode_args
from .columns import _LANE_PIDS, _cat_of, _CatColumn, _col, _pid_tid, _to_int_array
from .context import _Ctx
from .structs import _ANY_DECODER, _Event


def _flow_columns(F: list[_Event], is_s: np.ndarray, ctx: _Ctx, rows: np.ndarray | None = None) -> dict[str, Any]:
    """Flow events (``ph`` s/f/t; ``is_s`` marks the starts) -> id, category, start flag, pid, tid
    (times are added by ``_finish``)."""
    n = len(F)
    try:
        fid = np.fromiter(map(index, map(attrgetter("id"), F)), dtype=np.int64, count=n)
    except (TypeError, ValueError, OverflowError):
        ids = [int(v) if isinstance(v, float) and np.isfinite(v) else v for v in _col(F, "id")]
        fid = _to_int_array(ids, "flow id", ctx, rows)
    cat = _CatColumn(n)
    if n:
        cat.put(None, _col(F, "cat"))
    pid, tid = _pid_tid(None, None, ctx, rows, objs=F)
    return {"id": fid, "cat": cat, "is_s": is_s, "pid": pid, "tid": tid}


def _flow_cat(c: Any) -> str:
    return "ac2g" if c in ("async", "async_cpu_to_gpu") else str(c or "")


def _pair_flows(cols: dict[str, Any], ts_ns: np.ndarray, ctx: _Ctx) -> pd.DataFrame:
    """Pair flow starts (``ph: s``) with their finishes (``f``/``t``), losslessly.

    Within one (category, id), events are taken in time order and each finish pairs with the latest
    start before it; Kineto reuses ids (one start with several finishes, e.g. a graph launch, or the
    same id again later), so every start and every finish appears in exactly one row: a start without
    finish keeps ``dst_*`` = -1, a finish without start keeps ``src_*`` = -1. ``async``/``async_cpu_to_gpu``
    (2021-2023 spellings) are read as ``ac2g``. Rows are ordered by source time (orphan finishes by theirs).
    """
    fid = cols["id"]
    if not len(fid):
        return schema.empty_frame(schema.FLOW_COLUMNS)
    cat = cols["cat"].finish(_flow_cat)
    ccode = np.asarray(cat.codes).astype(np.int64)
    is_s, pid, tid = cols["is_s"], cols["pid"], cols["tid"]
    ts = np.asarray(ts_ns, dtype=np.int64)
    # by (id, category), then time, a start before a finish at the same time (no combined key: an id
    # stored as a u64 bit pattern, near -2**63, would overflow one)
    order = np.lexsort((~is_s, ts, np.where(ccode < 0, 0, ccode), fid))
    f_o, c_o, s_o = fid[order], np.where(ccode < 0, 0, ccode)[order], is_s[order]
    pos = np.arange(len(order))
    last_s = np.maximum.accumulate(np.where(s_o, pos, -1))
    f_at = np.flatnonzero(~s_o)
    src_at = last_s[f_at]
    sa = np.clip(src_at, 0, None)
    paired = (src_at >= 0) & (f_o[sa] == f_o[f_at]) & (c_o[sa] == c_o[f_at])
    used = np.zeros(len(order), dtype=bool)
    used[src_at[paired]] = True
    lone_s = np.flatnonzero(s_o & ~used)
    # rows: (source position or -1, finish position or -1), in sorted-order positions
    src_pos = np.concatenate([np.where(paired, src_at, -1), lone_s])
    dst_pos = np.concatenate([f_at, np.full(len(lone_s), -1)])
    src_idx = np.where(src_pos >= 0, order[np.clip(src_pos, 0, None)], -1)
    dst_idx = np.where(dst_pos >= 0, order[np.clip(dst_pos, 0, None)], -1)
    any_idx = np.where(src_idx >= 0, src_idx, dst_idx)
    row_order = np.lexsort((np.where(dst_idx >= 0, ts[np.clip(dst_idx, 0, None)], -1), ts[any_idx]))
    src_idx, dst_idx, any_idx = src_idx[row_order], dst_idx[row_order], any_idx[row_order]

    def side(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.where(idx >= 0, a[np.clip(idx, 0, None)], -1).astype(np.int64)

    return pd.DataFrame(
        {
            "id": fid[any_idx],
            "cat": cat.take(any_idx),
            "src_ts_ns": side(ts, src_idx),
            "src_pid": side(pid, src_idx),
            "src_tid": side(tid, src_idx),
            "dst_ts_ns": side(ts, dst_idx),
            "dst_pid": side(pid, dst_idx),
            "dst_tid": side(tid, dst_idx),
        }
    )


_MEMORY_INTS = {"device_type": np.int8, "device": np.int16, "addr": np.int64, "bytes": np.int64,
                "total_allocated": np.int64, "total_reserved": np.int64}


def _memory_columns(M: list[_Event], ctx: _Ctx, rows: np.ndarray) -> dict[str, np.ndarray]:
    """``[memory]`` instants -> pid, tid and the int64 args columns (-1 missing; times added by ``_finish``)."""
    cols: dict[str, np.ndarray] = {k: np.full(len(M), -1, dtype=np.int64) for k in _MEMORY_INTS}
    if M:
        args = _decode_args(_col(M, "args"), "memory", ctx, rows)
        _arg_columns(args, "memory", ctx, rows, cols, None)
    pid, tid = _pid_tid(None, None, ctx, rows, objs=M)
    return {"pid": pid, "tid": tid,
            **{k: cols[k].astype(t) for k, t in _MEMORY_INTS.items()}}


def _memory_frame(cols: dict[str, np.ndarray], ts_ns: np.ndarray) -> pd.DataFrame:
    if not len(ts_ns):
        return schema.empty_frame(schema.MEMORY_COLUMNS)
    df = pd.DataFrame({"ts_ns": ts_ns, **cols, "step": np.full(len(ts_ns), -1, dtype=np.int32)})
    if ts_ns.size > 1 and not (ts_ns[1:] >= ts_ns[:-1]).all():
        df = df.take(np.argsort(ts_ns, kind="stable"))
    return df.reset_index(drop=True)


def _counter_rows(C: list[_Event]) -> list[tuple[Any, ...]]:
    """Chrome-trace ``C`` events -> (row, name, series, value, pid) per (event, series); args are free-form."""
    out = []
    for i, e in enumerate(C):
        try:
            a = _ANY_DECODER.decode(e.args)
        except msgspec.DecodeError:
            a = {}
        if not isinstance(a, dict) or not a:
            a = {"": None}
        for k, v in a.items():
            val = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan
            out.append((i, str(e.name), str(k), val, e.pid))
    return out


def _counter_frame(rows: list[tuple[Any, ...]], ctx: _Ctx) -> pd.DataFrame:
    """(ts_ns, name, series, value, pid) tuples -> the counters table (one row per event and series)."""
    if not rows:
        return schema.empty_frame(schema.COUNTER_COLUMNS)
    df = pd.DataFrame(rows, columns=["ts_ns", "name", "series", "value", "pid"])
    return pd.DataFrame(
        {
            "ts_ns": df["ts_ns"].astype(np.int64),
            "name": _cat_of(df["name"].tolist()),
            "series": _cat_of(df["series"].tolist()),
            "value": df["value"].astype(np.float64),
            "pid": _to_int_array(df["pid"].tolist(), "pid", ctx, lanes=_LANE_PIDS),
        }
    )


_THREAD_KINDS = {"process_name": "process", "thread_name": "thread", "process_labels": "process_labels"}


def _thread_rows(Mv: list[_Event], ctx: _Ctx) -> list[tuple[Any, ...]]:
    """``M`` events naming processes/threads -> (pid, tid, name, kind) tuples."""
    keep = [e for e in Mv if e.name in _THREAD_KINDS]
    if not keep:
        return []
    args = _decode_args(_col(keep, "args"), "metadata", ctx, np.full(len(keep), -1))
    rows = []
    for e, a in zip(keep, args):
        val = a.labels if e.name == "process_labels" else a.mname
        rows.append((e.pid, e.tid, "" if val is None else str(val), _THREAD_KINDS[str(e.name)]))
    return rows


def _thread_frame(rows: list[tuple[Any, ...]], ctx: _Ctx) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["pid_raw", "tid_raw", "name", "kind"])
    if len(df):
        df["pid"], df["tid"] = _pid_tid(df["pid_raw"].tolist(), df["tid_raw"].tolist(), ctx, None)
    else:
        df["pid"], df["tid"] = np.array([], np.int64), np.array([], np.int64)
    return df[["pid", "tid", "name", "kind"]].drop_duplicates().reset_index(drop=True)
