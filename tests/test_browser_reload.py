"""Widgets survive a page reload, and the dashboard reads well in JupyterLab light and dark (issue 20).

A real JupyterLab + Debian's headless Chromium (the ``lab``/``browser`` fixtures of test_browser.py):
runs ``d = tr.show()`` (the dashboard) on a real GPU trace, saves the notebook and reloads the page (the
kernel keeps running, the page loses BokehJS), checks the saved output draws again from the kernel's widget
state, displays the *existing* widget again and checks its Bokeh canvas draws too, with no "Failed to create
view" and no console error. Then switches JupyterLab to its dark theme, shows a
dashboard on the operators view and checks the table text differs enough from its background
(WCAG contrast ratio of the computed colours). Screenshots (light and dark) go to the test's tmp dir
(``NBPROF_SCREENSHOTS`` overrides).
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from pathlib import Path

import pytest
from _support.chromium import luminance, open_notebook, shot_dir, sized_canvas
from _support.jupyterlab import lab_errors
from _support.paths import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GPU_TRACE = ROOT / "data" / "gpu" / "lm_mem.pt.trace.json.gz"

CELLS = [
    "import nbprof\ntr = nbprof.load({gpu!r})\nd = tr.show()\nd",
    "d",
    "print('REDISPLAY DONE')",
    "d2 = tr.show(start='operators')\nd2",
]

# the colours of the element and of the first non-transparent box behind it (through shadow roots)
_COLOURS = """(el) => {
  const rgba = (s) => { const m = s.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(',').map(Number); return p.length === 4 ? p : [...p, 1]; };
  let node = el, bg = null;
  while (node) {
    if (node.nodeType === 1) { const c = rgba(getComputedStyle(node).backgroundColor);
      if (c && c[3] > 0.5) { bg = c; break; } }
    node = node.parentNode || (node.host ? node.host : null);
    if (node && node.nodeType === 11) { node = node.host; }
  }
  return {fg: rgba(getComputedStyle(el).color), bg: bg || [255, 255, 255, 1], text: el.textContent};
}"""


def _contrast(fg, bg) -> float:
    """WCAG 2 contrast ratio of two sRGB colours (https://www.w3.org/TR/WCAG21/#dfn-contrast-ratio)."""

    def lum(c):
        ch = []
        for v in c[:3]:
            v = v / 255
            ch.append(v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4)
        return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]

    a, b = sorted((lum(fg), lum(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def _write_nb(root: Path) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.format(gpu=str(GPU_TRACE))) for c in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = root / f"reload_{uuid.uuid4().hex[:6]}.ipynb"
    nbformat.write(nb, p)
    return p


def _open(page, lab, nb: Path, ws: str) -> None:
    open_notebook(page, lab, nb, run_all=False, workspace=ws)


def _run_cell(page, i: int) -> None:
    """Run cell ``i`` alone (select it, then notebook:run-cell)."""
    page.evaluate("""(i) => { const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = i; nb.deselectAll();
        return window.jupyterapp.commands.execute('notebook:run-cell'); }""", i)


def _wait_canvas(cell, what: str, errors: list[str], shots: Path):
    canvas = cell.locator(".jp-OutputArea-output canvas").first
    try:
        canvas.wait_for(state="visible", timeout=90_000)
    except Exception:  # report what the cell shows instead
        cell.screenshot(path=str(shots / f"FAILED_{what}.png"))
        pytest.fail(f"{what}: no visible canvas; cell text: {cell.inner_text()[:1500]!r}; errors: {errors}")
    return sized_canvas(canvas, what)


def _shoot_views(page, cell, theme: str, shots: Path, errors: list[str]) -> list[str]:
    """Select each view of the dashboard in ``cell`` (its toggle buttons), wait for it, screenshot it."""
    from nbprof.viz import registry

    names = [n for n in registry.names() if cell.get_by_role("button", name=n, exact=True).count()]
    assert {"overview", "operators", "timeline", "memory"} <= set(names), names
    for name in names:
        cell.get_by_role("button", name=name, exact=True).first.click()
        # a plot draws a canvas; a table-only view (modules, call_stack) draws SlickGrid cells and no canvas
        view = f".nbprof-view.nbprof-{name}"
        shown = cell.locator(f"{view} canvas, {view} .slick-cell, i:has-text('{name} view not available')")
        with contextlib.suppress(Exception):
            shown.first.wait_for(state="visible", timeout=60_000)
        time.sleep(1.5)
        cell.locator(".jp-OutputArea").first.screenshot(path=str(shots / f"dashboard_{name}_{theme}.png"))
    assert not errors, errors
    return names


def test_dashboard_survives_page_reload_and_reads_in_light_and_dark(lab, browser, tmp_path):
    nb = _write_nb(lab["root"])
    shots = shot_dir(tmp_path)
    page = browser.new_page(viewport={"width": 1700, "height": 2400})  # tall: whole dashboard views in a shot
    errors = lab_errors(page)
    ws = uuid.uuid4().hex[:8]
    _open(page, lab, nb, ws)
    cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    _run_cell(page, 0)
    _wait_canvas(cells.nth(0), "dashboard", errors, shots)
    cells.nth(0).locator(".jp-OutputArea").first.screenshot(path=str(shots / "dashboard_light.png"))
    assert not errors, errors

    # save (the output keeps the widget's model id), then reload: same kernel (the session survives), a new
    # page without BokehJS, as when a notebook whose kernel still runs is opened again
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=60_000)
    page.reload(timeout=90_000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=60_000)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=120_000)
    cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    # the saved output of the first cell renders again from the kernel's widget state
    _wait_canvas(cells.nth(0), "restored_dashboard", errors, shots)
    assert "Failed to create view" not in cells.nth(0).inner_text()
    _run_cell(page, 1)  # the existing widget, displayed again
    _run_cell(page, 2)
    page.wait_for_selector(".jp-OutputArea >> text=REDISPLAY DONE", timeout=120_000)
    cell = cells.nth(1)
    _wait_canvas(cell, "redisplayed_dashboard", errors, shots)
    text = cell.inner_text()
    assert "Failed to create view" not in text and "javascript error" not in text.lower(), text[:2000]
    assert page.evaluate("() => window.Bokeh !== undefined && Bokeh.Tables !== undefined")
    # its verdict (first screen) is there, with numbers
    assert cell.get_by_text(re.compile(r"-bound: .*\d+% of each step")).count() >= 1
    cell.locator(".jp-OutputArea").first.screenshot(path=str(shots / "dashboard_after_reload.png"))
    assert not errors, errors

    # light theme: the operators table text against its background
    _run_cell(page, 3)
    ops = cells.nth(3)
    _wait_canvas(ops, "operators_light", errors, shots)
    slick = ops.locator(".slick-cell").first
    slick.wait_for(state="visible", timeout=60_000)
    light = slick.evaluate(_COLOURS)
    assert _contrast(light["fg"], light["bg"]) >= 4.5, light
    ops.locator(".jp-OutputArea").first.screenshot(path=str(shots / "dashboard_operators_light.png"))
    _shoot_views(page, ops, "light", shots, errors)

    # dark theme: a dashboard shown now is dark, and its table and verdict stay readable
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=60_000)
    _run_cell(page, 3)
    time.sleep(1.0)
    _wait_canvas(ops, "operators_dark", errors, shots)
    slick = ops.locator(".slick-cell").first
    slick.wait_for(state="visible", timeout=60_000)
    dark = {}
    for _ in range(100):
        dark = slick.evaluate(_COLOURS)
        if dark["bg"] and sum(dark["bg"][:3]) < 3 * 90:
            break
        time.sleep(0.2)
    assert sum(dark["bg"][:3]) < 3 * 90, dark  # the table went dark
    assert _contrast(dark["fg"], dark["bg"]) >= 4.5, dark
    verdict = ops.locator(".nbprof-verdict").first
    vc = verdict.evaluate(_COLOURS)
    assert _contrast(vc["fg"], vc["bg"]) >= 4.5, vc
    png = ops.locator(".jp-OutputArea").first.screenshot(path=str(shots / "dashboard_operators_dark.png"))
    assert luminance(png) < 90, luminance(png)
    _shoot_views(page, ops, "dark", shots, errors)
    assert not errors, errors
    page.close()
