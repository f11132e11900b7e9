"""Issue 37: a job dataset (``nbprof.open_job``) is an input of the view layer, and no view reads every rank's full
trace: ``nbprof.viz.to_html(job)`` and ``Dashboard(job)`` draw the all-ranks overview and the distributed view from
the job's reductions and read only the full traces of the ranks they show (``registry.JobInput``): the shown rank
(default the lowest) and, for the all-ranks timeline, the straggler (``registry.zoom_ranks``)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from _support.paths import corpus_path
from test_dataset import _mini_trace

import nbprof
from nbprof.job import Job

pytest.importorskip("bokeh")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

N = 8
TF = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/"


@pytest.fixture(scope="module")
def job8(tmp_path_factory):
    """An 8-rank gloo-shaped CPU job (Kineto JSON files, rank r's all-reduce r ns later: rank 7 is the straggler)
    written to a dataset by ``load_ranks``; with the source files, to load the full traces from."""
    src = tmp_path_factory.mktemp("in8")
    for r in range(N):
        (src / f"rank-{r}.json").write_text(json.dumps(_mini_trace(r, N)))
    ds = tmp_path_factory.mktemp("ds8") / "job"
    nbprof.load_ranks(str(src), dataset=str(ds), progress=False, workers=1)
    return nbprof.open_job(ds), [nbprof.load(src / f"rank-{r}.json") for r in range(N)]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """HTA's real 2-rank NCCL pair (corpus) as a job dataset, and its full traces."""
    files = [corpus_path(TF + f"sampled_rank-{r}.json.gz") for r in (0, 1)]
    src = tmp_path_factory.mktemp("pair")
    for f in files:
        shutil.copy(f, src / f.name)
    ds = tmp_path_factory.mktemp("dsp") / "job"
    nbprof.load_ranks(str(src), dataset=str(ds), progress=False, workers=1)
    return nbprof.open_job(ds), [nbprof.load(f) for f in files]


@pytest.fixture
def reads(monkeypatch):
    """The ranks whose full trace ``Job.trace`` reads (the real method, counted)."""
    out: list[int] = []
    orig = Job.trace

    def counted(self, rank):
        out.append(int(rank))
        return orig(self, rank)

    monkeypatch.setattr(Job, "trace", counted)
    return out


def _same_tables(job_tables: dict, trace_tables: dict) -> None:
    """The distributed view's frames from the reductions equal those from the full traces (``host_calls``: a job's
    is read only when it executed no collective; the view shows it only then)."""
    assert set(job_tables) == set(trace_tables)
    for k, v in trace_tables.items():
        if k == "host_calls":
            continue
        if isinstance(v, pd.DataFrame):
            pd.testing.assert_frame_equal(job_tables[k].reset_index(drop=True), v.reset_index(drop=True), check_dtype=True)
        else:
            assert job_tables[k] == v, k


def test_to_html_of_a_job_reads_only_the_shown_ranks(job8, reads, tmp_path):
    from nbprof.viz import distributed as dist
    from nbprof.viz import registry

    job, traces = job8
    assert registry.zoom_ranks(job) == [0, 7]  # the straggler (rank 7: the last to arrive) and the lowest rank
    out = nbprof.viz.to_html(job, tmp_path / "job.html")
    # before: every rank's full trace (job.traces()): reads == [0, 1, ..., 7]
    assert sorted(reads) == [0, 7] and len(reads) == 2  # rank 0 (the trace views), rank 7 (all-ranks timeline), once each
    html = out.read_text(encoding="utf-8")
    for name in ("nbprof_ranks_overview", "nbprof_overview_cells", "nbprof_distributed", "nbprof_dist_breakdown", "nbprof_dist_straggler",
                 "nbprof_rank_note"):
        assert name in html, name
    assert "rank 0&#x27;s full trace (of 8 ranks)" in html or "rank 0's full trace (of 8 ranks)" in html
    assert "ranks [0, 7] of 8: the straggler and the lowest rank" in html
    # the distributed view's numbers are those of the full traces: the straggler sentence in the page, and every frame
    full = dist.distributed_tables(traces)
    text = dist.straggler_text(full["stragglers"])
    assert text.startswith("Straggler: rank 7, the rank the others wait for in 2 of 2 steps")
    assert json.dumps(text)[1:-1] in html
    _same_tables(dist.distributed_tables(job), full)
    assert len(reads) == 2  # distributed_tables(job) read no trace either


def test_to_html_of_a_job_without_the_timelines_reads_one_rank(job8, reads, tmp_path):
    job, _ = job8
    nbprof.viz.to_html(job, tmp_path / "one.html", views=["ranks_overview", "distributed", "overview"], rank=3)
    assert reads == [3]
    nbprof.viz.to_html(job, tmp_path / "none.html", views=["ranks_overview", "distributed"])
    assert reads == [3]  # the reductions only


def test_dashboard_of_a_job_reads_one_trace(job8, reads):
    from nbprof.viz.dashboard import Dashboard

    job, traces = job8
    d = Dashboard(job)
    # before: 8 full traces read at construction
    assert reads == [0]  # the shown rank's: its header and verdict
    assert d.selector.options[0] == "ranks_overview" and d.selector.value == "ranks_overview"
    assert {"distributed", "ranks_timeline", "timeline"} <= set(d.selector.options)
    assert "of 8 ranks in the job dataset" in d.children[0].value
    assert "Straggler: rank 7" in d.verdict.value  # the job's straggler, from the reductions
    d.show_view("distributed")
    d.show_view("timeline")
    d.show_view("operators")
    assert reads == [0] and not d.errors
    from nbprof.viz import distributed as dist

    _same_tables(d.views["distributed"].tables, dist.distributed_tables(traces))
    d.show_view("ranks_timeline")
    assert reads == [0, 7] and not d.errors  # the straggler's, once
    d.show_view("ranks_timeline")
    assert reads == [0, 7]
    # the rank to show is the user's pick
    reads.clear()
    d3 = Dashboard(job, rank=3, start="overview")
    assert reads == [3] and d3.trace.meta.rank == 3
    with pytest.raises(ValueError, match="rank 99 is not one of the job's ranks"):
        Dashboard(job, rank=99)


def test_ranks_of_refuses_to_read_every_rank(job8):
    from nbprof.viz import registry

    with pytest.raises(TypeError, match="JobInput"):
        registry.ranks_of(job8[0])


def test_real_nccl_pair_job_equals_its_traces(pair, reads, tmp_path):
    """The real 2-rank NCCL pair: the page holds the overview and the distributed view equal to the full traces'."""
    from nbprof.viz import distributed as dist

    job, traces = pair
    out = nbprof.viz.to_html(job, tmp_path / "pair.html", views=["ranks_overview", "distributed", "overview"])
    assert reads == [0]
    html = out.read_text(encoding="utf-8")
    assert "nbprof_ranks_overview" in html and "nbprof_dist_busbw" in html
    _same_tables(dist.distributed_tables(job), dist.distributed_tables(traces))


def test_host_calls_of_a_job_without_collectives(tmp_path, reads):
    """No collective executed (an ``nccl:`` host range without a kernel, as NCCL does at world size 1): the view's
    host calls come from the dataset's events table and equal the full traces'."""
    from nbprof.viz import distributed as dist

    src = tmp_path / "in"
    src.mkdir()
    for r in range(2):
        t = _mini_trace(r, 2)
        for e in t["traceEvents"]:
            e["name"] = e["name"].replace("gloo:", "nccl:")
        (src / f"rank-{r}.json").write_text(json.dumps(t))
    nbprof.load_ranks(str(src), dataset=str(tmp_path / "job"), progress=False, workers=1)
    job = nbprof.open_job(tmp_path / "job")
    traces = [nbprof.load(src / f"rank-{r}.json") for r in range(2)]
    got, want = dist.distributed_tables(job), dist.distributed_tables(traces)
    assert got["collectives"].empty and want["collectives"].empty
    assert want["host_calls"].to_dict("list") == {"rank": [0, 1], "name": ["nccl:all_reduce"] * 2, "calls": [2, 2],
                                                  "total_ns": [120_000, 120_000]}
    pd.testing.assert_frame_equal(got["host_calls"], want["host_calls"], check_dtype=False)
    _same_tables(got, want)
    assert reads == []
