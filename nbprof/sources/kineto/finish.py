"""Parts (in file order) -> ``Trace``: int64-ns times, the table frames, row order, metadata, steps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...errors import TraceFormatError
from ...trace import schema, steps
from ...trace.ids import id_values_table
from ...trace.model import LoadReport, Trace
from .columns import _CatColumn, _compact_json_text, _concat
from .context import _Ctx
from .extract import _canon_cat, _Part
from .meta import _build_meta
from .nesting import check_nesting
from .side_tables import _counter_frame, _memory_frame, _pair_flows, _thread_frame
from .times import _timeline

# events-table categoricals: column -> text of each unique value (None: str(), missing stays missing)
_CAT_TRANSFORMS: dict[str, Any] = {
    "name": None, "cat": _canon_cat, "ph": None, "input_dims": _compact_json_text,
    "input_types": _compact_json_text, "concrete_inputs": _compact_json_text, "call_stack": None, "module": None,
    "grid": _compact_json_text,
    "block": _compact_json_text, "collective": None, "dtype": None, "pg_name": None,
}


def _join(parts: list[_Part], table: str, take: np.ndarray | None = None) -> dict[str, Any]:
    """One table's columns over all parts (categoricals merged, not finished): one after the other,
    then the rows at positions ``take`` of that, when given."""
    out: dict[str, Any] = {}
    for k in getattr(parts[0], table):
        vs = [getattr(p, table)[k] for p in parts]
        if table == "events" and any(v is None for v in vs):  # constant in some parts (``const``)
            c = [p.const[k] for p in parts if p.const.get(k) is not None]
            if len(c) == len(parts) and all(np.array_equal(x, c[0], equal_nan=True) for x in c):
                rows = sum(len(p.e_rows) for p in parts) if take is None else len(take)
                out[k] = np.full(rows, c[0][0], dtype=c[0].dtype)
                continue
            # a part without the column holds it as a constant
            vs = [np.full(len(p.e_rows), p.const[k][0], dtype=p.const[k].dtype) if v is None else v
                  for v, p in zip(vs, parts)]
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
    far = _far_outside(ts_all, ok_all, rows_e, is_m, ctx)
    if far is not None:
        ok_all &= ~far
    ok_e = ok_all[rows_e]
    missing_ts = not ok_e.all()

    # --- time: float64 µs (exact ns below 2**43 µs) or exact integer ns for big fractional ts
    pool = rows_e[ok_e] if ok_e.any() else np.flatnonzero(ok_all & ~is_m)
    ns_list = [p.ns_abs for p in parts if p.ns_abs is not None]
    ns_parts = ns_list if len(ns_list) == len(parts) else None
    t_all, origin_abs = _timeline(ts_all, ns_parts, exact_ts, pool, meta, ok_all)
    del ns_parts
    del ts_all

    flow_cols, mem_cols = _join(parts, "flows"), _join(parts, "memory")
    flow_ts, mem_ts = t_all[is_flow], t_all[is_mem]
    if far is not None:  # rows far outside the trace leave every table
        flow_cols, flow_ts = _keep_rows(flow_cols, flow_ts, ~far[is_flow])
        mem_cols, mem_ts = _keep_rows(mem_cols, mem_ts, ~far[is_mem])
    flows = _pair_flows(flow_cols, flow_ts, ctx)
    memory = _memory_frame(mem_cols, mem_ts)
    c_ts = t_all[is_c]
    c_far = far[is_c] if far is not None else None
    c_rows, off = [], 0
    for p in parts:
        c_rows += [(int(c_ts[off + r]), *rest) for r, *rest in p.counters
                   if c_far is None or not c_far[off + r]]
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
    tables = _device_args_table(parts, offs, n_all, take)
    tables.update(id_values_table([p.id_values for p in parts] + [ctx.id_values]))
    data = {"ts_ns": ts_e if take is None else ts_e[take], **data}
    del t_all, ts_parts, ts_e
    renamed: dict[str, str] = {}
    for u in data["cat"].lut:
        c = _canon_cat(u)
        if isinstance(u, str) and c is not None and c != u:
            renamed.setdefault(c, u)
    for k, transform in _CAT_TRANSFORMS.items():
        data[k] = data[k].finish(transform)
    nE = len(data["ts_ns"])
    data["step"] = np.full(nE, -1, dtype=np.int32)
    data["rank"] = np.zeros(nE, dtype=np.int32)
    data = {k: data[k] for k in schema.EVENT_COLUMNS}
    events = pd.DataFrame(data, copy=False)
    del data

    tmeta = _build_meta(meta, ctx.path, report, origin_abs, rank, events)
    if renamed:
        tmeta.extra[schema.CATEGORY_NAMES_KEY] = renamed
    if tmeta.flags.get("profile_memory") in (1, True, "1", "true", "True") and memory.empty:
        report.add("profile_memory_without_memory", "assumed", 0,
                   "profile_memory is set but the trace has no [memory] events: no allocation was recorded "
                   "(memory views are empty, not zero)")
    if renamed.get(schema.KERNEL) == "mtia_ccp_events":
        _mtia_dma(events, report)
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
    file_index = None
    if ctx.fast:  # an events row's position in traceEvents
        file_index = _concat([o + p.e_rows for o, p in zip(offs, parts)])
        file_index = file_index if take is None else file_index[take]
    check_nesting(events, file_index, ctx)
    _check_launch_order(flows, report)
    return Trace(events=events, flows=flows, memory=memory, counters=counters, threads=threads, meta=tmeta,
                 report=report, tables=tables)


def _device_args_table(parts: list[_Part], offs: np.ndarray, n_all: int,
                       take: np.ndarray | None) -> dict[str, pd.DataFrame]:
    """``{"device_args": frame}`` (empty dict when no device row has such args): the numeric args of
    device rows that have no events column (``args._device_extras``), one row per (event, key):
    ``event`` (int64, the row's position in the events table), ``key`` (categorical, the JSON key
    as written), ``value`` (float64, exact for integers up to 2**53). Sorted by event, then key."""
    got = [(o + pos, key, v) for o, p in zip(offs, parts) for pos, key, v in p.dev_args if len(pos)]
    if not got:
        return {}
    order = _concat([o + p.e_rows for o, p in zip(offs, parts)])  # file position of each events row
    if take is not None:
        order = order[take]
    row_of = np.full(n_all, -1, dtype=np.int64)
    row_of[order] = np.arange(len(order), dtype=np.int64)
    uniq: dict[str, int] = {}
    evs, codes, vals = [], [], []
    for g, k, v in got:
        ev = row_of[g]
        o = np.argsort(ev, kind="stable") if len(ev) > 1 and not bool((ev[1:] >= ev[:-1]).all()) else None
        if o is not None:
            ev, v = ev[o], v[o]
        keep = ev >= 0  # rows dropped from the events table (no usable ts) leave this table too
        evs.append(ev[keep])
        vals.append(v[keep])
        codes.append(np.full(int(keep.sum()), uniq.setdefault(k, len(uniq)), dtype=np.int32))
    key = pd.Categorical.from_codes(_concat(codes), categories=pd.Index(list(uniq)))
    df = pd.DataFrame({"event": _concat(evs), "key": key, "value": _concat(vals)})
    return {"device_args": df.reset_index(drop=True)}


# A timestamp more than this far (µs) from the median ts of the trace's events is not part of the
# trace (pytorch/kineto#109: kernels with "ts": 0 in a trace of absolute µs since the epoch, which
# made a 51-year span): its event is dropped from every table and reported (``ts_outlier``).
_OUTLIER_US = 86_400e6  # one day; a profile covers seconds to hours


def _far_outside(ts_all: np.ndarray, ok_all: np.ndarray, rows_e: np.ndarray, is_m: np.ndarray,
                 ctx: _Ctx) -> np.ndarray | None:
    """Mask of the events whose ``ts`` (float64 µs) is more than ``_OUTLIER_US`` from the median
    ``ts`` of the events-table rows (``M`` metadata aside), reported as dropped with the count and
    the first one's offset (strict mode raises); None when there are none."""
    timed = ts_all[ok_all & ~is_m]
    if timed.size < 2 or float(timed.max()) - float(timed.min()) <= _OUTLIER_US:
        return None
    ts_e = ts_all[rows_e]
    ts_e = ts_e[np.isfinite(ts_e)]
    med = float(np.median(ts_e if ts_e.size else timed))
    far: np.ndarray = ok_all & ~is_m & (np.abs(ts_all - med) > _OUTLIER_US)
    k = int(np.count_nonzero(far))
    if not k:
        return None
    first = int(np.flatnonzero(far)[0])
    days = abs(float(ts_all[first]) - med) / 86_400e6
    ctx.defect("ts_outlier", "dropped", k,
               f"{k} events had a ts far outside the trace (e.g. {float(ts_all[first]):.3f} µs, {days:.4g} days from the "
               "median ts; rule: more than 1 day from the median): dropped from every table",
               first, f"{k} events have a ts more than 1 day from the trace's median ts (e.g. {float(ts_all[first]):.3f} µs)")
    return far


def _keep_rows(cols: dict[str, Any], ts: np.ndarray, keep: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
    """A side table's columns (arrays or ``_CatColumn``) and times at the rows ``keep``."""
    if keep.all():
        return cols, ts
    idx = np.flatnonzero(keep)
    out = {k: _CatColumn.concat([v], idx) if isinstance(v, _CatColumn) else v[idx] for k, v in cols.items()}
    return out, ts[idx]


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


def _mtia_dma(events: pd.DataFrame, report: LoadReport) -> None:
    """MTIA's on-device ``dma_*`` ops (``mtia_ccp_events``, read as kernels) are memory copies: category
    ``gpu_memcpy`` (as HTA classes them: ``hta.common.types`` memory kernels ``^dma``), noted."""
    cat = events["cat"]
    names = events["name"].astype(str)
    dma = (cat == schema.KERNEL).to_numpy() & names.str.startswith("dma").to_numpy()
    k = int(dma.sum())
    if not k:
        return
    if schema.GPU_MEMCPY not in cat.cat.categories:
        cat = cat.cat.add_categories([schema.GPU_MEMCPY])
    cat = cat.copy()
    cat[dma] = schema.GPU_MEMCPY
    events["cat"] = cat
    report.add("mtia_dma", "assumed", k, f"{k} MTIA dma_* ops (mtia_ccp_events, e.g. {names[dma].iloc[0]!r}) "
               "read as memory copies (gpu_memcpy), not kernels")


def _steps(events: pd.DataFrame, memory: pd.DataFrame, report: LoadReport) -> None:
    """``step`` from the host ``ProfilerStep#N`` ranges (``nbprof.trace.steps``): host rows by time,
    device rows via the correlation id of their launch, else by time; memory rows by time.

    A trace without ``ProfilerStep#N`` keeps step -1 here, noted in the report; ``Trace`` construction then
    assigns the detected iterations, if any (``nbprof.trace.iterations.assign_detected_steps``).
    """
    if events.empty:
        return
    device = events["device"].to_numpy()
    host = device < 0
    big = [n for n in events["name"].cat.categories
           if isinstance(n, str) and steps.STEP_NAME_RE.search(n) and steps.step_number(n) is None]
    if big:
        k = int(events["name"].isin(big).sum())
        report.add("step_number_too_large", "assumed", k,
                   f"{k} ProfilerStep#N events have a step number beyond int32 (e.g. {big[0][:60]!r}): "
                   "kept as events, not used as steps")
    ranges = steps.step_ranges(events)
    if not len(ranges):
        report.add("no_steps", "assumed", 0,
                   "no ProfilerStep#N events (profiler used without schedule/step()): steps are the iterations "
                   "detected from what repeats (steps_detected), else -1 for every event")
        return
    host_ranges = steps.step_ranges(events, host)
    if len(host_ranges):
        steps.assign_steps(events, host_ranges, memory=memory)
        return
    # ProfilerStep#N only on device rows (gpu_user_annotation): each device's own ranges time its rows
    per_device = [steps.step_ranges(events, device == d).assign(pid=d) for d in np.unique(device[~host])]
    dev_ranges = pd.concat([r for r in per_device if len(r)], ignore_index=True)
    steps.assign_steps(events, dev_ranges, timed=~host, correlated=np.zeros(len(events), dtype=bool))
    n = int(dev_ranges["step"].nunique())
    report.add("steps_from_device", "assumed", n,
               f"{n} ProfilerStep#N ranges only on the device (gpu_user_annotation), none on the host: device rows "
               "take the step of their device's range by time; host rows and memory keep step -1")


def _check_launch_order(flows: pd.DataFrame, report: LoadReport) -> None:
    """Flag ac2g flows whose device end (the kernel or copy) starts before their host start (the launch
    call): clocks of host and device disagree there (kept as recorded; kind ``kernel_before_launch``)."""
    if flows.empty:
        return
    ac = flows[(flows["cat"] == "ac2g").to_numpy()]
    src, dst = ac["src_ts_ns"].to_numpy(), ac["dst_ts_ns"].to_numpy()
    has_s, has_f = ac["src_pid"].to_numpy() != -1, ac["dst_pid"].to_numpy() != -1
    leads = list((src - dst)[has_s & has_f & (dst < src)])
    # a finish before its start is never paired (``_pair_flows`` pairs a finish with an earlier start):
    # the lone finish and the lone start of one id
    lone = pd.merge(ac.loc[has_f & ~has_s, ["id", "dst_ts_ns"]], ac.loc[has_s & ~has_f, ["id", "src_ts_ns"]], on="id")
    lone = lone[lone["dst_ts_ns"] < lone["src_ts_ns"]].drop_duplicates("id")
    leads += list(lone["src_ts_ns"] - lone["dst_ts_ns"])
    n = len(leads)
    if n:
        report.add("kernel_before_launch", "flagged", n,
                   f"{n} device ops start before the launch call that queued them (up to {int(max(leads))} ns "
                   f"earlier; {len(lone)} of them left as two unpaired flow ends): host and device clocks disagree "
                   "there; kept as recorded")


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
