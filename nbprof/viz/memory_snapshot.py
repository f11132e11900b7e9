"""Memory-snapshot view: allocated/active/reserved timeline with a range selector, what is live at the
peak, leak suspects and the allocation table with frames.

Numbers come from :mod:`nbprof.analysis.memory_snapshot`. The browser never receives the raw history:
the curve is aggregated to at most ``max_points`` rows (each bucket keeps its maximum, so the peak
survives) and, in the live widget, re-aggregated for the visible window when the user zooms; tables
hold the top rows only. That keeps 500k+-entry snapshots responsive (benchmarks/bench_memory_snapshot.py),
where the official memory_viz page freezes.
"""

from __future__ import annotations

import pandas as pd

from ..analysis import memory_snapshot as ams
from ..units import fmt_bytes, fmt_ns, fmt_pct_text
from ._base import NbprofView
from ._escape import truncate

__all__ = ["memory_snapshot_view", "snapshot_tables"]


def snapshot_tables(snap, device: int = 0, *, max_points: int = 4000, top_n: int = 15, n_allocs: int = 200) -> dict:
    """The analyses the view shows (also handy on their own).

    Returns
    -------
    dict
        ``timeline`` (aggregated ``snapshot_timeline``), ``peak`` (``SnapshotPeak``), ``leaks``
        (``leak_suspects``), ``allocations`` (the ``n_allocs`` largest, live-at-end first),
        ``fragmentation``, ``ooms``, ``n_entries``.
    """
    allocs = ams.allocations(snap, device)
    largest = allocs.assign(_never=allocs["free_idx"] < 0).sort_values(["_never", "size_bytes"], ascending=False).head(n_allocs)
    return {
        "timeline": ams.snapshot_timeline(snap, device, max_points=max_points),
        "peak": ams.snapshot_peak(snap, device, top_n=top_n),
        "leaks": ams.leak_suspects(snap, device).head(top_n),
        "allocations": largest.drop(columns="_never").reset_index(drop=True),
        "fragmentation": ams.fragmentation(snap),
        "ooms": ams.oom_events(snap),
        "n_entries": int((snap.events["device"] == device).sum()),
    }


def _curve_data(tl: pd.DataFrame) -> dict:
    return {
        "t_ms": (tl["ts_ns"].clip(lower=0) / 1e6).to_numpy(),
        "allocated": (tl["allocated_bytes"] / 2**20).to_numpy(),
        "active": (tl["active_bytes"] / 2**20).to_numpy(),
        "reserved": (tl["reserved_bytes"] / 2**20).to_numpy(),
        "action": tl["action"].astype(str).to_numpy(),
    }


def _build(snap, device: int, tables: dict, *, live: bool, width: int = 1100, max_points: int = 4000):
    from bokeh.layouts import column
    from bokeh.models import (
        ColumnDataSource,
        DataTable,
        Div,
        HoverTool,
        NumberFormatter,
        RangeTool,
        StringFormatter,
        TableColumn,
    )
    from bokeh.plotting import figure

    tl = tables["timeline"]
    src = ColumnDataSource(_curve_data(tl))
    p = figure(width=width, height=300, title="Allocator memory (MiB) — zoom or drag the selector below",
               x_axis_label="time (ms)", y_axis_label="MiB", tools="xpan,xwheel_zoom,box_zoom,reset,save",
               active_scroll="xwheel_zoom", name="nbprof_snapshot_plot")
    p.line("t_ms", "reserved", source=src, color="#9d755d", line_dash="dashed", legend_label="reserved")
    p.line("t_ms", "allocated", source=src, color="#4c78a8", line_width=2, legend_label="allocated")
    p.line("t_ms", "active", source=src, color="#54a24b", legend_label="active")
    p.add_tools(HoverTool(tooltips=[("t", "@t_ms{0.000} ms"), ("allocated", "@allocated{0.00} MiB"),
                                    ("reserved", "@reserved{0.00} MiB"), ("action", "@action")], mode="vline"))
    pk = tables["peak"]
    if pk.ts_ns >= 0:
        p.scatter([pk.ts_ns / 1e6], [pk.allocated_bytes / 2**20], size=10, color="#e45756", legend_label="peak")
    p.legend.location = "top_left"
    sel = figure(width=width, height=90, y_range=p.y_range, tools="", toolbar_location=None, name="nbprof_snapshot_selector")
    sel.line("t_ms", "allocated", source=ColumnDataSource(_curve_data(tl)), color="#4c78a8")
    rt = RangeTool(x_range=p.x_range)
    sel.add_tools(rt)
    sel.yaxis.visible = False

    bd = pk.breakdown
    label_col = bd.columns[0]
    bd_src = ColumnDataSource({
        "site": [truncate(str(s), 90) for s in bd[label_col]],
        "count": bd["count"].to_numpy(),
        "mib": (bd["bytes"] / 2**20).to_numpy(),
        "share": (bd["share_ratio"] * 100).to_numpy(),
    })
    bd_table = DataTable(source=bd_src, width=width, height=min(40 + 26 * len(bd), 330), index_position=None, columns=[
        TableColumn(field="site", title="allocation site (live at peak)", formatter=StringFormatter(), width=640),
        TableColumn(field="count", title="blocks", formatter=NumberFormatter(format="0,0")),
        TableColumn(field="mib", title="MiB", formatter=NumberFormatter(format="0,0.00")),
        TableColumn(field="share", title="% of peak", formatter=NumberFormatter(format="0.0")),
    ])
    lk = tables["leaks"]
    lk_src = ColumnDataSource({
        "site": [truncate(str(s), 90) for s in lk.iloc[:, 0]] if len(lk) else [],
        "count": lk["count"].to_numpy() if len(lk) else [],
        "mib": (lk["bytes"] / 2**20).to_numpy() if len(lk) else [],
        "sizes": [truncate(str(s), 60) for s in lk["sizes"]] if len(lk) else [],
    })
    lk_table = DataTable(source=lk_src, width=width, height=min(40 + 26 * max(len(lk), 1), 300), index_position=None, columns=[
        TableColumn(field="site", title="never freed, allocated repeatedly at", formatter=StringFormatter(), width=600),
        TableColumn(field="count", title="allocations", formatter=NumberFormatter(format="0,0")),
        TableColumn(field="mib", title="MiB", formatter=NumberFormatter(format="0,0.00")),
        TableColumn(field="sizes", title="sizes (bytes)", formatter=StringFormatter()),
    ])
    al = tables["allocations"]
    al_src = ColumnDataSource({
        "size": (al["size_bytes"] / 2**20).to_numpy(),
        "alloc_ms": (al["alloc_ts_ns"] / 1e6).to_numpy(),
        "life": [("never freed" if lt < 0 else fmt_ns(lt)) for lt in al["lifetime_ns"]],
        "site": [truncate(str(s), 80) for s in al["top_user_frame"]],
        "op": [str(o) for o in al["op"]],
        "stack": [truncate(str(s), 400) for s in al["stack"]],
    })
    al_table = DataTable(source=al_src, width=width, height=300, index_position=None, columns=[
        TableColumn(field="size", title="MiB", formatter=NumberFormatter(format="0,0.000"), width=70),
        TableColumn(field="alloc_ms", title="at (ms)", formatter=NumberFormatter(format="0,0.000"), width=80),
        TableColumn(field="life", title="lifetime", formatter=StringFormatter(), width=100),
        TableColumn(field="site", title="site", formatter=StringFormatter(), width=300),
        TableColumn(field="op", title="op", formatter=StringFormatter(), width=140),
        TableColumn(field="stack", title="frames (innermost first)", formatter=StringFormatter(), width=400),
    ])
    fr = tables["fragmentation"]
    frow = fr[fr["device"] == device]
    frag_txt = ""
    if len(frow):
        f = frow.iloc[0]
        frag_txt = (f"reserved {fmt_bytes(f['reserved_bytes'])} in {int(f['segments'])} segments, "
                    f"allocated {fmt_bytes(f['allocated_bytes'])}, free inside segments {fmt_bytes(f['inactive_bytes'])} "
                    f"(largest free block {fmt_bytes(f['largest_free_block_bytes'])}, "
                    f"fragmentation {fmt_pct_text(f['fragmentation_ratio'])})")
    oom_txt = f"{len(tables['ooms'])} OOM events" if len(tables["ooms"]) else "no OOM events"
    # render_as_text: BokehJS shows it as text, so nothing trace-supplied becomes markup
    head = Div(text=(f"Device {device}: {tables['n_entries']:,} allocator events, showing {len(tl):,} aggregated points. "
                     f"Peak {fmt_bytes(pk.allocated_bytes)} allocated at {pk.ts_ns / 1e6:.3f} ms "
                     f"({fmt_bytes(pk.baseline_bytes)} from before the recorded history). {frag_txt}. {oom_txt}."),
               render_as_text=True, width=width)
    lay = column(head, p, sel, Div(text="What is live at the peak", render_as_text=True), bd_table,
                 Div(text="Leak suspects", render_as_text=True), lk_table,
                 Div(text="Largest allocations (never freed first)", render_as_text=True), al_table,
                 name="nbprof_memory_snapshot")
    if live:
        def on_range(attr, old, new):  # re-aggregate the visible window at full resolution budget
            lo, hi = p.x_range.start, p.x_range.end
            if lo is None or hi is None:
                return
            sub = ams.snapshot_timeline(snap, device, time_range=(int(lo * 1e6), int(hi * 1e6) + 1), max_points=max_points)
            if len(sub):
                src.data = _curve_data(sub)

        p.x_range.on_change("end", on_range)
    return lay, head.text


def memory_snapshot_view(snap, device: int = 0, *, max_points: int = 4000, width: int = 1100) -> NbprofView:
    """Interactive view of a ``MemorySnapshot`` (ipywidgets; static form via ``view.static_layout()``).

    Parameters
    ----------
    snap : nbprof.sources.memory_snapshot.MemorySnapshot
    device : int, default 0
    max_points : int, default 4000
        Curve points sent to the browser (per zoom level in the live widget).
    width : int

    Returns
    -------
    NbprofView
        Timeline with range selector, live-at-peak breakdown, leak suspects and allocation table;
        ``view.tables`` holds the DataFrames shown.
    """
    tables = snapshot_tables(snap, device, max_points=max_points)
    lay, text = _build(snap, device, tables, live=True, width=width, max_points=max_points)
    view = NbprofView(lay, "nbprof memory snapshot: " + text, "memory_snapshot",
                      static_builder=lambda theme="light": _build(snap, device, tables, live=False, width=width)[0])
    view.tables = tables
    return view
