"""A CUDA-graph replay trace attributed from a separate capture trace (vLLM, SGLang: the graphs are captured at
start-up, profiled apart from the replays; TraceLens ``tests/traces/inference/*/capture_traces``).

The replay trace's device ops carry only the graph launch (``nbprof.trace.graph_replay``: ``graph_order``); the capture
trace holds the captured launches, each inside the operator (and ``nn.Module`` frame, with ``with_stack``) that made it,
but runs no kernel. The k-th captured launch is the k-th node of the replay (stream capture records nodes in launch
order), so :func:`capture_trace_attribution` joins them by order, per graph (graphs in the order of their first
replay, captures in the order they were made, paired by equal node counts). Its rows name the operator and module of
the *capture* trace: they are not rows of the replay trace, so the replay trace's views keep ``graph_order``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.graph_replay import captured_launches, graph_replays
from ..trace.ids import present as id_present
from ..trace.model import Trace
from .kernels import NO_OPERATOR, _enclosing_host_op
from .modules import MODULE_PREFIX
from .operators import host_call_tree

__all__ = ["CAPTURE_COLUMNS", "capture_trace_attribution"]

CAPTURE_COLUMNS = ("event", "name", "graph", "node", "capture_launch", "capture_op_event", "operator", "module")


def _ops_of(capture: Trace, launches: np.ndarray) -> np.ndarray:
    ev = capture.events
    ext = ev["external_id"].to_numpy()
    ops = np.flatnonzero(pred.is_host_op(ev) & id_present(ext) & (ext != 0))
    out = np.full(len(launches), -1, np.int64)
    if len(ops):
        lut = pd.Series(ops, index=ext[ops])
        lut = lut[~lut.index.duplicated()]
        hit = lut.reindex(ext[launches]).to_numpy()
        out = np.where(np.isnan(hit), -1, hit).astype(np.int64)
    miss = out < 0
    if miss.any():
        out[miss] = _enclosing_host_op(capture, launches[miss])
    return out


def _modules_of(capture: Trace, rows: np.ndarray) -> list[str]:
    """The innermost ``nn.Module`` Python frame above each host row ('' without one)."""
    tree = host_call_tree(capture)
    tev = tree["event"].to_numpy()
    parent = tree["parent"].to_numpy()
    names = capture.events["name"].astype(object).to_numpy()
    pos = pd.Series(np.arange(len(tev)), index=tev)
    pos = pos[~pos.index.duplicated()]
    out = []
    for r in rows.tolist():
        p = int(pos.get(r, -1)) if r >= 0 else -1
        mod = ""
        while p >= 0:
            nm = str(names[tev[p]])
            if nm.startswith(MODULE_PREFIX):
                mod = nm[len(MODULE_PREFIX):]
                break
            p = int(parent[p])
        out.append(mod)
    return out


def capture_trace_attribution(replay: Trace, capture: Trace) -> pd.DataFrame:
    """The operator and module that captured each replayed device op of ``replay``, from the separate ``capture``
    trace (module docstring).

    Returns
    -------
    pandas.DataFrame
        One row per replayed device op of ``replay`` (:func:`nbprof.trace.graph_replay.graph_replays`): ``event``
        (row in ``replay.events``), ``name`` (the kernel), ``graph``, ``node``, ``capture_launch`` and
        ``capture_op_event`` (rows in ``capture.events``: the captured launch and its operator; -1 for a graph no
        capture of its node count was found for), ``operator`` (the operator's name, or
        :data:`nbprof.analysis.kernels.NO_OPERATOR`), ``module`` (the innermost ``nn.Module`` frame around it, '').
        The share of rows with ``capture_launch >= 0`` is the match rate.
    """
    g = graph_replays(replay)
    n = len(g)
    launch = np.full(n, -1, np.int64)
    caps = captured_launches(capture.events, whole_trace=True)
    used: set[int] = set()
    firsts = g.groupby("graph")["event"].min().sort_values().index.tolist() if n else []
    for gr in firsts:
        sel = g["graph"].to_numpy() == gr
        first_launch = g.loc[sel, "launch"].min()
        one = np.flatnonzero(sel & (g["launch"].to_numpy() == first_launch))
        m = len(one)
        ci = next((i for i, c in enumerate(caps) if len(c) == m and i not in used), None)
        if ci is None:
            continue
        used.add(ci)
        nodes = g["node"].to_numpy()
        idx = np.flatnonzero(sel)
        launch[idx] = caps[ci][np.clip(nodes[idx], 0, m - 1)]
    op = np.full(n, -1, np.int64)
    ok = launch >= 0
    if ok.any():
        op[ok] = _ops_of(capture, launch[ok])
    cnames = capture.events["name"].astype(object).to_numpy()
    return pd.DataFrame({
        "event": g["event"].to_numpy(np.int64),
        "name": replay.events["name"].astype(object).to_numpy()[g["event"].to_numpy(np.int64)],
        "graph": g["graph"].to_numpy(np.int64), "node": g["node"].to_numpy(np.int64),
        "capture_launch": launch, "capture_op_event": op,
        "operator": np.where(op >= 0, cnames[np.clip(op, 0, None)] if len(cnames) else NO_OPERATOR, NO_OPERATOR),
        "module": _modules_of(capture, op),
    })
