"""Critical path view and the timeline's critical-path / evidence highlight.

:func:`critical_path_view` shows :func:`nbprof.analysis.critical_path.critical_path`: a bar per
breakdown kind (``host_compute``, ``kernel_launch``, ``kernel``, ``memcpy_memset``, ``sync_wait``,
``communication``, ``dataloader``, ``idle``; ns, drawn in ms, labelled in human units by
:func:`nbprof.units.fmt_ns`) and a table of the longest events on the path (name, category,
start and duration). Every name comes from the trace: the table renders it as text and the header
escapes it.

:func:`highlight_segments` turns a set of event rows (a critical path, a finding's ``evidence_rows``)
into the rectangles the timeline draws over its own rows in a highlight colour: events on the same
row closer than a pixel are merged, so a path of 100 000 events stays a few thousand rectangles.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.critical_path import BREAKDOWN_KINDS, CriticalPath, critical_path
from ..trace import predicates as pred
from ..units import fmt_ns
from ._base import NbprofView
from ._escape import escape_html, truncate
from .theme import apply_theme, style_widgets

__all__ = ["critical_path_view", "static_view", "highlight_segments", "path_rows", "HIGHLIGHT_COLOR"]

#: Colour of highlighted (critical-path / evidence) events on the timeline.
HIGHLIGHT_COLOR = "#ff1f8e"
#: Colour of each breakdown kind's bar.
KIND_COLORS = {"host_compute": "#4c78a8", "kernel_launch": "#f58518", "kernel": "#54a24b",
               "memcpy_memset": "#9467bd", "sync_wait": "#b279a2", "communication": "#eeca3b",
               "dataloader": "#e45756", "idle": "#9d9da1"}


def path_rows(trace, cp: CriticalPath) -> np.ndarray:
    """Positional rows of ``cp``'s events without the ``ProfilerStep`` ranges (they span the whole step)."""
    rows = np.asarray(cp.row_ids, dtype=np.int64)
    if rows.size == 0:
        return rows
    step = np.asarray(pred.is_step_row(trace.events), dtype=bool)
    return rows[~step[rows]]


def highlight_segments(model: Any, rows: np.ndarray, x0_ns: float | None = None, x1_ns: float | None = None, *,
                       width_px: int = 1100, max_segments: int = 20000) -> dict[str, np.ndarray]:
    """Rectangles over the timeline rows of the events ``rows`` (positional ids into ``trace.events``).

    Parameters
    ----------
    model : nbprof.viz.timeline_lod.TimelineLayout
    rows : array of int
    x0_ns, x1_ns : float, optional
        Window (ns from the trace origin); default the model's extent.
    width_px : int
        Plot width: events on one row less than one pixel apart are merged.
    max_segments : int
        Most rectangles; the merge tolerance doubles until they fit.

    Returns
    -------
    dict of numpy arrays
        ``left``/``right`` (ms), ``y`` (row centre), ``count`` (events merged), ``dur_ns`` (their summed
        duration).
    """
    x0 = float(model.t0_ns if x0_ns is None else x0_ns)
    x1 = float(model.t1_ns if x1_ns is None else x1_ns)
    empty: dict[str, np.ndarray] = {"left": np.zeros(0), "right": np.zeros(0), "y": np.zeros(0, np.float32),
                                    "count": np.zeros(0, np.int32), "dur_ns": np.zeros(0)}
    labels = model.trace.events.index.to_numpy()[np.asarray(rows, dtype=np.int64)]
    pos = np.flatnonzero(np.isin(model.src, labels))
    if pos.size == 0:
        return empty
    ts, end, row = model.ts[pos], model.end[pos], model.row[pos]
    vis = (end > x0) & (ts < x1)
    ts, end, row = ts[vis], end[vis], row[vis]
    if ts.size == 0:
        return empty
    o = np.lexsort((ts, row))
    ts, end, row = ts[o], end[o], row[o]
    tol = max((x1 - x0) / max(int(width_px), 50), 1.0)
    prev_end = _row_cummax(end, row)[:-1]
    while True:
        # a new segment starts at a new row or where the event starts more than tol after the run so far
        new = np.ones(ts.size, bool)
        new[1:] = (row[1:] != row[:-1]) | (ts[1:] > prev_end + tol)
        if int(new.sum()) <= max_segments:
            break
        tol *= 2
    seg = np.cumsum(new) - 1
    n = int(seg[-1]) + 1
    left = np.full(n, np.iinfo(np.int64).max)
    right = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(left, seg, ts)
    np.maximum.at(right, seg, end)
    return {"left": left / 1e6, "right": np.maximum(right, left + 1) / 1e6, "y": (row[new] + 0.5).astype(np.float32),
            "count": np.bincount(seg, minlength=n).astype(np.int32),
            "dur_ns": np.bincount(seg, weights=(end - ts).astype(np.float64), minlength=n)}


def _row_cummax(end: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Running max of ``end`` restarting at each new ``row`` (rows sorted)."""
    grp = np.cumsum(np.r_[True, row[1:] != row[:-1]]) - 1
    shift = np.int64(1) << np.int64(52)
    return np.asarray(np.maximum.accumulate(end + grp * shift) - grp * shift)


def draw_highlight(p: Any, data: dict[str, np.ndarray], name: str) -> Any:
    """Add the highlight rectangles ``data`` to the timeline figure ``p``; returns their data source."""
    from bokeh.models import ColumnDataSource

    src = ColumnDataSource(data, name=name)
    p.hbar(y="y", left="left", right="right", height=0.96, source=src, fill_color=HIGHLIGHT_COLOR, fill_alpha=0.25,
           line_color=HIGHLIGHT_COLOR, line_width=1.5)
    return src


def _top_events(trace, cp: CriticalPath, top: int) -> dict[str, list[Any]]:
    ev = trace.events
    rows = path_rows(trace, cp)
    dur = ev["dur_ns"].to_numpy(np.int64)[rows]
    o = np.argsort(-dur, kind="stable")[:top]
    sel = rows[o]
    names = ev["name"].astype(object).to_numpy()[sel]
    cats = ev["cat"].astype(object).to_numpy()[sel]
    ts = ev["ts_ns"].to_numpy(np.int64)[sel]
    d = dur[o]
    length = max(cp.length_ns, 1)
    return {"row": [int(r) for r in sel], "name": [truncate(str(n), 160) for n in names],
            "cat": [str(c) for c in cats], "start_ms": [float(t) / 1e6 for t in ts],
            "dur": [fmt_ns(float(x)) for x in d], "dur_ns": [int(x) for x in d],
            "share": [float(x) / length for x in d]}


def _build(trace, cp: CriticalPath, *, theme: str, width: int, top: int) -> Any:
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource, DataTable, Div, HoverTool, NumberFormatter, StringFormatter, TableColumn
    from bokeh.plotting import figure

    bd = cp.breakdown
    kinds = list(BREAKDOWN_KINDS)
    ns = [int(bd.get(k, 0)) for k in kinds]
    length = max(cp.length_ns, 1)
    data = {"kind": kinds, "ns": ns, "ms": [v / 1e6 for v in ns], "label": [fmt_ns(v) for v in ns],
            "share": [v / length for v in ns], "color": [KIND_COLORS[k] for k in kinds]}
    src = ColumnDataSource(data, name="nbprof_cp_breakdown")
    p = figure(y_range=list(reversed(kinds)), width=int(width * 0.7), height=60 + 28 * len(kinds),
               title="Critical path by kind", x_axis_label="ms", tools="save,reset", toolbar_location="right",
               name="nbprof_cp_breakdown_plot")
    p.hbar(y="kind", right="ms", height=0.7, color="color", source=src)
    p.text(x="ms", y="kind", text="label", source=src, x_offset=4, text_baseline="middle", text_font_size="8pt")
    p.add_tools(HoverTool(tooltips=[("kind", "@kind"), ("time", "@label"), ("share", "@share{0.0%}")]))
    apply_theme([p], "dark" if theme == "dark" else "light")
    tops = _top_events(trace, cp, top)
    table = DataTable(source=ColumnDataSource(tops, name="nbprof_cp_top"), columns=[
        TableColumn(field="name", title="event", formatter=StringFormatter(), width=int(width * 0.5)),
        TableColumn(field="cat", title="category", formatter=StringFormatter()),
        TableColumn(field="start_ms", title="start (ms)", formatter=NumberFormatter(format="0,0.000")),
        TableColumn(field="dur", title="duration", formatter=StringFormatter()),
        TableColumn(field="share", title="of the path", formatter=NumberFormatter(format="0.0%"))],
        width=width, height=30 + 26 * max(1, len(tops["name"])), index_position=None, name="nbprof_cp_top_table")
    lo, hi = cp.window
    first = max(range(len(kinds)), key=lambda i: ns[i])
    head = (f"<b>Critical path</b>: {len(cp.row_ids)} events, {escape_html(fmt_ns(cp.length_ns))} "
            f"(window {escape_html(fmt_ns(lo))} .. {escape_html(fmt_ns(hi))}); largest part "
            f"<b>{escape_html(kinds[first])}</b> {escape_html(fmt_ns(ns[first]))}"
            + (f"; longest event on it: <code>{escape_html(tops['name'][0])}</code>" if tops["name"] else ""))
    lay = column(Div(text=head, width=width, name="nbprof_cp_header"), p,
                 Div(text=f"Longest {len(tops['name'])} events on the path", render_as_text=True, width=width),
                 table, name="nbprof_critical_path")
    style_widgets(lay, theme)
    return lay


def _text(cp: CriticalPath) -> str:
    parts = ", ".join(f"{k} {fmt_ns(int(v))}" for k, v in cp.breakdown.sort_values(ascending=False).items() if v > 0)
    return f"nbprof critical path: {len(cp.row_ids)} events, {fmt_ns(cp.length_ns)}: {parts}"


def critical_path_view(trace, *, theme: str = "auto", width: int = 1100, step: int | None = None, top: int = 20,
                       cp: CriticalPath | None = None) -> NbprofView:
    """The critical path of ``trace`` (or of ``ProfilerStep#step``): breakdown by kind and its longest events.

    Parameters
    ----------
    trace : nbprof.Trace
    theme : {"auto", "light", "dark"}
    width : int
    step : int, optional
        Analyse that step only (``critical_path(trace, step)``).
    top : int
        Rows of the longest-events table.
    cp : CriticalPath, optional
        A path already computed (e.g. ``model="replay"``); ``step`` is then ignored.

    Returns
    -------
    NbprofView
        ``view.critical_path`` is the :class:`~nbprof.analysis.critical_path.CriticalPath` shown.

    Raises
    ------
    ValueError
        When the trace has no event to analyse or the step is not in it.
    """
    path = cp if cp is not None else critical_path(trace, step, slack=False)
    lay = _build(trace, path, theme=theme, width=width, top=top)
    view = NbprofView(lay, _text(path), "critical_path",
                      static_builder=lambda theme="light": _build(trace, path, theme=theme, width=width, top=top))
    view.critical_path = path
    return view


def static_view(trace, *, theme: str = "light", width: int = 1100) -> Any:
    """The critical path view as a static Bokeh layout (no widget)."""
    return _build(trace, critical_path(trace, slack=False), theme=theme, width=width, top=20)
