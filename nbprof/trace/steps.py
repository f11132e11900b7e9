"""What a step is, for every source: numbered step ranges, and the step of each event and memory row.

A *step* is one iteration of a training/inference loop, marked by a named time range: PyTorch's
profiler writes ``ProfilerStep#N`` (``N`` = the step number, from ``prof.step()``); other sources
provide their own ranges (Nsight Systems: NVTX ranges). A source turns its markers into a *ranges*
frame and calls ``assign_steps``, which sets the ``step`` column (``int32``, -1 outside every
step) of the ``events`` table and, when given, of ``memory``:

- rows that are *timed* take the number of the range that contains their ``ts_ns``
  (``start_ns <= ts_ns < end_ns``; of overlapping ranges, the one that started last);
- rows that are *correlated* (device rows by default) instead take the step of the first other
  row with the same ``correlation`` id (the runtime call that launched them), when there is one:
  a kernel launched in step 3 belongs to step 3 even when it runs after the range's end.

All times are int64 ns on the trace's own time base (``ts_ns`` of ``nbprof.trace.schema``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from .ids import present as id_present

__all__ = ["STEP_NAME_RE", "step_number", "step_ranges", "assign_steps", "RANGE_COLUMNS"]

#: The name of a PyTorch profiler step range (``ProfilerStep#12``; spaces around ``#`` tolerated);
#: searched in the name, group 1 is the number.
STEP_NAME_RE = re.compile(r"ProfilerStep\s*#\s*(\d+)")

#: Columns of a ranges frame: ``step`` (int), ``start_ns``/``end_ns`` (int64 ns, end exclusive),
#: optionally ``pid`` (then only rows of that pid are timed against the range).
RANGE_COLUMNS = ("step", "start_ns", "end_ns")


def step_number(name: Any) -> int | None:
    """The step number in a ``ProfilerStep#N`` name: ``"ProfilerStep#12"`` -> 12.

    Returns None for any other name, for values that are not strings (None, NaN, numbers) and for a
    number beyond the ``step`` column's int32 (``ProfilerStep#99999999999999999999999``: not a step of
    this profile; the Kineto loader reports it as ``step_number_too_large``).
    """
    if not isinstance(name, str):
        return None
    m = STEP_NAME_RE.search(name)
    if m is None or len(m.group(1)) > 10:
        return None
    k = int(m.group(1))
    return k if k < 2**31 else None


def step_ranges(events: pd.DataFrame, rows: np.ndarray | None = None) -> pd.DataFrame:
    """The ``ProfilerStep#N`` ranges among ``events`` (at the boolean mask ``rows``, default all rows).

    Parameters
    ----------
    events : DataFrame
        With columns ``name`` (categorical or object), ``ts_ns`` and ``dur_ns`` (int64 ns).
    rows : bool ndarray, optional
        Which rows may be step ranges (e.g. host rows only).

    Returns
    -------
    DataFrame
        Columns ``step`` (int32), ``start_ns``, ``end_ns`` (int64 ns, end = ``ts_ns + dur_ns``),
        ordered by start (ties in table order); a number seen twice keeps its first range. Empty
        when no row's name is a step name.
    """
    names = events["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = names.cat.categories
        nums = np.array([-1 if (k := step_number(c)) is None else k for c in cats] + [-1], dtype=np.int64)
        num = nums[names.cat.codes.to_numpy()]
    else:
        num = np.array([-1 if (k := step_number(c)) is None else k for c in names], dtype=np.int64)
    is_step = num >= 0
    if rows is not None:
        is_step &= rows
    sel = np.flatnonzero(is_step)
    start = events["ts_ns"].to_numpy()[sel]
    out = pd.DataFrame({
        "step": num[sel].astype(np.int32),
        "start_ns": start.astype(np.int64),
        "end_ns": (start + events["dur_ns"].to_numpy()[sel]).astype(np.int64),
    })
    out = out.sort_values("start_ns", kind="stable").drop_duplicates("step")
    return out.reset_index(drop=True)


def _by_time(ranges: pd.DataFrame, ts: np.ndarray) -> np.ndarray:
    """Step number of the range containing each ``ts`` (latest start <= ts, ts < its end), else -1."""
    out = np.full(len(ts), -1, dtype=np.int32)
    if not len(ranges) or not len(ts):
        return out
    r = ranges.sort_values("start_ns", kind="stable")
    starts, ends = r["start_ns"].to_numpy(), r["end_ns"].to_numpy()
    nums = r["step"].to_numpy().astype(np.int32)
    i = np.searchsorted(starts, ts, side="right") - 1
    j = np.clip(i, 0, None)
    ok = (i >= 0) & (ts < ends[j])
    out[ok] = nums[j[ok]]
    return out


def assign_steps(
    events: pd.DataFrame,
    ranges: pd.DataFrame,
    *,
    memory: pd.DataFrame | None = None,
    timed: np.ndarray | None = None,
    correlated: np.ndarray | None = None,
) -> None:
    """Set ``events["step"]`` (and ``memory["step"]``) in place from numbered step ranges.

    Parameters
    ----------
    events : DataFrame
        The events table: ``ts_ns`` (int64 ns), ``device`` (>= 0 on device rows) and
        ``correlation`` (-1 when none); when ``ranges`` has a ``pid`` column, also ``pid``.
    ranges : DataFrame
        ``RANGE_COLUMNS`` (``step``, ``start_ns``, ``end_ns``; e.g. from ``step_ranges``), plus an
        optional ``pid``: then a row is timed only against the ranges of its own pid.
    memory : DataFrame, optional
        The memory table (``ts_ns``): every row timed against all ranges.
    timed : bool ndarray, optional
        Rows that take the step of the range containing their ``ts_ns``; default every row.
        The others get -1 unless ``correlated`` gives them a step.
    correlated : bool ndarray, optional
        Rows that take the step of the first row outside ``correlated`` with the same
        ``correlation`` id (>= 0), when such a row exists; default the device rows
        (``device >= 0``). Those without such a row keep their timed step (or -1).

    Raises
    ------
    KeyError
        When a needed column is missing.
    """
    n = len(events)
    ts = events["ts_ns"].to_numpy()
    if timed is None:
        timed = np.ones(n, dtype=bool)
    step = np.full(n, -1, dtype=np.int32)
    if "pid" in ranges.columns:
        pids = events["pid"].to_numpy()
        for p, g in ranges.groupby("pid", sort=False):
            sel = np.flatnonzero(timed & (pids == p))
            step[sel] = _by_time(g, ts[sel])
    elif timed.all():
        step = _by_time(ranges, ts)
    else:
        sel = np.flatnonzero(timed)
        step[sel] = _by_time(ranges, ts[sel])
    if correlated is None:
        correlated = events["device"].to_numpy() >= 0
    if correlated.any():
        corr = events["correlation"].to_numpy()
        src = (~correlated) & id_present(corr)
        lut = pd.Series(step[src], index=corr[src])
        lut = lut[~lut.index.duplicated()]
        mapped = lut.reindex(corr[correlated]).to_numpy()
        step[correlated] = np.where(np.isnan(mapped), step[correlated], mapped).astype(np.int32)
    events["step"] = step
    if memory is not None and len(memory):
        memory["step"] = _by_time(ranges.drop(columns=["pid"], errors="ignore"), memory["ts_ns"].to_numpy())
