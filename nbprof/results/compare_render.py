"""A comparison (``analysis.compare.Comparison``, deltas ``b - a``) in words and human units.

``a`` is the baseline ("before"), ``b`` the candidate ("after"): a negative delta is time saved.

>>> import pandas as pd
>>> steps = pd.DataFrame({"a": [24.2e6], "b": [5.6e6]}, index=["mean_step_ns"])
>>> compare_sentence(steps, "before", "after")
"'after' vs 'before': the average step takes 5.60 ms instead of 24.20 ms (-18.60 ms, 4.32x faster)."
"""

from __future__ import annotations

import pandas as pd

from .table import Table, table

__all__ = ["compare_sentence", "side_by_side_table", "BASELINE_NAMES"]

#: run names that read as the baseline, in order of preference
BASELINE_NAMES = ("before", "baseline", "base", "control", "a")


def order_runs(names: list[str]) -> list[str]:
    """Two run names as (baseline, candidate): a run called "before"/"baseline"/... first, else the given order."""
    for b in BASELINE_NAMES:
        if b in names:
            return [b] + [n for n in names if n != b]
    return list(names)


def compare_sentence(steps: pd.DataFrame, a_name: str, b_name: str) -> str:
    """The average step of ``b`` against ``a`` (baseline), with the sign stated in words."""
    a = float(steps.loc["mean_step_ns", "a"])
    b = float(steps.loc["mean_step_ns", "b"])
    d = b - a
    if a <= 0 or b <= 0:
        return f"{b_name!r} vs {a_name!r}: no step time to compare."
    how = f"{a / b:.2f}x faster" if b < a else f"{b / a:.2f}x slower" if b > a else "the same"
    return (f"{b_name!r} vs {a_name!r}: the average step takes {b / 1e6:.2f} ms instead of {a / 1e6:.2f} ms "
            f"({'+' if d > 0 else '-' if d < 0 else ''}{abs(d) / 1e6:.2f} ms, {how}).")


def side_by_side_table(df: pd.DataFrame, a_name: str, b_name: str, caption: str = "") -> Table:
    """A ``compare`` side-by-side frame (index metric; columns ``a, b, delta, ratio``) in ms, ``delta`` = b - a."""
    rows = df[[not str(i).endswith("steps") for i in df.index]]
    out = pd.DataFrame({
        "metric": [str(i)[:-3].replace("_", " ") if str(i).endswith("_ns") else str(i) for i in rows.index],
        f"{a_name}_ns": rows["a"].to_numpy(), f"{b_name}_ns": rows["b"].to_numpy(),
        f"change ({b_name} - {a_name})_ns": rows["delta"].to_numpy(),
        f"{b_name} / {a_name}_x": rows["ratio"].to_numpy(),
    })
    return table(out, {f"{b_name} / {a_name}_x": "count"}, caption=caption)
