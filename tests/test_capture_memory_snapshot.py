"""Snapshot capture: on this CPU machine it must say why nothing is recorded and still run the block."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from nbprof.capture.memory_snapshot import record  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_cpu_note_and_block_runs(tmp_path, capsys):
    ran = []
    with record(tmp_path / "s.pickle") as cap:
        ran.append(torch.ones(3).sum().item())
    assert ran == [3.0]
    assert cap.path is None
    assert "need a CUDA device" in capsys.readouterr().out
    assert not (tmp_path / "s.pickle").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_user_exception_propagates(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with record(tmp_path / "s.pickle", quiet=True):
            1 / 0
