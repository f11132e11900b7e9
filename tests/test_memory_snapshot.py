"""CUDA memory snapshot + export_memory_timeline loaders and analyses, on real files from an H200 run
(data/gpu, made by scripts/gpu_capture.py) and the HTA corpus timeline."""

from __future__ import annotations

import os
import pickle
import pickletools

import pytest
from _support.paths import DATA, corpus_path, sample_path

import nbprof
from nbprof.analysis import memory_snapshot as ms
from nbprof.errors import TraceFormatError
from nbprof.sources.memory_snapshot import load_memory_snapshot, load_memory_timeline

SNAP = DATA / "gpu" / "lm_leak_snapshot.pickle"


@pytest.fixture(scope="module")
def snap():
    return nbprof.load(SNAP)


def _plain(path):
    # our own committed file: plain pickle is fine in the test to build independent expectations
    with open(path, "rb") as f:
        return pickle.load(f)


def test_snapshot_tables_match_the_pickle(snap):
    raw = _plain(SNAP)
    entries = raw["device_traces"][0]
    assert len(snap.events) == len(entries) == 2941
    counts = snap.events["action"].value_counts()
    assert counts["alloc"] == sum(e["action"] == "alloc" for e in entries) == 1051
    assert counts["free_completed"] == 944
    assert len(snap.segments) == len(raw["segments"]) == 16
    assert len(snap.blocks) == sum(len(s["blocks"]) for s in raw["segments"])
    assert snap.report.clean
    assert "allocator_settings" in snap.extra


def test_timeline_is_anchored_at_the_final_state(snap):
    raw = _plain(SNAP)
    final_alloc = sum(b["size"] for s in raw["segments"] for b in s["blocks"] if b["state"] in ("active_allocated", "active_awaiting_free"))
    final_res = sum(s["total_size"] for s in raw["segments"])
    tl = ms.snapshot_timeline(snap)
    assert tl["allocated_bytes"].iloc[-1] == final_alloc
    assert tl["reserved_bytes"].iloc[-1] == final_res == 115343360
    # no negative memory anywhere, and downsampling keeps the peak
    assert (tl["allocated_bytes"] >= 0).all()
    small = ms.snapshot_timeline(snap, max_points=100)
    assert len(small) <= 100 and small["allocated_bytes"].max() == tl["allocated_bytes"].max()


def test_peak_breakdown_adds_up(snap):
    p = ms.snapshot_peak(snap, top_n=None)
    tl = ms.snapshot_timeline(snap)
    assert p.allocated_bytes == tl["allocated_bytes"].max()
    assert p.breakdown["bytes"].sum() == p.allocated_bytes
    assert p.breakdown["share_ratio"].sum() == pytest.approx(1.0)


def test_leak_found_at_the_leaking_line(snap):
    # scripts/gpu_capture.py as of 22dab87 (it made data/gpu), line 115, appends logits.detach().clone()
    # (8*64*512 fp32 = 1 MiB) every step, 6 steps
    leaks = ms.leak_suspects(snap)
    top = leaks.iloc[0]
    assert top["top_user_frame"] == "<module> (gpu_capture.py:115)"
    assert top["count"] == 6 and top["bytes"] == 6 * 1048576
    assert top["sizes"] == "1048576"


def test_allocations_pairing(snap):
    a = ms.allocations(snap)
    assert len(a) == 1051
    freed = a[a["free_idx"] >= 0]
    assert (freed["free_idx"] > freed["alloc_idx"]).all()
    assert (freed["lifetime_ns"] >= 0).all()
    # independent replay: a free pairs with the last unfreed alloc at its address; frees of blocks
    # allocated before the history began (ring buffer) have none
    live, paired = set(), 0
    for e in _plain(SNAP)["device_traces"][0]:
        if e["action"] == "alloc":
            live.add(e["addr"])
        elif e["action"] == "free_completed" and e["addr"] in live:
            live.discard(e["addr"])
            paired += 1
    assert len(freed) == paired == 929


def test_fragmentation_matches_blocks(snap):
    raw = _plain(SNAP)
    inactive = [b["size"] for s in raw["segments"] for b in s["blocks"] if b["state"] == "inactive"]
    f = ms.fragmentation(snap).iloc[0]
    assert f["segments"] == 16
    assert f["inactive_bytes"] == sum(inactive)
    assert f["largest_free_block_bytes"] == max(inactive)
    assert f["fragmentation_ratio"] == pytest.approx(1 - max(inactive) / sum(inactive))


def test_any_pickle_protocol(tmp_path, snap):
    raw = _plain(SNAP)
    for proto in (0, 2, 5):
        p = tmp_path / f"s{proto}.pickle"
        p.write_bytes(pickle.dumps(raw, protocol=proto))
        s2 = load_memory_snapshot(p)
        assert len(s2.events) == len(snap.events)
        assert s2.events["size_bytes"].sum() == snap.events["size_bytes"].sum()


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch nbprof_pwned",))


def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "evil.pickle"
    p.write_bytes(pickle.dumps({"segments": [], "device_traces": [[{"action": _Evil()}]]}, protocol=4))
    assert "system" in "".join(str(a) for _op, a, _pos in pickletools.genops(p.read_bytes()))
    with pytest.raises(TraceFormatError, match=r"refusing to load (posix|os)\.system") as ei:
        load_memory_snapshot(p)
    assert ei.value.path == str(p)
    assert not (tmp_path / "nbprof_pwned").exists()


def test_not_a_snapshot(tmp_path):
    p = tmp_path / "x.pickle"
    p.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(TraceFormatError, match="not a memory snapshot"):
        load_memory_snapshot(p)
    p.write_bytes(pickle.dumps({"segments": []})[:-3])
    with pytest.raises(TraceFormatError, match="not a readable pickle"):
        load_memory_snapshot(p)


def test_oom_entries(tmp_path):
    snap = {
        "segments": [{"device": 0, "address": 4096, "total_size": 2 << 20, "stream": 0, "segment_type": "large",
                      "blocks": [{"address": 4096, "size": 2 << 20, "state": "active_allocated", "frames": []}]}],
        "device_traces": [[
            {"action": "segment_alloc", "addr": 4096, "size": 2 << 20, "stream": 0, "time_us": 10, "frames": []},
            {"action": "alloc", "addr": 4096, "size": 2 << 20, "stream": 0, "time_us": 11,
             "frames": [{"filename": "/home/u/train.py", "line": 7, "name": "step"}]},
            {"action": "oom", "size": 8 << 30, "stream": 0, "time_us": 12, "device_free": 1 << 30,
             "frames": [{"filename": "/home/u/train.py", "line": 9, "name": "step"}]},
        ]],
    }
    p = tmp_path / "oom.pickle"
    p.write_bytes(pickle.dumps(snap, protocol=4))
    s = load_memory_snapshot(p)
    o = ms.oom_events(s)
    assert len(o) == 1
    assert o.iloc[0]["size_bytes"] == 8 << 30 and o.iloc[0]["device_free_bytes"] == 1 << 30
    assert o.iloc[0]["top_user_frame"] == "step (train.py:9)"
    assert o.iloc[0]["ts_ns"] == 2000
    tl = ms.snapshot_timeline(s)
    assert tl.attrs["baseline"]["allocated_bytes"] == 0 and tl["allocated_bytes"].iloc[-1] == 2 << 20


def test_memory_timeline_raw_real_files():
    t = load_memory_timeline(DATA / "gpu" / "lm_memory_timeline.raw.json.gz")
    assert len(t.events) == 2384
    peak = ms.timeline_peak(t)
    assert peak["total_bytes"] == 17815552
    assert peak["optimizer_state"] == 2 * peak["parameter"]  # AdamW keeps exp_avg + exp_avg_sq per parameter
    hta = load_memory_timeline(corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/memory_analysis/memory_timeline.raw.gz"))
    assert len(hta.events) == 16845
    assert set(hta.events["action"].unique()) <= {"preexisting", "create", "increment_version", "destroy"}


def test_memory_timeline_curve_form():
    t = load_memory_timeline(sample_path("torch_mem_timeline_cpu.json"))
    w = ms.timeline_by_category(t)
    assert (w["total_bytes"] >= 0).all()
    assert "curve_form" in t.report.kinds()


def test_load_dispatches_by_suffix():
    assert type(nbprof.load(SNAP)).__name__ == "MemorySnapshot"
    assert type(nbprof.load(DATA / "gpu" / "lm_memory_timeline.raw.json.gz")).__name__ == "MemoryTimeline"


def test_capture_made_snapshot_from_h200():
    """data/gpu/torchprof_lm_snapshot.pickle was written by nbprof.profile(memory_snapshot=...) on an H200
    (scripts/gpu_verify.py): protocol 4 (MemoryViz.js reads <= 4), and the deliberate leak on its line 41
    (a 1 MiB logits copy kept each of 6 steps) is the one leak suspect, while optimizer state, cuBLAS
    workspaces and frame-less autograd-thread allocations are not."""
    path = DATA / "gpu" / "torchprof_lm_snapshot.pickle"
    assert path.read_bytes()[:2] == b"\x80\x04"
    s = load_memory_snapshot(path)
    leaks = ms.leak_suspects(s)
    assert list(leaks["top_user_frame"]) == ["<module> (gpu_verify.py:41)"]
    assert leaks.iloc[0]["count"] == 6 and leaks.iloc[0]["bytes"] == 6 * 2**20
    assert leaks.attrs["unattributed_bytes"] > 0  # stacks="python": backward allocations carry no frames
    tr = nbprof.load(DATA / "gpu" / "torchprof_lm.pt.trace.json.gz")
    assert (tr.events["cat"] == "kernel").sum() == 580
    assert tr.steps == [2, 3, 4, 5, 6]  # wait=1, warmup=1: steps 2.. recorded (the last, opened by p.step(), is empty)
