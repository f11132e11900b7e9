"""Kernel summary: per kernel name (or stream, or device) instance counts and duration statistics.

The statistics are those of HTA's kernel breakdown and torch-tb-profiler's Kernel view
(count, total, mean, median, min, max, standard deviation of the duration, share of GPU
time), computed over the trace's ``kernel`` rows (``cat == "kernel"``; memcpy/memset on
request).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace import schema
from ..trace.model import Trace
from ._memo import per_trace

__all__ = ["kernel_summary"]

_BY = {"name": ["name"], "stream": ["device", "stream"], "device": ["device"]}
_STAT_COLUMNS = ["instances", "total_ns", "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns", "gpu_time_ratio"]


@per_trace
def kernel_summary(
    trace: Trace, *, by: str = "name", categories: tuple[str, ...] = (schema.KERNEL,)
) -> pd.DataFrame:
    """Duration statistics of device kernels grouped by name, stream or device.

    Parameters
    ----------
    trace : Trace
    by : {"name", "stream", "device"}, default "name"
        Key of the rows: the kernel ``name``; (``device``, ``stream``); or ``device``.
    categories : tuple of str, default ("kernel",)
        Device categories to include; add ``"gpu_memcpy"``, ``"gpu_memset"`` to count copies.

    Returns
    -------
    pandas.DataFrame
        Key column(s) then ``instances`` (int64), ``total_ns``, ``min_ns``, ``max_ns``
        (int64 ns), ``avg_ns``, ``med_ns``, ``std_ns`` (float64 ns; ``std_ns`` is the sample
        standard deviation, ddof=1, 0 for a single instance), ``gpu_time_ratio`` (the row's
        ``total_ns`` over the summed duration of all included device events, 0..1; overlap of
        concurrent kernels is not removed, as in HTA's kernel breakdown). Sorted by
        ``total_ns`` descending. Empty (with these columns) when the trace holds no kernels.

    Raises
    ------
    ValueError
        For an unknown ``by``.
    """
    if by not in _BY:
        msg = f"by must be one of {sorted(_BY)}, not {by!r}"
        raise ValueError(msg)
    keys = _BY[by]
    ev = trace.events
    k = ev[pred.category_in(ev, categories) & pred.is_device(ev)]
    if k.empty:
        out = pd.DataFrame({c: pd.Series(dtype=object if c == "name" else "int64") for c in keys})
        for c in _STAT_COLUMNS:
            out[c] = pd.Series(dtype="int64" if c in ("instances", "total_ns", "min_ns", "max_ns") else "float64")
        return out
    frame = pd.DataFrame({c: (k[c].astype(object) if c == "name" else k[c]) for c in keys})
    frame["dur"] = k["dur_ns"].to_numpy()
    g = frame.groupby(keys, sort=False, observed=True)["dur"]
    out = g.agg(
        instances="count", total_ns="sum", avg_ns="mean", med_ns="median", min_ns="min", max_ns="max", std_ns="std"
    ).reset_index()
    out["std_ns"] = out["std_ns"].fillna(0.0)
    total = float(frame["dur"].sum())
    out["gpu_time_ratio"] = out["total_ns"] / total if total > 0 else 0.0
    for c in ("instances", "total_ns", "min_ns", "max_ns"):
        out[c] = out[c].astype(np.int64)
    out["avg_ns"] = out["avg_ns"].astype(np.float64)
    out["med_ns"] = out["med_ns"].astype(np.float64)
    out = out.sort_values(["total_ns", *keys], ascending=[False] + [True] * len(keys), kind="stable")
    return out.reset_index(drop=True)[[*keys, *_STAT_COLUMNS]]
