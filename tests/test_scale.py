"""Multi-rank loading: local pool, Dask LocalCluster, Parquet cache, rank rules, cancellation."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pandas as pd
import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.errors import NbprofError
from nbprof.scale import TraceCache, load_ranks, rank_summary

TF = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/"


@pytest.fixture()
def two_ranks(tmp_path):
    a = corpus_path(TF + "sampled_rank-0.json.gz")
    b = corpus_path(TF + "sampled_rank-1.json.gz")
    return [str(a), str(b)]


def test_local_ranks_and_summaries(two_ranks, tmp_path):
    mr = load_ranks(two_ranks, cache_dir=str(tmp_path / "c"), progress=False)
    assert mr.ranks == [0, 1]
    ov = mr.table("overview").set_index("rank")
    for r, p in zip((0, 1), two_ranks):
        tr = nbprof.load(p)
        k = tr.events[tr.events["cat"] == "kernel"]
        assert ov.loc[r, "kernel_ns"] == k["dur_ns"].sum()
        assert ov.loc[r, "events"] == len(tr.events)
    # both ranks of the 128-rank job ran the same NCCL kernels the same number of times
    col = mr.table("collectives")
    dev = col[col["where"] == "device"].pivot_table(index="name", columns="rank", values="count")
    assert len(dev) >= 1 and (dev[0] == dev[1]).all()
    assert mr.report.get("rank_from_order") is None


def test_dask_local_cluster_gives_identical_results(two_ranks, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    local = load_ranks(two_ranks, cache=False, progress=False)
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None) as lc,
        distributed.Client(lc) as client,
    ):
        remote = load_ranks(two_ranks, client=client, cache=False, progress=False)
    for name in ("overview", "steps", "kernels", "collectives"):
        a = local.table(name).sort_values(list(local.table(name).columns)).reset_index(drop=True)
        b = remote.table(name).sort_values(list(remote.table(name).columns)).reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b)


def test_cache_roundtrip_and_reopen(two_ranks, tmp_path):
    cdir = tmp_path / "cache"
    first = load_ranks(two_ranks, cache_dir=str(cdir), progress=False)
    assert first.from_cache == {0: False, 1: False}
    again = load_ranks(two_ranks, cache_dir=str(cdir), progress=False)
    assert again.from_cache == {0: True, 1: True}
    cached = again[1]
    direct = nbprof.load(two_ranks[1])
    cached.validate()
    pd.testing.assert_frame_equal(cached.events, direct.events)
    pd.testing.assert_frame_equal(cached.memory, direct.memory)
    assert cached.meta.rank == 1 and cached.meta.world_size == 128
    # nothing was written beside the user's traces
    assert sorted(os.listdir(os.path.dirname(two_ranks[0]))) == sorted(os.listdir(os.path.dirname(two_ranks[0])))
    assert all(not f.endswith(".parquet") for f in os.listdir(os.path.dirname(two_ranks[0])))


def test_cache_rejects_newer_format(two_ranks, tmp_path):
    c = TraceCache(str(tmp_path / "c"))
    d = c.digest(two_ranks[0])
    c.put(d, nbprof.load(two_ranks[0]))
    import json

    mp = os.path.join(c.entry(d), "meta.json")
    with open(mp) as f:
        m = json.load(f)
    m["nbprof_cache_format"] = 99
    with open(mp, "w") as f:
        json.dump(m, f)
    with pytest.raises(nbprof.TraceFormatError, match="format 99"):
        c.get(d)


def test_mixed_runs_are_not_silently_mixed(tmp_path):
    a = corpus_path(TF + "sampled_rank-1.json.gz")  # rank 1 of 128
    b = corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz")  # rank 1 of 2
    with pytest.raises(NbprofError, match=r"several runs: duplicate ranks \[1\]"):
        load_ranks([a, b], cache=False, progress=False)
    mr = load_ranks([a, b], cache=False, progress=False, allow_mixed=True)
    assert sorted(mr.ranks) == [1, 2] and mr.report.get("mixed_runs") is not None


def test_rank_from_order_when_nothing_says(tmp_path):
    # two single-process CPU profiles of the example CNN: no distributedInfo, no rank in the names
    p0 = tmp_path / "a" / "cnn.pt.trace.json.gz"
    p1 = tmp_path / "b" / "cnn.pt.trace.json.gz"
    for p, src in ((p0, "cnn_nw0"), (p1, "cnn_nw2")):
        p.parent.mkdir()
        shutil.copy(DATA / "cpu" / f"{src}.pt.trace.json.gz", p)
    mr = load_ranks(str(tmp_path / "*" / "cnn.pt.trace.json.gz"), cache=False, progress=False)
    assert mr.ranks == [0, 1]
    assert mr.report.get("rank_from_order").count == 2
    assert mr.paths[0].endswith("a/cnn.pt.trace.json.gz")


def test_no_files():
    with pytest.raises(FileNotFoundError, match="no trace files match"):
        load_ranks("/nonexistent/dir/*.json", progress=False)


def slow_reducer(trace):
    time.sleep(30)
    return rank_summary(trace)


def test_ctrl_c_cancels_and_leaves_no_workers(two_ranks):
    psutil = pytest.importorskip("psutil")
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    timer = threading.Timer(6.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        load_ranks(two_ranks, workers=2, cache=False, progress=False, reducer=slow_reducer)
    assert time.perf_counter() - t0 < 25  # did not wait for the 30 s reducers
    time.sleep(0.5)
    left = [p for p in me.children(recursive=True) if p.pid not in before and p.is_running()
            and not any(h in " ".join(p.cmdline()) for h in ("forkserver", "resource_tracker"))]  # helpers, not workers
    assert left == []


def test_reopen_reads_only_cached_summaries(two_ranks, tmp_path, monkeypatch):
    cdir = str(tmp_path / "cache")
    first = load_ranks(two_ranks, cache_dir=cdir, progress=False)
    import nbprof.sources as sources

    def no_parsing(*a, **k):
        raise AssertionError("a cached reopen must not parse any trace")

    monkeypatch.setattr(sources, "load", no_parsing)
    again = load_ranks(two_ranks, cache_dir=cdir, progress=False, workers=1)
    assert again.from_cache == {0: True, 1: True}
    for name in ("overview", "steps", "kernels", "collectives"):
        pd.testing.assert_frame_equal(again.table(name), first.table(name))

    def other_reducer(trace):
        return {"n": pd.DataFrame({"events": [len(trace.events)]})}

    monkeypatch.undo()
    # another reducer is not served the first one's summaries
    third = load_ranks(two_ranks, cache_dir=cdir, progress=False, workers=1, reducer=other_reducer)
    assert list(third.table("n")["events"]) == [len(nbprof.load(p).events) for p in two_ranks]
