"""Longest paths in the graph's DAG (topological = node order) and the replay of node times."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Graph


def longest_path(n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray,
                 base: np.ndarray, *, plan: LongestPlan | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Longest paths in a DAG whose nodes ``0..n-1`` are in topological order (``src < dst``).

    ``dist[v] = base[v]`` for a node without in-edges, else ``max(dist[u] + w)`` over its in-edges
    (ties: the first in-edge in array order). Nodes with one in-edge are resolved by pointer jumping
    (vectorised, log depth rounds); nodes with several in-edges (*merges*) by :func:`_resolve_merges`
    (vectorised rounds, max-plus pointer jumping along chains of merges; a Python loop only for what is
    left when a round stops paying). Integer arithmetic throughout: the result does not depend on the
    order in which merges are resolved.

    ``plan``: :func:`longest_plan` of the same ``n, src, dst``, for several calls on one edge set with
    different weights (the replays of :mod:`nbprof.analysis.whatif`): the single-in-edge chains are then
    summed by segmented prefix sums instead of pointer jumping (same result).

    Returns
    -------
    dist : ndarray int64 (n,)
    pred_edge : ndarray int64 (n,)
        The in-edge each node's longest path arrives by, -1 for sources.
    """
    if plan is not None:
        return _longest_planned(plan, w, base)
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
    merges = np.flatnonzero(indeg >= 2)
    e_lo = ptr[merges]
    cnt = ptr[merges + 1] - e_lo
    eidx = np.repeat(e_lo - np.cumsum(np.concatenate([[0], cnt[:-1]])), cnt) + np.arange(cnt.sum())
    return _finish(base, anc, acc, s_src, s_w, order, merges, cnt, eidx, pred_edge)


def _finish(base: np.ndarray, anc: np.ndarray, acc: np.ndarray, s_src: np.ndarray, s_w: np.ndarray,
            order: np.ndarray, merges: np.ndarray, cnt: np.ndarray, eidx: np.ndarray,
            pred_edge: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Resolve the merges (roots: sources and merge nodes) and give every node its distance."""
    dist_root = base.astype(np.int64).copy()
    if merges.size:
        r_k = anc[s_src[eidx]]
        c_k = acc[s_src[eidx]] + s_w[eidx]
        _resolve_merges(dist_root, merges, cnt, r_k, c_k)
        # the in-edge of each merge: the first (array order) reaching its maximum
        seg = np.repeat(np.arange(merges.size), cnt)
        hit = np.flatnonzero(dist_root[r_k] + c_k == dist_root[merges][seg])
        _, first = np.unique(seg[hit], return_index=True)
        pred_edge[merges] = order[eidx[hit[first]]]
    dist = dist_root[anc] + acc
    return dist, pred_edge


@dataclass
class LongestPlan:
    """What :func:`longest_path` computes from the edge set alone (:func:`longest_plan`); reused across weights.

    ``sv``: nodes with one in-edge; ``perm``: them in chain order (a chain: nodes each of which is the only
    single-in-edge child of the one before), ``starts``/``lens`` the chains' positions in ``perm``;
    ``levels``: for chains hanging off another chain (their head's parent has one in-edge), per dependency
    level, ``(nodes, repeats, head parents)``; ``anc``: each node's root (a source or a merge).
    """

    n: int
    m: int
    order: np.ndarray
    s_src: np.ndarray
    ptr: np.ndarray
    sv: np.ndarray
    pred_sv: np.ndarray
    perm: np.ndarray
    starts: np.ndarray
    lens: np.ndarray
    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    anc: np.ndarray
    merges: np.ndarray
    cnt: np.ndarray
    eidx: np.ndarray


#: :func:`longest_plan` gives up (None: pointer jumping per call) above this many chain levels.
_MAX_LEVELS = 64


def longest_plan(n: int, src: np.ndarray, dst: np.ndarray) -> LongestPlan | None:
    """The weight-independent part of :func:`longest_path` for the DAG ``n, src, dst`` (see
    :class:`LongestPlan`); None when its chains nest deeper than ``_MAX_LEVELS`` (no gain then)."""
    m = src.size
    indeg = np.bincount(dst, minlength=n) if m else np.zeros(n, np.int64)
    order = np.argsort(dst, kind="stable")
    s_src = src[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(indeg, out=ptr[1:])
    single = indeg == 1
    sv = np.flatnonzero(single)
    par = s_src[ptr[sv]]
    n_single_children = np.bincount(par, minlength=n)
    cont = single[par] & (n_single_children[par] == 1)
    head = np.arange(n, dtype=np.int64)
    head[sv[cont]] = par[cont]
    act = sv[cont]
    while act.size:  # each chain node -> its chain's head (pointer jumping, once per plan)
        head[act] = head[head[act]]
        act = act[head[head[act]] != head[act]]
    hv = head[sv]
    perm = sv[np.lexsort((sv, hv))]
    hp = hv[np.searchsorted(sv, perm)]  # head of each perm entry
    new_chain = np.ones(perm.size, bool)
    new_chain[1:] = hp[1:] != hp[:-1]
    starts = np.flatnonzero(new_chain)
    lens = np.diff(np.append(starts, perm.size))
    heads = perm[starts]
    hpar = s_src[ptr[heads]]  # the head's parent: a root, or a node of another chain
    chain_of = np.full(n, -1, np.int64)
    chain_of[perm] = np.repeat(np.arange(starts.size), lens)
    dep = single[hpar]
    level = np.zeros(starts.size, np.int64)
    anc_chain = np.where(dep, -1, hpar)
    dci = np.flatnonzero(dep)
    if dci.size:
        o = dci[np.argsort(heads[dci], kind="stable")]  # a parent's chain starts before its child's
        lv, ac, co, hl = level.tolist(), anc_chain.tolist(), chain_of[hpar[o]].tolist(), o.tolist()
        for c, pc in zip(hl, co):
            lv[c] = lv[pc] + 1
            ac[c] = ac[pc]
        level, anc_chain = np.asarray(lv, np.int64), np.asarray(ac, np.int64)
    n_levels = int(level.max()) if level.size else 0
    if n_levels > _MAX_LEVELS:
        return None
    levels = []
    for lev in range(1, n_levels + 1):
        cs = np.flatnonzero(level == lev)
        pos = np.repeat(starts[cs] - np.cumsum(np.concatenate([[0], lens[cs][:-1]])), lens[cs]) + np.arange(
            lens[cs].sum())
        levels.append((perm[pos], lens[cs], hpar[cs]))
    anc = np.arange(n, dtype=np.int64)
    anc[perm] = np.repeat(anc_chain, lens)
    merges = np.flatnonzero(indeg >= 2)
    e_lo = ptr[merges]
    cnt = ptr[merges + 1] - e_lo
    eidx = np.repeat(e_lo - np.cumsum(np.concatenate([[0], cnt[:-1]])), cnt) + np.arange(cnt.sum())
    return LongestPlan(n=n, m=m, order=order, s_src=s_src, ptr=ptr, sv=sv, pred_sv=order[ptr[sv]], perm=perm, starts=starts,
                       lens=lens, levels=levels, anc=anc, merges=merges, cnt=cnt, eidx=eidx)


def _longest_planned(p: LongestPlan, w: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if w.size != p.m:
        raise ValueError(f"plan for {p.m} edges, weights for {w.size}")
    n = p.n
    s_w = w[p.order]
    wn = np.zeros(n, np.int64)
    wn[p.sv] = s_w[p.ptr[p.sv]]
    x = wn[p.perm]
    c = np.cumsum(x)  # int64 wraps modulo 2**64; the differences below are exact
    before = c[p.starts] - x[p.starts]
    acc = np.zeros(n, np.int64)
    acc[p.perm] = c - np.repeat(before, p.lens)
    for nodes, reps, hpar in p.levels:
        acc[nodes] += np.repeat(acc[hpar], reps)
    pred_edge = np.full(n, -1, dtype=np.int64)
    pred_edge[p.sv] = p.pred_sv
    return _finish(base, p.anc, acc, p.s_src, s_w, p.order, p.merges, p.cnt, p.eidx, pred_edge)


#: :func:`_resolve_merges` goes on with vectorised rounds while a round resolves at least this share of the
#: merges left (a round costs about what the Python loop spends on a few percent of them).
_ROUND_MIN_SHARE = 0.05


def _resolve_merges(D: np.ndarray, merges: np.ndarray, cnt: np.ndarray, r_k: np.ndarray, c_k: np.ndarray) -> None:
    """Set ``D[merges[i]] = max(D[r] + c)`` over merge i's in-edges (``cnt[i]`` consecutive entries of ``r_k``
    (root node: a source, whose ``D`` is known, or another merge) and ``c_k`` (weight)), in place.

    Each round resolves the merges whose roots are all resolved and, by max-plus pointer jumping
    (``x = max(a, x_parent + c)`` composes), the chains of merges with exactly one unresolved root that
    lead to one of them. Merges are in topological order (node order), which the Python loop for the
    rest relies on.
    """
    M = merges.size
    midx = np.full(D.size, -1, np.int64)
    midx[merges] = np.arange(M)
    pk = midx[r_k]  # merge index of each edge's root, -1 for a source
    done = np.zeros(M, bool)
    live = np.arange(M)  # unresolved merges
    e_live = np.arange(r_k.size)  # their edges, grouped by merge
    c_live = cnt
    neg = np.iinfo(np.int64).min // 4
    while live.size:
        unres = pk[e_live] >= 0
        unres[unres] = ~done[pk[e_live][unres]]
        starts = np.concatenate([[0], np.cumsum(c_live)[:-1]])
        vals = np.where(unres, neg, D[r_k[e_live]] + c_k[e_live])
        A = np.maximum.reduceat(vals, starts)
        n_un = np.add.reduceat(unres.astype(np.int64), starts)
        ready = n_un == 0
        # chains: one unresolved root (its merge index `par`, the edge weight `cc`)
        ch = n_un == 1
        pos = np.full(M, -1, np.int64)  # merge index -> position in `live`
        pos[live] = np.arange(live.size)
        seg = np.repeat(np.arange(live.size), c_live)
        ue = np.flatnonzero(unres & ch[seg])
        par = np.full(live.size, -1, np.int64)
        cc = np.zeros(live.size, np.int64)
        par[seg[ue]] = pos[pk[e_live[ue]]]
        cc[seg[ue]] = c_k[e_live[ue]]
        best = A.copy()
        # jump while the parent is itself a chain node
        act = np.flatnonzero(ch)
        act = act[ch[par[act]]]
        while act.size:
            p = par[act]
            b_new = np.maximum(best[act], best[p] + cc[act])
            c_new = cc[act] + cc[p]
            par[act] = par[p]
            best[act] = b_new
            cc[act] = c_new
            act = act[ch[par[act]]]
        x = np.where(ready, A, neg)
        solve = ch.copy()
        solve[ch] = ready[par[ch]]
        x[solve] = np.maximum(best[solve], A[par[solve]] + cc[solve])
        ok = ready | solve
        D[merges[live[ok]]] = x[ok]
        done[live[ok]] = True
        keep = ~ok
        n_ok = int(ok.sum())
        live_before = live.size
        live = live[keep]
        e_live = e_live[keep[seg]]
        c_live = c_live[keep]
        if live.size and n_ok < _ROUND_MIN_SHARE * live_before:
            break
    if live.size:  # the rest in topological order
        Dl = D.tolist()
        ml = merges[live].tolist()
        rl = r_k[e_live].tolist()
        cl = c_k[e_live].tolist()
        k = 0
        for i, mnode in enumerate(ml):
            best_v = Dl[rl[k]] + cl[k]
            for kk in range(k + 1, k + int(c_live[i])):
                v = Dl[rl[kk]] + cl[kk]
                if v > best_v:
                    best_v = v
            k += int(c_live[i])
            Dl[mnode] = best_v
        D[merges[live]] = np.asarray(Dl, dtype=np.int64)[merges[live]]


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
