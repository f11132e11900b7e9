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

Where each part lives: the track descriptors in :mod:`nbprof.export.perfetto_tracks`, flows, the event order
and the event packets in :mod:`nbprof.export.perfetto_events`; this module opens the file and writes packets.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .._deps import missing
from ..atomic import atomic_open
from ..trace.model import Trace
from . import ExportReport
from .lanes import assign_lanes
from .perfetto_events import Samples, event_order, flow_ids, write_events
from .perfetto_tracks import MEMORY_COLUMNS, Tracks

__all__ = ["write_perfetto", "SEQUENCE_ID"]

#: the ``trusted_packet_sequence_id`` of every packet written
SEQUENCE_ID = 1
_CHUNK = 20000


def _pb() -> Any:
    """The ``perfetto`` package's generated protobuf module and ``TraceProtoBuilder`` class.

    Raises
    ------
    nbprof.errors.MissingDependencyError
        When the ``perfetto`` package is not installed.
    """
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb  # type: ignore[import-untyped]
        from perfetto.trace_builder.proto_builder import TraceProtoBuilder  # type: ignore[import-untyped]
    except ModuleNotFoundError as exc:
        raise missing("perfetto", "perfetto", "Trace.to_perfetto", exc) from exc
    return pb, TraceProtoBuilder


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
    ev, me, co = trace.events, trace.memory, trace.counters
    lanes = assign_lanes(ev)
    p = os.fspath(path)
    rep = ExportReport(path=p, format="perfetto", slices=len(ev), overflow_lanes=lanes.overflow)
    mins = [int(x["ts_ns"].min()) for x in (ev, me, co) if len(x)]
    shift = -min(0, min(mins)) if mins else 0
    with atomic_open(p, "wb") as f:  # a failed export leaves no partial file (nbprof.atomic)
        w = _Writer(f, builder_cls)
        tracks = Tracks(w.packet, pb, trace)
        lane_uuid = tracks.lanes(lanes)
        rep.tracks = len(lane_uuid)
        devrow = (ev["device"].to_numpy() >= 0).tolist()
        slice_track = np.fromiter((lane_uuid[key] for key in zip(ev["pid"].to_numpy(np.int64).tolist(),
                                                                 ev["tid"].to_numpy(np.int64).tolist(),
                                                                 lanes.lane.tolist(), devrow)),
                                  dtype=np.int64, count=len(ev))
        kinds, idx = event_order(ev, co, me, shift)
        flows = flow_ids(trace, rep)
        c_track = tracks.counters(co, rep)
        mcols = {k: me[k].to_numpy(np.int64) for k in MEMORY_COLUMNS}
        m_thread, m_alloc, m_res = tracks.memory(mcols, rep)
        samples = Samples(
            cts=(co["ts_ns"].to_numpy(np.int64) + shift).tolist() if len(co) else [],
            cval=co["value"].to_numpy(np.float64).tolist() if len(co) else [], ctrack=c_track.tolist(),
            mts=(me["ts_ns"].to_numpy(np.int64) + shift).tolist() if len(me) else [],
            mcols={k: v.tolist() for k, v in mcols.items()}, mthread=m_thread.tolist(), malloc=m_alloc.tolist(),
            mres=m_res.tolist())
        write_events(w.packet, pb.TrackEvent, trace, kinds, idx, shift, slice_track, samples, flows)
        w.flush()
    rep.ts_offset_ns = shift
    if shift:
        rep.notes.append(f"timestamps shifted by +{shift} ns so that none is negative")
    return rep
