"""Read a step-watch run folder (written by ``nbprof.capture.watch``): the per-step log and its summary.

The folder holds ``summary.json`` (``"format": "nbprof.watch"``) and ``steps.parquet`` (one row per watched
step, int64 ns columns; ``nbprof.capture.watch`` defines each). This module only reads.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TraceFormatError

__all__ = ["WatchRun", "is_run_dir", "read_run", "run_step_times"]

_FORMAT = "nbprof.watch"
_REQUIRED = ("step", "step_ns", "profiled", "flagged")


@dataclass
class WatchRun:
    """A run folder read back: ``steps`` (one row per step, the writer's columns), ``summary`` (the JSON)."""

    path: Path
    steps: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def is_run_dir(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a folder with a watch ``summary.json``."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "summary.json"))


def read_run(path: str | os.PathLike[str]) -> WatchRun:
    """Read the run folder ``path``.

    Raises
    ------
    TraceFormatError
        No ``summary.json`` of format ``nbprof.watch``, no ``steps.parquet`` (the watch still running, or
        killed before its end: the summary's ``status`` says ``running``), or a column of :data:`_REQUIRED`
        missing.
    """
    p = Path(path)
    summ = p / "summary.json"
    try:
        doc = json.loads(summ.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceFormatError(str(p), None, "not a watch run folder: no summary.json") from None
    except (OSError, ValueError) as exc:
        raise TraceFormatError(str(summ), None, f"unreadable watch summary: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise TraceFormatError(str(summ), None, f"not a watch summary (format is not {_FORMAT!r})")
    steps_file = p / "steps.parquet"
    if not steps_file.is_file():
        raise TraceFormatError(str(p), None, f"no steps.parquet (watch status: {doc.get('status', '?')})")
    try:
        df = pd.read_parquet(steps_file)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise TraceFormatError(str(steps_file), None, f"unreadable per-step log: {exc}") from None
    missing = [c for c in _REQUIRED if c not in df.columns]
    if missing:
        raise TraceFormatError(str(steps_file), None, f"per-step log without column(s) {', '.join(missing)}")
    return WatchRun(p, df, doc)


def run_step_times(run: WatchRun, *, skip: int = 0) -> np.ndarray:
    """Per-step wall times of a watched run (int64 ns, step order): the unprofiled steps after the first ``skip``
    (profiled steps carry the profiler's cost, so they are left out of a comparison).

    Raises
    ------
    ValueError
        When ``skip`` leaves no unprofiled step.
    """
    df = run.steps[run.steps["step"] >= skip]
    v = np.asarray(df.loc[~df["profiled"].astype(bool), "step_ns"].to_numpy(dtype=np.int64))
    if not len(v):
        raise ValueError(f"{run.path}: --skip {skip} leaves no unprofiled step of its {len(run.steps)}")
    return v
