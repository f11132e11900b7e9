"""Issue 37: per-rank reductions (``nbprof.analysis.distributed.reductions``) and the cross-rank analyses
computed from them, equal to the full-trace results on real multi-rank traces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import corpus_path

import nbprof
from nbprof.analysis import distributed as D
from nbprof.analysis.utilization import gpu_utilization

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword:Warning", "ignore::DeprecationWarning")

HTA = "facebookresearch__HolisticTraceAnalysis/tests/data/"


@pytest.fixture(scope="module")
def hta_pair():
    return [nbprof.load(corpus_path(HTA + f"trace_filter/sampled_rank-{r}.json.gz")) for r in (0, 1)]


def test_reduce_rank_follows_the_schema(hta_pair):
    t = hta_pair[0]
    red = D.reduce_rank(t)
    assert list(red) == list(D.REDUCTION_SCHEMA)
    for name, frame in red.items():
        assert dict(frame.dtypes.astype(str)) == D.REDUCTION_SCHEMA[name], name
        assert "rank" not in frame
    info = red["rank_info"].iloc[0]
    assert (info["origin_ns"], info["span_ns"], info["events"]) == (t.meta.origin_ns, t.duration_ns, len(t.events))
    # the one step definition
    w = nbprof.analysis.steps.step_windows(t)
    assert red["steps"]["step"].tolist() == w["step"].tolist()
    assert (red["steps"]["step_ns"].to_numpy() == nbprof.analysis.steps.step_times(t)).all()
    # collectives: the full-trace rows, sizes as whole bytes
    c = D.collectives(t)
    assert len(red["collectives"]) == len(c) == 10
    assert red["collectives"]["msg_bytes"].astype("float64").tolist() == c["msg_bytes"].tolist()
    # idle gaps per stream add up to the utilisation's idle time
    idle = red["idle"].assign(n=lambda d: d["end_ns"] - d["start_ns"]).groupby(["device", "stream"])["n"].sum()
    util = gpu_utilization(t, by="stream").set_index(["device", "stream"])["idle_ns"]
    assert idle.reindex(util.index, fill_value=0).tolist() == util.tolist()


def test_concat_adds_rank(hta_pair):
    job = D.concat_reductions((int(t.meta.rank), D.reduce_rank(t)) for t in hta_pair)
    assert job["rank_info"]["rank"].tolist() == [0, 1]
    assert job["collectives"]["rank"].dtype == np.int64
    assert job["collectives"].groupby("rank").size().tolist() == [10, 10]
    assert list(job["steps"].columns) == ["rank", *D.REDUCTION_SCHEMA["steps"]]
    assert isinstance(D.REDUCTION_VERSION, int)
    assert isinstance(job["kernels"], pd.DataFrame)
