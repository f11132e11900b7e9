"""Diff view: what changed between two runs, opening with the step-time change split by category.

Data: :func:`nbprof.analysis.compare.compare` and :func:`~nbprof.analysis.compare.step_waterfall`.
Sign convention everywhere (the view says it in words): **delta = after - before**, negative = faster
(time saved), positive = slower. The waterfall starts at the mean step time before, adds each
Overview category's change (Kernel ... Other; they tile the step, so they sum to the total change)
and ends at the mean step time after. Below it: the operators and the kernels whose time moved most.
Names are trace text, handed to BokehJS as data (``StringFormatter`` cells, tooltips) or escaped.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..analysis import compare as C
from ..analysis.before_after import before_after
from ..analysis.steps import step_times
from ..results.compare_render import before_after_sentence, prediction_sentence
from ..units import fmt_delta_ns, fmt_ns
from ._base import NbprofView
from ._escape import truncate
from .overview import BREAKDOWN_COLUMNS
from .theme import apply_theme, on_render, style_widgets

__all__ = ["compare_tables", "compare_view", "diff_view", "static_view", "summary_sentence", "TOP"]

#: Operators / kernels listed per table.
TOP = 15
SIGN_NOTE = "delta = after \u2212 before: negative = faster (time saved), positive = slower."
_FASTER, _SLOWER, _SAME = "#2ca02c", "#d62728", "#9d9da1"


def _pair(traces: Any) -> tuple:
    ts = list(traces)
    if len(ts) != 2:
        raise ValueError(f"the diff view compares two traces (before, after), got {len(ts)}")
    return ts[0], ts[1]


def compare_tables(a, b) -> dict:
    """``comparison`` (``compare.compare(a, b)``), ``waterfall`` (``compare.step_waterfall``), ``operators``
    (host operators, ``ProfilerStep`` left out, by |self host delta| + |self device delta|) and ``kernels``
    (by |total delta|), the ``TOP`` that moved most, their ns per step (each trace's totals over its step count,
    ``steps.step_windows``; whole-trace totals when a trace has none, ``per_step`` False), and ``before_after``
    (:func:`nbprof.analysis.before_after.before_after` with ``predict``: the faster/slower claim, and ``a``'s
    predicted saving for the fix made against the measured change; None when a side has no step time)."""
    cmp = C.compare(a, b)
    # operator and kernel totals are whole-trace: per step over every step window (warm-up included)
    na, nb = float(len(step_times(a))), float(len(step_times(b)))
    ops = cmp.operators
    ops = ops[ops["cat"].astype(str).isin(["cpu_op", "user_annotation"])
              & ~ops["name"].astype(str).str.startswith("ProfilerStep")]
    ops = _per_step(ops, ("self_host_ns", "self_device_ns"), na, nb)
    ops = ops.iloc[np.argsort(-(ops["self_host_ns_delta"].abs() + ops["self_device_ns_delta"].abs()).to_numpy(),
                              kind="stable")]
    kern = _per_step(cmp.kernels, ("total_ns",), na, nb)
    kern = kern.iloc[np.argsort(-kern["total_ns_delta"].abs().to_numpy(), kind="stable")]
    try:
        ba = before_after(a, b, predict=True)
    except ValueError:  # a side without host events: no step time to compare
        ba = None
    return {"comparison": cmp, "waterfall": C.step_waterfall(cmp), "per_step": na > 0 and nb > 0,
            "operators": ops.head(TOP).reset_index(drop=True), "kernels": kern.head(TOP).reset_index(drop=True),
            "before_after": ba}


def _per_step(df: pd.DataFrame, metrics: tuple[str, ...], na: float, nb: float) -> pd.DataFrame:
    """``df`` with the ``<m>_a``/``<m>_b`` totals divided by each trace's step count and ``<m>_delta`` = b - a again
    (so runs of different lengths compare per step, like the waterfall); unchanged when a trace has no steps."""
    if not (na > 0 and nb > 0):
        return df
    out = df.copy()
    for m in metrics:
        out[f"{m}_a"] = out[f"{m}_a"].astype(np.float64) / na
        out[f"{m}_b"] = out[f"{m}_b"].astype(np.float64) / nb
        out[f"{m}_delta"] = out[f"{m}_b"] - out[f"{m}_a"]
    return out


def summary_sentence(wf: pd.DataFrame, names: tuple[str, str] = ("before", "after")) -> str:
    """The mean step time before and after and the change, with the sign convention in words. Whether ``after`` is
    faster is not judged here: that claim has one home, :func:`nbprof.results.compare_render.before_after_sentence`
    (the median step's ratio with its interval), which the view states above this sentence."""
    if wf.empty:
        return f"No step in one of the traces: no step time to compare. ({SIGN_NOTE})"
    before = float(wf["delta_ns"].iloc[0])
    after = float(wf["delta_ns"].iloc[-1])
    d = after - before
    cats = wf[wf["kind"] == "delta"]
    big = cats.iloc[int(np.argmax(np.abs(cats["delta_ns"].to_numpy())))] if len(cats) else None
    most = (f" The largest change is {BREAKDOWN_COLUMNS.get(big['label'], (big['label'],))[0]} "
            f"({fmt_delta_ns(big['delta_ns'])} per step)." if big is not None and big["delta_ns"] != 0 else "")
    return (f"Mean step time {names[0]} {fmt_ns(before)}, {names[1]} {fmt_ns(after)}: delta {fmt_delta_ns(d)}."
            f"{most} Sign: {SIGN_NOTE}")


def _waterfall_plot(wf: pd.DataFrame, names: tuple[str, str], width: int):
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    labels, colors, texts = [], [], []
    for r in wf.itertuples(index=False):
        if r.kind == "delta":
            labels.append(f"\u0394 {BREAKDOWN_COLUMNS.get(r.label, (r.label,))[0]}")
            colors.append(_FASTER if r.delta_ns < 0 else _SLOWER if r.delta_ns > 0 else _SAME)
            texts.append(fmt_delta_ns(r.delta_ns))
        else:
            labels.append(f"{names[0] if r.kind == 'before' else names[1]} step")
            colors.append("#4c78a8")
            texts.append(fmt_ns(r.delta_ns))
    lo = np.minimum(wf["start_ns"].to_numpy(np.float64), wf["end_ns"].to_numpy(np.float64)) / 1e6
    hi = np.maximum(wf["start_ns"].to_numpy(np.float64), wf["end_ns"].to_numpy(np.float64)) / 1e6
    src = ColumnDataSource({"label": labels, "bottom": lo, "top": hi, "color": colors, "text": texts,
                            "kind": wf["kind"].tolist()}, name="nbprof_diff_waterfall")
    p = figure(x_range=labels, width=width, height=340, toolbar_location="right", tools="save,reset",
               title=f"Mean step time {names[0]} \u2192 {names[1]}, change per category (after \u2212 before; "
                     "green = faster)", y_axis_label="ms", name="nbprof_diff_plot")
    p.vbar(x="label", bottom="bottom", top="top", width=0.7, color="color", source=src)
    p.add_tools(HoverTool(tooltips=[("", "@label"), ("", "@text")]))
    p.xaxis.major_label_orientation = 0.6
    return p


def _delta_table(df: pd.DataFrame, metric: str, key_label: str, names: tuple[str, str], name: str, width: int):
    from bokeh.models import ColumnDataSource, DataTable, StringFormatter, TableColumn

    d = df
    data = {"name": d["name"].astype(str).tolist(),
            "a": [fmt_ns(x) for x in d[f"{metric}_a"]], "b": [fmt_ns(x) for x in d[f"{metric}_b"]],
            "delta": [fmt_delta_ns(x) for x in d[f"{metric}_delta"]],
            "status": [{"both": "both", "only_a": f"only {names[0]}", "only_b": f"only {names[1]}"}.get(s, s)
                       for s in d["status"]]}
    cols = [TableColumn(field="name", title=key_label, width=420, formatter=StringFormatter()),
            TableColumn(field="a", title=names[0], width=100), TableColumn(field="b", title=names[1], width=100),
            TableColumn(field="delta", title=f"delta ({names[1]} \u2212 {names[0]})", width=120),
            TableColumn(field="status", title="in", width=90)]
    if "self_device_ns_delta" in d.columns and metric == "self_host_ns":
        data["dev"] = [fmt_delta_ns(x) for x in d["self_device_ns_delta"]]
        cols.insert(4, TableColumn(field="dev", title="self device delta", width=120))
    return DataTable(source=ColumnDataSource(data, name=f"{name}_source"), columns=cols, width=width,
                     height=min(420, 30 + 26 * max(len(d), 1)), index_position=None, sortable=False, name=name)


def _build(tables: dict, names: tuple[str, str], *, theme: str = "light", width: int = 1100):
    from bokeh.layouts import column
    from bokeh.models import Div

    wf = tables["waterfall"]
    cmp = tables["comparison"]
    items: list = [Div(text=t, render_as_text=True, width=width, name=n) for t, n in _claims(tables, names)]
    plots = []
    if not wf.empty:
        p = _waterfall_plot(wf, names, width)
        plots.append(p)
        items.append(p)
    ops, kern = tables["operators"], tables["kernels"]
    per = " per step" if tables.get("per_step") else " (whole traces: a trace has no step)"
    items.append(Div(text=f"Operators whose self host time{per} moved most ({SIGN_NOTE})", render_as_text=True,
                     width=width))
    items.append(_delta_table(ops, "self_host_ns", "operator", names, "nbprof_diff_operators", width) if len(ops)
                 else Div(text="No host operators in either trace.", render_as_text=True))
    items.append(Div(text=f"Kernels whose total time{per} moved most ({SIGN_NOTE})", render_as_text=True, width=width))
    items.append(_delta_table(kern, "total_ns", "kernel", names, "nbprof_diff_kernels", width) if len(kern)
                 else Div(text="No device kernels in either trace (CPU-only profiles).", render_as_text=True))
    for n in cmp.notes:
        items.append(Div(text=n, render_as_text=True, width=width))
    apply_theme(plots, "dark" if theme == "dark" else "light")
    lay = column(*items, name="nbprof_diff")
    style_widgets(lay, theme)
    on_render(lay, plots, theme)
    return lay


def _claims(tables: dict, names: tuple[str, str]) -> list[tuple[str, str]]:
    """(sentence, Bokeh name) in the view's order: faster or not (the one claim), the mean step change, the
    prediction against the measurement."""
    ba = tables.get("before_after")
    out = [(before_after_sentence(ba, *names), "nbprof_diff_claim")] if ba is not None else []
    out.append((summary_sentence(tables["waterfall"], names), "nbprof_diff_summary"))
    if ba is not None and ba.prediction is not None:
        out.append((prediction_sentence(ba.prediction, *names), "nbprof_diff_prediction"))
    return out


def _text(tables: dict, names: tuple[str, str]) -> str:
    lines = ["nbprof diff:"] + [t for t, _ in _claims(tables, names)]
    for r in tables["waterfall"].itertuples(index=False):
        if r.kind == "delta" and r.delta_ns != 0:
            lines.append(f"  {BREAKDOWN_COLUMNS.get(r.label, (r.label,))[0]:<14} {fmt_delta_ns(r.delta_ns)}")
    for r in tables["kernels"].head(5).itertuples(index=False):
        lines.append(f"  kernel {fmt_delta_ns(r.total_ns_delta):>12}  {truncate(str(r.name), 80)}")
    return "\n".join(lines)


def compare_view(a, b, *, names: tuple[str, str] = ("before", "after"), theme: str = "auto",
                 width: int = 1100) -> NbprofView:
    """The Diff view of ``b`` ("after") against ``a`` ("before"), a widget.

    Parameters
    ----------
    a, b : nbprof.Trace
        The baseline and the changed run.
    names : (str, str)
        How the two runs are called in the view (default "before", "after").
    theme : {"auto", "light", "dark"}
    width : int

    Returns
    -------
    NbprofView
        The mean step time change (``compare.step_waterfall``: before -> per-category deltas -> after,
        torch-tb-profiler Overview categories) with the sign stated (delta = after - before, negative =
        faster), then the operators and kernels that moved most (``compare.compare``). ``view.tables``
        holds the frames.
    """
    names = (str(names[0]), str(names[1]))
    tables = compare_tables(a, b)
    lay = _build(tables, names, theme=theme, width=width)
    view = NbprofView(lay, _text(tables, names), "diff",
                      static_builder=lambda theme="light": _build(tables, names, theme=theme, width=width))
    view.tables = tables
    return view


def diff_view(traces, *, theme: str = "auto", width: int = 1100) -> NbprofView:
    """Registry live builder: ``traces`` is the pair (before, after); see :func:`compare_view`.

    Raises
    ------
    ValueError
        When ``traces`` is not two traces.
    """
    a, b = _pair(traces)
    return compare_view(a, b, theme=theme, width=width)


def static_view(traces, *, theme: str = "light", width: int = 1100):
    """Registry static builder: the Diff view of the pair (before, after) as a static Bokeh layout.

    Raises
    ------
    ValueError
        When ``traces`` is not two traces.
    """
    a, b = _pair(traces)
    return _build(compare_tables(a, b), ("before", "after"), theme=theme, width=width)
