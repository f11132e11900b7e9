"""Issue 21/24: the report's step 4 shows the Distributed view for one DDP rank, and the all-ranks timeline for a
folder of rank traces given as --ds-trace (papermill, real kernels)."""

from __future__ import annotations

import pytest
from _support.paths import DATA, corpus_path

from nbprof.report import Artefacts, ReportError, build_report

STEP4 = ["04_distributed_deepspeed.ipynb"]


def test_step4_distributed_view_on_one_ddp_rank(tmp_path):
    art = Artefacts(trace=str(DATA / "gpu" / "ddp_nccl_rank0.pt.trace.json.gz"))
    html = build_report(art, progress=False, notebooks=STEP4, output=tmp_path / "ddp.html").read_text(encoding="utf-8")
    assert "One rank of a distributed job" in html
    assert "nbprof_dist_breakdown" in html and "nbprof_dist_host_calls" in html  # the view, for one rank
    assert "nbprof_rank_links" not in html  # one rank: no all-ranks timeline
    assert "MISSING_RENDERERS" not in html and "Traceback" not in html


def test_step4_on_a_folder_of_ranks(tmp_path):
    folder = corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter")
    art = Artefacts(ds_traces=[str(folder)])
    html = build_report(art, progress=False, notebooks=STEP4, output=tmp_path / "ranks.html").read_text(encoding="utf-8")
    assert "2 ranks loaded" in html
    assert "nbprof_dist_breakdown" in html and "nbprof_dist_wait" in html and "nbprof_rank_links" in html
    assert "MISSING_RENDERERS" not in html and "Traceback" not in html
    # a --ds-trace that does not exist is still refused before any notebook runs
    with pytest.raises(ReportError, match="does not exist"):
        build_report(Artefacts(ds_traces=[str(tmp_path / "nope")]), progress=False, notebooks=STEP4,
                     output=tmp_path / "x.html")
