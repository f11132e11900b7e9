"""Issue 37: per-rank reductions (``nbprof.analysis.distributed.reductions``) and the cross-rank analyses computed
from them -- equal to the full-trace results on real multi-rank traces, and fast on 1,024 ranks.

The cross-rank analyses have one code path (traces -> ``reduce_rank`` -> the same functions), so the equalities
here are: the values the full-trace analyses gave before they were moved onto the reductions (pinned below, measured
on the pre-reduction code), and the same results from reductions that travelled as plain frames (rank order and row
order shuffled, as a dataset read gives them) or through DuckDB.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _support.paths import corpus_path
from _support.timing_guard import measure

import nbprof
from nbprof.analysis import distributed as D
from nbprof.analysis.steps import step_times, step_windows
from nbprof.analysis.utilization import gpu_utilization

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword:Warning", "ignore::DeprecationWarning")

HTA = "facebookresearch__HolisticTraceAnalysis/tests/data/"
DATA = Path(__file__).resolve().parent.parent / "data"
JOB_TABLES = ("rank_info", "steps", "collectives", "compute", "memory")


@pytest.fixture(scope="module")
def hta_pair():
    return [nbprof.load(corpus_path(HTA + f"trace_filter/sampled_rank-{r}.json.gz")) for r in (0, 1)]


@pytest.fixture(scope="module")
def trace_diff_pair():
    """Two ranks (3 and 1, in that order) of NCCL jobs: the reductions keep the given rank order."""
    return [nbprof.load(corpus_path(HTA + "trace_diff/control/control.json.gz")),
            nbprof.load(corpus_path(HTA + "trace_diff/test/test.json.gz"))]


def cross_rank(source) -> dict:
    """Every cross-rank analysis of ``source`` (traces or reductions)."""
    wt = D.wait_transfer(source)
    rep = D.distributed_report(source)
    return dict(
        wait_transfer=wt, wait_transfer_end=D.wait_transfer(source, align="end"), summary=D.wait_transfer_summary(wt),
        stragglers=D.stragglers(source), collective_skew=D.collective_skew(source), skew=D.skew(source),
        overlap=D.overlap(source), overlap_hta=D.overlap(source, until_last_step=True),
        step_breakdown=D.step_breakdown(source), collective_summary=D.collective_summary(source),
        busbw=D.busbw_vs_link(source, "nvlink3", inter_link="ib_hdr", gpus_per_node=4),
        memory=D.memory_per_rank(source), clock=D.ranks_clock(source)[0], clock_links=D.ranks_clock(source)[1],
        overview=D.ranks_overview(source, bins=50), zero=D.zero_stages(source),
        report_collectives=rep.collectives, report_zero=rep.zero, report_stragglers=rep.stragglers)


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], pd.DataFrame):
            x, y = (f.reset_index(drop=True) for f in (a[k], b[k]))
            x, y = (f.astype({c: object for c in f.columns if f[c].dtype == "str"}) for f in (x, y))
            pd.testing.assert_frame_equal(x, y, check_dtype=False, check_column_type=False, obj=k)
        else:
            assert a[k] == b[k], k


def plain_tables(traces, seed: int = 0) -> dict[str, pd.DataFrame]:
    """The job's reductions as a dataset read may give them: plain frames, ranks and rows in any order, int32 ranks."""
    per = [(int(t.meta.rank), D.reduce_rank(t)) for t in traces]
    job = D.concat_reductions(per)
    rng = np.random.default_rng(seed)
    return {name: f.iloc[rng.permutation(len(f))].astype({"rank": np.int32}) for name, f in job.items()}


def test_reduce_rank_follows_the_schema(hta_pair):
    t = hta_pair[0]
    red = D.reduce_rank(t)
    assert list(red) == list(D.REDUCTION_SCHEMA) and isinstance(D.REDUCTION_VERSION, int)
    for name, frame in red.items():
        assert dict(frame.dtypes.astype(str)) == D.REDUCTION_SCHEMA[name], name
        assert "rank" not in frame
    info = red["rank_info"].iloc[0]
    assert (info["origin_ns"], info["span_ns"], info["events"]) == (t.meta.origin_ns, t.duration_ns, len(t.events))
    # the one step definition, with the steady-state flags
    assert red["steps"]["step"].tolist() == step_windows(t)["step"].tolist()
    assert (red["steps"]["step_ns"].to_numpy() == step_times(t)).all()
    # collectives: the full-trace rows, sizes as whole bytes
    c = D.collectives(t)
    assert len(red["collectives"]) == len(c) == 10
    assert red["collectives"]["msg_bytes"].astype("float64").tolist() == c["msg_bytes"].tolist()
    # idle gaps per stream add up to the utilisation's idle time
    idle = red["idle"].assign(n=lambda d: d["end_ns"] - d["start_ns"]).groupby(["device", "stream"])["n"].sum()
    util = gpu_utilization(t, by="stream").set_index(["device", "stream"])["idle_ns"]
    assert idle.reindex(util.index, fill_value=0).tolist() == util.tolist()
    # a subset of tables; an unknown table is refused
    assert list(D.reduce_rank(t, ["collectives"])) == ["collectives"]
    with pytest.raises(KeyError, match="unknown reduction table"):
        D.reduce_rank(t, ["nope"])


def test_concat_adds_rank(hta_pair):
    job = D.concat_reductions((int(t.meta.rank), D.reduce_rank(t)) for t in hta_pair)
    assert job["rank_info"]["rank"].tolist() == [0, 1]
    assert job["collectives"]["rank"].dtype == np.int64
    assert job["collectives"].groupby("rank").size().tolist() == [10, 10]
    assert list(job["steps"].columns) == ["rank", *D.REDUCTION_SCHEMA["steps"]]
    with pytest.raises(KeyError, match="lack tables"):
        D.overlap({"rank_info": job["rank_info"]})
    with pytest.warns(nbprof.errors.NbprofWarning, match=r"several traces of rank \[0\]"):
        twice = D.overlap([hta_pair[0], hta_pair[1], hta_pair[0]])
    assert twice["rank"].tolist() == [0, 1]  # the first trace of each rank


def test_hta_pair_from_reductions_equals_the_full_trace_results(hta_pair):
    full = cross_rank(hta_pair)
    # the values of the full-trace analyses before they moved onto the reductions (pre-issue-37 code)
    w = full["wait_transfer"].groupby("rank")[["wait_ns", "transfer_ns"]].sum()
    assert w.to_dict() == {"wait_ns": {0: 189234000, 1: 44254000}, "transfer_ns": {0: 206965000, 1: 334799000}}
    st = full["stragglers"].set_index("rank")
    assert st["straggler"].tolist() == [False, True] and st.loc[1, "caused_wait_ns"] == 189234000
    ov = full["overlap"].set_index("rank")
    assert ov[["comm_ns", "compute_ns", "overlap_ns"]].to_numpy().tolist() == [
        [396199000, 210320000, 59216000], [379053000, 271973000, 75530000]]
    hta = full["overlap_hta"].set_index("rank")
    assert hta[["comm_ns", "compute_ns", "overlap_ns"]].to_numpy().tolist() == [
        [195327000, 106252000, 23068000], [168027000, 135548000, 33691000]]
    bd = full["step_breakdown"].groupby("rank")[["step_ns", "compute_ns", "exposed_comm_ns", "idle_ns"]].sum()
    assert bd.to_numpy().tolist() == [[1230240000, 151104000, 336983000, 682937000],
                                      [1238543000, 196443000, 303523000, 663047000]]
    sk = full["skew"].set_index("rank")
    assert sk["last_arrival_count"].tolist() == [2, 8] and sk["matched_collectives"].tolist() == [10, 10]
    assert full["zero"] == full["report_zero"] == {0: "zero1_or_2", 1: "zero1_or_2"}
    # the overview's bins add up to the whole-trace overlap basis
    o = full["overview"].groupby("rank")[["compute_ns", "comm_ns"]].sum()
    assert o["comm_ns"].tolist() == ov["comm_ns"].tolist() and o["compute_ns"].tolist() == ov["compute_ns"].tolist()
    # the same from the reductions as plain frames in any order
    assert_same(full, cross_rank(plain_tables(hta_pair)))


def test_trace_diff_pair_keeps_rank_order_and_values(trace_diff_pair):
    full = cross_rank(trace_diff_pair)
    assert full["overlap"]["rank"].tolist() == [3, 1]  # the given order
    assert full["stragglers"].set_index("rank").loc[1, "caused_wait_ns"] == 163535000
    assert full["step_breakdown"].groupby("rank")["idle_ns"].sum().to_dict() == {1: 123268000, 3: 95753000}
    job = D.concat_reductions((int(t.meta.rank), D.reduce_rank(t, JOB_TABLES)) for t in trace_diff_pair)
    assert_same(full, cross_rank(job))  # the job's tables as concat_reductions gives them: same order, same values


def test_reductions_through_duckdb(hta_pair):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    tables = {}
    for name, frame in D.concat_reductions((int(t.meta.rank), D.reduce_rank(t)) for t in hta_pair).items():
        con.register(f"v_{name}", frame)
        tables[name] = con.sql(f"SELECT * FROM v_{name} ORDER BY random()").df()
    assert tables["collectives"]["msg_bytes"].isna().sum() == 0 and len(tables["collectives"]) == 20
    assert_same(cross_rank(hta_pair), cross_rank(tables))


def test_cpu_sample_from_reductions(samples):
    t = nbprof.load(samples("kineto_cpu_ds_zero2_rank0.pt.trace.json.gz"))
    red = D.concat_reductions([(0, D.reduce_rank(t))])
    assert D.zero_stages(red) == {0: "zero1_or_2"} == {0: D.zero_stage_pattern(t).stage}
    ov = D.overlap(red).iloc[0]
    assert ov["basis"] == "cpu_ops" and ov["comm_ns"] == D.collectives(t)["dur_ns"].sum()
    assert_same(cross_rank([t]), cross_rank(red))


# --------------------------------------------------------------------------- 1,024 ranks

STRAGGLER = 777
LATE_NS = 2_000_000  # the straggler reaches every collective 2 ms late
TRANSFER_NS = 50_000


def synthetic_job(n: int) -> tuple[dict[str, pd.DataFrame], np.ndarray]:
    """``n`` ranks: each the reductions of a real single-GPU trace (data/gpu/ddp_nccl_rank0: 4 ProfilerSteps),
    with three all-reduces per step generated around it: rank r arrives at instance k after a deterministic
    0-99.9 us jitter, rank :data:`STRAGGLER` :data:`LATE_NS` later, and all ranks finish together
    :data:`TRANSFER_NS` after the last arrival. Returns the job's tables and the arrivals (ranks x instances)."""
    base = D.reduce_rank(nbprof.load(DATA / "gpu/ddp_nccl_rank0.pt.trace.json.gz"), ["rank_info", "steps", "compute",
                                                                                     "memory"])
    origin = int(base["rank_info"]["origin_ns"].iloc[0])
    st = base["steps"]
    frac = np.array([0.5, 0.7, 0.9])
    at = (st["start_ns"].to_numpy()[:, None] + frac * (st["end_ns"] - st["start_ns"]).to_numpy()[:, None]).astype(np.int64)
    inst_step = np.repeat(st["step"].to_numpy(), len(frac))
    at = at.ravel()
    k = np.arange(len(at))
    r = np.arange(n)[:, None]
    arrive = at + ((r * 7919 + k * 104729) % 1000) * 100 + np.where(r == STRAGGLER, LATE_NS, 0)
    end = at + LATE_NS + 100_000 + TRANSFER_NS
    ts = arrive.ravel()
    m = len(ts)
    coll = pd.DataFrame({
        "rank": np.repeat(np.arange(n), len(k)), "seq": np.tile(k, n), "collective": "all_reduce",
        "backend_name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "family": "all_reduce", "api_name": "all_reduce",
        "ts_ns": ts, "dur_ns": np.tile(end, n) - ts, "start_abs_ns": ts + origin, "api_ts_ns": ts - 5000,
        "api_start_abs_ns": ts - 5000 + origin, "step": np.tile(inst_step, n), "pid": 0, "tid": 7, "device": 0,
        "stream": 7, "correlation": np.tile(1000 + k, n), "group_size": n, "msg_bytes": 25 * 2**20,
        "algbw_bytes_per_s": np.full(m, np.nan), "busbw_bytes_per_s": np.full(m, np.nan), "pg_name": "0",
        "before_last_step": True})
    job = {name: pd.concat([f] * n, ignore_index=True).assign(rank=np.repeat(np.arange(n), len(f)))
           for name, f in base.items()}
    job["collectives"] = coll
    return job, arrive


def _analyses(job) -> tuple[dict, float]:
    import time

    t0 = time.perf_counter()
    wt = D.wait_transfer(job)
    out = dict(wt=wt, stragglers=D.stragglers(wt), skew=D.skew(job), overlap=D.overlap(job),
               breakdown=D.step_breakdown(job), summary=D.collective_summary(job),
               overview=D.ranks_overview(job, bins=100), report=D.distributed_report(job))
    return out, time.perf_counter() - t0


def test_1024_ranks_from_reductions():
    job, arrive = synthetic_job(1024)
    small, _ = synthetic_job(64)

    def run(_attempt):
        (_, t_small), (out, t_big) = _analyses(small), _analyses(job)
        return out, t_small, t_big

    m = measure(run, what="the cross-rank analyses on 64 and 1,024 ranks", tries=1)
    out, t_small, t_big = m.value
    print(f"64 ranks {t_small:.2f} s, 1,024 ranks {t_big:.2f} s")
    # right values: the planted straggler, in every step, and exactly the wait it caused
    st = out["stragglers"].set_index("rank")
    assert st.index[st["straggler"]].tolist() == [STRAGGLER]
    assert st.loc[STRAGGLER, "straggler_steps"] == st.loc[STRAGGLER, "steps"] == 4
    others = np.delete(arrive, STRAGGLER, axis=0)
    assert st.loc[STRAGGLER, "caused_wait_ns"] == int((arrive[STRAGGLER] - others).sum())
    assert st.loc[STRAGGLER, "last_arrivals"] == arrive.shape[1]
    sk = out["skew"].set_index("rank")
    assert len(sk) == 1024 and sk.index[sk["straggler"]].tolist() == [STRAGGLER]
    assert sk.loc[STRAGGLER, "last_arrival_count"] == 12 and (sk["matched_collectives"] == 12).all()
    wt = out["wt"]
    assert len(wt) == 1024 * 12 and (wt["wait_ns"] + wt["transfer_ns"] == wt["dur_ns"]).all() and wt["consistent"].all()
    assert len(out["breakdown"]) == 1024 * 4 and (out["breakdown"].groupby("rank")["step_ns"].sum().nunique() == 1)
    assert out["overview"].shape == (1024 * 100, 8)
    assert set(out["report"].zero.values()) == {"ddp_or_zero0"}
    assert (out["summary"]["count"] == 12).all() and (out["summary"]["group_size"] == 1024).all()
    # quickly: 16x the ranks costs well under the 256x of a scan per rank over all ranks' rows
    m.skip_if_disturbed()
    assert t_big < 48 * t_small, f"64 ranks {t_small:.2f} s, 1,024 ranks {t_big:.2f} s"
