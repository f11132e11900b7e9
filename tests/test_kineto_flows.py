"""Flow pairing keeps every start and finish (Kineto reuses flow ids)."""

from __future__ import annotations

import json

import nbprof


def test_reused_ids_and_orphans(tmp_path):
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0.0, "dur": 50.0},
        # id 7: one launch, two device finishes (graph launch), then id 7 reused for a later launch
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 1.0},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 5.0, "bp": "e"},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 6.0, "bp": "e"},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 10.0},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 12.0, "bp": "e"},
        # a finish whose start was not recorded, and a start without finish
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 0, "tid": 7, "ts": 20.0, "bp": "e"},
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1, "tid": 1, "ts": 30.0},
    ]
    p = tmp_path / "flows.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    f = nbprof.load(p).flows
    rows = f[["cat", "id", "src_ts_ns", "dst_ts_ns"]].astype({"cat": str}).values.tolist()
    assert rows == [
        ["ac2g", 7, 1000, 5000],
        ["ac2g", 7, 1000, 6000],
        ["ac2g", 7, 10000, 12000],
        ["ac2g", 9, -1, 20000],
        ["fwdbwd", 3, 30000, -1],
    ]
