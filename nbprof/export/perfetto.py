"""``Trace`` -> Perfetto protobuf trace (``TracePacket``/``TrackEvent``), written with the ``perfetto``
package's pure-Python trace builder (``perfetto.trace_builder.proto_builder.TraceProtoBuilder``; extra
``perfetto``; nothing is downloaded: only the package's generated protobuf classes are used).

Format facts: Perfetto's ``protos/perfetto/trace/track_event/track_event.proto``,
``track_descriptor.proto`` and ``counter_descriptor.proto``, and the docs page "Converting arbitrary
timestamped data to Perfetto" (synthetic track events: one ``trusted_packet_sequence_id``, tracks declared
by ``TrackDescriptor`` packets before their events, slices as ``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END``
pairs on a track, which must nest; flows by ``flow_ids``/``terminating_flow_ids``).

What is written
---------------
- timestamps: ``ts_ns`` as is (ns relative to the trace origin; the absolute origin,
  ``Trace.meta.origin_ns``, is not added, so every value is exactly nbprof's); if any time of the trace
  is negative, every timestamp is shifted by the same amount so the earliest is 0 (Perfetto's are unsigned);
- tracks: a process track per host pid (``ProcessDescriptor``, named from ``Trace.threads``), a thread
  track per host thread (``ThreadDescriptor``), a top-level track per device (``"GPU n (<device name>)"``,
  the name from ``meta.device_properties``) with a child track per stream (``"stream s"``); slices that
  overlap on one thread/stream (:mod:`nbprof.export.lanes`) go on extra child tracks named
  ``"<name> (overlap k)"`` -- Perfetto would otherwise drop them (google/perfetto#4280);
- one slice (``BEGIN`` + ``END`` at ``ts_ns + dur_ns``) per duration row of ``Trace.events``, one
  ``TYPE_INSTANT`` per instant row; name, category, and debug annotations ``correlation`` /
  ``External id`` where set (an id the source wrote above 2**63-1 as its value, ``uint_value``;
  ``nbprof.trace.ids``);
- flows: each row of ``Trace.flows`` becomes one Perfetto flow (ids 1, 2, ... in row order) on the
  slices its ends start (matched by pid, tid and start time; ac2g ends by correlation id first); a flow
  the source wrote with one end only (B200's 443 ``f`` at ``cudaEventRecord`` without an ``s``) keeps
  that end, as in the source; one whose ends match no slice, or the same one, is counted in
  ``ExportReport.flows_skipped``;
- counters: one counter track per (pid, counter name, series), named ``"name"`` or ``"name.series"``;
- memory: each row of ``Trace.memory`` is a ``[memory]`` instant on its thread (debug annotations
  ``bytes``, ``addr``, ``device``, ``device_type``, ``total_allocated``, ``total_reserved``) and a sample
  of the counter tracks ``"memory allocated (<dev>)"`` / ``"memory reserved (<dev>)"`` (bytes) where the
  totals are known.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from .._deps import missing
from ..atomic import atomic_open
from ..trace.ids import originals
from ..trace.model import Trace
from . import ExportReport
from .lanes import assign_lanes

__all__ = ["write_perfetto", "SEQUENCE_ID"]


def _fits_i32(v: int) -> bool:
    """Whether ``v`` fits the int32 pid/tid fields of Perfetto's ``ProcessDescriptor``/``ThreadDescriptor``."""
    return -(2**31) <= v < 2**31

#: the ``trusted_packet_sequence_id`` of every packet written
SEQUENCE_ID = 1
_CHUNK = 20000


def _pb() -> Any:
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb  # type: ignore[import-untyped]
        from perfetto.trace_builder.proto_builder import TraceProtoBuilder  # type: ignore[import-untyped]
    except ModuleNotFoundError as exc:
        raise missing("perfetto", "perfetto", "Trace.to_perfetto", exc) from exc
    return pb, TraceProtoBuilder


def _obj(s: pd.Series) -> list[Any]:
    a = s.astype(object).to_numpy()
    return [None if (v is None or (isinstance(v, float) and v != v)) else v for v in a]


class _Writer:
    """Packets in chunks of ``TraceProtoBuilder`` (each chunk a ``Trace`` message; concatenated ``Trace``
    messages are one ``Trace``, as the builder's streaming variant writes them)."""

    def __init__(self, f: Any, builder_cls: Any) -> None:
        self.f, self.cls = f, builder_cls
        self.b = builder_cls()
        self.n = 0
        self.first = True

    def packet(self) -> Any:
        if self.n and self.n % _CHUNK == 0:
            self.flush()  # before adding: a packet handed out is filled in after this call
        p = self.b.add_packet()
        p.trusted_packet_sequence_id = SEQUENCE_ID
        if self.first:
            p.sequence_flags = 1  # SEQ_INCREMENTAL_STATE_CLEARED
            self.first = False
        self.n += 1
        return p

    def flush(self) -> None:
        if len(self.b.trace.packet):
            self.f.write(self.b.serialize())
        self.b = self.cls()


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


def write_perfetto(trace: Trace, path: str | os.PathLike[str]) -> ExportReport:
    """Write ``trace`` as a Perfetto protobuf trace (open it in ui.perfetto.dev or trace_processor).

    See the module docstring for tracks, timestamps, flows, counters and memory.

    Parameters
    ----------
    trace : Trace
        From any source.
    path : str or PathLike
        The file to write (``.pftrace`` / ``.perfetto-trace`` by convention; replaced if it exists).

    Returns
    -------
    ExportReport
        Counts written; ``flows_skipped`` counts flows whose ends match no slice.

    Raises
    ------
    nbprof.errors.MissingDependencyError
        When the ``perfetto`` package is not installed (``pip install 'nbprof[perfetto]'``).
    OSError
        When the file cannot be written.
    """
    pb, builder_cls = _pb()
    TE = pb.TrackEvent
    ev, th = trace.events, trace.threads
    lanes = assign_lanes(ev)
    p = os.fspath(path)
    rep = ExportReport(path=p, format="perfetto", slices=len(ev), overflow_lanes=lanes.overflow)
    me, co = trace.memory, trace.counters
    mins = [int(x["ts_ns"].min()) for x in (ev, me, co) if len(x)]
    shift = -min(0, min(mins)) if mins else 0

    pnames: dict[int, str] = {}
    tnames: dict[tuple[int, int], str] = {}
    for pid_, tid_, nm, kind in zip(th["pid"], th["tid"], th["name"], th["kind"]):
        if kind == "process":
            pnames.setdefault(int(pid_), str(nm))
        elif kind == "thread":
            tnames.setdefault((int(pid_), int(tid_)), str(nm))

    with atomic_open(p, "wb") as f:  # a failed export leaves no partial file (nbprof.atomic)
        w = _Writer(f, builder_cls)
        uuid_n = [0]

        def new_uuid() -> int:
            uuid_n[0] += 1
            return uuid_n[0]

        proc_uuid: dict[int, int] = {}
        dev_uuid: dict[int, int] = {}
        thread_uuid: dict[tuple[int, int], int] = {}
        lane_uuid: dict[tuple[int, int, int, bool], int] = {}  # (pid, tid, lane, device row)

        def process(pid_: int) -> int:
            if pid_ not in proc_uuid:
                u = proc_uuid[pid_] = new_uuid()
                d = w.packet().track_descriptor
                d.uuid = u
                if _fits_i32(pid_):
                    d.process.pid = pid_
                    d.process.process_name = pnames.get(pid_, f"process {pid_}")
                else:  # the protocol's pid is int32 (google/perfetto#935): a named track keeps the number
                    d.name = pnames.get(pid_, f"process {pid_}")
            return proc_uuid[pid_]

        def thread(pid_: int, tid_: int) -> int:
            if (pid_, tid_) not in thread_uuid:
                parent = process(pid_)
                u = thread_uuid[(pid_, tid_)] = new_uuid()
                d = w.packet().track_descriptor
                d.uuid, d.parent_uuid = u, parent
                if _fits_i32(pid_) and _fits_i32(tid_):
                    d.thread.pid, d.thread.tid = pid_, tid_
                    d.thread.thread_name = tnames.get((pid_, tid_), f"thread {tid_}")
                else:
                    d.name = tnames.get((pid_, tid_), f"thread {tid_}")
            return thread_uuid[(pid_, tid_)]

        def device(dev: int) -> int:
            if dev not in dev_uuid:
                u = dev_uuid[dev] = new_uuid()
                d = w.packet().track_descriptor
                dname = next((str(p_.get("name")) for p_ in trace.meta.device_properties
                              if p_.get("id") == dev and p_.get("name")), "")
                d.uuid, d.name = u, f"GPU {dev}" + (f" ({dname})" if dname else "")
                d.sibling_merge_behavior = pb.TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE
            return dev_uuid[dev]

        def custom(parent: int, name: str) -> int:
            u = new_uuid()
            d = w.packet().track_descriptor
            d.uuid, d.parent_uuid, d.name = u, parent, name
            d.sibling_merge_behavior = pb.TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE
            return u

        def counter(parent: int | None, name: str) -> int:
            u = new_uuid()
            d = w.packet().track_descriptor
            d.uuid, d.name = u, name
            if parent is not None:
                d.parent_uuid = parent
            d.counter.SetInParent()
            return u

        tr = lanes.tracks
        for pid_, tid_, ln, isdev in zip(tr["pid"], tr["tid"], tr["lane"], tr["device"]):
            pid_, tid_, ln = int(pid_), int(tid_), int(ln)
            if isdev:
                base = tnames.get((pid_, tid_), "")
                base = base if base.startswith("stream") else f"stream {tid_}"
                name = base if ln == 0 else f"{base} (overlap {ln + 1})"
                lane_uuid[(pid_, tid_, ln, True)] = custom(device(pid_), name)
            elif ln == 0:
                lane_uuid[(pid_, tid_, 0, False)] = thread(pid_, tid_)
            else:
                base = tnames.get((pid_, tid_), f"thread {tid_}")
                lane_uuid[(pid_, tid_, ln, False)] = custom(process(pid_), f"{base} (overlap {ln + 1})")
        rep.tracks = len(lane_uuid)

        # --- one sorted list of track events: slices, instants, counters, memory
        n = len(ev)
        ts = ev["ts_ns"].to_numpy(np.int64) + shift
        dur = np.maximum(ev["dur_ns"].to_numpy(np.int64), 0)
        inst = (ev["ph"].astype(object).to_numpy() == "i") if n else np.zeros(0, bool)
        rows = np.arange(n, dtype=np.int64)
        pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
        devrow = (ev["device"].to_numpy() >= 0).tolist()
        track = np.fromiter((lane_uuid[(a, b, c, d)] for a, b, c, d in zip(pid.tolist(), tid.tolist(),
                                                                          lanes.lane.tolist(), devrow)),
                            dtype=np.int64, count=n)
        # kinds: 0 begin, 1 end, 2 instant, 3 counter, 4 memory
        b_key = np.stack([ts, np.ones(n, np.int64), -dur, rows, np.zeros(n, np.int64)])
        e_key = np.stack([ts + dur, np.where(dur == 0, 1, 0), np.where(dur == 0, 0, -ts), np.where(dur == 0, rows, -rows),
                          np.ones(n, np.int64)])
        sl = ~inst
        keys = [b_key[:, sl], e_key[:, sl], b_key[:, inst]]
        kinds = [np.zeros(int(sl.sum()), np.int64), np.ones(int(sl.sum()), np.int64), np.full(int(inst.sum()), 2)]
        idx = [rows[sl], rows[sl], rows[inst]]
        if len(co):
            m = len(co)
            keys.append(np.stack([co["ts_ns"].to_numpy(np.int64) + shift, np.full(m, 2), np.zeros(m, np.int64),
                                  np.arange(m), np.zeros(m, np.int64)]))
            kinds.append(np.full(m, 3))
            idx.append(np.arange(m))
        if len(me):
            m = len(me)
            keys.append(np.stack([me["ts_ns"].to_numpy(np.int64) + shift, np.full(m, 2), np.zeros(m, np.int64),
                                  np.arange(m), np.zeros(m, np.int64)]))
            kinds.append(np.full(m, 4))
            idx.append(np.arange(m))
        K = np.concatenate(keys, axis=1)
        kind_all = np.concatenate(kinds)
        idx_all = np.concatenate(idx)
        order = np.lexsort((K[4], K[3], K[2], K[1], K[0]))

        # flows
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

        # counter and memory tracks
        c_track = np.zeros(len(co), np.int64)
        if len(co):
            cmap: dict[tuple[int, str, str], int] = {}
            for j, (pid_, nm, se) in enumerate(zip(co["pid"].to_numpy(), _obj(co["name"]), _obj(co["series"]))):
                key = (int(pid_), nm or "", se or "")
                if key not in cmap:
                    label = key[1] if key[2] in ("", key[1]) else f"{key[1]}.{key[2]}"
                    parent = process(key[0]) if key[0] in pnames or key[0] in proc_uuid else None
                    cmap[key] = counter(parent, label)
                c_track[j] = cmap[key]
            rep.counters = int((~np.isnan(co["value"].to_numpy(np.float64))).sum())
            if rep.counters < len(co):
                rep.notes.append(f"{len(co) - rep.counters} counter samples without a numeric value not written")
        mcols = {k: me[k].to_numpy(np.int64) for k in ("pid", "tid", "device_type", "device", "addr", "bytes",
                                                        "total_allocated", "total_reserved")}
        m_thread = np.zeros(len(me), np.int64)
        m_alloc = np.zeros(len(me), np.int64)
        m_res = np.zeros(len(me), np.int64)
        if len(me):
            mm: dict[tuple[int, str, int, int], int] = {}
            for j in range(len(me)):
                pid_, tid_ = int(mcols["pid"][j]), int(mcols["tid"][j])
                m_thread[j] = thread(pid_, tid_)
                dt, dv = int(mcols["device_type"][j]), int(mcols["device"][j])
                dname = "CPU" if dt == 0 else f"CUDA {dv}" if dt == 1 else f"device type {dt} #{dv}"
                for what, col, arr in (("allocated", "total_allocated", m_alloc), ("reserved", "total_reserved", m_res)):
                    if mcols[col][j] == -1:
                        continue
                    key2 = (pid_, what, dt, dv)
                    if key2 not in mm:
                        mm[key2] = counter(process(pid_), f"memory {what} ({dname})")
                    arr[j] = mm[key2]
            rep.memory = len(me)

        names, cats = _obj(ev["name"]), _obj(ev["cat"])
        corr, ext = ev["correlation"].to_numpy(np.int64), ev["external_id"].to_numpy(np.int64)
        cval = co["value"].to_numpy(np.float64) if len(co) else np.zeros(0)
        cts = co["ts_ns"].to_numpy(np.int64) + shift if len(co) else np.zeros(0, np.int64)
        mts = me["ts_ns"].to_numpy(np.int64) + shift if len(me) else np.zeros(0, np.int64)
        BEGIN, END, INSTANT, COUNTER = TE.TYPE_SLICE_BEGIN, TE.TYPE_SLICE_END, TE.TYPE_INSTANT, TE.TYPE_COUNTER
        # Python lists: indexing numpy arrays element by element is ~10x slower than lists in this loop
        kinds_l, idx_l = kind_all[order].tolist(), idx_all[order].tolist()
        track_l, ts_l, end_l = track.tolist(), ts.tolist(), (ts + dur).tolist()
        corr_l, ext_l = corr.tolist(), ext.tolist()
        # ids written above 2**63-1 (nbprof.trace.ids): their value, as a uint annotation
        corr_u = {k: v for k, v in originals(trace, "correlation").items() if isinstance(v, int) and 2**63 <= v < 2**64}
        ext_u = {k: v for k, v in originals(trace, "external_id").items() if isinstance(v, int) and 2**63 <= v < 2**64}
        cval_l, cts_l, ctrack_l, mts_l = cval.tolist(), cts.tolist(), c_track.tolist(), mts.tolist()
        mcol_l = {k: v.tolist() for k, v in mcols.items()}
        alloc_l, res_l = m_alloc.tolist(), m_res.tolist()
        mthread_l = m_thread.tolist()
        for kd, r in zip(kinds_l, idx_l):
            if kd <= 2:
                pk = w.packet()
                e = pk.track_event
                e.track_uuid = track_l[r]
                if kd == 1:
                    pk.timestamp = end_l[r]
                    e.type = END
                    continue
                pk.timestamp = ts_l[r]
                e.type = BEGIN if kd == 0 else INSTANT
                e.name = names[r] or ""
                if cats[r]:
                    e.categories.append(cats[r])
                if corr_l[r] != -1:
                    a = e.debug_annotations.add()
                    a.name = "correlation"
                    if corr_l[r] in corr_u:
                        a.uint_value = corr_u[corr_l[r]]
                    else:
                        a.int_value = corr_l[r]
                if ext_l[r] != -1:
                    a = e.debug_annotations.add()
                    a.name = "External id"
                    if ext_l[r] in ext_u:
                        a.uint_value = ext_u[ext_l[r]]
                    else:
                        a.int_value = ext_l[r]
                if r in out_flows:
                    e.flow_ids.extend(out_flows[r])
                if r in end_flows:
                    e.terminating_flow_ids.extend(end_flows[r])
            elif kd == 3:
                v = cval_l[r]
                if v != v:  # NaN: no sample
                    continue
                pk = w.packet()
                pk.timestamp = cts_l[r]
                e = pk.track_event
                e.type, e.track_uuid, e.double_counter_value = COUNTER, ctrack_l[r], v
            else:
                pk = w.packet()
                pk.timestamp = mts_l[r]
                e = pk.track_event
                e.type, e.track_uuid, e.name = INSTANT, mthread_l[r], "[memory]"
                e.categories.append("cpu_instant_event")
                for key3 in ("bytes", "addr", "device", "device_type", "total_allocated", "total_reserved"):
                    a = e.debug_annotations.add()
                    a.name, a.int_value = key3, mcol_l[key3][r]
                for what, arr in (("total_allocated", alloc_l), ("total_reserved", res_l)):
                    if mcol_l[what][r] != -1:
                        pc = w.packet()
                        pc.timestamp = mts_l[r]
                        c = pc.track_event
                        c.type, c.track_uuid, c.counter_value = COUNTER, arr[r], mcol_l[what][r]
        w.flush()
    rep.ts_offset_ns = shift
    if shift:
        rep.notes.append(f"timestamps shifted by +{shift} ns so that none is negative")
    return rep
