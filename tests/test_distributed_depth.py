"""Issue 24: distributed jobs in depth -- wait vs transfer and stragglers on a real 2-rank gloo DDP run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import nbprof
from nbprof.analysis import distributed as D

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword:Warning", "ignore::DeprecationWarning")

WORKLOADS = Path(__file__).parent / "workloads"
SLEEP_S = 0.05
STEPS = 4


def _free_port() -> int:
    from nbprof.deepspeed.run import free_port

    return free_port()


def torchrun(script: str, out: Path, *args: str, nproc: int = 2, timeout: float = 180) -> None:
    """Run a workload under torchrun on gloo/CPU (its own process group, killed on timeout)."""
    pytest.importorskip("torch")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
            "--master_addr", "127.0.0.1", "--master_port", str(_free_port()), str(WORKLOADS / script), str(out),
            *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(out))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


@pytest.fixture(scope="module")
def straggler_traces(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp_straggler")
    torchrun("ddp_straggler.py", out, "--sleep", str(SLEEP_S), "--steps", str(STEPS))
    return [nbprof.load(out / f"rank{r}.pt.trace.json") for r in (0, 1)]


def test_wait_transfer_on_real_ddp_straggler(straggler_traces):
    wt = D.wait_transfer(straggler_traces)
    assert list(wt.columns[:3]) == ["collective", "k", "rank"]
    assert (wt["wait_ns"] + wt["transfer_ns"] == wt["dur_ns"]).all()
    assert ((wt["wait_ns"] >= 0) & (wt["transfer_ns"] >= 0)).all()
    ar = wt[wt["collective"] == "all_reduce"]
    assert sorted(ar["step"].unique()) == [1, 2, 3, 4]  # one gradient bucket per step
    r0 = ar[ar["rank"] == 0]
    assert len(r0) == STEPS
    # rank 0 waits for rank 1's injected sleep in every all-reduce: 50 ms +-10 %
    assert r0["wait_ns"].tolist() == pytest.approx([SLEEP_S * 1e9] * STEPS, rel=0.10)
    assert (ar["last_rank"] == 1).all()
    assert (ar.loc[ar["rank"] == 1, "wait_ns"] < 0.1 * SLEEP_S * 1e9).all()  # the straggler barely waits
    s = D.wait_transfer_summary(wt).set_index(["rank", "collective"])
    assert s.loc[(0, "all_reduce"), "wait_ratio"] > 0.8
    assert s.loc[(0, "all_reduce"), "count"] == STEPS


def test_straggler_recurs_every_step(straggler_traces):
    st = D.stragglers(straggler_traces).set_index("rank")
    assert st.loc[1, "straggler"] and not st.loc[0, "straggler"]
    assert st.loc[1, "straggler_steps"] == st.loc[1, "steps"] == STEPS
    assert st.loc[1, "recurrence"] == 1.0 and st.loc[1, "longest_run"] == STEPS
    assert st.loc[1, "caused_wait_ns"] == pytest.approx(STEPS * SLEEP_S * 1e9, rel=0.10)


def test_wait_transfer_needs_two_ranks(straggler_traces):
    assert D.wait_transfer(straggler_traces[:1]).empty
    assert D.stragglers(straggler_traces[:1]).empty
