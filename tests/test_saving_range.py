"""A saving's printed range never exceeds the step it was predicted on (findings.Finding.saving_range_ns)."""

from __future__ import annotations

import pytest

import nbprof
from nbprof.analysis.advisor import advise
from nbprof.analysis.findings import SAVING_REL_ERROR, Finding

B200 = "AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz"


def test_range_is_relative_error_when_the_saving_is_small() -> None:
    f = Finding(rule="r", severity="high", title="t", predicted_saving_ns=1_000_000, step_ns=20_000_000.0)
    assert f.saving_range_ns() == (1_000_000 * (1 - SAVING_REL_ERROR), 1_000_000 * (1 + SAVING_REL_ERROR))


def test_b200_cuda_graphs_saving_range_stays_inside_the_step(corpus) -> None:
    f = next(f for f in advise(nbprof.load(corpus(B200))) if f.rule == "launch_bound")
    lo, hi = f.saving_range_ns()
    step, s = f.step_ns, f.predicted_saving_ns
    # the replay over the 17 steady steps the verdict averages: 3.941 ms -> 0.727 ms with CUDA graphs (the mean over
    # all 18, the 2.4x warm-up step 0 included, was 4.234 -> 0.729 ms: a second step time beside the verdict's)
    assert step == pytest.approx(3_941_408, abs=1) and s == pytest.approx(3_214_458, abs=1)
    assert lo == pytest.approx(s * (1 - SAVING_REL_ERROR))
    assert hi == pytest.approx(step - (step - s) * (1 - SAVING_REL_ERROR))  # 3.396 ms, not s * 1.25 = 4.02 ms (> the step)
    assert hi < step
