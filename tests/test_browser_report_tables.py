"""Issue 20 in the browser: the report's tables sort numerically (itables, offline) and a finding's link zooms the
timeline to its evidence; headless Debian Chromium, network cut off, no console errors."""

from __future__ import annotations

import pytest
from _support.chromium import open_page
from _support.paths import DATA

from nbprof.report import Artefacts, build_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    pytest.importorskip("itables", reason="itables (the report extra) not installed")
    out = tmp_path_factory.mktemp("rep")
    return build_report(Artefacts(trace=str(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")), out, progress=False,
                        notebooks=["01_system_nsys.ipynb", "02_operators_pytorch.ipynb"])


def _numbers(texts: list[str]) -> list[float]:
    return [float(t.replace(",", "")) for t in texts if t.strip()]


def test_column_header_click_sorts_numerically(browser, report):
    ctx, page, errors, blocked = open_page(browser, report.as_uri())
    page.wait_for_function("() => document.querySelectorAll('table.dataTable').length >= 5", timeout=90_000)
    # the kernel table: "total (ms)" values of very different magnitudes (string order != numeric order)
    tbl = page.locator("table.dataTable", has=page.locator("caption", has_text="Kernels")).first
    tbl.scroll_into_view_if_needed()
    heads = [h.strip() for h in tbl.locator("thead th").all_inner_texts()]
    col = heads.index("total (ms)") + 1
    cells = tbl.locator(f"tbody tr td:nth-child({col})")
    shown = _numbers(cells.all_inner_texts())
    assert len(shown) >= 5
    tbl.locator("thead th").nth(col - 1).click()
    page.wait_for_timeout(300)
    up = _numbers(cells.all_inner_texts())
    tbl.locator("thead th").nth(col - 1).click()
    page.wait_for_timeout(300)
    down = _numbers(cells.all_inner_texts())
    assert up == sorted(up) and down == sorted(down, reverse=True), (up, down)
    assert set(up) <= set(shown) | set(down) and up != down
    # the search box filters and the download buttons are there
    assert tbl.locator("xpath=ancestor::div[contains(@class,'dt-container')]").locator(
        "button", has_text="CSV").count() == 1
    assert not blocked, blocked[:5]
    assert not errors, errors
    ctx.close()


def test_finding_link_zooms_the_timeline(browser, report):
    ranges = """() => { for (const d of Bokeh.documents) { const l = d.get_model_by_name('nbprof_timeline');
                  if (l) { const r = l.children[0].x_range; return [r.start, r.end]; } } return null; }"""
    ctx, page, errors, blocked = open_page(browser, report.as_uri())
    page.wait_for_function("() => window.Bokeh !== undefined && Bokeh.documents.length >= 2", timeout=90_000)
    page.wait_for_function(ranges.replace("() =>", "() => !!(() =>") + ")()", timeout=60_000)
    before = page.evaluate(ranges)
    link = page.locator("a.nbprof-zoom").first
    assert link.is_visible() and "show on the timeline" in link.inner_text()
    x0, x1 = float(link.get_attribute("data-x0-ms")), float(link.get_attribute("data-x1-ms"))
    assert (x1 - x0) < 0.9 * (before[1] - before[0])  # a real zoom, not the whole trace
    link.click()
    page.wait_for_timeout(300)
    after = page.evaluate(ranges)
    assert after != before
    assert after[0] <= x0 + 1e-9 and after[1] >= x1 - 1e-9 and (after[1] - after[0]) <= (x1 - x0) * 1.01
    assert "#nbprof-timeline" in page.url
    assert not blocked, blocked[:5]
    assert not errors, errors
    ctx.close()
