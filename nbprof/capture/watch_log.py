"""The step watch's run folder: ``steps.parquet`` (one row per step), ``summary.json`` and captured traces.

Layout (read back by :mod:`nbprof.sources.watch_run`; ``nbprof check`` and ``nbprof stats`` take the folder)::

    RUN/summary.json                          {"format": "nbprof.watch", "version": 1, "steps", "flagged_steps",
                                               "median_step_ns", "captures": [...], "config": {...}, ...}
    RUN/steps.parquet                         RECORD_FIELDS, int64 ns / bool / str
    RUN/capture-step<N>.pt.trace.json.gz      a profiled window starting at watch step N (Kineto JSON)

Each captured trace carries its window as the top-level object ``"nbprof_watch"`` (:data:`WATCH_KEY`; the Kineto
loader keeps it in ``trace.meta.extra``)::

    {"first_step": int, "last_step": int,      the watch steps the window recorded
     "flagged_steps": [int, ...],               the watch steps it flagged as stalls
     "profiler_steps": {"<watch step>": N},     watch step -> ProfilerStep#N of this trace
     "flagged_profiler_steps": [N, ...]}        the ProfilerStep#N numbers of the flagged steps

:func:`nbprof.analysis.steps.flagged_steps` reads the last list: a flagged stall that opens the window is the
stall being diagnosed, not warm-up (:func:`nbprof.analysis.steps.steady_state`).

Every file is written to a temporary name and renamed into place, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from ._files import read_trace_bytes, unlink_quietly, write_trace_bytes

__all__ = ["RECORD_FIELDS", "RunLog", "FORMAT", "STEPS_FILE", "SUMMARY_FILE", "WATCH_KEY"]

FORMAT = "nbprof.watch"
#: Top-level key of a captured trace that holds its window (see the module docstring); the analysis reads the same
#: key (``nbprof.analysis.steps.WATCH_KEY``).
WATCH_KEY = "nbprof_watch"
STEPS_FILE = "steps.parquet"
SUMMARY_FILE = "summary.json"

#: per-step record fields -> dtype (``nbprof.capture.watch`` documents each; times are int64 ns, ``start_ns``
#: from the watch's start on ``time.perf_counter_ns``)
RECORD_FIELDS: dict[str, str] = {
    "step": "int64", "start_ns": "int64", "step_ns": "int64", "data_wait_ns": "int64", "forward_ns": "int64",
    "backward_ns": "int64", "optimizer_ns": "int64", "gc_ns": "int64", "blocked_ns": "int64", "runqueue_ns": "int64",
    "other_ns": "int64",
    "syncs": "int64", "device_step_ns": "int64",
    "watch_ns": "int64", "profiled": "bool", "flagged": "bool", "median_ns": "int64", "capture": "str", "errors": "str",
}


def _replace_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".nbprof-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class RunLog:
    """Writes one run folder (created, with parents). Files only: nothing is loaded here."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config: dict[str, Any] = {}
        self.started_unix = time.time()

    def trace_path(self, first_step: int) -> Path:
        """Where the window starting at watch step ``first_step`` goes (never an existing file)."""
        n = 0
        while True:
            p = self.run_dir / f"capture-step{first_step:06d}{'.' + str(n) if n else ''}.pt.trace.json.gz"
            if not p.exists():
                return p
            n += 1

    def finish_trace(self, tmp: Path, path: Path, window: dict[str, Any] | None = None) -> None:
        """Gzip the exported ``tmp`` JSON into ``path`` and remove ``tmp``; with ``window`` (the object of the module
        docstring), write it into the trace as the top-level :data:`WATCH_KEY` first (a document that is not a strict
        JSON object is left as it is)."""
        data = read_trace_bytes(tmp)
        if window is not None:
            import orjson

            try:
                doc = orjson.loads(data)
            except ValueError:  # not strict JSON (the loader's tolerant decode reads it): the trace as it is
                doc = None
            if isinstance(doc, dict):
                doc[WATCH_KEY] = window
                data = orjson.dumps(doc)
        write_trace_bytes(data, path)
        unlink_quietly(tmp)

    def start(self, config: dict[str, Any]) -> None:
        """Record the watch's settings and write a first ``summary.json`` (``"status": "running"``)."""
        self.config = dict(config)
        self._summary([], [], status="running")

    def _summary(self, records: list[dict[str, Any]], captures: list[dict[str, Any]], *, status: str) -> None:
        steps = sorted(int(r["step_ns"]) for r in records if not r["profiled"])
        doc = {
            "format": FORMAT, "version": 1, "status": status, "started_unix": self.started_unix,
            "steps": len(records), "median_step_ns": steps[len(steps) // 2] if steps else 0,
            "flagged_steps": [int(r["step"]) for r in records if r["flagged"]],
            "profiled_steps": sum(1 for r in records if r["profiled"]),
            "captures": captures, "config": self.config,
            "host": platform.node(), "python": sys.version.split()[0],
        }
        _replace_text(self.run_dir / SUMMARY_FILE, json.dumps(doc, indent=1, default=str) + "\n")

    def write(self, records: list[dict[str, Any]], captures: list[dict[str, Any]]) -> None:
        """Write ``steps.parquet`` (:data:`RECORD_FIELDS`) and the final ``summary.json``."""
        import pandas as pd

        cols = {f: pd.Series([r[f] for r in records], dtype="object" if t == "str" else t)
                for f, t in RECORD_FIELDS.items()}
        df = pd.DataFrame(cols)
        for f, t in RECORD_FIELDS.items():
            if t == "str":
                df[f] = df[f].astype(str)
        tmp = self.run_dir / (STEPS_FILE + ".nbprof-tmp")
        df.to_parquet(tmp, index=False)
        os.replace(tmp, self.run_dir / STEPS_FILE)
        self._summary(records, captures, status="finished")
