"""Critical path across ranks: merged clock, collective edges (k-th collective = one barrier), exact replay."""

from __future__ import annotations

import numpy as np
import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.analysis.critical_path import (
    COLLECTIVE,
    add_collective_edges,
    build_graph,
    critical_path,
    merge_ranks,
    replay_times,
)

RANKS = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-{}.json.gz"


@pytest.fixture(scope="module")
def ranks():
    return [nbprof.load(corpus_path(RANKS.format(r))) for r in (0, 1)]


def test_merge_puts_ranks_on_one_clock(ranks):
    m = merge_ranks(ranks)
    assert len(m.events) == sum(len(t.events) for t in ranks)
    assert sorted(m.events["rank"].unique().tolist()) == [0, 1]
    shift = ranks[1].meta.origin_ns - ranks[0].meta.origin_ns  # 553 us later
    assert shift == 553_000
    r1 = m.events[m.events["rank"] == 1]
    assert int(r1["ts_ns"].min()) == int(ranks[1].events["ts_ns"].min()) + shift
    assert not set(r1["pid"]) & set(m.events.loc[m.events["rank"] == 0, "pid"])
    assert np.all(np.diff(m.events["ts_ns"].to_numpy()) >= 0)


def test_collective_edges_and_cross_rank_path(ranks):
    m = merge_ranks(ranks)
    g = build_graph(m)
    g2 = add_collective_edges(m, g)
    coll = g2.kind == COLLECTIVE
    # 10 NCCL kernels per rank, matched in order: 2 edges per pair, minus those that would run backwards
    assert int(coll.sum()) + (g2.dropped_edges - g.dropped_edges) == 20
    assert int(coll.sum()) == 14
    r = m.events["rank"].to_numpy()
    assert (r[g2.node_row[g2.src[coll]]] != r[g2.node_row[g2.dst[coll]]]).all()
    assert np.array_equal(replay_times(g2), g2.t)  # the new edges keep the unchanged replay exact
    cp = critical_path(ranks, slack=True)
    assert set(cp.events["rank"].unique().tolist()) == {0, 1}
    assert "collective" in set(cp.edges["kind"].astype(str))
    assert int(cp.breakdown.sum()) == cp.length_ns
    assert cp.slack_ns.index.equals(m.events.index) and (cp.slack_ns.iloc[cp.graph.rows] >= 0).all()


def test_one_rank_list_equals_the_trace(ranks):
    a = critical_path(ranks[0], slack=False)
    b = critical_path([ranks[0]], slack=False)
    key = ["name", "ts_ns", "dur_ns", "tid"]
    assert a.length_ns == b.length_ns and a.hta_length_ns == b.hta_length_ns
    assert a.events[key].astype(str).values.tolist() == b.events[key].astype(str).values.tolist()
    with pytest.raises(ValueError, match="across ranks"):
        critical_path(ranks, annotation="x")
