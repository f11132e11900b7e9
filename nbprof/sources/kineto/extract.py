"""One run of decoded events -> ``_Part``: the columns of every table, before the trace origin is known.

A load has one part (one process) or one per run of the events array (two processes,
``parallel``); ``finish`` joins them. Each part classifies its events by phase (``X``/``i``
rows of the events table, ``M`` metadata, flows, ``[memory]``, counters), reads durations
(negative and missing ones repaired, reported), decodes ``args`` per category group and sorts
its rows by time when the times are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...trace import schema
from .args import (
    _ARG_COLUMNS,
    _NO_ARGS_CATEGORIES,
    _RT_GROUP,
    _arg_columns,
    _ArgColumns,
    _decode_args,
    _decode_device_args,
    _device_extras,
)
from .columns import _CatColumn, _col, _floats, _pid_tid, _select
from .context import _Ctx
from .side_tables import _counter_rows, _flow_columns, _memory_columns, _thread_rows
from .structs import _Event
from .times import _EXACT_TS_MIN_US, _us_to_ns

#: the longest duration kept (ns): ``ts_ns + dur_ns`` stays within int64 for any ts of a loaded trace
_DUR_MAX_NS = float(2**62)


def _canon_cat(c: Any) -> str | None:
    return None if c is None else schema.canonical_category(c if isinstance(c, str) else str(c))


@dataclass(eq=False)
class _Part:
    """What ``_extract`` reads from one contiguous run of decoded events, before the trace origin is known.

    Over the run's ``n`` events: ``ts_us`` (float64 µs, NaN where unusable) and the masks ``is_e``
    (rows of the events table), ``is_m`` (``M`` metadata), ``is_flow``, ``is_mem`` (``[memory]``),
    ``is_c`` (counters); ``ns_abs``: ``ts_us`` as exact int64 ns (0 where unusable), or None when a
    value is beyond 2**43 µs; ``e_rows``: the run's positions of the ``events`` rows, in their
    order (sorted by ``ns_abs`` when it is known); ``const``: the numeric ``events`` columns that
    hold one value, with that value as a 1-row array (their ``events`` entry is None; ``_join``
    fills them). ``events``: the events table's columns for the ``is_e`` rows except ``ts_ns``
    (categoricals as ``_CatColumn``, finished once all parts are joined); ``flows`` and
    ``memory``: their columns for their rows (no times); ``counters``: (row among the run's ``C``
    events, name, series, value, pid) tuples; ``threads``: (pid, tid, name, kind) tuples.
    """

    n: int
    ts_us: np.ndarray
    ns_abs: np.ndarray | None
    e_rows: np.ndarray
    const: dict[str, np.ndarray]
    is_e: np.ndarray
    is_m: np.ndarray
    is_flow: np.ndarray
    is_mem: np.ndarray
    is_c: np.ndarray
    events: dict[str, Any] | None  # set to None by ``_finish`` once joined
    flows: dict[str, Any]
    memory: dict[str, np.ndarray]
    counters: list[tuple[Any, ...]]
    threads: list[tuple[Any, ...]]
    notes: dict[str, list[Any]]  # the run's assumptions (``_Ctx.note``; event indices within the run)
    dev_args: list[tuple[np.ndarray, str, np.ndarray]]  # (run positions, key, values): ``device_args``
    id_values: dict[str, dict[int, int | str]]  # the run's ``_Ctx.id_values``: ``id_values``


def _extract(holder: list[list[_Event]], ctx: _Ctx, keep: list[Any] | None = None) -> _Part:
    """Decoded events of one run -> ``_Part`` (columns, per-row reports). The events are freed half-way,
    or moved to ``keep`` (a process about to exit skips freeing millions of objects)."""
    report = ctx.report
    evs = holder.pop()
    n_all = len(evs)
    ph_col = _CatColumn(n_all)
    ph_col.put(None, _col(evs, "ph"))
    ph_lut, ph_codes = ph_col.lut, ph_col.codes
    assert ph_codes is not None  # put() over every row

    def is_ph(*phs: str) -> np.ndarray:
        lut = np.array([u in phs for u in ph_lut], dtype=bool)
        return lut[ph_codes] if n_all else np.zeros(0, dtype=bool)

    is_x = is_ph("X")
    is_i = is_ph("i", "I")
    is_flow = is_ph("s", "f", "t")
    is_m = is_ph("M")
    is_c = is_ph("C")
    known = is_x | is_i | is_flow | is_m | is_c
    n_other = n_all - int(known.sum())
    if n_other:
        kinds = sorted({str(evs[i].ph) for i in np.flatnonzero(~known)[:1000].tolist()})
        report.add("unsupported_phase", "dropped", n_other,
                   f"{n_other} events with phase {', '.join(kinds)} (not written by Kineto) were ignored")
    inst = np.flatnonzero(is_i)
    is_mem = np.zeros(n_all, dtype=bool)
    is_global = np.zeros(n_all, dtype=bool)
    if inst.size:
        ins = _select(evs, is_i)
        mem_i = np.array([n == "[memory]" for n in _col(ins, "name")], dtype=bool)
        is_mem[inst] = mem_i
        is_global[inst] = np.array([s == "g" for s in _col(ins, "s")], dtype=bool) & ~mem_i
    # global instants ("Iteration Start", "Record Window End") are viewer markers, not activity:
    # left out of the events table (torch-tb-profiler drops them too).
    is_e = (is_x | is_i) & ~is_mem & ~is_global
    rows_e = np.flatnonzero(is_e)
    E = _select(evs, is_e)
    nE = len(E)

    ts_all = _floats(evs, "ts", "ts", ctx, np.arange(n_all))
    ok_e = np.isfinite(ts_all[rows_e])
    missing_ts = int(np.count_nonzero(~ok_e))
    if missing_ts:
        ctx.defect("missing_ts", "dropped", missing_ts, f"{missing_ts} events had no usable 'ts' and were dropped",
                   int(rows_e[np.flatnonzero(~ok_e)[0]]), f"{missing_ts} events have no usable 'ts'")

    # --- durations: instants 0; missing -> 0; negative (e.g. -1) -> clamped to 0
    dur_us = _floats(E, "dur", "dur", ctx, rows_e)
    dur_f = np.rint(dur_us * 1000.0)
    x_e = is_x[rows_e]
    missing_dur = ~np.isfinite(dur_f)
    n_missing_dur = int(np.count_nonzero(missing_dur & x_e & ok_e))
    dur_f[missing_dur] = 0
    neg = dur_f < 0
    n_neg = int(np.count_nonzero(neg & ok_e))
    if n_neg:
        first_neg = int(np.flatnonzero(neg)[0])
        ctx.defect("negative_dur", "repaired", n_neg, f"{n_neg} events had negative dur (e.g. -1): clamped to 0",
                   int(rows_e[first_neg]), f"{n_neg} events have negative 'dur' (e.g. {dur_us[first_neg]})")
    if n_missing_dur:
        report.add("missing_dur", "repaired", n_missing_dur, f"{n_missing_dur} complete events had no dur: set to 0")
    dur_f[neg] = 0
    # a duration whose end int64 ns cannot hold (ts is within days of the origin): not a measurement
    huge = dur_f > _DUR_MAX_NS
    n_huge = int(np.count_nonzero(huge & ok_e))
    if n_huge:
        first_huge = int(np.flatnonzero(huge)[0])
        ctx.defect("dur_out_of_range", "repaired", n_huge,
                   f"{n_huge} events had a dur beyond 2**62 ns (146 years; e.g. {float(dur_us[first_huge])!r} µs), whose end "
                   "int64 ns cannot hold: set to 0", int(rows_e[first_huge]),
                   f"{n_huge} events have a 'dur' beyond 2**62 ns (e.g. {float(dur_us[first_huge])!r} µs)")
        dur_f[huge] = 0
    del dur_us

    frows = np.flatnonzero(is_flow)
    flows = _flow_columns(_select(evs, is_flow), is_ph("s")[frows], ctx, frows)
    mrows = np.flatnonzero(is_mem)
    memory = _memory_columns(_select(evs, is_mem), ctx, mrows)
    counters = _counter_rows(_select(evs, is_c))
    threads = _thread_rows(_select(evs, is_m), ctx)

    # --- categories, names
    cats_raw = _col(E, "cat")
    if cats_raw.count(None):
        # legacy autograd-profiler traces (bare array) have no "cat"; CPU ops sit in pid "CPU functions"
        pids = _col(E, "pid")
        legacy = [i for i, (c, p) in enumerate(zip(cats_raw, pids)) if c is None and p == "CPU functions"]
        for i in legacy:
            cats_raw[i] = schema.CPU_OP
        if legacy:
            report.add("legacy_cpu_functions", "assumed", len(legacy),
                       f"{len(legacy)} events without a category in pid \"CPU functions\" (legacy autograd "
                       "profiler export) read as cpu_op")
    cat = _CatColumn(nE)
    cat.put(None, cats_raw)
    del cats_raw
    name = _CatColumn(nE)
    name.put(None, _col(E, "name"))
    canon = [_canon_cat(u) for u in cat.lut]

    def in_set(s: frozenset[str] | set[str]) -> np.ndarray:
        lut = np.array([c in s for c in canon] + [False], dtype=bool)
        return lut[cat.codes] if cat.codes is not None else np.zeros(nE, dtype=bool)

    is_dev = in_set(schema.DEVICE_CATEGORIES)
    is_rt = in_set(_RT_GROUP) & ~is_dev
    no_args = in_set(_NO_ARGS_CATEGORIES)
    is_op = ~(is_dev | is_rt | no_args)

    cols = _ArgColumns(nE)
    for col, kind in _ARG_COLUMNS.items():
        if kind not in ("int", "float"):
            cols[col] = _CatColumn(nE)
    args_e = _col(E, "args")
    dev_args: list[tuple[np.ndarray, str, np.ndarray]] = []
    for mask, group in ((is_op, "host op"), (is_rt, "runtime"), (is_dev, "device")):
        rows = np.flatnonzero(mask)
        if rows.size:
            raws = _select(args_e, mask)
            if group == "device":
                args, all_known = _decode_device_args(raws, ctx, rows_e[rows])
                dev_args = _device_extras(raws, args, all_known, ctx, rows_e[rows], rows_e[rows])
            else:
                args = _decode_args(raws, group, ctx, rows_e[rows])
            del raws
            _arg_columns(args, group, ctx, rows_e[rows], cols, rows)
            if keep is not None:
                keep.append(args)
            del args
    del args_e

    for col, kind in _ARG_COLUMNS.items():  # a key in no event: one row stands for all (``const``)
        if kind in ("int", "float") and col not in cols:
            cols[col] = np.full(min(nE, 1), _ArgColumns.DEFAULTS[kind])
    pid, tid = _pid_tid(None, None, ctx, rows_e, objs=E)
    if keep is not None:
        keep += [E, evs]
    del E, evs  # the decoded events (and the file bytes their Raw values point into) go here
    dev_arg, stream_arg = cols["device"], cols["stream"]
    device = np.where(is_dev, np.where(dev_arg >= 0, dev_arg, np.where(pid >= 0, pid, -1)), -1)
    stream = np.where(is_dev, np.where(stream_arg >= 0, stream_arg, tid), -1)
    ph_e = _CatColumn(nE)
    ph_e.lut, ph_e.codes = ph_lut, ph_codes[rows_e]
    events = {
        "dur_ns": dur_f.astype(np.int64),
        "name": name,
        "cat": cat,
        "ph": ph_e,
        "pid": np.where(is_dev, device, pid),  # device rows: pid = device, tid = stream
        "tid": np.where(is_dev, stream, tid),
        "device": device.astype(np.int16),
        "stream": stream,
        "correlation": cols["correlation"],
        "external_id": cols["external_id"],
        "seq": cols["seq"],
        "fwd_tid": cols["fwd_tid"],
        "input_dims": cols["input_dims"],
        "input_types": cols["input_types"],
        "concrete_inputs": cols["concrete_inputs"],
        "call_stack": cols["call_stack"],
        "module": cols["module"],
        "flops": cols["flops"],
        "bytes": cols["bytes"],
        "grid": cols["grid"],
        "block": cols["block"],
        "registers": cols["registers"].astype(np.int32),
        "shared_mem_bytes": cols["shared_mem_bytes"],
        "occupancy_ratio": (cols["occupancy_ratio"] / 100.0).astype(np.float32),
        "blocks_per_sm": cols["blocks_per_sm"].astype(np.float64),
        "collective": cols["collective"],
        "msg_in_nelems": cols["msg_in_nelems"],
        "msg_out_nelems": cols["msg_out_nelems"],
        "group_size": cols["group_size"].astype(np.int32),
        "dtype": cols["dtype"],
        "pg_name": cols["pg_name"],
    }
    # numeric columns holding one value (most args columns of a CPU trace; an args key in no
    # event is one row already): that value in ``const``, the column left to ``_join``
    const = {}
    for k, v in events.items():
        if isinstance(v, np.ndarray) and len(v) and (
                len(v) < nE or v.min() == v.max() or (np.isnan(v.min(initial=0.0)) and np.isnan(v).all())):
            const[k] = v[:1]
            events[k] = None
    notes, ctx.notes = ctx.notes, {}
    id_values, ctx.id_values = ctx.id_values, {}
    fin = np.isfinite(ts_all)
    small = not fin.any() or float(np.abs(ts_all[fin]).max()) < _EXACT_TS_MIN_US
    ns_abs = _us_to_ns(np.where(fin, ts_all, 0.0)) if small else None
    e_rows = rows_e
    if ns_abs is not None:  # sort the rows by time here (in parallel with the other runs)
        ts_e = ns_abs[rows_e]
        if ts_e.size > 1 and not (ts_e[1:] >= ts_e[:-1]).all():
            o = np.argsort(ts_e, kind="stable")
            e_rows = rows_e[o]
            for k, v in events.items():
                if isinstance(v, _CatColumn):
                    if v.codes is not None:
                        v.codes = v.codes[o]
                elif v is not None:
                    events[k] = v[o]
    return _Part(n=n_all, ts_us=ts_all, ns_abs=ns_abs, e_rows=e_rows, const=const, is_e=is_e, is_m=is_m,
                 is_flow=is_flow, is_mem=is_mem, is_c=is_c, events=events, flows=flows, memory=memory,
                 counters=counters, threads=threads, notes=notes, dev_args=dev_args,
                 id_values=id_values)
