"""Compare two traces ("before" ``a`` and "after" ``b`` a change): what got faster, slower, new or gone.

Every delta is ``b - a`` (negative = the change saved time); ratios are ``b / a``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..trace.model import Trace
from .kernels import kernel_summary
from .operators import operator_summary
from .steps import BREAKDOWN_COLUMNS, breakdown_average, steady_breakdown, steady_state, step_times

__all__ = ["Comparison", "compare", "step_waterfall", "WATERFALL_COLUMNS"]

_OP_METRICS = ["count", "self_host_ns", "total_host_ns", "self_device_ns", "total_device_ns"]
_KERNEL_METRICS = ["instances", "total_ns", "avg_ns"]


@dataclass
class Comparison:
    """Deltas between two traces (``b - a``).

    Attributes
    ----------
    operators : pandas.DataFrame
        Per operator ``name`` (and ``cat``): for each of ``count``, ``self_host_ns``,
        ``total_host_ns``, ``self_device_ns``, ``total_device_ns`` the columns ``<m>_a``,
        ``<m>_b``, ``<m>_delta`` (missing side = 0), plus ``status`` ("both", "only_a",
        "only_b"). Sorted by ``|self_host_ns_delta| + |self_device_ns_delta|`` descending.
    kernels : pandas.DataFrame
        Per kernel ``name``: ``instances``, ``total_ns``, ``avg_ns`` as ``_a``/``_b``/``_delta``,
        ``status``; sorted by ``|total_ns_delta|`` descending. Empty for CPU-only traces.
    steps : pandas.DataFrame
        Index ``steps``, ``mean_step_ns``, ``median_step_ns``, ``min_step_ns``,
        ``max_step_ns``, ``total_ns``; columns ``a``, ``b``, ``delta``, ``ratio``.
    breakdown : pandas.DataFrame or None
        Index ``step_ns`` and the step-breakdown roles (``kernel_ns`` ... ``other_ns``, the
        average over steps from ``steps.step_breakdown``); columns ``a``, ``b``, ``delta``,
        ``ratio``. None when ``nbprof.analysis.steps`` is not available (see ``notes``).
    notes : list of str
        What could not be compared and why.
    """

    operators: pd.DataFrame
    kernels: pd.DataFrame
    steps: pd.DataFrame
    breakdown: pd.DataFrame | None
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        s = self.steps
        mean = s.loc["mean_step_ns"] if "mean_step_ns" in s.index else None
        head = (
            f"mean step {mean['a'] / 1e6:.3f} ms -> {mean['b'] / 1e6:.3f} ms"
            if mean is not None and np.isfinite(mean["a"]) and np.isfinite(mean["b"])
            else "no steps"
        )
        return f"<nbprof Comparison: {head}; {len(self.operators)} operators, {len(self.kernels)} kernels>"


def _merge(a: pd.DataFrame, b: pd.DataFrame, keys: list[str], metrics: list[str]) -> pd.DataFrame:
    m = a[keys + metrics].merge(b[keys + metrics], on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    m["status"] = m.pop("_merge").map({"both": "both", "left_only": "only_a", "right_only": "only_b"}).astype(object)
    for c in metrics:
        for side in ("_a", "_b"):
            col = m[c + side].fillna(0)
            m[c + side] = col.astype(np.int64) if c != "avg_ns" else col.astype(np.float64)
        m[c + "_delta"] = m[c + "_b"] - m[c + "_a"]
    cols = keys + [f"{c}{s}" for c in metrics for s in ("_a", "_b", "_delta")] + ["status"]
    return m[cols]


def _step_stats(trace: Trace) -> dict[str, float]:
    d = step_times(trace, steady=True)
    if len(d) == 0:
        return {"steps": 0, "mean_step_ns": np.nan, "median_step_ns": np.nan, "min_step_ns": np.nan,
                "max_step_ns": np.nan, "total_ns": float(trace.duration_ns)}
    return {"steps": len(d), "mean_step_ns": float(d.mean()), "median_step_ns": float(np.median(d)),
            "min_step_ns": float(d.min()), "max_step_ns": float(d.max()), "total_ns": float(trace.duration_ns)}


def _side_by_side(a: dict[str, float] | pd.Series, b: dict[str, float] | pd.Series) -> pd.DataFrame:
    df = pd.DataFrame({"a": pd.Series(a, dtype="float64"), "b": pd.Series(b, dtype="float64")})
    df["delta"] = df["b"] - df["a"]
    with np.errstate(divide="ignore", invalid="ignore"):
        df["ratio"] = np.where(df["a"] != 0, df["b"] / df["a"], np.nan)
    return df


def compare(a: Trace, b: Trace) -> Comparison:
    """Compare trace ``b`` against trace ``a`` (before/after a fix).

    Parameters
    ----------
    a, b : Trace
        The baseline and the changed run (ideally the same workload and step count).

    Returns
    -------
    Comparison
        ``operators``, ``kernels``, ``steps``, ``breakdown`` DataFrames of deltas ``b - a``;
        see ``Comparison``. Operator numbers are ``operators.operator_summary``'s (torch
        ``key_averages`` semantics), kernel numbers ``kernels.kernel_summary``'s, step times
        ``steps.step_times`` (the ``steps.step_windows`` durations, as the breakdown's ``step_ns``), the
        breakdown ``steps.breakdown_average`` of ``steps.step_breakdown`` (torch-tb-profiler Overview semantics),
        both over each trace's steady-state steps (``steps.steady_state``: the steps the verdict and the findings'
        savings average; a warm-up step left out is said in ``notes``).
    """
    notes: list[str] = []
    ops = _merge(operator_summary(a), operator_summary(b), ["name", "cat"], _OP_METRICS)
    key = ops["self_host_ns_delta"].abs() + ops["self_device_ns_delta"].abs()
    ops = ops.iloc[np.argsort(-key.to_numpy(), kind="stable")].reset_index(drop=True)
    ka, kb = kernel_summary(a), kernel_summary(b)
    kern = _merge(ka, kb, ["name"], _KERNEL_METRICS)
    kern = kern.iloc[np.argsort(-kern["total_ns_delta"].abs().to_numpy(), kind="stable")].reset_index(drop=True)
    if ka.empty and kb.empty:
        notes.append("neither trace has kernels: the kernel comparison is empty")
    sa, sb = _step_stats(a), _step_stats(b)
    if not sa["steps"] or not sb["steps"]:
        notes.append("a trace has no host events, so no steps: step statistics are NaN for it (total_ns still compared)")
    for name, t in (("a", a), ("b", b)):
        st = steady_state(t)
        if st["skipped"].any():
            notes.append(f"{name}: warm-up left out of the step statistics and the breakdown: step(s) "
                         f"{', '.join(str(int(x)) for x in st.loc[st['skipped'], 'step'])} "
                         f"({st.loc[st['skipped'], 'skip_reason'].iloc[0]})")
    steps = _side_by_side(sa, sb)
    breakdown = _side_by_side(breakdown_average(steady_breakdown(a)), breakdown_average(steady_breakdown(b)))
    return Comparison(operators=ops, kernels=kern, steps=steps, breakdown=breakdown, notes=notes)


#: Columns of :func:`step_waterfall`.
WATERFALL_COLUMNS = ("label", "kind", "delta_ns", "start_ns", "end_ns")


def step_waterfall(cmp: Comparison) -> pd.DataFrame:
    """The average step-time change split by Overview category, as the bars of a waterfall.

    Parameters
    ----------
    cmp : Comparison
        From :func:`compare` (``cmp.breakdown``: the average ``steps.step_breakdown`` of each trace).

    Returns
    -------
    pandas.DataFrame
        Rows: ``step_ns`` (kind ``"before"``: the mean step time of ``a``), one per breakdown
        category in ``steps.BREAKDOWN_COLUMNS`` order (kind ``"delta"``), ``step_ns`` again (kind
        ``"after"``: the mean step time of ``b``). Columns ``label`` (the breakdown column name),
        ``kind``, ``delta_ns`` (float64 ns: after - before for a category, negative = time saved; the
        step time itself for the two totals), ``start_ns``/``end_ns`` (float64 ns: where the bar
        starts and ends, each category bar starting where the previous one ended). The categories tile
        each step (``step_breakdown``), so their deltas sum to the step-time delta and the last category
        bar ends at the "after" step time. Empty (with these columns) when a trace has no step.
    """
    bd = cmp.breakdown
    if bd is None or "step_ns" not in bd.index or not np.isfinite(bd.loc["step_ns", ["a", "b"]].to_numpy(float)).all():
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("label", "kind") else "float64")
                             for c in WATERFALL_COLUMNS})
    before, after = float(bd.loc["step_ns", "a"]), float(bd.loc["step_ns", "b"])
    rows = [("step_ns", "before", before, 0.0, before)]
    level = before
    for c in BREAKDOWN_COLUMNS:
        d = float(bd.loc[c, "delta"]) if c in bd.index else 0.0
        rows.append((c, "delta", d, level, level + d))
        level += d
    rows.append(("step_ns", "after", after, 0.0, after))
    return pd.DataFrame(rows, columns=list(WATERFALL_COLUMNS))
