"""The `nbprof report` page and a `nbprof.viz.to_html` page in headless Chromium, light and dark colour scheme (issue 20).

The page is built offline (BokehJS inline) from ``data/gpu/cnn_nw0_prep``; Chromium opens it with
``prefers-color-scheme`` light, then dark, the network cut off. Each time: no console error, the first
screen holds the verdict and "What to fix first", and the verdict and a table cell are readable -- the WCAG
contrast ratio of their computed text colour against the box behind them is at least 4.5
(https://www.w3.org/TR/WCAG21/#dfn-contrast-ratio). Screenshots of the first screen go to the test's tmp dir
(``NBPROF_SCREENSHOTS`` overrides; ``scripts/screenshots.py`` copies them to docs/).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _support.chromium import open_page
from _support.paths import DATA
from test_browser_reload import _COLOURS, _contrast

from nbprof.report import Artefacts, build_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: the background colour of every Bokeh plot of the page (BokehJS models, after the views' first render)
_PLOT_BACKGROUNDS = """() => { const out = [];
  for (const d of Bokeh.documents) for (const m of d._all_models.values())
    if (m.renderers !== undefined && m.background_fill_color != null) out.push(m.background_fill_color);
  return out; }"""


def _hex(c: str) -> list[float]:
    """``#rrggbb`` (or a CSS colour name Bokeh keeps: white) as [r, g, b, 1]."""
    c = {"white": "#ffffff", "black": "#000000"}.get(c, c)
    return [int(c[i:i + 2], 16) for i in (1, 3, 5)] + [1]


def test_report_first_screen_light_and_dark(browser, tmp_path):
    shots = Path(os.environ.get("NBPROF_SCREENSHOTS", tmp_path / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    art = Artefacts(trace=str(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"))
    html = build_report(art, tmp_path, progress=False, notebooks=["01_system_nsys.ipynb", "02_operators_pytorch.ipynb"])
    for scheme in ("light", "dark"):
        ctx, page, errors, blocked = open_page(browser, html.as_uri(), color_scheme=scheme)
        page.wait_for_function("() => window.Bokeh !== undefined && Bokeh.documents.length >= 2",
                               timeout=90_000)
        page.locator("canvas").first.wait_for(state="visible", timeout=60_000)
        verdict = page.locator(".nbprof-verdict").first
        assert verdict.is_visible() and "DataLoader-bound" in verdict.inner_text()
        vb = verdict.bounding_box()
        fb = page.get_by_text("What to fix first").first.bounding_box()
        assert vb and fb and vb["y"] + vb["height"] < 1000 and fb["y"] < 1000  # on the first screen
        c = verdict.evaluate(_COLOURS)
        assert _contrast(c["fg"], c["bg"]) >= 4.5, (scheme, c)
        cell = page.locator("table td").first
        cell.scroll_into_view_if_needed()
        c = cell.evaluate(_COLOURS)
        assert c["text"].strip() and _contrast(c["fg"], c["bg"]) >= 4.5, (scheme, c)
        # the page follows the colour scheme: its background, and the plots' once they have rendered
        page.wait_for_function("() => Number(document.body.dataset.nbprofReady || 0) >= 1", timeout=60_000)
        body = page.locator("body").evaluate(_COLOURS)["bg"]
        plot_bgs = page.evaluate(_PLOT_BACKGROUNDS)
        assert plot_bgs, "no Bokeh plot in the page"
        if scheme == "dark":
            assert _contrast(body, [255, 255, 255, 1]) >= 10, body  # a dark page
            assert all(_contrast(_hex(b), [255, 255, 255, 1]) >= 10 for b in plot_bgs), plot_bgs
        else:
            assert _contrast(body, [0, 0, 0, 1]) >= 15, body
            assert all(_contrast(_hex(b), [0, 0, 0, 1]) >= 15 for b in plot_bgs), plot_bgs
        page.evaluate("() => window.scrollTo(0, 0)")
        page.screenshot(path=str(shots / f"report_first_screen_{scheme}.png"))
        assert not blocked, blocked[:5]
        assert not errors, (scheme, errors)
        ctx.close()


def test_standalone_page_follows_the_colour_scheme(browser, tmp_path):
    """``nbprof.viz.to_html`` (theme "auto" by default): light, and dark under ``prefers-color-scheme: dark``,
    page and plots; no console error either way."""
    import nbprof
    from nbprof import viz

    page_path = viz.to_html(nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"), tmp_path / "views.html",
                            views=["overview", "timeline"])
    for scheme, dark in (("light", False), ("dark", True)):
        ctx, page, errors, blocked = open_page(browser, page_path.as_uri(), color_scheme=scheme)
        page.wait_for_function("() => Number(document.body.dataset.nbprofReady || 0) >= 2", timeout=90_000)
        body = page.locator("body").evaluate(_COLOURS)["bg"]
        plots = [_hex(b) for b in page.evaluate(_PLOT_BACKGROUNDS)]
        assert plots
        ref = [255, 255, 255, 1] if dark else [0, 0, 0, 1]
        assert _contrast(body, ref) >= (10 if dark else 15), (scheme, body)
        assert all(_contrast(p, ref) >= (10 if dark else 15) for p in plots), (scheme, plots)
        assert not blocked and not errors, (scheme, blocked, errors)
        ctx.close()
