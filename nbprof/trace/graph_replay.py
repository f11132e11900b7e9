"""CUDA-graph attribution: which host operator captured each device op a graph replay ran.

A CUDA graph replay is one runtime call (``cudaGraphLaunch``, ``cuGraphLaunch``, ``hipGraphLaunch``) whose
correlation id every device op of the replay carries (CUPTI reports the graph's kernels under the launch's
correlation; GindaChen/nsys-ai#236), so the correlation -> runtime call -> External id link lands all of them on the
one operator around the launch (TraceLens's vLLM graph trace: 421 of 425 kernels on the graph launch;
pytorch/pytorch#186026 asks for the layer names instead). This module maps each replayed device op to the operator
that captured it, by the first of three methods that works (the ``method`` column):

``capture``
    The trace holds the capture: runtime launch calls (``cudaLaunchKernel``, ``cuLaunchKernel``, async
    memcpy/memset...) of the capturing process between ``cudaStreamBeginCapture`` and the capturing thread's
    ``cudaStreamEndCapture`` (any thread: the autograd engine launches the backward), with no device op
    of their own (a captured launch runs nothing). The k-th captured launch is the k-th node of a replay with as
    many device ops (stream capture records nodes in launch order; a replay runs them in that order on one stream);
    its operator (External id) is the node's.
``sequence``
    No capture, but the same kernels ran eagerly in the trace (a warm-up or eager step): the replay's kernel names
    in start order are aligned with the eager kernels' names in launch order (``difflib.SequenceMatcher`` over the
    best-scoring window; the window is found from the first kernels' positions); each aligned pair gives the replayed
    kernel the eager kernel's operator. Only alignments covering at least half of the replay are taken.
``graph_order``
    Neither: the device op keeps the launch's operator (what the correlation link gives: ``op_event`` -1 here, the
    consumers keep their launch link), with the graph and its
    node index (CUPTI's ``graph id`` / ``graph node id`` args when the trace has them, else the replay's kernel
    sequence and start order) so the views can still tell the graph's nodes apart.

Replays of one graph (same kernel-name sequence) share one alignment. :func:`graph_replays` is the one attribution
of replayed device ops: ``nbprof.analysis.kernels.kernel_operators`` and the operator, module and efficiency
tables read its ``op_event`` (through :func:`replay_op_rows`). The model keeps it in ``trace.tables["graph_replay"]``,
computed when the trace is built, and the load report says the method and the match rate (kind
``cuda_graph_attribution``).
"""

from __future__ import annotations

import difflib
import itertools
import re
from typing import Any

import numpy as np
import pandas as pd

from ..units import fmt_pct_text
from . import predicates as pred
from .ids import present as id_present

__all__ = ["GRAPH_REPLAY_COLUMNS", "METHODS", "graph_replays", "replay_op_rows", "replay_positions", "replay_launches",
           "attribute_graph_replays", "captured_launches"]

#: Columns of :func:`graph_replays`.
GRAPH_REPLAY_COLUMNS = ("event", "launch", "graph", "node", "op_event", "method")
#: Attribution methods, best first.
METHODS = ("capture", "sequence", "graph_order")
#: Side-table name of the attribution.
TABLE = "graph_replay"

_BEGIN_RE = re.compile(r"^(cudaStreamBeginCapture|cuStreamBeginCapture|hipStreamBeginCapture)\w*$")
_END_RE = re.compile(r"^(cudaStreamEndCapture|cuStreamEndCapture|hipStreamEndCapture)\w*$")
#: Runtime/driver calls that enqueue a device op (a graph node when captured).
_ENQUEUE_RE = re.compile(r"^(cuda|cu|hip)(LaunchKernel|LaunchKernelExC|LaunchKernelEx|LaunchCooperativeKernel|"
                         r"ModuleLaunchKernel|ExtLaunchKernel|ExtModuleLaunchKernel|Memcpy\w*Async|Memset\w*Async|"
                         r"MemcpyAsync|MemsetAsync|MemsetD\w*Async)(_v\d+|_ptsz)?$")
#: Smallest share of a replay an eager alignment must cover to be taken.
MIN_SEQUENCE_MATCH = 0.5


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: np.zeros(0, np.int64) if c != "method" else np.zeros(0, object)
                         for c in GRAPH_REPLAY_COLUMNS})


def _op_of_launch(ev: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Per runtime-call row: the row of the first host op carrying its External id (-1 if none)."""
    ext = ev["external_id"].to_numpy()
    ops = np.flatnonzero(pred.is_host_op(ev) & id_present(ext) & (ext != 0))
    if not len(ops) or not len(rows):
        return np.full(len(rows), -1, np.int64)
    lut = pd.Series(ops, index=ext[ops])
    lut = lut[~lut.index.duplicated()]
    hit = lut.reindex(ext[rows]).to_numpy()
    return np.where(np.isnan(hit), -1, hit).astype(np.int64)


def _device_args(trace: Any, key: str, rows: np.ndarray) -> np.ndarray:
    """CUPTI's ``key`` (``graph id``, ``graph node id``) per device row from the ``device_args`` side table, NaN if
    absent."""
    da = (getattr(trace, "tables", None) or {}).get("device_args")
    out = np.full(len(rows), np.nan)
    if da is None or not len(da):
        return out
    sel = da[da["key"].astype(str) == key]
    if not len(sel):
        return out
    lut = pd.Series(sel["value"].to_numpy(np.float64), index=sel["event"].to_numpy(np.int64))
    lut = lut[~lut.index.duplicated()]
    return np.asarray(lut.reindex(rows).to_numpy(np.float64))


def captured_launches(ev: pd.DataFrame, *, whole_trace: bool = False) -> list[np.ndarray]:
    """The captured enqueue calls of each capture in an events table (runtime rows in call order, one array per
    capture): the enqueue calls between a ``cudaStreamBeginCapture`` and its thread's ``cudaStreamEndCapture`` that ran
    no device op. With ``whole_trace`` and no capture markers (a capture-only trace such as vLLM's
    ``graph_capture_rank_0...pt.trace.json.gz``), every enqueue call that ran no device op, as one capture."""
    corr = ev["correlation"].to_numpy()
    dev_corr = set(corr[pred.is_device_op(ev) & id_present(corr)].tolist())
    caps = _captures(ev, dev_corr)
    if caps or not whole_trace:
        return caps
    rt = pred.is_runtime(ev) & pred.is_host(ev)
    enq = np.flatnonzero(rt & pred.name_mask(ev["name"], _ENQUEUE_RE.match))
    sel = enq[[int(c) not in dev_corr for c in corr[enq]]]
    return [sel[np.argsort(ev["ts_ns"].to_numpy(np.int64)[sel], kind="stable")]] if len(sel) else []


def _captures(ev: pd.DataFrame, dev_corr: set[int]) -> list[np.ndarray]:
    """The captured enqueue calls of each capture (runtime rows in call order), one array per capture."""
    names = ev["name"]
    rt = pred.is_runtime(ev) & pred.is_host(ev)
    begin = np.flatnonzero(rt & pred.name_mask(names, _BEGIN_RE.match))
    if not len(begin):
        return []
    end = np.flatnonzero(rt & pred.name_mask(names, _END_RE.match))
    enq = np.flatnonzero(rt & pred.name_mask(names, _ENQUEUE_RE.match))
    ts = ev["ts_ns"].to_numpy(np.int64)
    tid = ev["tid"].to_numpy()
    pid = ev["pid"].to_numpy()
    corr = ev["correlation"].to_numpy()
    out = []
    for b in begin:
        later = end[(ts[end] >= ts[b]) & (tid[end] == tid[b]) & (pid[end] == pid[b])]
        e_ts = ts[later].min() if len(later) else np.iinfo(np.int64).max
        # every thread of the process: the autograd engine's thread launches the backward into the captured stream
        sel = enq[(ts[enq] > ts[b]) & (ts[enq] < e_ts) & (pid[enq] == pid[b])]
        sel = sel[[int(c) not in dev_corr for c in corr[sel]]]  # a captured launch runs nothing
        if len(sel):
            out.append(sel[np.argsort(ts[sel], kind="stable")])
    return out


def _align(seq: np.ndarray, eager: np.ndarray) -> np.ndarray:
    """Per position of ``seq``: the aligned position in ``eager`` (-1 where none), over the best window."""
    m, n = len(seq), len(eager)
    out = np.full(m, -1, np.int64)
    if not m or not n:
        return out
    starts: set[int] = set()
    for j in range(min(m, 8)):
        for i in np.flatnonzero(eager == seq[j])[:2000]:
            starts.add(int(i) - j)
    if not starts:
        return out
    best, best_s = -1, 0
    for s in sorted(starts):
        lo, hi = max(s, 0), min(s + m, n)
        if hi <= lo:
            continue
        score = int((eager[lo:hi] == seq[lo - s:hi - s]).sum())
        if score > best:
            best, best_s = score, s
    lo, hi = max(best_s - m // 4, 0), min(best_s + m + m // 4, n)
    sm = difflib.SequenceMatcher(None, seq.tolist(), eager[lo:hi].tolist(), autojunk=False)
    for blk in sm.get_matching_blocks():
        out[blk.a:blk.a + blk.size] = np.arange(lo + blk.b, lo + blk.b + blk.size)
    return out


def _still_valid(trace: Any, table: pd.DataFrame) -> bool:
    """Whether a kept ``graph_replay`` table still indexes these events (a trace rebuilt from another's tables,
    e.g. a merge, has other rows): every row's device op and launch exist and share the correlation id."""
    if not len(table):
        return True
    ev = trace.events
    n = len(ev)
    e, la = table["event"].to_numpy(np.int64), table["launch"].to_numpy(np.int64)
    if e.max() >= n or la.max() >= n or e.min() < 0 or la.min() < 0:
        return False
    corr = ev["correlation"].to_numpy()
    return bool((corr[e] == corr[la]).all() and pred.is_graph_launch(ev.iloc[np.unique(la)]).all())


def graph_replays(trace: Any) -> pd.DataFrame:
    """The attribution of every device op a CUDA-graph replay ran (module docstring for the methods).

    Parameters
    ----------
    trace : nbprof.Trace

    Returns
    -------
    pandas.DataFrame
        One row per replayed device op (kernel, memcpy, memset whose correlation id is a graph launch's), in events
        order: ``event`` (row in ``trace.events``), ``launch`` (row of the graph launch call), ``graph`` (0, 1, ...:
        CUPTI's ``graph id`` when recorded, else one number per distinct kernel sequence), ``node`` (index of the op
        in its replay: CUPTI's ``graph node id`` order when recorded, else start order), ``op_event`` (row of the
        operator the op is attributed to: the capturing operator or the matched eager kernel's operator; -1 for
        ``graph_order``, where the launch's operator stays), ``method`` (one of :data:`METHODS`). Empty (with these
        columns) without graph launches.
    """
    cached = (getattr(trace, "tables", None) or {}).get(TABLE)
    if cached is not None and _still_valid(trace, cached):
        return cached
    ev = trace.events
    rt = pred.is_runtime(ev) & pred.is_host(ev)
    launches = np.flatnonzero(rt & pred.is_graph_launch(ev))
    if not len(launches):
        return _empty()
    corr = ev["correlation"].to_numpy()
    devrows = np.flatnonzero(pred.is_device_op(ev) & id_present(corr))
    lcorr = pd.Series(launches, index=corr[launches])
    lcorr = lcorr[~lcorr.index.duplicated()]
    hit = lcorr.reindex(corr[devrows]).to_numpy()
    rep = ~np.isnan(hit)
    rows, launch = devrows[rep], hit[rep].astype(np.int64)
    if not len(rows):
        return _empty()
    ts = ev["ts_ns"].to_numpy(np.int64)
    gid = _device_args(trace, "graph id", rows)
    nid = _device_args(trace, "graph node id", rows)
    order = np.lexsort((np.nan_to_num(nid, nan=0.0), ts[rows], launch))
    rows, launch, gid, nid = rows[order], launch[order], gid[order], nid[order]
    name_codes = np.asarray(ev["name"].cat.codes.to_numpy(np.int64)) if isinstance(
        ev["name"].dtype, pd.CategoricalDtype) else pd.factorize(ev["name"].astype(object).to_numpy())[0]
    codes = name_codes[rows]
    bounds = np.flatnonzero(np.r_[True, launch[1:] != launch[:-1], True])
    # graph key: CUPTI's graph id, else the kernel-name sequence of the replay
    sig: dict[Any, int] = {}
    graph = np.zeros(len(rows), np.int64)
    node = np.zeros(len(rows), np.int64)
    for a, b in itertools.pairwise(bounds.tolist()):
        key = ("id", float(gid[a])) if np.isfinite(gid[a]) else ("seq", tuple(codes[a:b].tolist()))
        graph[a:b] = sig.setdefault(key, len(sig))
        node[a:b] = np.arange(b - a)
    op_event = np.full(len(rows), -1, np.int64)  # graph_order: the launch link decides
    method = np.full(len(rows), "graph_order", dtype=object)
    dev_corr = set(corr[devrows].tolist())
    caps = _captures(ev, dev_corr)
    cap_ops = [_op_of_launch(ev, c) for c in caps]
    # eager device ops in launch order, their names coded like the replays'
    eager = devrows[~np.isin(devrows, rows)]
    eager_rt = np.full(len(eager), -1, np.int64)
    rt_rows = np.flatnonzero(rt & id_present(corr))
    if len(eager) and len(rt_rows):
        lut = pd.Series(rt_rows, index=corr[rt_rows])
        lut = lut[~lut.index.duplicated()]
        h = lut.reindex(corr[eager]).to_numpy()
        eager_rt = np.where(np.isnan(h), -1, h).astype(np.int64)
    keep = eager_rt >= 0
    eager, eager_rt = eager[keep], eager_rt[keep]
    eo = np.argsort(ts[eager_rt], kind="stable")
    eager, eager_rt = eager[eo], eager_rt[eo]
    eager_ops = _op_of_launch(ev, eager_rt)
    eager_codes = name_codes[eager]
    done: dict[int, tuple[str, np.ndarray]] = {}
    used_caps: set[int] = set()
    for a, b in itertools.pairwise(bounds.tolist()):
        g = int(graph[a])
        if g not in done:
            m = b - a
            # the first unused capture with as many launches as the replay has device ops (graphs in the order of
            # their first replay, captures in the order they were made)
            ci = next((i for i, c in enumerate(cap_ops) if len(c) == m and i not in used_caps), None)
            if ci is not None:
                used_caps.add(ci)
                done[g] = ("capture", cap_ops[ci])
            else:
                pos = _align(codes[a:b], eager_codes)
                ok = pos >= 0
                if ok.sum() >= MIN_SEQUENCE_MATCH * m:
                    done[g] = ("sequence", np.where(ok, eager_ops[np.clip(pos, 0, None)], -1))
                else:
                    done[g] = ("graph_order", np.full(m, -1, np.int64))
        how, ops = done[g]
        if how == "graph_order":
            continue
        good = ops >= 0
        idx = np.arange(a, b)[good]
        op_event[idx] = ops[good]
        method[idx] = how
    out = pd.DataFrame({"event": rows, "launch": launch, "graph": graph, "node": node, "op_event": op_event,
                        "method": method})
    return out.sort_values("event", kind="stable").reset_index(drop=True)


def replay_op_rows(trace: Any) -> pd.Series:
    """Replayed device op row -> the row of its attributed operator (:func:`graph_replays`), for the device ops whose
    method is ``capture`` or ``sequence`` (the others keep the launch's operator, which the correlation link already
    gives). Empty without graph replays."""
    g = graph_replays(trace)
    g = g[g["method"] != "graph_order"]
    return pd.Series(g["op_event"].to_numpy(np.int64), index=g["event"].to_numpy(np.int64))


def replay_positions(trace: Any, dev_rows: np.ndarray, op_rows: np.ndarray) -> np.ndarray:
    """Per row of ``dev_rows`` (device-op rows of ``trace.events``): the position in ``op_rows`` (operator rows, e.g.
    a host call tree's) of the operator :func:`replay_op_rows` attributes it to; -1 for a device op that is not
    replayed, left on its launch (``graph_order``), or whose operator is not in ``op_rows``."""
    out = np.full(len(dev_rows), -1, np.int64)
    rep = replay_op_rows(trace)
    if not len(rep) or not len(dev_rows):
        return out
    op = rep.reindex(np.asarray(dev_rows, np.int64)).to_numpy()
    pos = pd.Series(np.arange(len(op_rows)), index=np.asarray(op_rows, np.int64))
    pos = pos[~pos.index.duplicated()]
    has = np.flatnonzero(~np.isnan(op))
    tp = pos.reindex(op[has].astype(np.int64)).to_numpy()
    ok = ~np.isnan(tp)
    out[has[ok]] = tp[ok].astype(np.int64)
    return out


def replay_launches(trace: Any, dev_rows: np.ndarray) -> np.ndarray:
    """Per row of ``dev_rows``: the graph launch row of the replay that ran it when it is attributed to a capturing
    operator (``capture`` / ``sequence``), else -1. One replay is one execution of the operators it captured."""
    g = graph_replays(trace)
    g = g[g["method"] != "graph_order"]
    if not len(g) or not len(dev_rows):
        return np.full(len(dev_rows), -1, np.int64)
    lut = pd.Series(g["launch"].to_numpy(np.int64), index=g["event"].to_numpy(np.int64))
    return np.asarray(lut.reindex(np.asarray(dev_rows, np.int64)).fillna(-1).to_numpy(np.int64))


def attribute_graph_replays(trace: Any) -> None:
    """Compute :func:`graph_replays` once, keep it in ``trace.tables["graph_replay"]`` and say in the load report
    (kind ``cuda_graph_attribution``, action ``assumed``) how many replayed device ops each method attributed: the
    match rate is the share attributed by ``capture`` or ``sequence``. Nothing without graph launches."""
    tables = getattr(trace, "tables", None)
    if tables is None or not {"name", "cat", "correlation", "device"} <= set(trace.events.columns):
        return
    if TABLE in tables:
        if _still_valid(trace, tables[TABLE]):
            return
        del tables[TABLE]  # rows of another events table (a merge copies the Kineto side tables): redo
    g = graph_replays(trace)
    if not len(g):
        return
    tables[TABLE] = g
    n = len(g)
    counts = g["method"].value_counts()
    matched = int(counts.get("capture", 0) + counts.get("sequence", 0))
    parts = ", ".join(f"{int(counts.get(m, 0))} by {m}" for m in METHODS if counts.get(m, 0))
    n_graphs = int(g["graph"].nunique())
    n_launch = int(g["launch"].nunique())
    trace.report.add(
        "cuda_graph_attribution", "assumed", n,
        f"{n} device ops of {n_launch} CUDA-graph replays ({n_graphs} graphs): {parts}; match rate {fmt_pct_text(matched / n, 1)} "
        f"attributed to the operators that captured them (capture: the captured launches in order; sequence: "
        f"aligned with the same kernels run eagerly; graph_order: left on the graph launch's operator, with graph "
        f"and node index) in trace.tables['graph_replay']")
