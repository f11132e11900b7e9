"""Issue 25: the links of the advisor's data-stall chain (nbprof.analysis.causal) on real traces: thread
scheduling and CPU samples of a real nsys export (A100 saxpy, nsys 2022.2) against SQL over the export itself,
and the GPU idle time during the DataLoader waits of a real GPU Kineto trace (data/gpu)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
from _support.paths import corpus_path

import nbprof
from nbprof.analysis import steps
from nbprof.analysis.causal import data_wait_chains, has_system_view, thread_activity

ROOT = Path(__file__).resolve().parents[1]
SAXPY = "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"


def test_thread_activity_scheduling_and_samples_match_the_export():
    path = corpus_path(SAXPY)
    tr = nbprof.load(path)
    assert has_system_view(tr)
    pid = tid = 1230493  # the rank's main thread (the most sampled one)
    act = thread_activity(tr, pid, tid, 0, 10**13)
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    gtid = next(g for (g,) in con.execute("SELECT DISTINCT globalTid FROM SCHED_EVENTS")
                if g % 0x1000000 == tid and g // 0x1000000 % 0x1000000 == pid)
    rows = con.execute("SELECT start, isSchedIn FROM SCHED_EVENTS WHERE globalTid = ? ORDER BY start", (gtid,)).fetchall()
    off, desched = None, 0
    for start, sched_in in rows:  # switched out from each sched-out to the next sched-in
        if not sched_in and off is None:
            off = start
        elif sched_in and off is not None:
            desched, off = desched + start - off, None
    assert desched > 0 and act["descheduled_ns"] == desched
    n = con.execute("SELECT count(*) FROM COMPOSITE_EVENTS WHERE globalTid = ?", (gtid,)).fetchone()[0]
    assert act["samples"] == n == 5451
    st = act["stacks"]
    assert int(st["samples"].sum()) == n and st["samples"].is_monotonic_decreasing
    assert st["call_stack"].iloc[0] == "main"  # the flame graph's widest leaf: saxpy's own loop in main()
    # a window of half the trace holds part of it
    half = thread_activity(tr, pid, tid, 0, tr.duration_ns // 2)
    assert 0 < half["samples"] < n and half["descheduled_ns"] <= desched


def test_gpu_idle_during_the_dataloader_waits_of_a_real_gpu_trace():
    tr = nbprof.load(ROOT / "data" / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")
    assert not has_system_view(tr)  # Kineto alone has no OS view: the advisor adds no chain to it
    ch = data_wait_chains(tr)
    bd = steps.step_breakdown(tr)
    assert list(ch["step"]) == list(bd["step"])
    # num_workers=0 with preprocessing: the main thread loads, nothing is queued, the GPU idles the whole wait
    assert (ch["gpu_idle_ns"] == ch["wait_ns"]).all() and (ch["wait_ns"] > 0.8 * ch["step_ns"]).all()
    np.testing.assert_allclose(ch["wait_ns"], bd["dataloader_ns"], rtol=0.01)
    assert (ch["blocked_ns"] == 0).all() and (ch["on_cpu_ns"] == ch["wait_ns"]).all()
