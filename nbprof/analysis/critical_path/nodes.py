"""The nodes of :func:`~nbprof.analysis.critical_path.graph.build_graph`: which events a window selects (HTA's
clipping), their start/end nodes in topological (time) order, and :class:`EdgeBlock`, the columns one edge
builder returns (:mod:`.host_edges`, :mod:`.device_edges`, :mod:`.sync_edges`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ...trace import ids, schema
from ...trace.model import Trace
from ...trace.predicates import is_communication, is_step_row
from ...trace.predicates import name_mask as _name_mask
from .model import _DEV_CATS, _HOST_CATS, _HTA_HOST_CATS, BLOCKING_CALLS, LAUNCH_NAMES, _Lookup


class EdgeBlock(NamedTuple):
    """The edges one builder adds, as the columns of :class:`~.model.Graph` (node ids in time order; ``kind``
    an ``EDGE_KINDS`` code; ``owner`` a row id or -1; ``hta_w`` / ``wmin`` ns, ``hta_w`` -1 when not in HTA's
    graph; ``via``: the device op index (into the selected device ops) a replay weight is tied to, -1 none;
    ``via_edge``: the edge (an index among the graph's edges: a ``host`` interval, whose block comes first) a
    replay weight is tied to, -1 none)."""

    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    owner: np.ndarray
    hta_w: np.ndarray
    wmin: np.ndarray
    via: np.ndarray
    via_edge: np.ndarray


def block(src: np.ndarray, dst: np.ndarray, kind: int, owner: np.ndarray | None = None,
          hta_w: np.ndarray | None = None, wmin: np.ndarray | None = None,
          via: np.ndarray | None = None, via_edge: np.ndarray | None = None) -> EdgeBlock:
    """An :class:`EdgeBlock` of ``src.size`` edges of one ``kind``; ``owner``, ``via`` and ``via_edge`` default to
    -1, ``hta_w`` to -1 (not in HTA's graph) and ``wmin`` to 0 ns."""
    k = src.size
    minus = np.full(k, -1, np.int64)
    return EdgeBlock(src, dst, np.full(k, kind, np.int8), minus if owner is None else owner,
                     minus if hta_w is None else hta_w, np.zeros(k, np.int64) if wmin is None else wmin,
                     minus if via is None else via, minus if via_edge is None else via_edge)


def concat_blocks(blocks: list[EdgeBlock]) -> EdgeBlock:
    """The edges of ``blocks``, in order, as one block (int64 columns, ``kind`` int8; empty when none)."""
    if not blocks:
        z = np.zeros(0, np.int64)
        return EdgeBlock(z, z, np.zeros(0, np.int8), z, z, z, z, z)
    cols = [np.concatenate([b[i] for b in blocks]).astype(np.int64) for i in range(len(EdgeBlock._fields))]
    cols[2] = cols[2].astype(np.int8)
    return EdgeBlock(*cols)


def marker_sequence(tkey: np.ndarray, ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Call-stack order of the start/end markers of host events, per thread.

    Returns ``order`` over 2k markers (marker i < k is the start of event i, i >= k the end of event
    i-k) sorted by (thread, time, ends before starts, outer starts first, inner ends first), the
    per-event parent (index into the events, -1 top level) from the depth of each start, and the depth
    after each marker of ``order`` within its thread.
    """
    k = ts.size
    # start rank: (thread, ts, -dur)
    srank = np.empty(k, dtype=np.int64)
    so = np.lexsort((-(end - ts), ts, tkey))
    srank[so] = np.arange(k)
    m_t = np.concatenate([ts, end])
    m_thread = np.concatenate([tkey, tkey])
    m_isstart = np.concatenate([np.ones(k, np.int8), np.zeros(k, np.int8)])
    m_tie = np.concatenate([srank, -srank])
    order = np.lexsort((m_tie, m_isstart, m_t, m_thread))
    # depth after each marker within a thread
    step = np.where(m_isstart[order] == 1, 1, -1).astype(np.int64)
    th = m_thread[order]
    newth = np.ones(order.size, dtype=bool)
    newth[1:] = th[1:] != th[:-1]
    cs = np.cumsum(step)
    base = np.maximum.accumulate(np.where(newth, np.arange(order.size), 0))
    before = np.where(base > 0, cs[base - 1], 0)
    depth_after = cs - before  # depth after the marker, within its thread
    parent = np.full(k, -1, dtype=np.int64)
    is_s = m_isstart[order] == 1
    spos = np.flatnonzero(is_s)
    sev = order[spos]
    sdepth = depth_after[spos]  # 1 = top level
    # parent: the last start at depth d-1 on the same thread before this start
    for d in range(2, int(sdepth.max()) + 1 if sdepth.size else 0):
        cur = sdepth == d
        cand = np.flatnonzero(sdepth == d - 1)
        if cand.size == 0:
            continue
        j = np.searchsorted(spos[cand], spos[cur], side="right") - 1
        ok = j >= 0
        pj = cand[np.clip(j, 0, None)]
        ok &= th[spos[pj]] == th[spos[cur]]
        parent[sev[cur][ok]] = sev[pj[ok]]
    return order, parent, depth_after


def _eligible_ancestors(eligible: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per host event: the innermost HTA-eligible ancestor-or-self (``near``) and strict ancestor
    (``hta_parent``), indices into the events or -1 (pointer jumping over the ``parent`` chain)."""
    kh = eligible.size
    hta_self = np.where(eligible, np.arange(kh), -1)
    near = hta_self.copy()
    anc = parent.copy()
    need = near < 0
    while True:
        act = np.flatnonzero(need & (anc >= 0))
        if act.size == 0:
            break
        a = anc[act]
        got = hta_self[a] >= 0
        near[act[got]] = hta_self[a[got]]
        need[act[got]] = False
        anc[act] = parent[a]
    hta_parent = np.full(kh, -1, dtype=np.int64)
    has_p = parent >= 0
    hta_parent[has_p] = near[parent[has_p]]
    return near, hta_parent


@dataclass
class Selection:
    """The events of one window and their nodes, shared by the edge builders.

    Arrays ``*_all`` are per row of ``trace.events`` (times int64 ns); ``host_rows`` (kh) / ``dev_rows`` (kd)
    are the selected rows, host ``i`` and device op ``j`` indexing them. Nodes: host start ``hs(i)``, host end
    ``he(i)``, device start ``ds(j)``, device end ``de(j)`` (ids in time order, ``t`` their times).
    """

    trace: Trace
    w0: int
    w1: int
    cat_is: Any
    ts_all: np.ndarray
    dur_all: np.ndarray
    end_all: np.ndarray
    dev_col: np.ndarray
    corr_all: np.ndarray
    pid_all: np.ndarray
    tid_all: np.ndarray
    stream_all: np.ndarray
    names: pd.Series
    step_rows_all: np.ndarray
    comm_all: np.ndarray
    rt_by_corr: _Lookup
    dev_rows_all: np.ndarray  # launched device ops of the whole trace, and their runtime call rows
    launcher_all: np.ndarray
    host_rows: np.ndarray
    dev_rows: np.ndarray
    dev_launcher: np.ndarray
    tkey: np.ndarray  # host event's thread key (pid << 32 | tid)
    h_ts: np.ndarray
    h_end: np.ndarray
    order: np.ndarray  # marker_sequence's call-stack order of the host markers
    parent: np.ndarray
    near: np.ndarray
    hta_parent: np.ndarray
    hcat_hta: np.ndarray
    d_ts: np.ndarray
    d_end: np.ndarray
    d_dev: np.ndarray
    d_stream: np.ndarray
    host_pos: np.ndarray  # per row: index among host_rows, -1 none
    d_lpos: np.ndarray  # per device op: its launcher's host index
    pos: np.ndarray  # node id of each marker (host starts, host ends, device starts, device ends)
    t: np.ndarray
    node_row: np.ndarray

    @property
    def kh(self) -> int:
        """Number of selected host events."""
        return int(self.host_rows.size)

    @property
    def kd(self) -> int:
        """Number of selected device ops."""
        return int(self.dev_rows.size)

    def hs(self, i: np.ndarray) -> np.ndarray:
        """Start node of host events ``i``."""
        return np.asarray(self.pos[i])

    def he(self, i: np.ndarray) -> np.ndarray:
        """End node of host events ``i``."""
        return np.asarray(self.pos[self.kh + i])

    def ds(self, j: np.ndarray) -> np.ndarray:
        """Start node of device ops ``j``."""
        return np.asarray(self.pos[2 * self.kh + j])

    def de(self, j: np.ndarray) -> np.ndarray:
        """End node of device ops ``j``."""
        return np.asarray(self.pos[2 * self.kh + self.kd + j])

    def host_mask(self, pred: Any) -> np.ndarray:
        """``pred(name)`` per selected host event (bool array)."""
        return np.asarray(_name_mask(self.names, pred)[self.host_rows])

    @property
    def blocking_h(self) -> np.ndarray:
        """Per host event: a blocking runtime call (``BLOCKING_CALLS``)."""
        return np.asarray(self.host_mask(lambda n: n in BLOCKING_CALLS)
                          & self.cat_is(schema.RUNTIME_CATEGORIES)[self.host_rows])

    @property
    def launch_h(self) -> np.ndarray:
        """Per host event: a launch call (``LAUNCH_NAMES``)."""
        return self.host_mask(lambda n: n in LAUNCH_NAMES)


def _category_test(ev: pd.DataFrame) -> Any:
    """``cat_is(names)``: per row of ``ev``, whether its category is one of ``names`` (bool array)."""
    cat = ev["cat"]
    n_ev = len(ev)
    cat_codes = cat.cat.codes.to_numpy() if isinstance(cat.dtype, pd.CategoricalDtype) else None

    def cat_is(names: Iterable[str]) -> np.ndarray:
        if cat_codes is not None:
            cats = list(cat.cat.categories)
            ids = [cats.index(c) for c in names if c in cats]
            return np.isin(cat_codes, ids) if ids else np.zeros(n_ev, bool)
        return np.asarray(cat.isin(list(names)).to_numpy(), dtype=bool)
    return cat_is


def select(trace: Trace, w0: int, w1: int) -> Selection:
    """The events of window ``[w0, w1]`` (ns) and their nodes: host events of ``_HOST_CATS`` with ``dur_ns > 0``
    starting inside it, and the device ops (``_DEV_CATS``) whose launching runtime call (same ``correlation``)
    is selected (HTA's clipping). Nodes are ordered by time, then host markers in call-stack order before
    device nodes, a device op's start before its end."""
    ev = trace.events
    ts_all = ev["ts_ns"].to_numpy(np.int64)
    dur_all = ev["dur_ns"].to_numpy(np.int64)
    end_all = ts_all + dur_all
    cat_is = _category_test(ev)
    dev_col = ev["device"].to_numpy()
    corr_all = ev["correlation"].to_numpy(np.int64)
    # runtime <-> device op (correlation); HTA: the runtime with that correlation
    rt_rows = np.flatnonzero(cat_is(schema.RUNTIME_CATEGORIES) & (dev_col < 0) & ids.present(corr_all))
    rt_by_corr = _Lookup(corr_all[rt_rows], rt_rows)
    dev_rows_all = np.flatnonzero(cat_is(_DEV_CATS) & (dev_col >= 0) & ids.present(corr_all))
    launcher_all = rt_by_corr.get(corr_all[dev_rows_all])
    has_l = launcher_all >= 0
    dev_rows_all, launcher_all = dev_rows_all[has_l], launcher_all[has_l]
    # HTA's clipping
    host_sel = cat_is(_HOST_CATS) & (dev_col < 0) & (dur_all > 0) & (ts_all >= w0) & (ts_all <= w1)
    l_ts = ts_all[launcher_all]
    dsel = (l_ts >= w0) & (l_ts <= w1) & (dur_all[launcher_all] > 0) & host_sel[launcher_all]
    dev_rows, dev_launcher = dev_rows_all[dsel], launcher_all[dsel]
    host_rows = np.flatnonzero(host_sel)
    pid_all, tid_all = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    tkey = pid_all[host_rows] * (1 << 32) + (tid_all[host_rows] & 0xFFFFFFFF)
    h_ts, h_end = ts_all[host_rows], end_all[host_rows]
    order, parent, _depth = marker_sequence(tkey, h_ts, h_end)
    hcat_hta = cat_is(_HTA_HOST_CATS)[host_rows]
    near, hta_parent = _eligible_ancestors(hcat_hta, parent)
    kh = host_rows.size
    host_pos = np.full(len(ev), -1, dtype=np.int64)
    host_pos[host_rows] = np.arange(kh)
    d_ts, d_end = ts_all[dev_rows], end_all[dev_rows]
    pos, t, node_row = _node_order(order, h_ts, h_end, d_ts, d_end, host_rows, dev_rows)
    return Selection(
        trace=trace, w0=w0, w1=w1, cat_is=cat_is, ts_all=ts_all, dur_all=dur_all, end_all=end_all, dev_col=dev_col,
        corr_all=corr_all, pid_all=pid_all, tid_all=tid_all, stream_all=ev["stream"].to_numpy(np.int64),
        names=ev["name"], step_rows_all=is_step_row(ev), comm_all=np.asarray(is_communication(ev), dtype=bool),
        rt_by_corr=rt_by_corr, dev_rows_all=dev_rows_all, launcher_all=launcher_all, host_rows=host_rows,
        dev_rows=dev_rows, dev_launcher=dev_launcher, tkey=tkey, h_ts=h_ts, h_end=h_end, order=order, parent=parent,
        near=near, hta_parent=hta_parent, hcat_hta=hcat_hta, d_ts=d_ts, d_end=d_end,
        d_dev=dev_col[dev_rows].astype(np.int64), d_stream=ev["stream"].to_numpy(np.int64)[dev_rows],
        host_pos=host_pos, d_lpos=host_pos[dev_launcher], pos=pos, t=t, node_row=node_row)


def _node_order(order: np.ndarray, h_ts: np.ndarray, h_end: np.ndarray, d_ts: np.ndarray, d_end: np.ndarray,
                host_rows: np.ndarray, dev_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Node ids of the markers (host starts 0..kh-1, host ends, device starts, device ends) in global order:
    time, then host markers before device nodes (launch: runtime start then op start), then a tie rank (host
    markers in call-stack ``order``; a device start before its end). Returns (pos, sorted times ns, row of
    each node)."""
    kh, kd = h_ts.size, d_ts.size
    n_nodes = 2 * kh + 2 * kd
    node_t = np.concatenate([h_ts, h_end, d_ts, d_end])
    tie = np.empty(n_nodes, dtype=np.int64)
    mrank = np.empty(2 * kh, dtype=np.int64)
    mrank[order] = np.arange(2 * kh)
    tie[: 2 * kh] = mrank
    tie[2 * kh:] = np.concatenate([np.zeros(kd, np.int64), np.ones(kd, np.int64)])
    grp = np.concatenate([np.zeros(2 * kh, np.int64), np.ones(2 * kd, np.int64)])
    norder = np.lexsort((tie, grp, node_t))
    pos = np.empty(n_nodes, dtype=np.int64)
    pos[norder] = np.arange(n_nodes)
    rows_local = np.concatenate([host_rows, host_rows, dev_rows, dev_rows])
    return pos, node_t[norder], rows_local[norder]
