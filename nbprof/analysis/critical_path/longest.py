"""Longest paths in the graph's DAG (topological = node order) and the replay of node times."""

from __future__ import annotations

import numpy as np

from .model import Graph


def longest_path(n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray,
                 base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longest paths in a DAG whose nodes ``0..n-1`` are in topological order (``src < dst``).

    ``dist[v] = base[v]`` for a node without in-edges, else ``max(dist[u] + w)`` over its in-edges
    (ties: the first in-edge in array order). Nodes with one in-edge are resolved by pointer jumping
    (vectorised, log depth rounds); only nodes with several in-edges go through a Python loop.

    Returns
    -------
    dist : ndarray int64 (n,)
    pred_edge : ndarray int64 (n,)
        The in-edge each node's longest path arrives by, -1 for sources.
    """
    m = src.size
    indeg = np.bincount(dst, minlength=n) if m else np.zeros(n, np.int64)
    order = np.argsort(dst, kind="stable")
    s_src, s_w = src[order], w[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(indeg, out=ptr[1:])
    pred_edge = np.full(n, -1, dtype=np.int64)
    single = indeg == 1
    anc = np.arange(n, dtype=np.int64)
    acc = np.zeros(n, dtype=np.int64)
    sv = np.flatnonzero(single)
    anc[sv] = s_src[ptr[sv]]
    acc[sv] = s_w[ptr[sv]]
    pred_edge[sv] = order[ptr[sv]]
    act = sv
    while act.size:
        a = anc[act]
        acc[act] += acc[a]
        anc[act] = anc[a]
        act = act[anc[anc[act]] != anc[act]]
    # roots: sources and merge nodes; resolve merges in order
    dist_root = base.astype(np.int64).copy()
    merges = np.flatnonzero(indeg >= 2)
    if merges.size:
        e_lo = ptr[merges]
        e_hi = ptr[merges + 1]
        cnt = e_hi - e_lo
        eidx = np.repeat(e_lo - np.cumsum(np.concatenate([[0], cnt[:-1]])), cnt) + np.arange(cnt.sum())
        r_k = anc[s_src[eidx]].tolist()
        c_k = (acc[s_src[eidx]] + s_w[eidx]).tolist()
        e_ord = order[eidx].tolist()
        D = dist_root.tolist()
        mlist = merges.tolist()
        cl = cnt.tolist()
        argm = [0] * len(mlist)
        k = 0
        for i, mnode in enumerate(mlist):
            best = D[r_k[k]] + c_k[k]
            arg = e_ord[k]
            k2 = k + 1
            for kk in range(k2, k + cl[i]):
                val = D[r_k[kk]] + c_k[kk]
                if val > best:
                    best = val
                    arg = e_ord[kk]
            k += cl[i]
            D[mnode] = best
            argm[i] = arg
        dist_root = np.asarray(D, dtype=np.int64)
        pred_edge[merges] = np.asarray(argm, dtype=np.int64)
    dist = dist_root[anc] + acc
    return dist, pred_edge


def _walk_back(pred_edge: np.ndarray, src: np.ndarray, end_node: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and edges of the path ending at ``end_node`` (following ``pred_edge``), in path order."""
    pn = np.where(pred_edge >= 0, src[np.clip(pred_edge, 0, None)], -1).tolist()
    nodes: list[int] = []
    v = int(end_node)
    while v >= 0:
        nodes.append(v)
        v = pn[v]
    path = np.asarray(nodes[::-1], dtype=np.int64)
    return path, pred_edge[path[1:]]


def replay_times(g: Graph, w: np.ndarray | None = None, mask: np.ndarray | None = None) -> np.ndarray:
    """Node times when the graph is replayed with edge weights ``w`` (default: the measured
    ``g.wmin``); ``mask`` drops edges. Sources keep their measured time."""
    w = g.wmin if w is None else w
    src, dst = g.src, g.dst
    if mask is not None:
        src, dst, w = src[mask], dst[mask], w[mask]
    n = g.n_nodes
    dist, _ = longest_path(n, src, dst, w, g.t)
    return np.asarray(dist, dtype=np.int64)
