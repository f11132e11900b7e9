"""Lanes: the tracks an exported slice goes on, so that no viewer drops an overlapping slice.

Chrome's and Perfetto's viewers draw the slices of one thread as a stack that must nest: a slice that
starts inside another and ends after it is drawn wrongly or dropped (Perfetto drops it:
google/perfetto#4280). Device ops of one stream may overlap (CUPTI records concurrent kernels of one
stream with overlapping times; repaired files may too), host ranges may overlap partially (NVTX
start/end ranges). Each (pid, tid) is therefore split into lanes:

- device rows (``device >= 0``): interval partitioning -- a slice goes on the lowest lane that is
  free at its start (lanes are busy over ``[ts, ts + dur)``), so no two slices of one lane overlap at
  all; with no overlap everything stays on lane 0;
- host rows: nest-compatible lanes -- a slice goes on the lowest lane where it nests inside the open
  slice (or where none is open), so properly nested call stacks stay on lane 0 and only a slice that
  partially overlaps another moves.

Zero-duration rows never occupy a lane (they go on the lowest lane where they fit).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["Lanes", "assign_lanes"]


@dataclass
class Lanes:
    """Lane of every row of an events table.

    Attributes
    ----------
    lane : numpy.ndarray of int64
        Per row (positional, the events table's order): 0 for the thread's/stream's own track, k > 0
        for its k-th overflow track.
    tracks : pandas.DataFrame
        One row per (pid, tid, lane) in use, columns ``pid``, ``tid``, ``lane`` (int64), ``device``
        (bool: a device stream), ``rows`` (int64: slices on it); sorted by pid, tid, lane.
    """

    lane: np.ndarray
    tracks: pd.DataFrame

    @property
    def overflow(self) -> int:
        """How many overflow tracks (lane > 0) there are."""
        return int((self.tracks["lane"] > 0).sum())


def _strict(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Interval partitioning of rows already sorted by start (lowest free lane first)."""
    out = np.zeros(len(ts), dtype=np.int64)
    busy: list[tuple[int, int]] = []  # (end, lane)
    free: list[int] = []
    nxt = 0
    for i in range(len(ts)):
        t, e = int(ts[i]), int(end[i])
        while busy and busy[0][0] <= t:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            ln = free[0] if e == t else heapq.heappop(free)
        else:
            ln = nxt
            nxt += 1
            if e == t:
                heapq.heappush(free, ln)
        if e > t:
            heapq.heappush(busy, (e, ln))
        out[i] = ln
    return out


def _nested(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nest-compatible lanes of rows sorted by start, then longer first."""
    out = np.zeros(len(ts), dtype=np.int64)
    stacks: list[list[int]] = []
    for i in range(len(ts)):
        t, e = int(ts[i]), int(end[i])
        for ln, st in enumerate(stacks):
            while st and st[-1] <= t:
                st.pop()
            if not st or st[-1] >= e:
                st.append(e)
                out[i] = ln
                break
        else:
            stacks.append([e])
            out[i] = len(stacks) - 1
    return out


def _overlaps(ts: np.ndarray, end: np.ndarray) -> bool:
    """True when some row starts before an earlier-starting row ends (rows sorted by start)."""
    if len(ts) < 2:
        return False
    run = np.maximum.accumulate(end)[:-1]
    return bool((ts[1:] < run).any())


def assign_lanes(events: pd.DataFrame) -> Lanes:
    """Split each thread / stream of ``events`` into lanes (see the module docstring).

    Parameters
    ----------
    events : pandas.DataFrame
        ``Trace.events`` (uses ``ts_ns``, ``dur_ns`` in ns, ``pid``, ``tid``, ``device``).

    Returns
    -------
    Lanes
    """
    n = len(events)
    ts = events["ts_ns"].to_numpy(np.int64)
    dur = np.maximum(events["dur_ns"].to_numpy(np.int64), 0)
    end = ts + dur
    pid = events["pid"].to_numpy(np.int64)
    tid = events["tid"].to_numpy(np.int64)
    dev = events["device"].to_numpy() >= 0
    lane = np.zeros(n, dtype=np.int64)
    if n:
        order = np.lexsort((-dur, ts, tid, pid, dev))
        k_dev, k_pid, k_tid = dev[order], pid[order], tid[order]
        cut = np.flatnonzero((k_dev[1:] != k_dev[:-1]) | (k_pid[1:] != k_pid[:-1]) | (k_tid[1:] != k_tid[:-1])) + 1
        for a, b in zip(np.r_[0, cut], np.r_[cut, n]):
            rows = order[a:b]
            g_ts, g_end = ts[rows], end[rows]
            if not _overlaps(g_ts, g_end):
                continue
            lane[rows] = _strict(g_ts, g_end) if k_dev[a] else _nested(g_ts, g_end)
    tr = pd.DataFrame({"pid": pid, "tid": tid, "lane": lane, "device": dev})
    tracks = (tr.groupby(["pid", "tid", "lane", "device"], sort=True).size().rename("rows").astype("int64")
              .reset_index())
    return Lanes(lane=lane, tracks=tracks[["pid", "tid", "lane", "device", "rows"]])
