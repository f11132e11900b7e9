"""Issue 25 in the browser: the merged nsys + Kineto timeline of one real run (examples/train_cnn.py under
nsys and torch.profiler at once) renders in the static page, offline, with both sources' lanes.
Debian Chromium via Playwright ``executable_path``; real nsys 2022.4 (both skipped with the reason when absent)."""

from __future__ import annotations

from _support.chromium import block_network
from _support.paired_capture import capture_pair

import nbprof


def test_merged_timeline_static_page_has_both_sources_lanes(browser, tmp_path):
    from nbprof import viz

    merged = nbprof.load(list(capture_pair(tmp_path / "run")))
    path = viz.to_html(merged, tmp_path / "merged.html", views=["timeline"])
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
    blocked = block_network(ctx)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("() => window.Bokeh !== undefined && Bokeh.documents.length > 0", timeout=60_000)
    page.locator("canvas").first.wait_for(state="visible", timeout=60_000)
    assert not blocked and not errors, (blocked[:5], errors[:5])
    # the timeline's lane labels, as the browser's Bokeh document holds them (drawn on the y axis)
    labels = page.evaluate("""() => { const doc = Bokeh.documents[0];
        const tl = [...doc.all_models].find((m) => m.name === 'nbprof_timeline');
        const p = tl.children[0]; const ax = p.left[0];
        const o = ax.major_label_overrides; return o instanceof Map ? [...o.values()] : Object.values(o); }""")
    assert any(s.startswith("[Kineto + nsys] ") for s in labels), labels
    assert any(s.startswith("[Kineto] ") for s in labels) and any(s.startswith("[nsys] ") for s in labels), labels
    # the rows drawn by the page come from both sources: an nsys OS runtime call and a merged range are named
    names = page.evaluate("""() => { const doc = Bokeh.documents[0];
        const src = [...doc.all_models].find((m) => m.name === 'nbprof_names'); return src.data.name; }""")
    osrt = set(merged.events.loc[merged.events["cat"].astype(str) == "osrt", "name"].astype(str))
    assert "data" in names and osrt & set(names)
    # the plot actually painted something (not a blank canvas)
    png = page.locator("canvas").first.screenshot()
    assert len(png) > 5000
    ctx.close()
