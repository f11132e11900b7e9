"""The live dashboard's "show on the timeline" buttons in JupyterLab (issue 20).

A real JupyterLab + Debian's headless Chromium (the ``lab``/``browser`` fixtures of test_browser.py): runs
``d = tr.show()`` on the V100 DataLoader trace (``data/gpu/cnn_nw0_prep``), clicks the first finding's button
under the verdict, and checks that the timeline tab is selected, its canvas draws, and the x range BokehJS
shows (ms) contains the finding's evidence window (``evidence.finding_window``), then that a second finding's
button moves it there; no console error.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from _support.chromium import open_notebook, shot_dir
from _support.jupyterlab import lab_errors
from _support.paths import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TRACE = ROOT / "data" / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"
OUT = ".jp-Cell-outputArea > .jp-OutputArea-child"

# the x range of the newest rendered timeline layout (documents of re-rendered views stay listed, emptied)
_RANGE = """() => { const docs = (window.Bokeh && Bokeh.documents) || [];
  for (let i = docs.length - 1; i >= 0; i--) {
    const lay = docs[i].get_model_by_name('nbprof_timeline');
    if (lay && docs[i].roots().length) { const xr = lay.children[0].x_range; return [xr.start, xr.end]; } }
  return null; }"""


def _windows() -> list[tuple[float, float]]:
    import nbprof
    from nbprof.analysis import advisor, evidence

    tr = nbprof.load(TRACE)
    out = []
    for f in [f for f in advisor.advise(tr) if f.quantified][:3]:
        w = evidence.finding_window(tr, f)
        assert w is not None
        out.append((w[0] / 1e6, w[1] / 1e6))
    return out


def _write_nb(root: Path) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"import nbprof\ntr = nbprof.load({str(TRACE)!r})\nd = tr.show()\nd")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = root / f"links_{uuid.uuid4().hex[:6]}.ipynb"
    nbformat.write(nb, p)
    return p


def _wait_range(page, want: tuple[float, float], errors: list[str]) -> list[float]:
    got = None
    for _ in range(300):
        got = page.evaluate(_RANGE)
        if got and got[0] <= want[0] + 1e-6 and got[1] >= want[1] - 1e-6 and got[1] - got[0] < 1.5 * (want[1] - want[0]):
            return got
        time.sleep(0.2)
    pytest.fail(f"the timeline's x range {got} does not show {want}; errors: {errors}")


def test_finding_button_selects_the_timeline_and_zooms_to_the_evidence(lab, browser, tmp_path):
    windows = _windows()
    nb = _write_nb(lab["root"])
    shots = shot_dir(tmp_path)
    page = browser.new_page(viewport={"width": 1700, "height": 1600})
    errors = lab_errors(page)
    open_notebook(page, lab, nb)
    cell = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first
    out = cell.locator(OUT).filter(has=page.locator("button.nbprof-zoom")).first
    buttons = out.locator("button.nbprof-zoom")
    buttons.first.wait_for(state="visible", timeout=120_000)
    try:
        cell.locator(".jp-OutputArea-output canvas").first.wait_for(state="visible", timeout=90_000)  # the overview
    except Exception:  # report what the page shows instead
        page.screenshot(path=str(shots / "FAILED_dashboard.png"))
        pytest.fail(f"no canvas ({cell.locator('canvas').count()} in the cell); errors: {errors}")
    assert buttons.count() == 5  # 2 findings ranked, 3 listed apart (the 54 ns memcpy first; test_dashboard_links.py)
    assert buttons.first.inner_text().strip() == "1. show on the timeline (13.742 ms to 57.318 ms)"
    assert page.evaluate(_RANGE) is None  # no timeline yet (built on first use)

    buttons.first.click()
    timeline_tab = out.get_by_role("button", name="timeline", exact=True)
    for _ in range(300):
        if "mod-active" in (timeline_tab.get_attribute("class") or ""):
            break
        time.sleep(0.2)
    assert "mod-active" in (timeline_tab.get_attribute("class") or ""), "the timeline tab is not selected"
    out.locator(".nbprof-timeline").first.wait_for(state="visible", timeout=90_000)
    got = _wait_range(page, windows[0], errors)
    assert got[0] == pytest.approx(windows[0][0]) and got[1] == pytest.approx(windows[0][1])
    out.screenshot(path=str(shots / "dashboard_finding_link.png"))

    # the third finding (the memcpy finding's pageable copies): the same timeline moves there
    buttons.nth(2).click()
    got = _wait_range(page, windows[2], errors)
    assert got[1] - got[0] == pytest.approx(windows[2][1] - windows[2][0], rel=1e-6)
    text = out.inner_text()
    assert "Failed to create view" not in text and "javascript error" not in text.lower(), text[:2000]
    assert not errors, errors
    page.close()
