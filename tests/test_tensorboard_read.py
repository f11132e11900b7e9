"""nbprof.tensorboard.read: the plugin's run/worker/span naming, loading runs as Traces, comparing runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

import nbprof
from nbprof.tensorboard import (
    breakdown_side_by_side,
    compare_runs,
    discover,
    load_logdir,
    load_run,
    load_run_traces,
    write_trace,
)

ROOT = Path(__file__).resolve().parents[1]
CPU_NW0 = ROOT / "data" / "cpu" / "cnn_nw0.pt.trace.json.gz"
CPU_NW2 = ROOT / "data" / "cpu" / "cnn_nw2.pt.trace.json.gz"


def _has(mod: str) -> bool:
    try:
        return importlib.util.find_spec(mod) is not None
    except ModuleNotFoundError:
        return False


def test_discover_follows_the_plugin_naming_rules(tmp_path):
    logdir = tmp_path / "logs"
    files = {
        "a/w1.100.pt.trace.json": b"{}",
        "a/w1.99.pt.trace.json.gz": b"{}",  # string order: "100" < "99", so 100 is span 1
        "a/w2.pt.trace.json": b"{}",  # no timestamp: span "default"
        "a/host.name_12.5.pt.trace.json": b"{}",  # lazy worker group: worker "host.name_12", span ts "5"
        "a/events.out.tfevents.1.x": b"",  # not a trace
        "a/notes.json": b"{}",
        "nested/deep/w0.7.pt.trace.json": b"{}",
        "empty/readme.txt": b"",
        "top.1.pt.trace.json": b"{}",  # files in the logdir itself: run = the logdir's base name
    }
    for rel, data in files.items():
        p = logdir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    df = discover(logdir)
    got = {(r.run, r.worker, r.span, r.span_ts) for r in df.itertuples()}
    assert got == {
        ("a", "w1", "1", "100"),
        ("a", "w1", "2", "99"),
        ("a", "w2", "default", ""),
        ("a", "host.name_12", "1", "5"),
        ("nested/deep", "w0", "1", "7"),
        ("logs", "top", "1", "1"),
    }
    assert list(df.columns) == ["run", "worker", "span", "span_ts", "path", "file_bytes"]
    assert (df["file_bytes"] == 2).all()
    with pytest.raises(FileNotFoundError, match="no such TensorBoard logdir"):
        discover(tmp_path / "missing")


def test_load_run_keeps_run_worker_and_span(tmp_path):
    write_trace(CPU_NW0, tmp_path, "before", "worker0", timestamp_ns=10)
    write_trace(CPU_NW0, tmp_path, "before", "worker0", timestamp_ns=20)
    write_trace(CPU_NW2, tmp_path, "after", "worker0", timestamp_ns=30)
    write_trace(CPU_NW2, tmp_path, "after", "worker1", timestamp_ns=30)
    traces = load_run_traces(tmp_path, "before")
    assert [t.meta.extra["tensorboard"]["span"] for t in traces] == ["1", "2"]
    assert {t.meta.extra["tensorboard"]["worker"] for t in traces} == {"worker0"}
    ref = nbprof.load(CPU_NW0)
    assert all(len(t.events) == len(ref.events) for t in traces)
    (one,) = load_run_traces(tmp_path, "after", worker="worker1")
    latest = load_run(tmp_path, "before")  # one worker: its latest span
    assert latest.meta.extra["tensorboard"]["span"] == "2" and latest.meta.extra["tensorboard"]["span_ts"] == "20"
    with pytest.raises(ValueError, match="several workers"):
        load_run(tmp_path, "after")
    assert one.meta.extra["tensorboard"] == {
        "logdir": str(tmp_path),
        "run": "after",
        "worker": "worker1",
        "span": "1",
        "span_ts": "30",
    }
    assert len(one.events) == len(nbprof.load(CPU_NW2).events)
    everything = load_logdir(tmp_path)
    assert {k: len(v) for k, v in everything.items()} == {"after": 2, "before": 2}
    with pytest.raises(KeyError, match=r"runs: \['after', 'before'\]"):
        load_run(tmp_path, "nope")
    with pytest.raises(KeyError, match="no worker 'w9'"):
        load_run_traces(tmp_path, "after", worker="w9")
    with pytest.raises(KeyError, match="no span 7"):
        load_run(tmp_path, "before", span=7)
    with pytest.raises(ValueError, match="several workers"):
        compare_runs(tmp_path, "before", "after")


@pytest.mark.skipif(not _has("nbprof.analysis.steps"), reason="nbprof.analysis.steps not landed")
def test_breakdown_side_by_side_shows_the_dataloader_difference(tmp_path):
    write_trace(CPU_NW0, tmp_path, "nw0", "worker0")
    write_trace(CPU_NW2, tmp_path, "nw2", "worker0")
    runs = {name: ts[-1] for name, ts in load_logdir(tmp_path).items()}
    side = breakdown_side_by_side(runs)
    assert list(side.columns) == ["nw0", "nw2"]
    from nbprof.analysis.steps import breakdown_average, step_breakdown

    pd.testing.assert_series_equal(
        side["nw0"], breakdown_average(step_breakdown(nbprof.load(CPU_NW0))), check_names=False
    )
    # num_workers=0 with per-sample preprocessing waits on the DataLoader far longer than num_workers=2
    assert side.loc["dataloader_ns", "nw0"] > 2 * side.loc["dataloader_ns", "nw2"]


@pytest.mark.skipif(not _has("nbprof.analysis.compare"), reason="nbprof.analysis.compare not landed")
def test_compare_runs_uses_analysis_compare(tmp_path):
    from nbprof.analysis.compare import compare

    write_trace(CPU_NW0, tmp_path, "nw0", "worker0")
    write_trace(CPU_NW2, tmp_path, "nw2", "worker0")
    c = compare_runs(tmp_path, "nw0", "nw2")
    ref = compare(nbprof.load(CPU_NW0), nbprof.load(CPU_NW2))
    for attr in ("operators", "kernels", "steps", "breakdown"):
        pd.testing.assert_frame_equal(getattr(c, attr), getattr(ref, attr))
