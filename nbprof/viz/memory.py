"""Memory view: allocated/reserved curves per device, the peak with the operator active there, and the
largest allocations.

Numbers come from :mod:`nbprof.analysis.memory` (``memory_curve``, ``memory_peak``,
``largest_allocations``). Long curves are decimated for display with a per-pixel min/max
(the peak is always kept), so the browser gets at most a few thousand points per series.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..analysis import memory as mem
from ..units import fmt_bytes, fmt_ns
from ._base import NbprofView
from ._escape import truncate
from .theme import apply_theme, on_render, style_widgets

__all__ = ["memory_view", "memory_tables", "decimate_minmax"]

_DEVICE_COLORS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d"]


def decimate_minmax(x: np.ndarray, y: np.ndarray, n_bins: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Keep, per x bin, the points with the smallest and largest y (in x order); short series unchanged."""
    x = np.asarray(x)
    y = np.asarray(y)
    if len(x) <= 2 * n_bins:
        return x, y
    b = np.minimum(((x - x[0]) / max(x[-1] - x[0], 1) * n_bins).astype(np.int64), n_bins - 1)
    order = np.lexsort((y, b))
    bs = b[order]
    last = np.flatnonzero(np.r_[bs[1:] != bs[:-1], True])
    first = np.r_[0, last[:-1] + 1]
    keep = np.unique(np.r_[order[first], order[last]])
    return x[keep], y[keep]


def memory_tables(trace, *, n_largest: int = 20) -> dict:
    """The analyses this view shows: ``curve``, ``peak`` and ``largest`` DataFrames (``None`` if absent).

    Uses ``nbprof.analysis.memory``; the ``missing`` key (kept for the layout) is always empty.
    """
    out: dict = {"missing": []}
    out["curve"] = mem.memory_curve(trace)
    out["peak"] = mem.memory_peak(trace)
    out["largest"] = mem.largest_allocations(trace, n=n_largest)
    if out["curve"] is None and len(trace.memory):
        # the loaded [memory] table already carries the allocator totals after each event
        m = trace.memory
        m = m[m["total_allocated"] >= 0]
        out["curve"] = m[["ts_ns", "device", "total_allocated", "total_reserved"]].reset_index(drop=True)
    return out


def _title(col: str) -> str:
    """A column title for people: ``alloc_ts`` -> ``allocated at``, ``addr`` -> ``address``, underscores as spaces."""
    return {"alloc_ts": "allocated at", "free_ts": "freed at", "addr": "address"}.get(col, col.replace("_", " "))


def _pick(df: pd.DataFrame, names: tuple[str, ...]):
    for n in names:
        if n in df.columns:
            return n
    return None


def _build(tables: dict, *, theme: str = "light", width: int = 1100):
    from bokeh.layouts import column
    from bokeh.models import (
        ColumnDataSource,
        DataTable,
        Div,
        HoverTool,
        NumberFormatter,
        StringFormatter,
        TableColumn,
    )
    from bokeh.plotting import figure

    curve = tables["curve"]
    p = figure(width=width, height=320, title="Device memory", x_axis_label="time (ms)",
               y_axis_label="MiB", tools="xpan,xwheel_zoom,box_zoom,reset,save", active_scroll="xwheel_zoom",
               name="nbprof_mem_plot")
    notes = []
    ymax = 0.0  # MiB: the highest point drawn (curves and peak markers)
    if curve is None or curve.empty:
        notes.append("No memory events in this trace (profile with profile_memory=True).")
    else:
        for i, (dev, g) in enumerate(curve.groupby("device", sort=True)):
            g = g.sort_values("ts_ns")
            col = _DEVICE_COLORS[i % len(_DEVICE_COLORS)]
            label = "CPU" if int(dev) < 0 else f"GPU {int(dev)}"
            for series, dash in (("total_allocated", "solid"), ("total_reserved", "dashed")):
                v = g[series].to_numpy(np.float64)
                ok = v >= 0
                if not ok.any():
                    continue
                x, y = decimate_minmax(g["ts_ns"].to_numpy(np.float64)[ok] / 1e6, v[ok] / 2**20)
                ymax = max(ymax, float(np.max(y)) if len(y) else 0.0)
                src = ColumnDataSource({"x": x, "y": y}, name=f"nbprof_mem_{label}_{series}")
                p.step(x="x", y="y", source=src, mode="after", line_color=col, line_dash=dash, line_width=2,
                       legend_label=f"{label} {series.replace('total_', '')}")
        p.add_tools(HoverTool(tooltips=[("t", "@x{0.000} ms"), ("MiB", "@y{0,0.00}")], mode="vline"))
        p.legend.location = "top_left"
        p.legend.click_policy = "hide"
    peak = tables["peak"]
    peak_div_text = ""
    if peak is not None and len(peak):
        ycol = _pick(peak, ("peak_allocated_bytes", "peak_bytes", "total_allocated", "allocated_bytes"))
        tcol = _pick(peak, ("ts_ns", "peak_ts_ns", "time_ns"))
        ocol = _pick(peak, ("op", "operator", "op_name", "name", "active_op"))
        if ycol and tcol:
            src = ColumnDataSource({"x": peak[tcol].to_numpy(np.float64) / 1e6,
                                    "y": peak[ycol].to_numpy(np.float64) / 2**20,
                                    "op": [truncate(str(o), 120) for o in (peak[ocol] if ocol else [""] * len(peak))]},
                                   name="nbprof_mem_peak")
            r = p.scatter(x="x", y="y", source=src, size=12, marker="inverted_triangle", color="#d62728",
                          legend_label="peak")
            ymax = max(ymax, float(np.max(src.data["y"])))
            p.add_tools(HoverTool(renderers=[r], tooltips=[("peak", "@y{0,0.00} MiB"), ("at", "@x{0.000} ms"),
                                                           ("op", "@op")]))
            parts = []
            for row in peak.itertuples(index=False):
                d = getattr(row, "device", -1)
                parts.append(f"{'CPU' if int(d) < 0 else f'GPU {int(d)}'} peak {fmt_bytes(getattr(row, ycol))} "
                             f"at {fmt_ns(getattr(row, tcol))}" + (f" during {truncate(str(getattr(row, ocol)), 100)}"
                                                                  if ocol else ""))
            peak_div_text = "; ".join(parts)
    elif curve is not None and len(curve):
        parts = []
        for dev, g in curve.groupby("device", sort=True):
            i = int(g["total_allocated"].to_numpy().argmax())
            parts.append(f"{'CPU' if int(dev) < 0 else f'GPU {int(dev)}'} peak allocated "
                         f"{fmt_bytes(g['total_allocated'].iloc[i])} at {fmt_ns(g['ts_ns'].iloc[i])}")
        peak_div_text = "; ".join(parts)
    if tables["missing"]:
        notes.append("Not available in this build of nbprof.analysis: " + ", ".join(tables["missing"]) + ".")
    if ymax > 0:  # room above the highest point: a 12 px peak marker sits whole inside the frame
        from bokeh.models import Range1d

        p.y_range = Range1d(-0.04 * ymax, ymax * 1.15)  # and below the lowest: a CPU peak near 0 MiB
    apply_theme([p], "dark" if theme == "dark" else "light")
    if curve is None or curve.empty:  # no blank "Device memory" plot: the note says why there is none
        lay = column(Div(text=" ".join(notes), render_as_text=True, width=width, name="nbprof_mem_note"),
                     name="nbprof_memory")
        style_widgets(lay, theme)
        return lay, peak_div_text, notes
    items = [p, Div(text=peak_div_text or "no peak", render_as_text=True, width=width, name="nbprof_mem_peak_text")]
    largest = tables["largest"]
    if largest is not None and len(largest):
        data: dict[str, Any] = {}
        cols = []
        never = ~largest["freed"].to_numpy(bool) if "freed" in largest.columns else np.zeros(len(largest), bool)
        for c in largest.columns:
            v = largest[c]
            if c in ("device_type", "freed"):  # the device column says it; "never freed" is shown as the free time
                continue
            if pd.api.types.is_numeric_dtype(v):
                # placeholders (-1: no address, not freed, unknown lifetime) are NaN, shown blank / "never freed"
                x = v.to_numpy(np.float64)
                x = np.where((x == -1) & (c.endswith("_ns") or c == "addr"), np.nan, x)
                nan = "never freed" if c == "free_ts_ns" else ""
                if c.endswith("_bytes") or c == "bytes":
                    data[c] = x / 2**20
                    cols.append(TableColumn(field=c, title=_title(c.replace("_bytes", "").replace("bytes", "size"))
                                            + " (MiB)", formatter=NumberFormatter(format="0,0.000")))
                elif c.endswith("_ns"):
                    data[c] = np.where(never & (c == "free_ts_ns"), np.nan, x / 1e6)
                    cols.append(TableColumn(field=c, title=_title(c.replace("_ns", "")) + " (ms)",
                                            formatter=NumberFormatter(format="0,0.000", nan_format=nan)))
                else:
                    data[c] = x
                    cols.append(TableColumn(field=c, title=_title(c), formatter=NumberFormatter(
                        format="0" if c == "addr" else "0,0", nan_format="")))
            else:
                data[c] = ["" if x is None or (isinstance(x, float) and np.isnan(x)) else truncate(str(x), 200)
                           for x in v]
                cols.append(TableColumn(field=c, title=c, formatter=StringFormatter()))
        items.append(Div(text="Largest allocations", width=width))
        items.append(DataTable(source=ColumnDataSource(data, name="nbprof_mem_largest"), columns=cols, width=width,
                               height=min(400, 30 + 26 * len(largest)), index_position=None,
                               name="nbprof_mem_largest_table"))
    if notes:
        items.append(Div(text=" ".join(notes), render_as_text=True, width=width))
    lay = column(*items, name="nbprof_memory")
    style_widgets(lay, theme)
    on_render(lay, [p], theme)
    return lay, peak_div_text, notes


def memory_view(trace, *, n_largest: int = 20, theme: str = "auto", width: int = 1100) -> NbprofView:
    """Memory curves, peak and largest allocations of ``trace`` (an ipywidgets widget).

    Parameters
    ----------
    trace : nbprof.Trace
        Needs ``[memory]`` events (``profile_memory=True``); otherwise the view says so.
    n_largest : int
        Rows of the largest-allocations table.
    theme : {"auto", "light", "dark"}
    width : int

    Returns
    -------
    NbprofView
        Allocated (solid) and reserved (dashed) MiB per device over time, a marker at each device's
        peak with the operator active there (hover), and the largest allocations table.
    """
    tables = memory_tables(trace, n_largest=n_largest)
    lay, peak_text, notes = _build(tables, theme=theme, width=width)
    n = 0 if tables["curve"] is None else len(tables["curve"])
    text = f"nbprof memory: {n} allocator samples. {peak_text or 'no peak'}" + (" " + " ".join(notes) if notes else "")
    view = NbprofView(lay, text, "memory",
                      static_builder=lambda theme="light": _build(tables, theme=theme, width=width)[0])
    view.tables = tables
    return view


def static_view(trace, *, theme: str = "light", width: int = 1100):
    """The memory view as a static Bokeh layout (no widget)."""
    return _build(memory_tables(trace), theme=theme, width=width)[0]
