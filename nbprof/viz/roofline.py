"""Roofline view: operators (or kernels) as points of arithmetic intensity x achieved TFLOP/s.

The numbers come from :func:`nbprof.analysis.efficiency.operator_efficiency` /
:func:`~nbprof.analysis.efficiency.kernel_efficiency`; the device's roofs (one per precision the
points use: ``min(peak, intensity x bandwidth)``) from :func:`nbprof.analysis.efficiency.peaks`.
Points are sized by their share of time and coloured by kind (GEMM, convolution, attention,
elementwise, ...). Hover shows name, shapes, time, achieved rate and the share of the roof. Trace
strings go to BokehJS as data-source text (rendered as text, never as HTML) and are truncated.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..units import fmt_ns, fmt_pct_text
from ._base import NbprofView
from ._escape import truncate
from .theme import apply_theme, on_render, style_widgets

__all__ = ["roofline_view", "roofline_tables", "static_view"]

_KIND_COLORS = {
    "gemm": "#1f77b4", "conv": "#ff7f0e", "attention": "#9467bd", "elementwise": "#2ca02c",
    "reduction": "#8c564b", "norm": "#e377c2", "softmax": "#17becf", "embedding": "#7f7f7f",
    "optimizer": "#bcbd22",
}
_PEAK_LABEL = {"fp64": "FP64", "fp64_tensor": "FP64 Tensor", "fp32": "FP32", "fp32_tensor": "FP32 matrix", "tf32": "TF32 Tensor",
               "bf16": "BF16 Tensor", "fp16": "FP16 Tensor", "fp8": "FP8 Tensor"}


def roofline_tables(trace: Any, *, level: str = "auto", max_points: int = 400) -> dict[str, Any]:
    """The points and roofs of the view.

    Parameters
    ----------
    level : {"auto", "operators", "kernels"}
        ``auto``: kernels on a trace with kernels, else operators.
    max_points : int
        The longest rows kept (a visible "showing N of M" says so).

    Returns
    -------
    dict
        ``points`` (efficiency frame rows with a finite intensity and rate), ``total`` (rows before
        the cut), ``level``, ``peaks`` (:class:`~nbprof.analysis.efficiency.Peaks`).
    """
    from ..analysis import efficiency as eff

    pk = eff.peaks(trace)
    if level == "auto":
        level = "kernels" if trace.has_device and len(eff.kernel_work(trace)) else "operators"
    if level == "kernels":
        df = eff.kernel_efficiency(trace, peaks_=pk).rename(columns={"total_ns": "time_ns"})
    else:
        df = eff.operator_efficiency(trace, peaks_=pk)
        df = df[df["flops"] > 0]
        # the outermost modelled ops only, so a linear and its addmm are not both drawn
        w = eff.op_work(trace)
        outer = set(zip(w.loc[w["counted"], "name"], w.loc[w["counted"], "input_dims"], strict=True))
        keep = np.array([(n, d) in outer for n, d in zip(df["name"], df["input_dims"], strict=True)], dtype=bool)
        df = df[keep]
    ok = (df["flops"] > 0) & np.isfinite(df["arithmetic_intensity"]) & (df["time_ns"] > 0)
    df = df[ok].sort_values("time_ns", ascending=False, kind="stable")
    return {"points": df.head(max_points).reset_index(drop=True), "total": int(len(df)), "level": level,
            "peaks": pk}


def _build(tables: dict[str, Any], *, theme: str = "light", width: int = 1100) -> Any:
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource, Div, HoverTool
    from bokeh.plotting import figure

    df: pd.DataFrame = tables["points"]
    pk = tables["peaks"]
    n = len(df)
    shapes = df["input_dims"] if "input_dims" in df else pd.Series([""] * n)
    t = df["time_ns"].to_numpy(np.float64) if n else np.zeros(0)
    share = t / t.sum() if n and t.sum() > 0 else np.zeros(n)
    data = {
        "ai": df["arithmetic_intensity"].to_numpy(np.float64),
        "tflops": np.maximum(df["achieved_tflops_per_s"].to_numpy(np.float64), 1e-9),
        "size": 6 + 40 * np.sqrt(share),
        "color": [_KIND_COLORS.get(str(k), "#444444") for k in df["kind"]],
        "name": [truncate(str(x), 120) for x in df["name"]],
        "shapes": [truncate(str(x), 160) if x == x else "" for x in shapes],
        "kind": [str(k) for k in df["kind"]],
        "time": [fmt_ns(x) for x in t],
        "share": share,
        "ratio": df["peak_ratio"].to_numpy(np.float64),
        "bound": [str(b) if b is not None else "unknown" for b in df["bound"]],
        "gbs": df["achieved_gb_per_s"].to_numpy(np.float64),
        "above": ["yes: model or peak wrong" if f else "no" for f in (df["above_roof"] if "above_roof" in df else [False] * n)],
    }
    src = ColumnDataSource(data, name="nbprof_roofline_points")
    p = figure(width=width, height=480, x_axis_type="log", y_axis_type="log",
               x_axis_label="arithmetic intensity (FLOP/byte)", y_axis_label="achieved TFLOP/s",
               title=f"Roofline: {tables['level']} on {pk.device}", tools="pan,wheel_zoom,box_zoom,reset,save")
    notes = []
    if n:
        lo = max(min(float(np.nanmin(data["ai"])) / 4, 1e-2), 1e-4)
        hi = max(float(np.nanmax(data["ai"])) * 4, 1e3)
    else:
        lo, hi = 1e-2, 1e3
    if pk.known:
        xs = np.logspace(np.log10(lo), np.log10(hi), 200)
        used = sorted({(str(d), str(k) in ("gemm", "conv", "attention")) for d, k in zip(df["dtype"], df["kind"],
                                                                                         strict=True)})
        cols = sorted({(f"{d}_tensor" if f"{d}_tensor" in pk.flops_per_s else d)
                       if m else ("fp64" if d == "fp64" else "fp32") for d, m in used} | {"fp32"})
        dashes = ["solid", "dashed", "dotdash", "dotted"]
        for i, c in enumerate(cols):
            peak = pk.flops_per_s.get(c)
            if peak is None:
                continue
            roof = np.minimum(peak, xs * pk.bytes_per_s) / 1e12
            p.line(xs, roof, line_width=2, color="#d62728", line_dash=dashes[i % len(dashes)],
                   legend_label=f"{_PEAK_LABEL.get(c, c)} roof {peak / 1e12:.0f} TFLOP/s",
                   name=f"nbprof_roof_{c}")
        p.legend.location = "bottom_right"
        notes.append(f"roofs: {pk.key} ({pk.bytes_per_s / 1e9:.0f} GB/s); {truncate(pk.source, 200)}")
    else:
        notes.append(f"no roof drawn: {pk.note}")
    data["marker"] = ["x" if f else "circle" for f in (df["above_roof"] if n and "above_roof" in df else [])]
    src.data["marker"] = data["marker"]
    r = p.scatter("ai", "tflops", size="size", color="color", alpha=0.7, source=src, line_color="black",
                  line_width=0.5, marker="marker")
    p.add_tools(HoverTool(renderers=[r], tooltips=[
        ("name", "@name"), ("shapes", "@shapes"), ("kind", "@kind"), ("time", "@time (@share{0.0%})"),
        ("achieved", "@tflops{0.000} TFLOP/s, @gbs{0.0} GB/s"), ("intensity", "@ai{0.00} FLOP/B"),
        ("of roof", "@ratio{0.0%} (@bound bound)"), ("above its roof", "@above"),
    ]))
    flagged = int(df["above_roof"].sum()) if n and "above_roof" in df else 0
    msg = f"showing {n} of {tables['total']} {tables['level']} with a work model"
    if not tables["total"]:
        msg += " (no operator has a work model: the trace has no recorded input shapes, record_shapes=True)"
    if flagged:
        msg += (f"; {flagged} above their roof (drawn as crosses): impossible rates, so the work model or the peak "
                "does not fit them (operands served from cache, an algorithm doing fewer FLOPs than counted)")
    status = Div(text=msg, name="nbprof_roofline_status", render_as_text=True)
    note = Div(text=" ".join(notes), render_as_text=True)
    apply_theme([p], "dark" if theme == "dark" else "light")
    lay = column(status, p, note)
    style_widgets(lay, theme)
    on_render(lay, [p], theme)  # "auto": dark colours under a dark JupyterLab or a dark report page
    return lay


def _text(tables: dict[str, Any]) -> str:
    df = tables["points"]
    head = f"nbprof roofline: {len(df)} of {tables['total']} {tables['level']} on {tables['peaks'].device}"
    if len(df):
        r = df.iloc[0]
        head += (f"; longest {r['name']} {fmt_ns(float(r['time_ns']))}, "
                 f"{fmt_pct_text(float(r['peak_ratio']), 1)} of its roof ({r['bound']} bound)")
        flagged = int(df["above_roof"].sum()) if "above_roof" in df else 0
        if flagged:
            head += f"; {flagged} above their roof (the work model or the peak does not fit them)"
    return head


def roofline_view(trace: Any, *, level: str = "auto", theme: str = "auto", width: int = 1100) -> NbprofView:
    """Roofline of ``trace``'s operators or kernels (an ipywidgets widget); see the module docstring."""
    tables = roofline_tables(trace, level=level)
    lay = _build(tables, theme=theme, width=width)
    view = NbprofView(lay, _text(tables), "roofline",
                      static_builder=lambda theme="light": _build(tables, theme=theme, width=width))
    view.tables = tables
    return view


def static_view(trace: Any, *, theme: str = "light", width: int = 1100) -> Any:
    """The roofline view as a static Bokeh layout (no widget)."""
    return _build(roofline_tables(trace), theme=theme, width=width)
