"""``ProfileResult``: what ``%%torchprof`` and ``nbprof.profile()`` give back.

It holds the loaded nbprof :class:`~nbprof.trace.Trace` (one per profiling cycle), computes the
analyses lazily (``operator_summary`` from ``nbprof.analysis.operators``, never torch's
``key_averages()``), renders a rich table plus a ``text/plain`` summary through
``_repr_mimebundle_``, and opens the viewers of ``nbprof.viz`` when they are installed.
Display only: no profiling and no parsing happen here.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from .capture.torch_profiler import ProfileOptions
    from .trace.model import Trace

__all__ = ["ProfileResult", "resolve_sort_key", "GROUP_BY"]

#: ``group_by`` values of ``operator_summary``.
GROUP_BY = ("name", "shapes", "stack")

def _sum_columns() -> list[str]:
    from .analysis.operators import SUMMARY_COLUMNS

    return [c for c in SUMMARY_COLUMNS if c != "flops"]  # flops: summed with min_count (NaN = not recorded)


def _sort_keys() -> dict[str, str]:
    from .analysis.operators import SORT_KEYS

    return SORT_KEYS


def resolve_sort_key(key: str) -> str:
    """The ``operator_summary`` column that torch's ``sort_by`` key means.

    Parameters
    ----------
    key : str
        A ``key_averages().table(sort_by=...)`` key (``cpu_time_total``, ``self_cpu_time_total``,
        ``cuda_time_total`` and ``self_cuda_time_total`` - read as device time, as torch does -,
        ``device_time_total``, ``cpu_memory_usage``, ``count``, ``flops``...; the list is
        ``nbprof.analysis.operators.SORT_KEYS``) or an ``operator_summary`` column name.

    Returns
    -------
    str
        Column name, e.g. ``"self_device_ns"`` for ``"self_cuda_time_total"``.

    Raises
    ------
    ValueError
        For an unknown key; the message lists the known ones.
    """
    keys = _sort_keys()
    k = str(key).strip()
    if k in keys:
        return keys[k]
    if k.lower() in keys:
        return keys[k.lower()]
    columns = set(keys.values()) | set(_sum_columns()) | {"flops"}
    if k in columns:
        return k
    msg = f"unknown sort key {key!r}: expected one of {', '.join(keys)}"
    raise ValueError(msg)


def _combine(frames: list[pd.DataFrame], keys: list[str]) -> pd.DataFrame:
    """Sum per-cycle operator summaries into one (counts, times and bytes add; flops add)."""
    if len(frames) == 1:
        return frames[0]
    df = pd.concat(frames, ignore_index=True)
    for k in keys:
        df[k] = df[k].astype(object)
    agg: dict[str, Any] = {c: "sum" for c in _sum_columns() if c in df.columns}
    if "flops" in df.columns:
        agg["flops"] = lambda s: s.sum(min_count=1)
    if "cat" in df.columns:
        agg["cat"] = "first"
    out = df.groupby(keys, sort=False, dropna=False).agg(agg).reset_index()
    cnt = out["count"].where(out["count"] > 0)
    out["avg_host_ns"] = out["total_host_ns"] / cnt
    out["avg_device_ns"] = out["total_device_ns"] / cnt
    return out.sort_values("total_host_ns", ascending=False, kind="stable").reset_index(drop=True)


def _fmt_ms(ns: float) -> str:
    if ns is None or (isinstance(ns, float) and np.isnan(ns)):
        return ""
    return f"{ns / 1e6:,.3f}"


def _fmt_bytes(b: float) -> str:
    if b is None or (isinstance(b, float) and np.isnan(b)):
        return ""
    v = float(b)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024 or unit == "GiB":
            return f"{v:,.0f} {unit}" if unit == "B" else f"{v:,.2f} {unit}"
        v /= 1024
    return str(b)  # pragma: no cover


def _fmt_flops(f: float) -> str:
    if f is None or (isinstance(f, float) and np.isnan(f)):
        return ""
    v = float(f)
    for unit in ("", "K", "M", "G", "T"):
        if abs(v) < 1000 or unit == "T":
            return f"{v:,.0f}" if unit == "" else f"{v:,.2f} {unit}"
        v /= 1000
    return str(f)  # pragma: no cover


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
        if options is None:
            from .capture.torch_profiler import ProfileOptions

            options = ProfileOptions()
        self.options = options
        self.traces: list[Trace] = []
        self.trace_files: list[Path] = []
        self.paths: list[Path] = []
        self.activities: list[str] = []
        self.notes: list[str] = []
        self.memory_snapshot: Path | None = None  # CUDA allocator snapshot (memory_snapshot option)
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
        from .analysis.operators import operator_summary

        gb = group_by or self.options.group_by
        key = ("operators", gb, stack_depth)
        if key not in self._cache:
            if not self.traces:
                return pd.DataFrame(columns=["name", *_sum_columns(), "flops", "avg_host_ns", "avg_device_ns"])
            frames = [operator_summary(t, group_by=gb, stack_depth=stack_depth) for t in self.traces]
            keys = ["name"] + (["input_dims"] if gb == "shapes" else ["stack"] if gb == "stack" else [])
            self._cache[key] = _combine(frames, keys)
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
        from .capture.torch_profiler import _copy_trace

        if not self.trace_files:
            raise LookupError("nothing was recorded: no trace to save")
        dst = Path(path)
        if dst.exists() and not force:
            msg = f"{dst} exists; pass force=True to overwrite it"
            raise FileExistsError(msg)
        if not dst.name.lower().endswith((".json", ".json.gz")):
            msg = f"{dst}: a Chrome trace path must end in .json or .json.gz"
            raise ValueError(msg)
        _copy_trace(self.trace_files[0], dst)
        return dst

    # ------------------------------------------------------------------ viewers
    def _viz(self, names: tuple[str, ...], *args: Any, **kwargs: Any) -> Any:
        """Call the first of ``nbprof.viz.<name>`` that exists with the trace."""
        import types

        try:
            from . import viz
        except ImportError as exc:  # bokeh / ipywidgets missing
            from .errors import MissingDependencyError

            msg = f"nbprof's viewers need bokeh, ipywidgets and jupyter_bokeh (nbprof's own dependencies): pip install nbprof ({exc})"
            raise MissingDependencyError(msg) from exc
        for name in names:
            fn = getattr(viz, name, None)
            if isinstance(fn, types.ModuleType):  # a submodule shadowing its function
                fn = getattr(fn, name, None)
            if callable(fn):
                return fn(self.trace, *args, **kwargs)
        msg = (
            f"nbprof.viz.{names[0]} is not available in this nbprof installation; "
            "the data is in result.table(), result.operators() and result.trace"
        )
        raise NotImplementedError(msg)

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

    # ------------------------------------------------------------------ text
    def _headline(self) -> list[str]:
        lines = []
        acts = "+".join(self.activities) or "CPU"
        if self.running:
            return [f"torch.profiler ({acts}): running"]
        wall = f"{self.wall_ns / 1e6:,.1f} ms" if self.wall_ns is not None else "?"
        if self.traces:
            steps = sorted({s for t in self.traces for s in t.steps})
            nev = sum(len(t.events) for t in self.traces)
            span = sum(t.duration_ns for t in self.traces)
            srange = f"{len(steps)} recorded step(s)" + (f" (#{steps[0]}-#{steps[-1]})" if steps else "")
            cyc = f", {len(self.traces)} cycles" if len(self.traces) > 1 else ""
            lines.append(
                f"torch.profiler ({acts}): {self.steps_run} step(s) run, {srange}{cyc}; "
                f"wall {wall}, traced span {span / 1e6:,.1f} ms, {nev:,} events"
            )
        else:
            lines.append(f"torch.profiler ({acts}): {self.steps_run} step(s) run, wall {wall}; nothing recorded")
        if self.exception is not None:
            lines.append(f"the profiled code raised {type(self.exception).__name__}: {self.exception} (partial profile)")
        return lines

    def _top_line(self, n: int = 5) -> str | None:
        if not self.traces:
            return None
        col = resolve_sort_key(self.options.sort_by)
        df = self.table(row_limit=0)
        if "cat" in df.columns:  # operators only, not ProfilerStep#N annotations or python frames
            df = df[df["cat"].astype(str) == "cpu_op"]
        if col not in df.columns or not len(df):
            return None
        total = float(df[col].sum()) if col.endswith(("_ns", "_bytes")) or col == "flops" else 0.0
        parts = []
        for _, row in df.head(n).iterrows():
            v = row[col]
            if col.endswith("_ns"):
                txt = f"{_fmt_ms(v)} ms"
            elif col.endswith("_bytes"):
                txt = _fmt_bytes(v)
            elif col == "flops":
                txt = f"{_fmt_flops(v)} FLOP"
            else:
                txt = f"{v:,}"
            if total > 0 and not (isinstance(v, float) and np.isnan(v)):
                txt += f" ({100 * float(v) / total:.0f}%)"
            parts.append(f"{row['name']} {txt}")
        return f"top operators by {self.options.sort_by}: " + ", ".join(parts)

    def summary(self) -> str:
        """The ``text/plain`` summary: wall time, steps, top operators, files, notes."""
        lines = self._headline()
        top = self._top_line()
        if top:
            lines.append(top)
        for p in self.paths:
            lines.append(f"wrote {p}")
        for n in self.notes:
            lines.append(f"note: {n}")
        return "\n".join(lines)

    def _display_frame(self) -> tuple[pd.DataFrame, int]:
        """The formatted table (strings) and the total number of rows."""
        gb = self.options.group_by
        full = self.operators(gb)
        shown = self.table()
        has_dev = any(t.has_device for t in self.traces)
        mem = self.options.profile_memory or bool(full.get("host_mem_bytes", pd.Series(dtype="int64")).abs().sum())
        cols: list[tuple[str, str, Any]] = [("name", "Name", str)]
        if gb == "shapes":
            cols.append(("input_dims", "Input shapes", str))
        if gb == "stack":
            cols.append(("stack", "Stack", str))
        tot_self = float(full["self_host_ns"].sum()) or 1.0
        out = pd.DataFrame(index=shown.index)
        for c, h, f in cols:
            out[h] = shown[c].astype(str).map(f)
        out["Self host %"] = (100 * shown["self_host_ns"] / tot_self).map(lambda v: f"{v:.1f}%")
        out["Self host (ms)"] = shown["self_host_ns"].map(_fmt_ms)
        out["Total host (ms)"] = shown["total_host_ns"].map(_fmt_ms)
        out["Avg host (ms)"] = shown["avg_host_ns"].map(_fmt_ms)
        if has_dev:
            tot_dev = float(full["self_device_ns"].sum()) or 1.0
            out["Self device %"] = (100 * shown["self_device_ns"] / tot_dev).map(lambda v: f"{v:.1f}%")
            out["Self device (ms)"] = shown["self_device_ns"].map(_fmt_ms)
            out["Total device (ms)"] = shown["total_device_ns"].map(_fmt_ms)
        if mem:
            out["Host mem"] = shown["host_mem_bytes"].map(_fmt_bytes)
            out["Self host mem"] = shown["self_host_mem_bytes"].map(_fmt_bytes)
            if has_dev:
                out["Device mem"] = shown["device_mem_bytes"].map(_fmt_bytes)
                out["Self device mem"] = shown["self_device_mem_bytes"].map(_fmt_bytes)
        if self.options.with_flops or shown["flops"].notna().any():
            out["FLOPs"] = shown["flops"].map(_fmt_flops)
        out["Calls"] = shown["count"].map(lambda v: f"{int(v):,}")
        return out, len(full)

    def __repr__(self) -> str:
        text = self.summary()
        if self.traces:
            df, total = self._display_frame()
            text += "\n\n" + df.to_string(index=False, max_colwidth=60)
            if total > len(df):
                text += f"\n(showing {len(df)} of {total} rows; result.table(row_limit=0) has all)"
        return text

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<div>{esc(line)}</div>" for line in self._headline())
        top = self._top_line()
        body = [f'<div class="nbprof-summary" style="margin-bottom:0.5em"><b>{head}</b>']
        if top:
            body.append(f"<div>{esc(top)}</div>")
        for p in self.paths:
            body.append(f"<div>wrote <code>{esc(str(p))}</code></div>")
        for n in self.notes:
            body.append(f'<div style="color:#a15c00">note: {esc(n)}</div>')
        body.append("</div>")
        if self.traces:
            df, total = self._display_frame()
            # DataFrame.to_html escapes cell text (escape=True); names come from the trace
            table = df.to_html(index=False, escape=True, border=0, classes="nbprof-operators", justify="left")
            body.append(table)
            if total > len(df):
                body.append(
                    f"<div><i>showing {len(df)} of {total} rows sorted by {esc(self.options.sort_by)}; "
                    "result.table(row_limit=0) has all</i></div>"
                )
        return '<div class="nbprof-profile-result">' + "".join(body) + "</div>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": repr(self), "text/html": self._repr_html_()}
