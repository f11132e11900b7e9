"""The call-tree primitives of the host analyses: torch's stack sweep (parent and subtree end of nested intervals
per thread) vectorised, the (thread, time) order it needs, and pair ranks for grouping keys. Pure numpy, no Trace.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _sweep_reference(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stack sweep over events sorted by (thread, start, -end): the loop torch runs.

    Kept as the reference that ``_tree_links`` (vectorised, used by the analyses) is tested
    against.

    Returns ``parent`` (index or -1) and ``last`` (index of the last event of the subtree).
    The pop rule is torch's (``_populate_cpu_children``): an open event stops being a
    candidate parent when the next event starts at or after its end or ends after it
    (with 1 ns of slack for the separately rounded ``ts`` and ``dur`` of the file).
    """
    n = len(start)
    parent = [-1] * n
    last = list(range(n))
    th = thread.tolist()
    st = start.tolist()
    en = end.tolist()
    stack: list[int] = []
    stack_end: list[int] = []
    prev_thread = None
    for i in range(n):
        t = th[i]
        if t != prev_thread:
            for j in stack:
                last[j] = i - 1
            stack = []
            stack_end = []
            prev_thread = t
        s = st[i]
        e = en[i]
        while stack:
            pe = stack_end[-1]
            if s >= pe or e > pe + 1:
                last[stack.pop()] = i - 1
                stack_end.pop()
            else:
                parent[i] = stack[-1]
                break
        stack.append(i)
        stack_end.append(e)
    for j in stack:
        last[j] = n - 1
    return np.array(parent, dtype=np.int64), np.array(last, dtype=np.int64)


def _tree_links(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parent and subtree end of events sorted by (thread, start, -end), without a Python loop.

    torch's stack sweep (``_sweep_reference``) makes the parent of event i the latest event
    before it (same thread) that still contains it: ``end_j > start_i`` and
    ``end_j >= end_i - 1`` (1 ns slack). An event popped by some k < i because k ends after
    it leaves k (or an event popping k) as a later container, so no popped event can be the
    latest container: the nearest j < i with ``end_j >= max(end_i - 1, start_i + 1)``, found by
    pointer jumping over candidates. An event stays open exactly while its descendants come, so
    its subtree is [i, its last descendant], found from the parents.

    Returns ``parent`` (position or -1) and ``last`` (position of the subtree's last event).
    """
    n = len(start)
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    pos = np.arange(n, dtype=np.int64)
    new_thread = np.ones(n, dtype=bool)
    new_thread[1:] = thread[1:] != thread[:-1]
    need = np.maximum(end - 1, start + 1)
    # parent: candidates move left from the previous event; a candidate that does not contain us
    # is skipped together with everything it skipped itself (none of that contains us either), so
    # every event jumps to its candidate's candidate: synchronous pointer jumping, each round
    # doubling the skipped chain (about log2 of the longest sibling run in rounds). Position n is
    # a sentinel that contains nothing: the candidate of a thread's first event, and of a root.
    parent = np.full(n, -1, dtype=np.int64)
    end_x = np.append(end, np.iinfo(np.int64).min)
    # round one on whole arrays: the previous event (same thread) is the parent of about half
    first_child = np.zeros(n, dtype=bool)
    first_child[1:] = ~new_thread[1:] & (end[:-1] >= need[1:])
    # then every other event jumps to the previous event's candidate: i - 2, or the sentinel
    # when the previous event is its thread's first
    cand = np.append(pos - 2, n)
    resolved = np.flatnonzero(first_child)
    parent[resolved] = cand[resolved] = resolved - 1
    cand[np.flatnonzero(new_thread)] = n
    after_first = np.flatnonzero(new_thread[:-1]) + 1
    cand[after_first[~first_child[after_first]]] = n
    active = np.flatnonzero(~first_child & ~new_thread)
    while len(active):
        c = cand[active]
        found = end_x[c] >= need[active]
        parent[active[found]] = c[found]
        active = active[~found & (c != n)]
        cand[active] = cand[cand[active]]
    # subtree end: the sweep keeps an event open exactly while its descendants come, so the
    # subtree is [i, last descendant]; the last descendant is the last child's, recursively
    # (pointer jumping along last children: about log2(depth) passes)
    has_p = parent >= 0
    last = pos.copy()
    np.maximum.at(last, parent[has_p], pos[has_p])  # own position, or the last child's
    while True:
        nxt = last[last]
        if np.array_equal(nxt, last):
            break
        last = nxt
    return parent, last


def _thread_time_order(pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``np.lexsort((-end, ts, tid, pid))``: rows by thread, start, then longest first (ties: row order).

    Rows already in start order (a loaded trace's events) with fewer than 2**15 threads take a
    cheaper route to the same permutation: the rows of each run of equal starts are put in
    ``-end`` order in place, then a stable sort by a 16-bit thread code, ranked as (pid, tid)
    (numpy sorts 16-bit integers stably by radix, in linear time).
    """
    n = len(ts)
    if n < 2 or not bool((ts[1:] >= ts[:-1]).all()):
        return np.lexsort((-end, ts, tid, pid))
    pc, pu = pd.factorize(pid, sort=True)
    tc, tu = pd.factorize(tid, sort=True)
    if len(pu) * len(tu) >= 2**15:
        return np.lexsort((-end, ts, tid, pid))
    pre = np.arange(n)
    tie = ts[1:] == ts[:-1]
    if tie.any():
        in_tie = np.zeros(n, dtype=bool)
        in_tie[1:] |= tie
        in_tie[:-1] |= tie
        sub = np.flatnonzero(in_tie)  # runs of equal starts are contiguous: sorting them stays inside each run
        pre[sub] = sub[np.lexsort((-end[sub], ts[sub]))]
    thread = (pc * len(tu) + tc).astype(np.int16)[pre]
    return pre[np.argsort(thread, kind="stable")]


def _pair_rank(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Lexicographic rank of each ``(a[i], b[i])`` pair among the distinct pairs (int64): what
    ``np.unique(np.stack([a, b], 1), axis=0, return_inverse=True)[1]`` gives, without its row sort
    (three 1-D ``np.unique`` calls: 20x faster on 640 k rows)."""
    _, ia = np.unique(a, return_inverse=True)
    ub, ib = np.unique(b, return_inverse=True)
    inv: np.ndarray = np.unique(ia.astype(np.int64).ravel() * max(len(ub), 1) + ib.ravel(), return_inverse=True)[1]
    return inv.ravel()
