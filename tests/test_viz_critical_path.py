"""Critical path view and the timeline's critical-path / evidence highlight (live and static, no browser)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _support.paths import DATA
from bokeh.models import ColumnDataSource, Div

import nbprof
from nbprof import viz
from nbprof.analysis import advisor
from nbprof.analysis.critical_path import BREAKDOWN_KINDS, critical_path
from nbprof.units import fmt_ns
from nbprof.viz import registry
from nbprof.viz.critical_path import highlight_segments, path_rows
from nbprof.viz.timeline import TimelineModel, static_view

GPU = DATA / "gpu" / "lm_h200.pt.trace.json.gz"
EVIL = '</script><img src=x onerror="window.__x=1">"\'&'


@pytest.fixture(scope="module")
def gpu():
    return nbprof.load(GPU)


@pytest.fixture(scope="module")
def cp(gpu):
    return critical_path(gpu, slack=False)


def _sources(layout, name):
    return [m for m in layout.select({"type": ColumnDataSource}) if m.name == name]


def test_registered_live_and_static(gpu, cp):
    assert "critical_path" in registry.names()
    spec = registry.get("critical_path")
    assert spec.title == "Critical path"
    v = registry.live("critical_path", gpu, theme="light")
    assert v.kind == "critical_path" and v.critical_path.length_ns == cp.length_ns
    assert v.text.startswith(f"nbprof critical path: {len(cp.row_ids)} events, {fmt_ns(cp.length_ns)}")
    (bd,) = _sources(v.bokeh_layout, "nbprof_cp_breakdown")
    assert list(bd.data["kind"]) == list(BREAKDOWN_KINDS)
    assert list(bd.data["ns"]) == [int(cp.breakdown[k]) for k in BREAKDOWN_KINDS]
    assert sum(bd.data["ns"]) == cp.length_ns
    (top,) = _sources(v.bokeh_layout, "nbprof_cp_top")
    assert top.data["dur_ns"] == sorted(top.data["dur_ns"], reverse=True) and len(top.data["dur_ns"]) == 20
    assert not any(n.startswith("ProfilerStep#") for n in top.data["name"])
    lay = registry.static("critical_path", gpu)
    assert _sources(lay, "nbprof_cp_breakdown")


def test_static_html_shows_breakdown(gpu, cp, tmp_path):
    out = viz.to_html(gpu, tmp_path / "cp.html", views=["critical_path"])
    html = out.read_text()
    assert "nbprof_cp_breakdown" in html and "cdn.bokeh.org" not in html
    for k in BREAKDOWN_KINDS:
        if cp.breakdown[k] > 0:
            assert json.dumps(fmt_ns(int(cp.breakdown[k]))) in html  # the bar labels, human units
    assert fmt_ns(cp.length_ns) in html


def test_step_view(gpu):
    v = viz.critical_path_view(gpu, step=int(gpu.steps[1]))
    assert v.critical_path.window[1] - v.critical_path.window[0] < gpu.duration_ns


def test_names_are_escaped(tmp_path):
    evil = tmp_path / "evil.pt.trace.json"
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
          {"ph": "X", "cat": "cpu_op", "name": EVIL, "pid": 1, "tid": 1, "ts": 1, "dur": 50,
           "args": {"External id": 5}}]
    evil.write_text(json.dumps({"traceEvents": ev}))
    t = nbprof.load(evil)
    v = viz.critical_path_view(t)
    assert EVIL in list(_sources(v.bokeh_layout, "nbprof_cp_top")[0].data["name"])  # as data, rendered as text
    head = next(m for m in v.bokeh_layout.select({"type": Div}) if m.name == "nbprof_cp_header")
    assert "<img" not in head.text and "&lt;/script&gt;&lt;img src=x" in head.text
    html = viz.to_html(t, tmp_path / "r.html", views=["critical_path", "timeline"]).read_text()
    assert "<img src=x" not in html and "</script><img" not in html


def test_highlight_segments_cover_the_path(gpu, cp):
    model = TimelineModel(gpu)
    rows = path_rows(gpu, cp)
    seg = highlight_segments(model, rows, width_px=1_000_000, max_segments=10**6)
    assert int(seg["count"].sum()) == rows.size  # every path event drawn once (all are timeline rows)
    # each event lies inside a segment of its row
    pos = np.flatnonzero(np.isin(model.src, gpu.events.index[rows]))
    for p in pos[:: max(1, pos.size // 200)]:
        y = model.row[p] + 0.5
        ok = (seg["y"] == y) & (seg["left"] <= model.ts[p] / 1e6) & (seg["right"] >= model.end[p] / 1e6 - 1e-9)
        assert ok.any()
    coarse = highlight_segments(model, rows, width_px=300, max_segments=100)
    assert len(coarse["left"]) <= 100 and int(coarse["count"].sum()) == rows.size
    # a window: only what is visible
    mid = (model.t0_ns + model.t1_ns) / 2
    w = highlight_segments(model, rows, mid, mid + 1e6, width_px=800)
    assert (w["right"] >= mid / 1e6).all() and (w["left"] <= (mid + 1e6) / 1e6).all()


def test_live_timeline_highlights_and_refreshes(gpu, cp):
    v = viz.timeline(gpu, critical_path=True, width=900, theme="light")
    (src,) = _sources(v.bokeh_layout, "nbprof_cp_highlight")
    n_all = len(src.data["left"])
    assert n_all > 0 and int(np.asarray(src.data["count"]).sum()) == path_rows(gpu, cp).size
    x0, x1 = v.model.t0_ns / 1e6, v.model.t1_ns / 1e6
    v.refresh(x0 + (x1 - x0) * 0.4, x0 + (x1 - x0) * 0.45)
    assert 0 < int(np.asarray(src.data["count"]).sum()) < path_rows(gpu, cp).size
    # a given CriticalPath (one step) instead of the whole trace
    step_cp = critical_path(gpu, int(gpu.steps[0]), slack=False)
    v2 = viz.timeline(gpu, critical_path=step_cp, width=900, theme="light")
    (s2,) = _sources(v2.bokeh_layout, "nbprof_cp_highlight")
    assert int(np.asarray(s2.data["count"]).sum()) == path_rows(gpu, step_cp).size


def test_timeline_zooms_to_a_finding(gpu):
    f = next(f for f in advisor.advise(gpu) if f.rule == "host_wait")
    v = viz.timeline(gpu, highlight=f, width=900, theme="light")
    ev = gpu.events.iloc[f.evidence_rows]
    lo, hi = ev["ts_ns"].min() / 1e6, (ev["ts_ns"] + ev["dur_ns"]).max() / 1e6
    assert v.figure.x_range.start <= lo and v.figure.x_range.end >= hi
    assert v.figure.x_range.end - v.figure.x_range.start < 1.2 * (hi - lo) + 0.01
    (src,) = _sources(v.bokeh_layout, "nbprof_evidence_highlight")
    assert int(np.asarray(src.data["count"]).sum()) == len(f.evidence_rows)
    lay = static_view(gpu, critical_path=True, highlight=f)
    assert _sources(lay, "nbprof_cp_highlight") and _sources(lay, "nbprof_evidence_highlight")


def test_cpu_trace_in_the_dashboard():
    t = nbprof.load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")  # num_workers=0: the DataLoader binds
    d = viz.dashboard(t)
    d.show_view("critical_path")
    assert not d.errors
    cp = d.views["critical_path"].critical_path
    assert cp.breakdown.idxmax() == "dataloader"
