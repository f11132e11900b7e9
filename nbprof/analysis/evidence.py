"""Evidence rows of findings: the events a view zooms to when it shows a finding.

Every function returns *positional* row ids into ``trace.events`` (``trace.events.iloc[rows]``), as a
``list[int]`` ordered by how strongly the row supports the claim (longest first), at most
:data:`MAX_ROWS` of them. They read only the events table (``ts_ns``, ``dur_ns``, ``name``, ``cat``,
``device``, ``stream``, ``correlation``), never the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.ids import present as id_present
from ..trace.model import Trace

#: The most rows one finding keeps as evidence.
MAX_ROWS = 200


def _ordered(ev: pd.DataFrame, rows: np.ndarray, key: np.ndarray, limit: int) -> list[int]:
    """``rows`` by ``key`` descending (ties: earlier start first), at most ``limit``."""
    if rows.size == 0:
        return []
    ts = ev["ts_ns"].to_numpy(np.int64)[rows]
    o = np.lexsort((ts, -np.asarray(key, np.int64)))
    return [int(r) for r in rows[o][:limit]]


def longest(trace: Trace, mask: np.ndarray | pd.Series, limit: int = MAX_ROWS) -> list[int]:
    """The rows of ``mask`` (bool, aligned with ``trace.events``), longest ``dur_ns`` first."""
    ev = trace.events
    rows = np.flatnonzero(np.asarray(mask, dtype=bool))
    return _ordered(ev, rows, ev["dur_ns"].to_numpy(np.int64)[rows], limit)


def by_name(trace: Trace, fn: Callable[[str], object], *, where: str = "any", limit: int = MAX_ROWS) -> list[int]:
    """Rows whose name satisfies ``fn`` (on the host when ``where="host"``, on a device for ``"device"``),
    longest first."""
    ev = trace.events
    m = np.asarray(pred.name_mask(ev["name"], fn), dtype=bool)
    if where == "host":
        m &= np.asarray(pred.is_host(ev), dtype=bool)
    elif where == "device":
        m &= np.asarray(pred.is_device(ev), dtype=bool)
    return longest(trace, m, limit)


def label_rows(trace: Trace, labels: Iterable[object]) -> np.ndarray:
    """Positional rows of the index ``labels`` of ``trace.events`` (labels not found are left out)."""
    pos = trace.events.index.get_indexer(pd.Index(list(labels)))
    return np.asarray(pos[pos >= 0], dtype=np.int64)


def idle_gap_rows(trace: Trace, device: int, stream: int | None = None, *, host_wait: bool = False,
                  limit: int = MAX_ROWS) -> list[int]:
    """The device ops that end the longest idle gaps on ``device`` (one ``stream``, or each of them).

    A gap is the time from the latest end of the earlier ops of a stream to an op's start (the rule
    of :func:`nbprof.analysis.utilization.idle_breakdown`); with ``host_wait`` only gaps whose op was
    launched (runtime call with the same ``correlation``) after the stream went idle count. Rows are
    ordered by gap length, longest first.
    """
    ev = trace.events
    m = np.asarray(pred.is_device_op(ev), dtype=bool) & (ev["device"].to_numpy(np.int64) == device)
    if stream is not None:
        m &= ev["stream"].to_numpy(np.int64) == stream
    rows = np.flatnonzero(m)
    if rows.size < 2:
        return []
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    st = ev["stream"].to_numpy(np.int64)[rows]
    o = np.lexsort((ts[rows], st))
    rows, st = rows[o], st[o]
    s, e = ts[rows], end[rows]
    new = np.ones(rows.size, bool)
    new[1:] = st[1:] != st[:-1]
    # latest end of the earlier ops of the same stream
    grp = np.cumsum(new) - 1
    shift = np.int64(1) << np.int64(50)
    prev_end = np.maximum.accumulate(e + grp * shift) - grp * shift
    prev_end = np.concatenate([[0], prev_end[:-1]])
    gap = np.where(new, 0, s - prev_end)
    keep = gap > 0
    if host_wait:
        corr = ev["correlation"].to_numpy(np.int64)
        rt = np.flatnonzero(np.asarray(pred.is_runtime(ev), dtype=bool) & id_present(corr))
        lookup = pd.Series(ts[rt], index=corr[rt])
        lookup = lookup[~lookup.index.duplicated(keep="last")]
        launch_ts = lookup.reindex(corr[rows]).fillna(-1).to_numpy(np.int64)
        keep &= launch_ts > prev_end
    return _ordered(ev, rows[keep], gap[keep], limit)


def step_rows(trace: Trace, steps: Iterable[int]) -> list[int]:
    """Rows that span each of ``steps``, in step order: its ``ProfilerStep#N`` range row; for a step that was
    detected (no ``ProfilerStep#N``: :mod:`nbprof.trace.iterations` made the iterations the events' ``step``), the
    row of that step that starts first and the one that ends last (host or device: the rows of that ``step``
    value), so :func:`interval` of the rows covers the steps' events as it covers their ranges."""
    ev = trace.events
    want = {int(s) for s in steps}
    m = np.asarray(pred.is_step_row(ev), dtype=bool)
    rows = np.flatnonzero(m)
    if rows.size:
        nums = [pred.step_number(str(n)) for n in ev["name"].to_numpy(dtype=object)[rows]]
        sel = [(n, int(r)) for n, r in zip(nums, rows) if n in want]
        return [r for _n, r in sorted(sel)]
    step = ev["step"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    out: list[int] = []
    for s in sorted(want):
        r = np.flatnonzero(step == s)
        if r.size:
            first, last = int(r[np.argmin(ts[r])]), int(r[np.argmax(end[r])])
            out += [first] if first == last else [first, last]
    return out[:MAX_ROWS]


def covering_host_op(trace: Trace, name: str, t_ns: int, limit: int = MAX_ROWS) -> list[int]:
    """Host rows named ``name`` whose ``[ts, ts + dur]`` holds ``t_ns`` (innermost, i.e. shortest, first)."""
    ev = trace.events
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    m = (np.asarray(pred.is_host(ev), dtype=bool) & (ev["name"].astype(object).to_numpy() == name)
         & (ts <= t_ns) & (end >= t_ns))
    rows = np.flatnonzero(m)
    return _ordered(ev, rows, -(end[rows] - ts[rows]), limit)


def interval(trace: Trace, rows: Iterable[int], *, top: int | None = None,
             pad_ratio: float = 0.05) -> tuple[int, int] | None:
    """The time window of evidence ``rows`` (positional rows of ``trace.events``): from the first start to the
    last end, widened by ``pad_ratio`` of its span on each side (at least 1 µs), int64 ns from the trace origin;
    None when no row is valid. What a view zooms to for a finding (the timeline's ``highlight=finding`` pads the
    same way). ``top``: only the first ``top`` valid rows (evidence rows come strongest first: ``top=1`` is the
    window of the finding's strongest event)."""
    r = np.asarray(list(rows), dtype=np.int64).reshape(-1)
    r = r[(r >= 0) & (r < len(trace.events))]
    if top is not None:
        r = r[: max(int(top), 0)]
    if r.size == 0:
        return None
    ts = trace.events["ts_ns"].to_numpy(np.int64)[r]
    end = ts + trace.events["dur_ns"].to_numpy(np.int64)[r]
    lo, hi = int(ts.min()), int(end.max())
    pad = max(int((hi - lo) * pad_ratio), 1000)
    return lo - pad, hi + pad


def finding_window(trace: Trace, finding: object) -> tuple[int, int] | None:
    """The window a finding's "show on the timeline" link zooms to (the report's and the live dashboard's): the
    :func:`interval` of its strongest evidence row (``top=1``) padded by half its span (``pad_ratio=0.5``, at least
    1 µs), int64 ns from the trace origin; None when the finding has no ``evidence_rows``."""
    return interval(trace, getattr(finding, "evidence_rows", None) or [], top=1, pad_ratio=0.5)
