"""Several ranks: one graph over every rank's trace, joined by ``collective`` edges.

:func:`merge_ranks` puts the ranks' events on one clock and keeps them apart: ``ts_ns`` is shifted by
each trace's absolute origin (``meta.origin_ns``, Kineto ``baseTimeNanoseconds``) to the earliest
rank's origin; ``pid`` becomes ``pid + i * 2**24``, ``device`` ``device + i * 1024`` (on devices),
``correlation`` ``correlation + i * 2**40``, for the ``i``-th trace given; the ``rank`` column holds
``trace.meta.rank``.

``collective`` edges (source of truth: the order of the communication kernels,
:func:`nbprof.trace.predicates.is_communication` on a device, on each rank): the k-th collective of a
communicator on every rank is one barrier, so no rank's k-th kernel can end before every rank's k-th
kernel has started: an edge from the start of each rank's k-th kernel to the end of every other
rank's, weighing the measured time between them (HTA weight and replay weight alike, so an
unchanged replay still reproduces every measured time). The communicator is the kernel's
``pg_name`` (Kineto ``Process Group Name``); without it all of a rank's collectives form one
sequence. Only the first ``min`` count over the ranks is matched; an edge that would run backwards
in time (clock skew larger than the collective) is dropped and counted in ``Graph.dropped_edges``.

Sources: the ranks' own traces; clocks are as synchronised as the hosts' (NTP/PTP), which is what
HTA's and TraceLens's multi-rank views assume too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from ...trace import ids
from ...trace import predicates as pred
from ...trace.model import Trace
from .graph import build_graph
from .model import COLLECTIVE, Graph
from .path import CriticalPath, path_of_graph
from .path import critical_path as _critical_path_one

_PID_SHIFT = 1 << 24
_DEV_SHIFT = 1024
_CORR_SHIFT = 1 << 40


def merge_ranks(traces: Sequence[Trace]) -> Trace:
    """The ranks' traces as one :class:`~nbprof.trace.model.Trace` on one clock (see the module docstring).

    Raises
    ------
    ValueError
        For an empty list.
    """
    if not traces:
        raise ValueError("no trace given")
    origin = min(int(t.meta.origin_ns or 0) for t in traces)
    evs, fls = [], []
    for i, t in enumerate(traces):
        shift = int(t.meta.origin_ns or 0) - origin
        e = t.events.copy()
        for c in ("name", "cat"):
            e[c] = e[c].astype(object)
        e["ts_ns"] = e["ts_ns"].to_numpy(np.int64) + shift
        e["pid"] = e["pid"].to_numpy(np.int64) + i * _PID_SHIFT
        dev = e["device"].to_numpy(np.int64)
        e["device"] = np.where(dev >= 0, dev + i * _DEV_SHIFT, dev)
        corr = e["correlation"].to_numpy(np.int64)
        e["correlation"] = np.where(ids.present(corr), corr + i * _CORR_SHIFT, corr)
        e["rank"] = np.int32(t.meta.rank)
        evs.append(e)
        f = t.flows.copy()
        if len(f):
            for c in ("src_ts_ns", "dst_ts_ns"):
                if c in f:
                    v = f[c].to_numpy(np.int64)
                    f[c] = np.where(v >= 0, v + shift, v)
            for c in ("src_pid", "dst_pid"):
                if c in f:
                    f[c] = f[c].to_numpy(np.int64) + i * _PID_SHIFT
        fls.append(f)
    ev = pd.concat(evs, ignore_index=True)
    ev = ev.sort_values("ts_ns", kind="stable").reset_index(drop=True)
    for c in ("name", "cat"):
        ev[c] = ev[c].astype("category")
    fl = pd.concat(fls, ignore_index=True) if fls else traces[0].flows
    return replace(traces[0], events=ev, flows=fl, tables={})


def add_collective_edges(trace: Trace, g: Graph) -> Graph:
    """``g`` with the ``collective`` edges of the merged ``trace`` (:func:`merge_ranks`) added."""
    ev = trace.events
    node_of_start = pd.Series(g.start, index=g.rows)
    node_of_end = pd.Series(g.end, index=g.rows)
    comm = np.asarray(pred.is_communication(ev, where="device"), dtype=bool)
    comm &= np.asarray(pred.is_device_op(ev), dtype=bool)
    in_g = np.zeros(len(ev), bool)
    in_g[g.rows] = True
    rows = np.flatnonzero(comm & in_g)
    if rows.size == 0:
        return g
    rank = ev["rank"].to_numpy(np.int64)[rows]
    pg = ev["pg_name"].astype(object).fillna("").astype(str).to_numpy()[rows] if "pg_name" in ev else np.full(rows.size, "")
    ts = ev["ts_ns"].to_numpy(np.int64)[rows]
    df = pd.DataFrame({"row": rows, "rank": rank, "pg": pg, "ts": ts}).sort_values(["pg", "rank", "ts"], kind="stable")
    df["k"] = df.groupby(["pg", "rank"], sort=False).cumcount()
    src, dst = [], []
    for _pg, d in df.groupby("pg", sort=False):
        n_ranks = d["rank"].nunique()
        if n_ranks < 2:
            continue
        kmax = int(d.groupby("rank")["k"].max().min())
        d = d[d["k"] <= kmax]
        m = d.merge(d, on="k", suffixes=("_a", "_b"))
        m = m[m["rank_a"] != m["rank_b"]]
        src.append(node_of_start.reindex(m["row_a"].to_numpy()).to_numpy(np.int64))
        dst.append(node_of_end.reindex(m["row_b"].to_numpy()).to_numpy(np.int64))
    if not src:
        return g
    s = np.concatenate(src)
    d2 = np.concatenate(dst)
    fwd = s < d2
    s, d2 = s[fwd], d2[fwd]
    w = (g.t[d2] - g.t[s]).astype(np.int64)
    k = s.size
    return replace(g, src=np.concatenate([g.src, s]), dst=np.concatenate([g.dst, d2]),
                   kind=np.concatenate([g.kind, np.full(k, COLLECTIVE, np.int8)]),
                   owner=np.concatenate([g.owner, np.full(k, -1, np.int64)]),
                   hta_w=np.concatenate([g.hta_w, w]), wmin=np.concatenate([g.wmin, w]),
                   dropped_edges=g.dropped_edges + int((~fwd).sum()),
                   dep_via=None if g.dep_via is None else np.concatenate([g.dep_via, np.full(k, -1, np.int64)]),
                   dep_off=None if g.dep_off is None else np.concatenate([g.dep_off, np.zeros(k, np.int64)]))


def critical_path_ranks(traces: Sequence[Trace], step: int | None = None, *, slack: bool = True,
                        model: str = "hta") -> CriticalPath:
    """The critical path across ranks: :func:`merge_ranks`, :func:`build_graph`, collective edges, longest path.

    ``CriticalPath.events`` are rows of the merged table (their ``rank`` column says whose), and
    ``row_ids`` / ``slack_ns`` refer to ``merge_ranks(traces).events``.
    """
    merged = merge_ranks(traces)
    g = add_collective_edges(merged, build_graph(merged, step))
    return path_of_graph(merged, g, slack=slack, model=model)


def critical_path(trace: Trace | Sequence[Trace], step: int | None = None, *, annotation: str | None = None,
                  instance: int | tuple[int, int] = 0, window: tuple[int, int] | None = None,
                  sync_args: pd.DataFrame | None = None, slack: bool = True, model: str = "hta") -> CriticalPath:
    """The critical path of one trace (:func:`nbprof.analysis.critical_path.path.critical_path`: HTA's
    definition, all parameters) or, given a list of the ranks' traces, across ranks
    (:func:`critical_path_ranks`: ``step``, ``slack`` and ``model`` only).

    Raises
    ------
    ValueError
        As the single-trace function; for ``annotation``/``window``/``sync_args`` with several ranks.
    """
    if isinstance(trace, Trace):
        return _critical_path_one(trace, step, annotation=annotation, instance=instance, window=window,
                                  sync_args=sync_args, slack=slack, model=model)
    if annotation is not None or window is not None or sync_args is not None:
        raise ValueError("across ranks only step, slack and model apply")
    return critical_path_ranks(list(trace), step, slack=slack, model=model)
