"""Real-browser test of nbprof's viewers: JupyterLab + Debian's headless Chromium driven by Playwright.

Starts JupyterLab on 127.0.0.1 (token, temporary JUPYTER_*/settings/workspaces dirs, news fetching
off), writes a notebook that loads a real GPU trace (data/gpu, and the corpus BERT trace when
../shared is present), a fresh CPU profile taken in the notebook with torch.profiler, and a trace
whose names are HTML/JS injection attempts; runs it, waits for the Bokeh canvases, checks there are
no console errors and no injected element/script ran, zooms the timeline (wheel, then the W key) and
checks the kernel re-aggregated, and saves screenshots. Then opens an exported static HTML page with
every network request blocked and checks it renders and switches resolution on zoom.

Chromium: ``/usr/bin/chromium`` (``NBPROF_CHROMIUM`` overrides; ``make browser`` installs it with
apt). Playwright never downloads a browser here. Screenshots go to ``$NBPROF_SCREENSHOTS`` or the
test's tmp dir; ``NBPROF_UPDATE_DOCS=1`` also copies them to docs/.
(Steps and pitfalls: ../shared/notes/feasibility.md §4, jupyter-conventions.md §g.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from _support.chromium import block_network, luminance, open_notebook, shot_dir
from _support.jupyterlab import lab_errors
from _support.paths import CORPUS, ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GPU_TRACE = ROOT / "data" / "gpu" / "lm_mem.pt.trace.json.gz"
CORPUS_TRACE = CORPUS / "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
EVIL = '</script><img src=x onerror="window.__nbprof_xss=1">"\'&<b>bold</b>'


def _evil_trace_json(path: Path) -> None:
    """A tiny Kineto trace whose op, kernel, thread and shape strings are injection attempts."""
    ev = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": EVIL}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::" + EVIL, "pid": 1, "tid": 1, "ts": 1, "dur": 50,
         "args": {"External id": 5, "Input Dims": [[2, 2]], "Input type": [EVIL]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 5,
         "args": {"External id": 5, "correlation": 9}},
        {"ph": "X", "cat": "kernel", "name": "kern" + EVIL, "pid": 0, "tid": 7, "ts": 10, "dur": 30,
         "args": {"External id": 5, "correlation": 9, "device": 0, "stream": 7}},
    ]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))


NB_CELLS = [
    # 0: imports and traces
    """import os, tempfile, json
import nbprof
from nbprof import viz
GPU = nbprof.load({gpu!r})
CORPUS = nbprof.load({corpus!r}) if os.path.exists({corpus!r}) else None
EVIL = nbprof.load({evil!r})
print('loaded', len(GPU.events), None if CORPUS is None else len(CORPUS.events), len(EVIL.events))""",
    # 1: a fresh CPU profile
    """import torch
from torch.profiler import profile, ProfilerActivity, record_function, schedule
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
cpu_path = os.path.join(tempfile.mkdtemp(), 'fresh.pt.trace.json')
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
             schedule=schedule(wait=0, warmup=1, active=3)) as prof:
    for _ in range(4):
        loss = model(torch.randn(32, 64)).square().mean(); opt.zero_grad(); loss.backward(); opt.step()
        prof.step()
prof.export_chrome_trace(cpu_path)
CPU = nbprof.load(cpu_path)
print('cpu events', len(CPU.events))""",
    # 2..6: each view on the real GPU trace
    "tl = viz.timeline(GPU)\ntl",
    "viz.operators_view(GPU)",
    "viz.memory_view(GPU)",
    "viz.overview_view(GPU)",
    "viz.dashboard(GPU, start='timeline')",
    # 7: the corpus trace and the fresh CPU profile
    "viz.timeline(CORPUS) if CORPUS is not None else print('corpus absent')",
    "viz.timeline(CPU)",
    "viz.operators_view(CPU)",
    # 10: hostile strings through every view
    "viz.dashboard(EVIL, start='operators')",
    "viz.timeline(EVIL)",
    "print('ALL CELLS DONE', tl.updates)",
    # 13: re-run by the test after switching JupyterLab to its dark theme
    "from IPython.display import display\ntl_dark = viz.timeline(GPU)\ndisplay(tl_dark)\ndisplay(viz.operators_view(GPU))",
]


def _write_notebook(root: Path) -> Path:
    import nbformat

    evil = root / "evil.pt.trace.json"
    _evil_trace_json(evil)
    src = [c.format(gpu=str(GPU_TRACE), corpus=str(CORPUS_TRACE), evil=str(evil)) if "{" in c and "!r}" in c else c
           for c in NB_CELLS]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in src]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = root / "views.ipynb"
    nbformat.write(nb, p)
    return p


VIEW_SHOTS = ("timeline", "operators", "memory", "overview", "dashboard")


def _status_change(cell, before: str, seconds: float = 10.0) -> str:
    """The timeline's status text once it differs from ``before`` (or as it is after ``seconds``)."""
    text = _status_text(cell)
    for _ in range(int(seconds * 10)):
        if text != before:
            break
        time.sleep(0.1)
        text = _status_text(cell)
    return text


def _status_text(cell) -> str:
    return cell.get_by_text(re.compile(r"showing \d+ events individually")).first.inner_text()


def test_views_in_jupyterlab(lab, browser, tmp_path):
    nb = _write_notebook(lab["root"])
    shots = shot_dir(tmp_path)
    page = browser.new_page(viewport={"width": 1700, "height": 1100})
    errors = lab_errors(page)
    open_notebook(page, lab, nb)
    page.wait_for_selector("text=ALL CELLS DONE", timeout=300_000)
    cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")

    # every view cell shows a Bokeh canvas with a real size
    view_cells = {"timeline": 2, "operators": 3, "memory": 4, "overview": 5, "dashboard": 6, "cpu_timeline": 8,
                  "cpu_operators": 9, "evil_dashboard": 10, "evil_timeline": 11}
    if CORPUS_TRACE.exists():
        view_cells["corpus_timeline"] = 7
    for name, i in view_cells.items():
        cell = cells.nth(i)
        cell.scroll_into_view_if_needed()
        canvas = cell.locator(".jp-OutputArea-output canvas").first
        try:
            canvas.wait_for(state="visible", timeout=60_000)
        except Exception:  # report what the cell shows instead
            cell.screenshot(path=str(shots / f"FAILED_{name}.png"))
            pytest.fail(f"{name}: no visible canvas; cell text: {cell.inner_text()[:1500]!r}; errors: {errors}")
        for _ in range(100):
            box = canvas.bounding_box()
            if box and box["width"] > 100 and box["height"] > 50:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"{name}: canvas never got a size ({box})")
    # the operators view filled its table: the top operator of the GPU trace appears
    assert cells.nth(3).get_by_text(re.compile(r"showing \d+ of \d+ name groups")).count() >= 1
    # the memory view names the peak
    assert cells.nth(4).get_by_text(re.compile(r"GPU 0 peak")).count() >= 1
    # the overview's stacked bars and the dashboard's selector
    assert cells.nth(6).get_by_text("overview", exact=True).count() >= 1
    # the dashboard offers every registered trace view, the roofline (issue 22) and the critical path (issue 19) too
    assert cells.nth(6).get_by_text("roofline", exact=True).count() >= 1
    assert cells.nth(6).get_by_text("critical_path", exact=True).count() >= 1

    # screenshots of each view (light theme, before any interaction)
    for name in VIEW_SHOTS:
        out = cells.nth(view_cells[name]).locator(".jp-OutputArea").first
        out.scroll_into_view_if_needed()
        out.screenshot(path=str(shots / f"{name}.png"))
        assert (shots / f"{name}.png").stat().st_size > 5000
    if CORPUS_TRACE.exists():
        out = cells.nth(view_cells["corpus_timeline"]).locator(".jp-OutputArea").first
        out.scroll_into_view_if_needed()
        out.screenshot(path=str(shots / "timeline_corpus.png"))

    # zoom the GPU timeline with the mouse wheel: the kernel re-aggregates and the browser redraws
    tl_cell = cells.nth(2)
    tl_cell.scroll_into_view_if_needed()
    canvas = tl_cell.locator(".jp-OutputArea-output canvas").first
    before_text = _status_text(tl_cell)
    before_png = canvas.screenshot()
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.5)
    for _ in range(6):
        page.mouse.wheel(0, -300)
        time.sleep(0.15)
    after_text = _status_change(tl_cell, before_text)
    assert after_text != before_text, "timeline did not re-aggregate after a wheel zoom"
    time.sleep(0.5)
    assert canvas.screenshot() != before_png, "timeline canvas did not change after zoom"
    # Perfetto-style keys: W zooms in further (and re-aggregates)
    page.keyboard.press("w")
    w_text = _status_change(tl_cell, after_text)
    assert w_text != after_text, "W key did not zoom the timeline"

    # the hostile names are shown as text in the operators table (dashboard cell) and in the tooltips
    assert cells.nth(10).get_by_text(re.compile(r"onerror=")).count() >= 1
    evil_cell = cells.nth(11)
    evil_cell.scroll_into_view_if_needed()
    time.sleep(0.5)
    eb = evil_cell.locator(".jp-OutputArea-output canvas").first.bounding_box()
    # (JupyterLab renders Bokeh tooltips outside the cell: count page-wide, before vs during the hover)
    evil_text = re.compile(r"aten::</script><img src=x onerror=")
    page.mouse.move(5, 5)
    time.sleep(0.3)
    before = page.get_by_text(evil_text).count()
    shown_as_text = False
    for fy in np.arange(0.2, 0.75, 0.05):
        page.mouse.move(eb["x"] + eb["width"] * 0.3, eb["y"] + eb["height"] * fy, steps=3)
        time.sleep(0.4)
        if page.get_by_text(evil_text).count() > before:
            shown_as_text = True
            break
    if not shown_as_text:
        evil_cell.screenshot(path=str(shots / "FAILED_hover.png"))
    assert shown_as_text, f"no tooltip showed the hostile name as text (canvas {eb})"
    page.mouse.move(5, 5)

    # nothing from the hostile trace became markup or ran
    assert page.evaluate("() => window.__nbprof_xss === undefined")
    assert page.locator("img[src='x']").count() == 0
    assert cells.nth(11).get_by_text(re.compile(r"showing \d+ events individually")).count() >= 1
    assert not [e for e in errors if "nbprof" in e or "Bokeh" in e or "bokeh" in e or "pageerror" in e], errors
    assert not errors, errors

    tl_cell.locator(".jp-OutputArea").first.screenshot(path=str(shots / "timeline_zoomed.png"))

    # JupyterLab dark theme: a timeline created now follows it (auto theme, browser side)
    light_lum = luminance(canvas.screenshot())
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=60_000)
    dark_cell = cells.nth(13)
    dark_cell.scroll_into_view_if_needed()
    dark_cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    dark_canvas = dark_cell.locator(".jp-OutputArea-output canvas").first
    dark_lum = light_lum
    for _ in range(200):
        try:
            if dark_canvas.is_visible():
                dark_lum = luminance(dark_canvas.screenshot())
                if dark_lum < 90:
                    break
        except Exception:  # the output is being replaced
            pass
        time.sleep(0.2)
    assert light_lum > 180 and dark_lum < 90, (light_lum, dark_lum)
    outs = dark_cell.locator(".jp-Cell-outputArea > .jp-OutputArea-child")  # not the views' nested loader outputs
    outs.last.locator("canvas").first.wait_for(state="visible", timeout=60_000)
    time.sleep(1.0)
    outs.nth(outs.count() - 2).screenshot(path=str(shots / "timeline_dark.png"))
    ops_png = outs.last.screenshot(path=str(shots / "operators_dark.png"))
    assert luminance(ops_png) < 90, luminance(ops_png)  # chart, table and inputs all dark
    assert not errors, errors
    if os.environ.get("NBPROF_UPDATE_DOCS"):
        docs = ROOT / "docs"
        docs.mkdir(exist_ok=True)
        for name in VIEW_SHOTS + ("timeline_zoomed", "timeline_dark", "operators_dark", "timeline_corpus"):
            if (shots / f"{name}.png").exists():
                shutil.copyfile(shots / f"{name}.png", docs / f"{name}.png")
    page.close()


def test_static_html_offline(browser, tmp_path):
    import nbprof
    from nbprof import viz

    shots = shot_dir(tmp_path)
    trace = nbprof.load(GPU_TRACE)
    path = viz.to_html(trace, tmp_path / "report.html")
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True, accept_downloads=True)
    blocked = block_network(ctx)
    page = ctx.new_page()
    errors = lab_errors(page)
    page.goto(path.as_uri())
    page.wait_for_function("() => window.Bokeh !== undefined && Bokeh.documents.length > 0", timeout=60_000)
    canv = page.locator("canvas")
    canv.first.wait_for(state="visible", timeout=60_000)
    assert canv.count() >= 4  # overview, operators chart, timeline, memory
    assert not blocked, f"static page tried the network: {blocked[:5]}"
    levels = """() => { const doc = Bokeh.documents[0];
        return [...doc.all_models].filter((m) => m.data_source !== undefined && m.data_source.name
                && m.data_source.name.startsWith('nbprof_level')).map((r) => r.visible); }"""
    vis0 = page.evaluate(levels)
    assert len(vis0) >= 2 and vis0[0] and not any(vis0[1:]), vis0
    # zoom the timeline in the browser only (no kernel): a finer pre-aggregated level takes over
    page.evaluate("""() => { const doc = Bokeh.documents[0];
        const tl = [...doc.all_models].find((m) => m.name === 'nbprof_timeline');
        const p = tl.children[0]; const xr = p.x_range; const mid = (xr.start + xr.end) / 2;
        const span = (xr.end - xr.start) / 40; xr.setv({start: mid - span / 2, end: mid + span / 2}); }""")
    for _ in range(50):
        vis1 = page.evaluate(levels)
        if vis1 != vis0:
            break
        time.sleep(0.1)
    assert vis1 != vis0 and not vis1[0], vis1
    # select a GPU kernel (as a click does): the flow to its launch appears and its CPU op is named
    res = page.evaluate("""() => { const doc = Bokeh.documents[0];
        const srcs = [...doc.all_models].filter((m) => m.name && m.name.startsWith('nbprof_level'));
        const src = srcs[srcs.length - 1]; const d = src.data;
        let i = -1; for (let k = 0; k < d.lx.length; k++) { if (!Number.isNaN(d.lx[k])) { i = k; break; } }
        if (i < 0) return null;
        src.selected.indices = [i]; return d.lx[i]; }""")
    assert res is not None
    page.wait_for_function("""() => [...Bokeh.documents[0].all_models].find((m) => m.name === 'nbprof_flow')
        .data.x0.length === 1""", timeout=10_000)
    res = page.evaluate("""(lx) => { const doc = Bokeh.documents[0];
        const flow = [...doc.all_models].find((m) => m.name === 'nbprof_flow');
        const info = [...doc.all_models].find((m) => m.name === 'nbprof_info');
        return {segments: flow.data.x0.length, text: info.text, x0: flow.data.x0[0], lx: lx}; }""", res)
    assert res is not None and res["segments"] == 1 and res["x0"] == res["lx"], res
    assert "launched by CPU op: aten::" in res["text"], res
    # operators view, browser-side only: filter, then group by shapes
    status = re.compile(r"showing \d+ of \d+ name groups$")
    page.get_by_text(status).first.wait_for(timeout=10_000)
    page.locator("input[placeholder='name or shape contains...']").first.fill("aten::mm")
    page.keyboard.press("Enter")
    page.get_by_text(re.compile(r'showing [1-9]\d* of \d+ name groups matching "aten::mm"')).first.wait_for(
        timeout=10_000)
    page.locator("select").first.select_option("shapes")
    page.get_by_text(re.compile(r'showing [1-9]\d* of \d+ shapes groups matching "aten::mm"')).first.wait_for(
        timeout=10_000)
    # the CSV button downloads exactly the filtered rows
    with page.expect_download(timeout=10_000) as dl:
        page.get_by_role("button", name="CSV").first.click()
    lines = Path(dl.value.path()).read_text().splitlines()
    assert lines[0].startswith("name,key,cat,count,self_host_us")
    assert len(lines) > 1 and all("aten::mm" in ln for ln in lines[1:]), lines[:3]
    page.screenshot(path=str(shots / "static.png"), full_page=False)
    assert not errors, errors
    ctx.close()


def test_static_tooltip_shows_hostile_names_as_text(browser, tmp_path):
    import nbprof
    from nbprof import viz

    evil = tmp_path / "evil.pt.trace.json"
    _evil_trace_json(evil)
    out = viz.to_html(nbprof.load(evil), tmp_path / "evil.html", views=["timeline"])
    ctx = browser.new_context(viewport={"width": 1400, "height": 900}, offline=True)
    page = ctx.new_page()
    errors = lab_errors(page)
    page.goto(out.as_uri())
    canvas = page.locator("canvas").first
    canvas.wait_for(state="visible", timeout=60_000)
    box = canvas.bounding_box()
    shown = False
    for fy in np.arange(0.1, 0.8, 0.05):
        page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * fy, steps=2)
        time.sleep(0.1)
        if page.get_by_text(re.compile(r"aten::</script><img src=x onerror=")).count():
            shown = True
            break
    assert shown, "no tooltip showed the hostile operator name as text"
    assert page.evaluate("() => window.__nbprof_xss === undefined")
    assert page.locator("img[src='x']").count() == 0
    assert not errors, errors
    ctx.close()
