"""Analyses of CUDA allocator snapshots and memory timelines: the peak, leaks, fragmentation, OOMs.

Pure functions over ``nbprof.sources.memory_snapshot.MemorySnapshot`` / ``MemoryTimeline``; all
vectorised so multi-GB snapshots (500k+ trace entries) stay interactive. Byte accounting follows the
caching allocator (``c10/cuda/CUDACachingAllocator.cpp`` and torch's ``_memory_viz.py``):

- *allocated* = ``alloc`` minus ``free_completed`` (memory handed to tensors, incl. blocks whose free
  waits on a stream event);
- *active* = ``alloc`` minus ``free_requested``;
- *reserved* = ``segment_alloc``/``segment_map`` minus ``segment_free``/``segment_unmap`` (cudaMalloc'd).

The allocator history is a ring buffer (``max_entries``) that may start mid-run, so each curve is
anchored at the end: the snapshot's final segment/block state minus the recorded deltas gives the
bytes that were live before the first recorded entry (reported as ``baseline``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import EmptyProfileError
from ..trace.memory_snapshot import MemorySnapshot, MemoryTimeline

__all__ = [
    "snapshot_timeline",
    "allocations",
    "live_at",
    "snapshot_peak",
    "leak_suspects",
    "growth",
    "fragmentation",
    "oom_events",
    "timeline_by_category",
    "timeline_peak",
]

_ALLOC_DELTA = {"alloc": 1, "free_completed": -1}
_ACTIVE_DELTA = {"alloc": 1, "free_requested": -1}
_RESERVED_DELTA = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
_LIVE_STATES = ("active_allocated", "active_awaiting_free")


def _dev_events(snap: MemorySnapshot, device: int) -> pd.DataFrame:
    ev = snap.events
    return ev[ev["device"] == device].sort_values("idx", kind="stable")


def _deltas(ev: pd.DataFrame, table: dict[str, int]) -> np.ndarray:
    sign = ev["action"].map(table).astype("float64").fillna(0).to_numpy()
    return np.asarray(sign * ev["size_bytes"].to_numpy(), dtype=np.int64)


def _final_state(snap: MemorySnapshot, device: int) -> tuple[int, int, int]:
    b = snap.blocks[snap.blocks["device"] == device]
    allocated = int(b.loc[b["state"].isin(_LIVE_STATES), "size_bytes"].sum())
    active = int(b.loc[b["state"] == "active_allocated", "size_bytes"].sum())
    reserved = int(snap.segments.loc[snap.segments["device"] == device, "total_size_bytes"].sum())
    return allocated, active, reserved


def snapshot_timeline(
    snap: MemorySnapshot,
    device: int = 0,
    *,
    time_range: tuple[int, int] | None = None,
    max_points: int | None = None,
) -> pd.DataFrame:
    """Allocated / active / reserved bytes after each allocator event on ``device``.

    Parameters
    ----------
    snap : MemorySnapshot
    device : int, default 0
    time_range : (start_ns, end_ns), optional
        Keep rows with ``start_ns <= ts_ns < end_ns`` (ns relative to the first entry).
    max_points : int, optional
        Downsample to about this many rows, keeping each bucket's maximum allocated row (so the peak
        always survives) — for plotting 500k-entry snapshots.

    Returns
    -------
    pandas.DataFrame
        ``idx`` (int64), ``ts_ns`` (int64), ``action``, ``allocated_bytes``, ``active_bytes``,
        ``reserved_bytes`` (int64). ``attrs["baseline"]`` holds the bytes live before the first entry.
    """
    ev = _dev_events(snap, device)
    d_alloc = _deltas(ev, _ALLOC_DELTA)
    d_active = _deltas(ev, _ACTIVE_DELTA)
    d_res = _deltas(ev, _RESERVED_DELTA)
    fa, fact, fr = _final_state(snap, device)
    base_a = fa - int(d_alloc.sum())
    base_act = fact - int(d_active.sum())
    base_r = fr - int(d_res.sum())
    out = pd.DataFrame(
        {
            "idx": ev["idx"].to_numpy(),
            "ts_ns": ev["ts_ns"].to_numpy(),
            "action": ev["action"].to_numpy(),
            "allocated_bytes": base_a + np.cumsum(d_alloc),
            "active_bytes": base_act + np.cumsum(d_active),
            "reserved_bytes": base_r + np.cumsum(d_res),
        }
    )
    if time_range is not None:
        lo, hi = time_range
        out = out[(out["ts_ns"] >= lo) & (out["ts_ns"] < hi)]
    if max_points is not None and len(out) > max_points:
        bucket = np.arange(len(out)) * max_points // len(out)
        keep = out.groupby(bucket)["allocated_bytes"].idxmax().to_numpy()
        out = out.loc[np.sort(keep)]
    out = out.reset_index(drop=True)
    out.attrs["baseline"] = {"allocated_bytes": base_a, "active_bytes": base_act, "reserved_bytes": base_r}
    return out


def allocations(snap: MemorySnapshot, device: int = 0) -> pd.DataFrame:
    """Pair every recorded ``alloc`` with its ``free_completed`` (same address, next in order).

    Returns
    -------
    pandas.DataFrame
        ``addr``, ``size_bytes``, ``stream``, ``alloc_idx``, ``alloc_ts_ns``, ``free_idx`` (-1 if never
        freed in the history), ``free_ts_ns`` (-1), ``lifetime_ns`` (-1 if never freed), ``frames_id``,
        ``top_user_frame``, ``op``, ``stack``.
    """
    ev = _dev_events(snap, device)
    al = ev[ev["action"] == "alloc"][["idx", "ts_ns", "addr", "size_bytes", "stream", "frames_id"]]
    fr = ev[ev["action"] == "free_completed"][["idx", "ts_ns", "addr"]]
    al = al.rename(columns={"idx": "alloc_idx", "ts_ns": "alloc_ts_ns"}).sort_values("alloc_idx")
    fr = fr.rename(columns={"idx": "free_idx", "ts_ns": "free_ts_ns"}).sort_values("free_idx")
    if len(al) and len(fr):
        m = pd.merge_asof(
            al, fr, left_on="alloc_idx", right_on="free_idx", by="addr", direction="forward", allow_exact_matches=False
        )
    else:
        m = al.assign(free_idx=np.nan, free_ts_ns=np.nan)
    m["free_idx"] = m["free_idx"].fillna(-1).astype(np.int64)
    m["free_ts_ns"] = m["free_ts_ns"].fillna(-1).astype(np.int64)
    m["lifetime_ns"] = np.where(m["free_idx"] >= 0, m["free_ts_ns"] - m["alloc_ts_ns"], -1).astype(np.int64)
    fr_tab = snap.frames.set_index("frames_id")
    for col in ("top_user_frame", "op", "stack"):
        m[col] = m["frames_id"].map(fr_tab[col]).fillna("<no frames>" if col != "op" else "")
    cols = ["addr", "size_bytes", "stream", "alloc_idx", "alloc_ts_ns", "free_idx", "free_ts_ns", "lifetime_ns",
            "frames_id", "top_user_frame", "op", "stack"]
    return m[cols].reset_index(drop=True)


def live_at(snap: MemorySnapshot, idx: int, device: int = 0, *, allocs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Allocations (from ``allocations``) live just after trace entry ``idx``.

    Parameters
    ----------
    snap : MemorySnapshot
    idx : int
        Index of a trace entry (``snap.events["idx"]``).
    device : int, default 0
    allocs : pandas.DataFrame, optional
        A precomputed ``allocations(snap, device)`` (saves pairing again when called in a loop).

    Returns
    -------
    pandas.DataFrame
        The rows of ``allocations`` allocated at or before ``idx`` and not freed by then, with its
        columns: ``addr``, ``size_bytes``, ``stream``, ``alloc_idx``, ``alloc_ts_ns``, ``free_idx``,
        ``free_ts_ns``, ``lifetime_ns``, ``frames_id``, ``top_user_frame``, ``op``, ``stack``.
    """
    a = allocations(snap, device) if allocs is None else allocs
    return a[(a["alloc_idx"] <= idx) & ((a["free_idx"] < 0) | (a["free_idx"] > idx))].reset_index(drop=True)


@dataclass
class SnapshotPeak:
    """The allocated-bytes peak of one device.

    Attributes
    ----------
    device : int
    idx : int
        Trace entry index at the peak.
    ts_ns : int
    allocated_bytes, reserved_bytes : int
    baseline_bytes : int
        Bytes live before the recorded history began (no frames known for them).
    breakdown : pandas.DataFrame
        What is live at the peak grouped by ``by``: ``<by>, count, bytes, share_ratio`` (of the
        allocated bytes at the peak), largest first; a ``<before history>`` row holds ``baseline_bytes``.
    """

    device: int
    idx: int
    ts_ns: int
    allocated_bytes: int
    reserved_bytes: int
    baseline_bytes: int
    breakdown: pd.DataFrame


def snapshot_peak(snap: MemorySnapshot, device: int = 0, *, by: str = "top_user_frame", top_n: int | None = 20) -> SnapshotPeak:
    """Find the allocated-bytes peak and break down what is live there by ``by``.

    Parameters
    ----------
    by : {"top_user_frame", "op", "stack", "size_bytes"}
    top_n : int, optional
        Keep the ``top_n`` largest groups and fold the rest into ``<other>``.

    Raises
    ------
    nbprof.errors.EmptyProfileError
        When the device has no recorded history and no blocks (also a ``ValueError``).
    """
    tl = snapshot_timeline(snap, device)
    if tl.empty:
        fa, _a, fr = _final_state(snap, device)
        if fa == 0 and fr == 0:
            msg = f"device {device} has no allocator history and no live blocks in {snap.source_path}"
            raise EmptyProfileError(msg)
        bd = pd.DataFrame({by: ["<before history>"], "count": [0], "bytes": [fa], "share_ratio": [1.0 if fa else 0.0]})
        return SnapshotPeak(device, -1, -1, fa, fr, fa, bd)
    i = int(tl["allocated_bytes"].to_numpy().argmax())
    row = tl.iloc[i]
    live = live_at(snap, int(row["idx"]), device)
    g = live.groupby(by, observed=True).agg(count=("size_bytes", "size"), bytes=("size_bytes", "sum"))
    g = g.sort_values("bytes", ascending=False).reset_index()
    if top_n is not None and len(g) > top_n:
        rest = g.iloc[top_n:]
        other = pd.DataFrame({by: ["<other>"], "count": [int(rest["count"].sum())], "bytes": [int(rest["bytes"].sum())]})
        g = pd.concat([g.iloc[:top_n], other])
    # bytes from before the history still live at the peak: the baseline minus the pre-history
    # allocations whose free_completed was recorded before the peak
    allocs = allocations(snap, device)
    ev = _dev_events(snap, device)
    fr = ev[(ev["action"] == "free_completed") & ~ev["idx"].isin(allocs["free_idx"])]
    base = int(tl.attrs["baseline"]["allocated_bytes"]) - int(fr.loc[fr["idx"] <= int(row["idx"]), "size_bytes"].sum())
    if base:
        g = pd.concat([g, pd.DataFrame({by: ["<before history>"], "count": [0], "bytes": [base]})])
    peak = int(row["allocated_bytes"])
    g["share_ratio"] = g["bytes"] / peak if peak else 0.0
    return SnapshotPeak(device, int(row["idx"]), int(row["ts_ns"]), peak, int(row["reserved_bytes"]), base, g.reset_index(drop=True))


def leak_suspects(
    snap: MemorySnapshot,
    device: int = 0,
    *,
    min_count: int = 2,
    min_windows: int = 2,
    windows: int = 10,
    by: str = "top_user_frame",
) -> pd.DataFrame:
    """Allocation sites that keep allocating memory that is never freed within the recorded history.

    A leak shows as one site allocating the same size again and again *over time* without a free (e.g. a
    tensor appended to a Python list every step). Memory allocated once and kept (parameters, optimizer
    state, library workspaces) is never freed either, but in one burst or in sizes that do not repeat. So a
    site qualifies when its most repeated never-freed size occurs at least ``min_count`` times
    (``repeats``) and its never-freed allocations fall in at least ``min_windows`` of ``windows`` equal
    slices of the history; sites are ranked by ``repeats``, then bytes. Allocations without frames (e.g.
    from the autograd thread when only Python stacks were recorded) cannot be attributed and are left
    out (``attrs["unattributed_bytes"]`` sums them).

    Returns
    -------
    pandas.DataFrame
        ``<by>, count, bytes, windows, first_ts_ns, last_ts_ns, sizes`` (distinct sizes, text), ``stack``
        (one example), ``repeats``; only the qualifying sites.
    """
    a = allocations(snap, device)
    nf = a[a["free_idx"] < 0]
    cols = [by, "count", "bytes", "repeats", "windows", "first_ts_ns", "last_ts_ns", "sizes", "stack"]
    unattributed = nf["frames_id"] < 0
    out_empty = pd.DataFrame(columns=cols)
    out_empty.attrs["unattributed_bytes"] = int(nf.loc[unattributed, "size_bytes"].sum())
    nf = nf[~unattributed]
    if nf.empty:
        return out_empty
    t = snap.events.loc[snap.events["device"] == device, "ts_ns"]
    t0, t1 = int(t[t >= 0].min()) if (t >= 0).any() else 0, int(t.max()) if len(t) else 0
    span = max(t1 - t0, 1)
    win = np.minimum(((nf["alloc_ts_ns"].to_numpy() - t0) * windows) // span, windows - 1)
    nf = nf.assign(_win=win)
    g = nf.groupby(by, observed=True).agg(
        count=("size_bytes", "size"),
        bytes=("size_bytes", "sum"),
        windows=("_win", "nunique"),
        first_ts_ns=("alloc_ts_ns", "min"),
        last_ts_ns=("alloc_ts_ns", "max"),
        sizes=("size_bytes", lambda s: ", ".join(str(x) for x in sorted(set(s.tolist()))[:5])),
        stack=("stack", "first"),
    )
    g["repeats"] = nf.groupby([by, "size_bytes"], observed=True).size().groupby(level=0, observed=True).max()
    g = g[(g["repeats"] >= min_count) & (g["windows"] >= min_windows)].sort_values(["repeats", "bytes"], ascending=False)
    out = g.reset_index()[cols]
    out.attrs["unattributed_bytes"] = out_empty.attrs["unattributed_bytes"]
    return out


def growth(snap: MemorySnapshot, device: int = 0, *, windows: int = 10, boundaries_ns: list[int] | None = None) -> pd.DataFrame:
    """Allocated bytes at the end of each time window (equal windows, or given boundaries such as step ends).

    Returns
    -------
    pandas.DataFrame
        ``window``, ``end_ns``, ``allocated_bytes``, ``delta_bytes`` (vs the previous window). Steady growth
        across windows of the same work is the signature of a leak.
    """
    tl = snapshot_timeline(snap, device)
    tl = tl[tl["ts_ns"] >= 0]
    if tl.empty:
        return pd.DataFrame(columns=["window", "end_ns", "allocated_bytes", "delta_bytes"])
    if boundaries_ns is None:
        t_end = int(tl["ts_ns"].max())
        boundaries_ns = [int(t_end * (k + 1) / windows) for k in range(windows)]
    ts = tl["ts_ns"].to_numpy()
    pos = np.searchsorted(ts, np.asarray(boundaries_ns), side="right") - 1
    alloc = np.where(pos >= 0, tl["allocated_bytes"].to_numpy()[np.clip(pos, 0, None)], tl.attrs["baseline"]["allocated_bytes"])
    df = pd.DataFrame({"window": np.arange(len(boundaries_ns)), "end_ns": boundaries_ns, "allocated_bytes": alloc.astype(np.int64)})
    df["delta_bytes"] = df["allocated_bytes"].diff().fillna(0).astype(np.int64)
    return df


def fragmentation(snap: MemorySnapshot) -> pd.DataFrame:
    """Per device: how much of the reserved memory is usable.

    Returns
    -------
    pandas.DataFrame
        ``device, segments, reserved_bytes, allocated_bytes, inactive_bytes, largest_free_block_bytes,
        utilization_ratio`` (allocated / reserved), ``fragmentation_ratio`` (1 - largest free block /
        inactive bytes: 0 when all free memory is one block, near 1 when it is scattered).
    """
    rows = []
    for dev in snap.devices:
        seg = snap.segments[snap.segments["device"] == dev]
        b = snap.blocks[snap.blocks["device"] == dev]
        reserved = int(seg["total_size_bytes"].sum())
        allocated = int(b.loc[b["state"].isin(_LIVE_STATES), "size_bytes"].sum())
        inactive = b.loc[b["state"] == "inactive", "size_bytes"]
        free = int(inactive.sum())
        largest = int(inactive.max()) if len(inactive) else 0
        rows.append(
            (dev, len(seg), reserved, allocated, free, largest, allocated / reserved if reserved else 0.0,
             1.0 - largest / free if free else 0.0)
        )
    return pd.DataFrame(
        rows,
        columns=["device", "segments", "reserved_bytes", "allocated_bytes", "inactive_bytes", "largest_free_block_bytes",
                 "utilization_ratio", "fragmentation_ratio"],
    )


def oom_events(snap: MemorySnapshot) -> pd.DataFrame:
    """Out-of-memory entries: ``device, idx, ts_ns, size_bytes`` (requested), ``device_free_bytes``
    (what the driver reported free), ``top_user_frame``, ``stack``."""
    ev = snap.events[snap.events["action"] == "oom"]
    fr = snap.frames.set_index("frames_id")
    out = ev[["device", "idx", "ts_ns", "size_bytes", "device_free_bytes", "frames_id"]].copy()
    out["top_user_frame"] = out["frames_id"].map(fr["top_user_frame"]).fillna("<no frames>")
    out["stack"] = out["frames_id"].map(fr["stack"]).fillna("")
    return out.drop(columns="frames_id").reset_index(drop=True)


def timeline_by_category(tl: MemoryTimeline) -> pd.DataFrame:
    """Bytes per category over time from ``export_memory_timeline`` rows.

    Returns
    -------
    pandas.DataFrame
        Index ``ts_ns`` (pre-existing rows at -1 come first), one int64 column of bytes per category
        (``TIMELINE_CATEGORIES``: ``parameter``, ``optimizer_state``, ``input``, ``temporary``,
        ``activation``, ``gradient``, ``autograd_detail``, ``unknown``) plus ``total_bytes``.
    """
    ev = tl.events.sort_values("ts_ns", kind="stable")
    wide = ev.pivot_table(index="ts_ns", columns="category", values="bytes", aggfunc="sum", observed=False).fillna(0)
    wide = wide.cumsum().astype(np.int64)
    wide.columns = [str(c) for c in wide.columns]
    wide["total_bytes"] = wide.sum(axis=1)
    return wide


def timeline_peak(tl: MemoryTimeline) -> pd.Series:
    """The row of ``timeline_by_category`` at the total peak (name = ts_ns): bytes per category there."""
    w = timeline_by_category(tl)
    return w.loc[w["total_bytes"].idxmax()]
