"""The dashboard in a newcomer's JupyterLab window (issue 38): 1280x800 with the file browser open.

A real JupyterLab + Debian's headless Chromium (the ``lab``/``browser`` fixtures): ``d = tr.show()`` on the H200
DataLoader trace (``data/gpu/cnn_nw0_prep``, 6 steps, memory events).

* item 5: "show on the timeline" zooms *and* brings the timeline's plot into the window (it stayed 1,446 px below);
* item 7: the dashboard fits the notebook panel: every view's plot and table ends inside the output area (a table
  column and the memory plot were cut off), and the memory peak marker is drawn whole (it was clipped at the top).
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
MEM_TRACE = ROOT / "data" / "gpu" / "cnn_h200.pt.trace.json.gz"  # 392 memory events: the memory view's plot
OUT = ".jp-Cell-outputArea > .jp-OutputArea-child"
W, H = 1280, 800

# the x range of the newest rendered timeline layout
_RANGE = """() => { const docs = (window.Bokeh && Bokeh.documents) || [];
  for (let i = docs.length - 1; i >= 0; i--) {
    const lay = docs[i].get_model_by_name('nbprof_timeline');
    if (lay && docs[i].roots().length) { const xr = lay.children[0].x_range; return [xr.start, xr.end]; } }
  return null; }"""

# right edges (px) of the visible plots, tables (the grid's scrolling viewport: a table wider than its box scrolls
# inside it) and widgets inside the output area, and the area's own right edge
_EDGES = """(out) => { const area = out.getBoundingClientRect(); const rows = [];
  const all = [out, ...out.querySelectorAll('*')];
  for (const el of all) { if (el.shadowRoot) all.push(...el.shadowRoot.querySelectorAll('*')); }
  for (const el of all) {
    const tag = el.tagName.toLowerCase();
    if (!(tag === 'canvas' || el.classList.contains('slick-viewport') || el.classList.contains('bk-Canvas')
          || el.classList.contains('widget-html') || el.classList.contains('lm-Widget'))) continue;
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.height > 0) rows.push([tag + '.' + [...el.classList].join('.'), Math.round(r.right)]);
  }
  return {area: Math.round(area.right), rows: rows}; }"""


def _write_nb(root: Path, trace: Path) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"import nbprof\ntr = nbprof.load({str(trace)!r})\nd = tr.show()\nd")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = root / f"layout_{uuid.uuid4().hex[:6]}.ipynb"
    nbformat.write(nb, p)
    return p


def _open(lab, browser, trace: Path):
    nb = _write_nb(lab["root"], trace)
    page = browser.new_page(viewport={"width": W, "height": H})
    errors = lab_errors(page)
    open_notebook(page, lab, nb)
    page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")
    page.wait_for_selector("#filebrowser", state="visible", timeout=30_000)
    cell = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first
    out = cell.locator(OUT).filter(has=page.locator(".nbprof-dashboard")).first
    out.locator(".nbprof-dashboard").first.wait_for(state="visible", timeout=120_000)
    out.locator(".jp-OutputArea-output canvas").first.wait_for(state="visible", timeout=90_000)
    return page, errors, out


def _select(out, name: str) -> None:
    out.get_by_role("button", name=name, exact=True).click()
    for _ in range(300):
        if "mod-active" in (out.get_by_role("button", name=name, exact=True).get_attribute("class") or ""):
            return
        time.sleep(0.2)
    pytest.fail(f"the {name} tab is not selected")


def test_show_on_the_timeline_brings_the_plot_into_the_window(lab, browser, tmp_path):
    page, errors, out = _open(lab, browser, TRACE)
    shots = shot_dir(tmp_path)
    assert page.locator("#filebrowser").is_visible()
    out.locator("button.nbprof-zoom").first.click()
    out.locator(".nbprof-timeline").first.wait_for(state="visible", timeout=90_000)
    for _ in range(300):
        if page.evaluate(_RANGE):
            break
        time.sleep(0.2)
    plot = out.locator(".nbprof-timeline canvas").first
    top = None
    for _ in range(100):  # the scroll follows the re-render
        box = plot.bounding_box()
        top = box["y"] if box else None
        if top is not None and 0 <= top < H / 2:
            break
        time.sleep(0.2)
    page.screenshot(path=str(shots / "lab_1280_timeline_link.png"))
    diag = page.evaluate("""() => { const out = {scrolled: window.__nbprof_scrolled || null,
        index: typeof (window.Bokeh && Bokeh.index), tags: []};
      for (const d of Bokeh.documents) { const l = d.get_model_by_name('nbprof_timeline');
        if (l) { const f = l.children[0]; out.tags.push([f.id, JSON.stringify(f.tags),
          Bokeh.index && Bokeh.index.find ? [...Bokeh.index.find(f)].map((v) => v.el ? [v.el.tagName,
            v.el.isConnected, Math.round(v.el.getBoundingClientRect().top),
            Math.round(v.el.getBoundingClientRect().height)] : null) : -1]); } }
      return out; }""")
    assert top is not None and 0 <= top < H / 2, (
        f"the timeline's plot starts {top} px down a {H} px window ({diag}; errors {errors})")
    assert not errors, errors
    page.close()


def test_dashboard_fits_the_notebook_panel_with_the_file_browser_open(lab, browser, tmp_path):
    page, errors, out = _open(lab, browser, MEM_TRACE)
    shots = shot_dir(tmp_path)
    assert page.locator("#filebrowser").is_visible()
    over = {}
    for name in ("overview", "operators", "memory"):
        _select(out, name)
        out.locator(f".nbprof-{name}").first.wait_for(state="visible", timeout=90_000)
        time.sleep(3.0)
        e = out.evaluate(_EDGES)
        over[name] = [r for r in e["rows"] if r[1] > e["area"] + 1]
        page.screenshot(path=str(shots / f"lab_1280_{name}.png"))
    assert not any(over.values()), over
    # the memory peak marker (an inverted triangle of 12 px at the peak) lies inside the plot's frame
    inside = page.evaluate("""() => { const docs = Bokeh.documents;
      for (let i = docs.length - 1; i >= 0; i--) { const p = docs[i].get_model_by_name('nbprof_mem_plot');
        if (!p) continue; const src = docs[i].get_model_by_name('nbprof_mem_peak'); const y = Math.max(...src.data.y);
        const yr = p.y_range; const frac = (y - yr.start) / (yr.end - yr.start);
        return [frac, p.inner_height]; } return null; }""")
    assert inside is not None and inside[0] * inside[1] + 8 <= inside[1], inside
    assert not errors, errors
    page.close()
