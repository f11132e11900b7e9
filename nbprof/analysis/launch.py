"""Kernel launch statistics: launch delay, runtime-call cost, launch queue length, launch-bound phases.

Every device op (kernel, memcpy, memset) is joined to the runtime/driver call that launched it by
CUPTI correlation id. Definitions:

* ``launch_delay_ns`` = device-op start - runtime-call start (how long after the host *began* the
  launch the op started on the device);
* ``delay_after_call_ns`` = device-op start - runtime-call end (HTA's ``launch_delay``);
* ``runtime_ns`` = duration of the runtime call; ``device_ns`` = duration of the op;
* a *short* op runs for less time than its launch call took (HTA ``get_cuda_kernel_launch_stats``:
  "GPU events with a shorter duration than the corresponding CPU events");
* queue length of a stream = ops launched (runtime call started) but not yet finished (HTA
  ``get_queue_length_time_series`` counts until the op *starts*; ``count_running=False``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.model import Trace
from . import _intervals as iv
from .utilization import device_ops

LAUNCH_COLUMNS = ("correlation", "name", "device", "stream", "ts_ns", "launch_delay_ns", "runtime_ns", "device_ns",
                  "delay_after_call_ns", "runtime_name", "runtime_ts_ns", "kind", "short")


def launch_stats(trace: Trace) -> pd.DataFrame:
    """One row per device op that has a launching runtime call.

    Parameters
    ----------
    trace : nbprof.Trace

    Returns
    -------
    pandas.DataFrame
        ``correlation, name, device, stream, ts_ns`` (op start), ``launch_delay_ns`` (op start -
        runtime-call start), ``runtime_ns`` (runtime-call duration), ``device_ns`` (op duration),
        ``delay_after_call_ns`` (op start - runtime-call end), ``runtime_name`` (e.g.
        ``cudaLaunchKernel``), ``runtime_ts_ns``, ``kind`` (compute/communication/memory),
        ``short`` (bool: ``device_ns < runtime_ns``). Sorted by ``ts_ns``. Empty without device ops.

    Notes
    -----
    Device ops without a runtime call carrying the same correlation id (e.g. a trace cut at the
    start) are left out. HTA ``CudaKernelAnalysis.cuda_kernel_launch_stats`` reports the same
    durations and ``delay_after_call_ns`` as its ``launch_delay``.
    """
    d = device_ops(trace)
    d = d[d["runtime_ts_ns"] >= 0]
    out = pd.DataFrame({
        "correlation": d["correlation"].to_numpy(np.int64),
        "name": d["name"].to_numpy(object),
        "device": d["device"].to_numpy(np.int64),
        "stream": d["stream"].to_numpy(np.int64),
        "ts_ns": d["ts_ns"].to_numpy(np.int64),
        "launch_delay_ns": (d["ts_ns"] - d["runtime_ts_ns"]).to_numpy(np.int64),
        "runtime_ns": (d["runtime_end_ns"] - d["runtime_ts_ns"]).to_numpy(np.int64),
        "device_ns": d["dur_ns"].to_numpy(np.int64),
        "delay_after_call_ns": (d["ts_ns"] - d["runtime_end_ns"]).to_numpy(np.int64),
        "runtime_name": d["runtime_name"].to_numpy(object),
        "runtime_ts_ns": d["runtime_ts_ns"].to_numpy(np.int64),
        "kind": d["kind"].to_numpy(object),
    })
    out["short"] = out["device_ns"] < out["runtime_ns"]
    return out.sort_values("ts_ns", kind="stable").reset_index(drop=True)


def queue_length(trace: Trace, *, count_running: bool = True) -> pd.DataFrame:
    """Launch queue length over time, per device and stream (a step function).

    Parameters
    ----------
    trace : nbprof.Trace
    count_running : bool, default True
        True: an op leaves the queue when it *finishes* (outstanding = launched, not finished).
        False: when it *starts* (HTA's definition: waiting to run).

    Returns
    -------
    pandas.DataFrame
        ``ts_ns, device, stream, queue_length``: one row per change; the value holds until the next
        row of the same stream. Sorted by device, stream, ts_ns. At equal times decrements are
        applied before increments.
    """
    s = launch_stats(trace)
    cols = ["ts_ns", "device", "stream", "queue_length"]
    if s.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    leave = (s["ts_ns"] + s["device_ns"]) if count_running else s["ts_ns"]
    ev = pd.DataFrame({
        "ts_ns": np.concatenate([s["runtime_ts_ns"].to_numpy(), leave.to_numpy()]),
        "device": np.concatenate([s["device"].to_numpy()] * 2),
        "stream": np.concatenate([s["stream"].to_numpy()] * 2),
        "delta": np.concatenate([np.ones(len(s), np.int64), -np.ones(len(s), np.int64)]),
    })
    ev = ev.sort_values(["device", "stream", "ts_ns", "delta"], kind="stable")
    ev["queue_length"] = ev.groupby(["device", "stream"])["delta"].cumsum().astype(np.int64)
    # one row per time point: the state after all changes at that time
    ev = ev.drop_duplicates(["device", "stream", "ts_ns"], keep="last")
    return ev[cols].reset_index(drop=True)


def queue_length_summary(trace: Trace, *, count_running: bool = True) -> pd.DataFrame:
    """Per device and stream: ``max_queue_length`` and time-weighted ``mean_queue_length``.

    The mean is over the stream's first to last queue change. See :func:`queue_length`.
    """
    q = queue_length(trace, count_running=count_running)
    rows = []
    for (dev, stream), g in q.groupby(["device", "stream"], sort=True):
        t = g["ts_ns"].to_numpy(np.int64)
        v = g["queue_length"].to_numpy(np.int64)
        dt = np.diff(t)
        span = t[-1] - t[0]
        mean = float((v[:-1] * dt).sum() / span) if span > 0 else float(v.mean())
        rows.append({"device": int(dev), "stream": int(stream), "max_queue_length": int(v.max()),
                     "mean_queue_length": mean})
    return pd.DataFrame(rows, columns=["device", "stream", "max_queue_length", "mean_queue_length"])


def launch_bound_phases(trace: Trace, *, short_ratio: float = 0.5, busy_ratio: float = 0.5) -> pd.DataFrame:
    """Flag steps (or the whole window) where the host cannot launch work fast enough.

    A phase is *launch-bound* when at least ``short_ratio`` of its device ops run for less time than
    their launch call took **and** the device is busy for less than ``busy_ratio`` of the phase:
    the GPU waits on a stream of tiny kernels the CPU enqueues one by one (fixes: CUDA Graphs,
    ``torch.compile``, fusion, larger batches).

    Parameters
    ----------
    trace : nbprof.Trace
    short_ratio, busy_ratio : float

    Returns
    -------
    pandas.DataFrame
        Per step (``nbprof.analysis.steps.step_windows``; the whole window when there are no
        steps): ``step, start_ns, end_ns, ops, short_ops, short_ratio, median_device_ns,
        median_runtime_ns, busy_ns, busy_ratio, launch_bound``. Ops are assigned to the step whose
        window holds their start. Empty without launched device ops.
    """
    from .steps import step_windows

    s = launch_stats(trace)
    cols = ["step", "start_ns", "end_ns", "ops", "short_ops", "short_ratio", "median_device_ns",
            "median_runtime_ns", "busy_ns", "busy_ratio", "launch_bound"]
    win = step_windows(trace)
    if s.empty or win.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    ws = win["start_ns"].to_numpy(np.int64)
    we = win["end_ns"].to_numpy(np.int64)
    busy = iv.merge(s["ts_ns"].to_numpy(np.int64), (s["ts_ns"] + s["device_ns"]).to_numpy(np.int64))
    busy_in = iv.overlap_with_windows(busy, ws, we)
    k = np.searchsorted(ws, s["ts_ns"].to_numpy(np.int64), side="right") - 1
    ok = (k >= 0) & (s["ts_ns"].to_numpy() < we[np.clip(k, 0, None)])
    rows = []
    for i in range(len(win)):
        g = s[ok & (k == i)]
        n = len(g)
        length = int(we[i] - ws[i])
        sr = float(g["short"].mean()) if n else np.nan
        br = busy_in[i] / length if length > 0 else np.nan
        rows.append({
            "step": int(win["step"].iloc[i]), "start_ns": int(ws[i]), "end_ns": int(we[i]), "ops": n,
            "short_ops": int(g["short"].sum()), "short_ratio": sr,
            "median_device_ns": float(g["device_ns"].median()) if n else np.nan,
            "median_runtime_ns": float(g["runtime_ns"].median()) if n else np.nan,
            "busy_ns": int(busy_in[i]), "busy_ratio": br,
            "launch_bound": bool(n > 0 and sr >= short_ratio and br < busy_ratio),
        })
    return pd.DataFrame(rows, columns=cols)
