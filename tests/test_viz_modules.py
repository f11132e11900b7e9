"""Module and call-stack views: registered, in the dashboard and the static page, values from the analyses."""

from __future__ import annotations

import re

import pytest
from _support.paths import DATA
from bokeh.models import ColumnDataSource, Div

import nbprof
from nbprof.analysis import modules
from nbprof.units import fmt_ns
from nbprof.viz import dashboard, registry
from nbprof.viz.static import to_html

LM_MODULES = DATA / "cpu" / "lm_modules.pt.trace.json.gz"
LM_GPU = DATA / "gpu" / "lm_mem.pt.trace.json.gz"
NO_FRAMES = DATA / "cpu" / "lm.pt.trace.json.gz"


@pytest.fixture(scope="module")
def cpu():
    return nbprof.load(LM_MODULES)


def _one(layout, typ, name):
    found = [m for m in layout.select({"type": typ}) if m.name == name]
    assert found, f"no {typ.__name__} {name}"
    return found[0]


def test_registered_and_in_the_dashboard(cpu):
    assert {"modules", "call_stack"} <= set(registry.VIEWS)
    assert registry.get("call_stack").title == "Call stack"
    d = dashboard(cpu, start="modules")
    assert d.views["modules"].kind == "modules"
    assert d.show_view("call_stack").kind == "call_stack" and not d.errors


def test_module_view_rows_are_the_module_tree(cpu):
    v = registry.live("modules", cpu, theme="light")
    tree = modules.module_tree(cpu)
    full = _one(v.bokeh_layout, ColumnDataSource, "nbprof_modules_full").data
    shown = _one(v.bokeh_layout, ColumnDataSource, "nbprof_modules_shown").data
    assert list(full["name"]) == tree["name"].tolist()
    assert full["module"][:2] == ["TinyLM", "Embedding"] and list(full["operators"][:2]) == [12, 3]
    # every module open at first: all rows shown, indented by depth, durations in human units
    assert len(shown["label"]) == len(tree)
    assert shown["label"][0] == "\u25be TinyLM_0"
    assert shown["label"][1] == "\u00a0\u00a0\u00a0\u2003Embedding_0"
    assert shown["host_total_text"][0] == fmt_ns(float(tree.loc[0, "host_total_ns"])) == "30.112 ms"
    assert "device_total_text" not in full  # CPU-only profile: no device columns
    status = _one(v.bokeh_layout, Div, "nbprof_modules_status")
    assert status.text.startswith("22 modules, 3 top-level calls, host 30.112 ms, no device time")
    assert v.text.splitlines()[1].strip().startswith("TinyLM_0")


def test_gpu_module_view_has_device_columns():
    v = registry.live("modules", nbprof.load(LM_GPU), theme="dark")
    table = next(iter(v.bokeh_layout.select({"name": "nbprof_modules_table"})))
    assert [c.title for c in table.columns][-2:] == ["device total", "device self"]


def test_call_stack_view_opens_three_levels(cpu):
    v = registry.live("call_stack", cpu, theme="light")
    cs = modules.call_stack(cpu, max_nodes=5000)
    shown = _one(v.bokeh_layout, ColumnDataSource, "nbprof_call_stack_shown").data
    # nodes above depth 3 are open: every node down to depth 3 is shown
    assert len(shown["label"]) == int((cs["depth"] <= 3).sum()) < len(cs)
    assert max(shown["depth"]) == 3
    status = _one(v.bokeh_layout, Div, "nbprof_call_stack_status")
    assert status.text == f"showing {len(cs)} of {len(cs)} Python call paths"


def test_without_frames_the_views_say_how_to_record():
    t = nbprof.load(NO_FRAMES)
    for name in ("modules", "call_stack"):
        v = registry.live(name, t, theme="light")
        hint = next(iter(v.bokeh_layout.select({"type": Div})))
        assert "with_modules=True" in hint.text and "%%torchprof --with-modules" in hint.text
        assert "with_modules=True" in v.text


def test_static_page_has_both_views(cpu, tmp_path):
    out = to_html(cpu, tmp_path / "mods.html", views=["modules", "call_stack"])
    html = out.read_text(encoding="utf-8")
    assert "nbprof_modules_full" in html and "nbprof_call_stack_full" in html
    assert "MultiheadAttention_0" in html


def test_call_stack_status_says_what_was_clamped(tmp_path):
    from test_analysis_modules import _overrun_trace

    path, _name = _overrun_trace(tmp_path)
    v = registry.live("call_stack", nbprof.load(path), theme="light")
    status = _one(v.bokeh_layout, Div, "nbprof_call_stack_status")
    assert re.search(r"; 1 self time below zero \(a child frame overruns its parent by 3\.\d\d µs in total\) shown as 0$",
                     status.text), status.text
