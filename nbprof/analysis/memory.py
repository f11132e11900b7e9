"""Memory analyses over the ``[memory]`` events of a profile (``profile_memory=True``).

Format facts (Kineto ``[memory]`` instant events, ``../shared/notes/formats.md``): each
allocation or free carries ``Addr``, ``Bytes`` (negative on free), ``Total Allocated`` and
``Total Reserved`` (bytes on that device after the event), ``Device Type`` (c10
``DeviceType``: 0 CPU, 1 CUDA, ...) and ``Device Id`` (-1 for CPU). Device capacity comes
from ``deviceProperties[].totalGlobalMem``.

Operator attribution follows torch's profiler: an allocation belongs to the innermost host
operator (``cpu_op``, else ``user_annotation``) open at its timestamp on the allocating thread.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import schema
from ..trace.model import Trace
from .operators import host_call_tree

__all__ = ["memory_curve", "memory_peak", "largest_allocations", "growth_by_step", "suspected_leaks"]

_DEVICE_KEYS = ["device_type", "device"]


def memory_curve(trace: Trace) -> pd.DataFrame:
    """Allocated and reserved bytes over time, per device.

    Returns
    -------
    pandas.DataFrame
        One row per ``[memory]`` event: ``ts_ns`` (ns from the trace origin),
        ``device_type`` (0 CPU, 1 CUDA, ...), ``device`` (-1 for CPU), ``total_allocated``,
        ``total_reserved`` (bytes after the event; reserved is -1 where the source does not
        say), ``bytes`` (the event's own size, negative for a free), ``reconstructed``
        (True where the source gives no ``Total Allocated``, as 2021 Kineto traces: the
        curve is then the running sum of ``Bytes`` from 0 at the first event, i.e. memory
        relative to the start of the profile, as torch-tb-profiler's memory view draws it).
        Sorted by (device_type, device, ts_ns). Empty when the profile has no memory events.
    """
    mem = trace.memory
    cols = ["ts_ns", "device_type", "device", "total_allocated", "total_reserved", "bytes"]
    if mem is None or mem.empty:
        out = schema.empty_frame(schema.MEMORY_COLUMNS)[cols]
        out["reconstructed"] = np.zeros(0, dtype=bool)
        return out
    out = mem[cols].sort_values(["device_type", "device", "ts_ns"], kind="stable").reset_index(drop=True)
    missing = out["total_allocated"].to_numpy() < 0
    out["reconstructed"] = missing
    if missing.any():
        running = out.groupby(_DEVICE_KEYS, sort=False)["bytes"].cumsum().to_numpy()
        out["total_allocated"] = np.where(missing, running, out["total_allocated"].to_numpy())
    return out


def _device_total_bytes(trace: Trace, device_type: int, device: int) -> float:
    if device_type == 0 or device < 0:
        return np.nan
    for d in trace.meta.device_properties:
        if d.get("id") == device and isinstance(d.get("totalGlobalMem"), (int, float)):
            return float(d["totalGlobalMem"])
    return np.nan


class _OpLocator:
    """Innermost host op (cpu_op, else user_annotation) open at a time on a thread."""

    def __init__(self, trace: Trace) -> None:
        tree = host_call_tree(trace)
        self.tree = tree
        self.cat = tree["cat"].astype(object).to_numpy()
        self.name = trace.events["name"].astype(object).to_numpy()[tree["event"].to_numpy()]
        self.ts = tree["ts_ns"].to_numpy()
        self.end = self.ts + tree["dur_ns"].to_numpy()
        self.parent = tree["parent"].to_numpy()
        self.threads: dict[tuple[int, int], np.ndarray] = {
            k: np.asarray(v) for k, v in tree.groupby(["pid", "tid"], sort=False).indices.items()
        }

    def find(self, pid: int, tid: int, ts: int) -> tuple[str | None, str | None]:
        """(innermost cpu_op name, innermost user_annotation name) containing ``ts``."""
        rows = self.threads.get((int(pid), int(tid)))
        if rows is None or not len(rows):
            return None, None
        k = np.searchsorted(self.ts[rows], ts, side="right") - 1
        if k < 0:
            return None, None
        i = int(rows[k])
        op = ann = None
        while i >= 0:
            if self.ts[i] <= ts <= self.end[i]:
                c = self.cat[i]
                if op is None and c == schema.CPU_OP:
                    op = self.name[i]
                elif ann is None and c == schema.USER_ANNOTATION:
                    ann = self.name[i]
                if op is not None and ann is not None:
                    break
            i = int(self.parent[i])
        return op, ann


def memory_peak(trace: Trace) -> pd.DataFrame:
    """Peak allocated memory per device, with the operator active at the peak.

    Returns
    -------
    pandas.DataFrame
        One row per (device_type, device): ``peak_allocated_bytes`` (max ``Total
        Allocated``), ``ts_ns`` and ``step`` of the first event reaching it,
        ``op`` (innermost ``cpu_op`` open at that event on its thread, None if none),
        ``annotation`` (innermost ``user_annotation``, e.g. ``ProfilerStep#3``),
        ``peak_reserved_bytes`` (max ``Total Reserved``, -1 if not recorded),
        ``reconstructed`` (True when the source has no totals: the peak is then relative
        to the start of the profile, see ``memory_curve``),
        ``device_total_bytes`` (``deviceProperties`` ``totalGlobalMem``; NaN for CPU or
        when absent), ``peak_ratio`` and ``reserved_ratio`` (peak over device total, NaN
        when the total is unknown).
    """
    cols = [
        "device_type", "device", "peak_allocated_bytes", "ts_ns", "step", "op", "annotation",
        "peak_reserved_bytes", "reconstructed", "device_total_bytes", "peak_ratio", "reserved_ratio",
    ]
    m = memory_curve(trace)
    if m.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    mem = trace.memory.sort_values(["device_type", "device", "ts_ns"], kind="stable").reset_index(drop=True)
    m = m.assign(pid=mem["pid"].to_numpy(), tid=mem["tid"].to_numpy(), step=mem["step"].to_numpy())
    loc = _OpLocator(trace)
    rows = []
    for (dt, dev), g in m.groupby(_DEVICE_KEYS, sort=True):
        i = int(np.argmax(g["total_allocated"].to_numpy()))
        r = g.iloc[i]
        op, ann = loc.find(r["pid"], r["tid"], int(r["ts_ns"]))
        total = _device_total_bytes(trace, int(dt), int(dev))
        peak = int(r["total_allocated"])
        res = int(g["total_reserved"].max())
        rows.append(
            {
                "device_type": int(dt), "device": int(dev), "peak_allocated_bytes": peak,
                "ts_ns": int(r["ts_ns"]), "step": int(r["step"]), "op": op, "annotation": ann,
                "peak_reserved_bytes": res, "reconstructed": bool(r["reconstructed"]),
                "device_total_bytes": total,
                "peak_ratio": peak / total if total > 0 else np.nan,
                "reserved_ratio": res / total if total > 0 and res >= 0 else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=cols)


def largest_allocations(trace: Trace, n: int = 10) -> pd.DataFrame:
    """The ``n`` largest allocations, each paired with its free (same device and address).

    An allocation (``Bytes`` > 0) is paired with the next event at the same
    (device_type, device, addr) when that event is a free (``Bytes`` < 0).

    Returns
    -------
    pandas.DataFrame
        ``device_type``, ``device``, ``addr``, ``bytes``, ``alloc_ts_ns``, ``free_ts_ns``
        (-1 when not freed inside the trace), ``lifetime_ns`` (free - alloc; for an
        allocation never freed, trace end - alloc; -1 when the source has no ``Addr``, as
        2021 Kineto traces, so allocations cannot be paired), ``freed`` (bool), ``step``, ``op``
        and ``annotation`` (as in ``memory_peak``, at the allocation). Sorted by
        ``bytes`` descending, then time.
    """
    cols = [
        "device_type", "device", "addr", "bytes", "alloc_ts_ns", "free_ts_ns", "lifetime_ns", "freed",
        "step", "op", "annotation",
    ]
    mem = trace.memory
    if mem is None or mem.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    m = mem.reset_index(drop=True)
    order = np.lexsort((np.arange(len(m)), m["ts_ns"].to_numpy(), m["addr"].to_numpy(),
                        m["device"].to_numpy(), m["device_type"].to_numpy()))
    s = m.iloc[order].reset_index(drop=True)
    same = np.zeros(len(s), dtype=bool)
    if len(s) > 1:
        same[:-1] = (
            (s["device_type"].to_numpy()[1:] == s["device_type"].to_numpy()[:-1])
            & (s["device"].to_numpy()[1:] == s["device"].to_numpy()[:-1])
            & (s["addr"].to_numpy()[1:] == s["addr"].to_numpy()[:-1])
        )
    b = s["bytes"].to_numpy()
    nxt_b = np.append(b[1:], 0)
    nxt_ts = np.append(s["ts_ns"].to_numpy()[1:], -1)
    alloc = b > 0
    known = s["addr"].to_numpy() != -1
    freed = alloc & same & known & (nxt_b < 0)
    a = s[alloc].copy()
    a["freed"] = freed[alloc]
    a["free_ts_ns"] = np.where(freed[alloc], nxt_ts[alloc], -1)
    end = int((trace.events["ts_ns"] + trace.events["dur_ns"]).max()) if len(trace.events) else int(s["ts_ns"].max())
    a["alloc_ts_ns"] = a["ts_ns"]
    a["lifetime_ns"] = np.where(
        a["freed"], a["free_ts_ns"] - a["alloc_ts_ns"], np.where(known[alloc], end - a["alloc_ts_ns"], -1)
    )
    a = a.sort_values(["bytes", "alloc_ts_ns"], ascending=[False, True], kind="stable").head(n)
    loc = _OpLocator(trace)
    found = [loc.find(p, t, ts) for p, t, ts in zip(a["pid"], a["tid"], a["ts_ns"])]
    a["op"] = [f[0] for f in found]
    a["annotation"] = [f[1] for f in found]
    a["bytes"] = a["bytes"].astype(np.int64)
    return a[cols].reset_index(drop=True)


def _step_ranges(trace: Trace) -> pd.DataFrame:
    """``step``, ``start_ns``, ``end_ns`` of :func:`nbprof.analysis.steps.step_windows` (the one step definition)."""
    from .steps import step_windows

    return step_windows(trace)[["step", "start_ns", "end_ns"]].astype(np.int64)


def growth_by_step(trace: Trace) -> pd.DataFrame:
    """Allocated bytes at the start and end of every step (:func:`nbprof.analysis.steps.step_windows`), per device.

    Returns
    -------
    pandas.DataFrame
        One row per (device_type, device, step): ``step``, ``start_allocated_bytes`` (the
        last ``Total Allocated`` before the step starts, else the first value in it),
        ``end_allocated_bytes`` (last value at or before the step's end),
        ``growth_bytes`` (end - start), ``peak_allocated_bytes`` (max inside the step),
        ``cumulative_growth_bytes`` (end minus the first step's start). Empty when the
        trace has no steps or no memory events. Use ``suspected_leaks`` for a verdict.
    """
    cols = [
        "device_type", "device", "step", "start_allocated_bytes", "end_allocated_bytes", "growth_bytes",
        "peak_allocated_bytes", "cumulative_growth_bytes",
    ]
    curve = memory_curve(trace)
    steps = _step_ranges(trace)
    if curve.empty or steps.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    rows = []
    for (dt, dev), g in curve.groupby(_DEVICE_KEYS, sort=True):
        ts = g["ts_ns"].to_numpy()
        alloc = g["total_allocated"].to_numpy()
        base = None
        for st, s0, s1 in steps.itertuples(index=False):
            i0 = np.searchsorted(ts, s0, side="left")
            i1 = np.searchsorted(ts, s1, side="right")
            if i1 == 0:
                continue  # no memory event yet on this device
            start = alloc[i0 - 1] if i0 > 0 else alloc[i0]
            end = alloc[i1 - 1]
            peak = alloc[i0:i1].max() if i1 > i0 else max(start, end)
            if base is None:
                base = start
            rows.append((int(dt), int(dev), int(st), int(start), int(end), int(end - start), int(peak), int(end - base)))
    return pd.DataFrame(rows, columns=cols)


def suspected_leaks(trace: Trace, *, min_steps: int = 3) -> pd.DataFrame:
    """Devices whose allocated memory grows across every one of at least ``min_steps`` steps.

    A steady per-step increase of the memory still allocated at the end of each step is the
    signature of a leak (tensors kept alive across iterations, e.g. an accumulated loss
    with its graph).

    Returns
    -------
    pandas.DataFrame
        ``device_type``, ``device``, ``steps``, ``growth_bytes`` (end of the last step minus
        start of the first), ``growth_per_step_bytes``; one row per suspected device (empty
        when none).
    """
    g = growth_by_step(trace)
    rows = []
    for (dt, dev), d in g.groupby(_DEVICE_KEYS, sort=True):
        if len(d) < min_steps:
            continue
        ends = d["end_allocated_bytes"].to_numpy()
        starts = d["start_allocated_bytes"].to_numpy()
        if (d["growth_bytes"].to_numpy() > 0).all() and (np.diff(ends) > 0).all():
            total = int(ends[-1] - starts[0])
            rows.append((int(dt), int(dev), len(d), total, total / len(d)))
    return pd.DataFrame(rows, columns=["device_type", "device", "steps", "growth_bytes", "growth_per_step_bytes"])
