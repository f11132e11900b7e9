"""The track events of :func:`nbprof.export.perfetto.write_perfetto`: flows (which slice each end of a
``Trace.flows`` row is on), the one time order of slices, instants, counter samples and memory events, and
the ``TrackEvent`` packets written in that order (see the module docstring of :mod:`nbprof.export.perfetto`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..trace.ids import originals
from ..trace.model import Trace
from . import ExportReport
from .chrome import _obj

#: event kinds of :func:`event_order`
BEGIN_K, END_K, INSTANT_K, COUNTER_K, MEMORY_K = 0, 1, 2, 3, 4


def _flow_rows(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per flow row: the events row its start / end is at (-1 when none)."""
    ev, fl = trace.events, trace.flows
    at: dict[tuple[int, int, int], list[int]] = {}
    for i, key in enumerate(zip(ev["pid"].to_numpy().tolist(), ev["tid"].to_numpy().tolist(),
                                ev["ts_ns"].to_numpy().tolist())):
        at.setdefault(key, []).append(i)
    corr = ev["correlation"].to_numpy().tolist()
    ph = ev["ph"].astype(object).to_numpy().tolist()

    def find(p: int, t: int, s: int, fid: int, cat: str) -> int:
        rows = [r for r in at.get((p, t, s), []) if ph[r] != "i"]
        if not rows:
            return -1
        if cat == "ac2g":
            for r in rows:
                if corr[r] == fid:
                    return r
        return rows[0]

    src = np.full(len(fl), -1, dtype=np.int64)
    dst = np.full(len(fl), -1, dtype=np.int64)
    cols = [fl[c].to_numpy().tolist() for c in ("id", "src_pid", "src_tid", "src_ts_ns", "dst_pid", "dst_tid",
                                                   "dst_ts_ns")]
    fcat = fl["cat"].astype(str).tolist()
    for k, (fid, sp, st, sts, dp, dt, dts) in enumerate(zip(*cols)):
        if sp != -1 or sts != -1:
            src[k] = find(sp, st, sts, fid, fcat[k])
        if dp != -1 or dts != -1:
            dst[k] = find(dp, dt, dts, fid, fcat[k])
    return src, dst


def flow_ids(trace: Trace, rep: ExportReport) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Perfetto flow ids (1, 2, ... in ``Trace.flows`` row order) by events row: those the slice starts
    (``flow_ids``) and those it ends (``terminating_flow_ids``). Counts ``rep.flows`` and, for flows with no
    end on a slice or both on one, ``rep.flows_skipped``."""
    src, dst = _flow_rows(trace)
    out_flows: dict[int, list[int]] = {}
    end_flows: dict[int, list[int]] = {}
    for k in range(len(src)):
        if src[k] >= 0 and src[k] == dst[k]:  # both ends on one slice: no arrow to draw
            rep.flows_skipped += 1
            continue
        if src[k] >= 0:
            out_flows.setdefault(int(src[k]), []).append(k + 1)
        if dst[k] >= 0:
            end_flows.setdefault(int(dst[k]), []).append(k + 1)
        if src[k] >= 0 or dst[k] >= 0:
            rep.flows += 1
        else:
            rep.flows_skipped += 1
    return out_flows, end_flows


def event_order(ev: pd.DataFrame, co: pd.DataFrame, me: pd.DataFrame, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """The write order of every track event: per position its kind (``BEGIN_K`` ... ``MEMORY_K``) and its row
    (in ``ev``, ``co`` or ``me``). Sorted by time (ns, + ``shift``), then ends before begins at one time (an
    empty slice's end right after its begin), outer slices first, then row."""
    n = len(ev)
    ts = ev["ts_ns"].to_numpy(np.int64) + shift
    dur = np.maximum(ev["dur_ns"].to_numpy(np.int64), 0)
    inst = (ev["ph"].astype(object).to_numpy() == "i") if n else np.zeros(0, bool)
    rows = np.arange(n, dtype=np.int64)
    b_key = np.stack([ts, np.ones(n, np.int64), -dur, rows, np.zeros(n, np.int64)])
    e_key = np.stack([ts + dur, np.where(dur == 0, 1, 0), np.where(dur == 0, 0, -ts), np.where(dur == 0, rows, -rows),
                      np.ones(n, np.int64)])
    sl = ~inst
    keys = [b_key[:, sl], e_key[:, sl], b_key[:, inst]]
    kinds = [np.zeros(int(sl.sum()), np.int64), np.ones(int(sl.sum()), np.int64), np.full(int(inst.sum()), INSTANT_K)]
    idx = [rows[sl], rows[sl], rows[inst]]
    for frame, kind in ((co, COUNTER_K), (me, MEMORY_K)):
        if len(frame):
            m = len(frame)
            keys.append(np.stack([frame["ts_ns"].to_numpy(np.int64) + shift, np.full(m, 2), np.zeros(m, np.int64),
                                  np.arange(m), np.zeros(m, np.int64)]))
            kinds.append(np.full(m, kind))
            idx.append(np.arange(m))
    K = np.concatenate(keys, axis=1)
    order = np.lexsort((K[4], K[3], K[2], K[1], K[0]))
    return np.concatenate(kinds)[order], np.concatenate(idx)[order]


def _uint_ids(trace: Trace, column: str) -> dict[int, int]:
    """Ids of ``column`` the source wrote above 2**63-1 (:mod:`nbprof.trace.ids`): stored value -> written value."""
    return {k: v for k, v in originals(trace, column).items() if isinstance(v, int) and 2**63 <= v < 2**64}


def _annotate_id(e: Any, label: str, v: int, big: dict[int, int]) -> None:
    """Add the id annotation ``label`` to track event ``e``: ``uint_value`` for an id written above 2**63-1."""
    a = e.debug_annotations.add()
    a.name = label
    if v in big:
        a.uint_value = big[v]
    else:
        a.int_value = v


def _memory_packets(packet: Any, te: Any, r: int, ts: int, thread: int, cols: dict[str, list[int]],
                    alloc: int, reserved: int) -> None:
    """Row ``r`` of ``Trace.memory`` at ``ts`` (ns): a ``[memory]`` instant on its ``thread`` track (the
    :data:`~.perfetto_tracks.MEMORY_COLUMNS` but pid/tid as annotations) and a sample of the ``alloc`` /
    ``reserved`` counter tracks (bytes) where the total is known."""
    pk = packet()
    pk.timestamp = ts
    e = pk.track_event
    e.type, e.track_uuid, e.name = te.TYPE_INSTANT, thread, "[memory]"
    e.categories.append("cpu_instant_event")
    for key in ("bytes", "addr", "device", "device_type", "total_allocated", "total_reserved"):
        a = e.debug_annotations.add()
        a.name, a.int_value = key, cols[key][r]
    for what, track in (("total_allocated", alloc), ("total_reserved", reserved)):
        if cols[what][r] != -1:
            pc = packet()
            pc.timestamp = ts
            c = pc.track_event
            c.type, c.track_uuid, c.counter_value = te.TYPE_COUNTER, track, cols[what][r]


class Samples(NamedTuple):
    """Counter and memory rows to write: counter times (ns, shifted), values and tracks; memory times (ns,
    shifted), :data:`~.perfetto_tracks.MEMORY_COLUMNS`, thread tracks and allocated / reserved counter tracks."""

    cts: list[int]
    cval: list[float]
    ctrack: list[int]
    mts: list[int]
    mcols: dict[str, list[int]]
    mthread: list[int]
    malloc: list[int]
    mres: list[int]


def write_events(packet: Any, te: Any, trace: Trace, kinds: np.ndarray, idx: np.ndarray, shift: int,
                 slice_track: np.ndarray, samples: Samples,
                 flows: tuple[dict[int, list[int]], dict[int, list[int]]]) -> None:
    """Write one packet per track event in the order ``kinds``/``idx`` of :func:`event_order`: slices (begin /
    end) and instants of ``trace.events`` (name, category, ``correlation`` / ``External id`` where set, flow
    ids), counter samples (NaN: none), memory events (:func:`_memory_packets`). Times ns + ``shift``."""
    ev = trace.events
    ts = ev["ts_ns"].to_numpy(np.int64) + shift
    dur = np.maximum(ev["dur_ns"].to_numpy(np.int64), 0)
    names, cats = _obj(ev["name"]), _obj(ev["cat"])
    BEGIN, END, INSTANT, COUNTER = te.TYPE_SLICE_BEGIN, te.TYPE_SLICE_END, te.TYPE_INSTANT, te.TYPE_COUNTER
    # Python lists: indexing numpy arrays element by element is ~10x slower than lists in this loop
    track_l, ts_l, end_l = slice_track.tolist(), ts.tolist(), (ts + dur).tolist()
    corr_l, ext_l = ev["correlation"].to_numpy(np.int64).tolist(), ev["external_id"].to_numpy(np.int64).tolist()
    corr_u, ext_u = _uint_ids(trace, "correlation"), _uint_ids(trace, "external_id")
    out_flows, end_flows = flows
    sm = samples
    for kd, r in zip(kinds.tolist(), idx.tolist()):
        if kd <= INSTANT_K:
            pk = packet()
            e = pk.track_event
            e.track_uuid = track_l[r]
            if kd == END_K:
                pk.timestamp = end_l[r]
                e.type = END
                continue
            pk.timestamp = ts_l[r]
            e.type = BEGIN if kd == BEGIN_K else INSTANT
            e.name = names[r] or ""
            if cats[r]:
                e.categories.append(cats[r])
            if corr_l[r] != -1:
                _annotate_id(e, "correlation", corr_l[r], corr_u)
            if ext_l[r] != -1:
                _annotate_id(e, "External id", ext_l[r], ext_u)
            if r in out_flows:
                e.flow_ids.extend(out_flows[r])
            if r in end_flows:
                e.terminating_flow_ids.extend(end_flows[r])
        elif kd == COUNTER_K:
            v = sm.cval[r]
            if v != v:  # NaN: no sample
                continue
            pk = packet()
            pk.timestamp = sm.cts[r]
            e = pk.track_event
            e.type, e.track_uuid, e.double_counter_value = COUNTER, sm.ctrack[r], v
        else:
            _memory_packets(packet, te, r, sm.mts[r], sm.mthread[r], sm.mcols, sm.malloc[r], sm.mres[r])
