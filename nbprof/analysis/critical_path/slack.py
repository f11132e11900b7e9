"""Slack: how much each event could grow without lengthening its step (replay model, ns)."""

from __future__ import annotations

import numpy as np

from .longest import longest_path
from .model import _BIG, Graph


def tail_lengths(g: Graph, w: np.ndarray | None = None, same_step: bool = True) -> np.ndarray:
    """Longest replay path from each node to any later node (of the same step when ``same_step``), ns."""
    w = g.wmin if w is None else w
    n = g.n_nodes
    src, dst = g.src, g.dst
    keep = np.ones(src.size, bool)
    if same_step:
        keep = g.node_step[src] == g.node_step[dst]
    rs = (n - 1 - dst[keep])
    rd = (n - 1 - src[keep])
    dist, _ = longest_path(n, rs, rd, w[keep], np.zeros(n, np.int64))
    return np.asarray(dist[::-1], dtype=np.int64)



def event_slack(g: Graph, n_events: int, w: np.ndarray | None = None) -> np.ndarray:
    """Slack of every event (array over ``n_events`` positional rows, -1 outside the graph), ns."""
    tail = tail_lengths(g, w)
    t = g.t
    steps = g.node_step
    out = np.full(n_events, -1, np.int64)
    if t.size == 0:
        return out
    inv = steps - steps.min()
    step_end = np.full(int(inv.max()) + 1, -_BIG)
    np.maximum.at(step_end, inv, t)
    f = step_end[inv] - t - tail
    out[g.rows] = np.maximum(f[g.end], 0)
    return out
