"""Parts (in file order) -> ``Trace``: int64-ns times, the table frames, row order, metadata, steps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...errors import TraceFormatError
from ...trace import schema, steps
from ...trace.model import LoadReport, Trace
from .columns import _CatColumn, _compact_json_text, _concat
from .context import _Ctx
from .extract import _canon_cat, _Part
from .meta import _build_meta
from .side_tables import _counter_frame, _memory_frame, _pair_flows, _thread_frame
from .times import _timeline

# events-table categoricals: column -> text of each unique value (None: str(), missing stays missing)
_CAT_TRANSFORMS: dict[str, Any] = {
    "name": None, "cat": _canon_cat, "ph": None, "input_dims": _compact_json_text,
    "input_types": _compact_json_text, "call_stack": None, "module": None, "grid": _compact_json_text,
    "block": _compact_json_text, "collective": None, "dtype": None, "pg_name": None,
}


def _join(parts: list[_Part], table: str, take: np.ndarray | None = None) -> dict[str, Any]:
    """One table's columns over all parts (categoricals merged, not finished): one after the other,
    then the rows at positions ``take`` of that, when given."""
    out = {}
    for k in getattr(parts[0], table):
        vs = [getattr(p, table)[k] for p in parts]
        if table == "events" and any(v is None for v in vs):  # constant in some parts (``const``)
            c = [p.const.get(k) for p in parts]
            if all(x is not None for x in c) and all(np.array_equal(x, c[0], equal_nan=True) for x in c):
                rows = sum(len(p.e_rows) for p in parts) if take is None else len(take)
                out[k] = np.full(rows, c[0][0], dtype=c[0].dtype)
                continue
            vs = [np.full(len(p.e_rows), x[0], dtype=x.dtype) if v is None else v for v, x, p in zip(vs, c, parts)]
        if isinstance(vs[0], _CatColumn):
            out[k] = vs[0] if len(vs) == 1 and take is None else _CatColumn.concat(vs, take)
        else:
            v = _concat(vs)
            out[k] = v if take is None else v[take]
    return out


def _finish(parts: list[_Part], meta: dict[str, Any], ctx: _Ctx, rank: int | None,
            exact_ts: np.ndarray | None) -> Trace:
    """Parts (in file order) -> Trace: the origin and int64-ns times, flow pairing, sorting, steps."""
    report = ctx.report
    n_all = sum(p.n for p in parts)
    ts_all = _concat([p.ts_us for p in parts])
    is_e, is_m = _concat([p.is_e for p in parts]), _concat([p.is_m for p in parts])
    is_flow, is_mem, is_c = (_concat([getattr(p, k) for p in parts]) for k in ("is_flow", "is_mem", "is_c"))
    rows_e = np.flatnonzero(is_e)
    ok_all = np.isfinite(ts_all)
    ok_e = ok_all[rows_e]
    missing_ts = not ok_e.all()

    # --- time: float64 µs (exact ns below 2**43 µs) or exact integer ns for big fractional ts
    pool = rows_e[ok_e] if ok_e.any() else np.flatnonzero(ok_all & ~is_m)
    ns_parts = [p.ns_abs for p in parts] if all(p.ns_abs is not None for p in parts) else None
    t_all, origin_abs = _timeline(ts_all, ns_parts, exact_ts, pool, meta)
    del ns_parts
    del ts_all

    flows = _pair_flows(_join(parts, "flows"), t_all[is_flow], ctx)
    memory = _memory_frame(_join(parts, "memory"), t_all[is_mem])
    c_ts = t_all[is_c]
    c_rows, off = [], 0
    for p in parts:
        c_rows += [(int(c_ts[off + r]), *rest) for r, *rest in p.counters]
        off += int(np.count_nonzero(p.is_c))
    counters = _counter_frame(c_rows, ctx)
    threads = _thread_frame([t for p in parts for t in p.threads], ctx)

    offs = np.cumsum([0] + [p.n for p in parts[:-1]])
    _emit_notes(parts, offs, ctx)
    ts_parts = [t_all[o + p.e_rows] for o, p in zip(offs, parts)]
    ok_e = _concat([ok_all[o + p.e_rows] for o, p in zip(offs, parts)])  # in the rows' order
    ts_e = _concat(ts_parts)
    # the table's rows: by time, stable (ties in file order), without the events that have no
    # usable ts. Runs whose times are exact arrive sorted (``_extract``), so the sort mostly merges
    # sorted runs (~10 ms per million rows); the columns are gathered once, in ``_join``.
    take = None
    if ts_e.size > 1 and not bool((ts_e[1:] >= ts_e[:-1]).all()):
        take = np.argsort(ts_e, kind="stable")
    if missing_ts:
        take = np.flatnonzero(ok_e) if take is None else take[ok_e[take]]
    data = _join(parts, "events", take)
    for p in parts:
        p.events = None
    data = {"ts_ns": ts_e if take is None else ts_e[take], **data}
    del t_all, ts_parts, ts_e
    for k, transform in _CAT_TRANSFORMS.items():
        data[k] = data[k].finish(transform)
    nE = len(data["ts_ns"])
    data["step"] = np.full(nE, -1, dtype=np.int32)
    data["rank"] = np.zeros(nE, dtype=np.int32)
    data = {k: data[k] for k in schema.EVENT_COLUMNS}
    events = pd.DataFrame(data, copy=False)
    del data

    tmeta = _build_meta(meta, ctx.path, report, origin_abs, rank, events)
    events["rank"] = np.int32(tmeta.rank)
    if events.empty and memory.empty:
        raise TraceFormatError(
            ctx.path, None if ctx.array_start is None else ctx.array_start - 1,
            f"the trace holds no events ({n_all} event objects decoded, none of them a duration, instant "
            "or [memory] event): nothing was profiled"
            + (f"; load report: {'; '.join(i.message for i in report.issues)}" if report.issues else ""),
        )
    _steps(events, memory, report)
    _check_overlaps(events, report)
    return Trace(events=events, flows=flows, memory=memory, counters=counters, threads=threads, meta=tmeta,
                 report=report)


def _emit_notes(parts: list[_Part], offs: np.ndarray, ctx: _Ctx) -> None:
    """The assumptions noted while reading (``_Ctx.note``), merged over the parts (counts summed, the
    first event's example and byte offset) and added to the report in kind order: the same report
    whether one process or two read the events."""
    merged: dict[str, list[Any]] = {}
    sources = [(int(o), p.notes) for o, p in zip(offs, parts)] + [(0, ctx.notes)]
    for o, notes in sources:
        for kind, (count, k, template, example) in notes.items():
            g = None if k is None else o + k
            have = merged.get(kind)
            if have is None:
                merged[kind] = [count, g, template, example]
            else:
                have[0] += count
                if g is not None and (have[1] is None or g < have[1]):
                    have[1], have[3] = g, example
    ctx.notes = {}
    for kind in sorted(merged):
        count, g, template, example = merged[kind]
        ctx.report.add(kind, "assumed", count, template.format(count=count, example=example),
                       offset=ctx.event_offset(g))


def _steps(events: pd.DataFrame, memory: pd.DataFrame, report: LoadReport) -> None:
    """``step`` from the host ``ProfilerStep#N`` ranges (``nbprof.trace.steps``): host rows by time,
    device rows via the correlation id of their launch, else by time; memory rows by time.

    A trace without ``ProfilerStep#N`` keeps step -1 everywhere, noted in the report.
    """
    if events.empty:
        return
    host = events["device"].to_numpy() < 0
    ranges = steps.step_ranges(events)
    if not len(ranges):
        report.add("no_steps", "assumed", 0,
                   "no ProfilerStep#N events (profiler used without schedule/step()): step is -1 for every event")
        return
    steps.assign_steps(events, steps.step_ranges(events, host), memory=memory)


def _check_overlaps(events: pd.DataFrame, report: LoadReport) -> None:
    """Flag device ops on one stream that start before the previous one ends (ROCm deferred stamps).

    Rows are kept as recorded; busy-time analyses must take the union of intervals per stream
    (AMD-AGI/TraceLens#669: summing raw ``dur`` over-counts).
    """
    cats = events["cat"].cat
    busy = np.array([c in ("kernel", "gpu_memcpy", "gpu_memset") for c in cats.categories] + [False], dtype=bool)
    sel = np.flatnonzero(busy[cats.codes.to_numpy()] & (events["device"].to_numpy() >= 0))
    if len(sel) < 2:
        return
    t, dv, sv = (events[c].to_numpy()[sel] for c in ("ts_ns", "device", "stream"))
    o = np.lexsort((t, sv, dv))  # by device, stream, then time (stable)
    t, dv, sv = t[o], dv[o], sv[o]
    end = t + events["dur_ns"].to_numpy()[sel][o]
    same = (dv[1:] == dv[:-1]) & (sv[1:] == sv[:-1])
    # running max of ends within a stream, so an op overlapping any earlier op counts once
    grp = np.concatenate([[0], np.cumsum(~same)])
    run_end = pd.Series(end).groupby(grp).cummax().to_numpy()
    ov = same & (t[1:] < run_end[:-1])
    n = int(ov.sum())
    if n:
        over_ns = int(np.clip(np.minimum(end[1:], run_end[:-1]) - t[1:], 0, None)[ov].sum())
        report.add(
            "overlapping_device_ops",
            "flagged",
            n,
            f"{n} device ops start before an earlier op on the same stream ends ({over_ns} ns overlap in all); "
            "kept as recorded, busy-time analyses take the union of intervals so overlap is never double-counted",
        )
