"""GPU Kernel view: torch-tb-profiler's Kernel view, with the Overview's per-device GPU metrics on top.

Data: :func:`nbprof.analysis.kernels.gpu_metrics` (fractions 0..1) and
:func:`nbprof.analysis.kernels.kernel_table` (int64 ns), per kernel and per kernel + launching
operator. The tables show human units through :mod:`nbprof.units`; kernel and operator
names are trace text, handed to BokehJS as data (``StringFormatter`` cells and axis factors render
text, never HTML) or escaped.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import kernels as K
from ..analysis.kernel_counters import counter_table
from ..units import fmt_bytes, fmt_flops, fmt_ns, fmt_pct
from ._base import NbprofView
from ._escape import truncate
from .theme import apply_theme, on_render, style_widgets

__all__ = ["kernel_tables", "kernels_view", "static_view", "metrics_lines", "MAX_ROWS"]

#: Rows a table ships to the browser at most (the rest is counted in "showing N of M").
MAX_ROWS = 500
_TOP = 15
_COUNTERS_ONLY = ("No kernel activity in this trace (CUPTI's range profiler records counters instead of kernel "
                  "times): the hardware counters per kernel follow.")
_NO_KERNELS = "No device kernels in this trace (CPU-only profile): the GPU Kernel view has nothing to show."


def kernel_tables(trace) -> dict:
    """``metrics`` (``kernels.gpu_metrics``), ``kernel`` and ``kernel_operator`` (``kernels.kernel_table``),
    ``counters`` (``kernel_counters.counter_table``: hardware counters per kernel and operator, empty without)."""
    return {"metrics": K.gpu_metrics(trace), "kernel": K.kernel_table(trace),
            "kernel_operator": K.kernel_table(trace, by="kernel_operator"), "counters": counter_table(trace)}


def _counter_table(df: pd.DataFrame, width: int):
    """The hardware-counter DataTable (raw numbers for sorting, ``nbprof.units`` text shown)."""
    from bokeh.models import ColumnDataSource, DataTable, StringFormatter, TableColumn

    d = df.head(MAX_ROWS)
    data: dict = {"name": d["name"].astype(str).tolist(), "operator": d["operator"].astype(str).tolist()}
    fmts = {"calls": lambda x: f"{int(x):,}", "mean_achieved_occupancy_ratio": fmt_pct,
            "mean_sm_throughput_ratio": fmt_pct, "dram_bytes": fmt_bytes, "counted_flops": fmt_flops}
    for c, f in fmts.items():
        raw = d[c].to_numpy(np.float64)
        data[c] = _num(raw)
        data[f"{c}_text"] = ["" if np.isnan(x) else f(x) for x in raw]
    cols = [TableColumn(field="name", title="Name", width=360, formatter=StringFormatter()),
            TableColumn(field="operator", title="Operator", width=200, formatter=StringFormatter()),
            _num_column("calls", "Counted calls", 60),
            _num_column("mean_achieved_occupancy_ratio", "Achieved occupancy (measured)", 90),
            _num_column("mean_sm_throughput_ratio", "SM throughput (measured)", 90),
            _num_column("dram_bytes", "DRAM bytes (measured)", 90),
            _num_column("counted_flops", "FLOPs (SASS counters)", 90)]
    return DataTable(source=ColumnDataSource(data, name="nbprof_kernel_counters_source"), columns=cols, width=width,
                     height=min(420, 30 + 26 * max(len(d), 1)), index_position=None, sortable=True,
                     name="nbprof_kernel_counters", autosize_mode="force_fit")


def _counter_items(tables: dict, width: int) -> list:
    from bokeh.models import Div

    ct = tables.get("counters")
    if ct is None or ct.empty:
        return []
    return [Div(text=_shown(ct, "Hardware counters (CUPTI range profiler) by kernel and operator").replace(
        "by total duration", "by counted FLOPs"), render_as_text=True, width=width), _counter_table(ct, width)]


def metrics_lines(metrics: pd.DataFrame) -> list[str]:
    """One sentence per device: the Overview's GPU metrics in percent (torch-tb-profiler 0.4.3's labels)."""
    out = []
    for r in metrics.itertuples(index=False):
        parts = [f"GPU {int(r.device)}: GPU utilization {fmt_pct(r.utilization_ratio)}"]
        if not np.isnan(r.est_sm_efficiency_ratio):
            parts.append(f"est. SM efficiency {fmt_pct(r.est_sm_efficiency_ratio)}")
        if not np.isnan(r.est_achieved_occupancy_ratio):
            parts.append(f"est. achieved occupancy {fmt_pct(r.est_achieved_occupancy_ratio)}")
        parts.append(f"kernel time using Tensor Cores {fmt_pct(r.tensor_core_kernel_ratio)}")
        parts.append(f"time in Tensor-Core-eligible operators {fmt_pct(r.tensor_core_eligible_ratio)}")
        out.append(", ".join(parts) + f" ({int(r.kernels)} kernels, window {fmt_ns(r.window_end_ns - r.window_start_ns)})")
    return out


def _yes(v) -> list[str]:
    return ["Yes" if bool(x) else "No" for x in v]


def _num(v, missing: float = np.nan) -> np.ndarray:
    """``v`` as float64 with NaN (and ``missing``) replaced by -1, the sort value of a blank cell (a table sorts on
    these numbers; NaN compares false both ways, which would leave such rows anywhere)."""
    x = np.asarray(v, dtype=np.float64).copy()
    x[np.isnan(x) | (x == missing)] = -1.0
    return x


def _table_data(df: pd.DataFrame, with_op: bool) -> dict:
    """The columns of a ``kernel_table`` frame for its DataTable, at most ``MAX_ROWS`` rows.

    Each numeric column is a pair: the raw number under the frame's name (``calls``, ``total_ns``, ``mean_ns``,
    ``max_ns``, ``min_ns`` in ns; ``shared_mem_bytes`` in bytes; ``registers``; ``mean_blocks_per_sm``;
    ``mean_est_achieved_occupancy_ratio`` 0..1; -1 where the trace has no value), which a header click sorts by,
    and its text in human units (``nbprof.units``) under ``<name>_text``, which the cell shows.
    """
    d = df.head(MAX_ROWS)
    data: dict = {"name": d["name"].astype(str).tolist()}
    nums: dict = {}
    if with_op:
        data["operator"] = d["operator"].astype(str).tolist()
        data["grid"] = d["grid"].astype(str).tolist()
        data["block"] = d["block"].astype(str).tolist()
        nums["registers"] = (_num(d["registers"]), [str(int(x)) if x >= 0 else "" for x in d["registers"]])
        nums["shared_mem_bytes"] = (_num(d["shared_mem_bytes"]),
                                    [fmt_bytes(x) if x >= 0 else "" for x in d["shared_mem_bytes"]])
        data["op_tc"] = _yes(d["operator_tensor_core_eligible"])
    data["tc"] = _yes(d["tensor_cores_used"])
    nums["calls"] = (d["calls"].to_numpy(np.int64), [f"{int(x):,}" for x in d["calls"]])
    for c in ("total_ns", "mean_ns", "max_ns", "min_ns"):
        nums[c] = (d[c].to_numpy(np.int64), [fmt_ns(x) for x in d[c]])
    bps = d["mean_blocks_per_sm"].to_numpy(np.float64)
    nums["mean_blocks_per_sm"] = (_num(bps), ["" if np.isnan(x) else f"{x:,.2f}" for x in bps])
    occ = d["mean_est_achieved_occupancy_ratio"].to_numpy(np.float64)
    nums["mean_est_achieved_occupancy_ratio"] = (_num(occ), [fmt_pct(x) for x in occ])
    for k, (raw, text) in nums.items():
        data[k], data[f"{k}_text"] = raw, text
    return data


def _num_column(field: str, title: str, width: int):
    """A sortable column of the raw number ``field`` showing its ``<field>_text`` twin, right-aligned (the twin is
    text made by ``nbprof.units``, escaped again by the template's ``<%- %>``)."""
    from bokeh.models import HTMLTemplateFormatter, TableColumn

    fmt = HTMLTemplateFormatter(template=f'<div style="text-align:right"><%- {field}_text %></div>')
    return TableColumn(field=field, title=title, width=width, formatter=fmt, sortable=True)


def _data_table(df: pd.DataFrame, with_op: bool, name: str, width: int):
    from bokeh.models import ColumnDataSource, DataTable, StringFormatter, TableColumn

    data = _table_data(df, with_op)
    cols = [TableColumn(field="name", title="Name", width=360, formatter=StringFormatter())]
    if with_op:
        cols += [TableColumn(field="operator", title="Operator", width=220, formatter=StringFormatter()),
                 TableColumn(field="grid", title="Grid", width=90, formatter=StringFormatter()),
                 TableColumn(field="block", title="Block", width=90, formatter=StringFormatter()),
                 _num_column("registers", "Registers / thread", 60),
                 _num_column("shared_mem_bytes", "Shared memory", 80),
                 TableColumn(field="op_tc", title="Op is Tensor Cores eligible", width=60)]
    cols += [TableColumn(field="tc", title="Tensor Cores used", width=60),
             _num_column("calls", "Calls", 60),
             _num_column("total_ns", "Total duration", 90),
             _num_column("mean_ns", "Mean duration", 90),
             _num_column("max_ns", "Max duration", 90),
             _num_column("min_ns", "Min duration", 90),
             _num_column("mean_blocks_per_sm", "Mean blocks per SM", 80),
             _num_column("mean_est_achieved_occupancy_ratio", "Mean est. achieved occupancy", 90)]
    n = len(data["name"])
    # rows start by total duration; a header click sorts by the column's raw number (ns, bytes, count)
    # the kernel + operator table is wider than the page: its columns keep their widths and it scrolls
    return DataTable(source=ColumnDataSource(data, name=f"{name}_source"), columns=cols, width=width,
                     height=min(420, 30 + 26 * max(n, 1)), index_position=None, sortable=True, name=name,
                     autosize_mode="none" if with_op else "force_fit")


def _shown(df: pd.DataFrame, what: str) -> str:
    n = len(df)
    return f"{what}: showing {min(n, MAX_ROWS)} of {n} rows, by total duration"


def _build(tables: dict, *, theme: str = "light", width: int = 1100):
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource, Div, HoverTool
    from bokeh.plotting import figure

    kt = tables["kernel"]
    if kt.empty:
        lay = column(Div(text=_NO_KERNELS if tables.get("counters") is None or tables["counters"].empty
                         else _COUNTERS_ONLY, render_as_text=True, width=width, name="nbprof_kernels_empty"),
                     *_counter_items(tables, width), name="nbprof_kernels")
        style_widgets(lay, theme)
        return lay
    items: list = [Div(text="\n".join(metrics_lines(tables["metrics"])), render_as_text=True, width=width,
                       name="nbprof_gpu_metrics")]
    top = kt.head(_TOP).iloc[::-1]
    labels = [f"{len(top) - i}. {truncate(n, 70)}" for i, n in enumerate(top["name"].astype(str))]
    total = float(kt["total_ns"].sum()) or 1.0
    src = ColumnDataSource({"label": labels, "name": top["name"].astype(str).tolist(),
                            "total_ms": top["total_ns"].to_numpy(np.float64) / 1e6,
                            "total": [fmt_ns(x) for x in top["total_ns"]],
                            "share": [fmt_pct(x / total) for x in top["total_ns"]],
                            "calls": top["calls"].astype(int).tolist(),
                            "tc": _yes(top["tensor_cores_used"])}, name="nbprof_kernels_top")
    p = figure(y_range=labels, width=width, height=40 + 22 * len(labels), title=f"Top {len(labels)} kernels by total time",
               x_axis_label="total duration (ms)", toolbar_location="right", tools="save,reset", name="nbprof_kernels_plot")
    p.hbar(y="label", right="total_ms", height=0.75, source=src, color="#54a24b")
    p.add_tools(HoverTool(tooltips=[("kernel", "@name"), ("total", "@total (@share of kernel time)"),
                                    ("calls", "@calls"), ("Tensor Cores", "@tc")]))
    p.yaxis.major_label_text_font_size = "8pt"
    items.append(p)
    items.append(Div(text=_shown(kt, "Kernels"), render_as_text=True, width=width))
    items.append(_data_table(kt, False, "nbprof_kernel_table", width))
    ko = tables["kernel_operator"]
    items.append(Div(text=_shown(ko, "Kernels by launching operator"), render_as_text=True, width=width))
    items.append(_data_table(ko, True, "nbprof_kernel_op_table", width))
    items += _counter_items(tables, width)
    apply_theme([p], "dark" if theme == "dark" else "light")
    lay = column(*items, name="nbprof_kernels")
    style_widgets(lay, theme)
    on_render(lay, [p], theme)
    return lay


def _text(tables: dict) -> str:
    kt = tables["kernel"]
    ct = tables.get("counters")
    counted = [] if ct is None or ct.empty else ["  hardware counters (CUPTI range profiler):", *(
        f"  {fmt_flops(r.counted_flops) if np.isfinite(r.counted_flops) else '':>12}  {int(r.calls):>6} counted  "
        f"{truncate(str(r.name), 70)} ({truncate(str(r.operator), 40)})" for r in ct.head(10).itertuples(index=False))]
    if kt.empty:
        return "\n".join(["nbprof GPU kernels: " + (_NO_KERNELS if not counted else _COUNTERS_ONLY), *counted])
    lines = ["nbprof GPU kernels:", *("  " + s for s in metrics_lines(tables["metrics"]))]
    for r in kt.head(10).itertuples(index=False):
        lines.append(f"  {fmt_ns(r.total_ns):>12}  {int(r.calls):>6} calls  {truncate(str(r.name), 90)}")
    return "\n".join(lines + counted)


def kernels_view(trace, *, theme: str = "auto", width: int = 1100) -> NbprofView:
    """The GPU Kernel view of ``trace`` (a widget).

    Parameters
    ----------
    trace : nbprof.Trace
    theme : {"auto", "light", "dark"}
    width : int

    Returns
    -------
    NbprofView
        The per-device GPU metrics line (``kernels.gpu_metrics``: GPU utilization, est. SM efficiency,
        est. achieved occupancy, kernel time using Tensor Cores, time in Tensor-Core-eligible
        operators), the top kernels by total time, and the tables per kernel and per kernel + operator
        (``kernels.kernel_table``). On a trace without kernels, a sentence saying so. ``view.tables``
        holds the frames.
    """
    tables = kernel_tables(trace)
    lay = _build(tables, theme=theme, width=width)
    view = NbprofView(lay, _text(tables), "kernels",
                      static_builder=lambda theme="light": _build(tables, theme=theme, width=width))
    view.tables = tables
    return view


def static_view(trace, *, theme: str = "light", width: int = 1100):
    """The GPU Kernel view as a static Bokeh layout (no widget)."""
    return _build(kernel_tables(trace), theme=theme, width=width)
