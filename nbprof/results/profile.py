"""``ProfileResult``: what ``%%torchprof`` and ``nbprof.profile()`` give back (plain data).

It holds the loaded nbprof :class:`~nbprof.trace.Trace` (one per profiling cycle) and what the
capture reported. The operator table is ``nbprof.analysis.operators.operator_summary`` summed over
cycles (``nbprof.analysis.operator_keys``); the text and HTML forms come from
``nbprof.results.profile_render`` (through ``nbprof.results.render``), the viewers from the view
registry of ``nbprof.viz``. No profiling, parsing or formatting happens here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..analysis.operator_keys import GROUP_BY, resolve_sort_key, summed_operator_summary
from ..capture.options import ProfileOptions

if TYPE_CHECKING:  # pragma: no cover
    from ..trace.model import Trace

__all__ = ["ProfileResult", "resolve_sort_key", "GROUP_BY"]


class ProfileResult:
    """The outcome of one ``%%torchprof`` cell or ``with nbprof.profile() as p:`` block.

    Attributes
    ----------
    options : ProfileOptions
        The options it ran with.
    traces : list of Trace
        One loaded trace per profiling cycle (usually one).
    trace_files : list of Path
        The files the traces were loaded from (the exported Chrome traces; temporary files
        when no output was asked for).
    paths : list of Path
        Files written for the user (``trace`` / ``tensorboard`` outputs).
    activities : list of str
        The ``ProfilerActivity`` names actually profiled.
    notes : list of str
        One-line notes (device not available, file renamed, nothing recorded...).
    memory_snapshot : Path or None
        The CUDA allocator snapshot written (``memory_snapshot`` option).
    wall_ns : int or None
        Wall time of the profiled block (perf_counter, ns), export excluded.
    steps_run : int
        Profiler steps taken (``step()`` calls + 1).
    exception : BaseException or None
        What the profiled code raised, if anything (it was re-raised).
    running : bool
        True inside the ``with`` block.
    """

    def __init__(self, options: ProfileOptions | None = None) -> None:
        self.options = options if options is not None else ProfileOptions()
        self.traces: list[Trace] = []
        self.trace_files: list[Path] = []
        self.paths: list[Path] = []
        self.activities: list[str] = []
        self.notes: list[str] = []
        self.memory_snapshot: Path | None = None
        self.wall_ns: int | None = None
        self.steps_run = 0
        self.exception: BaseException | None = None
        self.running = False
        self._session: Any = None
        self._cache: dict[Any, pd.DataFrame] = {}

    # ------------------------------------------------------------------ data
    @property
    def trace(self) -> Trace:
        """The first cycle's trace (``traces`` has all of them).

        Raises
        ------
        LookupError
            When nothing was recorded (see ``notes``).
        """
        if not self.traces:
            why = "the profile is still running" if self.running else "nothing was recorded"
            msg = f"no trace: {why}" + (f" ({'; '.join(self.notes)})" if self.notes else "")
            raise LookupError(msg)
        return self.traces[0]

    def step(self) -> None:
        """End the current training step (inside the ``with`` block); see ``nbprof.step``."""
        if self._session is None:
            msg = "this result is not attached to a running profile"
            raise RuntimeError(msg)
        self._session.step()

    def operators(self, group_by: str | None = None, *, stack_depth: int = 5) -> pd.DataFrame:
        """Per-operator self/total host and device time, memory, FLOPs (all cycles summed).

        Parameters
        ----------
        group_by : {"name", "shapes", "stack"}, optional
            Default: the ``group_by`` option.
        stack_depth : int, default 5

        Returns
        -------
        pandas.DataFrame
            ``nbprof.analysis.operators.operator_summary`` columns (``name``, ``count``,
            ``self_host_ns``, ``total_host_ns``, ``self_device_ns``, ``total_device_ns``,
            ``*_mem_bytes``, ``flops``, ``avg_host_ns``, ``avg_device_ns``...), summed over cycles,
            sorted by ``total_host_ns`` descending. Empty when nothing was recorded.
        """
        gb = group_by or self.options.group_by
        if not self.traces:
            return summed_operator_summary([], gb)
        key = ("operators", gb, stack_depth)
        if key not in self._cache:
            self._cache[key] = summed_operator_summary(self.traces, gb, stack_depth)
        return self._cache[key].copy()

    def table(self, sort_by: str | None = None, row_limit: int | None = None, group_by: str | None = None) -> pd.DataFrame:
        """The operator table as shown: ``operators()`` sorted by a torch sort key, top rows.

        Parameters
        ----------
        sort_by : str, optional
            torch key (``self_cuda_time_total`` ...) or column; default the ``sort_by`` option.
        row_limit : int, optional
            Default the ``row_limit`` option; ``0`` or negative means all rows.
        group_by : str, optional

        Returns
        -------
        pandas.DataFrame
            Same columns as ``operators()``, sorted descending by the key (ties keep
            ``total_host_ns`` order), at most ``row_limit`` rows.

        Raises
        ------
        ValueError
            Unknown sort key.
        """
        col = resolve_sort_key(sort_by or self.options.sort_by)
        df = self.operators(group_by)
        if col in df.columns and len(df):
            df = df.sort_values(col, ascending=False, kind="stable", na_position="last")
        limit = self.options.row_limit if row_limit is None else row_limit
        if limit and limit > 0:
            df = df.head(limit)
        return df.reset_index(drop=True)

    def to_pandas(self) -> pd.DataFrame:
        """``operators()``: the full per-operator frame."""
        return self.operators()

    def save(self, path: str | os.PathLike[str], *, force: bool = False) -> Path:
        """Copy the (first cycle's) exported Chrome trace to ``path`` (``.json`` or ``.json.gz``).

        Raises
        ------
        FileExistsError
            When ``path`` exists and ``force`` is False.
        LookupError
            When nothing was recorded.
        """
        from ..capture._files import copy_trace

        if not self.trace_files:
            raise LookupError("nothing was recorded: no trace to save")
        dst = Path(path)
        if dst.exists() and not force:
            msg = f"{dst} exists; pass force=True to overwrite it"
            raise FileExistsError(msg)
        if not dst.name.lower().endswith((".json", ".json.gz")):
            msg = f"{dst}: a Chrome trace path must end in .json or .json.gz"
            raise ValueError(msg)
        copy_trace(self.trace_files[0], dst)
        return dst

    # ------------------------------------------------------------------ viewers (nbprof.viz registry)
    def _viz(self, names: tuple[str, ...], *args: Any, **kwargs: Any) -> Any:
        """Call the first of the ``nbprof.viz`` entry points ``names`` that exists, with the trace."""
        from ..errors import MissingDependencyError

        try:
            from .. import viz
        except ModuleNotFoundError as exc:  # bokeh / ipywidgets / jupyter_bokeh missing
            if isinstance(exc, MissingDependencyError) or (exc.name or "").startswith("nbprof"):
                raise
            from .._deps import missing

            raise missing(exc.name or "bokeh", "viz", "nbprof's viewers", exc) from exc
        return viz.call_entry(names, self.trace, *args, **kwargs)

    def dashboard(self, **kwargs: Any) -> Any:
        """``nbprof.viz.dashboard(trace)``: the tabbed viewer (overview, operators, timeline, memory)."""
        return self._viz(("dashboard",), **kwargs)

    def trace_view(self, **kwargs: Any) -> Any:
        """The timeline viewer, ``nbprof.viz.timeline(trace)``."""
        return self._viz(("trace_view", "timeline"), **kwargs)

    timeline = trace_view

    def operators_view(self, **kwargs: Any) -> Any:
        """The interactive operator table, ``nbprof.viz.operators_view(trace)``."""
        return self._viz(("operators_view",), **kwargs)

    def memory_view(self, **kwargs: Any) -> Any:
        """The memory viewer, ``nbprof.viz.memory_view(trace)``."""
        return self._viz(("memory_view",), **kwargs)

    def to_html(self, path: str | os.PathLike[str], **kwargs: Any) -> Any:
        """A standalone HTML page of the viewers, ``nbprof.viz.to_html(trace, path)``."""
        return self._viz(("to_html",), path, **kwargs)

    # ------------------------------------------------------------------ rendering (nbprof.results.render)
    def summary(self) -> str:
        """The ``text/plain`` summary: wall time, steps, top operators, files, notes."""
        from .render import renderer_for

        return renderer_for(self).summary(self)

    def __repr__(self) -> str:
        from .render import render

        return render(self, "text")

    def _repr_html_(self) -> str:
        from .render import render

        return render(self, "html")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .render import mimebundle

        return mimebundle(self)
