"""Operators view: a sortable, filterable table of ``operator_summary`` with a top-N bar chart.

The numbers come from :func:`nbprof.analysis.operators.operator_summary` (torch-tb-profiler's
Operator page / ``key_averages`` semantics). The view only displays them: the three groupings
(``name``, ``shapes``, ``stack``) are computed once in Python, and switching, filtering, the
top-N chart and the CSV/copy buttons all run in the browser, so the static HTML export behaves
the same as the live widget.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..units import fmt_ns
from ._base import NbprofView
from ._escape import truncate
from .theme import apply_theme, on_render, style_widgets

__all__ = ["operators_view", "operator_tables"]

_GROUPINGS = ("name", "shapes", "stack")
_TIME_COLS = ("self_host_ns", "total_host_ns", "self_device_ns", "total_device_ns")
_SORTS = {
    "total_host_ns": "total host time (µs)",
    "self_host_ns": "self host time (µs)",
    "total_device_ns": "total device time (µs)",
    "self_device_ns": "self device time (µs)",
    "count": "count",
    "device_mem_bytes": "device memory (MiB)",
    "host_mem_bytes": "host memory (MiB)",
}
#: step wrappers (``ProfilerStep#N``, torch's merged ``ProfilerStep*``) hold the whole step: left out of the chart
_CHART_SKIP = "ProfilerStep"


def operator_tables(trace, *, max_rows: int = 500, stack_depth: int = 5) -> dict[str, tuple[pd.DataFrame, int]]:
    """``operator_summary`` for each grouping, cut to ``max_rows`` rows.

    Returns
    -------
    dict
        grouping -> (DataFrame, total number of groups before the cut), without ``python_function`` rows
        (those are the ``call_stack`` view's; the stack grouping still reads its frames). A grouping whose analysis
        raises a ``ValueError`` (e.g. no call stacks recorded) is left out.
    """
    from ..analysis.operators import operator_summary

    out = {}
    for g in _GROUPINGS:
        try:
            # host operators only: Python frames (with_stack) are the call-stack view's, not this table's (issue 20)
            df = operator_summary(trace, group_by=g, stack_depth=stack_depth, python_functions=False)
        except ValueError:
            continue
        if g == "shapes" and "input_dims" in df and df["input_dims"].astype(str).isin(["", "[]", "nan"]).all():
            continue
        if g == "stack" and "stack" in df and df["stack"].astype(str).isin(["", "nan"]).all():
            continue
        out[g] = (df.head(max_rows).reset_index(drop=True), len(df))
    return out


def _columns(df: pd.DataFrame, grouping: str) -> dict[str, list | np.ndarray]:
    key = {"name": None, "shapes": "input_dims", "stack": "stack"}[grouping]
    n = len(df)
    total_host = float(df["self_host_ns"].clip(lower=0).sum()) or 1.0
    total_dev = float(df["self_device_ns"].clip(lower=0).sum()) or 1.0
    data: dict[str, list | np.ndarray] = {
        "name": [truncate(str(x), 300) for x in df["name"]],
        "key": [truncate(str(x), 300) if key and x == x else "" for x in (df[key] if key else [""] * n)],
        "cat": [str(x) for x in df["cat"]] if "cat" in df else [""] * n,
        "count": df["count"].to_numpy(np.int64),
    }
    for c in _TIME_COLS:
        data[c.replace("_ns", "_us")] = df[c].to_numpy(np.float64) / 1e3
    data["self_host_ratio"] = df["self_host_ns"].to_numpy(np.float64) / total_host
    data["self_device_ratio"] = df["self_device_ns"].to_numpy(np.float64) / total_dev
    for c in ("host_mem_bytes", "device_mem_bytes"):
        data[c] = df[c].to_numpy(np.float64) / 2**20 if c in df else np.zeros(n)
    data["flops"] = df["flops"].to_numpy(np.float64) if "flops" in df else np.full(n, np.nan)
    return data


_FILTER_JS = """
const g = grouping.value;
const full = fulls[g];
const q = (filter.value_input || filter.value || '').toLowerCase();
const key = sortkey.value;
const d = full.data; const n = d.name.length;
let idx = [];
for (let i = 0; i < n; i++) {
  if (q === '' || String(d.name[i]).toLowerCase().includes(q) || String(d.key[i]).toLowerCase().includes(q)) idx.push(i);
}
idx.sort((a, b) => (d[key][b] || 0) - (d[key][a] || 0));
const out = {};
for (const c of Object.keys(d)) { out[c] = idx.map((i) => d[c][i]); }
shown.data = out;
const cidx = idx.filter((i) => !String(d.name[i]).startsWith(skip));
const k = Math.min(topn, cidx.length);
const labels = []; const vals = [];
for (let j = 0; j < k; j++) {
  const i = cidx[j];
  let lab = String(d.name[i]); if (d.key[i]) lab += ' ' + String(d.key[i]);
  if (lab.length > 60) lab = lab.slice(0, 59) + '\\u2026';
  labels.push((j + 1) + '. ' + lab); vals.push(d[key][i] || 0);
}
bars.data = {label: labels, value: vals};
chart.y_range.factors = labels.slice().reverse();
if (chart.below.length > 0) { chart.below[0].axis_label = labels_map[key]; }
keycol.title = g === 'name' ? '' : (g === 'shapes' ? 'input dims' : 'stack');
keycol.visible = g !== 'name';
status.text = 'showing ' + idx.length + ' of ' + totals[g] + ' ' + g + ' groups' + (q ? ' matching "' + q + '"' : '');
"""

_CSV_JS = """
const d = shown.data; const cols = Object.keys(d);
const esc = (v) => { const s = (v === null || v === undefined) ? '' : String(v);
  return /[",\\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s; };
const lines = [cols.join(',')];
for (let i = 0; i < d[cols[0]].length; i++) { lines.push(cols.map((c) => esc(d[c][i])).join(',')); }
const text = lines.join('\\n');
if (mode === 'copy') {
  if (navigator.clipboard) { navigator.clipboard.writeText(text); }
} else {
  const blob = new Blob([text], {type: 'text/csv;charset=utf-8;'});
  const a = document.createElement('a'); a.href = URL.createObjectURL(blob);
  a.download = 'nbprof_operators.csv'; document.body.appendChild(a); a.click(); a.remove();
}
"""


def _build(tables: dict, *, theme: str = "light", width: int = 1100, top_n: int = 15):
    from bokeh.layouts import column, row
    from bokeh.models import (
        Button,
        ColumnDataSource,
        CustomJS,
        DataTable,
        Div,
        NumberFormatter,
        Select,
        StringFormatter,
        TableColumn,
        TextInput,
    )
    from bokeh.plotting import figure

    if not tables:
        raise ValueError("no operator groups in this trace (no cpu_op events?)")
    groupings = list(tables)
    fulls = {g: ColumnDataSource(_columns(df, g), name=f"nbprof_ops_{g}") for g, (df, _n) in tables.items()}
    totals = {g: int(n) for g, (_df, n) in tables.items()}
    first = fulls[groupings[0]].data
    shown = ColumnDataSource({k: list(v) for k, v in first.items()}, name="nbprof_ops_shown")
    us = NumberFormatter(format="0,0.0")
    pct = NumberFormatter(format="0.0%")
    mib = NumberFormatter(format="0,0.00")
    cols = [
        TableColumn(field="name", title="name", width=340, formatter=StringFormatter()),
        TableColumn(field="key", title="input dims", width=200, formatter=StringFormatter(), visible=False),
        TableColumn(field="cat", title="category", width=110, formatter=StringFormatter()),
        TableColumn(field="count", title="count", width=60, formatter=NumberFormatter(format="0,0")),
        TableColumn(field="self_host_us", title="self host (us)", formatter=us),
        TableColumn(field="total_host_us", title="total host (us)", formatter=us),
        TableColumn(field="self_host_ratio", title="self host %", width=80, formatter=pct),
        TableColumn(field="self_device_us", title="self device (us)", formatter=us),
        TableColumn(field="total_device_us", title="total device (us)", formatter=us),
        TableColumn(field="self_device_ratio", title="self device %", width=90, formatter=pct),
        TableColumn(field="host_mem_bytes", title="host mem (MiB)", formatter=mib),
        TableColumn(field="device_mem_bytes", title="device mem (MiB)", formatter=mib),
        TableColumn(field="flops", title="FLOPs", formatter=NumberFormatter(format="0.00a")),
    ]
    for c in cols[3:]:
        c.width = c.width if c.field in ("count", "self_host_ratio", "self_device_ratio") else 105
    table = DataTable(source=shown, columns=cols, width=width, height=360, sortable=True, index_position=None,
                      autosize_mode="none", name="nbprof_ops_table")
    grouping = Select(title="group by", value=groupings[0], options=groupings, width=120)
    filt = TextInput(title="filter", placeholder="name or shape contains...", width=260)
    sort_opts = [(k.replace("_ns", "_us"), v) for k, v in _SORTS.items()]
    sortkey = Select(title="top-N by", value="total_host_us", options=sort_opts, width=170)
    labels_map = {k: v for k, v in sort_opts}
    bars = ColumnDataSource({"label": [], "value": []}, name="nbprof_ops_bars")
    chart = figure(y_range=[], width=width, height=28 + 18 * top_n, title=f"Top {top_n} operators",
                   toolbar_location=None, x_axis_label=_SORTS["total_host_ns"], name="nbprof_ops_chart")
    chart.hbar(y="label", right="value", height=0.7, source=bars, color="#4c78a8")
    chart.yaxis.major_label_text_font_size = "8pt"
    chart.ygrid.grid_line_color = None
    apply_theme([chart], "dark" if theme == "dark" else "light")
    status = Div(text="", render_as_text=True, width=width, name="nbprof_ops_status")
    cb = CustomJS(args=dict(grouping=grouping, fulls=fulls, filter=filt, sortkey=sortkey, shown=shown,
                            bars=bars, chart=chart, topn=top_n, labels_map=labels_map, keycol=cols[1],
                            status=status, totals=totals, skip=_CHART_SKIP), code=_FILTER_JS)
    grouping.js_on_change("value", cb)
    filt.js_on_change("value_input", cb)
    filt.js_on_change("value", cb)
    sortkey.js_on_change("value", cb)
    csv = Button(label="CSV", width=60)
    csv.js_on_event("button_click", CustomJS(args=dict(shown=shown, mode="csv"), code=_CSV_JS))
    copy = Button(label="Copy", width=60)
    copy.js_on_event("button_click", CustomJS(args=dict(shown=shown, mode="copy"), code=_CSV_JS))
    lay = column(row(grouping, filt, sortkey, csv, copy), status, chart, table, name="nbprof_operators")
    style_widgets(lay, theme)
    # fill the chart and status once laid out (and on document ready in static pages)
    chart.js_on_change("inner_width", cb)
    lay.js_on_event("document_ready", cb)
    on_render(lay, [chart], theme)
    # server-side initial fill too, so text/plain and tests see the same rows
    _initial_fill(tables[groupings[0]][0], bars, chart, status, totals[groupings[0]], groupings[0], top_n)
    return lay


def _initial_fill(df, bars, chart, status, total, grouping, top_n):
    chartable = df[~df["name"].astype(str).str.startswith(_CHART_SKIP)]
    top = chartable.sort_values("total_host_ns", ascending=False).head(top_n)
    labels = [f"{i + 1}. {truncate(str(n), 60)}" for i, n in enumerate(top["name"])]
    bars.data = {"label": labels, "value": list(top["total_host_ns"].to_numpy(np.float64) / 1e3)}
    chart.y_range.factors = labels[::-1]
    chart.xaxis.axis_label = _SORTS["total_host_ns"]
    status.text = f"showing {len(df)} of {total} {grouping} groups"


def _text(tables) -> str:
    g = next(iter(tables))
    df, n = tables[g]
    top = df.sort_values("total_host_ns", ascending=False).head(10)
    lines = [f"nbprof operators ({n} {g} groups; top 10 by total host time):"]
    for r in top.itertuples(index=False):
        lines.append(f"  {truncate(str(r.name), 60):<60} x{r.count:<6} total host {fmt_ns(r.total_host_ns):>12}"
                     f"  self host {fmt_ns(r.self_host_ns):>12}  self device {fmt_ns(r.self_device_ns):>12}")
    return "\n".join(lines)


def operators_view(trace, *, max_rows: int = 500, top_n: int = 15, theme: str = "auto", width: int = 1100,
                   stack_depth: int = 5) -> NbprofView:
    """Operators table and top-N chart for ``trace`` (an ipywidgets widget).

    Parameters
    ----------
    trace : nbprof.Trace
    max_rows : int
        Rows kept per grouping (the status line says "showing N of M").
    top_n : int
        Bars in the chart.
    theme : {"auto", "light", "dark"}
    width : int
    stack_depth : int
        Frames per key for ``group_by="stack"``.

    Returns
    -------
    NbprofView
        Group-by switch (name / shapes / stack), name filter, sort key, sortable columns (host/device
        self/total in us, counts, %), CSV download and copy buttons. Values from
        ``nbprof.analysis.operators.operator_summary``.

    Raises
    ------
    ValueError
        When the trace has no operators.
    """
    tables = operator_tables(trace, max_rows=max_rows, stack_depth=stack_depth)
    lay = _build(tables, theme=theme, width=width, top_n=top_n)
    view = NbprofView(lay, _text(tables), "operators",
                      static_builder=lambda theme="light": _build(tables, theme=theme, width=width, top_n=top_n))
    view.tables = tables
    return view


def static_view(trace, *, theme: str = "light", width: int = 1100):
    """The operators view as a static Bokeh layout (browser-side grouping, filter and CSV; no widget)."""
    return _build(operator_tables(trace), theme=theme, width=width)
