"""Writing a loaded ``Trace`` out: Chrome trace JSON, Perfetto protobuf, saved ``.nbprof`` files, SQL.

Outside the core loaders; ``Trace.to_chrome_trace``, ``Trace.to_perfetto``, ``Trace.save`` and ``Trace.sql``
are thin methods that import these modules on first use (the model imports nothing of them).

Modules
-------
``lanes``     one home for splitting overlapping slices of one thread/stream onto separate tracks
``chrome``    Trace Event Format JSON (:func:`nbprof.export.chrome.write_chrome_trace`)
``perfetto``  Perfetto ``TracePacket``/``TrackEvent`` protobuf (:func:`nbprof.export.perfetto.write_perfetto`;
              extra ``perfetto``)
``saved``     the ``.nbprof`` file: every table as Parquet in one zip (:func:`nbprof.export.saved.save`,
              read back by ``nbprof.load``)
``sql``       DuckDB over Arrow views of the tables (:func:`nbprof.export.sql.sql`; extra ``sql``)
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ExportReport"]


@dataclass
class ExportReport:
    """What an export wrote.

    Attributes
    ----------
    path : str
        The file written.
    format : str
        ``"chrome"`` or ``"perfetto"``.
    slices : int
        Duration and instant events written (one per row of ``Trace.events``).
    tracks : int
        Tracks (Chrome: pid/tid lanes; Perfetto: track descriptors) carrying those slices.
    overflow_lanes : int
        Extra tracks made because slices overlapped on one thread or stream (none is dropped).
    flows : int
        Flow arrows written (both ends bound to a slice for Perfetto).
    flows_skipped : int
        Flows not written: Chrome, none (an end without a partner is written alone); Perfetto, flows
        with an end that is missing or matches no slice.
    counters : int
        Counter samples written (rows of ``Trace.counters``).
    memory : int
        ``[memory]`` events written (rows of ``Trace.memory``).
    ts_offset_ns : int
        Added to every timestamp written (ns): 0, except for Perfetto when some time of the trace is negative
        (Perfetto's timestamps are unsigned; the earliest becomes 0).
    notes : list of str
        Anything approximated, in words.
    """

    path: str
    format: str
    slices: int = 0
    tracks: int = 0
    overflow_lanes: int = 0
    flows: int = 0
    flows_skipped: int = 0
    counters: int = 0
    memory: int = 0
    ts_offset_ns: int = 0
    notes: list[str] = field(default_factory=list)
