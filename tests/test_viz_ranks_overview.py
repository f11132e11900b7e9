"""Issue 37: the all-ranks overview view (``nbprof.viz.ranks_overview``) draws ``distributed.ranks_overview`` of a job
opened with ``nbprof.open_job`` (reductions only), one cell per rank and bin and nothing per event (1,024 ranks),
and zooms into one rank by loading only that rank's full trace (``job.trace(rank)``)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.analysis import distributed as D
from nbprof.analysis.distributed import reductions as R
from nbprof.units import fmt_ns

pytest.importorskip("bokeh")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TF = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/"
EVIL = "<img src=x onerror=window.__nbprof_pwned=1>"


@pytest.fixture(scope="module")
def pair_job(tmp_path_factory):
    """HTA's real 2-rank NCCL pair as a job dataset; rank 1's file name is an HTML injection attempt."""
    src = tmp_path_factory.mktemp("pair")
    shutil.copy(corpus_path(TF + "sampled_rank-0.json.gz"), src / "sampled_rank-0.json.gz")
    shutil.copy(corpus_path(TF + "sampled_rank-1.json.gz"), src / f"rank-1{EVIL}.json.gz")
    ds = tmp_path_factory.mktemp("ds") / "job"
    nbprof.load_ranks(str(src), dataset=str(ds), progress=False, workers=1)
    return nbprof.open_job(ds)


def test_cells_are_the_reductions_ranks_overview(pair_job):
    from nbprof.viz.ranks_overview import CELL_COLUMNS, RanksOverviewModel

    m = RanksOverviewModel(pair_job, bins=50)
    d = m.cells()
    ov = D.ranks_overview(pair_job.reductions(), bins=50)
    pd.testing.assert_frame_equal(m.frame, ov)
    assert set(d) == set(CELL_COLUMNS) and all(len(v) == 2 * 50 for v in d.values())
    assert m.ranks == [0, 1] and m.names[1] == f"rank-1{EVIL}.json.gz"
    # the hover texts are nbprof.units' fmt_ns of the analysis' ns, per cell
    labels = np.array(m.labels, dtype=object)
    assert labels[d["hc"]].tolist() == [fmt_ns(float(v)) for v in ov["compute_ns"]]
    assert labels[d["hm"]].tolist() == [fmt_ns(float(v)) for v in ov["comm_ns"]]
    assert labels[d["hi"]].tolist() == [fmt_ns(float(v)) for v in ov["idle_ns"]]
    exposed = ov["comm_ns"] - (ov["compute_ns"] + ov["comm_ns"] - ov["busy_ns"])
    assert labels[d["hx"]].tolist() == [fmt_ns(float(v)) for v in exposed]
    # the opacity is the share of the bin inside the rank's trace; a bin of pure computation is pure green
    share = (ov["busy_ns"] + ov["idle_ns"]) / (ov["end_ns"] - ov["start_ns"])
    np.testing.assert_allclose(d["a"], share.to_numpy(), atol=1e-6)
    # the colour: computation / overlapped / exposed communication / idle colours weighted by their time in the bin
    ovl = ov["compute_ns"] + ov["comm_ns"] - ov["busy_ns"]
    w = np.stack([ov["compute_ns"] - ovl, ovl, ov["comm_ns"] - ovl, ov["idle_ns"]], axis=1).astype(float)
    rgb = np.array([[0x2c, 0xa0, 0x2c], [0x94, 0x67, 0xbd], [0xd6, 0x27, 0x28], [0xc7, 0xc7, 0xc7]], dtype=float)
    mix = (w @ rgb) / w.sum(axis=1)[:, None]
    got = np.array([[int(m.palette[i][k:k + 2], 16) for k in (1, 3, 5)] for i in d["ci"]])
    assert np.abs(got - mix).max() <= 0.5 + 1e-9
    assert len({m.palette[i] for i in d["ci"]}) > 10  # the busy bins of the pair differ
    idle = ((ov["idle_ns"] > 0) & (ov["busy_ns"] == 0)).to_numpy()
    assert idle.any() and {m.palette[i] for i in d["ci"][idle]} == {"#c7c7c7"}
    # the 128-rank job's pair spent most of its time in NCCL kernels: communication cells exist on both ranks
    assert (ov.groupby("rank")["comm_ns"].sum() > 0).all()


def test_zoom_loads_only_the_selected_rank(pair_job, monkeypatch):
    """Clicking a cell opens that rank's full trace (read from the dataset, only that rank) on the overview's window."""
    from nbprof.viz.ranks_overview import ranks_overview_view
    from nbprof.viz.timeline import TimelineView

    read: list[int] = []
    orig = type(pair_job).trace
    monkeypatch.setattr(type(pair_job), "trace", lambda self, r: (read.append(r), orig(self, r))[1])
    v = ranks_overview_view(pair_job, theme="light")
    assert read == [] and v.zoomed is None  # the overview read no trace
    m = v.model
    cells = m.source.data
    i = int(np.flatnonzero(np.asarray(cells["y"]) == 1)[60])  # a cell of rank 1
    v._on_select("indices", [], [i])  # what a click sends from the browser
    assert read == [1]
    rank, tv = v.zoomed
    assert rank == 1 and isinstance(tv, TimelineView) and v.zoom_box.children[1] is tv
    assert tv.model.trace.meta.rank == 1 and len(tv.model.trace.events) == len(orig(pair_job, 1).events) == 4676
    assert EVIL not in v.zoom_box.children[0].value and "&lt;img" in v.zoom_box.children[0].value
    # a box over bins 10..19 of rank 0: the timeline opens on those bins, moved onto rank 0's own clock
    idx = [int(k) for k in np.flatnonzero((np.asarray(cells["y"]) == 0) & (np.asarray(cells["b"]) >= 10)
                                          & (np.asarray(cells["b"]) < 20))]
    read.clear()
    v._on_select("indices", [], idx)
    assert read == [0] and v.zoomed[0] == 0
    f = m.frame[(m.frame["rank"] == 0) & m.frame["bin"].between(10, 19)]
    sh = m.shifts[0]
    xr = v.zoomed[1].figure.x_range
    assert xr.start == pytest.approx((f["start_ns"].min() - sh) / 1e6, rel=1e-9)
    assert xr.end == pytest.approx((f["end_ns"].max() - sh) / 1e6, rel=1e-9)
    # re-binning a window keeps ranks x bins cells
    v.refresh(m.t0_ns / 1e6, (m.t0_ns + (m.t1_ns - m.t0_ns) / 10) / 1e6)
    assert len(m.source.data["x"]) == 2 * m.bins and m.bin_ms == pytest.approx((m.t1_ns - m.t0_ns) / 10 / m.bins / 1e6,
                                                                               rel=1e-3)


def _job_of(n: int) -> R.JobReductions:
    """The reductions of ``n`` ranks of a small gloo-shaped trace (tests/test_dataset.py's ``_mini_trace``, reduced
    once by ``reduce_rank``), each rank's collectives ``r`` ns later and its computation a little longer."""
    import tempfile

    from test_dataset import _mini_trace

    with tempfile.TemporaryDirectory() as d:
        p = f"{d}/rank-0.json"
        with open(p, "w") as fh:
            json.dump(_mini_trace(0, n), fh)
        red = R.reduce_rank(nbprof.load(p), ("rank_info", "collectives", "compute"))
    out = {}
    for t, f in red.items():
        k = len(f)
        big = f.loc[np.tile(np.arange(k), n)].reset_index(drop=True)
        ranks = np.repeat(np.arange(n, dtype=np.int64), k)
        if t == "collectives":
            big["ts_ns"] += ranks
            big["start_abs_ns"] += ranks
        if t == "compute":
            big["end_ns"] += (ranks % 7) * 1000
        big.insert(0, "rank", ranks)
        out[t] = big
    return R.job_reductions(out, ("rank_info", "collectives", "compute"))


def test_1024_ranks_emit_ranks_times_bins_cells_and_no_event(tmp_path):
    from bokeh.embed import file_html
    from bokeh.resources import CDN

    from nbprof.viz.ranks_overview import RanksOverviewModel, default_bins

    n = 1024
    red = _job_of(n)
    m = RanksOverviewModel(red)
    assert m.bins == default_bins(n) == 64 and len(m.ranks) == n and not m.can_zoom
    lay = m.static_layout(width=900)
    d = m.source.data
    assert all(len(v) == n * m.bins for v in d.values())  # one glyph row per rank and bin
    # the page holds those cells and small lookup tables only: no per-event data, bounded size
    assert len(m.labels) < 5 * n * m.bins and len(m.palette) <= n * m.bins
    html = file_html(lay, CDN, title="overview")
    per_cell = len(html.encode()) / (n * m.bins)
    assert per_cell < 80, per_cell  # 3 bytes per cell here (BokehJS arrays are gzipped and base64-encoded)
    # every rank's 8 events (2 steps x 4) would be the per-event glyphs: none is named in the page
    assert "aten::mm" not in html and "gloo:all_reduce" not in html
    # a job of 16 ranks keeps the full 200 bins
    assert default_bins(16) == 200


def test_registered_and_in_the_static_page_of_traces(tmp_path):
    """One registry entry (a ``ranks`` view): the static page of a list of rank traces draws it."""
    from nbprof.viz import registry, to_html

    spec = registry.get("ranks_overview")
    assert spec.ranks and spec.static_builder().__module__ == "nbprof.viz.ranks_overview"
    traces = [nbprof.load(corpus_path(TF + f"sampled_rank-{r}.json.gz")) for r in (0, 1)]
    html = to_html(traces, tmp_path / "ov.html", views=["ranks_overview"]).read_text(encoding="utf-8")
    assert "nbprof_overview_cells" in html and "nbprof_ranks_overview" in html
