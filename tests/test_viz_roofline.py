"""Roofline view: points and roofs in the static HTML (browser-free), trace names escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nbprof
from nbprof import viz
from nbprof.viz import registry

pytest.importorskip("bokeh")

DATA = Path(__file__).resolve().parents[1] / "data"
EVIL = "</script><img src=x onerror=\"window.__x=1\">'&"


def test_roofline_static_html_h200(tmp_path):
    t = nbprof.load(DATA / "gpu" / "lm_h200.pt.trace.json.gz")
    from nbprof.viz.roofline import roofline_tables

    tab = roofline_tables(t)
    assert tab["level"] == "kernels" and len(tab["points"]) > 3 and tab["peaks"].key == "H200-SXM"
    out = viz.to_html(t, tmp_path / "roof.html", views=["roofline"])
    html = out.read_text()
    assert "nbprof_roofline_points" in html and "nbprof_roof_fp32" in html
    import re

    first = re.split(r"[<>&'\"]", str(tab["points"]["name"].iloc[0]))[0][-30:]
    assert len(first) > 5 and first in html  # the longest kernel is a point
    assert registry.get("roofline").title == "Roofline"


def test_roofline_escapes_names(tmp_path):
    import torch

    with torch.profiler.profile(record_shapes=True) as p:
        torch.mm(torch.randn(64, 64), torch.randn(64, 64))
    path = tmp_path / "evil.pt.trace.json"
    p.export_chrome_trace(str(path))
    raw = json.loads(path.read_text())
    mm = next(e for e in raw["traceEvents"] if e.get("name") == "aten::mm")
    ext = mm["args"].get("External id", 77)
    mm["args"]["External id"] = ext
    # a device kernel with an untrusted name, launched by the mm
    raw["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "gemm" + EVIL, "pid": 0, "tid": 7,
                               "ts": mm["ts"] + 1, "dur": 5, "args": {"device": 0, "stream": 7,
                                                                     "External id": ext, "correlation": 9}})
    raw["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]
    path.write_text(json.dumps(raw))
    t = nbprof.load(path)
    from nbprof.viz.roofline import roofline_tables, roofline_view

    tab = roofline_tables(t)
    assert tab["level"] == "kernels" and len(tab["points"]) == 1 and tab["points"]["flops"].iloc[0] == 2 * 64**3
    assert repr(roofline_view(t)).startswith("nbprof roofline: 1 of 1 kernels")
    out = viz.to_html(t, tmp_path / "r.html", views=["roofline"])
    html = out.read_text()
    assert "<img src=x" not in html and "</script><img" not in html
    assert "nbprof_roofline_points" in html and "nbprof_roof_fp32" in html
    # operators level on the same trace, and a device not in the table: no roof, a note
    raw["deviceProperties"] = [{"id": 0, "name": "Imaginary GPU", "numSms": 1}]
    path.write_text(json.dumps(raw))
    tab = roofline_tables(nbprof.load(path), level="operators")
    assert list(tab["points"]["name"]) == ["aten::mm"]
    out = viz.to_html(nbprof.load(path), tmp_path / "r2.html", views=["roofline"])
    assert "no roof drawn" in out.read_text()
