"""Host events that break the nesting of a thread: a child that ends after the event it starts in.

A Kineto trace's host events of one thread nest (torch records them from one call stack); an event
that starts inside another and ends after it (clock rounding beyond 1 ns, an op recorded from another
call stack onto the thread, a ``record_function`` closed late) cannot be the child it looks like.
torch's call tree (``torch.autograd.profiler_util``, ``_populate_cpu_children``: an open event stops
being a parent when the next one ends after it, with the file's 1 ns rounding) silently hangs such an
event under an outer event; the load report says so instead, with the count and examples.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace import predicates as pred
from ...trace import schema
from .context import _Ctx

#: the examples a report names
_EXAMPLES = 3


def _innermost_open(new_thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For events sorted by (thread, start, -end): the nearest earlier event of the same thread still
    open at each one's start (``end_j > start_i``), or -1.

    Pointer jumping (no Python loop over events): an event's candidate is the previous event; a
    candidate closed before our start is skipped together with everything it skipped itself (those
    closed before its start, which is no later than ours), so each round doubles the skipped chain.
    """
    n = len(start)
    pos = np.arange(n, dtype=np.int64)
    cand = np.append(pos - 1, n)  # position n: a sentinel open never
    cand[np.flatnonzero(new_thread)] = n
    end_x = np.append(end, np.iinfo(np.int64).min)
    out = np.full(n, -1, dtype=np.int64)
    active = np.flatnonzero(~new_thread)
    while len(active):
        c = cand[active]
        found = end_x[c] > start[active]
        out[active[found]] = c[found]
        active = active[~found & (c != n)]
        cand[active] = cand[cand[active]]
    return out


def check_nesting(events: pd.DataFrame, file_index: np.ndarray | None, ctx: _Ctx) -> None:
    """Flag host duration events (``ph`` X, ``device`` -1; not Kineto's ``Trace`` spans, nor ``python_function``
    rows: the Python tracer's frames cross ``record_function`` ranges by design, e.g. a ``ProfilerStep#N``
    opened inside ``_record_function_enter_new``, and torch builds their tree apart) that start inside
    an earlier event of their (pid, tid) and end more than 1 ns after it, unless one of the two is a
    ``ProfilerStep#N`` range (it ends and the next begins where ``prof.step()`` is called, e.g. in an optimizer
    step post-hook inside ``Optimizer.step#...``: a step boundary, not a call scope) (kind ``child_overruns_parent``,
    action ``flagged``; rows kept as recorded): the count, the largest overrun (ns) and the first
    examples in file order with their event index in ``traceEvents`` (``file_index``: per events row,
    None when unknown) and the file.
    """
    ph, cat = events["ph"], events["cat"]
    is_x = ((ph == "X").to_numpy() & (events["device"].to_numpy() < 0)
            & ~cat.isin([schema.TRACE_SPAN, schema.PYTHON_FUNCTION]).to_numpy())
    rows = np.flatnonzero(is_x)
    if len(rows) < 2:
        return
    pid, tid = events["pid"].to_numpy()[rows], events["tid"].to_numpy()[rows]
    ts = events["ts_ns"].to_numpy()[rows]
    end = ts + events["dur_ns"].to_numpy()[rows]
    o = np.lexsort((-end, ts, tid, pid))
    rows, pid, tid, ts, end = rows[o], pid[o], tid[o], ts[o], end[o]
    new_thread = np.ones(len(rows), dtype=bool)
    new_thread[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
    par = _innermost_open(new_thread, ts, end)
    has = par >= 0
    over = np.flatnonzero(has & (end > np.where(has, end[np.clip(par, 0, None)], 0) + 1))
    # a ProfilerStep#N range ends where prof.step() is called, which may be inside another range (an optimizer
    # step post-hook -- nbprof's own automatic steps, Lightning's callbacks): a step boundary, not a call scope
    is_step = np.asarray(pred.is_step_name(events), dtype=bool)
    over = over[~(is_step[rows[par[over]]] | is_step[rows[over]])]
    n = len(over)
    if not n:
        return
    child, parent = rows[over], rows[par[over]]
    by_ns = end[over] - end[par[over]]
    first = np.argsort(child, kind="stable")[:_EXAMPLES]
    names = events["name"]
    where = "" if file_index is None else " of traceEvents"

    def at(r: int) -> str:
        return f"event {int(file_index[r])}{where}" if file_index is not None else f"events row {r}"

    shown = "; ".join(f"{str(names.iat[int(child[k])])!r} ({at(int(child[k]))}) ends {int(by_ns[k])} ns after "
                      f"{str(names.iat[int(parent[k])])!r} ({at(int(parent[k]))})" for k in first.tolist())
    k0 = int(file_index[int(child[first[0]])]) if file_index is not None else None
    ctx.report.add("child_overruns_parent", "flagged", n,
                   f"{n} host events start inside an event of their thread and end after it (up to "
                   f"{int(by_ns.max())} ns after) in {ctx.path}: e.g. {shown}. Kept as recorded; a call tree "
                   "(torch's rule) hangs each under an outer event that contains it, not under the one it starts in",
                   offset=ctx.event_offset(k0))
