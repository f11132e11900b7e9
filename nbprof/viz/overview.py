"""Overview view: per-step stacked time breakdown, its average, GPU utilisation and advisor findings.

The numbers come from :mod:`nbprof.analysis` (``steps.step_breakdown`` /
``steps.breakdown_average`` with torch-tb-profiler's Overview categories; every step is drawn, the average is
over the steady-state steps, ``steps.steady_breakdown``: the page's one step time, the verdict's),
``utilization.gpu_utilization`` and ``advisor.advise``). Findings' titles and evidence are trace-derived
text: they are escaped before they become HTML.
"""

from __future__ import annotations

import numpy as np

from ..analysis import advisor, steps, utilization
from ..results.table import evidence_items
from ..units import fmt_ns, fmt_pct_text
from ._base import NbprofView
from ._escape import escape_html, truncate
from .theme import apply_theme, on_render, style_widgets

__all__ = ["overview_view", "overview_tables", "BREAKDOWN_COLUMNS"]

#: The step-breakdown categories drawn, in stacking order, with their colours.
BREAKDOWN_COLUMNS = {
    "kernel_ns": ("Kernel", "#54a24b"),
    "memcpy_ns": ("Memcpy", "#9467bd"),
    "memset_ns": ("Memset", "#d67195"),
    "communication_ns": ("Communication", "#eeca3b"),
    "runtime_ns": ("Runtime", "#f58518"),
    "dataloader_ns": ("DataLoader", "#e45756"),
    "cpu_exec_ns": ("CPU Exec", "#4c78a8"),
    "other_ns": ("Other", "#9d9da1"),
}
_SEVERITY_COLORS = {"high": "#d62728", "critical": "#d62728", "medium": "#f58518", "warning": "#f58518",
                    "low": "#4c78a8", "info": "#4c78a8"}


def overview_tables(trace) -> dict:
    """``steps`` (every step), ``average`` (over the steady-state steps: ``steps.steady_breakdown``, the steps and
    step time of the verdict and the findings' savings), ``averaged`` (how many steps that is), ``left_out`` (the
    step numbers left out as warm-up), ``utilization`` and ``findings`` from the analyses.

    The ``missing`` key (kept for the layout) is always empty: the analyses are part of nbprof.
    """
    out: dict = {"missing": []}
    out["steps"] = steps.step_breakdown(trace)
    steady = steps.steady_state(trace)
    out["average"] = steps.breakdown_average(steps.steady_breakdown(trace))
    out["averaged"] = int((~steady["skipped"]).sum())
    out["left_out"] = [int(x) for x in steady.loc[steady["skipped"], "step"]]
    out["utilization"] = utilization.gpu_utilization(trace)
    out["findings"] = advisor.advise(trace)
    return out


def _finding_html(f) -> str:
    get = (lambda k, d=None: f.get(k, d)) if isinstance(f, dict) else (lambda k, d=None: getattr(f, k, d))
    sev = str(get("severity", "info"))
    color = _SEVERITY_COLORS.get(sev.lower(), "#4c78a8")
    ev = get("evidence", {}) or {}
    items = "".join(f"<li>{escape_html(k)}: {escape_html(truncate(v, 200))}</li>" for k, v in evidence_items(ev)[:8])
    where = get("where", "")
    nxt = get("next_step", "")
    return (f'<div class="nbprof-finding" style="border-left:4px solid {color};padding:2px 8px;margin:4px 0">'
            f"<b>{escape_html(get('title', ''))}</b> "
            f'<span style="color:{color}">[{escape_html(sev)}]</span> <small>{escape_html(get("rule", ""))}</small>'
            + (f"<div><small>where: {escape_html(truncate(str(where), 200))}</small></div>" if where else "")
            + (f"<ul style='margin:2px 0'>{items}</ul>" if items else "")
            + (f"<div>next: {escape_html(nxt)}</div>" if nxt else "") + "</div>")


def _build(tables: dict, *, theme: str = "light", width: int = 1100):
    from bokeh.layouts import column, row
    from bokeh.models import ColumnDataSource, DataTable, Div, HoverTool, NumberFormatter, TableColumn
    from bokeh.plotting import figure

    items = []
    plots = []
    steps = tables["steps"]
    if steps is not None and len(steps):
        cols = [c for c in BREAKDOWN_COLUMNS if c in steps.columns]
        x = [str(int(s)) for s in steps["step"]]
        data = {"step": x}
        for c in cols:
            data[c] = steps[c].to_numpy(np.float64) / 1e6
        data["step_ms"] = steps["step_ns"].to_numpy(np.float64) / 1e6
        src = ColumnDataSource(data, name="nbprof_steps")
        p = figure(x_range=x, width=int(width * 0.62), height=320, title="Step time breakdown",
                   x_axis_label="step", y_axis_label="ms", toolbar_location="right", tools="save,reset",
                   name="nbprof_steps_plot")
        rs = p.vbar_stack(cols, x="step", width=0.8, source=src, color=[BREAKDOWN_COLUMNS[c][1] for c in cols],
                          legend_label=[BREAKDOWN_COLUMNS[c][0] for c in cols])
        for r, c in zip(rs, cols):
            p.add_tools(HoverTool(renderers=[r], tooltips=[("step", "@step"), (BREAKDOWN_COLUMNS[c][0], f"@{c}{{0.000}} ms"),
                                                           ("step time", "@step_ms{0.000} ms")]))
        p.legend.location = "top_left"
        p.legend.label_text_font_size = "8pt"
        p.add_layout(p.legend[0], "right")
        plots.append(p)
        avg = tables["average"]
        total = float(avg.get("step_ns", 0.0)) or float(sum(avg.get(c, 0.0) for c in cols)) or 1.0
        ad = {"category": [BREAKDOWN_COLUMNS[c][0] for c in cols],
              "ms": [float(avg.get(c, 0.0)) / 1e6 for c in cols],
              "ratio": [float(avg.get(c, 0.0)) / total for c in cols]}
        table = DataTable(source=ColumnDataSource(ad, name="nbprof_steps_avg"),
                          columns=[TableColumn(field="category", title="category"),
                                   TableColumn(field="ms", title="avg per step (ms)", formatter=NumberFormatter(format="0,0.000")),
                                   TableColumn(field="ratio", title="%", formatter=NumberFormatter(format="0.0%"))],
                          width=int(width * 0.36), height=30 + 26 * len(cols), index_position=None,
                          name="nbprof_steps_avg_table")
        left = tables.get("left_out") or []
        n = tables.get("averaged", len(steps))
        what = (f"Average step {fmt_ns(total)} over {n} steady steps (warm-up left out: step"
                f"{'s' if len(left) > 1 else ''} {', '.join(str(x) for x in left)})" if left
                else f"Average step {fmt_ns(total)} over {n} steps")
        items.append(row(p, column(Div(text=what, render_as_text=True), table)))
    else:
        items.append(Div(text="No host events in this trace: no per-step breakdown.", render_as_text=True))
    util = tables["utilization"]
    if util is not None and len(util):
        ud = {"device": [str(int(d)) for d in util["device"]],
              "busy_ms": util["busy_ns"].to_numpy(np.float64) / 1e6,
              "span_ms": util["span_ns"].to_numpy(np.float64) / 1e6,
              "ratio": util["utilization_ratio"].to_numpy(np.float64)}
        items.append(Div(text="GPU utilisation (busy time / span)", width=width))
        items.append(DataTable(source=ColumnDataSource(ud, name="nbprof_util"),
                               columns=[TableColumn(field="device", title="device"),
                                        TableColumn(field="busy_ms", title="busy (ms)", formatter=NumberFormatter(format="0,0.000")),
                                        TableColumn(field="span_ms", title="span (ms)", formatter=NumberFormatter(format="0,0.000")),
                                        TableColumn(field="ratio", title="utilisation", formatter=NumberFormatter(format="0.0%"))],
                               width=int(width * 0.6), height=30 + 26 * len(util), index_position=None,
                               name="nbprof_util_table"))
    findings = tables["findings"]
    if findings is not None:
        if len(findings):
            items.append(Div(text="<b>Findings</b>" + "".join(_finding_html(f) for f in findings[:20]), width=width,
                             name="nbprof_findings"))
        else:
            items.append(Div(text="Advisor: no findings.", render_as_text=True))
    if tables["missing"]:
        items.append(Div(text="Not available in this build of nbprof.analysis: " + ", ".join(tables["missing"]) + ".",
                         render_as_text=True, width=width))
    apply_theme(plots, "dark" if theme == "dark" else "light")
    lay = column(*items, name="nbprof_overview")
    style_widgets(lay, theme)
    on_render(lay, plots, theme)
    return lay


def _text(tables) -> str:
    lines = ["nbprof overview:"]
    steps = tables["steps"]
    if steps is not None and len(steps):
        avg = tables["average"]
        total = float(avg.get("step_ns", 0.0)) or 1.0
        parts = [f"{BREAKDOWN_COLUMNS[c][0]} {fmt_pct_text(float(avg.get(c, 0)) / total)}" for c in BREAKDOWN_COLUMNS if c in avg]
        n = tables.get("averaged", len(steps))
        lines.append(f"  {len(steps)} steps, average {fmt_ns(total)}"
                     + (f" over the {n} steady ones" if n != len(steps) else "") + ": " + ", ".join(parts))
    else:
        lines.append("  no host events: no steps")
    util = tables["utilization"]
    if util is not None:
        for r in util.itertuples(index=False):
            lines.append(f"  GPU {int(r.device)} utilisation {fmt_pct_text(r.utilization_ratio, 1)}")
    findings = tables["findings"]
    if findings:
        for f in findings[:10]:
            t = f.get("title") if isinstance(f, dict) else getattr(f, "title", "")
            s = f.get("severity") if isinstance(f, dict) else getattr(f, "severity", "")
            lines.append(f"  [{s}] {t}")
    if tables["missing"]:
        lines.append("  not available: " + ", ".join(tables["missing"]))
    return "\n".join(lines)


def overview_view(trace, *, theme: str = "auto", width: int = 1100) -> NbprofView:
    """Overview of ``trace``: step breakdown, averages, GPU utilisation, advisor findings (a widget).

    Parameters
    ----------
    trace : nbprof.Trace
    theme : {"auto", "light", "dark"}
    width : int

    Returns
    -------
    NbprofView
        A stacked bar per ``ProfilerStep`` (Kernel, Memcpy, Memset, Communication, Runtime, DataLoader,
        CPU Exec, Other; torch-tb-profiler's Overview categories via ``steps.step_breakdown``), the
        per-step average table, ``utilization.gpu_utilization`` and ``advisor.advise`` findings with their
        evidence. Analyses not present in this build are named in the view.
    """
    tables = overview_tables(trace)
    lay = _build(tables, theme=theme, width=width)
    view = NbprofView(lay, _text(tables), "overview",
                      static_builder=lambda theme="light": _build(tables, theme=theme, width=width))
    view.tables = tables
    return view


def static_view(trace, *, theme: str = "light", width: int = 1100):
    """The overview as a static Bokeh layout (no widget)."""
    return _build(overview_tables(trace), theme=theme, width=width)
