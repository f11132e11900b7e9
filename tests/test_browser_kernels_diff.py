"""The GPU Kernel and Diff views (issue 21) as static pages in Debian's headless Chromium, network cut off:
they draw, their tables show human units, hostile kernel names stay text, and no console error appears."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _support.chromium import open_page
from _support.paths import DATA

pytestmark = [pytest.mark.browser, pytest.mark.slow]

EVIL = '</script><img src=x onerror="window.__nbprof_xss=1">"\'&<b>bold</b>'




def _evil_gpu_trace(path: Path) -> None:
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::" + EVIL, "pid": 1, "tid": 1, "ts": 1, "dur": 50,
         "args": {"External id": 5}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 5,
         "args": {"External id": 5, "correlation": 9}},
        {"ph": "X", "cat": "kernel", "name": "kern" + EVIL, "pid": 0, "tid": 7, "ts": 10, "dur": 30,
         "args": {"External id": 5, "correlation": 9, "device": 0, "stream": 7, "grid": [4, 1, 1],
                  "block": [128, 1, 1], "blocks per SM": 0.05, "est. achieved occupancy %": 12}},
    ]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))


def test_kernels_view_static_page(browser, tmp_path):
    import nbprof
    from nbprof import viz

    t = nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")
    out = viz.to_html(t, tmp_path / "kernels.html", views=["kernels"])
    ctx, page, errors, blocked = open_page(browser, out.as_uri())
    canvas = page.locator("canvas").first
    canvas.wait_for(state="visible", timeout=60_000)
    box = canvas.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 100
    assert page.get_by_text(re.compile(r"GPU 0: GPU utilization \d+\.\d\d %, est\. SM efficiency")).count() == 1
    assert page.get_by_text(re.compile(r"Kernels by launching operator: showing \d+ of \d+ rows")).count() == 1
    # the tables hold formatted durations (nbprof.units), e.g. "1.23 µs" or "4.567 ms"
    cells = page.locator(".slick-cell").all_inner_texts()
    assert any(re.fullmatch(r"\d+(\.\d+)? (ns|µs|ms|s)", c) for c in cells), cells[:20]
    assert any(c.startswith("aten::") for c in cells)
    assert not blocked and not errors, (blocked, errors)
    page.screenshot(path=str(tmp_path / "kernels.png"))
    ctx.close()


def test_kernels_view_shows_hostile_names_as_text_and_cpu_trace_says_no_kernels(browser, tmp_path):
    import nbprof
    from nbprof import viz

    evil = tmp_path / "evil.pt.trace.json"
    _evil_gpu_trace(evil)
    out = viz.to_html(nbprof.load(evil), tmp_path / "evil.html", views=["kernels"])
    ctx, page, errors, _blocked = open_page(browser, out.as_uri())
    page.locator("canvas").first.wait_for(state="visible", timeout=60_000)
    page.get_by_text("kern</script><img src=x onerror=", exact=False).first.wait_for(timeout=10_000)
    assert page.evaluate("() => window.__nbprof_xss === undefined")
    assert page.locator("img[src='x']").count() == 0 and page.locator("b", has_text="bold").count() == 0
    assert not errors, errors
    ctx.close()
    cpu = viz.to_html(nbprof.load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz"), tmp_path / "cpu.html", views=["kernels"])
    ctx, page, errors, _blocked = open_page(browser, cpu.as_uri())
    page.get_by_text("No device kernels in this trace").first.wait_for(timeout=30_000)
    assert not errors, errors
    ctx.close()


def test_diff_view_static_page(browser, tmp_path):
    import nbprof
    from nbprof import viz

    a = nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")
    b = nbprof.load(DATA / "gpu" / "cnn_nw4_prep.pt.trace.json.gz")
    out = viz.to_html(viz.compare_view(a, b), tmp_path / "diff.html")
    ctx, page, errors, blocked = open_page(browser, out.as_uri())
    canvas = page.locator("canvas").first
    canvas.wait_for(state="visible", timeout=60_000)
    box = canvas.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 100
    summary = page.get_by_text(re.compile(r"Mean step time before 24\.244 ms, after 5\.617 ms: delta -18\.627 ms"))
    assert summary.count() == 1 and "negative = faster" in summary.inner_text()
    # the waterfall: before -> per-category change -> after, DataLoader the big green drop
    bars = page.evaluate("""() => { const d = [...Bokeh.documents[0].all_models]
        .find((m) => m.name === 'nbprof_diff_waterfall').data;
        return {label: [...d.label], text: [...d.text], color: [...d.color]}; }""")
    assert bars["label"][0] == "before step" and bars["label"][-1] == "after step"
    i = bars["label"].index("\u0394 DataLoader")
    assert bars["text"][i] == "-17.847 ms" and bars["color"][i] == "#2ca02c"
    cells = page.locator(".slick-cell").all_inner_texts()
    assert any(c.startswith("enumerate(DataLoader)#") for c in cells)
    assert any(re.fullmatch(r"[+-]\d+(\.\d+)? (ns|µs|ms|s)", c) for c in cells), cells[:20]
    assert not blocked and not errors, (blocked, errors)
    page.screenshot(path=str(tmp_path / "diff.png"))
    ctx.close()
