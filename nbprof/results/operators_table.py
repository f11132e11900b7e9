"""The operator table a person reads first: host operators by device time, self times clamped at zero.

``operators.operator_summary`` keeps torch's ``key_averages()`` numbers (cross-checked by tests), in which
a self time can be negative when children overrun their parent. The default table here shows host
operators (``cpu_op`` and ``user_annotation`` rows; no Python frames, no ``ProfilerStep#N`` wrappers),
sorted by total device time then self host time, and clamps negative self times at 0, saying how many
rows and how much time were clamped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..units import fmt_ns
from .table import Table, table

__all__ = ["HOST_OPERATOR_CATEGORIES", "DEFAULT_COLUMNS", "host_operators", "operator_table", "Clamped"]

HOST_OPERATOR_CATEGORIES = ("cpu_op", "user_annotation")
DEFAULT_COLUMNS = ["name", "count", "total_device_ns", "self_device_ns", "self_host_ns", "total_host_ns",
                   "device_mem_bytes", "host_mem_bytes"]


@dataclass(frozen=True)
class Clamped:
    """Self times below zero set to 0: rows affected and the overrun (ns) removed."""

    rows: int
    overrun_ns: int

    def __str__(self) -> str:
        if not self.rows:
            return ""
        return (f"{self.rows} self time{'s' if self.rows != 1 else ''} below zero (children overrun their parent by "
                f"{fmt_ns(self.overrun_ns)} in total) shown as 0")


def host_operators(ops: pd.DataFrame) -> tuple[pd.DataFrame, Clamped]:
    """``operator_summary`` rows of host operators, sorted by ``total_device_ns`` then ``self_host_ns``,
    self times clamped at 0 (the second value says what was clamped)."""
    cat = ops["cat"].astype(str)
    name = ops["name"].astype(str)
    keep = cat.isin(HOST_OPERATOR_CATEGORIES) & ~name.str.startswith("ProfilerStep")
    out = ops[keep].copy()
    rows, over = 0, 0
    for c in ("self_host_ns", "self_device_ns"):
        if c in out:
            neg = out[c].to_numpy(np.int64) < 0
            rows += int(neg.sum())
            over += int(-out.loc[neg, c].sum())
            out[c] = out[c].clip(lower=0)
    out = out.sort_values(["total_device_ns", "self_host_ns"], ascending=False, kind="stable").reset_index(drop=True)
    return out, Clamped(rows, over)


def operator_table(ops: pd.DataFrame, *, top: int = 20, columns: list[str] | None = None) -> Table:
    """The default operator table (see the module docstring); says so when no operator has device time."""
    host, clamped = host_operators(ops)
    cols = [c for c in (columns or DEFAULT_COLUMNS) if c in host.columns]
    notes = [f"Host operators by device time (top {top})"]
    if len(host) and int(host["total_device_ns"].sum()) == 0:
        notes.append("no device time in this profile (CPU-only): sorted by self host time")
        host = host.sort_values("self_host_ns", ascending=False, kind="stable")
        cols = [c for c in cols if "device" not in c]
    if clamped.rows:
        notes.append(str(clamped))
    return table(host, columns=cols, max_rows=top, caption="; ".join(notes))
