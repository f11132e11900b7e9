"""Issue 32, live: in JupyterLab (Debian Chromium via Playwright), ``nbprof.watch(..., live=True)`` draws the step
chart while a real torch loop runs in the cell, flags the two slow steps, and the captured one's button opens its
trace's dashboard below the chart (flag -> click -> dashboard); after a save and a page reload (same kernel) the
chart draws again from the kernel's widget state, with no console error."""

from __future__ import annotations

import json
import re
import time

import pytest
from _support.chromium import open_notebook, sized_canvas
from _support.jupyterlab import lab_errors
from _support.timing_guard import MAX_STALL, cpu_stall_us, load_note

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

CELLS = [
    "import time, torch, nbprof\ntorch.set_num_threads(1)",
    # steps of a few ms; steps 10 and 13 stall 150 ms: 10 is flagged and arms a 5-step window, 13 is captured
    "with nbprof.watch({run!r}, live=True, capture_steps=5, warmup=3, min_excess_ns=30_000_000) as w:\n"
    "    for i in range(30):\n"
    "        torch.mm(torch.ones(64, 64), torch.ones(64, 64))\n"
    "        time.sleep(0.002)\n"
    "        if i in (10, 13):\n"
    "            time.sleep(0.15)\n"
    "        nbprof.watch.step()\n"
    "print('FLAGGED', w.flagged)",
    "print('ALL CELLS DONE')",
]


def _sized_canvas(loc, what: str):
    canvas = loc.locator("canvas").first
    canvas.wait_for(state="visible", timeout=90_000)
    return sized_canvas(canvas, what)


def test_watch_chart_flag_click_dashboard_and_reload(lab, browser, tmp_path):
    import nbformat

    pytest.importorskip("torch")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.format(run=str(tmp_path / "run"))) for c in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = lab["root"] / "watch.ipynb"
    nbformat.write(nb, path)
    page = browser.new_page(viewport={"width": 1600, "height": 1400})
    errors = lab_errors(page)
    s0, t0 = cpu_stall_us(), time.monotonic()
    open_notebook(page, lab, path)
    page.wait_for_selector("text=ALL CELLS DONE", timeout=300_000)
    s1, wall = cpu_stall_us(), time.monotonic() - t0
    stall = (s1 - s0) / 1e6 / wall if s0 is not None and s1 is not None else None
    cell = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(1)
    flagged = [int(x) for x in re.search(r"FLAGGED \[([\d, ]*)\]", cell.inner_text()).group(1).split(",")]
    # the two stalls; step 11, the first profiled step, carries the profiler's start-up: it needs the start-up
    # allowance (50 ms) more excess (it was flagged on a loaded machine before: FLAGGED [10, 11, 13]); at most one
    # false alarm (the bar; 30 ms on a 2 ms step happens at load average 13)
    if not ({10, 13} <= set(flagged) and len(set(flagged) - {10, 13}) <= 1) and stall is not None and stall > MAX_STALL:
        pytest.skip(f"disturbed live run ({load_note()}; runnable tasks waited for a CPU {stall:.0%} of its "
                    f"{wall:.0f} s): flagged {flagged}")
    assert {10, 13} <= set(flagged) and len(set(flagged) - {10, 13}) <= 1, flagged
    kept = json.loads((tmp_path / "run" / "summary.json").read_text())["captures"]
    chart = cell.locator(".nbprof-watch").first
    _sized_canvas(chart, "watch chart")
    assert "30 steps" in chart.locator(".nbprof-watch-status").inner_text()
    button = chart.get_by_role("button", name="step 13: open its captured trace")
    button.wait_for(timeout=60_000)
    # step 10 armed the window; 13 is in it: one button per flagged step of a kept window
    assert chart.locator(".nbprof-watch-open").count() == sum(len(c["flagged_steps"]) for c in kept)
    button.click()
    dash = chart.locator(".nbprof-dashboard").first
    dash.wait_for(timeout=120_000)
    assert "ProfilerStep#2" in chart.inner_text()
    _sized_canvas(dash, "dashboard of the captured step")
    page.screenshot(path=str(tmp_path / "watch_dashboard.png"))
    # save and reload (the kernel keeps running): the chart draws again from the widget state
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=60_000)
    page.reload(timeout=90_000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=120_000)
    chart = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(1).locator(".nbprof-watch").first
    _sized_canvas(chart, "watch chart after reload")
    assert chart.get_by_role("button", name="step 13: open its captured trace").count() == 1
    assert not errors, errors
    page.close()
