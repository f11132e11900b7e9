"""The canonical trace model: ``Trace`` = typed tables + metadata + load report."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from . import hooks, schema


@dataclass
class LoadIssue:
    """One thing a loader repaired, dropped or assumed.

    Attributes
    ----------
    kind : str
        Short machine-readable key, e.g. ``"truncated"``, ``"negative_dur"``, ``"rank_assumed"``.
    action : str
        ``"repaired"``, ``"dropped"`` or ``"assumed"``.
    count : int
        How many events/records it concerns.
    message : str
        Human-readable sentence with the evidence.
    offset : int or None
        First byte offset concerned, when known.
    """

    kind: str
    action: str
    count: int
    message: str
    offset: int | None = None


@dataclass
class LoadReport:
    """What a loader repaired, dropped or assumed, with counts. Empty means a clean load."""

    path: str = ""
    issues: list[LoadIssue] = field(default_factory=list)

    def add(self, kind: str, action: str, count: int, message: str, offset: int | None = None) -> None:
        """Record one issue, merging it with an existing issue of the same kind and action.

        A merge sums the counts and keeps the first message and the first known offset; a
        message that starts with its count (``"1 events had ..."``, the convention of every
        loader) is restated with the merged count (``"4 events had ..."``).
        """
        for it in self.issues:
            if it.kind == kind and it.action == action:
                old = it.count
                it.count += count
                lead = f"{old} "
                if it.message.startswith(lead) and it.count != old:
                    it.message = f"{it.count} " + it.message[len(lead):]
                if it.offset is None:
                    it.offset = offset
                return
        self.issues.append(LoadIssue(kind, action, count, message, offset))

    @property
    def clean(self) -> bool:
        """True when nothing was repaired or dropped (assumptions and flags may still be listed:
        e.g. "rank assumed 0" for a single-process profile, "no ProfilerStep")."""
        return not any(i.action in ("repaired", "dropped") for i in self.issues)

    @property
    def notes(self) -> list[LoadIssue]:
        """Issues that changed nothing in the data: assumptions and flags."""
        return [i for i in self.issues if i.action not in ("repaired", "dropped")]

    def kinds(self) -> set[str]:
        """The set of issue kinds recorded."""
        return {i.kind for i in self.issues}

    def get(self, kind: str) -> LoadIssue | None:
        """The first issue of ``kind`` or None."""
        for it in self.issues:
            if it.kind == kind:
                return it
        return None

    def to_frame(self) -> pd.DataFrame:
        """Columns: kind, action, count, offset, message."""
        return pd.DataFrame(
            [(i.kind, i.action, i.count, i.offset, i.message) for i in self.issues],
            columns=["kind", "action", "count", "offset", "message"],
        )

    def __str__(self) -> str:
        if not self.issues:
            return f"load report for {self.path}: clean"
        lines = [f"load report for {self.path}:"]
        for i in self.issues:
            where = f" (byte {i.offset})" if i.offset is not None else ""
            lines.append(f"  - {i.action}: {i.message}{where}")
        return "\n".join(lines)


@dataclass
class TraceMeta:
    """Trace-level metadata.

    Attributes
    ----------
    source_path : str
    source_format : str
        ``"kineto"``, ``"nsys"``, ...
    producer : str
        ``"PyTorch/Kineto"``, ``"PyTorch/Kineto (ROCm)"``, ``"Nsight Systems"``...
    origin_ns : int or None
        Absolute time (Unix epoch ns when the source says so) of ``ts_ns == 0``.
    rank, world_size : int
    rank_source : str
        ``"distributedInfo"``, ``"filename"``, ``"assumed"`` or ``"given"``.
    distributed_info : dict
    device_properties : list of dict
        Per device: ``id``, ``name``, ``totalGlobalMem`` (bytes), ``computeMajor``... (Kineto names).
    schema_version : int or None
        The source's own schema version (Kineto ``schemaVersion``).
    flags : dict
        Profiler flags found in the file (record_shapes, profile_memory, with_stack, with_flops, with_modules).
    extra : dict
        Any other top-level metadata, kept as is.
    """

    source_path: str = ""
    source_format: str = ""
    producer: str = ""
    origin_ns: int | None = None
    rank: int = 0
    world_size: int = 1
    rank_source: str = "assumed"
    distributed_info: dict[str, Any] = field(default_factory=dict)
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    schema_version: int | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    nbprof_schema_version: int = schema.SCHEMA_VERSION

    @property
    def is_rocm(self) -> bool:
        """True for AMD/ROCm traces (roctracer / HIP metadata or an AMD device name)."""
        if any(k.startswith(("hip_", "roctracer")) for k in self.extra):
            return True
        return any("AMD" in str(d.get("name", "")) for d in self.device_properties)


@dataclass
class Trace:
    """A profile in nbprof's canonical model.

    Attributes
    ----------
    events : pandas.DataFrame
        One row per duration or instant event; columns in ``nbprof.trace.schema.EVENT_COLUMNS``
        (``ts_ns``/``dur_ns`` int64 ns relative to the origin, categorical ``name``/``cat``, ...).
        Sorted by ``ts_ns``.
    flows : pandas.DataFrame
        ``FLOW_COLUMNS``: ac2g and fwdbwd flow pairs.
    memory : pandas.DataFrame
        ``MEMORY_COLUMNS``: the ``[memory]`` allocation/free events.
    counters : pandas.DataFrame
        ``COUNTER_COLUMNS``: Chrome-trace ``C`` events.
    threads : pandas.DataFrame
        ``pid``, ``tid``, ``name``, ``kind`` ("process"/"thread"), from ``M`` events.
    meta : TraceMeta
    report : LoadReport
    tables : dict of str to pandas.DataFrame
        Declared side tables a source keeps beyond the common tables, by name (e.g. nsys's
        ``"nvtx"``, ``"os_runtime"``, ``"cpu_samples"``; see ``nbprof.trace.schema.SIDE_TABLES``).
        Plain DataFrames (no objects in metadata); the multi-rank cache persists them as Parquet.
    """

    events: pd.DataFrame
    flows: pd.DataFrame
    memory: pd.DataFrame
    counters: pd.DataFrame
    threads: pd.DataFrame
    meta: TraceMeta
    report: LoadReport
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Without step ranges from the source (every ``step`` -1: no ``ProfilerStep#N``, no NVTX step
        ranges), the iterations found from what repeats become the events' steps
        (:func:`nbprof.trace.iterations.assign_detected_steps`, noted as ``steps_detected`` in the report). Device ops
        of CUDA-graph replays are attributed to the operators that captured them
        (:func:`nbprof.trace.graph_replay.attribute_graph_replays`: side table ``graph_replay``, noted as
        ``cuda_graph_attribution``)."""
        from .graph_replay import attribute_graph_replays
        from .iterations import assign_detected_steps

        assign_detected_steps(self)
        attribute_graph_replays(self)

    # ----------------------------------------------------------------- basics
    @property
    def duration_ns(self) -> int:
        """Span of the trace: max(ts+dur) - min(ts) over events, in ns (0 if empty)."""
        ev = self.events
        if ev.empty:
            return 0
        return int((ev["ts_ns"] + ev["dur_ns"]).max() - ev["ts_ns"].min())

    @property
    def rank(self) -> int:
        """The trace's distributed rank (see ``meta.rank_source`` for where it came from)."""
        return self.meta.rank

    @property
    def has_device(self) -> bool:
        """True when the trace holds device (GPU) activity."""
        return bool(self.events["device"].ge(0).any()) if len(self.events) else False

    @property
    def steps(self) -> list[int]:
        """Step numbers present in the ``step`` column, ascending: the ``N`` of ``ProfilerStep#N`` (or of the
        source's NVTX step ranges), else the detected iterations 0, 1, ... (``nbprof.trace.iterations``)."""
        s = self.events["step"]
        return sorted(int(x) for x in pd.unique(s[s >= 0]))

    def category_counts(self) -> pd.Series:
        """Number of events per canonical category (int64 Series indexed by category)."""
        return self.events["cat"].value_counts().astype("int64")

    def summary(self) -> dict[str, Any]:
        """A small dict: path, producer, rank, events, per-category counts, steps, duration_ns, devices (the names in
        ``deviceProperties``: every GPU of the machine, in id order), event_devices (the device ids >= 0 that events
        ran on)."""
        return {
            "path": self.meta.source_path,
            "producer": self.meta.producer,
            "rank": self.meta.rank,
            "world_size": self.meta.world_size,
            "events": int(len(self.events)),
            "categories": {str(k): int(v) for k, v in self.category_counts().items() if v},
            "steps": self.steps,
            "duration_ns": self.duration_ns,
            "devices": [str(d.get("name", "")) for d in self.meta.device_properties],
            "event_devices": sorted(int(d) for d in pd.unique(self.events["device"]) if int(d) >= 0),
            "memory_events": int(len(self.memory)),
            "flows": int(len(self.flows)),
            "clean_load": self.report.clean,
        }

    def __repr__(self) -> str:
        s = self.summary()
        cats = ", ".join(f"{k}={v}" for k, v in sorted(s["categories"].items(), key=lambda kv: -kv[1])[:6])
        return (
            f"<nbprof.Trace {s['path']!s}: {s['events']} events ({cats}), rank {s['rank']}, "
            f"{len(s['steps'])} steps, {s['duration_ns'] / 1e6:.3f} ms, "
            f"{'clean load' if s['clean_load'] else str(len(self.report.issues) - len(self.report.notes)) + ' load repairs'}"
            f"{', ' + str(len(self.report.notes)) + ' load notes' if self.report.notes else ''}>"
        )

    def validate(self) -> None:
        """Check every table against ``nbprof.trace.schema`` (raises ``SchemaError``)."""
        schema.validate(self.events, schema.EVENT_COLUMNS, "events")
        schema.validate(self.flows, schema.FLOW_COLUMNS, "flows")
        schema.validate(self.memory, schema.MEMORY_COLUMNS, "memory")
        schema.validate(self.counters, schema.COUNTER_COLUMNS, "counters")

    def show(self, view: str | None = None, **kwargs: Any) -> Any:
        """The interactive viewer of this trace (the ``viewer`` hook of ``nbprof.trace.hooks``: ``nbprof.viz``'s dashboard).

        Parameters
        ----------
        view : {None, "overview", "operators", "timeline", "memory"}
            None: the dashboard with all four views; otherwise that one view.
        **kwargs
            Passed to the viewer (``theme``, ``width``, ...).

        Returns
        -------
        ipywidgets.Widget
            Display it (it is also the cell's value when last in a cell).
        """
        return hooks.viewer()(self, view, **kwargs)

    # ----------------------------------------------------------------- export (the writer hooks: nbprof.export)
    def to_chrome_trace(self, path: str | os.PathLike[str]) -> Any:
        """Write this trace as Chrome Trace Event Format JSON (``.json`` or gzip ``.json.gz``).

        ``X``/``i`` events with ``ts``/``dur`` in µs carrying the ns (``round(ts * 1000) == ts_ns``),
        pid/tid lanes (overlapping slices of one thread/stream on extra lanes), ``M`` names, flows,
        counters, ``[memory]`` events; details in :mod:`nbprof.export.chrome`.

        Returns
        -------
        nbprof.export.ExportReport
            What was written (slices, tracks, overflow lanes, flows, counters, memory).
        """
        return hooks.call("chrome", self, path)

    def to_perfetto(self, path: str | os.PathLike[str]) -> Any:
        """Write this trace as a Perfetto protobuf trace (``TrackEvent``s; :mod:`nbprof.export.perfetto`).

        Returns
        -------
        nbprof.export.ExportReport

        Raises
        ------
        nbprof.errors.MissingDependencyError
            Without the ``perfetto`` package (``pip install 'nbprof[perfetto]'``).
        """
        return hooks.call("perfetto", self, path)

    def save(self, path: str | os.PathLike[str]) -> str:
        """Save this trace losslessly to a ``.nbprof`` file (Parquet parts in one ZIP; :mod:`nbprof.export.saved`).

        ``nbprof.load(path)`` reads it back: equal tables, side tables, metadata and load report.

        Returns
        -------
        str
            The path written.

        Raises
        ------
        nbprof.errors.SchemaError
            When metadata or a side table holds something that is not plain data.
        """
        written: str = hooks.call("save", self, path)
        return written

    def sql(self, query: str, tables: dict[str, Any] | None = None) -> pd.DataFrame:
        """Run a DuckDB SQL query over this trace's tables (``events``, ``kernels``, ``flows``, ``memory``,
        ``counters``, ``threads``, side tables as ``side_<name>``) and the frames in ``tables``.

        Example: ``tr.sql("SELECT name, sum(dur_ns) AS total_ns FROM kernels GROUP BY name ORDER BY 2 DESC")``;
        more in :func:`nbprof.export.sql.sql`.

        Raises
        ------
        nbprof.errors.MissingDependencyError
            Without the ``duckdb`` package (``pip install 'nbprof[sql]'``).
        """
        out: pd.DataFrame = hooks.call("sql", self, query, tables=tables)
        return out
