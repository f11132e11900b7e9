"""longest_path's vectorised merge rounds (issue 20) give exactly what the plain topological loop gives.

The reference below is the textbook DAG longest path (nodes in topological order, first in-edge in array
order wins ties). It runs on the real traces' graphs (data/gpu), with every ``_ROUND_MIN_SHARE`` (all
rounds vectorised, one round then the loop, the loop alone) and with the weights of the HTA path, the
replay and a what-if change.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nbprof
from nbprof.analysis import whatif
from nbprof.analysis.critical_path import build_graph, longest

GPU = Path(__file__).resolve().parents[1] / "data" / "gpu"
TRACES = ("cnn_nw0_prep", "lm_h200", "ddp_nccl_rank0")


def _reference(n, src, dst, w, base):
    dist = [int(x) for x in base]
    pred = [-1] * n
    seen = [False] * n
    ins: list[list[int]] = [[] for _ in range(n)]
    for e, d in enumerate(dst.tolist()):
        ins[d].append(e)
    s, ww = src.tolist(), w.tolist()
    for v in range(n):
        for e in ins[v]:
            val = dist[s[e]] + ww[e]
            if not seen[v] or val > dist[v]:
                dist[v], pred[v], seen[v] = val, e, True
    return np.asarray(dist, np.int64), np.asarray(pred, np.int64)


@pytest.fixture(scope="module")
def graphs():
    out = {}
    for name in TRACES:
        p = GPU / f"{name}.pt.trace.json.gz"
        if p.exists():
            tr = nbprof.load(p)
            out[name] = (tr, build_graph(tr))
    if not out:
        pytest.skip("data/gpu traces absent")
    return out


@pytest.mark.parametrize("share", [0.05, 0.0, 2.0])
def test_rounds_equal_the_plain_loop_on_real_graphs(graphs, share, monkeypatch):
    monkeypatch.setattr(longest, "_ROUND_MIN_SHARE", share)
    for name, (tr, g) in graphs.items():
        hm = g.hta_w >= 0
        w_gemm, keep = whatif._apply(g, tr.events, whatif._as_changes(["cuda_graphs"]))
        cases = [
            (g.src[hm], g.dst[hm], g.hta_w[hm], np.zeros(g.n_nodes, np.int64)),
            (g.src, g.dst, g.wmin, g.t),
            (g.src[keep], g.dst[keep], w_gemm[keep], g.t),
        ]
        for src, dst, w, base in cases:
            d, p = longest.longest_path(g.n_nodes, src, dst, w, base)
            rd, rp = _reference(g.n_nodes, src, dst, w, base)
            assert np.array_equal(d, rd), name
            assert np.array_equal(p, rp), name


def test_rounds_equal_the_plain_loop_on_random_dags():
    rng = np.random.default_rng(20)
    for trial in range(200):
        n = int(rng.integers(1, 200))
        a, b = rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)
        k = a != b
        src, dst = np.minimum(a, b)[k], np.maximum(a, b)[k]
        w = rng.integers(0, 4 if trial % 2 else 1000, src.size).astype(np.int64)  # small weights: many ties
        base = rng.integers(0, 50, n).astype(np.int64)
        d, p = longest.longest_path(n, src, dst, w, base)
        rd, rp = _reference(n, src, dst, w, base)
        assert np.array_equal(d, rd) and np.array_equal(p, rp), trial


def test_planned_replay_equals_unplanned_on_real_graphs(graphs):
    for name, (tr, g) in graphs.items():
        plan = longest.longest_plan(g.n_nodes, g.src, g.dst)
        assert plan is not None, name
        for changes in ([], [whatif.scale("gemm|conv", 0.5)], [whatif.faster_host(2.0)], ["overlap_communication"]):
            w, keep = whatif._apply(g, tr.events, whatif._as_changes(changes))
            assert keep.all()
            d, p = longest.longest_path(g.n_nodes, g.src, g.dst, w, g.t, plan=plan)
            rd, rp = longest.longest_path(g.n_nodes, g.src, g.dst, w, g.t)
            assert np.array_equal(d, rd) and np.array_equal(p, rp), (name, changes)
        with pytest.raises(ValueError, match="plan for"):
            longest.longest_path(g.n_nodes, g.src[1:], g.dst[1:], g.wmin[1:], g.t, plan=plan)


def test_planned_equals_plain_loop_on_random_dags():
    rng = np.random.default_rng(21)
    planned = 0
    for trial in range(200):
        n = int(rng.integers(2, 200))
        a, b = rng.integers(0, n, n), rng.integers(0, n, n)
        k = a != b
        src, dst = np.minimum(a, b)[k], np.maximum(a, b)[k]
        if trial % 2:  # long single-in-edge chains with branches off them
            src, dst = np.concatenate([src, np.arange(n - 1)]), np.concatenate([dst, np.arange(1, n)])
        w = rng.integers(0, 4 if trial % 3 else 1000, src.size).astype(np.int64)
        base = rng.integers(0, 50, n).astype(np.int64)
        plan = longest.longest_plan(n, src, dst)
        if plan is None:
            continue
        planned += 1
        d, p = longest.longest_path(n, src, dst, w, base, plan=plan)
        rd, rp = _reference(n, src, dst, w, base)
        assert np.array_equal(d, rd) and np.array_equal(p, rp), trial
    assert planned == 200


def test_critical_path_and_replays_share_one_graph(graphs):
    from nbprof.analysis.critical_path import critical_path

    for name, (tr, _g) in graphs.items():
        cp = critical_path(tr, slack=False)
        assert cp.graph is whatif.trace_graph(tr), name
        assert critical_path(tr, window=cp.window, slack=False).graph is not cp.graph  # a window: its own graph
        whatif.clear_graph_cache()
        assert whatif.trace_graph(tr) is not cp.graph  # cleared: built again
