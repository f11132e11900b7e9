"""Vectorised interval arithmetic on half-open ``[start, end)`` int64 nanosecond intervals.

An *interval set* is a pair ``(starts, ends)`` of int64 numpy arrays. :func:`merge` turns any
collection of (possibly overlapping, unsorted) intervals into a *normalised* set: sorted, disjoint,
non-touching, no empty intervals. Every other function takes and returns normalised sets. Busy
time is always a union (:func:`union_ns`), so overlapping device ops are never double-counted.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

Intervals = tuple[np.ndarray, np.ndarray]

_EMPTY = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def empty() -> Intervals:
    """An empty normalised interval set."""
    return _EMPTY[0].copy(), _EMPTY[1].copy()


def merge(starts: ArrayLike, ends: ArrayLike) -> Intervals:
    """Union of intervals ``[starts[i], ends[i])`` as a normalised set (touching intervals join).

    >>> s, e = merge([0, 5, 10, 30], [10, 8, 20, 30])  # [30, 30) is empty and dropped
    >>> s.tolist(), e.tolist()
    ([0], [20])
    """
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return empty()
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    run_end = np.maximum.accumulate(e)
    # a new group starts where the start lies after every earlier end
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    out_s = s[idx]
    last = np.append(idx[1:] - 1, s.size - 1)
    out_e = run_end[last]
    return out_s, out_e


def total_ns(iv: Intervals) -> int:
    """Summed length of a normalised set, in ns."""
    return int((iv[1] - iv[0]).sum())


def union_ns(starts: ArrayLike, ends: ArrayLike) -> int:
    """Length of the union of arbitrary intervals (overlap counted once), in ns."""
    return total_ns(merge(starts, ends))


def _combine(a: Intervals, b: Intervals, keep: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Intervals:
    """Sweep both normalised sets; keep elementary segments where ``keep(in_a, in_b)``."""
    pts = np.concatenate([a[0], a[1], b[0], b[1]])
    if pts.size == 0:
        return empty()
    da = np.concatenate([np.ones(a[0].size, np.int64), -np.ones(a[1].size, np.int64),
                         np.zeros(b[0].size + b[1].size, np.int64)])
    db = np.concatenate([np.zeros(a[0].size + a[1].size, np.int64),
                         np.ones(b[0].size, np.int64), -np.ones(b[1].size, np.int64)])
    order = np.argsort(pts, kind="stable")
    pts, da, db = pts[order], da[order], db[order]
    # state after all changes at one time point
    uniq, first = np.unique(pts, return_index=True)
    ca = np.add.reduceat(da, first).cumsum()
    cb = np.add.reduceat(db, first).cumsum()
    sel = keep(ca[:-1] > 0, cb[:-1] > 0)
    return merge(uniq[:-1][sel], uniq[1:][sel])


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two normalised sets."""
    if a[0].size == 0 or b[0].size == 0:
        return empty()
    return _combine(a, b, lambda x, y: x & y)


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """``a`` minus ``b`` for normalised sets.

    >>> s, e = subtract(merge([0], [100]), merge([10, 50], [20, 60]))
    >>> s.tolist(), e.tolist(), total_ns((s, e))
    ([0, 20, 60], [10, 50, 100], 80)
    """
    if a[0].size == 0 or b[0].size == 0:
        return a
    return _combine(a, b, lambda x, y: x & ~y)


def union(a: Intervals, b: Intervals) -> Intervals:
    """Union of two normalised sets."""
    return merge(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def covered_before(iv: Intervals, t: ArrayLike) -> np.ndarray:
    """For each time in ``t``: length of ``iv`` lying before ``t`` (vectorised, int64 ns)."""
    t = np.asarray(t, dtype=np.int64)
    s, e = iv
    if s.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    lens = e - s
    cum = np.concatenate([[0], np.cumsum(lens)])
    k = np.searchsorted(s, t, side="right") - 1  # last interval starting at or before t
    kk = np.clip(k, 0, None)
    part = np.clip(t - s[kk], 0, lens[kk])
    return np.where(k >= 0, cum[kk] + part, 0)


def overlap_with_windows(iv: Intervals, win_starts: ArrayLike, win_ends: ArrayLike) -> np.ndarray:
    """Length of ``iv`` inside each window ``[win_starts[i], win_ends[i])`` (int64 ns array)."""
    return np.asarray(covered_before(iv, win_ends) - covered_before(iv, win_starts), dtype=np.int64)


def gaps(iv: Intervals) -> Intervals:
    """The holes between consecutive intervals of a normalised set."""
    s, e = iv
    if s.size < 2:
        return empty()
    return e[:-1].copy(), s[1:].copy()
