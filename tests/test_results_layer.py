"""The results layer: one home of units, the renderer contract, options declared once, one view registry."""

from __future__ import annotations

import dataclasses
import math

import pytest

import nbprof
from nbprof import units as fmt
from nbprof.capture.options import ProfileOptions, argparse_arguments, option_specs
from nbprof.results.render import render, renderer_for


@pytest.mark.parametrize(
    ("value", "ms", "size", "flops"),
    [
        (0, "0.000", "0 B", "0"),
        (999, "0.001", "999 B", "999"),
        (1536, "0.002", "1.50 KiB", "1.54 K"),
        (3 * 2**20, "3.146", "3.00 MiB", "3.15 M"),
        (1_234_567_890, "1,234.568", "1.15 GiB", "1.23 G"),
        (2.5e12, "2,500,000.000", "2,328.31 GiB", "2.50 T"),
        (float("nan"), "", "", ""),
        (None, "", "", ""),
    ],
)
def test_units(value, ms, size, flops):
    assert fmt.fmt_ms(value) == ms
    assert fmt.fmt_bytes(value) == size
    assert fmt.fmt_flops(value) == flops


def test_human_durations():
    assert [fmt.fmt_ns(v) for v in (789, 1500, 1_230_000, 1.5e9)] == ["789 ns", "1.50 µs", "1.230 ms", "1.500 s"]
    assert fmt.fmt_ns(math.nan) == ""
    assert fmt.fmt_ms(1_234_567_890, 1) == "1,234.6"


def test_every_option_has_one_flag_and_help():
    fields = [f.name for f in dataclasses.fields(ProfileOptions)]
    specs = list(option_specs())
    assert [s.name for s in specs] == fields
    flags = [fl for f, _ in argparse_arguments() for fl in f]
    assert len(flags) == len(set(flags)) and "--record-shapes" in flags and "-a" in flags
    for s in specs:
        assert s.help and s.name in ProfileOptions.__doc__
        assert f"``{s.name}``" in nbprof.profile.__doc__


def test_magic_arguments_come_from_the_options():
    pytest.importorskip("IPython")
    from nbprof.magics.torchprof import TorchProfMagics

    parser = TorchProfMagics.torchprof.parser
    dests = {a.dest for a in parser._actions}
    assert {f.name for f in dataclasses.fields(ProfileOptions)} <= dests
    ns = parser.parse_args(["--steps", "3", "-a", "cpu", "--group-by", "shapes", "--record-shapes"])
    o = ProfileOptions.from_namespace(ns).validated()
    assert (o.steps, o.activities, o.group_by, o.record_shapes, o.row_limit) == (3, ("cpu",), "shapes", True, 20)


def test_renderer_contract():
    from nbprof.results.profile import ProfileResult

    r = ProfileResult()
    assert render(r, "text") == repr(r) and "nothing recorded" in render(r, "text")
    assert render(r, "html").startswith('<div class="nbprof-profile-result">')
    assert hasattr(renderer_for(r), "text") and hasattr(renderer_for(r), "html")
    with pytest.raises(ValueError, match="unknown format"):
        render(r, "pdf")
    with pytest.raises(TypeError, match="no nbprof renderer"):
        render(object())


def test_one_view_registry():
    pytest.importorskip("bokeh")
    import importlib

    from nbprof.viz import registry

    dashboard = importlib.import_module("nbprof.viz.dashboard")
    static = importlib.import_module("nbprof.viz.static")
    assert registry.VIEWS == ("overview", "operators", "kernels", "timeline", "memory", "critical_path",
                              "roofline", "modules", "call_stack")  # dashboard
    # multi-rank views (ranks=True) and the two-trace diff, registered beyond VIEWS: the dashboard adds the
    # multi-rank ones by registry.default_views (a job dataset's by registry.JobInput.default_views)
    assert registry.names() == (*registry.VIEWS, "distributed", "ranks_timeline", "ranks_overview", "diff")
    assert [n for n in registry.names() if registry.get(n).ranks] == ["distributed", "ranks_timeline", "ranks_overview"]
    # the views that take an nbprof.Job itself (its reductions, no full trace)
    assert [n for n in registry.names() if registry.get(n).job] == ["distributed", "ranks_overview"]
    assert dashboard.VIEWS == static.VIEWS == registry.VIEWS
    for name in registry.names():
        spec = registry.get(name)
        assert callable(spec.live_builder()) and callable(spec.static_builder()) and spec.title
    with pytest.raises(ValueError, match="unknown view"):
        registry.get("nope")
