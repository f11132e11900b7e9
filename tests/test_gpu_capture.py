"""scripts/gpu_capture.py (issue 36's GPU validation run) in its CPU dry mode: the same code paths, tiny steps.

The real run happens on a CUDA machine; here every scenario must either write traces nbprof loads or say why it
was skipped, and the pairs must differ by exactly the change they are made for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import nbprof

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("torch")


def _run(out: Path, only: str) -> dict:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_capture.py"), str(out), "--dry", "--only", only],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads((out / "manifest.json").read_text())


def test_dry_run_pairs_and_skips(tmp_path):
    m = _run(tmp_path, "double_layer,ddp,snapshots,compiled")
    sc = m["scenarios"]
    assert m["dry"] is True and m["device"] == "cpu"
    assert sc["double_layer"]["status"] == "ok"
    # CUDA-only scenarios say why they did not run; compile is opt-in under --dry
    assert sc["ddp"] == {"status": "skipped", "reason": "NCCL needs a CUDA device", "seconds": 0.0}
    assert sc["snapshots"]["reason"] == "CUDA memory snapshots need a CUDA device"
    assert "--with-compile" in sc["compiled"]["reason"]
    # the "layer made 2x longer" pair: the head projection (512-wide output) runs twice per forward in x2
    calls = {}
    for k in (1, 2):
        tr = nbprof.load(tmp_path / f"lm_head_x{k}.pt.trace.json.gz")
        ev = tr.events
        assert ev["name"].astype(str).str.startswith("ProfilerStep#").sum() == 2  # steps - 2 active steps
        linear = ev[ev["name"].astype(str) == "aten::linear"]
        calls[k] = len(linear)
    n_layers_linear = calls[1]  # per recorded step: attention in/out projections, 2 FFN, head
    assert calls[2] - calls[1] == 2  # one extra head call per step, 2 recorded steps
    assert n_layers_linear > 2
    # the validations a GPU run reports (graph attribution match rate, Triton mapping) run on every trace written:
    # eager CPU traces have neither graph replays nor Inductor kernels
    v = m["validations"]
    assert sorted(v) == ["lm_head_x1.pt.trace.json.gz", "lm_head_x2.pt.trace.json.gz"]
    for entry in v.values():
        assert entry["graph_attribution"] == {"replayed_device_ops": 0, "launches": 0, "graphs": 0, "by_method": {},
                                              "match_rate": None}
        assert entry["inductor"]["kernels"] == 0
