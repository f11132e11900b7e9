"""The `nbprof report` page renders in headless Chromium with the network cut off (issue: report opens offline)."""

from __future__ import annotations

import os
import re

import pytest
from _support.chromium import CHROMIUM, LAUNCH_ARGS, block_network, need_chromium
from _support.paths import DATA, ROOT

from nbprof.report import Artefacts, build_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]



def test_report_renders_offline(tmp_path):
    need_chromium()
    from playwright import sync_api
    art = Artefacts(trace=str(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"))
    html = build_report(art, tmp_path, progress=False, notebooks=["01_system_nsys.ipynb", "02_operators_pytorch.ipynb"])
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
            blocked = block_network(ctx)
            page = ctx.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(html.as_uri())
            # step 1 shows overview + timeline, step 2 operators + memory: one Bokeh document each
            page.wait_for_function("() => window.Bokeh !== undefined && Bokeh.documents.length >= 2", timeout=90_000)
            canv = page.locator("canvas")
            canv.first.wait_for(state="visible", timeout=60_000)
            assert canv.count() >= 3
            box = canv.first.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 50
            # the table of contents is visible page text and links to each step
            toc = page.get_by_role("link", name="Step 2 - Operators and kernels (PyTorch Profiler)")
            assert toc.count() == 1 and toc.is_visible()
            assert page.get_by_text("Step 2 — Which operators and kernels? (PyTorch Profiler)").count() >= 1
            # the first screen states the bound and what to fix first (issue 20: verdict first)
            verdict = page.locator(".nbprof-verdict").first
            assert verdict.is_visible() and "DataLoader-bound" in verdict.inner_text()
            vb = verdict.bounding_box()
            assert vb and vb["y"] + vb["height"] < 1000
            fix = page.get_by_text("What to fix first").first
            fb = fix.bounding_box()
            assert fb and fb["y"] < 1000
            # step 2 has the compute-efficiency section (issue 22): MFU per step and the roofline, drawn
            page.wait_for_function("() => Bokeh.documents.length >= 3", timeout=60_000)
            assert page.get_by_text(re.compile(r"MFU per step")).count() >= 1
            eff = page.get_by_text("Compute efficiency against the device's peak").first
            eff.scroll_into_view_if_needed()
            ey = eff.bounding_box()["y"]
            my = page.get_by_role("heading", name="Memory", exact=True).first.bounding_box()["y"]  # the next section
            roof = [b for b in (canv.nth(i).bounding_box() for i in range(canv.count()))
                    if b and ey < b["y"] < my and b["width"] > 100 and b["height"] > 50]
            assert roof, "no drawn canvas between the compute-efficiency and memory headings (the roofline)"
            page.screenshot(path=str(tmp_path / "report.png"))
            if os.environ.get("NBPROF_UPDATE_DOCS") == "1":
                page.screenshot(path=str(ROOT / "docs" / "report_first_screen.png"))
            assert not blocked, f"the report tried the network: {blocked[:5]}"
            assert not errors, errors
        finally:
            browser.close()
