"""Helpers the rule modules share (text of a where-clause, an exact-names regex); no rule lives here."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

__all__: list[str] = []


def py(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


def steps_where(df: pd.DataFrame) -> str:
    st = list(df["step"])
    if not st:
        return "whole trace"
    if len(st) == 1:
        return f"ProfilerStep#{st[0]}"
    return f"ProfilerStep#{st[0]}..#{st[-1]} ({len(st)} steps)"



def exact(names: list[str]) -> str:
    """A regex matching exactly these names."""
    return "^(?:" + "|".join(re.escape(n) for n in names) + ")$"
