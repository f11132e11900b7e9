"""Issue 33 B8 and "also": a snapshot pickle whose back-references expand without bound is refused at
once with a clear error; a lone surrogate in a frame is replaced (reported), not a UnicodeEncodeError."""

from __future__ import annotations

import pickle

import pytest

from nbprof.errors import TraceFormatError
from nbprof.sources.memory_snapshot import load_memory_snapshot


def _entry(frames):
    return {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 512, "stream": 0,
                                                 "frames": frames}]]}


def test_back_reference_bomb_refused_quickly(tmp_path):
    x = [{"filename": "train.py", "line": 1, "name": "step"}]
    for _ in range(12):  # 10**12 frames as a tree, 420 bytes as a pickle
        x = [x] * 10
    p = tmp_path / "bomb.pickle"
    p.write_bytes(pickle.dumps(_entry(x), protocol=4))
    with pytest.raises(TraceFormatError, match=r"expands .* back-references"):
        load_memory_snapshot(p)  # refused before any walk (the unbounded one took 315 s and 6.8 GB)


def test_self_containing_list_refused(tmp_path):
    loop: list = []
    loop.append(loop)
    p = tmp_path / "loop.pickle"
    p.write_bytes(pickle.dumps(_entry(loop)))
    with pytest.raises(TraceFormatError, match="contains itself"):
        load_memory_snapshot(p)


def test_surrogate_in_frame_replaced_and_reported(tmp_path):
    p = tmp_path / "s.pickle"
    p.write_bytes(pickle.dumps(_entry([{"filename": "tr\ud800in.py", "line": 7, "name": "st\udcffep"}])))
    snap = load_memory_snapshot(p)
    texts = " ".join(map(str, snap.frames.astype(str).to_numpy().ravel()))
    assert "tr\ufffdin.py" in texts and "st\ufffdep" in texts
    it = snap.report.get("surrogates")
    assert it is not None and (it.action, it.count) == ("repaired", 2)
