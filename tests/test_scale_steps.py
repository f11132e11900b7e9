"""Issue 37: ``nbprof.scale.rank_summary`` (the per-rank summary of ``load_ranks`` without a dataset) counts and
times steps by THE step definition (``nbprof.analysis.steps.step_windows``, the job dataset's ``steps`` table):
a trace without ``ProfilerStep#N`` gets its detected iterations, as in the report, not zero steps."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from _support.paths import DATA

import nbprof
from nbprof.analysis import steps
from nbprof.analysis.distributed import reductions as R
from nbprof.scale import load_ranks, rank_summary
from nbprof.trace_cache import reducer_key

CNN = DATA / "cpu" / "cnn_nw0.pt.trace.json.gz"  # a real CPU ResNet run with torch.profiler: 6 ProfilerSteps


@pytest.fixture(scope="module")
def stripped(tmp_path_factory):
    """The CNN trace with every ``ProfilerStep#N`` event removed from its JSON (6 events)."""
    data = json.loads(gzip.decompress(CNN.read_bytes()))
    before = len(data["traceEvents"])
    data["traceEvents"] = [e for e in data["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    assert before - len(data["traceEvents"]) == 6
    d = tmp_path_factory.mktemp("nostep")
    out = d / "rank-0.pt.trace.json"
    out.write_text(json.dumps(data))
    return out


def _one_definition(tr):
    """(steps, mean step ns) of the step definition: ``step_windows`` and the dataset's ``steps`` table."""
    w = steps.step_windows(tr)
    red = R.reduce_rank(tr, ["steps"])["steps"]
    assert red["step"].tolist() == w["step"].tolist()
    assert red["step_ns"].tolist() == (w["end_ns"] - w["start_ns"]).tolist()
    return w, int(red["step_ns"].sum()) / len(red)


def test_rank_summary_of_a_trace_without_profiler_step_has_the_detected_steps(stripped):
    tr = nbprof.load(stripped)
    assert not tr.events["name"].astype(str).str.startswith("ProfilerStep#").any()
    w, mean_ns = _one_definition(tr)
    assert w["step"].tolist() == [0, 1, 2, 3, 4, 5]  # the 6 optimizer iterations (Optimizer.step#SGD.step)
    s = rank_summary(tr)
    st = s["steps"]
    assert st["step"].tolist() == w["step"].tolist()
    assert int(s["overview"]["steps"].iloc[0]) == len(w) == 6
    assert st["dur_ns"].tolist() == (w["end_ns"] - w["start_ns"]).tolist()
    assert float(st["dur_ns"].mean()) == pytest.approx(mean_ns, abs=0.5)
    assert 25e6 < mean_ns < 27e6  # about 26 ms per iteration on this CPU run
    origin = tr.meta.origin_ns or 0
    assert st["start_ns"].tolist() == (w["start_ns"] + origin).tolist()  # absolute when the trace has an origin
    assert all(st[c].dtype == np.int64 for c in st.columns)


def test_rank_summary_of_profiler_steps_is_the_same_definition():
    tr = nbprof.load(CNN)
    w, mean_ns = _one_definition(tr)
    st = rank_summary(tr)["steps"]
    assert st["step"].tolist() == [2, 3, 4, 5, 6, 7] == w["step"].tolist()
    # the windows are the step definition's (extended to device work), not the raw ProfilerStep rows
    assert float(st["dur_ns"].mean()) == pytest.approx(mean_ns, abs=0.5)


def test_load_ranks_summaries_use_the_one_step_definition(stripped, tmp_path):
    """Through the pool and the summary cache: the ``steps`` table equals the dataset's ``steps`` for that rank."""
    tr = nbprof.load(stripped)
    w, mean_ns = _one_definition(tr)
    mr = load_ranks([str(stripped)], cache_dir=str(tmp_path / "c"), progress=False, workers=1)
    st = mr.table("steps")
    assert st["step"].tolist() == w["step"].tolist()
    assert float(st["dur_ns"].mean()) == pytest.approx(mean_ns, abs=0.5)
    assert mr.table("overview")["steps"].tolist() == [6]
    # the dataset route gives the same steps
    mr_ds = load_ranks([str(stripped)], dataset=str(tmp_path / "job"), progress=False, workers=1)
    job = nbprof.open_job(mr_ds.dataset)
    assert job.table("steps")["step_ns"].tolist() == st["dur_ns"].tolist()
    # summaries cached under the previous (ProfilerStep-only) definition are not reused
    old_key = __import__("hashlib").blake2b(b"nbprof.scale.rank_summary", digest_size=8).hexdigest()
    assert reducer_key(rank_summary) != old_key
