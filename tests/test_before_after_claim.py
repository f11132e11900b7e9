"""The before/after claim (``analysis.before_after.BeforeAfter.claim``) on real step times: a change is claimed only
when the bootstrap interval of the median step's ratio excludes 1, "no clear change" states no ratio as a result,
and step counts that cannot separate two runs at all (the exact Mann-Whitney floor) say so."""

from __future__ import annotations

import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis.before_after import BeforeAfter, before_after, separation_floor
from nbprof.analysis.regression import check_regression
from nbprof.analysis.steps import step_times
from nbprof.results.compare_render import before_after_html, before_after_sentence

NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NW4 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"


def test_separation_floor_is_the_exact_rank_test_extreme():
    assert separation_floor(3, 3) == pytest.approx(0.1)  # 2 / C(6, 3)
    assert separation_floor(4, 4) == pytest.approx(2 / 70)
    assert separation_floor(1, 1) == 1.0 and separation_floor(1, 30) == pytest.approx(2 / 31)
    assert separation_floor(2, 8) == pytest.approx(2 / 45)
    with pytest.raises(ValueError):
        separation_floor(-1, 3)


def test_a_change_whose_interval_excludes_1_is_not_within_the_noise():
    # V100 ResNet-50, num_workers 0 -> 4: interval 0.68-0.97 of the ratio. The old sentence added "Within the noise:
    # the interval includes a change under 5 %" (regression verdict "no significant change") to "1.40x faster".
    ba = before_after(nbprof.load(corpus_path(NW0)), nbprof.load(corpus_path(NW4)))
    assert ba.check.verdict == "no significant change" and ba.claim == "faster"
    assert before_after_sentence(ba) == (
        "'after' vs 'before': 1.40x faster (median step 126.682 ms instead of 177.443 ms; "
        "95 % interval 1.03x-1.47x faster, 6 and 6 steps).")
    assert "#2ca02c" in before_after_html(ba)


def test_an_interval_over_1_states_no_ratio():
    # CPU CNN, num_workers 0 -> 2 on a 2-core machine, every step: median 25.840 -> 18.805 ms but one 43 ms step; the
    # interval 0.68-1.31 holds 1. The old sentence led with "1.37x faster".
    a, b = (nbprof.load(DATA / "cpu" / f"cnn_nw{n}.pt.trace.json.gz") for n in (0, 2))
    ba = BeforeAfter(check_regression(step_times(a), step_times(b)), (0.0, 0.0), (0.0, 0.0), False)
    assert ba.check.ci_low < 1 < ba.check.ci_high and ba.claim == "no clear change"
    s = before_after_sentence(ba)
    assert s == ("'after' vs 'before': no clear change: the 95 % interval of the median step's ratio, 1.48x faster to "
                 "1.31x slower, includes no change (median step 18.805 ms instead of 25.840 ms, 6 and 6 steps).")
    assert "1.37x" not in s and "#7f7f7f" in before_after_html(ba)
    # the 43 ms step is the after run's first (its two workers starting): warm-up, which the page's steady steps
    # leave out (the verdict's and the savings' steps); over those the change is clear
    steady = before_after(a, b)
    assert steady.claim == "faster" and len(steady.check.candidate_steps_ns) == 5
    assert before_after_sentence(steady) == (
        "'after' vs 'before': 1.42x faster (median step 18.139 ms instead of 25.840 ms; 95 % interval 1.05x-1.50x "
        "faster, 6 and 5 steps).")


def test_too_few_steps_to_separate():
    a = step_times(nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"))
    b = step_times(nbprof.load(DATA / "gpu" / "cnn_nw4_prep.pt.trace.json.gz"))
    # the same 7.75x-faster pair, its first 3 steps per side: the bootstrap interval alone would claim a change
    three = BeforeAfter(check_regression(a[:3], b[:3]), (0.0, 0.0), (0.0, 0.0), False)
    assert three.check.ci_high < 1 and three.claim == "too few steps"
    s = before_after_sentence(three)
    assert s.startswith("'after' vs 'before': 3 and 3 steps: too few to separate from noise (median step 3.311 ms "
                        "instead of 24.356 ms;") and "p-value would be 0.10, over 0.05" in s and "faster" not in s
    # 4 per side can: every 'after' step is shorter
    four = BeforeAfter(check_regression(a[:4], b[:4]), (0.0, 0.0), (0.0, 0.0), False)
    assert four.claim == "faster"
