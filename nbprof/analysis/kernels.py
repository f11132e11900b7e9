"""Kernels: duration statistics per kernel, torch-tb-profiler's GPU Kernel view and its GPU metrics.

- :func:`kernel_summary`: per kernel name (or stream, or device) instance counts and duration
  statistics, those of HTA's kernel breakdown (count, total, mean, median, min, max, standard
  deviation of the duration, share of GPU time) over the trace's ``kernel`` rows (memcpy/memset on
  request).
- :func:`kernel_table`: torch-tb-profiler 0.4.3's Kernel view tables, per kernel and per
  kernel + launching operator (calls, total/mean/max/min duration, Tensor Cores used, mean blocks
  per SM, mean estimated achieved occupancy).
- :func:`gpu_metrics`: the Overview's per-device GPU metrics of torch-tb-profiler 0.4.3 (GPU
  utilisation, est. SM efficiency, est. achieved occupancy, kernel time using Tensor Cores, time in
  Tensor-Core-eligible operators).

The tests check :func:`kernel_table` and :func:`gpu_metrics` against the plugin's own parser
(``RunProfileData``) on the V100 ResNet-50 sample traces of ``pytorch/kineto`` ``tb_plugin/samples``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace import schema
from ..trace.graph_replay import graph_replays
from ..trace.ids import present as id_present
from ..trace.model import Trace
from . import _intervals as iv
from ._memo import per_trace

__all__ = ["kernel_summary", "kernel_table", "gpu_metrics", "kernel_operators", "sm_efficiency_ranges",
           "operator_tensor_cores", "NO_OPERATOR", "GPU_METRIC_COLUMNS"]

_BY = {"name": ["name"], "stream": ["device", "stream"], "device": ["device"]}
_STAT_COLUMNS = ["instances", "total_ns", "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns", "gpu_time_ratio"]


@per_trace
def kernel_summary(
    trace: Trace, *, by: str = "name", categories: tuple[str, ...] = (schema.KERNEL,)
) -> pd.DataFrame:
    """Duration statistics of device kernels grouped by name, stream or device.

    Parameters
    ----------
    trace : Trace
    by : {"name", "stream", "device"}, default "name"
        Key of the rows: the kernel ``name``; (``device``, ``stream``); or ``device``.
    categories : tuple of str, default ("kernel",)
        Device categories to include; add ``"gpu_memcpy"``, ``"gpu_memset"`` to count copies.

    Returns
    -------
    pandas.DataFrame
        Key column(s) then ``instances`` (int64), ``total_ns``, ``min_ns``, ``max_ns``
        (int64 ns), ``avg_ns``, ``med_ns``, ``std_ns`` (float64 ns; ``std_ns`` is the sample
        standard deviation, ddof=1, 0 for a single instance), ``gpu_time_ratio`` (the row's
        ``total_ns`` over the summed duration of all included device events, 0..1; overlap of
        concurrent kernels is not removed, as in HTA's kernel breakdown). Sorted by
        ``total_ns`` descending. Empty (with these columns) when the trace holds no kernels.

    Raises
    ------
    ValueError
        For an unknown ``by``.
    """
    if by not in _BY:
        msg = f"by must be one of {sorted(_BY)}, not {by!r}"
        raise ValueError(msg)
    keys = _BY[by]
    ev = trace.events
    k = ev[pred.category_in(ev, categories) & pred.is_device(ev)]
    if k.empty:
        out = pd.DataFrame({c: pd.Series(dtype=object if c == "name" else "int64") for c in keys})
        for c in _STAT_COLUMNS:
            out[c] = pd.Series(dtype="int64" if c in ("instances", "total_ns", "min_ns", "max_ns") else "float64")
        return out
    frame = pd.DataFrame({c: (k[c].astype(object) if c == "name" else k[c]) for c in keys})
    frame["dur"] = k["dur_ns"].to_numpy()
    g = frame.groupby(keys, sort=False, observed=True)["dur"]
    out = g.agg(
        instances="count", total_ns="sum", avg_ns="mean", med_ns="median", min_ns="min", max_ns="max", std_ns="std"
    ).reset_index()
    out["std_ns"] = out["std_ns"].fillna(0.0)
    total = float(frame["dur"].sum())
    out["gpu_time_ratio"] = out["total_ns"] / total if total > 0 else 0.0
    for c in ("instances", "total_ns", "min_ns", "max_ns"):
        out[c] = out[c].astype(np.int64)
    out["avg_ns"] = out["avg_ns"].astype(np.float64)
    out["med_ns"] = out["med_ns"].astype(np.float64)
    out = out.sort_values(["total_ns", *keys], ascending=[False] + [True] * len(keys), kind="stable")
    return out.reset_index(drop=True)[[*keys, *_STAT_COLUMNS]]


#: Operator label of a kernel no host operator launched (launched outside any op, or no launch record).
NO_OPERATOR = "(no operator)"
#: Ratio columns of :func:`gpu_metrics`, in the Overview's order.
GPU_METRIC_COLUMNS = ("utilization_ratio", "est_sm_efficiency_ratio", "est_achieved_occupancy_ratio",
                      "tensor_core_kernel_ratio", "tensor_core_eligible_ratio")
# torch-tb-profiler 0.4.3 profiler/node.py: what is_operator_node() leaves out of the "ops" it sums over
_NOT_OPERATOR_NAMES = frozenset({"DataParallel.forward", "DistributedDataParallel.forward"})


def _first_row_by_key(keys: np.ndarray, rows: np.ndarray) -> pd.Series:
    """key -> the first of ``rows`` carrying it (a lookup Series indexed by key)."""
    lut = pd.Series(rows, index=keys)
    return lut[~lut.index.duplicated()]


def _lookup(lut: pd.Series, keys: np.ndarray) -> np.ndarray:
    hit = lut.reindex(keys).to_numpy()
    return np.where(np.isnan(hit), -1, hit).astype(np.int64) if len(hit) else np.zeros(0, np.int64)


def kernel_operators(trace: Trace) -> pd.DataFrame:
    """Which host operator launched each kernel.

    A kernel's launch is the runtime call with its correlation id (CUPTI's link); the operator is the
    host op (``cpu_op`` or ``user_annotation``, ``ProfilerStep#N`` included) whose External id equals
    that runtime call's, as torch-tb-profiler 0.4.3 attaches runtime calls to operators
    (``profiler/event_parser.py`` ``NodeParserMixin.parse_nodes``). A kernel without a runtime call in
    the trace uses its own External id. External id 0 (or none) is no operator. When no operator with
    that id holds the runtime call in its time range (ids repeated in a long trace, or traces whose
    runtime ids are their correlation ids), the operator is the innermost ``cpu_op``/``user_annotation``
    around the runtime call in torch's host call tree (``operators.host_call_tree``); there 0.4.3 takes the
    id at its word, or files the kernel under its call-tree root.

    A kernel of a CUDA-graph replay goes to the operator that captured it when
    :func:`nbprof.trace.graph_replay.graph_replays` finds it (from the capture, or by aligning the replay with the
    same kernels run eagerly); else it stays on the graph launch's operator.

    Returns
    -------
    pandas.DataFrame
        One row per kernel (``cat == "kernel"`` on a device) in events order: ``event`` (row position
        in ``trace.events``), ``launched`` (True when a runtime call with its correlation id exists),
        ``op_event`` (row position of the launching operator, -1 if none), ``operator`` (its name, or
        :data:`NO_OPERATOR`), ``graph`` (the CUDA graph a replayed kernel belongs to, -1 for an eager kernel),
        ``attribution`` (how ``op_event`` was found: ``launch`` for an eager kernel's launch link, ``capture`` /
        ``sequence`` / ``graph_order`` for a replayed kernel, ``none`` without an operator).
    """
    ev = trace.events
    kidx = np.flatnonzero(pred.is_kernel(ev))
    corr = ev["correlation"].to_numpy()
    ext = ev["external_id"].to_numpy()
    rt = np.flatnonzero(pred.is_runtime(ev) & pred.is_host(ev) & id_present(corr))
    rt_row = _lookup(_first_row_by_key(corr[rt], rt), corr[kidx]) if len(rt) else np.full(len(kidx), -1)
    launched = rt_row >= 0
    launch_ext = np.where(launched, ext[np.clip(rt_row, 0, None)], ext[kidx])
    ops = np.flatnonzero(pred.is_host_op(ev) & id_present(ext) & (ext != 0))
    op_row = _lookup(_first_row_by_key(ext[ops], ops), launch_ext) if len(ops) else np.full(len(kidx), -1)
    op_row = np.where(id_present(launch_ext) & (launch_ext != 0), op_row, -1)
    # an External id can repeat across a long trace: the operator must enclose the runtime call (1 ns slack
    # for the exported rounding), else the match is another op's id and the kernel has no operator
    ts, end = ev["ts_ns"].to_numpy(np.int64), ev["ts_ns"].to_numpy(np.int64) + ev["dur_ns"].to_numpy(np.int64)
    chk = (op_row >= 0) & launched
    o, r = op_row[chk], rt_row[chk]
    op_row[np.flatnonzero(chk)[(ts[r] < ts[o]) | (end[r] > end[o] + 1)]] = -1
    # no (or no enclosing) operator of that External id: the innermost host op around the runtime call
    miss = np.flatnonzero((op_row < 0) & launched)
    if len(miss):
        op_row[miss] = _enclosing_host_op(trace, rt_row[miss])
    # a CUDA-graph replay's kernels: the operator that captured them (one attribution, nbprof.trace.graph_replay)
    attribution = np.where(op_row >= 0, "launch", "none").astype(object)
    graph = np.full(len(kidx), -1, np.int64)
    gr = graph_replays(trace)
    if len(gr):
        pos = pd.Series(np.arange(len(kidx)), index=kidx).reindex(gr["event"].to_numpy()).to_numpy()
        ok = ~np.isnan(pos)
        p, g = pos[ok].astype(np.int64), gr[ok]
        graph[p] = g["graph"].to_numpy()
        method = g["method"].to_numpy(object)
        taken = method != "graph_order"
        op_row[p[taken]] = g["op_event"].to_numpy()[taken]
        attribution[p] = method
    names = ev["name"].astype(object).to_numpy()
    operator = np.where(op_row >= 0, names[np.clip(op_row, 0, None)] if len(names) else NO_OPERATOR, NO_OPERATOR)
    return pd.DataFrame({"event": kidx.astype(np.int64), "launched": launched, "op_event": op_row,
                         "operator": operator.astype(object), "graph": graph, "attribution": attribution})


def _enclosing_host_op(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per runtime-call row of ``trace.events``: the row of the innermost ``cpu_op``/``user_annotation`` holding it
    in torch's host call tree (``operators.host_call_tree``), -1 if none."""
    from .operators import host_call_tree

    tree = host_call_tree(trace, python_functions=False)
    ev_rows = tree["event"].to_numpy(np.int64)
    pos = pd.Series(np.arange(len(ev_rows)), index=ev_rows).reindex(rows).to_numpy()
    out = np.full(len(rows), -1, dtype=np.int64)
    ok = ~np.isnan(pos)
    if not ok.any():
        return out
    parent = tree["parent"].to_numpy(np.int64)[pos[ok].astype(np.int64)]
    is_op = tree["cat"].astype(str).isin(pred.HOST_OP_CATEGORIES).to_numpy()
    good = parent >= 0
    good[good] = is_op[parent[good]]
    out[np.flatnonzero(ok)[good]] = ev_rows[parent[good]]
    return out


def _weighted(values: np.ndarray, weights: np.ndarray, groups: np.ndarray, n: int) -> np.ndarray:
    """Per group: sum(values * weights) / sum(weights) with missing values as 0, and 0 where the weights sum to 0."""
    v = np.nan_to_num(values.astype(np.float64), nan=0.0)
    num = np.bincount(groups, weights=v * weights, minlength=n)
    den = np.bincount(groups, weights=weights, minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, 0.0)


_TABLE_KEYS = {"kernel": ["name"],
               "kernel_operator": ["name", "operator", "grid", "block", "registers", "shared_mem_bytes"]}


def kernel_table(trace: Trace, *, by: str = "kernel") -> pd.DataFrame:
    """torch-tb-profiler 0.4.3's GPU Kernel view tables: per kernel, or per kernel and launching operator.

    Parameters
    ----------
    trace : Trace
    by : {"kernel", "kernel_operator"}
        ``"kernel"``: one row per kernel name (the plugin's *Kernel* table, ``profiler/kernel_parser.py``);
        ``"kernel_operator"``: one row per kernel name, launching operator (:func:`kernel_operators`),
        grid, block, registers per thread and shared memory (the plugin's *Kernel + Op* table,
        ``profiler/op_agg.py`` ``aggregate_kernels``).

    Returns
    -------
    pandas.DataFrame
        Key columns (``name``; for ``"kernel_operator"`` also ``operator``, ``grid``, ``block`` as the
        trace writes them, e.g. ``[256, 1, 1]``, ``registers``, ``shared_mem_bytes`` in bytes, -1 if not recorded, and
        ``operator_tensor_core_eligible``: the operator is in
        :data:`nbprof.trace.predicates.TENSOR_CORE_ELIGIBLE_OPS`), then ``tensor_cores_used`` (bool: the
        name matches :data:`nbprof.trace.predicates.TENSOR_CORE_KERNEL_PATTERNS`), ``calls`` (int64),
        ``total_ns``, ``max_ns``, ``min_ns`` (int64 ns), ``mean_ns`` (float64 ns),
        ``mean_blocks_per_sm`` and ``mean_est_achieved_occupancy_ratio`` (0..1): duration-weighted means
        over the calls, a call without the value counting as 0 and a group of zero total duration
        giving 0, as in the plugin; NaN in every row when no kernel of the trace carries the value.
        Sorted by ``total_ns`` descending. Empty (with these columns) for a trace without kernels.

    Notes
    -----
    The plugin leaves out of its Kernel + Op table the kernels whose launch carries an External id of
    no operator; here they are rows with operator :data:`NO_OPERATOR` (as are kernels launched
    outside any operator, which the plugin files under its call-tree root).

    Raises
    ------
    ValueError
        For an unknown ``by``.
    """
    if by not in _TABLE_KEYS:
        msg = f"by must be one of {sorted(_TABLE_KEYS)}, not {by!r}"
        raise ValueError(msg)
    keys = _TABLE_KEYS[by]
    ev = trace.events
    kmask = pred.is_kernel(ev)
    k = ev[kmask]
    frame = pd.DataFrame({"name": k["name"].astype(object).to_numpy()})
    if by == "kernel_operator":
        frame["operator"] = kernel_operators(trace)["operator"].to_numpy()
        frame["grid"] = k["grid"].astype(object).fillna("").to_numpy()
        frame["block"] = k["block"].astype(object).fillna("").to_numpy()
        frame["registers"] = k["registers"].to_numpy(np.int64)
        frame["shared_mem_bytes"] = k["shared_mem_bytes"].to_numpy(np.int64)
    dur = k["dur_ns"].to_numpy(np.int64)
    if len(frame):
        codes, uniq = pd.MultiIndex.from_frame(frame[keys]).factorize()
        n = len(uniq)
        out = pd.DataFrame(list(uniq), columns=keys)
    else:
        codes, n = np.zeros(0, np.int64), 0
        out = pd.DataFrame({c: pd.Series(dtype=object) for c in keys})
    if by == "kernel_operator":
        for c in ("registers", "shared_mem_bytes"):
            out[c] = out[c].astype(np.int64)
        out["operator_tensor_core_eligible"] = out["operator"].map(
            lambda o: o in pred.TENSOR_CORE_ELIGIBLE_OPS).astype(bool)
    out["tensor_cores_used"] = out["name"].map(
        lambda s: any(p in s for p in pred.TENSOR_CORE_KERNEL_PATTERNS)).astype(bool)
    calls = np.bincount(codes, minlength=n).astype(np.int64)
    total = np.bincount(codes, weights=dur, minlength=n)
    out["calls"] = calls
    out["total_ns"] = np.rint(total).astype(np.int64)
    out["mean_ns"] = np.where(calls > 0, total / np.maximum(calls, 1), np.nan)
    mx = np.full(n, np.iinfo(np.int64).min)
    mn = np.full(n, np.iinfo(np.int64).max)
    np.maximum.at(mx, codes, dur)
    np.minimum.at(mn, codes, dur)
    out["max_ns"], out["min_ns"] = mx, mn
    w = dur.astype(np.float64)
    for col, src, scale in (("mean_blocks_per_sm", "blocks_per_sm", 1.0),
                            ("mean_est_achieved_occupancy_ratio", "occupancy_ratio", 1.0)):
        vals = k[src].to_numpy(np.float64) * scale
        out[col] = _weighted(vals, w, codes, n) if np.isfinite(vals).any() else np.nan
    order = np.lexsort((np.arange(n), -out["total_ns"].to_numpy()))
    cols = [*keys, *(["operator_tensor_core_eligible"] if by == "kernel_operator" else []), "tensor_cores_used",
            "calls", "total_ns", "mean_ns", "max_ns", "min_ns", "mean_blocks_per_sm", "mean_est_achieved_occupancy_ratio"]
    return out.iloc[order].reset_index(drop=True)[cols]


def _metrics_window(trace: Trace, ks: np.ndarray, ke: np.ndarray) -> tuple[int, int]:
    """First step start to last step end (``steps.step_windows``, the plugin's ``steps[0][0]``,
    ``steps[-1][1]``); the kernels' span when there is no host window."""
    from .steps import step_windows

    w = step_windows(trace)
    if len(w):
        return int(w["start_ns"].min()), int(w["end_ns"].max())
    return int(ks.min()), int(ke.max())


def _sm_efficiency(s: np.ndarray, e: np.ndarray, bps: np.ndarray, w0: int, w1: int) -> float:
    """Est. SM efficiency: blocks per SM summed over concurrent kernels, capped at 1, time-averaged over the window.

    torch-tb-profiler 0.4.3 ``gpu_metrics_parser.py`` ``calculate_approximated_sm_efficiency`` with
    ``range_utils.merge_ranges_with_value``; NaN when no kernel with blocks per SM > 0 runs in the window.
    """
    if w1 <= w0:
        return float("nan")
    seg_s, seg_e, val = _sm_segments(s, e, bps)
    ov = np.clip(np.minimum(seg_e, w1) - np.maximum(seg_s, w0), 0, None)
    use = ov > 0
    if not use.any():
        return float("nan")
    return float((val[use] * ov[use]).sum() / (w1 - w0))


def _sm_segments(s: np.ndarray, e: np.ndarray, bps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, min(1, summed blocks per SM)) of the time segments where kernels with blocks per SM > 0
    run (``range_utils.merge_ranges_with_value``); the plugin skips non-positive (and missing) values."""
    ok = bps > 0
    s, e, v = s[ok], e[ok], bps[ok].astype(np.float64)
    if s.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(0)
    t = np.concatenate([s, e])
    d = np.concatenate([v, -v])
    kind = np.concatenate([np.zeros(s.size, np.int8), np.ones(e.size, np.int8)])  # starts before ends at a tie
    o = np.lexsort((kind, t))
    t, level = t[o], np.cumsum(d[o])
    seg_s, seg_e, val = t[:-1], t[1:], level[:-1]
    seg = (seg_e > seg_s) & (val > 0)
    return seg_s[seg], seg_e[seg], np.minimum(val[seg], 1.0)


def sm_efficiency_ranges(trace: Trace) -> pd.DataFrame:
    """Est. SM efficiency over time: per device, the segments where kernels with blocks per SM run.

    Returns
    -------
    pandas.DataFrame
        ``device``, ``ts_ns``, ``end_ns`` (ns from the trace origin) and ``sm_efficiency_ratio``
        (min(1, blocks per SM summed over the kernels running), 0..1): torch-tb-profiler 0.4.3's
        ``approximated_sm_efficiency_ranges`` (its trace-view counter). :func:`gpu_metrics`'
        ``est_sm_efficiency_ratio`` is their time average over its window. Empty without blocks-per-SM data.
    """
    cols = ["device", "ts_ns", "end_ns", "sm_efficiency_ratio"]
    ev = trace.events
    k = ev[pred.is_kernel(ev)]
    frames = []
    if "blocks_per_sm" in k:
        for dev, g in k.groupby("device", sort=True):
            s = g["ts_ns"].to_numpy(np.int64)
            bps = np.nan_to_num(g["blocks_per_sm"].to_numpy(np.float64), nan=0.0)
            a, b, v = _sm_segments(s, s + g["dur_ns"].to_numpy(np.int64), bps)
            frames.append(pd.DataFrame({"device": int(dev), "ts_ns": a, "end_ns": b, "sm_efficiency_ratio": v}))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c.endswith("ratio") else "int64") for c in cols})
    return pd.concat(frames, ignore_index=True)[cols]


def _bottom_tc_eligible(trace: Trace, tc_launchers: np.ndarray) -> np.ndarray:
    """Row positions (in ``trace.events``) of the *bottom* Tensor-Core-eligible operators.

    An operator is eligible when its name is in ``TENSOR_CORE_ELIGIBLE_OPS`` or it is a ``cpu_op`` that
    launched a Tensor Core kernel (``tc_launchers``); a bottom one has no eligible operator below it in
    the call tree (torch-tb-profiler 0.4.3 ``tensor_cores_parser.py`` ``_get_bottom_tc_eligible_operators``;
    eligibility passing up to parents, ``node.py`` ``OperatorNode.fill_stats``, cannot make a bottom one).
    """
    from .operators import host_call_tree

    tree = host_call_tree(trace, python_functions=False)
    if tree.empty:
        return np.zeros(0, np.int64)
    rows = tree["event"].to_numpy(np.int64)
    ev = trace.events
    elig = pred.is_tensor_core_eligible_op(ev)[rows]
    elig |= np.isin(rows, tc_launchers) & pred.category_in(ev, (schema.CPU_OP,))[rows]
    cs = np.concatenate([[0], np.cumsum(elig)])
    last = tree["last"].to_numpy(np.int64)
    below = cs[last + 1] - cs[np.arange(len(rows)) + 1]
    return np.asarray(rows[elig & (below == 0)], dtype=np.int64)


def gpu_metrics(trace: Trace) -> pd.DataFrame:
    """Per device: torch-tb-profiler 0.4.3's Overview GPU metrics (fractions 0..1).

    Parameters
    ----------
    trace : Trace

    Returns
    -------
    pandas.DataFrame
        One row per device that ran a kernel, ascending: ``device``, ``kernels`` (count),
        ``window_start_ns``, ``window_end_ns`` (int64 ns: first step start to last step end as
        ``steps.step_windows`` extends them to their device work; the kernels' span without host
        events), ``busy_ns`` (kernel union inside the window), and

        - ``utilization_ratio``: ``busy_ns`` / window length (``gpu_metrics_parser.py``
          ``calculate_gpu_utilization``);
        - ``est_sm_efficiency_ratio``: the time average over the window of min(1, sum of ``blocks per
          SM`` of the kernels running), NaN without blocks-per-SM data (``calculate_approximated_sm_efficiency``);
        - ``est_achieved_occupancy_ratio``: kernels' est. achieved occupancy weighted by their time inside
          the window, NaN without occupancy data (``calculate_occupancy``; the plugin prints it in %);
        - ``tensor_core_kernel_ratio``: time of Tensor Core kernels (``predicates.uses_tensor_cores``) over
          the time of all kernels launched by operators (``tensor_cores_parser.py`` ``_calculate_tc_ratio``);
        - ``tensor_core_eligible_ratio``: time of kernels launched by the bottom-most Tensor-Core-eligible
          operators over that of all kernels launched by operators (``_get_tc_eligible_ops_kernel_ratio``;
          the plugin computes it over all devices together, here per device: equal on one device).

        "Launched by operators" are the kernels of :func:`kernel_operators` whose operator is a ``cpu_op``
        other than ``ProfilerStep#N``, a DataLoader ``__next__``, ``Optimizer.*`` or ``(Distributed)DataParallel.forward``
        (the plugin's ``is_operator_node``). Empty (with these columns) without kernels.
    """
    cols = ["device", "kernels", "window_start_ns", "window_end_ns", "busy_ns", *GPU_METRIC_COLUMNS]
    ev = trace.events
    kmask = pred.is_kernel(ev)
    if not kmask.any():
        return pd.DataFrame({c: pd.Series(dtype="int64" if i < 5 else "float64") for i, c in enumerate(cols)})
    ko = kernel_operators(trace)
    kidx = ko["event"].to_numpy()
    ks = ev["ts_ns"].to_numpy(np.int64)[kidx]
    ke = ks + ev["dur_ns"].to_numpy(np.int64)[kidx]
    dev = ev["device"].to_numpy()[kidx]
    w0, w1 = _metrics_window(trace, ks, ke)
    tc = pred.uses_tensor_cores(ev)[kidx]
    op_row = ko["op_event"].to_numpy()
    names = ev["name"]
    is_cpu_op = pred.category_in(ev, (schema.CPU_OP,))
    excluded = pred.is_step_name(ev) | pred.name_mask(names, lambda n: (
        n in _NOT_OPERATOR_NAMES or n.startswith("Optimizer.") or _is_dataloader_name(n)))
    by_op = (op_row >= 0) & is_cpu_op[np.clip(op_row, 0, None)] & ~excluded[np.clip(op_row, 0, None)]
    bottom = _bottom_tc_eligible(trace, np.unique(op_row[(op_row >= 0) & tc]))
    in_bottom = np.isin(op_row, bottom) & (op_row >= 0)
    bps = ev["blocks_per_sm"].to_numpy(np.float64)[kidx]
    occ = ev["occupancy_ratio"].to_numpy(np.float64)[kidx]
    rows = []
    for d in np.unique(dev):
        m = dev == d
        s, e = ks[m], ke[m]
        busy = iv.total_ns(iv.intersect(iv.merge(s, e), iv.merge([w0], [w1])))
        span = w1 - w0
        clip = np.clip(np.minimum(e, w1) - np.maximum(s, w0), 0, None).astype(np.float64)
        has_occ = np.isfinite(occ[m]) & (occ[m] >= 0)
        occ_t = clip[has_occ].sum()
        op_t = float((e - s)[by_op[m]].sum())
        rows.append({
            "device": int(d), "kernels": int(m.sum()), "window_start_ns": w0, "window_end_ns": w1, "busy_ns": busy,
            "utilization_ratio": busy / span if span > 0 else np.nan,
            "est_sm_efficiency_ratio": _sm_efficiency(s, e, np.nan_to_num(bps[m], nan=0.0), w0, w1),
            "est_achieved_occupancy_ratio": float((occ[m][has_occ] * clip[has_occ]).sum() / occ_t) if occ_t > 0 else np.nan,
            "tensor_core_kernel_ratio": float((e - s)[by_op[m] & tc[m]].sum()) / op_t if op_t > 0 else 0.0,
            "tensor_core_eligible_ratio": float((e - s)[in_bottom[m]].sum()) / op_t if op_t > 0 else 0.0,
        })
    return pd.DataFrame(rows, columns=cols)


def _is_dataloader_name(name: str) -> bool:
    from .steps import _is_dataloader

    return _is_dataloader(name)


def operator_tensor_cores(trace: Trace) -> pd.DataFrame:
    """Per operator name: Tensor Core eligibility and the share of its kernels' time on Tensor Cores.

    Returns
    -------
    pandas.DataFrame
        One row per operator name that launched a kernel itself or through its children (host call tree,
        :func:`~nbprof.analysis.operators.host_call_tree`): ``tensor_core_eligible`` (the name is in
        :data:`nbprof.trace.predicates.TENSOR_CORE_ELIGIBLE_OPS`), ``self_kernel_ns`` /
        ``self_tensor_core_ns`` (time of the kernels it launched itself / of those using Tensor Cores,
        ``predicates.uses_tensor_cores``; ns), ``total_kernel_ns`` / ``total_tensor_core_ns`` (its
        children's included), ``self_tensor_core_ratio`` and ``total_tensor_core_ratio`` (0..1; 0 without
        kernel time). Sorted by ``total_kernel_ns`` descending.

    Notes
    -----
    torch-tb-profiler 0.4.3's operator view columns ``tc_eligible``, ``tc_self_ratio``, ``tc_total_ratio``
    (``profiler/op_agg.py``); a kernel's operator is :func:`kernel_operators`'.
    """
    from .operators import host_call_tree

    cols = ["name", "tensor_core_eligible", "self_kernel_ns", "self_tensor_core_ns", "total_kernel_ns",
            "total_tensor_core_ns", "self_tensor_core_ratio", "total_tensor_core_ratio"]
    ko = kernel_operators(trace)
    ko = ko[ko["op_event"] >= 0]
    tree = host_call_tree(trace)
    row_of = pd.Series(np.arange(len(tree)), index=tree["event"].to_numpy())
    rows = row_of.reindex(ko["op_event"].to_numpy()).to_numpy()
    ok = ~np.isnan(rows)
    if not ok.any():
        return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else ("bool" if c.endswith("eligible") else
                                          ("float64" if c.endswith("ratio") else "int64"))) for c in cols})
    ev = trace.events
    k = ko["event"].to_numpy()[ok]
    rows = rows[ok].astype(np.int64)
    dur = ev["dur_ns"].to_numpy(np.int64)[k]
    tc = np.asarray(pred.uses_tensor_cores(ev))[k]
    n = len(tree)
    last = tree["last"].to_numpy()
    # torch's merge of a same-name single-child wrapper: the pair is one row (the wrapper's), its self time
    # the total less the kept children's totals
    kept = ~tree["merged"].to_numpy()
    effp = tree["effective_parent"].to_numpy()
    ch = np.flatnonzero(kept & (effp >= 0))
    out = {}
    for col, v in (("kernel_ns", dur), ("tensor_core_ns", dur * tc)):
        cs = np.concatenate([[0.0], np.cumsum(np.bincount(rows, weights=v, minlength=n))])
        total = cs[last + 1] - cs[np.arange(n)]
        out["total_" + col] = total[kept]
        out["self_" + col] = (total - np.bincount(effp[ch], weights=total[ch], minlength=n))[kept]
    names = tree["name"].astype(str).to_numpy()[kept]
    g = pd.DataFrame({"name": names, **out}).groupby("name", sort=True).sum()
    g = g[g["total_kernel_ns"] > 0].astype(np.int64)
    g["tensor_core_eligible"] = [x in pred.TENSOR_CORE_ELIGIBLE_OPS for x in g.index]
    for p in ("self", "total"):
        d = g[f"{p}_kernel_ns"].to_numpy()
        g[f"{p}_tensor_core_ratio"] = np.divide(g[f"{p}_tensor_core_ns"].to_numpy(), d, out=np.zeros(len(g)), where=d > 0)
    g = g.reset_index().sort_values(["total_kernel_ns", "name"], ascending=[False, True], kind="stable")
    return g.reset_index(drop=True)[cols]
