"""Module and call-stack views in Debian's Chromium (static HTML, offline): rendered, expandable, no console errors.

A click on a module row closes its children and a second opens them; "Collapse all" leaves the roots; a trace whose
module and frame names are HTML shows them as text (no injected element runs).
"""

from __future__ import annotations

import gzip
import json
import re
import time

import pytest
from _support.chromium import BENIGN, collect_errors, open_notebook, open_page
from _support.paths import DATA

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LM_MODULES = DATA / "cpu" / "lm_modules.pt.trace.json.gz"
LM_GPU = DATA / "gpu" / "lm_mem.pt.trace.json.gz"
EVIL = '</script><img src=x onerror="window.__nbprof_xss=1"><b>bold</b>'




def _shown(page, kind: str) -> list[str]:
    return page.evaluate(f"""() => {{ const m = [...Bokeh.documents[0].all_models]
        .find((x) => x.name === 'nbprof_{kind}_shown'); return m ? [...m.data.label] : null; }}""")


def _wait_rows(page, kind: str, pred, seconds: float = 10.0) -> list[str]:
    rows = _shown(page, kind)
    for _ in range(int(seconds * 10)):
        if rows is not None and pred(rows):
            break
        time.sleep(0.1)
        rows = _shown(page, kind)
    return rows


@pytest.mark.parametrize("trace_path", [LM_MODULES, LM_GPU], ids=["cpu_with_modules", "h200_lm"])
def test_module_and_call_stack_views_render(browser, tmp_path, trace_path):
    import nbprof
    from nbprof import viz

    trace = nbprof.load(trace_path)
    path = viz.to_html(trace, tmp_path / "mods.html", views=["modules", "call_stack"])
    ctx, page, errors, blocked = open_page(browser, path.as_uri(), width=1300)
    # both tables drawn: their first rows are in the page
    page.get_by_text("TinyLM_0").first.wait_for(timeout=30_000)
    page.get_by_text(re.compile(r"^\d+ modules, 3 top-level calls")).first.wait_for(timeout=10_000)
    page.get_by_text(re.compile(r"showing \d+ of \d+ Python call paths")).first.wait_for(timeout=10_000)
    page.get_by_text(re.compile(r"train_transformer\.py\(\d+\): train")).first.wait_for(timeout=10_000)
    full = _shown(page, "modules")
    assert len(full) == 22 and full[0].endswith("TinyLM_0")
    # a click on the root row (as a table click selects it) closes the tree; a second click opens it again
    page.get_by_text("\u25be TinyLM_0").first.click()
    rows = _wait_rows(page, "modules", lambda r: len(r) == 1)
    assert rows == ["\u25b8 TinyLM_0"], rows
    page.get_by_text("\u25b8 TinyLM_0").first.click()
    rows = _wait_rows(page, "modules", lambda r: len(r) > 1)
    # the children kept their own open state (only the root was toggled): the whole tree is back
    assert rows[0] == "\u25be TinyLM_0" and len(rows) == 22
    page.get_by_role("button", name="Collapse all").first.click()
    assert _wait_rows(page, "modules", lambda r: len(r) == 1) == ["\u25b8 TinyLM_0"]
    page.get_by_role("button", name="Expand all").first.click()
    assert len(_wait_rows(page, "modules", lambda r: len(r) == 22)) == 22
    # the call stack opens three levels deep and expands on request
    before = len(_shown(page, "call_stack"))
    page.get_by_role("button", name="Expand all").nth(1).click()
    assert len(_wait_rows(page, "call_stack", lambda r: len(r) > before)) > before
    assert not blocked, blocked[:5]
    assert not errors, errors
    ctx.close()


def test_hostile_names_render_as_text(browser, tmp_path):
    import nbprof
    from nbprof import viz

    with gzip.open(LM_MODULES, "rb") as f:
        raw = json.loads(f.read())
    for e in raw["traceEvents"]:
        if e.get("name") == "nn.Module: Embedding_0":
            e["name"] = f"nn.Module: {EVIL}_0"
        elif str(e.get("name", "")).startswith("train_transformer.py("):
            e["name"] = EVIL
    src = tmp_path / "evil.pt.trace.json"
    src.write_text(json.dumps(raw))
    path = viz.to_html(nbprof.load(src), tmp_path / "evil.html", views=["modules", "call_stack"])
    ctx, page, errors, _blocked = open_page(browser, path.as_uri(), width=1300)
    page.get_by_text("TinyLM_0").first.wait_for(timeout=30_000)
    page.get_by_text(f"{EVIL}_0", exact=False).first.wait_for(timeout=10_000)
    assert page.evaluate("() => window.__nbprof_xss") is None
    assert page.locator("b").count() == 0  # CSS locators pierce Bokeh's shadow roots
    assert not errors, errors
    ctx.close()


LIVE_CELLS = [
    """import nbprof
from nbprof import viz
T = nbprof.load({trace!r})
NONE = nbprof.load({none!r})""",
    "viz.registry.live('modules', T)",
    "viz.registry.live('call_stack', T)",
    "viz.dashboard(NONE, start='modules')",
    "print('ALL CELLS ' + 'DONE')",
]


def test_live_views_in_jupyterlab(lab, browser):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.format(trace=str(LM_MODULES), none=str(DATA / "cpu" / "lm.pt.trace.json.gz"))
                                          if "{" in c else c) for c in LIVE_CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = lab["root"] / "modules_views.ipynb"
    nbformat.write(nb, path)
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = collect_errors(page, (*BENIGN, "Widget model not found", "translations", "npm"))
    open_notebook(page, lab, path)
    page.wait_for_selector("text=ALL CELLS DONE", timeout=300_000)
    cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    mods, stack, none = cells.nth(1), cells.nth(2), cells.nth(3)
    mods.get_by_text("\u25be TinyLM_0").first.wait_for(timeout=60_000)
    assert mods.get_by_text("MultiheadAttention_0").count() >= 1
    stack.get_by_text(re.compile(r"showing \d+ of \d+ Python call paths")).first.wait_for(timeout=60_000)
    # the browser-side toggle works inside the widget too
    mods.get_by_text("\u25be TinyLM_0").first.click()
    mods.get_by_text("\u25b8 TinyLM_0").first.wait_for(timeout=10_000)
    assert mods.get_by_text("MultiheadAttention_0").count() == 0
    # a trace without frames: the dashboard's module view says how to record them
    none.get_by_text(re.compile(r"No nn.Module frames in this trace")).first.wait_for(timeout=60_000)
    assert none.get_by_text(re.compile(r"--with-modules")).count() >= 1
    assert not errors, errors
    page.close()
