"""The tracks of :func:`nbprof.export.perfetto.write_perfetto`: ``TrackDescriptor`` packets for processes,
threads, devices and their streams, overlap lanes, counters and memory counters, each written once, on first
use, with uuids 1, 2, ... in that order (see the module docstring of :mod:`nbprof.export.perfetto`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..trace.model import Trace
from . import ExportReport
from .chrome import _obj
from .lanes import Lanes

#: memory columns written as debug annotations of a ``[memory]`` instant (int64; bytes, ids)
MEMORY_COLUMNS = ("pid", "tid", "device_type", "device", "addr", "bytes", "total_allocated", "total_reserved")


def _fits_i32(v: int) -> bool:
    """Whether ``v`` fits the int32 pid/tid fields of Perfetto's ``ProcessDescriptor``/``ThreadDescriptor``."""
    return -(2**31) <= v < 2**31


class Tracks:
    """The track descriptors of one export, each written (a packet from ``packet()``) the first time it is
    asked for; methods return the track's uuid."""

    def __init__(self, packet: Any, pb: Any, trace: Trace) -> None:
        self.packet, self.pb, self.trace = packet, pb, trace
        self.pnames: dict[int, str] = {}
        self.tnames: dict[tuple[int, int], str] = {}
        th = trace.threads
        for pid_, tid_, nm, kind in zip(th["pid"], th["tid"], th["name"], th["kind"]):
            if kind == "process":
                self.pnames.setdefault(int(pid_), str(nm))
            elif kind == "thread":
                self.tnames.setdefault((int(pid_), int(tid_)), str(nm))
        self.n = 0
        self.proc_uuid: dict[int, int] = {}
        self.dev_uuid: dict[int, int] = {}
        self.thread_uuid: dict[tuple[int, int], int] = {}

    def _new(self) -> tuple[int, Any]:
        """A new uuid and its descriptor (in a new packet)."""
        self.n += 1
        d = self.packet().track_descriptor
        d.uuid = self.n
        return self.n, d

    def process(self, pid_: int) -> int:
        """The process track of ``pid_`` (``ProcessDescriptor``; a named track when the pid exceeds int32)."""
        if pid_ not in self.proc_uuid:
            u, d = self._new()
            self.proc_uuid[pid_] = u
            if _fits_i32(pid_):
                d.process.pid = pid_
                d.process.process_name = self.pnames.get(pid_, f"process {pid_}")
            else:  # the protocol's pid is int32 (google/perfetto#935): a named track keeps the number
                d.name = self.pnames.get(pid_, f"process {pid_}")
        return self.proc_uuid[pid_]

    def thread(self, pid_: int, tid_: int) -> int:
        """The thread track of ``(pid_, tid_)`` under its process track."""
        if (pid_, tid_) not in self.thread_uuid:
            parent = self.process(pid_)
            u, d = self._new()
            self.thread_uuid[(pid_, tid_)] = u
            d.parent_uuid = parent
            if _fits_i32(pid_) and _fits_i32(tid_):
                d.thread.pid, d.thread.tid = pid_, tid_
                d.thread.thread_name = self.tnames.get((pid_, tid_), f"thread {tid_}")
            else:
                d.name = self.tnames.get((pid_, tid_), f"thread {tid_}")
        return self.thread_uuid[(pid_, tid_)]

    def device(self, dev: int) -> int:
        """The top-level track of device ``dev``, ``"GPU n (<device name>)"``."""
        if dev not in self.dev_uuid:
            u, d = self._new()
            self.dev_uuid[dev] = u
            dname = next((str(p_.get("name")) for p_ in self.trace.meta.device_properties
                          if p_.get("id") == dev and p_.get("name")), "")
            d.name = f"GPU {dev}" + (f" ({dname})" if dname else "")
            d.sibling_merge_behavior = self.pb.TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE
        return self.dev_uuid[dev]

    def custom(self, parent: int, name: str) -> int:
        """A new named child track of ``parent`` (a stream, an overlap lane)."""
        u, d = self._new()
        d.parent_uuid, d.name = parent, name
        d.sibling_merge_behavior = self.pb.TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE
        return u

    def counter(self, parent: int | None, name: str) -> int:
        """A new counter track ``name`` (under ``parent`` when given)."""
        u, d = self._new()
        d.name = name
        if parent is not None:
            d.parent_uuid = parent
        d.counter.SetInParent()
        return u

    def lanes(self, lanes: Lanes) -> dict[tuple[int, int, int, bool], int]:
        """The track of each lane of :func:`nbprof.export.lanes.assign_lanes`, keyed ``(pid, tid, lane, device
        row)``: lane 0 of a host thread is its thread track, of a stream ``"stream s"`` under its device; lane
        k > 0 ``"<name> (overlap k+1)"``."""
        lane_uuid: dict[tuple[int, int, int, bool], int] = {}
        tr = lanes.tracks
        for pid_, tid_, ln, isdev in zip(tr["pid"], tr["tid"], tr["lane"], tr["device"]):
            pid_, tid_, ln = int(pid_), int(tid_), int(ln)
            if isdev:
                base = self.tnames.get((pid_, tid_), "")
                base = base if base.startswith("stream") else f"stream {tid_}"
                name = base if ln == 0 else f"{base} (overlap {ln + 1})"
                lane_uuid[(pid_, tid_, ln, True)] = self.custom(self.device(pid_), name)
            elif ln == 0:
                lane_uuid[(pid_, tid_, 0, False)] = self.thread(pid_, tid_)
            else:
                base = self.tnames.get((pid_, tid_), f"thread {tid_}")
                lane_uuid[(pid_, tid_, ln, False)] = self.custom(self.process(pid_), f"{base} (overlap {ln + 1})")
        return lane_uuid

    def counters(self, co: pd.DataFrame, rep: ExportReport) -> np.ndarray:
        """Per row of ``Trace.counters``: its track, one per (pid, name, series) named ``"name"`` or
        ``"name.series"`` (under the process track when the process is known). Sets ``rep.counters`` (samples
        with a numeric value) and notes the others."""
        c_track = np.zeros(len(co), np.int64)
        if not len(co):
            return c_track
        cmap: dict[tuple[int, str, str], int] = {}
        for j, (pid_, nm, se) in enumerate(zip(co["pid"].to_numpy(), _obj(co["name"]), _obj(co["series"]))):
            key = (int(pid_), nm or "", se or "")
            if key not in cmap:
                label = key[1] if key[2] in ("", key[1]) else f"{key[1]}.{key[2]}"
                parent = self.process(key[0]) if key[0] in self.pnames or key[0] in self.proc_uuid else None
                cmap[key] = self.counter(parent, label)
            c_track[j] = cmap[key]
        rep.counters = int((~np.isnan(co["value"].to_numpy(np.float64))).sum())
        if rep.counters < len(co):
            rep.notes.append(f"{len(co) - rep.counters} counter samples without a numeric value not written")
        return c_track

    def memory(self, mcols: dict[str, np.ndarray], rep: ExportReport) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row of ``Trace.memory`` (``mcols``: its :data:`MEMORY_COLUMNS`): its thread track and its
        ``"memory allocated (<dev>)"`` / ``"memory reserved (<dev>)"`` counter tracks (0 where the total is
        unknown, -1). Sets ``rep.memory``."""
        n = mcols["pid"].size
        m_thread, m_alloc, m_res = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        mm: dict[tuple[int, str, int, int], int] = {}
        for j in range(n):
            pid_, tid_ = int(mcols["pid"][j]), int(mcols["tid"][j])
            m_thread[j] = self.thread(pid_, tid_)
            dt, dv = int(mcols["device_type"][j]), int(mcols["device"][j])
            dname = "CPU" if dt == 0 else f"CUDA {dv}" if dt == 1 else f"device type {dt} #{dv}"
            for what, col, arr in (("allocated", "total_allocated", m_alloc), ("reserved", "total_reserved", m_res)):
                if mcols[col][j] == -1:
                    continue
                key2 = (pid_, what, dt, dv)
                if key2 not in mm:
                    mm[key2] = self.counter(self.process(pid_), f"memory {what} ({dname})")
                arr[j] = mm[key2]
        if n:
            rep.memory = n
        return m_thread, m_alloc, m_res
