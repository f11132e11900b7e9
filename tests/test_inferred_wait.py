"""The inferred-wait rule (``critical_path.device_edges.inferred_wait_sources``): a ``cudaStreamWaitEvent`` the
trace has no ``Stream Wait Event`` row for becomes a replay-only ``gpu_sync`` edge, so the replay's wait shrinks
with what it waits for (issue 30), on HTA's ``trace_diff`` control trace (an A100 DLRM rank, 8 ranks, whose
compute stream waits ~9 ms per step for the NCCL all_to_all on another stream)."""

from __future__ import annotations

import numpy as np
import pytest

import nbprof
from nbprof.analysis import advisor, whatif
from nbprof.analysis import critical_path as cpm

CONTROL = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz"


@pytest.fixture(scope="module")
def control(corpus):
    return nbprof.load(corpus(CONTROL))


def test_inferred_waits_are_replay_edges_from_another_stream(control):
    g = cpm.build_graph(control)
    gs = np.flatnonzero(g.kind == cpm.GPU_SYNC)
    # no Stream Wait Event rows: every gpu_sync edge is inferred, one per waiting op (6 steps), none HTA's
    assert gs.size == 28
    assert (g.hta_w[gs] == -1).all()
    ev = control.events
    src_row, dst_row = g.node_row[g.src[gs]], g.node_row[g.dst[gs]]
    stream = ev["stream"].to_numpy()
    assert (stream[src_row] != stream[dst_row]).all()
    lag = g.t[g.dst[gs]] - g.t[g.src[gs]]
    assert lag.min() >= 0 and lag.max() <= 20_000  # the source ends at most 20 µs before the waiting op starts
    # the biggest wait: the compute kernel that waits for the all_to_all (NCCL SendRecv) of its step
    names = ev["name"].astype(str).to_numpy()
    assert sum(n.startswith("ncclKernel_SendRecv") for n in names[src_row]) >= 6


def test_replay_exact_and_waits_shrink_with_communication(control):
    base = whatif.predict(control, [])
    ps = base.per_step
    assert len(ps) == 6
    assert (ps["predicted_ns"] == ps["baseline_ns"]).all()
    assert round(base.baseline_step_ns) == 77_501_667
    o = whatif.predict(control, "overlap_communication")
    # before the rule: 0.63 ms (0.8 %), the 9 ms wait behind the all_to_all replayed as a fixed stream gap
    assert o.saving_ns > 0.05 * o.baseline_step_ns
    assert o.saving_ns == pytest.approx(5_139_667, abs=1_000)
    half = whatif.predict(control, whatif.scale("ncclKernel_SendRecv", 0.5))
    assert half.saving_ns == pytest.approx(2_639_750, abs=1_000)  # was 0: the wait did not shrink


def test_communication_finding_quantified_with_the_saving(control):
    o = whatif.predict(control, "overlap_communication")
    comm = [f for f in advisor.advise(control) if f.rule == "communication"]
    assert len(comm) == 1
    assert comm[0].predicted_saving_ns == pytest.approx(o.saving_ns, abs=1)
    assert comm[0].predicted_saving_ns > 0.05 * o.baseline_step_ns


def test_recorded_waits_are_not_inferred(corpus):
    """HTA's simple_add trace records its waits (``Stream Wait Event`` rows): no edge is inferred there, even for
    an op whose recorded wait nbprof does not resolve (the graph is the one without the rule)."""
    t = nbprof.load(corpus("facebookresearch__HolisticTraceAnalysis/tests/data/critical_path/simple_add/"
                           "benchmark_result_493459_1694039959_trace.json.gz"))
    assert int((t.events["name"] == "Stream Wait Event").sum()) == 20
    g = cpm.build_graph(t)
    # the add kernel on stream 7 starts 511 µs after its stream's previous op, 2 µs after an fft kernel on stream
    # 20 ended, and its thread called cudaStreamWaitEvent before launching it: the timing would infer that wait,
    # but its calls have Stream Wait Event rows, so no edge is inferred (none resolved without sync_args either)
    assert int((g.kind == cpm.GPU_SYNC).sum()) == 0
