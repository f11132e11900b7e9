"""Module view (the nn.Module tree) and call-stack view (the Python call tree): expandable tree tables.

The numbers come from :func:`nbprof.analysis.modules.module_tree` (torch-tb-profiler 0.4.3's Module view)
and :func:`nbprof.analysis.modules.call_stack`; durations are formatted by ``nbprof.units``. A click
on a row opens or closes its children, and the expand/collapse buttons open or close every node; all of it is
``CustomJS``, so the static HTML page behaves as the live widget. Frame and module names come from the trace:
they reach BokehJS as data-source text (``StringFormatter`` renders text, never HTML) and are truncated. On a
trace without module / Python frames the view says how to record them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..units import fmt_ns
from ._base import NbprofView
from ._escape import truncate
from .theme import style_widgets

__all__ = ["modules_view", "call_stack_view", "static_view", "call_stack_static_view", "module_tables",
           "call_stack_tables"]

#: nodes kept in the call-stack table (depth-first, parents always kept); the status line says "showing N of M"
MAX_CALL_NODES = 5000

# Rebuild the visible rows: a node is shown when its parent is shown and open (parents come first).
# ``mode``: "toggle" (the clicked row), "expand" / "collapse" (every node), "init".
_TREE_JS = """
const d = full.data; const n = d.node_id.length;
if (mode === 'toggle') {
  const sel = shown.selected.indices;
  if (sel.length === 0) { return; }
  const node = shown.data.node_id[sel[0]];
  if (d.has_kids[node]) { d.open[node] = d.open[node] ? 0 : 1; }
} else if (mode === 'expand' || mode === 'collapse') {
  for (let i = 0; i < n; i++) { d.open[i] = mode === 'expand' ? 1 : 0; }
}
const vis = new Array(n).fill(false);
const out = {};
for (const c of Object.keys(d)) { out[c] = []; }
out.label = [];
for (let i = 0; i < n; i++) {
  const p = d.parent_id[i];
  vis[i] = p < 0 || (vis[p] && d.open[p] === 1);
  if (!vis[i]) { continue; }
  for (const c of Object.keys(d)) { out[c].push(d[c][i]); }
  const mark = d.has_kids[i] ? (d.open[i] ? '\\u25be ' : '\\u25b8 ') : '\\u2003';
  out.label.push('\\u00a0\\u00a0\\u00a0'.repeat(d.depth[i]) + mark + d.name[i]);
}
shown.data = out;
if (shown.selected.indices.length) { shown.selected.indices = []; }
status.text = base + ' \\u2014 ' + out.label.length
  + ' rows open; click a row to open or close it, the header of a number to order the open rows by it';
if (typeof document !== 'undefined') {
  document.body.dataset.nbprofTree = String(Number(document.body.dataset.nbprofTree || 0) + 1);
}
"""


def module_tables(trace: Any) -> dict[str, Any]:
    """The module view's data: ``tree`` (:func:`~nbprof.analysis.modules.module_tree`), ``hint`` (how to record
    module frames, when there are none)."""
    from ..analysis import modules

    tree = modules.module_tree(trace)
    return {"tree": tree, "hint": "" if len(tree) else f"No nn.Module frames in this trace: {modules.RECORD_HINT}."}


def call_stack_tables(trace: Any, *, max_nodes: int = MAX_CALL_NODES) -> dict[str, Any]:
    """The call-stack view's data: ``tree`` (:func:`~nbprof.analysis.modules.call_stack` cut to ``max_nodes``),
    ``total`` (nodes before the cut), ``hint`` (how to record Python frames, when there are none)."""
    from ..analysis import modules

    tree = modules.call_stack(trace, max_nodes=max_nodes)
    hint = "" if len(tree) else f"No Python frames (python_function events) in this trace: {modules.RECORD_HINT}."
    return {"tree": tree, "total": int(tree.attrs.get("total_nodes", len(tree))), "hint": hint}


def _tree_source_data(df: pd.DataFrame, open_depth: int, time_cols: tuple[str, ...]) -> dict[str, Any]:
    n = len(df)
    parent = df["parent_id"].to_numpy(np.int64)
    has_kids = np.zeros(n, dtype=np.int64)
    if n:
        has_kids[parent[parent >= 0]] = 1
    depth = df["depth"].to_numpy(np.int64)
    data: dict[str, Any] = {
        "node_id": df["node_id"].to_numpy(np.int64), "parent_id": parent, "depth": depth, "has_kids": has_kids,
        "open": (depth < open_depth).astype(np.int64),
        "name": [truncate(str(x), 200) for x in df["name"]],
        "calls": df["calls"].to_numpy(np.int64),
    }
    for c in time_cols:
        v = df[c].to_numpy(np.int64)
        data[c] = v.astype(np.float64)
        data[c.replace("_ns", "_text")] = [fmt_ns(float(x)) for x in v]
    return data


def _tree_table(df: pd.DataFrame, *, kind: str, base: str, extra_cols: list[tuple[str, str, int]],
                time_cols: tuple[tuple[str, str], ...], open_depth: int, theme: str, width: int) -> Any:
    from bokeh.layouts import column, row
    from bokeh.models import (
        Button,
        ColumnDataSource,
        CustomJS,
        DataTable,
        Div,
        HTMLTemplateFormatter,
        NumberFormatter,
        StringFormatter,
        TableColumn,
    )

    data = _tree_source_data(df, open_depth, tuple(c for c, _t in time_cols))
    for field, _title, _w in extra_cols:
        if field not in data:
            numeric = pd.api.types.is_numeric_dtype(df[field])
            data[field] = df[field].to_numpy(np.int64) if numeric else [truncate(str(x), 200) for x in df[field]]
    full = ColumnDataSource(data, name=f"nbprof_{kind}_full")
    shown = ColumnDataSource({**{k: [] for k in data}, "label": []}, name=f"nbprof_{kind}_shown")
    # the tree's order is its own (parents first): the name column does not sort; a numeric header click orders the
    # open rows by that number (ns / count), the cells showing the number's text twin (``nbprof.units``)
    cols = [TableColumn(field="label", title="name", width=380, formatter=StringFormatter(), sortable=False)]
    for field, title, w in extra_cols:
        numeric = not isinstance(data[field], list)
        fmt = NumberFormatter(format="0,0") if numeric else StringFormatter()
        cols.append(TableColumn(field=field, title=title, width=w, formatter=fmt, sortable=numeric))
    cols.append(TableColumn(field="calls", title="calls", width=60, formatter=NumberFormatter(format="0,0"),
                            sortable=True))
    for c, title in time_cols:
        twin = c.replace("_ns", "_text")
        cols.append(TableColumn(field=c, title=title, width=105, sortable=True, formatter=HTMLTemplateFormatter(
            template=f'<div style="text-align:right"><%- {twin} %></div>')))
    table = DataTable(source=shown, columns=cols, width=width, height=420, sortable=True, index_position=None,
                      autosize_mode="none", selectable=True, name=f"nbprof_{kind}_table")
    status = Div(text=base, render_as_text=True, width=width, name=f"nbprof_{kind}_status")
    args = dict(full=full, shown=shown, status=status, base=base)
    shown.selected.js_on_change("indices", CustomJS(args={**args, "mode": "toggle"}, code=_TREE_JS))
    expand = Button(label="Expand all", width=100, name=f"nbprof_{kind}_expand")
    expand.js_on_event("button_click", CustomJS(args={**args, "mode": "expand"}, code=_TREE_JS))
    collapse = Button(label="Collapse all", width=100, name=f"nbprof_{kind}_collapse")
    collapse.js_on_event("button_click", CustomJS(args={**args, "mode": "collapse"}, code=_TREE_JS))
    lay = column(row(expand, collapse), status, table, name=f"nbprof_{kind}")
    lay.js_on_event("document_ready", CustomJS(args={**args, "mode": "init"}, code=_TREE_JS))
    # server-side initial fill, so the live widget and text/plain show the open rows before any callback
    _initial_fill(data, shown)
    style_widgets(lay, theme)
    return lay


def _initial_fill(data: dict[str, Any], shown: Any) -> None:
    n = len(data["node_id"])
    vis = np.zeros(n, dtype=bool)
    keep = []
    for i in range(n):
        p = int(data["parent_id"][i])
        vis[i] = p < 0 or (bool(vis[p]) and data["open"][p] == 1)
        if vis[i]:
            keep.append(i)
    out = {k: [v[i] for i in keep] if isinstance(v, list) else np.asarray(v)[keep] for k, v in data.items()}
    out["label"] = ["\u00a0\u00a0\u00a0" * int(data["depth"][i])
                    + (("\u25be " if data["open"][i] else "\u25b8 ") if data["has_kids"][i] else "\u2003")
                    + data["name"][i] for i in keep]
    shown.data = out


def _hint_layout(hint: str, kind: str, width: int, theme: str) -> Any:
    from bokeh.layouts import column
    from bokeh.models import Div

    lay = column(Div(text=hint, render_as_text=True, width=width, name=f"nbprof_{kind}_hint"), name=f"nbprof_{kind}")
    style_widgets(lay, theme)
    return lay


_MODULE_TIMES = (("host_total_ns", "host total"), ("host_self_ns", "host self"),
                 ("device_total_ns", "device total"), ("device_self_ns", "device self"))


def _build_modules(tables: dict[str, Any], *, theme: str = "light", width: int = 1100) -> Any:
    df = tables["tree"]
    if not len(df):
        return _hint_layout(tables["hint"], "modules", width, theme)
    times = _MODULE_TIMES if int(df["device_total_ns"].sum()) else _MODULE_TIMES[:2]
    roots = df[df["parent_id"] < 0]
    base = (f"{len(df)} modules, {int(roots['calls'].sum())} top-level calls, host "
            f"{fmt_ns(float(roots['host_total_ns'].sum()))}"
            + (f", device {fmt_ns(float(roots['device_total_ns'].sum()))}" if len(times) > 2 else ", no device time")
            + " (torch-tb-profiler's Module view)")
    return _tree_table(df, kind="modules", base=base,
                       extra_cols=[("module", "module", 150), ("operators", "operators", 75)],
                       time_cols=times, open_depth=99, theme=theme, width=width)


def _build_call_stack(tables: dict[str, Any], *, theme: str = "light", width: int = 1100) -> Any:
    df = tables["tree"]
    if not len(df):
        return _hint_layout(tables["hint"], "call_stack", width, theme)
    times: tuple[tuple[str, str], ...] = (("host_total_ns", "host total"), ("host_self_ns", "host self"))
    if int(df["device_total_ns"].sum()):
        times += (("device_total_ns", "device total"),)
    clamped = int(df.attrs.get("clamped_calls", 0))
    base = (f"showing {len(df)} of {tables['total']} Python call paths"
            + (f"; {clamped} self time{'s' if clamped != 1 else ''} below zero (a child frame overruns its parent by "
               f"{fmt_ns(float(df.attrs.get('clamped_ns', 0)))} in total) shown as 0" if clamped else ""))
    return _tree_table(df, kind="call_stack", base=base, extra_cols=[], time_cols=times, open_depth=3,
                       theme=theme, width=width)


def _text(kind: str, tables: dict[str, Any]) -> str:
    df = tables["tree"]
    if not len(df):
        return f"nbprof {kind}: {tables['hint']}"
    title = "modules" if kind == "modules" else f"call stack ({len(df)} of {tables['total']} paths)"
    lines = [f"nbprof {title}:"]
    for r in df.head(15).itertuples(index=False):
        label = "  " * int(r.depth) + truncate(str(r.name), 60)
        lines.append(f"  {label:<70} x{r.calls:<5} host "
                     f"{fmt_ns(float(r.host_total_ns)):>11} self {fmt_ns(float(r.host_self_ns)):>11}")
    return "\n".join(lines)


def modules_view(trace: Any, *, theme: str = "auto", width: int = 1100) -> NbprofView:
    """The nn.Module tree of ``trace`` with calls and host/device self/total time (an ipywidgets widget).

    Values from :func:`nbprof.analysis.modules.module_tree`; a trace without ``nn.Module:`` frames gives a view
    that says how to record them (``with_modules=True``, ``%%torchprof --with-modules``).
    """
    tables = module_tables(trace)
    lay = _build_modules(tables, theme=theme, width=width)
    view = NbprofView(lay, _text("modules", tables), "modules",
                      static_builder=lambda theme="light": _build_modules(tables, theme=theme, width=width))
    view.tables = tables
    return view


def call_stack_view(trace: Any, *, theme: str = "auto", width: int = 1100) -> NbprofView:
    """The Python call tree of ``trace`` with calls and host self/total time (an ipywidgets widget).

    Values from :func:`nbprof.analysis.modules.call_stack` (self times clamped at 0; the status line says how
    many); a trace without Python frames gives a view that says how to record them.
    """
    tables = call_stack_tables(trace)
    lay = _build_call_stack(tables, theme=theme, width=width)
    view = NbprofView(lay, _text("call_stack", tables), "call_stack",
                      static_builder=lambda theme="light": _build_call_stack(tables, theme=theme, width=width))
    view.tables = tables
    return view


def static_view(trace: Any, *, theme: str = "light", width: int = 1100) -> Any:
    """The module view as a static Bokeh layout (browser-side expand/collapse; no widget)."""
    return _build_modules(module_tables(trace), theme=theme, width=width)


def call_stack_static_view(trace: Any, *, theme: str = "light", width: int = 1100) -> Any:
    """The call-stack view as a static Bokeh layout (browser-side expand/collapse; no widget)."""
    return _build_call_stack(call_stack_tables(trace), theme=theme, width=width)
