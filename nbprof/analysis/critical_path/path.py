"""The critical path of a trace window (:func:`critical_path`, :class:`CriticalPath`) and its breakdown."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...trace import schema
from ...trace.model import Trace
from .._memo import per_trace
from .graph import build_graph, whole_graph
from .longest import _walk_back, longest_path
from .model import BREAKDOWN_KINDS, DEVICE, EDGE_KINDS, GPU_SYNC, HOST, LAUNCH, SYNC, Graph, _Lookup, inside_ranges
from .slack import event_slack


@dataclass
class CriticalPath:
    """The critical path of a trace window.

    Attributes
    ----------
    events : pandas.DataFrame
        Rows of ``trace.events`` on the path (its columns, its index), in time order (by start).
    row_ids : ndarray int64
        Their positional row ids in ``trace.events``.
    length_ns : int
        Wall-clock span of the path, ns (first node to last node).
    hta_length_ns : int
        HTA's weighted length of the path, ns.
    breakdown : pandas.Series
        int64 ns per ``BREAKDOWN_KINDS`` (host_compute, kernel_launch, kernel, memcpy_memset, sync_wait,
        communication, dataloader, idle); sums to ``length_ns``.
    slack_ns : pandas.Series
        int64, aligned with ``trace.events`` (same index): how much each event could grow without
        lengthening its step, ns; -1 for events not in the graph.
    edges : pandas.DataFrame
        The path's edges: ``kind, src_row, dst_row, start_ns, end_ns, hta_w, part`` (breakdown kind).
    graph : Graph
    window : tuple of int
    """

    events: pd.DataFrame
    row_ids: np.ndarray
    length_ns: int
    hta_length_ns: int
    breakdown: pd.Series
    slack_ns: pd.Series
    edges: pd.DataFrame
    graph: Graph
    window: tuple[int, int]

    def __repr__(self) -> str:
        top = self.breakdown.sort_values(ascending=False)
        parts = ", ".join(f"{k} {v / 1e6:.3f} ms" for k, v in top.items() if v > 0)
        return f"<CriticalPath {len(self.row_ids)} events, {self.length_ns / 1e6:.3f} ms: {parts}>"


@per_trace
def critical_path(trace: Trace, step: int | None = None, *, annotation: str | None = None,
                  instance: int | tuple[int, int] = 0, window: tuple[int, int] | None = None,
                  sync_args: pd.DataFrame | None = None, slack: bool = True, model: str = "hta") -> CriticalPath:
    """The critical path of a trace or of one step (HTA's definition; see the module docstring).

    Parameters
    ----------
    trace : nbprof.Trace
    step : int, optional
        ``N`` of ``ProfilerStep#N``: analyse that step only. Default: the whole trace.
    annotation, instance, window, sync_args
        See :func:`build_graph`.
    model : {"hta", "replay"}
        ``"hta"`` (default): HTA's weighted longest path (host gaps and blocking calls weigh 0, so
        the path may cover only part of a host-bound step). ``"replay"``: the chain of *binding*
        constraints of the replay model, walked back from the window's last node: every edge
        weighs what it measured, so the path covers the window's wall-clock span from the source it
        starts at, DataLoader waits and host gaps included (``hta_length_ns`` is then the same span).
    slack : bool, default True
        Compute ``slack_ns`` (one more pass over the graph); all -1 when False.

    Returns
    -------
    CriticalPath

    Raises
    ------
    ValueError
        When the step or annotation is not in the trace, or the window holds no event.
    """
    if step is None and annotation is None and instance == 0 and window is None and sync_args is None:
        g = whole_graph(trace)  # the what-if replays' graph: built once per trace
    else:
        g = build_graph(trace, step, annotation=annotation, instance=instance, window=window, sync_args=sync_args)
    return path_of_graph(trace, g, slack=slack, model=model)


def path_of_graph(trace: Trace, g: Graph, *, slack: bool = True, model: str = "hta") -> CriticalPath:
    """The critical path of an already built graph ``g`` of ``trace`` (``model``, ``slack``: see
    :func:`critical_path`).

    Raises
    ------
    ValueError
        When the graph is empty or ``model`` is unknown.
    """
    n = g.n_nodes
    if n == 0:
        raise ValueError(f"no event to analyse in the window {g.window}")
    if model == "hta":
        hm = g.hta_w >= 0
        dist, pred = longest_path(n, g.src[hm], g.dst[hm], g.hta_w[hm], np.zeros(n, np.int64))
        end_node = int(np.argmax(dist))
    elif model == "replay":
        hm = np.ones(g.src.size, bool)
        rep, pred = longest_path(n, g.src, g.dst, g.wmin, g.t)
        end_node = int(np.argmax(rep))
        dist = None
    else:
        raise ValueError(f"model must be 'hta' or 'replay', not {model!r}")
    path, pedges = _walk_back(pred, g.src[hm], end_node)
    if dist is None:
        dist = rep - rep[path[0]]
    eidx = np.flatnonzero(hm)[pedges] if pedges.size else pedges
    ev = trace.events
    mark = np.zeros(len(ev), bool)
    mark[g.node_row[path]] = True
    rows_on = np.flatnonzero(mark)
    ts = ev["ts_ns"].to_numpy(np.int64)
    rows_on = rows_on[np.lexsort((rows_on, ts[rows_on]))]
    events = ev.iloc[rows_on]
    # breakdown along the path (wall clock between consecutive nodes)
    parts = _edge_parts(g, eidx, ev)
    seg = g.t[g.dst[eidx]] - g.t[g.src[eidx]]
    bd = pd.Series(np.bincount(parts, weights=seg, minlength=len(BREAKDOWN_KINDS)).astype(np.int64)
                   if eidx.size else np.zeros(len(BREAKDOWN_KINDS), np.int64), index=list(BREAKDOWN_KINDS))
    # float64 bincount is exact below 2**53 ns (104 days)
    length = int(g.t[path[-1]] - g.t[path[0]]) if path.size else 0
    edges = pd.DataFrame({
        "kind": pd.Categorical.from_codes(g.kind[eidx].astype(np.int64), categories=list(EDGE_KINDS)),
        "src_row": g.node_row[g.src[eidx]], "dst_row": g.node_row[g.dst[eidx]],
        "start_ns": g.t[g.src[eidx]], "end_ns": g.t[g.dst[eidx]], "hta_w": g.hta_w[eidx],
        "part": pd.Categorical.from_codes(parts, categories=list(BREAKDOWN_KINDS)),
    })
    sl = pd.Series(np.full(len(ev), -1, np.int64), index=ev.index, name="slack_ns")
    if slack:
        sl = pd.Series(event_slack(g, len(ev)), index=ev.index, name="slack_ns")
    return CriticalPath(events=events, row_ids=rows_on.astype(np.int64), length_ns=length,
                        hta_length_ns=int(dist[end_node]), breakdown=bd, slack_ns=sl, edges=edges, graph=g,
                        window=g.window)



def _edge_parts(g: Graph, eidx: np.ndarray, ev: pd.DataFrame) -> np.ndarray:
    """Breakdown kind of each path edge: int codes into ``BREAKDOWN_KINDS``.

    Host intervals: ``dataloader`` inside a DataLoader range; else by the innermost open event:
    ``kernel_launch`` (a launching runtime call), ``sync_wait`` (a blocking call), ``communication``
    (``nccl:``/``gloo:`` ops), ``host_compute`` (any other op or annotation), ``idle`` (none, or only
    the ``ProfilerStep`` range). Launch edges: ``kernel_launch``; device spans: ``kernel`` /
    ``memcpy_memset`` / ``communication``; sync edges: ``sync_wait``; stream gaps, wake, fwdbwd: ``idle``.
    """
    code = {k: i for i, k in enumerate(BREAKDOWN_KINDS)}
    out = np.full(eidx.size, code["idle"], dtype=np.int64)
    if eidx.size == 0:
        return out
    kind = g.kind[eidx]
    own = g.owner[eidx]
    op = np.full(eidx.size, -1, np.int64)
    v = own >= 0
    op[v] = _Lookup(g.rows, np.arange(g.rows.size)).get(own[v])
    cat = ev["cat"]
    cats = list(cat.cat.categories) if isinstance(cat.dtype, pd.CategoricalDtype) else None
    own_c = np.clip(own, 0, None)
    if cats is not None:
        cc = cat.cat.codes.to_numpy()[own_c]

        def is_cat(name: str) -> np.ndarray:
            return np.asarray(cc == (cats.index(name) if name in cats else -99))
    else:
        cv = cat.to_numpy(dtype=object)[own_c]

        def is_cat(name: str) -> np.ndarray:
            return np.asarray(cv == name)
    h = kind == HOST
    dl_rows = g.rows[g.is_dataloader]
    inside_dl = np.zeros(eidx.size, bool)
    if dl_rows.size and h.any():
        hi = np.flatnonzero(h)
        inside_dl[hi] = inside_ranges(ev, dl_rows, g.node_row[g.src[eidx[hi]]], g.t[g.src[eidx[hi]]])
    valid = op >= 0
    opc = np.clip(op, 0, None)
    launch = valid & g.is_launch_call[opc]
    block = valid & g.is_blocking[opc]
    comm = valid & g.is_comm[opc]
    step_only = valid & is_cat(schema.USER_ANNOTATION) & g.is_step_range[opc]
    out[h & valid & ~step_only] = code["host_compute"]
    out[h & launch] = code["kernel_launch"]
    out[h & block] = code["sync_wait"]
    out[h & comm] = code["communication"]
    out[inside_dl] = code["dataloader"]
    out[kind == LAUNCH] = code["kernel_launch"]
    d = kind == DEVICE
    out[d & is_cat(schema.KERNEL)] = code["kernel"]
    out[d & (is_cat(schema.GPU_MEMCPY) | is_cat(schema.GPU_MEMSET))] = code["memcpy_memset"]
    out[d & comm] = code["communication"]
    out[(kind == SYNC) | (kind == GPU_SYNC)] = code["sync_wait"]
    return out
