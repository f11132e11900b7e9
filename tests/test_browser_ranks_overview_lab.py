"""Issue 37, live: in JupyterLab (Debian Chromium via Playwright), the all-ranks overview of a job dataset (HTA's real
2-rank NCCL pair, ``load_ranks(..., dataset=PATH)`` then ``nbprof.open_job``) draws; clicking a cell of rank 1 makes
the kernel read that rank's trace only (``job.trace(1)``) and open it in the timeline below; no console error."""

from __future__ import annotations

import os
import shutil

import pytest
from _support.chromium import open_notebook
from _support.jupyterlab import lab_errors
from _support.paths import CORPUS
from test_browser_ranks_overview import _overview_box

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PAIR = CORPUS / "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter"


def test_click_a_rank_opens_its_full_timeline(lab, browser, tmp_path):
    import nbformat

    if not PAIR.is_dir():
        pytest.skip("HTA's rank pair not available: ../shared/corpus is absent on this machine")
    ds = tmp_path / "job"
    cells = [
        "import nbprof\nfrom nbprof.viz.ranks_overview import ranks_overview_view\n"
        f"nbprof.load_ranks([{str(PAIR / 'sampled_rank-0.json.gz')!r}, {str(PAIR / 'sampled_rank-1.json.gz')!r}], "
        f"dataset={str(ds)!r}, progress=False, workers=1)\njob = nbprof.open_job({str(ds)!r})",
        "view = ranks_overview_view(job, width=1000)\nview",
        "print('ALL CELLS DONE')",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = lab["root"] / "overview.ipynb"
    nbformat.write(nb, path)
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors = lab_errors(page)
    open_notebook(page, lab, path)
    page.wait_for_selector("text=ALL CELLS DONE", timeout=300_000)
    out = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(1)
    out.get_by_text("2 ranks x 200 bins").first.wait_for(timeout=60_000)
    box = None
    for _ in range(50):
        box = _overview_box(page)
        if box and box[2] > 500 and box[3] > 60:
            break
        page.wait_for_timeout(200)
    assert box and box[2] > 500, box
    x, y, w, h = box
    page.mouse.click(x + w * 0.40, y + h * 0.75)  # rank 1's row (rank 0 is the upper one), in the busy middle
    out.get_by_text("its full trace").first.wait_for(timeout=60_000)
    head = out.get_by_text("its full trace").first.inner_text()
    assert head.startswith("Rank 1 (sampled_rank-1.json.gz)"), head
    out.locator(".nbprof-timeline canvas").first.wait_for(state="visible", timeout=60_000)
    out.get_by_text("events in").first.wait_for(timeout=30_000)  # the timeline's status line
    shot = tmp_path / "ranks_overview_lab.png"
    page.screenshot(path=str(shot))
    if os.environ.get("NBPROF_SHOTS"):
        shutil.copy(shot, os.path.join(os.environ["NBPROF_SHOTS"], shot.name))
    assert not errors, errors
    page.close()
