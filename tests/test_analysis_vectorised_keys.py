"""The vectorised helpers behind the stack grouping and the module tree give what the loops they replaced gave."""

from __future__ import annotations

import numpy as np

from nbprof.analysis._call_tree import _pair_rank


def test_pair_rank_equals_numpy_unique_rows():
    rng = np.random.default_rng(7)
    for n in (0, 1, 50, 5000):
        a = rng.choice(np.array([-1, 3, 2**40, 7, 123456789012], dtype=np.int64), n)
        b = rng.choice(np.array([0, -5, 2**50, 9], dtype=np.int64), n)
        want = (np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)[1].ravel() if n
                else np.zeros(0, np.int64))
        got = _pair_rank(a, b)
        assert got.tolist() == want.tolist()


def _paths_loop(rows, parent_of, names):
    """The per-row loop ``modules._paths`` replaced (the reference)."""
    node_of = np.full(len(parent_of), -1, dtype=np.int64)
    index: dict = {}
    nodes: list = []
    for r in rows.tolist():
        p = parent_of[r]
        key = (int(node_of[p]) if p >= 0 else -1, names[r])
        k = index.get(key)
        if k is None:
            k = index[key] = len(nodes)
            nodes.append(key)
        node_of[r] = k
    return node_of, nodes


def test_module_paths_equal_the_row_loop_on_random_forests():
    from nbprof.analysis.modules import _paths

    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(0, 80))
        parent = np.full(n, -1, dtype=np.int64)
        for i in range(1, n):  # preorder: a parent comes before its children
            parent[i] = rng.integers(-1, i) if rng.random() < 0.85 else -1
        names = np.array([f"Linear_{rng.integers(0, 4)}" for _ in range(n)], dtype=object)
        rows = np.flatnonzero(rng.random(n) < 0.9) if n else np.zeros(0, np.int64)
        # a parent outside ``rows`` makes its children roots in both
        want_node, want = _paths_loop(rows, np.where(np.isin(parent, rows), parent, -1), names)
        got_node, got = _paths(rows, parent, names)
        assert got == want
        assert got_node[rows].tolist() == want_node[rows].tolist()
