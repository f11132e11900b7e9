"""Frame helpers of the Nsight Systems table readers: a schema-complete events frame and the durations of
a range table (see :mod:`nbprof.sources.nsys`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...trace import schema
from .db import _Db, _int_col

#: what one table reader returns: its rows as events (``schema.EVENT_COLUMNS``, None when it has none) and its
#: side table for ``trace.tables`` (None when the table is absent or empty)
Read = tuple[pd.DataFrame | None, pd.DataFrame | None]


def _frame(n: int, cols: dict[str, Any]) -> pd.DataFrame:
    """A schema-complete events frame of ``n`` rows from the given columns (others defaulted)."""
    data = {}
    for col, (dtype, _u, _d) in schema.EVENT_COLUMNS.items():
        if col in cols:
            v = cols[col]
            data[col] = (np.full(n, v) if np.isscalar(v) or v is None else np.asarray(v, dtype=object if dtype == "category" else None))
        elif dtype == "category":
            data[col] = np.full(n, None, dtype=object)
        elif dtype.startswith("float"):
            data[col] = np.full(n, np.nan)
        else:
            data[col] = np.full(n, -1)
    return pd.DataFrame(data)


def _durations(db: _Db, df: pd.DataFrame, table: str) -> tuple[np.ndarray, np.ndarray]:
    """(start, dur) of a range table; ``end < start`` (or no end) gives dur 0 (reported)."""
    start, end = _int_col(df, "start"), _int_col(df, "end")
    bad = end < start
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = (f"{int(bad.sum())} rows of {table} end before they start or have no end (first: row #{i} read, "
               f"start {int(start[i])}, end {int(end[i])}): duration set to 0")
        if db.strict:
            db.fail(msg, table)
        db.report.add(f"negative_dur:{table}", "repaired", int(bad.sum()), msg)
    return start, np.where(bad, 0, end - start)
