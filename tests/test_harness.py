"""The validation harness of issue 30 (tests/harness): on before/after pairs whose real fix is known, nbprof names a
bound, ranks the fix's finding first, and predicts the measured saving (docs/harness.md; scripts/harness_table.py).

Runs the 8 CPU workloads (2 interleaved rounds), the 2-rank gloo straggler, the CPU-contention pair (2 rounds), and
the recorded GPU pairs; ~2 min on
the shared 2-core machine. Error targets are checked on the pairs the guard calls undisturbed (the work the fix does
not touch agreed between the two runs), skipped when fewer than 4 are, or when runnable tasks waited for a CPU over
half the time the CPU pairs ran (tests/timing_guard.py: a machine too loaded to measure on)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "harness"))

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    pytest.importorskip("torch")
    import pairs as H
    from _support.timing_guard import measure

    out = tmp_path_factory.mktemp("harness")
    # the CPU pairs under the one timing guard (CPU pressure while they ran): the per-pair guard of pairs.py (the
    # untouched work, the rounds' spread) cannot see a load that slows both runs alike but not their difference
    cpu = measure(lambda a: H.evaluate(H.cpu_pairs(out, rounds=2) + [H.straggler_pair(out), H.contention_pair(out)]),
                  what="the harness's CPU pairs", tries=1)
    rows = cpu.value + H.evaluate(H.gpu_pairs())
    print("\n" + H.markdown(rows))
    return rows, cpu


@pytest.fixture(scope="module")
def rows(run):
    return run[0]


def test_every_pair_names_a_bound_and_the_fix(rows):
    import pairs as H

    assert len(rows) >= 10
    by = {r["name"]: r for r in rows}
    for r in rows:
        assert r["bound"] not in ("none", "too_short"), r
        assert r["fix_rank"] >= 1, r  # the fix's finding exists
    # the right fix first in at least 9 of 10 pairs
    s = H.summary(rows)
    assert s["right_first"] >= 0.9 * s["pairs"], [(r["name"], r["first_rule"]) for r in rows if r["fix_rank"] != 1]
    # the bound is the part the fix shrinks where the fix is the input pipeline
    for n in ("dataloader", "slow_collate", "h200_cnn_workers"):
        assert by[n]["bound"] == "dataloader", by[n]
    # host work in Python (torch.save), not "idle"; print(tensor) formats with aten ops too, so host or Python
    assert by["checkpoint"]["bound"] == "python", by["checkpoint"]
    assert by["print_tensor"]["bound"] in ("python", "host"), by["print_tensor"]


def test_gpu_pairs_predictions(rows):
    # recorded traces: deterministic. H200 CNN: no_dataloader predicts 21.1 ms, the num_workers=4 run measures
    # 18.6 ms (+13%); V100 ResNet-50: 59.0 vs 36.5 ms (+61%: not the data wait, which the 4-worker run no longer has;
    # two of its six steps carry work the change does not explain: test_v100_workers_miss_is_not_the_dataloader_model)
    by = {r["name"]: r for r in rows}
    assert abs(by["h200_cnn_workers"]["error"]) <= 0.20
    if "v100_resnet50_workers" in by:
        assert 0 < by["v100_resnet50_workers"]["error"] <= 1.0  # within 2x


def test_v100_workers_miss_is_not_the_dataloader_model():
    """Why the V100 pair is +61% (59.0 ms predicted, 36.5 measured over the 6 steps of each run): not the data wait.

    The before run fetches in the main process (F = D = 48-69 ms per step, R = 118 ms), so with 4 workers on the DGX
    Station's 20 cores a batch arrives every F/4 = 15 ms < R: ``dataloader_workers(4, cores=20)`` predicts no wait
    left, as ``no_dataloader``, and the after run's steady steps indeed wait <= 1.4 ms. The predicted step, 118.6 ms,
    is within 7% of the after run's median step (126.7 ms). The measured mean carries two steps the change does not
    explain: the first profiled step's pageable ``cudaMemcpyAsync`` waits 40 ms for device work queued before the
    profiling window, and step 9's host work takes 28 ms more (``cpu_exec`` 43.9 ms vs 13-20 ms: the workers
    decoding on the same host). Those two steps add (182.3 + 163.5 - 2 x 126.7) / 6 = 15.4 ms to the after run's mean
    step: 15.4 of the 22.5 ms gap; the rest is the steady steps' host work, ~6% slower than predicted (the same
    contention, not modelled: ``whatif.dataloader_workers``'s docstring). The measurement (the mean step, the one step
    definition) is kept; the model of the data wait needs no change."""
    import pairs as H

    from nbprof.analysis import whatif
    from nbprof.analysis.steps import step_breakdown

    d0, d4 = H.CORPUS / H.V100.format(0), H.CORPUS / H.V100.format(4)
    if not (d0.is_dir() and d4.is_dir()):
        pytest.skip("../shared/corpus (torch-tb-profiler's ResNet-50 samples) is absent")
    import nbprof

    b, a = nbprof.load(next(d0.glob("*.pt.trace.json*"))), nbprof.load(next(d4.glob("*.pt.trace.json*")))
    knob = whatif.predict(b, whatif.dataloader_workers(4, cores=20))
    upper = whatif.predict(b, "no_dataloader")
    assert knob.predicted_step_ns == pytest.approx(upper.predicted_step_ns, rel=1e-9)  # F / 4 < R: no wait left
    assert knob.saving_ns == pytest.approx(58.98e6, rel=0.01)
    ab, bb = step_breakdown(a), step_breakdown(b)
    assert bb["dataloader_ns"].max() / 4 < (bb["step_ns"] - bb["dataloader_ns"]).min()  # F / 4 < R in every step
    assert (ab["dataloader_ns"].iloc[1:] <= 1.5e6).all()  # the after run's data waits: the model's D' = 0
    measured = bb["step_ns"].mean() - ab["step_ns"].mean()
    assert measured == pytest.approx(36.52e6, rel=0.01)
    assert abs(knob.predicted_step_ns / ab["step_ns"].median() - 1) <= 0.07
    # the two steps the model does not explain: the first step's copy wait, step 9's slower host work
    first = a.events[(a.events["name"].astype(str) == "cudaMemcpyAsync")
                     & (a.events["ts_ns"] < int(ab["end_ns"].iloc[0]))]
    assert first["dur_ns"].sum() >= 39e6
    assert ab.loc[ab["step"] == 9, "cpu_exec_ns"].iloc[0] >= 2 * ab["cpu_exec_ns"].drop(index=[0, 4]).median()


def test_dataloader_workers_knob_on_the_real_pairs(rows, run):
    # whatif.dataloader_workers(4) on the before run against the num_workers=4 after run. The CPU pair's fetch
    # sleeps (0.5 ms per sample: a read): its waiting frames take no core, so 4 workers overlap them on 2 cores
    # (the model before stop 40 capped the workers at cores - 1 and predicted ~3 ms of the ~32 ms saving). The
    # after run's 4 steps drain a prefetch queue (persistent workers, prefetch_factor 4) while the model predicts
    # the steady state, one batch per F / 4: at the merge 39.9 vs 32.0 ms (+25%, a loaded run). H200: +2%
    # (recorded, deterministic). V100: the after run's host work is 20% slower (4 decoding workers share the
    # host: contention the model does not have), so the knob is the no_dataloader upper bound there (+61%).
    by = {r["name"]: r for r in rows}
    dl = by["dataloader"]
    if not dl["disturbed"] and not run[1].disturbed:
        assert 0.67 <= 1 + dl["knob_error"] <= 1.5, dl
    assert abs(by["h200_cnn_workers"]["knob_error"]) <= 0.10
    if "v100_resnet50_workers" in by:
        assert 0 < by["v100_resnet50_workers"]["knob_error"] <= 1.0


#: pairs whose prediction misses for a known reason (kept in the table, left out of the regression bound below)
KNOWN_MISSES: set[str] = set()
# (straggler left it: it was under-predicted by about half on a quiet machine, 15.4 vs 28.7 ms, because in some
# steps rank 0's main thread resumed from the all-reduce before gloo closed its gloo:all_reduce range, and the replay
# kept that step's whole wait; the resume is now an edge tied to the range -- eleven runs: predicted / measured
# 0.82-1.20, tests/test_whatif_knobs.py's recorded pair)
# (python_metrics left it: host_sync now removes the tensor iteration feeding the .item() loop -- Tensor.__iter__ ->
# aten::unbind, an aten::select per element, built before the loop's <genexpr> frame; three quiet runs: -11%, -3%, -5%)


def test_cpu_optimizer_loop_is_not_quantified(rows):
    # on CPU, foreach=True still runs one op per tensor (the CPU _foreach_ ops loop in C++) and adds its own
    # per-parameter work: measured at stop 40, the pair's saving was -0.24 ms (undisturbed round) against 3.6 ms of
    # Python loop between the ops (the old scenario predicted 2.7-18.6 ms, +1359% at the merge). The finding stays
    # first (fused=True is the CPU fix), unquantified with that reason.
    r = {r["name"]: r for r in rows}["optimizer"]
    assert r["fix_rank"] == 1 and r["predicted_ns"] is None and "CPU-only" in r["reason"], r


def _cpu_quiet(rows, run):
    import pairs as H

    run[1].skip_if_disturbed()

    cpu = [r for r in rows if not r["name"].endswith("_workers")]
    q = [r for r in cpu if r["error"] is not None and not r["disturbed"]]
    if len(q) < 4:
        pytest.skip(f"machine too loaded: only {len(q)} undisturbed quantified CPU pairs\n" + H.markdown(rows))
    return cpu


def test_cpu_predicted_savings_against_measured(rows, run):
    # today's numbers as a regression bound (a quiet run here: median 25% of the measured saving, worst 1.5x but the
    # known miss): median absolute error <= 35%, none off by more than 2x
    import pairs as H

    s = H.summary([r for r in _cpu_quiet(rows, run) if r["name"] not in KNOWN_MISSES])
    assert s["median_abs_error"] <= 0.35, H.markdown(rows)
    assert s["max_factor"] <= 2.0, H.markdown(rows)
