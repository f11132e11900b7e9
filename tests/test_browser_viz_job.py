"""Issue 37 in a real browser (Debian Chromium via Playwright, offline): ``nbprof.viz.to_html(job)`` of an 8-rank job
dataset (gloo-shaped Kineto files written with ``load_ranks(..., dataset=PATH)``; it reads only ranks 0 and 7's full
traces) draws the all-ranks overview (8 ranks x 200 bins), the distributed view and rank 0's trace views, every plot
at a real size, with no console error. The screenshot is kept in the test's tmp folder (``NBPROF_SHOTS=DIR`` copies
it there)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from _support.chromium import open_page
from test_dataset import _mini_trace

import nbprof

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_job_page_draws_overview_distributed_and_one_rank(browser, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for r in range(8):
        (src / f"rank-{r}.json").write_text(json.dumps(_mini_trace(r, 8)))
    nbprof.load_ranks(str(src), dataset=str(tmp_path / "job"), progress=False, workers=1)
    job = nbprof.open_job(tmp_path / "job")
    path = nbprof.viz.to_html(job, tmp_path / "job.html", theme="light")
    ctx, page, errors, blocked = open_page(browser, path.as_uri())
    page.locator("canvas").first.wait_for(state="visible", timeout=60_000)
    info = page.evaluate("""() => { const ms = [...Bokeh.documents.flatMap((d) => [...d.all_models])];
        const by = (n) => ms.find((m) => m.name === n);
        const src = by('nbprof_overview_cells') && by('nbprof_overview');
        return {cells: src ? src.data.x.length : -1, rows: src ? new Set(Array.from(src.data.y)).size : -1,
                dist: !!by('nbprof_distributed'), breakdown: !!by('nbprof_dist_breakdown_plot'),
                notes: ms.filter((m) => m.name === 'nbprof_rank_note').map((m) => m.text)}; }""")
    assert info["cells"] == 8 * 200 and info["rows"] == 8, info
    assert info["dist"] and info["breakdown"], info
    assert "timeline: rank 0's full trace (of 8 ranks)" in info["notes"], info["notes"]
    assert any(n.startswith("ranks [0, 7] of 8: the straggler") for n in info["notes"]), info["notes"]
    sizes = page.locator("canvas").evaluate_all("(cs) => cs.map((c) => [c.width, c.height])")
    assert sum(1 for w, h in sizes if w > 500 and h > 100) >= 4, sizes
    shot = tmp_path / "job_page.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("NBPROF_SHOTS"):
        shutil.copy(shot, os.path.join(os.environ["NBPROF_SHOTS"], shot.name))
    assert not blocked, blocked[:5]
    assert not errors, errors
    ctx.close()
