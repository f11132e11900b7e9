"""Operators, memory, overview views, dashboard, static HTML export and escaping, on real traces."""

from __future__ import annotations

import numpy as np
import pytest
from _support.paths import DATA
from bokeh.models import ColumnDataSource, Div

import nbprof
from nbprof import viz
from nbprof.analysis import memory as memory_analysis
from nbprof.analysis import operators as operators_analysis
from nbprof.analysis import steps as steps_analysis
from nbprof.viz._escape import escape_html
from nbprof.viz.memory import decimate_minmax
from nbprof.viz.overview import _finding_html

GPU = DATA / "gpu" / "lm_mem.pt.trace.json.gz"
CPU = DATA / "cpu" / "cnn_nw0.pt.trace.json.gz"
EVIL = '</script><img src=x onerror="window.__x=1">"\'&'


@pytest.fixture(scope="module")
def gpu():
    return nbprof.load(GPU)


def _source(layout, name):
    found = [m for m in layout.select({"type": ColumnDataSource}) if m.name == name]
    assert found, f"no data source {name}"
    return found[0]


def test_operators_view_shows_operator_summary(gpu):
    v = viz.operators_view(gpu, max_rows=100)
    # host operators: the view leaves Python frames to the call_stack view (issue 20)
    expected = operators_analysis.operator_summary(gpu, group_by="name", python_functions=False)
    df, total = v.tables["name"]
    assert total == len(expected) and len(df) == 100
    shown = _source(v.bokeh_layout, "nbprof_ops_shown").data
    assert list(shown["name"][:5]) == [str(n) for n in expected["name"][:5]]
    assert np.allclose(shown["total_host_us"][:5], expected["total_host_ns"][:5] / 1e3)
    assert set(v.tables) >= {"name", "shapes", "stack"}  # lm_mem has shapes and stacks
    bars = _source(v.bokeh_layout, "nbprof_ops_bars").data
    # the chart leaves the step wrappers out (they hold the whole step) and its axis has a unit
    chartable = expected[~expected["name"].astype(str).str.startswith("ProfilerStep")]
    assert len(bars["label"]) == 15 and bars["value"][0] == pytest.approx(chartable["total_host_ns"].iloc[0] / 1e3)
    assert not any("ProfilerStep" in lab for lab in bars["label"])
    chart = next(m for m in v.bokeh_layout.select({"name": "nbprof_ops_chart"}))
    assert chart.xaxis[0].axis_label == "total host time (µs)"
    status = next(m for m in v.bokeh_layout.select({"type": Div}) if m.name == "nbprof_ops_status")
    assert status.text == f"showing 100 of {len(expected)} name groups"
    text = v._repr_mimebundle_()[0]["text/plain"]
    assert text.startswith(f"nbprof operators ({len(expected)} name groups")


def test_memory_view_marks_the_peak(gpu):
    v = viz.memory_view(gpu)
    peak = memory_analysis.memory_peak(gpu)
    gpu_peak = peak[peak["device"] == 0].iloc[0]
    src = _source(v.bokeh_layout, "nbprof_mem_peak").data
    i = list(src["op"]).index(str(gpu_peak["op"]))
    assert src["y"][i] == pytest.approx(gpu_peak["peak_allocated_bytes"] / 2**20)
    assert src["x"][i] == pytest.approx(gpu_peak["ts_ns"] / 1e6)
    assert f"GPU 0 peak {gpu_peak['peak_allocated_bytes'] / 2**20:.2f} MiB" in v.text
    assert "aten::nll_loss_forward" in v.text
    largest = _source(v.bokeh_layout, "nbprof_mem_largest").data
    assert len(largest[next(iter(largest))]) == 20


def test_decimate_minmax_keeps_extremes():
    x = np.arange(100_000, dtype=float)
    y = np.sin(x / 500.0)
    y[31_337] = 5.0
    xd, yd = decimate_minmax(x, y, n_bins=500)
    assert len(xd) <= 1000 and yd.max() == 5.0 and yd.min() == y.min()
    assert np.all(np.diff(xd) > 0)


def test_overview_view_breakdown_and_findings(gpu):
    v = viz.overview_view(gpu)
    bd = steps_analysis.step_breakdown(gpu)
    src = _source(v.bokeh_layout, "nbprof_steps").data
    assert list(src["step"]) == [str(s) for s in bd["step"]]
    assert np.allclose(src["kernel_ns"], bd["kernel_ns"] / 1e6)
    assert np.allclose(src["step_ms"], bd["step_ns"] / 1e6)
    findings = [m for m in v.bokeh_layout.select({"type": Div}) if m.name == "nbprof_findings"]
    assert findings and "host_wait" in findings[0].text
    assert "GPU 0 utilisation" in v.text


def test_finding_html_escapes_trace_text():
    f = {"rule": "r", "severity": "high", "title": EVIL, "evidence": {"op": EVIL, EVIL: 1}, "where": EVIL,
         "next_step": EVIL}
    h = _finding_html(f)
    assert "<img" not in h and "</script>" not in h
    assert escape_html(EVIL) in h
    assert escape_html(EVIL) == "&lt;/script&gt;&lt;img src=x onerror=&quot;window.__x=1&quot;&gt;&quot;&#x27;&amp;"


def test_dashboard_builds_views_lazily(gpu):
    d = viz.dashboard(gpu)
    assert list(d.views) == ["overview"]
    w = d.show_view("memory")
    assert w.kind == "memory" and set(d.views) == {"overview", "memory"}
    assert d.selector.value == "memory" and d.body.children == (w,)
    assert repr(d).startswith("nbprof dashboard (overview, operators, kernels, timeline, memory, critical_path, roofline")
    # Trace.show() is the same dashboard; show(view) gives one view
    assert gpu.show("timeline").kind == "timeline"


def test_cpu_trace_views():
    t = nbprof.load(CPU)
    d = viz.dashboard(t)
    for name in ("overview", "operators", "timeline", "memory"):
        d.show_view(name)
    assert not d.errors
    assert d.views["timeline"].model.n_events > 1000


def test_to_html_is_standalone_and_escaped(tmp_path):
    evil = tmp_path / "evil.pt.trace.json"
    import json

    ev = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": EVIL}},
          {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
          {"ph": "X", "cat": "cpu_op", "name": EVIL, "pid": 1, "tid": 1, "ts": 1, "dur": 50,
           "args": {"External id": 5, "Input Dims": [[2, 2]]}}]
    evil.write_text(json.dumps({"traceEvents": ev}))
    t = nbprof.load(evil)
    out = viz.to_html(t, tmp_path / "r.html", title=EVIL)
    html = out.read_text()
    assert "<img src=x" not in html and "</script><img" not in html
    assert "cdn.bokeh.org" not in html and "https://" not in html.split("<script", 1)[0]
    assert "Bokeh" in html and len(html) > 1_000_000  # BokehJS is inline
    with pytest.raises(FileExistsError):
        viz.to_html(t, out)
    viz.to_html(t, out, views=["timeline"], theme="dark", overwrite=True)
    assert "nbprof_level0" in out.read_text()


def test_to_html_of_one_view(gpu, tmp_path):
    v = viz.operators_view(gpu)
    out = viz.to_html(v, tmp_path / "ops.html")
    html = out.read_text()
    assert "nbprof_ops_shown" in html and "nbprof_level0" not in html
    with pytest.raises(TypeError):
        viz.to_html(42, tmp_path / "x.html")
