"""Hardware counters of kernels (CUPTI range profiler / Nsight Compute metric names), joined to kernels and operators.

Kineto's CUPTI profiler mode (``torch.profiler._ExperimentalConfig(profiler_metrics=[...],
profiler_measure_per_kernel=True)``) writes one ``cuda_profiler_range`` row per kernel with the metric values as
args; the loader keeps every numeric arg of a device row with no column in the ``device_args`` side table (event,
key, value). In that mode CUPTI records no kernel activity and the ranges carry no correlation id: the k-th range (in
time order) is the k-th kernel launch call (HTA ``hta/analyzers/cupti_counter_analysis.py``, which requires equal
counts; here the first min(ranges, launches) pairs are joined and the rest left unjoined, said by
``launch_event == -1``); the operator is the one with the launch's External id, else the innermost host op around the
launch (``kernels.kernel_operators``' rule). Counters on a ``kernel`` row join to it directly.

Derived columns, from the metrics where counted (Nsight Compute's metric names; NaN when not counted):

- ``achieved_occupancy_ratio`` = ``sm__warps_active.avg.pct_of_peak_sustained_active`` / 100 (legacy nvprof:
  ``achieved_occupancy``, already a ratio);
- ``sm_throughput_ratio`` = ``sm__throughput.avg.pct_of_peak_sustained_elapsed`` / 100;
- ``dram_bytes`` = ``dram__bytes_read.sum`` + ``dram__bytes_write.sum`` (or ``dram__bytes.sum``);
- ``counted_flops`` = sum of ``smsp__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on.sum``, an FMA
  counting 2 (HTA's ``CUDA_SASS_INSTRUCTION_COUNTER_FLOPS``).

The roofline uses ``dram_bytes`` in place of a kernel's modelled bytes where it is counted
(``efficiency.kernel_work``'s ``bytes_source``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.ids import present as id_present
from ..trace.model import Trace
from ._memo import per_trace
from .kernels import NO_OPERATOR, _enclosing_host_op, kernel_operators

__all__ = ["COUNTER_DERIVED", "ACTIVITY_ARGS", "kernel_counters", "counter_table", "measured_dram_bytes"]

#: CUPTI activity args of device rows kept in ``device_args`` that are not hardware counters.
ACTIVITY_ARGS = frozenset({"queued", "context", "warps per SM", "memory bandwidth (GB/s)", "theoretical occupancy %",
                           "graph id", "graph node id"})
#: The derived columns (module docstring).
COUNTER_DERIVED = ("achieved_occupancy_ratio", "sm_throughput_ratio", "dram_bytes", "counted_flops")
_RANGE_CAT = "cuda_profiler_range"
_SASS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
_FLOP_WEIGHTS = {_SASS.format(p + op): (2.0 if op == "fma" else 1.0) for p in "dfh" for op in ("add", "mul", "fma")}


def _derived(wide: pd.DataFrame) -> dict[str, np.ndarray]:
    n = len(wide)

    def col(*keys: str) -> np.ndarray | None:
        for k in keys:
            if k in wide:
                return np.asarray(wide[k].to_numpy(np.float64))
        return None

    nan = np.full(n, np.nan)
    occ = col("sm__warps_active.avg.pct_of_peak_sustained_active")
    occ = occ / 100.0 if occ is not None else col("achieved_occupancy")
    sm = col("sm__throughput.avg.pct_of_peak_sustained_elapsed")
    rd, wr, both = col("dram__bytes_read.sum"), col("dram__bytes_write.sum"), col("dram__bytes.sum")
    dram = both
    if dram is None and (rd is not None or wr is not None):
        zero = np.zeros(n)
        dram = np.asarray(np.nan_to_num(rd if rd is not None else zero) + np.nan_to_num(wr if wr is not None else zero))
    fl_keys = [k for k in _FLOP_WEIGHTS if k in wide]
    flops = (sum(wide[k].to_numpy(np.float64) * _FLOP_WEIGHTS[k] for k in fl_keys) if fl_keys else None)
    return {"achieved_occupancy_ratio": occ if occ is not None else nan,
            "sm_throughput_ratio": sm / 100.0 if sm is not None else nan,
            "dram_bytes": dram if dram is not None else nan,
            "counted_flops": np.asarray(flops, np.float64) if flops is not None else nan}


@per_trace
def kernel_counters(trace: Trace) -> pd.DataFrame:
    """Per counted kernel: its hardware counters, its launch and operator (module docstring).

    Returns
    -------
    pandas.DataFrame
        One row per device row carrying counters, in time order: ``event`` (the row with the counters: a
        ``cuda_profiler_range`` or a ``kernel``), ``kernel_event`` (the kernel row, -1 in profiler-range mode, which
        records none), ``launch_event`` (the launch call, -1 if unjoined), ``op_event`` / ``operator`` (the launching
        operator, -1 / :data:`nbprof.analysis.kernels.NO_OPERATOR`), ``name`` (the kernel), then the derived
        ``achieved_occupancy_ratio``, ``sm_throughput_ratio`` (0..1), ``dram_bytes`` (bytes), ``counted_flops``
        (FLOP), then every counter as recorded (float64, named by its metric). Empty without counters.
    """
    ev = trace.events
    da = (trace.tables or {}).get("device_args")
    base = ["event", "kernel_event", "launch_event", "op_event", "operator", "name", *COUNTER_DERIVED]
    if da is None or not len(da):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in base})
    keys = da["key"].astype(str)
    da = da[~keys.isin(ACTIVITY_ARGS).to_numpy()]
    if not len(da):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in base})
    wide = da.assign(key=da["key"].astype(str)).pivot_table(index="event", columns="key", values="value",
                                                             aggfunc="first")
    rows = wide.index.to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    order = np.argsort(ts[rows], kind="stable")
    rows, wide = rows[order], wide.iloc[order]
    names = ev["name"].astype(object).to_numpy()
    is_kernel = pred.is_kernel(ev)[rows]
    is_range = pred.category_in(ev, (_RANGE_CAT,))[rows]
    kernel_event = np.where(is_kernel, rows, -1)
    launch = np.full(len(rows), -1, np.int64)
    op = np.full(len(rows), -1, np.int64)
    ko = kernel_operators(trace).set_index("event")
    if is_kernel.any():
        op[is_kernel] = ko["op_event"].reindex(rows[is_kernel]).fillna(-1).to_numpy(np.int64)
    rr = np.flatnonzero(is_range)
    if len(rr):
        lc = np.flatnonzero(pred.is_kernel_launch(ev))
        lc = lc[np.argsort(ts[lc], kind="stable")]
        m = min(len(rr), len(lc))
        launch[rr[:m]] = lc[:m]
        if m:
            ext = ev["external_id"].to_numpy()
            ops = np.flatnonzero(pred.is_host_op(ev) & id_present(ext) & (ext != 0))
            lut = pd.Series(ops, index=ext[ops])
            lut = lut[~lut.index.duplicated()]
            hit = lut.reindex(ext[lc[:m]]).to_numpy()
            op_l = np.where(np.isnan(hit), -1, hit).astype(np.int64)
            miss = op_l < 0  # no operator with the launch's External id: the host op around the launch
            if miss.any():
                op_l[miss] = _enclosing_host_op(trace, lc[:m][miss])
            op[rr[:m]] = op_l
    operator = np.where(op >= 0, names[np.clip(op, 0, None)], NO_OPERATOR)
    out = pd.DataFrame({"event": rows, "kernel_event": kernel_event, "launch_event": launch, "op_event": op,
                        "operator": operator.astype(object), "name": names[rows].astype(object)})
    for k, v in _derived(wide).items():
        out[k] = v
    for k in wide.columns:
        out[str(k)] = wide[k].to_numpy(np.float64)
    return out


def counter_table(trace: Trace) -> pd.DataFrame:
    """The GPU Kernel view's counter table: per kernel name and launching operator.

    Returns
    -------
    pandas.DataFrame
        ``name``, ``operator``, ``calls`` (counted kernels), ``mean_achieved_occupancy_ratio``,
        ``mean_sm_throughput_ratio`` (means over the calls, 0..1), ``dram_bytes``, ``counted_flops`` (sums over the
        calls; NaN where not counted). Sorted by ``counted_flops``, then ``dram_bytes``, descending. Empty without
        counters.
    """
    kc = kernel_counters(trace)
    cols = ["name", "operator", "calls", "mean_achieved_occupancy_ratio", "mean_sm_throughput_ratio", "dram_bytes",
            "counted_flops"]
    if not len(kc):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    g = kc.groupby(["name", "operator"], sort=False, observed=True, dropna=False)
    out = g.agg(calls=("event", "size"), mean_achieved_occupancy_ratio=("achieved_occupancy_ratio", "mean"),
                mean_sm_throughput_ratio=("sm_throughput_ratio", "mean"),
                dram_bytes=("dram_bytes", lambda s: s.sum(min_count=1)),
                counted_flops=("counted_flops", lambda s: s.sum(min_count=1))).reset_index()
    out["calls"] = out["calls"].astype(np.int64)
    out = out.sort_values(["counted_flops", "dram_bytes"], ascending=False, kind="stable", na_position="last")
    return out.reset_index(drop=True)[cols]


def measured_dram_bytes(trace: Trace) -> pd.Series:
    """Kernel row -> its counted DRAM bytes (``dram_bytes``), for kernels whose counters include DRAM traffic."""
    kc = kernel_counters(trace)
    if not len(kc):
        return pd.Series(dtype=np.float64)
    k = kc[(kc["kernel_event"] >= 0) & np.isfinite(kc["dram_bytes"].to_numpy(np.float64))]
    return pd.Series(k["dram_bytes"].to_numpy(np.float64), index=k["kernel_event"].to_numpy(np.int64))
