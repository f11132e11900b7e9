"""Memory-snapshot view on the real H200 snapshot: aggregated data, escaping, static form."""

from __future__ import annotations

import pickle

import pytest
from _support.paths import DATA

import nbprof
from nbprof.viz.memory_snapshot import memory_snapshot_view, snapshot_tables


@pytest.fixture(scope="module")
def snap():
    return nbprof.load(DATA / "gpu" / "lm_leak_snapshot.pickle")


def test_tables_and_text(snap):
    t = snapshot_tables(snap, max_points=500)
    assert len(t["timeline"]) <= 500
    assert t["timeline"]["allocated_bytes"].max() == t["peak"].allocated_bytes
    assert t["leaks"].iloc[0]["top_user_frame"] == "<module> (gpu_capture.py:115)"
    assert t["n_entries"] == 2941
    v = memory_snapshot_view(snap, max_points=500)
    assert "2,941 allocator events" in v.text and "showing" in v.text
    assert v.kind == "memory_snapshot"


def test_static_html_escapes_frames(tmp_path, snap):
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    with open(DATA / "gpu" / "lm_leak_snapshot.pickle", "rb") as f:
        raw = pickle.load(f)
    bad = "<img src=x onerror=alert(1)></script>"
    for e in raw["device_traces"][0]:
        if e["action"] == "alloc":
            e["frames"] = [{"filename": f"/home/u/{bad}.py", "line": 1, "name": bad}]
    p = tmp_path / "bad.pickle"
    p.write_bytes(pickle.dumps(raw, protocol=4))
    s2 = nbprof.load(p)
    html = file_html(memory_snapshot_view(s2).static_layout(), INLINE, "snap")
    assert "<img src=x onerror" not in html
    assert "</script>.py" not in html
