"""notebooks/tensorboard_compare.ipynb executed with papermill: two runs of examples/train_cnn.py
(num_workers 0 and 2, --preprocess-ms) written into a logdir, served by a real TensorBoard, read back
and compared by nbprof. The DataLoader difference must show in TensorBoard's scalars and in nbprof's
comparison, and the notebook must stop the TensorBoard it started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "tensorboard_compare.ipynb"


def _result(nb) -> dict:
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            for line in str(out.get("text", "")).splitlines():
                if line.startswith("NBPROF_RESULT "):
                    return json.loads(line[len("NBPROF_RESULT "):])
    pytest.fail("the notebook printed no NBPROF_RESULT line")


@pytest.mark.slow
def test_tensorboard_compare_notebook(tmp_path):
    papermill = pytest.importorskip("papermill")
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    import nbformat

    from nbprof.tensorboard import discover, running, stop

    logdir = tmp_path / "logs"
    out = tmp_path / "out.ipynb"
    try:
        papermill.execute_notebook(
            str(NOTEBOOK),
            str(out),
            parameters={"logdir": str(logdir), "steps": 4, "batch_size": 16, "preprocess_ms": 1.0},
            cwd=str(tmp_path),
            kernel_name="python3",
            progress_bar=False,
        )
    finally:  # whatever happened, no TensorBoard serving this logdir outlives the test
        for h in running(logdir):
            stop(h)
    res = _result(nbformat.read(out, as_version=4))
    a, b = res["runs"]
    assert (a, b) == ("num_workers_0", "num_workers_2")

    # the logdir has the tensorboard_trace_handler layout: one run per directory, worker0, one span each
    disc = discover(logdir)
    assert sorted(disc["run"]) == [a, b]
    assert set(disc["worker"]) == {"worker0"} and set(disc["span"]) == {"1"}

    # stock TensorBoard served nbprof's scalars for both runs ...
    for run in (a, b):
        assert {"nbprof/step_time_ms", "nbprof/step_breakdown/dataloader_ms"} <= set(res["served_tags"][run])
        # ... with the values nbprof computes when it reads the logdir back
        assert res["served_dataloader_ms"][run] == pytest.approx(res["dataloader_ns"][run] / 1e6, rel=1e-5)

    # the DataLoader difference: workers prefetch, the loop waits less for batches. How much less is a
    # timing on a 2-core machine (the two workers compete with the training loop for the CPUs): 1.45x
    # to 7.5x was seen here, so only the direction is asserted; the exact-value checks are above/below
    dl = res["dataloader_ns"]
    assert dl[a] > dl[b] > 0
    assert res["compare_dataloader_delta_ns"] == pytest.approx(dl[b] - dl[a], rel=1e-9)

    # the notebook stopped the server it started
    assert res["tensorboard_reused"] is False
    assert not any(h.pid == res["tensorboard_pid"] for h in running())
