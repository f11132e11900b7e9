"""The dependency graph: :func:`build_graph`, the window (:func:`_window`) and the orchestration of the edge
builders: nodes (:mod:`.nodes`), host / wake / fwdbwd edges (:mod:`.host_edges`), device / launch / stream /
gpu_sync edges (:mod:`.device_edges`), sync edges (:mod:`.sync_edges`); see the package docstring for each
kind and its source of truth."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace.iterations import iteration_ranges, step_label
from ...trace.model import Trace
from ...trace.predicates import is_step_row, step_number
from ...trace.predicates import name_mask as _name_mask
from .._memo import clear as clear_memo
from .._memo import per_trace
from ..steps import _is_dataloader
from .device_edges import device_edges, inferred_wait_sources, launch_stream_edges, stream_state
from .edges import _tighten
from .host_edges import fwdbwd_edges, host_edges
from .model import DEVICE, Graph
from .nodes import EdgeBlock, Selection, concat_blocks, select
from .sync_edges import sync_edges, sync_sources


def _window(trace: Trace, step: int | None, annotation: str | None, instance: int | tuple[int, int],
            window: tuple[int, int] | None) -> tuple[int, int]:
    """The (start_ns, end_ns) host window the graph is clipped to: HTA 0.5.0's definition (``critical_path``'s
    ``ProfilerStep#N`` host range, its annotation instances, or the whole trace), kept on purpose apart from
    :func:`nbprof.analysis.steps.step_windows`, THE step window elsewhere (host steps extended to the end of
    the device work they launched), so that the critical path reproduces HTA's. Without ``ProfilerStep#N``, step
    N is the host range of detected iteration N (:func:`nbprof.trace.iterations.iteration_ranges`, the
    ranges the events' ``step`` column comes from)."""
    ev = trace.events
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    if window is not None:
        return int(window[0]), int(window[1])
    names = ev["name"]
    if step is not None:
        mask = is_step_row(ev) & _name_mask(names, lambda n: step_number(n) == int(step))
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            it = iteration_ranges(trace) if not is_step_row(ev).any() else None
            if it is not None and (it["step"] == int(step)).any():
                r = it[it["step"] == int(step)].iloc[0]
                return int(r["start_ns"]), int(r["end_ns"])
            raise ValueError(f"no {step_label(trace, int(step))} in the trace (steps: {trace.steps})")
        return int(ts[idx].min()), int(end[idx].max())
    if annotation:
        mask = _name_mask(names, lambda n: annotation in n)
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            raise ValueError(f"no event whose name contains {annotation!r}")
        lo, hi = (instance, instance) if isinstance(instance, int) else instance
        sel = idx[lo:hi + 1]
        if sel.size == 0:
            raise ValueError(f"annotation {annotation!r} has {idx.size} instances, asked for {instance}")
        return int(ts[sel].min()), int(end[sel].max())
    if len(ev) == 0:
        return 0, 0
    return int(ts.min()), int(end.max())


def _sync_args_frame(trace: Trace, sync_args: pd.DataFrame | None) -> pd.DataFrame | None:
    if sync_args is None:
        sync_args = getattr(trace, "tables", {}).get("cuda_sync")
    if sync_args is None or len(sync_args) == 0:
        return None
    need = {"correlation", "wait_on_stream", "wait_on_cuda_event_record_corr_id"}
    missing = need - set(sync_args.columns)
    if missing:
        raise ValueError(f"sync_args lacks columns {sorted(missing)}")
    return sync_args


def build_graph(trace: Trace, step: int | None = None, *, annotation: str | None = None,
                instance: int | tuple[int, int] = 0, window: tuple[int, int] | None = None,
                sync_args: pd.DataFrame | None = None) -> Graph:
    """The dependency graph of ``trace`` (whole trace, one step, an annotation or a time window).

    Parameters
    ----------
    trace : nbprof.Trace
    step : int, optional
        Restrict to ``ProfilerStep#<step>``: host events starting inside its host range and device
        ops launched inside it (HTA's window rule).
    annotation : str, optional
        HTA's ``annotation``: the window of the events whose name *contains* it, instance
        ``instance`` (an int or an inclusive ``(first, last)`` pair) in trace order.
    window : (int, int), optional
        Explicit ``(start_ns, end_ns)``.
    sync_args : pandas.DataFrame, optional
        ``correlation, wait_on_stream, wait_on_cuda_event_record_corr_id`` of the ``cuda_sync`` rows
        (Kineto args). Default: ``trace.tables["cuda_sync"]`` if present, else the heuristic of the
        module docstring.

    Returns
    -------
    Graph
        Edges in the order ``host``, ``wake``, ``device``, ``gpu_sync``, ``launch``, ``stream``, ``sync``,
        ``fwdbwd`` (one builder each: :mod:`.host_edges`, :mod:`.device_edges`, :mod:`.sync_edges`).

    Raises
    ------
    ValueError
        When the step or annotation is not in the trace, or ``sync_args`` lacks a column.
    """
    w0, w1 = _window(trace, step, annotation, instance, window)
    sel = select(trace, w0, w1)
    host = host_edges(sel)
    st = stream_state(sel)
    pairs, gpu_sync_src = sync_sources(sel, st, _sync_args_frame(trace, sync_args))
    dev_blocks, lq, gq = launch_stream_edges(sel, st, gpu_sync_src, inferred_wait_sources(sel, st, gpu_sync_src))
    sync, host = sync_edges(sel, pairs, host)  # a wait shortens the host interval it ends
    blocks = [] if host is None else [host.host, host.wake]
    blocks += [b for b in (device_edges(sel), *dev_blocks, sync, fwdbwd_edges(sel)) if b is not None]
    e = concat_blocks(blocks)
    wmin, dep_via, dep_off = _replay_weights(sel, e)
    return Graph(src=e.src, dst=e.dst, kind=e.kind, owner=e.owner, hta_w=e.hta_w, wmin=wmin, t=sel.t,
                 node_row=sel.node_row, dropped_edges=int((e.src >= e.dst).sum()), window=(w0, w1),
                 queued_gap_ns=int(gq), launch_delay_ns=int(lq), dep_via=dep_via, dep_off=dep_off,
                 **_event_flags(sel))


def _replay_weights(sel: Selection, e: EdgeBlock) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The replay weights of edges ``e`` (ns): never more than measured, the binding edge of each node absorbing
    the rest (:func:`~.edges._tighten`); and the weights tied to a device op (``e.via``: via its ``device`` edge)
    or to an edge (``e.via_edge``) as ``Graph.dep_via`` / ``dep_off`` (offset so that the unchanged replay is
    exact), None when none is."""
    meas = sel.t[e.dst] - sel.t[e.src]
    wmin = _tighten(sel.t, e.src, e.dst, np.minimum(e.wmin, meas))
    if not ((e.via >= 0).any() or (e.via_edge >= 0).any()):
        return wmin, None, None
    dev_edge = np.full(sel.kd, -1, np.int64)
    de_idx = np.flatnonzero(e.kind == DEVICE)
    dev_edge[_dev_index(sel.dev_rows, e.owner[de_idx])] = de_idx
    dep_via = e.via_edge.copy()
    dv = e.via >= 0
    dep_via[dv] = dev_edge[e.via[dv]]
    dep_off = np.where(dep_via >= 0, wmin - wmin[np.clip(dep_via, 0, None)], 0)
    return wmin, dep_via, dep_off


def _event_flags(sel: Selection) -> dict[str, np.ndarray]:
    """The per-event fields of :class:`~.model.Graph` (host events then device ops): ``rows``, ``start`` /
    ``end`` nodes, the ``is_*`` flags and ``node_step`` (a device op takes its launching call's step)."""
    kh, kd = sel.kh, sel.kd
    rows = np.concatenate([sel.host_rows, sel.dev_rows])
    start = np.concatenate([sel.hs(np.arange(kh)), sel.ds(np.arange(kd))]) if rows.size else np.zeros(0, np.int64)
    end = np.concatenate([sel.he(np.arange(kh)), sel.de(np.arange(kd))]) if rows.size else np.zeros(0, np.int64)
    is_launch_call = np.zeros(rows.size, bool)
    if kd:
        is_launch_call[sel.d_lpos] = True
    is_launch_call[:kh] |= sel.launch_h
    is_blocking = np.zeros(rows.size, bool)
    is_blocking[:kh] = sel.blocking_h
    step_col = sel.trace.events["step"].to_numpy(np.int64)
    ev_step = np.concatenate([step_col[sel.host_rows], step_col[sel.dev_launcher]])
    node_step = np.empty(sel.t.size, np.int64)
    node_step[start] = ev_step
    node_step[end] = ev_step
    return {"rows": rows, "start": start, "end": end, "node_step": node_step,
            "is_dataloader": _name_mask(sel.names, _is_dataloader)[rows] & (sel.dev_col[rows] < 0),
            "is_comm": sel.comm_all[rows], "is_launch_call": is_launch_call, "is_blocking": is_blocking,
            "is_step_range": sel.step_rows_all[rows]}


def _dev_index(dev_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Index into ``dev_rows`` of each of ``rows`` (all present)."""
    o = np.argsort(dev_rows, kind="stable")
    return np.asarray(o[np.searchsorted(dev_rows[o], rows)])


@per_trace
def whole_graph(trace: Trace) -> Graph:
    """``build_graph(trace)`` (the whole trace, default arguments), built once per trace (the memo of
    :mod:`nbprof.analysis._memo`): :func:`~nbprof.analysis.critical_path.critical_path` of the whole trace and
    every :func:`nbprof.analysis.whatif.predict` of it share one graph (issue 20).

    Returns
    -------
    Graph
    """
    return build_graph(trace)


def clear_whole_graphs() -> None:
    """Forget every memoised result (:func:`nbprof.analysis._memo.clear`), the whole-trace graphs with them."""
    clear_memo()
