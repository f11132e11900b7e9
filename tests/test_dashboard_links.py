"""The live dashboard's findings link to the timeline (issue 20): each finding listed under the verdict has a
"show on the timeline" button whose click (kernel side) selects the timeline view and sets its range to the
finding's evidence window (``evidence.finding_window``, the report's links use the same), re-aggregated.

Real data: the V100 DataLoader trace (``data/gpu/cnn_nw0_prep``: DataLoader, launch-bound and host-wait findings).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _support.paths import DATA

import nbprof
from nbprof.analysis import advisor, evidence
from nbprof.viz.dashboard import dashboard

TRACE = DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"


@pytest.fixture(scope="module")
def tr():
    return nbprof.load(TRACE)


def test_each_listed_finding_has_a_button_naming_its_window(tr):
    d = dashboard(tr)
    # the findings the verdict section lists, in the advisor's one ranking: the two with a saving over the floor
    # (findings.MIN_SAVING_RATIO), then the ones apart: memcpy first (the replay shortens a blocking copy's wait with
    # the copy: 54 ns, under 5% of the step), then the ones without a saving
    fs = advisor.advise(tr)
    ranked = [f for f in fs if f.ranked][:3] + [f for f in fs if not f.ranked][:3]
    assert [f.rule for f, _w in d.findings] == [f.rule for f in ranked]
    assert [f.rule for f in ranked[:3]] == ["dataloader", "launch_bound", "memcpy"]
    assert [f.ranked for f in ranked[:3]] == [True, True, False]
    assert len(d.zoom_buttons) == len(ranked)
    # the DataLoader finding's strongest evidence row: the longest DataLoader wait, padded by half its span
    rows = ranked[0].evidence_rows
    ev = tr.events.iloc[rows[:1]]
    lo, hi = int(ev["ts_ns"].iloc[0]), int(ev["ts_ns"].iloc[0] + ev["dur_ns"].iloc[0])
    pad = (hi - lo) // 2
    assert d.findings[0][1] == evidence.finding_window(tr, ranked[0]) == (lo - pad, hi + pad) == (13742356, 57318388)
    assert d.zoom_buttons[0].description == "1. show on the timeline (13.742 ms to 57.318 ms)"
    assert d.zoom_buttons[0].tooltip == ranked[0].title
    # the launch-bound window starts before the origin: the label says 0 ns, the range keeps the padding
    assert d.zoom_buttons[1].description == "2. show on the timeline (0 ns to 36.754 ms)"
    assert "timeline" not in d.views  # nothing built until asked for


def test_click_selects_the_timeline_and_zooms_to_the_evidence(tr):
    d = dashboard(tr)
    assert d.selector.value == "overview"
    d.zoom_buttons[2].click()  # the memcpy finding: an 11.3 µs window
    assert d.selector.value == "timeline"
    tl = d.views["timeline"]
    assert d.body.children == (tl,)
    x0, x1 = d.findings[2][1]
    assert (tl.figure.x_range.start, tl.figure.x_range.end) == (x0 / 1e6, x1 / 1e6) == (118.364944, 118.376272)
    assert tl.updates == 1  # re-aggregated for the window: every shown rectangle overlaps it
    data = tl.source.data
    right, left = np.asarray(data["right"]), np.asarray(data["left"])
    assert len(left) > 0 and (right >= x0 / 1e6).all() and (left <= x1 / 1e6).all()
    # the widget's render bundle (what a freshly shown BokehView draws) holds the window too
    assert "118.364944" in json.dumps(tl.bokeh_widget.render_bundle)
    # a second finding moves the same timeline
    d.zoom_buttons[0].click()
    assert d.views["timeline"] is tl and tl.updates == 2
    assert (tl.figure.x_range.start, tl.figure.x_range.end) == (13.742356, 57.318388)
    assert d.zoom_to_finding(1) is tl
    with pytest.raises(IndexError):
        d.zoom_to_finding(len(d.findings) + 1)


def test_no_timeline_no_buttons(tr):
    d = dashboard(tr, views=("overview", "operators"))
    assert d.zoom_buttons == [] and len(d.findings) == 5  # 2 ranked + 3 listed apart (the 54 ns memcpy among them)
    with pytest.raises(ValueError, match="no timeline"):
        d.zoom_to_finding(1)
