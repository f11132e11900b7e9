"""Physics of the what-if replay (issue 30), on every trace of data/ and ../shared/corpus that loads with steps:

- no change reproduces every measured step exactly;
- a predicted step is never shorter than the device busy time of the work it keeps (per stream, the union of
  the step's device ops, for changes that keep every device duration), nor than the host's own unwaited work
  (the replay weights of the step thread's intervals inside its ``ProfilerStep`` range);
- combining two speed-ups never predicts a slower step than either alone;
- making every kernel free saves time where the host waits on the device.

Loads are cached per session; traces over ``MAX_EVENTS`` events are skipped with the reason (the replay of
such a trace is benchmarked in benchmarks/bench_critical_path.py instead).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _support.paths import CORPUS, DATA

import nbprof
from nbprof.analysis import critical_path as cpm
from nbprof.analysis import whatif
from nbprof.analysis._intervals import merge
from nbprof.analysis.steps import step_windows
from nbprof.errors import NbprofError
from nbprof.trace import predicates as pred

MAX_EVENTS = 150_000
_DEV_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_SUFFIXES = (".json", ".json.gz", ".gz", ".sqlite", ".nsys-rep")


def _candidates() -> list[Path]:
    out = sorted(p for p in DATA.rglob("*") if p.is_file() and p.name.endswith(_SUFFIXES) and "trace" in p.name)
    if CORPUS.exists():
        out += sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name.endswith(_SUFFIXES))
    return out


def _id(p: Path) -> str:
    base = CORPUS if CORPUS in p.parents else DATA
    return str(p.relative_to(base))


@functools.cache
def _load(path: Path):
    try:
        t = nbprof.load(path)
    except (NbprofError, ValueError) as e:  # not a trace nbprof reads (configs, snapshots, key_averages)
        return None, f"does not load as a trace: {type(e).__name__}: {str(e)[:120]}"
    if not isinstance(t, nbprof.Trace):
        return None, f"loads as a {type(t).__name__}, not a trace"
    if len(t.events) > MAX_EVENTS:
        return None, f"{len(t.events)} events > {MAX_EVENTS}: too slow for this test"
    if step_windows(t).empty:  # the one step definition: ProfilerStep, NVTX or detected iterations
        return None, "no steps (ProfilerStep, NVTX or detected iterations): nothing to replay"
    return t, ""


def _trace(path: Path):
    t, why = _load(path)
    if t is None:
        pytest.skip(why)
    return t


def _kernels(t) -> str:
    ev = t.events
    k = ev[(ev["device"].to_numpy() >= 0) & ev["cat"].astype(str).isin(_DEV_CATS).to_numpy()]
    names = pd.unique(k["name"].astype(str))
    return "^(?:" + "|".join(re.escape(n) for n in names) + ")$" if len(names) else "^$"


def _device_floor(t, g) -> pd.Series:
    """Per step: the largest union, over streams, of the measured intervals of the step's device ops."""
    ev = t.events
    rows = g.rows[ev["device"].to_numpy()[g.rows] >= 0]
    if rows.size == 0:
        return pd.Series(dtype=np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)[rows]
    end = ts + ev["dur_ns"].to_numpy(np.int64)[rows]
    st = g.node_step[g.start[np.searchsorted(g.rows, rows)]] if np.all(np.diff(g.rows) > 0) else None
    if st is None:
        pos = pd.Series(np.arange(g.rows.size), index=g.rows)
        st = g.node_step[g.start[pos.reindex(rows).to_numpy()]]
    key = pd.DataFrame({"step": st, "dev": ev["device"].to_numpy(np.int64)[rows],
                        "stream": ev["stream"].to_numpy(np.int64)[rows], "ts": ts, "end": end})
    out = {}
    for (s, _d, _st), grp in key[key["step"] >= 0].groupby(["step", "dev", "stream"]):
        a, b = merge(grp["ts"].to_numpy(), grp["end"].to_numpy())
        out[s] = max(out.get(s, 0), int((b - a).sum()))
    return pd.Series(out, dtype=np.int64)


def _host_floor(t, g, w, windows: pd.DataFrame) -> pd.Series:
    """Per step: the summed replay weights ``w`` of the host intervals inside the step's ProfilerStep range, on its
    thread (one thing at a time per thread, so the replayed range is at least that long). Only for steps whose
    measured window (``windows``, :func:`~nbprof.analysis.steps.step_windows`) is anchored on that range (starts
    at its start and ends at or after its end); a window that starts where the previous step's device work ends
    is bound by that device work instead."""
    ev = t.events
    pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    ps = g.rows[g.is_step_range]
    he = np.flatnonzero(g.kind == cpm.HOST)
    sr, dr = g.node_row[g.src[he]], g.node_row[g.dst[he]]
    out = {}
    win = windows.set_index("step")
    for r in ps:
        s = int(ev["step"].to_numpy(np.int64)[r])
        lo, hi = int(ev["ts_ns"].iloc[r]), int(ev["ts_ns"].iloc[r] + ev["dur_ns"].iloc[r])
        if s not in win.index or win.at[s, "start_ns"] != lo or win.at[s, "end_ns"] < hi:
            continue
        m = ((pid[sr] == pid[r]) & (tid[sr] == tid[r]) & (pid[dr] == pid[r]) & (tid[dr] == tid[r])
             & (g.t[g.src[he]] >= lo) & (g.t[g.dst[he]] <= hi))
        out[s] = int(w[he[m]].sum())
    return pd.Series(out, dtype=np.int64)


PATHS = _candidates()


@pytest.mark.parametrize("path", PATHS, ids=[_id(p) for p in PATHS])
def test_replay_physics(path):
    t = _trace(path)
    g = whatif.trace_graph(t)
    p0 = whatif.predict(t, [], graph=g)
    # 1. no change reproduces every measured step
    assert (p0.per_step["predicted_ns"] == p0.per_step["baseline_ns"]).all(), p0.per_step
    # 2a. changes that keep every device duration: never below the device busy time of a stream in the step
    floor = _device_floor(t, g)
    for sc in (whatif.faster_host(100), "cuda_graphs", "no_host_gaps", "remove_syncs", "no_dataloader"):
        p = whatif.predict(t, sc, graph=g).per_step.set_index("step")["predicted_ns"]
        p = p[p >= 0]  # -1: the step's window is not found in the replayed trace
        f = floor.reindex(p.index).fillna(0)
        assert (p >= f).all(), (str(sc), pd.DataFrame({"predicted": p, "device_busy": f}))
    windows = step_windows(t)
    # 2b. device-only changes: never below the host's own unwaited work in the step
    kern = _kernels(t)
    for sc in (whatif.scale(kern, 0), whatif.scale(kern, 0.5), "overlap_communication"):
        ch = whatif._as_changes(sc)
        w, _keep = whatif._apply(g, t.events, ch)
        hf = _host_floor(t, g, w, windows)
        p = whatif.predict(t, sc, graph=g).per_step.set_index("step")["predicted_ns"]
        p = p[p >= 0]
        f = hf.reindex(p.index).fillna(0)
        assert (p >= f).all(), (str(sc), pd.DataFrame({"predicted": p, "host_work": f}))
    # 3. combining speed-ups never predicts a slower mean step than either alone, over the steps whose window is
    # anchored on their ProfilerStep range (up to 1e-4 of the step). Event times are monotone in the replay; one
    # step's length is not (a window starts where the previous step's device work ends), their mean nearly is.
    ps = t.events[np.asarray(pred.is_step_row(t.events), bool) & (t.events["device"].to_numpy() < 0)]
    ps_start = ps.groupby("step")["ts_ns"].min()
    w_start = windows.set_index("step")["start_ns"]
    anchored = [s for s in w_start.index if s in ps_start.index and w_start[s] == ps_start[s]]
    for a, b in ((whatif.faster_host(2), "cuda_graphs"), (whatif.scale(kern, 0.5), whatif.faster_host(2)),
                 ("remove_syncs", "no_dataloader"), (whatif.faster_host(100), "cuda_graphs"),
                 ("overlap_communication", whatif.scale(kern, 0.5))):
        pa, pb, pab = (whatif.predict(t, x, graph=g).per_step.set_index("step")["predicted_ns"].reindex(anchored)
                       for x in (a, b, [a, b]))
        ok = (pa >= 0) & (pb >= 0) & (pab >= 0)
        ma, mb, mab = pa[ok].mean(), pb[ok].mean(), pab[ok].mean()
        assert not ok.any() or mab <= min(ma, mb) * (1 + 1e-4) + 1000, (
            str(a), str(b), pd.DataFrame({"a": pa, "b": pb, "a+b": pab}))


@pytest.mark.parametrize("rel", [
    "facebookresearch__HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz",
    "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
    "AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
])
def test_free_kernels_shorten_the_waits(corpus, rel):
    # The host waits on the device in these steps (blocking copies, stream syncs): free kernels must save time.
    t = _trace(corpus(rel))
    p = whatif.predict(t, whatif.scale(_kernels(t), 0))
    print(f"{rel}: {p.baseline_step_ns / 1e6:.3f} -> {p.predicted_step_ns / 1e6:.3f} ms")
    assert p.saving_ns > 0.01 * p.baseline_step_ns, p
