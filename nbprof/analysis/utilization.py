"""GPU utilisation, idle time and its causes, and the temporal breakdown of device time.

Device ops are the rows with category ``kernel``, ``gpu_memcpy`` or ``gpu_memset`` (``gpu_user_annotation``
ranges and ``cuda_sync`` markers are not work). Busy time is the *union* of device-op intervals, so
ops that overlap (concurrent streams, or overlaps the loader flagged as ``overlapping_device_ops``)
are never counted twice.

Definitions follow Holistic Trace Analysis (HTA, ``hta/analyzers/breakdown_analysis.py``):
the span of a device is first device-op start to last device-op end; idle = span - busy; an idle
gap on a stream is *host wait* when the runtime call that launched the next op started after the
previous op ended (the CPU was not enqueuing fast enough), *kernel wait* when it is not host wait
and the gap is shorter than ``consecutive_kernel_delay_ns`` (launch overhead between back-to-back
ops), *other* otherwise. The tests cross-check these numbers against HTA on the same traces.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.ids import present as id_present
from ..trace.model import Trace
from . import _intervals as iv
from ._memo import per_trace

DEVICE_OP_CATEGORIES = pred.DEVICE_OP_CATEGORIES

#: HTA's default threshold (``consecutive_kernel_delay=30``, applied by HTA to µs timestamps).
DEFAULT_KERNEL_WAIT_NS = 30_000


@per_trace
def _before_last_step(trace: Trace) -> tuple[int | None, set[int] | None]:
    """HTA's default window: (last ProfilerStep start, correlations launched before it).

    HTA (``hta/common/trace.py`` ``_filter_irrelevant_gpu_kernels``, ``include_last_profiler_step=False``)
    keeps GPU kernels whose launching host event starts before the last ``ProfilerStep``; with fewer
    than two steps it keeps everything.
    """
    ev = trace.events
    st = ev[pred.is_step_row(ev)]
    if len(st) < 2:
        return None, None
    last = int(st["ts_ns"].max())
    host = ev[(ev["device"] < 0) & id_present(ev["correlation"]) & (ev["ts_ns"] < last)]
    return last, set(host["correlation"].tolist())


def device_ops(trace: Trace, *, until_last_step: bool = False) -> pd.DataFrame:
    """Device ops with their launching runtime call.

    ``until_last_step=True`` keeps only the device ops launched before the last ``ProfilerStep`` starts
    (HTA's default, ``TraceAnalysis(include_last_profiler_step=False)``; no effect with fewer than two
    steps): the utilisation, idle and temporal breakdowns below take it too, so that HTA's default
    numbers are reproduced without a non-default HTA option.

    Returns
    -------
    pandas.DataFrame
        ``device, stream, ts_ns, end_ns, dur_ns, cat, name, correlation, kind`` (``kind`` is
        ``"compute"``, ``"communication"`` or ``"memory"``: memcpy, memset and MTIA ``dma*`` ops), ``runtime_ts_ns``/``runtime_end_ns``/
        ``runtime_name`` of the runtime call with the same correlation id (``-1``/NaN when none).
        Sorted by device, stream, ts_ns.
    """
    ev = trace.events
    mask = pred.is_device_op(ev)
    d = ev.loc[mask, ["device", "stream", "ts_ns", "dur_ns", "cat", "name", "correlation"]].copy()
    d["cat"] = d["cat"].astype(object)
    d["name"] = d["name"].astype(object)
    d["device"] = d["device"].astype(np.int64)
    d["end_ns"] = d["ts_ns"] + d["dur_ns"]
    is_kernel = pred.is_kernel(ev)[mask]
    is_comm = is_kernel & pred.is_communication(ev, where="device")[mask]
    # (MTIA's ``dma*`` transfers are memory copies from the load on: the Kineto loader files them as gpu_memcpy)
    d["kind"] = np.where(~is_kernel, "memory", np.where(is_comm, "communication", "compute"))
    rt_mask = pred.is_runtime(ev) & id_present(ev["correlation"].to_numpy())
    rt = ev.loc[rt_mask, ["correlation", "ts_ns", "dur_ns", "name"]]
    rt = rt.drop_duplicates("correlation", keep="last")
    rt = pd.DataFrame({
        "correlation": rt["correlation"].to_numpy(),
        "runtime_ts_ns": rt["ts_ns"].to_numpy(),
        "runtime_end_ns": (rt["ts_ns"] + rt["dur_ns"]).to_numpy(),
        "runtime_name": rt["name"].astype(object).to_numpy(),
    })
    d = d.merge(rt, on="correlation", how="left")
    has = d["runtime_ts_ns"].notna() & id_present(d["correlation"])
    for c in ("runtime_ts_ns", "runtime_end_ns"):
        d[c] = np.where(has, d[c].fillna(-1), -1).astype(np.int64)
    d.loc[~has, "runtime_name"] = np.nan
    if until_last_step:
        _last, keep = _before_last_step(trace)
        if keep is not None:
            d = d[d["correlation"].isin(keep)]
    return d.sort_values(["device", "stream", "ts_ns"], kind="stable").reset_index(drop=True)


def _util_rows(groups: Iterable[tuple[Any, pd.DataFrame]]) -> list[dict[str, Any]]:
    rows = []
    for key, g in groups:
        s = g["ts_ns"].to_numpy(np.int64)
        e = g["end_ns"].to_numpy(np.int64)
        first, last = int(s.min()), int(e.max())
        busy = iv.union_ns(s, e)
        span = last - first
        rows.append({**key, "first_ns": first, "last_ns": last, "span_ns": span, "busy_ns": busy,
                     "idle_ns": span - busy, "utilization_ratio": busy / span if span > 0 else np.nan,
                     "ops": int(len(g))})
    return rows


@per_trace
def gpu_utilization(trace: Trace, *, by: str = "device", until_last_step: bool = False) -> pd.DataFrame:
    """Busy and idle time per device (or per device and stream).

    Parameters
    ----------
    trace : nbprof.Trace
    by : {"device", "stream"}
    until_last_step : bool, default False
        Only device ops launched before the last step (HTA's default window, see :func:`device_ops`).

    Returns
    -------
    pandas.DataFrame
        ``device`` (+ ``stream`` when ``by="stream"``), ``span_ns`` (first device-op start to last
        device-op end on that device/stream), ``busy_ns`` (union of device-op intervals),
        ``idle_ns`` (= span - busy), ``utilization_ratio`` (busy / span), ``first_ns``, ``last_ns``,
        ``ops`` (count). Empty for a trace without device ops.

    Raises
    ------
    ValueError
        For an unknown ``by``.

    Notes
    -----
    HTA's temporal breakdown uses the same span and idle definition (``idle_time``/``kernel_time``).
    """
    if by not in ("device", "stream"):
        raise ValueError(f"by must be 'device' or 'stream', not {by!r}")
    d = device_ops(trace, until_last_step=until_last_step)
    keys = ["device"] if by == "device" else ["device", "stream"]
    cols = keys + ["span_ns", "busy_ns", "idle_ns", "utilization_ratio", "first_ns", "last_ns", "ops"]
    if d.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c == "utilization_ratio" else "int64") for c in cols})
    rows = _util_rows(((dict(zip(keys, k if isinstance(k, tuple) else (k,))), g)
                       for k, g in d.groupby(keys, sort=True)))
    return pd.DataFrame(rows)[cols]


@per_trace
def idle_breakdown(trace: Trace, *, consecutive_kernel_delay_ns: int = DEFAULT_KERNEL_WAIT_NS,
                   until_last_step: bool = False) -> pd.DataFrame:
    """Idle time per device and stream, split into host wait, kernel wait and other (HTA's definition).

    Parameters
    ----------
    trace : nbprof.Trace
    consecutive_kernel_delay_ns : int, default 30 000
        Gaps shorter than this that are not host wait are *kernel wait* (HTA's
        ``consecutive_kernel_delay``, 30, which HTA applies to µs timestamps).
    until_last_step : bool, default False
        Only device ops launched before the last step (HTA's default window, see :func:`device_ops`).

    Returns
    -------
    pandas.DataFrame
        ``device, stream, idle_ns, host_wait_ns, kernel_wait_ns, other_ns`` (int64 ns; the three
        parts sum to ``idle_ns``), ``host_wait_ratio`` (host_wait / idle), ``gaps`` (number of idle
        gaps). ``idle_ns`` equals ``gpu_utilization(trace, by="stream").idle_ns``.

    Notes
    -----
    HTA ``BreakdownAnalysis._analyze_idle_time_for_stream``: each op's gap is its start minus the
    previous op's end on the stream. nbprof takes the latest end of *all* earlier ops on the stream,
    so overlapping ops (which HTA would give negative gaps) never create or cancel idle time.
    """
    d = device_ops(trace, until_last_step=until_last_step)
    cols = ["device", "stream", "idle_ns", "host_wait_ns", "kernel_wait_ns", "other_ns", "host_wait_ratio", "gaps"]
    if d.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c.endswith("ratio") else "int64") for c in cols})
    rows = []
    for (dev, stream), g in d.groupby(["device", "stream"], sort=True):
        s = g["ts_ns"].to_numpy(np.int64)
        e = g["end_ns"].to_numpy(np.int64)
        rts = g["runtime_ts_ns"].to_numpy(np.int64)
        prev_end = np.maximum.accumulate(e)[:-1]
        gap = np.clip(s[1:] - prev_end, 0, None)
        has_rt = rts[1:] >= 0
        host = has_rt & (rts[1:] > prev_end)
        kwait = ~host & (gap < consecutive_kernel_delay_ns)
        other = ~host & ~kwait
        idle = int(gap.sum())
        hw = int(gap[host].sum())
        rows.append({"device": int(dev), "stream": int(stream), "idle_ns": idle, "host_wait_ns": hw,
                     "kernel_wait_ns": int(gap[kwait].sum()), "other_ns": int(gap[other].sum()),
                     "host_wait_ratio": hw / idle if idle > 0 else np.nan, "gaps": int((gap > 0).sum())})
    return pd.DataFrame(rows)[cols]


def temporal_breakdown(trace: Trace, *, until_last_step: bool = False) -> pd.DataFrame:
    """Device time split into compute, communication, memory and idle (``until_last_step``: HTA's default
    window, see :func:`device_ops`).

    Returns
    -------
    pandas.DataFrame
        Per ``device``: ``compute_ns`` (union of compute kernels), ``communication_ns`` (union of
        communication kernels — names ``nccl*``/``rccl*`` or with a ``collective`` — minus compute),
        ``memory_ns`` (union of memcpy/memset minus the two before), ``idle_ns`` (span minus the
        union of all), ``span_ns`` (first to last device op); the four parts sum to ``span_ns``.
        Ratios of the span: ``compute_ratio``, ``communication_ratio``, ``memory_ratio``, ``idle_ratio``.
        Empty without device ops.

    Notes
    -----
    HTA ``get_temporal_breakdown``: ``compute_ns`` = HTA compute time, ``idle_ns`` = HTA idle time,
    ``communication_ns + memory_ns`` = HTA non-compute time (HTA classifies memcpy/memset by name
    prefix ``Memcpy``/``Memset``, nbprof by category).
    """
    d = device_ops(trace, until_last_step=until_last_step)
    parts = ["compute_ns", "communication_ns", "memory_ns", "idle_ns"]
    cols = ["device", *parts, "span_ns"] + [p[:-3] + "_ratio" for p in parts]
    if d.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c.endswith("ratio") else "int64") for c in cols})
    rows = []
    for dev, g in d.groupby("device", sort=True):
        def u(kind: str, g: pd.DataFrame = g) -> iv.Intervals:
            x = g[g["kind"] == kind]
            return iv.merge(x["ts_ns"].to_numpy(np.int64), x["end_ns"].to_numpy(np.int64))
        comp = u("compute")
        comm = iv.subtract(u("communication"), comp)
        mem = iv.subtract(iv.subtract(u("memory"), comp), comm)
        span = int(g["end_ns"].max() - g["ts_ns"].min())
        busy = iv.total_ns(comp) + iv.total_ns(comm) + iv.total_ns(mem)
        row: dict[str, Any] = {"device": int(dev), "compute_ns": iv.total_ns(comp), "communication_ns": iv.total_ns(comm),
               "memory_ns": iv.total_ns(mem), "idle_ns": span - busy, "span_ns": span}
        for p in parts:
            row[p[:-3] + "_ratio"] = row[p] / span if span > 0 else np.nan
        rows.append(row)
    return pd.DataFrame(rows)[cols]


def _bucket_ns(span_ns: int) -> int:
    """torch-tb-profiler's bucket: the smallest power of 10 µs that cuts the span into at most 100 buckets."""
    size = 1_000
    while span_ns / size > 100:
        size *= 10
    return size


def utilization_timeline(trace: Trace, *, bucket_ns: int | None = None) -> pd.DataFrame:
    """GPU utilisation over time: the fraction of each time bucket a kernel was running, per device.

    Parameters
    ----------
    trace : nbprof.Trace
    bucket_ns : int, optional
        Bucket length in ns. Default: torch-tb-profiler 0.4.3's (``gpu_metrics_parser.py``
        ``calculate_gpu_utilization.get_bucket_info``): the smallest power of 10 µs giving at most 100
        buckets over the trace.

    Returns
    -------
    pandas.DataFrame
        Per ``device`` that ran a kernel, one row per bucket from the trace's first event to its last
        event's end: ``ts_ns``, ``end_ns`` (ns from the trace origin; the last bucket runs to the trace's
        end, so it may be longer, as in the plugin), ``busy_ns`` (union of the device's kernels inside the
        bucket) and ``utilization_ratio`` (busy / bucket length, 0..1). Empty without kernels.

    Raises
    ------
    ValueError
        For a ``bucket_ns`` that is not positive.
    """
    cols = ["device", "ts_ns", "end_ns", "busy_ns", "utilization_ratio"]
    if bucket_ns is not None and bucket_ns <= 0:
        msg = f"bucket_ns must be positive, not {bucket_ns}"
        raise ValueError(msg)
    ev = trace.events
    k = ev[pred.is_kernel(ev)]
    if k.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c.endswith("ratio") else "int64") for c in cols})
    t0 = int(ev["ts_ns"].min())
    t1 = int((ev["ts_ns"] + ev["dur_ns"]).max())
    size = bucket_ns or _bucket_ns(t1 - t0)
    n = max(1, (t1 - t0) // size)
    starts = t0 + size * np.arange(n, dtype=np.int64)
    ends = np.append(starts[1:], t1)
    frames = []
    for dev, g in k.groupby("device", sort=True):
        s = g["ts_ns"].to_numpy(np.int64)
        busy = iv.overlap_with_windows(iv.merge(s, s + g["dur_ns"].to_numpy(np.int64)), starts, ends)
        frames.append(pd.DataFrame({"device": int(dev), "ts_ns": starts, "end_ns": ends, "busy_ns": busy,
                                    "utilization_ratio": busy / (ends - starts)}))
    return pd.concat(frames, ignore_index=True)[cols]
