"""Operator-table keys and the sum of per-cycle operator summaries.

``resolve_sort_key`` reads torch's ``key_averages().table(sort_by=...)`` keys as ``operator_summary``
columns; ``GROUP_BY`` lists the ``group_by`` values; ``summed_operator_summary`` sums the
``operator_summary`` of several profiling cycles (a list of traces) into one frame (same columns, same
units: ns, bytes, FLOPs). The sum of already-computed frames is a private helper: the public
DataFrame functions of ``nbprof.analysis`` take a trace (or traces, findings, a snapshot).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..trace.model import Trace
from .operators import SORT_KEYS, SUMMARY_COLUMNS

__all__ = ["GROUP_BY", "resolve_sort_key", "sum_columns", "group_keys", "summed_operator_summary"]

#: ``group_by`` values of ``operator_summary``.
GROUP_BY = ("name", "shapes", "stack")


def sum_columns() -> list[str]:
    """The ``operator_summary`` columns summed across cycles with a plain sum (all but ``flops``)."""
    return [c for c in SUMMARY_COLUMNS if c != "flops"]  # flops: summed with min_count (NaN = not recorded)


def group_keys(group_by: str) -> list[str]:
    """The key columns of an ``operator_summary(group_by=...)`` frame."""
    return ["name"] + (["input_dims"] if group_by == "shapes" else ["stack"] if group_by == "stack" else [])


def resolve_sort_key(key: str) -> str:
    """The ``operator_summary`` column that torch's ``sort_by`` key means.

    Parameters
    ----------
    key : str
        A ``key_averages().table(sort_by=...)`` key (``cpu_time_total``, ``self_cpu_time_total``,
        ``cuda_time_total`` and ``self_cuda_time_total`` - read as device time, as torch does -,
        ``device_time_total``, ``cpu_memory_usage``, ``count``, ``flops``...; the list is
        ``nbprof.analysis.operators.SORT_KEYS``) or an ``operator_summary`` column name.

    Returns
    -------
    str
        Column name, e.g. ``"self_device_ns"`` for ``"self_cuda_time_total"``.

    Raises
    ------
    ValueError
        For an unknown key; the message lists the known ones.
    """
    k = str(key).strip()
    if k in SORT_KEYS:
        return SORT_KEYS[k]
    if k.lower() in SORT_KEYS:
        return SORT_KEYS[k.lower()]
    columns = set(SORT_KEYS.values()) | set(sum_columns()) | {"flops"}
    if k in columns:
        return k
    msg = f"unknown sort key {key!r}: expected one of {', '.join(SORT_KEYS)}"
    raise ValueError(msg)


def _combine_summaries(frames: list[pd.DataFrame], keys: list[str]) -> pd.DataFrame:
    """Sum per-cycle ``operator_summary`` frames into one (counts, times and bytes add; flops add).

    Returns the ``operator_summary`` columns (``keys``, ``cat``, the summed columns, ``avg_host_ns``,
    ``avg_device_ns``) as a DataFrame sorted by ``total_host_ns`` descending; one frame is returned as it is.
    """
    if len(frames) == 1:
        return frames[0]
    df = pd.concat(frames, ignore_index=True)
    for k in keys:
        df[k] = df[k].astype(object)
    agg: dict[str, Any] = {c: "sum" for c in sum_columns() if c in df.columns}
    if "flops" in df.columns:
        agg["flops"] = lambda s: s.sum(min_count=1)
    if "cat" in df.columns:
        agg["cat"] = "first"
    out = df.groupby(keys, sort=False, dropna=False).agg(agg).reset_index()
    cnt = out["count"].where(out["count"] > 0)
    out["avg_host_ns"] = out["total_host_ns"] / cnt
    out["avg_device_ns"] = out["total_device_ns"] / cnt
    return out.sort_values("total_host_ns", ascending=False, kind="stable").reset_index(drop=True)


def summed_operator_summary(traces: list[Trace], group_by: str = "name", stack_depth: int = 5) -> pd.DataFrame:
    """``operator_summary`` of each trace (one per profiling cycle), summed into one frame.

    Parameters
    ----------
    traces : list of Trace
    group_by : {"name", "shapes", "stack"}
    stack_depth : int, default 5

    Returns
    -------
    pandas.DataFrame
        ``name`` (plus ``input_dims`` for ``shapes`` / ``stack`` for ``stack``), ``cat``, ``count``,
        ``self_host_ns``, ``total_host_ns``, ``self_device_ns``, ``total_device_ns``, ``host_mem_bytes``,
        ``self_host_mem_bytes``, ``device_mem_bytes``, ``self_device_mem_bytes``, ``flops``,
        ``avg_host_ns``, ``avg_device_ns``; sorted by ``total_host_ns`` descending. Empty (those columns)
        for no traces.
    """
    from .operators import operator_summary

    if not traces:
        return pd.DataFrame(columns=["name", *sum_columns(), "flops", "avg_host_ns", "avg_device_ns"])
    frames = [operator_summary(t, group_by=group_by, stack_depth=stack_depth) for t in traces]
    return _combine_summaries(frames, group_keys(group_by))
