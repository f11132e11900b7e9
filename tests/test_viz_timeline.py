"""Timeline LOD model and live view on real GPU/CPU traces (values checked against pandas brute force)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _support.paths import DATA

import nbprof
from nbprof.viz._escape import truncate
from nbprof.viz.timeline import TimelineModel, _depths, timeline

GPU = DATA / "gpu" / "lm_mem.pt.trace.json.gz"


@pytest.fixture(scope="module")
def trace():
    return nbprof.load(GPU)


@pytest.fixture(scope="module")
def model(trace):
    return TimelineModel(trace)


def _drawn_events(trace):
    ev = trace.events
    return ev[ev["cat"].astype(object) != "Trace"]


def test_depths_of_nested_intervals():
    ts = np.array([0, 1, 2, 6, 11])
    end = np.array([10, 5, 3, 9, 12])
    assert _depths(ts, end).tolist() == [0, 1, 2, 1, 0]


def test_lanes_of_a_real_gpu_trace(trace, model):
    labels = [ln.label for ln in model.lanes]
    kinds = [ln.kind for ln in model.lanes]
    assert labels[0] == "steps" and kinds[0] == "step"
    assert "GPU 0 / stream 7" in labels
    assert any(k == "host" and "pt_autograd_0" in lb for k, lb in zip(kinds, labels))
    assert model.n_events == len(_drawn_events(trace))
    # rows are contiguous and cover every lane
    assert sum(ln.n_rows for ln in model.lanes) == model.n_rows
    # host ProfilerStep ranges are on the step row only; the GPU's copies on the device annotation lane
    step_ids = [i for i, n in enumerate(model.names) if n.startswith("ProfilerStep#")]
    is_step = np.isin(model.nid, step_ids)
    dev_annot = next(ln for ln in model.lanes if ln.kind == "device_annotation")
    assert set(model.row[is_step].tolist()) == {0, dev_annot.first_row}
    assert int((model.row[is_step] == 0).sum()) == 3


def test_query_conserves_events_in_the_window(trace, model):
    ev = _drawn_events(trace)
    ts = ev["ts_ns"].to_numpy()
    end = ts + ev["dur_ns"].to_numpy()
    for frac0, frac1 in ((0.0, 1.0), (0.3, 0.35), (0.5, 0.5005)):
        x0 = model.t0_ns + frac0 * (model.t1_ns - model.t0_ns)
        x1 = model.t0_ns + frac1 * (model.t1_ns - model.t0_ns)
        q = model.query(x0, x1, width_px=1000)
        expected = int(((ts < x1) & (end > x0)).sum())
        assert int(q["count"].sum()) == expected
        assert np.all(q["left"] < x1 / 1e6) and np.all(q["right"] >= x0 / 1e6)
        assert np.all((q["busy_ratio"] > 0) & (q["busy_ratio"] <= 1))


def test_single_rectangles_are_the_trace_events(trace, model):
    x0 = model.t0_ns + 0.4 * (model.t1_ns - model.t0_ns)
    q = model.query(x0, x0 + 2_000_000, width_px=1200, min_px=0.0)
    single = q["ev"] >= 0
    assert single.sum() > 50
    ev = trace.events.loc[q["ev"][single]]
    assert np.allclose(q["left"][single], ev["ts_ns"].to_numpy() / 1e6)
    assert np.array_equal(q["dur_ns"][single].astype(np.int64), ev["dur_ns"].to_numpy())
    assert [model.names[i] for i in q["nid"][single]] == [truncate(str(n), 200) for n in ev["name"]]


def test_max_quads_caps_individual_rectangles(model):
    q = model.query(width_px=4000, max_quads=50)
    assert int((q["ev"] >= 0).sum()) <= 50
    full = model.query(width_px=4000, max_quads=10**9, min_px=0.0)
    assert int(full["count"].sum()) == int(q["count"].sum())


def test_kernel_launcher_by_correlation_and_external_id(trace, model):
    ev = trace.events
    k = ev[(ev["cat"] == "kernel") & (ev["correlation"] >= 0)].iloc[5]
    info = model.launcher(int(k.name))
    rt = ev[(ev["correlation"] == k["correlation"]) & (ev["cat"] == "cuda_runtime")].iloc[0]
    op = ev[(ev["external_id"] == k["external_id"]) & (ev["cat"] == "cpu_op")].iloc[0]
    assert info["correlation"] == int(k["correlation"])
    assert info["runtime"] == str(rt["name"]) and info["runtime_ts_ns"] == int(rt["ts_ns"])
    assert info["cpu_op"] == str(op["name"]) and info["cpu_op_ts_ns"] == int(op["ts_ns"])
    # in a query, the kernel rectangle carries the flow start (launch call) and the CPU op's name
    q = model.query(k["ts_ns"] - 2000, k["ts_ns"] + k["dur_ns"] + 2000, width_px=1200)
    i = int(np.flatnonzero(q["ev"] == k.name)[0])
    assert q["lx"][i] == pytest.approx(rt["ts_ns"] / 1e6)
    assert model.names[q["oid"][i]] == str(op["name"])


def test_live_view_reaggregates_on_range_change(trace):
    v = timeline(trace, theme="light")
    full = dict(v.source.data)
    assert v.text.startswith("nbprof timeline: ")
    bundle = v._repr_mimebundle_()[0]
    assert bundle["text/plain"] == v.text and "application/vnd.jupyter.widget-view+json" in bundle
    m = v.model
    x0 = (m.t0_ns + 0.2 * (m.t1_ns - m.t0_ns)) / 1e6
    v.set_range(x0, x0 + 0.5)
    assert v.updates == 1
    d = v.source.data
    assert len(d["left"]) != len(full["left"])
    assert np.all(np.asarray(d["left"]) < x0 + 0.5) and np.all(np.asarray(d["right"]) >= x0)
    assert v.figure.x_range.start == x0
    assert "events individually" in v.info.text


def test_cpu_profile_timeline_has_no_device_lanes():
    t = nbprof.load(DATA / "cpu" / "cnn_nw2.pt.trace.json.gz")
    m = TimelineModel(t)
    assert all(ln.kind in ("step", "host", "host_annotation") for ln in m.lanes)
    # DataLoader worker threads/processes get their own lanes
    assert len([ln for ln in m.lanes if ln.kind == "host"]) >= 1
    assert int(m.query()["count"].sum()) == m.n_events


def test_theme_argument_is_checked(trace):
    with pytest.raises(ValueError, match="theme"):
        timeline(trace, theme="solarized")


def test_static_levels_get_finer(model):
    lay = model.static_layout(width=800)
    from bokeh.models import ColumnDataSource

    levels = sorted((m for m in lay.select({"type": ColumnDataSource}) if (m.name or "").startswith("nbprof_level")),
                    key=lambda m: m.name)
    assert len(levels) >= 2
    counts = [len(s.data["left"]) for s in levels]
    assert counts == sorted(counts)  # finer levels have more rectangles
    assert all(int(np.asarray(s.data["count"]).sum()) == model.n_events for s in levels)
    single_last = int((np.asarray(levels[-1].data["ev"]) >= 0).sum())
    assert single_last > int((np.asarray(levels[0].data["ev"]) >= 0).sum())
    _ = pd  # pandas used by fixtures above


def test_many_threads_scroll_vertically(tmp_path):
    import json

    ev = [{"ph": "X", "cat": "cpu_op", "name": f"op{t}", "pid": 1, "tid": 100 + t, "ts": t, "dur": 10}
          for t in range(60)]
    p = tmp_path / "threads.pt.trace.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    v = timeline(nbprof.load(p))
    assert len(v.model.lanes) == 60 and v.model.n_rows == 60
    yr = v.figure.y_range
    assert (yr.start, yr.end, yr.bounds) == (48, 0, (0, 60))
    from bokeh.models import PanTool

    assert [t.dimensions for t in v.figure.tools if isinstance(t, PanTool)] == ["both"]
    # lanes are ordered by (pid, tid)
    assert [ln.label for ln in v.model.lanes[:2]] == ["process 1 / thread 100", "process 1 / thread 101"]


def test_range_event_from_the_browser_reaggregates(trace):
    """The RangesUpdate event BokehJS sends over the widget comm reaches the view's handler."""
    from bokeh.events import RangesUpdate

    v = timeline(trace, theme="light")
    m = v.model
    x0 = (m.t0_ns + 0.6 * (m.t1_ns - m.t0_ns)) / 1e6
    v.figure._trigger_event(RangesUpdate(v.figure, x0=x0, x1=x0 + 0.25, y0=0, y1=5))
    assert v.updates == 1
    assert np.all(np.asarray(v.source.data["left"]) < x0 + 0.25)
