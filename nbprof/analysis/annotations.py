"""Annotation ranges: the device ops in each GPU-side range, and the time per range name.

Device ops attributed to the GPU-side ``record_function`` ranges (``gpu_user_annotation``) around them.

Kineto writes every ``record_function`` range that launched device work a second time on the device, as a
``gpu_user_annotation`` row on the stream of that work, from its first device op's start to its last one's
end. A device op belongs to the innermost such range on its device and stream that overlaps it: the
shortest one, as HTA's ``get_gpu_kernels_with_user_annotations`` picks the leaf of the stack
(``hta/analyzers/breakdown_analysis.py``, 0.5.0: ranges as ``[start, end)`` intervals, assigned longest
first so the shortest overlapping one wins).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import schema
from ..trace.model import Trace
from .nsys_stats import _summary
from .utilization import _before_last_step, device_ops

__all__ = ["device_op_annotations", "annotation_breakdown"]


def device_op_annotations(trace: Trace, *, until_last_step: bool = False) -> pd.DataFrame:
    """Each device op with the innermost GPU annotation range overlapping it on its device and stream.

    Parameters
    ----------
    trace : nbprof.Trace
    until_last_step : bool, default False
        Only device ops launched before the last step (HTA's default window, see
        :func:`nbprof.analysis.utilization.device_ops`).

    Returns
    -------
    pandas.DataFrame
        :func:`~nbprof.analysis.utilization.device_ops`' rows and columns (``device``, ``stream``, ``ts_ns``,
        ``dur_ns``, ``end_ns`` in ns, ``cat``, ``name``, ``correlation``, ``kind``, ``runtime_ts_ns``,
        ``runtime_end_ns``, ``runtime_name``) plus ``annotation`` (the range's name; None where no range
        overlaps the op) and ``annotation_ts_ns`` (its start, ns; -1 where none). Empty (with these
        columns) without device ops.

    Notes
    -----
    Overlap, not containment: ranges are ``[start, end)`` and an op overlapping two ranges of the same
    length gets the one that starts later. Checked against HTA 0.5.0's ``tests/test_trace_analysis.py``
    ``test_get_gpu_kernels_with_user_annotations`` in ``tests/peers/test_peer_hta_analyses.py``.
    """
    d = device_ops(trace, until_last_step=until_last_step).reset_index(drop=True)
    name = np.full(len(d), None, dtype=object)
    start = np.full(len(d), -1, dtype=np.int64)
    ev = trace.events
    a = ev[ev["cat"].astype(str) == schema.GPU_USER_ANNOTATION]
    if len(d) and len(a):
        a_ts = a["ts_ns"].to_numpy(np.int64)
        a_end = a_ts + a["dur_ns"].to_numpy(np.int64)
        a_name = a["name"].astype(object).to_numpy()
        a_key = list(zip(a["device"].to_numpy(), a["stream"].to_numpy(), strict=True))
        longest_first = np.lexsort((a_ts, -(a_end - a_ts)))
        groups = d.groupby(["device", "stream"], sort=False).indices
        for i in longest_first:
            rows = groups.get(a_key[i])
            if rows is None:
                continue
            hit = rows[(d["ts_ns"].to_numpy()[rows] < a_end[i]) & (d["end_ns"].to_numpy()[rows] > a_ts[i])]
            name[hit] = a_name[i]
            start[hit] = a_ts[i]
    d["annotation"] = name
    d["annotation_ts_ns"] = start
    return d


def annotation_breakdown(trace: Trace, *, device: bool = True, until_last_step: bool = False, top: int = 1000,
                         duration_ratio: float = 0.8, keep: tuple[str, ...] = ()) -> pd.DataFrame:
    """Time per annotation name: the GPU-side ranges (``gpu_user_annotation``) or the host ones
    (``user_annotation``: ``record_function`` ranges and ``ProfilerStep#N``), each name's total, count and
    duration statistics, the smaller names grouped as ``"others"``.

    Parameters
    ----------
    trace : nbprof.Trace
    device : bool, default True
        The GPU-side ranges (HTA ``use_gpu_annotation=True``); False: the host ones.
    until_last_step : bool, default False
        Only ranges that start before the last ``ProfilerStep`` starts (HTA's default window; the GPU-side
        ranges by their device start, as HTA cuts them, see :func:`device_op_annotations`).
    top : int, default 1000
        Most names kept (HTA ``num_kernels``); with more names than this, the rest is ``"others"``.
    duration_ratio : float, default 0.8
        With more names than ``top``, names (by total, descending) whose running total is past this quantile
        of the running totals also go to ``"others"`` (HTA's rule, ``_aggr_gpu_kernel_time``).
    keep : tuple of str
        Names containing any of these substrings are never grouped (HTA ``allowlist_patterns``).

    Returns
    -------
    pandas.DataFrame
        :func:`nbprof.analysis.nsys_stats.nvtx_sum`'s summary shape, one row per name: ``time_ratio``,
        ``total_ns``, ``instances``, ``avg_ns``, ``med_ns``, ``min_ns``, ``max_ns``, ``std_ns`` (sample,
        0 for one instance), ``name``; sorted by ``total_ns`` descending. Empty (these columns) without ranges.

    Notes
    -----
    Source: HTA 0.5.0 ``hta/analyzers/breakdown_analysis.py`` ``get_gpu_user_annotation_breakdown``. One
    deliberate difference: HTA's ``"others"`` row takes max/min/mean/std over the grouped *names' sums*;
    here every row's statistics are over its ranges (the totals are equal).
    """
    ev = trace.events
    a = ev[ev["cat"].astype(str) == (schema.GPU_USER_ANNOTATION if device else schema.USER_ANNOTATION)]
    if until_last_step:
        last, _keep = _before_last_step(trace)
        if last is not None:
            a = a[a["ts_ns"] < last]
    df = pd.DataFrame({"name": a["name"].astype(object).to_numpy(), "dur_ns": a["dur_ns"].to_numpy(np.int64)})
    s = _summary(df, ["name"], "dur_ns")
    if len(s) > top:
        kept = s["name"].map(lambda n: any(k in str(n) for k in keep)).to_numpy(bool)
        cum = s["total_ns"].cumsum()
        other = ~kept & ((cum > cum.quantile(duration_ratio)).to_numpy() | (np.arange(len(s)) >= top))
        df["name"] = df["name"].map(dict(zip(s["name"], np.where(other, "others", s["name"]), strict=True)))
        s = _summary(df, ["name"], "dur_ns")
    return s
