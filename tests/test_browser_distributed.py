"""Issue 21/24 in a real browser (Debian Chromium via Playwright, offline): the static page of a 2-rank job
(HTA's NCCL pair in ../shared/corpus) holds the Distributed view and the all-ranks timeline, both drawn, the
collective links on the canvas, browser-side zoom switching the ranks timeline's level of detail, no console
error; and the single DDP rank's page holds the Distributed view."""

from __future__ import annotations

import re
import time

import pytest
from _support.chromium import open_page
from _support.paths import ROOT, corpus_path

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HTA = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/"


def _open(browser, path):
    ctx, page, errors, blocked = open_page(browser, path.as_uri())
    page.locator("canvas").first.wait_for(state="visible", timeout=60_000)
    return ctx, page, errors, blocked


_MODELS = """(names) => { const doc = Bokeh.documents[0]; const out = {};
    for (const n of names) { out[n] = [...doc.all_models].filter((m) => m.name === n).length; } return out; }"""


def test_static_page_of_two_ranks_shows_distributed_and_all_ranks(browser, tmp_path):
    import nbprof
    from nbprof import viz

    traces = [nbprof.load(corpus_path(HTA + f"sampled_rank-{r}.json.gz")) for r in (0, 1)]
    path = viz.to_html(traces, tmp_path / "job.html", views=["distributed", "ranks_timeline"])
    ctx, page, errors, blocked = _open(browser, path)
    have = page.evaluate(_MODELS, ["nbprof_distributed", "nbprof_ranks_timeline", "nbprof_dist_breakdown",
                                   "nbprof_dist_collectives", "nbprof_dist_wait", "nbprof_rank_links"])
    assert all(v == 1 for v in have.values()), have
    # every plot has been laid out and drawn at a real size (a canvas per plot, none collapsed)
    sizes = page.locator("canvas").evaluate_all("(cs) => cs.map((c) => [c.width, c.height])")  # pierces shadow DOM
    big = [(w, h) for w, h in sizes if w > 100 and h > 100]  # (the 20 px ones are legend/toolbar icons)
    assert len(big) >= 4, sizes  # per-step breakdown, waiting vs transfer, bus bandwidth, all-ranks timeline
    links = page.evaluate("""() => { const s = [...Bokeh.documents[0].all_models].find((m) => m.name === 'nbprof_rank_links');
        return {n: s.data.x0.length, y0: Array.from(s.data.y0), y1: Array.from(s.data.y1)}; }""")
    assert links["n"] == 10 and all(b > a for a, b in zip(links["y0"], links["y1"]))  # rank 0 -> rank 1 rows
    # zoom the all-ranks timeline in the browser: a finer pre-aggregated level takes over
    levels = """() => { const tl = [...Bokeh.documents[0].all_models].find((m) => m.name === 'nbprof_ranks_timeline');
        const p = tl.children[0];
        return p.renderers.filter((r) => r.data_source && r.data_source.name
            && r.data_source.name.startsWith('nbprof_level')).map((r) => r.visible); }"""
    vis0 = page.evaluate(levels)
    assert len(vis0) >= 2 and vis0[0] and not any(vis0[1:]), vis0
    page.evaluate("""() => { const tl = [...Bokeh.documents[0].all_models].find((m) => m.name === 'nbprof_ranks_timeline');
        const xr = tl.children[0].x_range; const mid = (xr.start + xr.end) / 2; const span = (xr.end - xr.start) / 40;
        xr.setv({start: mid - span / 2, end: mid + span / 2}); }""")
    vis1 = vis0
    for _ in range(50):
        vis1 = page.evaluate(levels)
        if vis1 != vis0:
            break
        time.sleep(0.1)
    assert vis1 != vis0 and not vis1[0], vis1
    page.get_by_text("Collective links: showing 10 of 10").first.wait_for(timeout=10_000)
    page.get_by_text(re.compile(r"^(?:Straggler: rank \d|No straggler)")).first.wait_for(timeout=10_000)
    page.screenshot(path=str(tmp_path / "job.png"))
    assert not blocked, blocked[:5]
    assert not errors, errors
    ctx.close()


def test_static_page_of_one_ddp_rank_has_the_distributed_view(browser, tmp_path):
    import nbprof
    from nbprof import viz

    t = nbprof.load(ROOT / "data/gpu/ddp_nccl_rank0.pt.trace.json.gz")
    path = viz.to_html(t, tmp_path / "ddp.html", views=["overview", "distributed"])
    ctx, page, errors, _blocked = _open(browser, path)
    have = page.evaluate(_MODELS, ["nbprof_distributed", "nbprof_dist_breakdown", "nbprof_dist_host_calls"])
    assert all(v == 1 for v in have.values()), have
    page.get_by_text("NCCL short-circuits collectives in a job of world size 1").first.wait_for(timeout=10_000)
    assert not errors, errors
    ctx.close()
