"""Issue 37 at 256 ranks: the fast paths of the cross-rank analyses give exactly what the generic paths give.

The analyses of ``nbprof.analysis.distributed`` read a job's ``compute`` table (tens of thousands of normalised
intervals per rank) several times; at 256 ranks x 50 MB the sorts of the generic interval code took most of a
minute. The fast paths (a table already in rank order is not sorted again, a normalised ``compute`` set is not
merged again, an intersection is found by binary search instead of a sweep over every end point, a dataset's
table is cast and ordered once) must change no value: here every analysis runs on a varied multi-rank job
made from HTA's real 2-rank NCCL pair, once as it is and once with the fast paths replaced by the generic
``_intervals`` functions and a full sort, and the frames must be equal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.analysis import _intervals as iv
from nbprof.analysis import distributed as D
from nbprof.analysis.distributed import overlap_skew
from nbprof.analysis.distributed import reductions as R

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword:Warning", "ignore::DeprecationWarning")

HTA = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/"


def _random_set(rng: np.random.Generator, n: int, touching: bool = False) -> iv.Intervals:
    gaps = rng.integers(0 if touching else 1, 50, n)
    lens = rng.integers(1, 40, n)
    s = np.cumsum(gaps + np.concatenate([[0], lens[:-1]]))
    return iv.merge(s, s + lens)


@pytest.mark.parametrize("seed", range(40))
def test_intersect_equals_the_sweep(seed):
    rng = np.random.default_rng(seed)
    a = _random_set(rng, int(rng.integers(0, 30)), touching=bool(seed % 2))
    b = _random_set(rng, int(rng.integers(0, 400)))
    for x, y in ((a, b), (b, a), (a, a), (a, iv.empty())):
        got, want = R.intersect(x, y), iv.intersect(x, y)
        assert got[0].dtype == want[0].dtype == np.int64
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_normalised_equals_merge():
    rng = np.random.default_rng(1)
    s, e = _random_set(rng, 500)
    for starts, ends in ((s, e), (s[::-1], e[::-1]), (np.append(s, s[3]), np.append(e, e[7])),  # unsorted, overlap
                         (np.append(s, e[-1]), np.append(e, e[-1] + 5)),  # touching the last
                         (s[:0], e[:0]), (np.array([5]), np.array([5]))):  # empty set, empty interval
        got, want = R.normalised(starts, ends), iv.merge(starts, ends)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_prepare_keeps_a_ready_table_and_orders_the_others():
    f = pd.DataFrame({"rank": [0, 0, 1, 1], "start_ns": [1, 5, 2, 9], "end_ns": [3, 7, 4, 10],
                      "until_last_step": [False, False, False, True]})
    ready = R.conform("compute", f, rank=True)
    assert R._prepare("compute", ready) is ready
    shuffled = ready.iloc[[3, 1, 2, 0]].astype({"rank": np.int32})
    pd.testing.assert_frame_equal(R._prepare("compute", shuffled), ready)
    c = pd.DataFrame({"rank": [0], **{k: [None if d == "object" else 0] for k, d in
                                      R.REDUCTION_SCHEMA["collectives"].items()}})
    c["pg_name"] = np.nan  # a missing string read as NaN becomes None
    assert R._prepare("collectives", c)["pg_name"].tolist() == [None]


def varied_job(traces) -> dict[str, pd.DataFrame]:
    """Six ranks from the two real ones, all different: compute rows dropped (still normalised), a rank with
    overlapping and one with touching compute rows (not normalised), jittered collectives, a rank without
    collectives, one missing the last collectives, one without an absolute origin."""
    rng = np.random.default_rng(7)
    base = {int(t.meta.rank): D.reduce_rank(t) for t in traces}
    per = []
    for r in range(6):
        red = {k: f.copy() for k, f in base[r % 2].items()}
        c = red["compute"]
        c = c[rng.random(len(c)) < 0.9 - 0.1 * r].copy()
        if r == 2:
            extra = c.iloc[::5].copy()
            extra["end_ns"] += 5000
            c = pd.concat([c, extra])
        if r == 3:
            touch = c.iloc[::4].copy()
            touch["start_ns"], touch["end_ns"] = touch["end_ns"], touch["end_ns"] + 1
            c = pd.concat([c, touch])
        red["compute"] = c.sort_values(["until_last_step", "start_ns"], kind="stable").reset_index(drop=True)
        co = red["collectives"]
        jit = rng.integers(0, 200_000, len(co))
        co = co.assign(ts_ns=co["ts_ns"] + jit, start_abs_ns=co["start_abs_ns"] + jit,
                       dur_ns=co["dur_ns"] + rng.integers(0, 5000, len(co)))
        red["collectives"] = co.iloc[:0] if r == 4 else co.iloc[:-3] if r == 5 else co
        if r == 1:
            red["rank_info"] = red["rank_info"].assign(origin_ns=-1)
        per.append((r, red))
    return dict(R.concat_reductions(per))


def analyses(source) -> dict:
    wt = D.wait_transfer(source)
    rep = D.distributed_report(source)
    shifts, links = D.ranks_clock(source)
    out = dict(wt=wt, wt_end=D.wait_transfer(source, align="end"), stragglers=D.stragglers(source),
               skew=D.skew(source), overlap=D.overlap(source), overlap_hta=D.overlap(source, until_last_step=True),
               breakdown=D.step_breakdown(source), summary=D.collective_summary(source),
               overview=D.ranks_overview(source, bins=40), links=links, zero=D.zero_stages(source), shifts=shifts)
    out.update({f"report_{k}": getattr(rep, k) for k in ("collectives", "summary", "overlap", "skew", "collective_skew",
                                                         "memory", "zero", "wait_transfer", "wait_summary",
                                                         "stragglers")})
    return out


def assert_identical(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], pd.DataFrame):
            pd.testing.assert_frame_equal(a[k], b[k], check_exact=True, obj=k)
        else:
            assert a[k] == b[k], k


@pytest.fixture(scope="module")
def job():
    return varied_job([nbprof.load(corpus_path(HTA + f"sampled_rank-{r}.json.gz")) for r in (0, 1)])


def test_fast_paths_change_no_value(job, monkeypatch):
    fast = analyses(R.JobReductions(job))
    assert fast["overlap"]["comm_ns"].gt(0).sum() == 5 and fast["breakdown"]["rank"].nunique() == 6
    # the same job as a plain mapping, rows shuffled (what a dataset read may give): cast and sorted
    rng = np.random.default_rng(3)
    shuffled = {t: f.iloc[rng.permutation(len(f))].reset_index(drop=True) for t, f in job.items()}
    assert_identical(analyses(shuffled), fast)
    # ... read lazily, each table prepared once (Job.reductions)
    lazy = R.LazyJobReductions(list(shuffled), shuffled.__getitem__)
    assert_identical(analyses(lazy), fast)
    assert all(lazy[t] is lazy[t] for t in lazy)
    # the generic paths: every set merged, every intersection swept, every table sorted
    monkeypatch.setattr(R, "normalised", iv.merge)
    monkeypatch.setattr(R, "intersect", iv.intersect)
    monkeypatch.setattr(overlap_skew, "intersect", iv.intersect)
    monkeypatch.setattr(R, "_in_order", lambda frame, keys: False)
    assert_identical(analyses(shuffled), fast)
    assert_identical(analyses(dict(job)), fast)
