"""Issue 37 in a real browser (Debian Chromium via Playwright, offline): ``nbprof report --ranks`` of a job dataset
(HTA's real 2-rank NCCL pair, written with ``load_ranks(..., dataset=PATH)``; rank 1's file name is an HTML
injection attempt) holds the all-ranks overview: drawn at a real size, one cell per rank and bin, the hover shows
the rank's name as text (nothing runs), no console error. The screenshot is kept in the test's tmp folder
(``NBPROF_SHOTS=DIR`` copies it there)."""

from __future__ import annotations

import os
import shutil

import pytest
from _support.chromium import open_page
from _support.paths import corpus_path

import nbprof

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TF = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/"
EVIL = "<img src=x onerror=window.__nbprof_pwned=1>"


@pytest.fixture(scope="module")
def report_page(tmp_path_factory):
    """(report.html of step 4 from the dataset, the dataset folder)."""
    from nbprof.report import Artefacts, build_report

    src = tmp_path_factory.mktemp("pair")
    shutil.copy(corpus_path(TF + "sampled_rank-0.json.gz"), src / "sampled_rank-0.json.gz")
    shutil.copy(corpus_path(TF + "sampled_rank-1.json.gz"), src / f"rank-1{EVIL}.json.gz")
    ds = tmp_path_factory.mktemp("ds") / "job"
    nbprof.load_ranks(str(src), dataset=str(ds), progress=False, workers=1)
    out = tmp_path_factory.mktemp("report") / "job.html"
    build_report(Artefacts(ds_traces=[str(ds)]), progress=False, notebooks=["04_distributed_deepspeed.ipynb"],
                 output=out)
    return out, ds


def test_report_of_a_job_dataset_draws_the_overview(browser, report_page, tmp_path):
    path, _ds = report_page
    html = path.read_text(encoding="utf-8")
    assert "nbprof_overview_cells" in html and "Traceback" not in html
    ctx, page, errors, blocked = open_page(browser, path.as_uri())
    page.locator("canvas").first.wait_for(state="visible", timeout=60_000)
    info = page.evaluate("""() => { const ms = [...Bokeh.documents.flatMap((d) => [...d.all_models])];
        const src = ms.find((m) => m.name === 'nbprof_overview');
        const fig = ms.find((m) => m.name === 'nbprof_overview_plot');
        return {n: src ? src.data.x.length : -1, rows: src ? [...new Set(Array.from(src.data.y))].length : -1,
                fig: !!fig, docs: Bokeh.documents.length}; }""")
    assert info["fig"] and info["rows"] == 2 and info["n"] == 2 * 200, info  # 2 ranks x 200 bins, no event
    # every plot is drawn at a real size (the overview, the per-step breakdown, the all-ranks timeline...)
    sizes = page.locator("canvas").evaluate_all("(cs) => cs.map((c) => [c.width, c.height])")
    assert sum(1 for w, h in sizes if w > 500 and h > 100) >= 2, sizes
    # hover a cell of rank 1 (lower row) in the busy middle of the job: the tooltip names the rank, as text
    shot = tmp_path / "ranks_overview.png"
    over = _overview_box(page)
    assert over is not None and over[2] > 500 and over[3] > 60, over
    x, y, w, h = over
    page.mouse.move(x + w * 0.40, y + h * 0.75, steps=3)  # row of rank 1 (rank 0 is the upper row)
    tip = page.locator(".bk-tooltip-content").filter(has_text="rank 1 (rank-1").first
    tip.wait_for(state="visible", timeout=15_000)
    text = tip.inner_text()
    assert EVIL in text and "computation" in text and "idle" in text, text  # the name shown literally
    assert page.evaluate("() => window.__nbprof_pwned === undefined")
    assert page.locator(".bk-tooltip-content img").count() == 0
    page.screenshot(path=str(shot), full_page=False)
    if os.environ.get("NBPROF_SHOTS"):
        shutil.copy(shot, os.path.join(os.environ["NBPROF_SHOTS"], shot.name))
    assert not blocked, blocked[:5]
    assert not errors, errors
    ctx.close()


def _overview_box(page):
    """The page box (x, y, width, height) of the overview plot's drawing area (its frame), scrolled into view."""
    js = """() => { const v = Bokeh.index.query_one((v) => v.model.name === 'nbprof_overview_plot');
        if (v == null) return null;
        v.el.scrollIntoView({block: 'center'});
        const r = v.el.getBoundingClientRect(); const f = v.frame.bbox;
        return [r.x + f.left, r.y + f.top, f.width, f.height]; }"""
    page.evaluate(js)
    page.wait_for_timeout(300)
    return page.evaluate(js)


def test_1024_ranks_page_draws_every_cell(browser, tmp_path):
    """A 1,024-rank job (one small gloo-shaped rank's reductions, repeated with shifts): the static page holds
    1,024 x 64 cells, draws them with no console error, and zooming in the browser needs no Python."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE
    from test_viz_ranks_overview import _job_of

    from nbprof.viz.ranks_overview import static_view

    path = tmp_path / "ov1024.html"
    path.write_text(file_html(static_view(_job_of(1024), width=1000), INLINE, title="overview"), encoding="utf-8")
    ctx, page, errors, blocked = open_page(browser, path.as_uri())
    page.locator("canvas").first.wait_for(state="visible", timeout=60_000)
    n = page.evaluate("""() => { const s = [...Bokeh.documents[0].all_models].find((m) => m.name === 'nbprof_overview');
        return [s.data.x.length, new Set(Array.from(s.data.y)).size]; }""")
    assert n == [1024 * 64, 1024], n
    page.evaluate("""() => { const p = [...Bokeh.documents[0].all_models].find((m) => m.name === 'nbprof_overview_plot');
        const xr = p.x_range; const mid = (xr.start + xr.end) / 2; const span = (xr.end - xr.start) / 8;
        xr.setv({start: mid - span / 2, end: mid + span / 2}); }""")
    page.wait_for_timeout(500)
    shot = tmp_path / "ranks_overview_1024.png"
    page.screenshot(path=str(shot))
    if os.environ.get("NBPROF_SHOTS"):
        shutil.copy(shot, os.path.join(os.environ["NBPROF_SHOTS"], shot.name))
    assert not blocked, blocked[:5]
    assert not errors, errors
    ctx.close()
