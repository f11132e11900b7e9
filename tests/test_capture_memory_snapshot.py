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
    with pytest.raises(ZeroDivisionError), record(tmp_path / "s.pickle", quiet=True):
        1 / 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_torchprof_memory_snapshot_option_on_cpu(tmp_path):
    import nbprof

    with nbprof.profile(memory_snapshot=str(tmp_path / "snap.pickle"), quiet=True) as p:
        torch.ones(8).sum()
    assert p.memory_snapshot is None
    assert any("need a CUDA device" in n for n in p.notes)
    assert len(p.trace.events) > 0


def test_torchprof_tensorboard_writes_nbprof_scalars(tmp_path):
    import nbprof
    from nbprof.tensorboard import discover

    logdir = tmp_path / "tb" / "myrun"
    with nbprof.profile(tensorboard=str(logdir), steps=3, quiet=True) as p:
        for _ in range(3):
            torch.randn(32, 32) @ torch.randn(32, 32)
            p.step()
    events = list(logdir.glob("events.out.tfevents.*"))
    assert events, "nbprof scalars were not written beside the trace"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    acc.Reload()
    assert "nbprof/step_time_ms" in acc.Tags()["tensors"]  # summary-v2 scalars are tensors
    from nbprof.analysis.steps import step_breakdown

    bd = step_breakdown(p.trace)
    got = {e.step: float(tensor_util.make_ndarray(e.tensor_proto)) for e in acc.Tensors("nbprof/step_time_ms")}
    assert got == pytest.approx({int(r.step): r.step_ns / 1e6 for r in bd.itertuples()}, rel=1e-6)
    runs = discover(tmp_path / "tb")
    assert list(runs["run"].unique()) == ["myrun"]
