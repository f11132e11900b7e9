"""Helpers the rule modules share (plain Python numbers, an exact-names regex); no rule lives here. A step's label
is :func:`nbprof.trace.iterations.step_label`."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

__all__: list[str] = []


def py(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


def exact(names: list[str]) -> str:
    """A regex matching exactly these names."""
    return "^(?:" + "|".join(re.escape(n) for n in names) + ")$"
