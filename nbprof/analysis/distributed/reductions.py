"""Per-rank reductions: the small tables every cross-rank analysis reads, instead of every full Trace.

A job's ranks are analysed in two stages:

1. where a rank is parsed (a pool process, a Dask worker), :func:`reduce_rank` turns its
   :class:`~nbprof.trace.model.Trace` into a dict of small int64-ns frames (this module's tables);
2. the cross-rank analyses of :mod:`nbprof.analysis.distributed` (:func:`wait_transfer`, :func:`stragglers`,
   :func:`collective_skew`, :func:`skew`, :func:`overlap`, :func:`step_breakdown`, :func:`collective_summary`,
   :func:`busbw_vs_link`, :func:`memory_per_rank`, :func:`ranks_clock`, :func:`distributed_report`) take the
   concatenation of those tables over ranks, each with an int ``rank`` column added (what ``pd.concat`` over
   ranks gives, or a DuckDB / Parquet read of the dataset) -- or the traces themselves, which they reduce
   with :func:`reduce_rank` first. There is one code path: a full trace's result *is* its reductions' result.

Tables (:data:`REDUCTION_SCHEMA` gives every column's pandas dtype; times are int64 ns on the rank's own
trace clock, i.e. relative to ``rank_info.origin_ns``, unless a column says ``_abs_``; sizes are bytes):

``rank_info``
    One row: ``origin_ns`` (Kineto ``baseTimeNanoseconds``; -1 when the trace has none), ``first_ts_ns``,
    ``last_end_ns`` (first event start, last event end; 0 for an empty trace), ``span_ns`` (their
    difference, :attr:`Trace.duration_ns`), ``events``, ``has_device``, ``world_size`` (-1 unknown),
    ``link`` (:func:`nbprof.analysis.links.guess_link` of its GPU, None when unknown),
    ``last_profiler_step_ns`` (start of the last ``ProfilerStep``, the end of HTA's default window; -1 with
    fewer than two ProfilerSteps).
``steps``
    One row per step window of :func:`nbprof.analysis.steps.step_windows` (THE step definition: ProfilerStep,
    NVTX or detected iterations, extended to their device work): ``step, start_ns, end_ns, host_start_ns,
    host_end_ns, device_ops, step_ns``, the Overview breakdown of :func:`nbprof.analysis.steps.step_breakdown`
    (``kernel_ns ... other_ns``), and :func:`nbprof.analysis.steps.steady_state`'s ``skipped``/``skip_reason``.
``collectives``
    :func:`nbprof.analysis.distributed.collectives` without ``rank`` (one row per executed collective:
    process group ``pg_name``, ``seq``, API name, ``ts_ns, dur_ns, start_abs_ns``, ``msg_bytes`` -- nullable
    Int64, NA when the trace has no sizes -- ``stream``...), plus ``before_last_step`` (launched before the
    last ``ProfilerStep`` starts: HTA's default window, ``overlap(until_last_step=True)``).
``compute``
    The rank's computation as a normalised interval set (sorted, disjoint ``start_ns, end_ns``): device
    kernels that are not communication nor memcpy/memset/sync (HTA's ``NCCL_COMPUTE_KERNEL_RE``), or, on a
    CPU trace, host ops outside the communication threads that neither are nor contain a collective call
    (:func:`overlap`'s basis). ``until_last_step`` False rows: the whole trace; True rows: the same
    restricted to HTA's window (only when ``rank_info.last_profiler_step_ns`` >= 0).
``idle``
    Device idle intervals per ``device, stream``: the gaps between the stream's merged device ops (kernels,
    memcpy, memset), from its first op to its last. Their sum per stream is
    :func:`nbprof.analysis.utilization.gpu_utilization` ``(by="stream")``'s ``idle_ns``. Empty on CPU traces.
``kernels``
    :func:`nbprof.analysis.kernels.kernel_summary` by name: ``name, instances, total_ns, min_ns, max_ns``
    (int64) and ``avg_ns, med_ns, std_ns, gpu_time_ratio`` (float64).
``operators``
    :func:`nbprof.analysis.operators.operator_summary` by name: ``name, cat, count, self_host_ns,
    total_host_ns, self_device_ns, total_device_ns`` (int64 ns), ``host_mem_bytes, device_mem_bytes`` (int64
    bytes), ``flops`` (float64, NaN when not recorded).
``memory``
    :func:`nbprof.analysis.memory.memory_peak`: ``device_type, device, peak_allocated_bytes,
    peak_reserved_bytes`` (int64 bytes; -1 when not recorded); empty without ``[memory]`` events.

Versioning: :data:`REDUCTION_VERSION` changes whenever a table or column is added, removed, renamed or
changes meaning; a reader must recompute reductions of another version from the traces.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...errors import NbprofWarning
from ...trace import predicates as pred
from ...trace.model import Trace
from .. import _intervals as iv
from .._memo import per_trace
from .comms import collectives

#: Version of the tables' layout (see the module docstring's versioning rule).
REDUCTION_VERSION = 1

_BREAKDOWN = ("kernel_ns", "memcpy_ns", "memset_ns", "communication_ns", "runtime_ns", "dataloader_ns",
              "cpu_exec_ns", "other_ns")

#: table -> {column: pandas dtype}. ``object`` columns hold Python ``str`` (or None where the docstring says
#: so); ``Int64`` is pandas' nullable integer (NA = unknown). A dataset adds an ``int64`` ``rank`` column.
REDUCTION_SCHEMA: dict[str, dict[str, str]] = {
    "rank_info": {"origin_ns": "int64", "first_ts_ns": "int64", "last_end_ns": "int64", "span_ns": "int64",
                  "events": "int64", "has_device": "bool", "world_size": "int64", "link": "object",
                  "last_profiler_step_ns": "int64"},
    "steps": {"step": "int64", "start_ns": "int64", "end_ns": "int64", "host_start_ns": "int64",
              "host_end_ns": "int64", "device_ops": "int64", "step_ns": "int64",
              **{c: "int64" for c in _BREAKDOWN}, "skipped": "bool", "skip_reason": "object"},
    "collectives": {"seq": "int64", "collective": "object", "backend_name": "object", "family": "object",
                    "api_name": "object", "ts_ns": "int64", "dur_ns": "int64", "start_abs_ns": "int64",
                    "api_ts_ns": "int64", "api_start_abs_ns": "int64", "step": "int64", "pid": "int64",
                    "tid": "int64", "device": "int64", "stream": "int64", "correlation": "int64",
                    "group_size": "int64", "msg_bytes": "Int64", "algbw_bytes_per_s": "float64",
                    "busbw_bytes_per_s": "float64", "pg_name": "object", "before_last_step": "bool"},
    "compute": {"start_ns": "int64", "end_ns": "int64", "until_last_step": "bool"},
    "idle": {"device": "int64", "stream": "int64", "start_ns": "int64", "end_ns": "int64"},
    "kernels": {"name": "object", "instances": "int64", "total_ns": "int64", "min_ns": "int64", "max_ns": "int64",
                "avg_ns": "float64", "med_ns": "float64", "std_ns": "float64", "gpu_time_ratio": "float64"},
    "operators": {"name": "object", "cat": "object", "count": "int64", "self_host_ns": "int64",
                  "total_host_ns": "int64", "self_device_ns": "int64", "total_device_ns": "int64",
                  "host_mem_bytes": "int64", "device_mem_bytes": "int64", "flops": "float64"},
    "memory": {"device_type": "int64", "device": "int64", "peak_allocated_bytes": "int64",
               "peak_reserved_bytes": "int64"},
}

#: The tables, in :data:`REDUCTION_SCHEMA` order.
TABLES: tuple[str, ...] = tuple(REDUCTION_SCHEMA)

#: HTA's ``NCCL_COMPUTE_KERNEL_RE`` exclusion (communication, memcpy/memset, sync and MTIA ``dma*`` kernels are
#: not compute)
_HTA_NON_COMPUTE = re.compile(r"^(nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)|(dma)")


def conform(table: str, frame: pd.DataFrame, *, rank: bool = False) -> pd.DataFrame:
    """``frame`` with exactly the columns of ``table`` in :data:`REDUCTION_SCHEMA` (in order, cast to their
    dtypes), plus a leading int64 ``rank`` column when ``rank`` is True.

    Raises
    ------
    KeyError
        Unknown table, or a column of the schema missing from ``frame``.
    """
    cols = REDUCTION_SCHEMA[table]
    if rank:
        cols = {"rank": "int64", **cols}
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        msg = f"reduction table {table!r} lacks columns {missing}"
        raise KeyError(msg)
    out = frame[list(cols)].reset_index(drop=True)
    if not len(out):
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in cols.items()})
    out = out.astype(cols)
    for c, d in cols.items():  # missing strings are None (NaN would not be a str)
        if d == "object" and out[c].isna().any():
            out[c] = out[c].astype(object).where(out[c].notna(), None)
    return out


@per_trace
def _last_step(trace: Trace) -> tuple[int | None, set[int] | None]:
    from ..utilization import _before_last_step

    return _before_last_step(trace)


def compute_intervals(trace: Trace, comm_tids: set[int], keep_corr: set[int] | None = None,
                      before_ns: int | None = None) -> iv.Intervals:
    """The computation of one rank as a normalised interval set (``compute`` table's definition).

    GPU traces: kernels that are not communication and not memcpy/memset/sync (HTA's
    ``NCCL_COMPUTE_KERNEL_RE``), only those launched with a correlation in ``keep_corr`` when given. CPU
    traces: host cpu_ops outside the threads ``comm_tids`` that neither are nor contain a ``c10d::`` /
    ``record_param_comms`` op, less the time of those ops; only ops starting before ``before_ns`` when given.
    """
    ev = trace.events
    if trace.has_device:
        is_kernel = pred.is_kernel(ev)
        k = ev[is_kernel & ~pred.is_communication(ev, where="device")]
        # HTA's NCCL_COMPUTE_KERNEL_RE exclusion, kept verbatim for parity with get_comm_comp_overlap
        memlike = pred.name_mask(k["name"], _HTA_NON_COMPUTE.match)  # once per distinct name
        k = k[~memlike]
        if keep_corr is not None:
            k = k[k["correlation"].isin(keep_corr)]
        return iv.merge(k["ts_ns"].to_numpy(), (k["ts_ns"] + k["dur_ns"]).to_numpy())
    host = ev[pred.is_host_op(ev, annotations=False)]
    host = host[~host["tid"].isin(comm_tids)]
    if before_ns is not None:
        host = host[host["ts_ns"] < before_ns]
    is_comm = pred.name_mask(host["name"], lambda n: n.startswith("c10d::") or n == "record_param_comms")
    comm_ops = host[is_comm]
    cand = host[~is_comm]
    if len(comm_ops) and len(cand):
        cs = np.sort(comm_ops["ts_ns"].to_numpy())
        st = cand["ts_ns"].to_numpy()
        en = st + cand["dur_ns"].to_numpy()
        contains = np.searchsorted(cs, en, side="left") - np.searchsorted(cs, st, side="left") > 0
        cand = cand[~contains]
    comp = iv.merge(cand["ts_ns"].to_numpy(), (cand["ts_ns"] + cand["dur_ns"]).to_numpy())
    if len(comm_ops):
        comp = iv.subtract(comp, iv.merge(comm_ops["ts_ns"].to_numpy(),
                                          (comm_ops["ts_ns"] + comm_ops["dur_ns"]).to_numpy()))
    return comp


def _host_comm_tids(c: pd.DataFrame) -> set[int]:
    return set(int(x) for x in c.loc[c["device"] < 0, "tid"]) if len(c) else set()


# --------------------------------------------------------------------------- one builder per table


def _rank_info(trace: Trace) -> pd.DataFrame:
    from ..links import guess_link

    ev = trace.events
    first = int(ev["ts_ns"].min()) if len(ev) else 0
    last = int((ev["ts_ns"] + ev["dur_ns"]).max()) if len(ev) else 0
    m = trace.meta
    last_step, _keep = _last_step(trace)
    return pd.DataFrame({
        "origin_ns": [int(m.origin_ns) if m.origin_ns is not None else -1], "first_ts_ns": [first],
        "last_end_ns": [last], "span_ns": [trace.duration_ns], "events": [len(ev)], "has_device": [trace.has_device],
        "world_size": [int(m.world_size) if m.world_size is not None else -1], "link": [guess_link(trace)],
        "last_profiler_step_ns": [-1 if last_step is None else int(last_step)]})


def _steps(trace: Trace) -> pd.DataFrame:
    from ..steps import steady_state, step_windows

    w = step_windows(trace)
    s = steady_state(trace)
    out = w.assign(step_ns=w["end_ns"] - w["start_ns"])
    if len(s) == len(w):
        for c in (*_BREAKDOWN, "skipped", "skip_reason"):
            out[c] = s[c].to_numpy()
    else:  # no breakdown for these windows (never seen: both come from step_windows); zeros, not skipped
        for c in _BREAKDOWN:
            out[c] = 0
        out["skipped"], out["skip_reason"] = False, ""
    return out


def _collectives(trace: Trace) -> pd.DataFrame:
    c = collectives(trace)
    last, keep = _last_step(trace)
    if last is None or c.empty:
        before = np.ones(len(c), dtype=bool)
    else:
        gpu = c["device"].to_numpy() >= 0
        before = (gpu & c["correlation"].isin(keep).to_numpy()) | (~gpu & (c["ts_ns"].to_numpy() < last))
    # sizes are whole bytes; NaN (no size in the trace) becomes NA
    msg = pd.Series(c["msg_bytes"].to_numpy(np.float64), dtype="Float64").round().astype("Int64")
    return c.assign(before_last_step=before, msg_bytes=msg.to_numpy())


def _compute(trace: Trace) -> pd.DataFrame:
    c = collectives(trace)
    parts = [(compute_intervals(trace, _host_comm_tids(c)), False)]
    last, keep = _last_step(trace)
    if last is not None:
        cc = c
        if len(c):
            gpu = c["device"] >= 0
            cc = c[(gpu & c["correlation"].isin(keep)) | (~gpu & (c["ts_ns"] < last))]
        parts.append((compute_intervals(trace, _host_comm_tids(cc), keep, last), True))
    return pd.DataFrame({
        "start_ns": np.concatenate([p[0][0] for p in parts]).astype(np.int64),
        "end_ns": np.concatenate([p[0][1] for p in parts]).astype(np.int64),
        "until_last_step": np.concatenate([np.full(len(p[0][0]), p[1]) for p in parts]).astype(bool)})


def _idle(trace: Trace) -> pd.DataFrame:
    from ..utilization import device_ops

    d = device_ops(trace)
    parts = []
    for (dev, stream), g in d.groupby(["device", "stream"], sort=True):
        s, e = iv.gaps(iv.merge(g["ts_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64)))
        parts.append(pd.DataFrame({"device": int(dev), "stream": int(stream), "start_ns": s, "end_ns": e}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(REDUCTION_SCHEMA["idle"]))


def _kernels(trace: Trace) -> pd.DataFrame:
    from ..kernels import kernel_summary

    return kernel_summary(trace)


def _operators(trace: Trace) -> pd.DataFrame:
    from ..operators import operator_summary

    return operator_summary(trace)


def _memory(trace: Trace) -> pd.DataFrame:
    from ..memory import memory_peak

    return memory_peak(trace)


_BUILDERS = {"rank_info": _rank_info, "steps": _steps, "collectives": _collectives, "compute": _compute,
             "idle": _idle, "kernels": _kernels, "operators": _operators, "memory": _memory}


@per_trace
def reduction_table(trace: Trace, table: str) -> pd.DataFrame:
    """One table of :func:`reduce_rank` (computed once per trace and table).

    Raises
    ------
    KeyError
        Unknown table (see :data:`TABLES`).
    """
    if table not in _BUILDERS:
        msg = f"unknown reduction table {table!r}; tables: {list(TABLES)}"
        raise KeyError(msg)
    return conform(table, _BUILDERS[table](trace))


def reduce_rank(trace: Trace, tables: Iterable[str] | None = None) -> dict[str, pd.DataFrame]:
    """The per-rank reductions of one rank's trace: small frames every cross-rank analysis needs.

    Parameters
    ----------
    trace : Trace
        One rank's trace.
    tables : iterable of str, optional
        Only these tables (default all of :data:`TABLES`).

    Returns
    -------
    dict of str to pandas.DataFrame
        Table name -> frame with the columns and dtypes of :data:`REDUCTION_SCHEMA` (module docstring: what
        each table holds; int64 ns on the rank's trace clock, bytes), without a ``rank`` column (a dataset or
        :func:`concat_reductions` adds it).

    Raises
    ------
    KeyError
        Unknown table name.
    """
    return {name: reduction_table(trace, name) for name in (TABLES if tables is None else tables)}


class JobReductions(dict):  # type: ignore[type-arg]
    """A job's reduction tables (table name -> frame with ``rank`` and the schema's columns), already cast to
    :data:`REDUCTION_SCHEMA` and ordered: what :func:`concat_reductions` and :func:`job_reductions` return. The
    analyses take it as it is; any other mapping is cast and put in rank order first."""


class LazyJobReductions(Mapping[str, pd.DataFrame]):
    """A job's reduction tables read on first lookup (``read(name)``: the table over all ranks with a ``rank``
    column, any row order), each put in :func:`job_reductions`' form once (:func:`_prepare`) and kept: what
    ``Job.reductions()`` gives, so that every analysis of a job casts and orders a table once, not once per
    analysis. The analyses take it as they take a :class:`JobReductions`."""

    def __init__(self, names: Iterable[str], read: Any) -> None:
        self._names = list(names)
        self._read = read
        self._done: dict[str, pd.DataFrame] = {}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._done:
            self._done[name] = _prepare(name, self._read(name))
        return self._done[name]

    def __iter__(self) -> Any:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def concat_reductions(per_rank: Iterable[tuple[int, Mapping[str, pd.DataFrame]]],
                      tables: Iterable[str] | None = None) -> JobReductions:
    """Concatenate per-rank reductions into the job's tables, each with a leading int64 ``rank`` column.

    Parameters
    ----------
    per_rank : iterable of (rank, reductions)
        ``reductions`` as :func:`reduce_rank` returns them. The order is kept (analyses report ranks in it).
    tables : iterable of str, optional
        Only these tables (default every table present in the first reductions).

    Returns
    -------
    JobReductions
        What the cross-rank analyses take: table -> frame with ``rank`` then the schema's columns.
    """
    items = list(per_rank)
    names = list(tables) if tables is not None else [t for t in TABLES if items and t in items[0][1]]
    out = JobReductions()
    for name in names:
        parts = [(r, f[name]) for r, f in items if len(f[name])]
        if not parts:
            out[name] = conform(name, pd.DataFrame(columns=["rank", *REDUCTION_SCHEMA[name]]), rank=True)
            continue
        frame = pd.concat([f for _r, f in parts], ignore_index=True)
        frame.insert(0, "rank", np.repeat(np.array([r for r, _f in parts], dtype=np.int64), [len(f) for _r, f in parts]))
        out[name] = conform(name, frame, rank=True)
    return out


#: Row order within a rank's table (what :func:`reduce_rank` produces; restored for a mapping read elsewhere)
_ORDER: dict[str, list[str]] = {"rank_info": [], "steps": ["start_ns"], "collectives": ["seq"],
                                "compute": ["until_last_step", "start_ns"], "idle": ["device", "stream", "start_ns"],
                                "kernels": [], "operators": [], "memory": ["device_type", "device"]}


def job_reductions(source: Any, tables: Sequence[str]) -> JobReductions:
    """The job's reduction tables from either form the cross-rank analyses accept.

    Parameters
    ----------
    source : Trace, iterable of Trace, or mapping of table name to frame
        Traces (one per rank: each is reduced with :func:`reduce_rank`, its rank ``meta.rank``; ranks stay in
        the given order) or the already concatenated reductions (:func:`concat_reductions`, a DuckDB or
        Parquet read of a dataset: any row order and integer widths; they are cast to
        :data:`REDUCTION_SCHEMA` and put in rank order, each rank's rows in :func:`reduce_rank`'s order).
    tables : sequence of str
        The tables needed.

    Returns
    -------
    JobReductions
        ``tables`` -> frame with ``rank`` and the schema's columns.

    Raises
    ------
    KeyError
        A needed table (or one of its columns) is missing from a given mapping.

    Warns
    -----
    NbprofWarning
        Several traces of the same rank: the first of each rank is used (a rank's collectives are matched once).
    """
    if isinstance(source, Mapping):
        missing = [t for t in tables if t not in source]
        if missing:
            msg = f"reductions lack tables {missing} (have {sorted(source)})"
            raise KeyError(msg)
        out = JobReductions()
        if isinstance(source, (JobReductions, LazyJobReductions)):
            out.update((t, source[t]) for t in tables)
            return out
        for t in tables:
            out[t] = _prepare(t, source[t])
        return out
    traces = [source] if isinstance(source, Trace) else list(source)
    ranks = [int(t.meta.rank) for t in traces]
    if len(set(ranks)) != len(ranks):
        dup = sorted({r for r in ranks if ranks.count(r) > 1})
        warnings.warn(f"several traces of rank {dup}: the first trace of each rank is used", NbprofWarning,
                      stacklevel=3)
        first: dict[int, Trace] = {}
        for tr, r in zip(traces, ranks):
            first.setdefault(r, tr)
        traces = list(first.values())
    return concat_reductions(((int(t.meta.rank), reduce_rank(t, tables)) for t in traces), tables)


def _in_order(frame: pd.DataFrame, keys: Sequence[str]) -> bool:
    """Whether ``frame``'s rows are already sorted by ``keys`` (ascending, numeric or bool columns): one O(n)
    pass instead of a sort."""
    if len(frame) < 2:
        return True
    undecided = np.ones(len(frame) - 1, dtype=bool)
    for k in keys:
        a = frame[k].to_numpy()
        if a.dtype == bool:
            a = a.astype(np.int8)
        lt, gt = a[1:] < a[:-1], a[1:] > a[:-1]
        if (undecided & lt).any():
            return False
        undecided &= ~gt
    return True


def _prepare(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """A job table (``rank`` and the schema's columns, any order of rows and columns, any integer widths) in
    the form the analyses use: cast by :func:`conform` with ``rank``, sorted by ``rank`` then
    :func:`reduce_rank`'s row order (stable: rows tied on those keys keep their order). A frame already in
    that form is returned as it is (no copy).

    Raises
    ------
    KeyError
        Unknown table, or a column missing (:func:`conform`).
    """
    cols = {"rank": "int64", **REDUCTION_SCHEMA[table]}
    ready = (list(frame.columns) == list(cols) and all(str(frame[c].dtype) == d for c, d in cols.items())
             and isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0 and frame.index.step == 1
             and not any(x is not None for c, d in cols.items() if d == "object"  # missing strings: None
                         for x in frame[c][frame[c].isna()]))
    f = frame if ready else conform(table, frame, rank=True)
    keys = ["rank", *_ORDER[table]]
    if _in_order(f, keys):
        return f
    return f.sort_values(keys, kind="stable").reset_index(drop=True)


def ranks_of(info: pd.DataFrame) -> list[int]:
    """The ranks of a job's ``rank_info`` table, in its order."""
    return [int(r) for r in info["rank"]]


def rank_arrays(frame: pd.DataFrame, columns: Sequence[str]) -> dict[int, dict[str, np.ndarray]]:
    """A job table's ``columns`` as numpy arrays per rank (one sort, no per-rank scan): rank -> column -> array,
    each rank's rows in their order. Ranks without rows are absent."""
    if frame.empty:
        return {}
    return _split(frame["rank"].to_numpy(np.int64), {c: frame[c].to_numpy() for c in columns})


def _split(r: np.ndarray, cols: dict[str, np.ndarray]) -> dict[int, dict[str, np.ndarray]]:
    """:func:`rank_arrays` of the arrays ``cols`` with ranks ``r``."""
    if not len(r):
        return {}
    if not (r[1:] >= r[:-1]).all():  # a job table is in rank order (_prepare): then no sort, views of the columns
        order = np.argsort(r, kind="stable")
        r = r[order]
        cols = {c: a[order] for c, a in cols.items()}
    starts = np.concatenate([[0], np.flatnonzero(r[1:] != r[:-1]) + 1])
    ends = np.append(starts[1:], len(r))
    return {int(r[s]): {c: a[s:e] for c, a in cols.items()} for s, e in zip(starts, ends)}


def normalised(starts: np.ndarray, ends: np.ndarray) -> iv.Intervals:
    """``_intervals.merge(starts, ends)`` of int64 ns intervals, without its sort when they already are a
    normalised set (sorted, disjoint, not touching, none empty: a ``compute`` table's rows) -- the same
    arrays either way."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if s.size and (e > s).all() and (s[1:] > e[:-1]).all():
        return s, e
    return iv.merge(s, e)


def intersect(a: iv.Intervals, b: iv.Intervals) -> iv.Intervals:
    """``_intervals.intersect`` of two normalised sets by binary search instead of a sweep over every end
    point: for each interval of ``a``, the intervals of ``b`` it meets, clipped to it (O((|a| + pieces) log
    |b|), no sort). The pieces are already normalised (``a``'s and ``b``'s intervals neither overlap nor
    touch, so neither do their clipped pairs), in order: the same arrays as ``_intervals.intersect``."""
    (as_, ae), (bs, be) = a, b
    if as_.size == 0 or bs.size == 0:
        return iv.empty()
    lo = np.searchsorted(be, as_, side="right")  # first b ending after a's start
    hi = np.searchsorted(bs, ae, side="left")  # first b starting at or after a's end
    n = np.clip(hi - lo, 0, None)
    tot = int(n.sum())
    if tot == 0:
        return iv.empty()
    ia = np.repeat(np.arange(as_.size), n)
    ib = np.arange(tot) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
    return np.maximum(as_[ia], bs[ib]), np.minimum(ae[ia], be[ib])


def comm_compute(red: Mapping[str, pd.DataFrame], *, until_last_step: bool = False
                 ) -> dict[int, tuple[iv.Intervals, iv.Intervals]]:
    """Per rank of ``red["rank_info"]``: (communication, computation) as normalised interval sets, int64 ns on
    the rank's trace clock -- the union of its collectives' execution (``collectives`` ``ts_ns`` to ``ts_ns +
    dur_ns``) and its ``compute`` intervals. ``until_last_step``: HTA's default window (collectives launched
    before the last ProfilerStep and the matching ``compute`` rows) for ranks with two ProfilerSteps or more."""
    info = red["rank_info"]
    c = rank_arrays(red["collectives"], ("ts_ns", "dur_ns", "before_last_step"))
    # each rank's compute rows of its window (until_last_step == hta), selected once for all ranks
    cp = red["compute"]
    u = cp["until_last_step"].to_numpy(bool)
    rr = cp["rank"].to_numpy(np.int64)
    hta = info.loc[info["last_profiler_step_ns"] >= 0, "rank"] if until_last_step else info["rank"].iloc[:0]
    sel = np.where(np.isin(rr, hta.to_numpy(np.int64)), u, ~u)
    p = _split(rr[sel], {"start_ns": cp["start_ns"].to_numpy(np.int64)[sel],
                         "end_ns": cp["end_ns"].to_numpy(np.int64)[sel]})
    none: dict[str, np.ndarray] = {}
    out = {}
    for r, last in zip(info["rank"].to_numpy(np.int64), info["last_profiler_step_ns"].to_numpy(np.int64)):
        hta = until_last_step and last >= 0
        cr, pr = c.get(int(r), none), p.get(int(r), none)
        if cr:
            keep = cr["before_last_step"].astype(bool) if hta else slice(None)
            comm = iv.merge(cr["ts_ns"][keep], (cr["ts_ns"] + cr["dur_ns"])[keep])
        else:
            comm = iv.empty()
        comp = normalised(pr["start_ns"], pr["end_ns"]) if pr else iv.empty()
        out[int(r)] = (comm, comp)
    return out


def by_rank(frame: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """A job table split per rank (one pass, not one scan per rank): rank -> its rows, in their order."""
    return {int(r): g for r, g in frame.groupby("rank", sort=False)} if len(frame) else {}


def analysis_collectives(frame: pd.DataFrame) -> pd.DataFrame:
    """A job ``collectives`` table in the form :func:`~nbprof.analysis.distributed.collectives` returns:
    ``msg_bytes`` as float64 bytes (NaN unknown), without the ``before_last_step`` flag."""
    return frame.drop(columns="before_last_step").astype({"msg_bytes": "float64"})
