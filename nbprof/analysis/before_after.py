"""A before/after pair of runs in one answer: did the change make the step faster, by how much, how sure, and why
not when it got slower.

The step-time comparison is :func:`nbprof.analysis.regression.check_regression` (median per-step time, bootstrap
interval of the ratio ``after / before``) on :func:`nbprof.analysis.steps.step_times` of each run's steady-state
steps (``steady=True``: the steps the verdict and the findings' savings average); the per-step role times are
:func:`nbprof.analysis.steps.breakdown_average` of :func:`~nbprof.analysis.steps.steady_breakdown`. No second
definition of either lives here.

The claim (:attr:`BeforeAfter.claim`, the one home of "faster"): the ``after`` run is *faster* (*slower*) when the
bootstrap interval of the ratio lies entirely below (above) 1; when the interval contains 1 the runs differ by no
more than their noise ("no clear change": no ratio is stated as a result). Before either, the step counts must be
able to show a change at all: with ``n`` and ``m`` steps, even a complete separation (every ``after`` step shorter
than every ``before`` one) has the two-sided exact Mann-Whitney p-value ``2 / C(n + m, n)`` (under no change each of
the ``C(n + m, n)`` orderings of the pooled steps is equally likely; Mann & Whitney, *Ann. Math. Statist.* 18(1),
1947). When that floor exceeds ``1 - confidence`` (3 vs 3 steps: 0.10 > 0.05) no interval from these steps can be
trusted to separate the runs -- a percentile bootstrap interval is too narrow on so few values (Hesterberg, *What
teachers should know about the bootstrap*, Amer. Statist. 69(4), 2015) -- and the claim is ``"too few steps"``.

The prediction set against the measurement (:class:`PredictionCheck`, issue 30): the ``before`` run's findings
each predict a saving per step (:attr:`nbprof.analysis.findings.Finding.predicted_saving_ns`, the what-if replay's
mean over the steady-state steps, :func:`nbprof.analysis.findings.steady_saving`). The finding checked is the one
whose part (:data:`nbprof.analysis.verdict.PARTS`) shrank the most per step from ``before`` to ``after`` (each run's
steady-state average, :func:`~nbprof.analysis.steps.steady_breakdown`) -- the fix the user most likely made -- else
the first ranked one. Its prediction is set against the measured change of the mean step time over each run's
steady-state steps (:func:`~nbprof.analysis.steps.step_times` ``steady=True``: the same steps and the same mean the
prediction's baseline is, so a run that changed nothing measures 0) and said to be within the prediction's range
(:meth:`~nbprof.analysis.findings.Finding.saving_range_ns`) or not.

Contention: a change that moves work off the training process (DataLoader workers, a prefetch thread) makes the
step slower when the freed work competes for the same cores: the training process's own CPU work then runs
slower, which the breakdown shows as a larger average *CPU Exec* time per step. :func:`before_after` flags it when
the ``after`` run is slower (ratio > 1) and its CPU Exec time per step grew by more than
:data:`CONTENTION_GROWTH` (the same code taking that much longer is the CPU being shared, not the change).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

import numpy as np
import pandas as pd

from ..trace.model import Trace
from .findings import Finding
from .regression import RegressionCheck, check_regression
from .steps import breakdown_average, steady_breakdown, step_times

__all__ = ["BeforeAfter", "before_after", "CONTENTION_GROWTH", "CLAIMS", "separation_floor", "PredictionCheck",
           "prediction_check"]

#: The claims :attr:`BeforeAfter.claim` makes (see the module docstring).
CLAIMS = ("faster", "slower", "no clear change", "too few steps")


def separation_floor(n: int, m: int) -> float:
    """The smallest two-sided p-value any ``n`` vs ``m`` steps can give: ``2 / C(n + m, n)``, the exact Mann-Whitney
    probability of a complete separation in either direction (capped at 1). 4 vs 4 steps: 2/70 = 0.029; 3 vs 3: 0.10.

    Raises
    ------
    ValueError
        For a negative step count.
    """
    if n < 0 or m < 0:
        raise ValueError(f"step counts must be >= 0, not {n} and {m}")
    return min(1.0, 2 / comb(n + m, n))

#: growth of the average CPU Exec time per step (after / before) above which a slower ``after`` is put down to
#: contention for the CPU (1.2: 20 % more time for the same host work)
CONTENTION_GROWTH = 1.2


@dataclass(frozen=True)
class PredictionCheck:
    """A ``before`` run's predicted saving set against the change measured in the ``after`` run (ns per step).

    Attributes
    ----------
    finding : Finding
        The ``before`` run's finding checked (its rule, title, part, predicted saving and range).
    position : int
        Its place in the ``before`` run's ranking (1-based).
    chosen_by : str
        ``"part"`` (its part shrank the most per step) or ``"first"`` (no part of a quantified finding shrank: the
        first ranked finding).
    measured_ns : float
        Mean step ``before`` minus mean step ``after``, each over its steady-state steps (positive: saved).
    part_before_ns, part_after_ns : float
        The finding's part per step in each run (the step-breakdown columns it sums; NaN when the part has none).
    """

    finding: Finding
    position: int
    chosen_by: str
    measured_ns: float
    part_before_ns: float
    part_after_ns: float

    @property
    def predicted_ns(self) -> int:
        """The predicted saving per step, ns (``Finding.predicted_saving_ns``)."""
        return int(self.finding.predicted_saving_ns or 0)

    @property
    def within(self) -> bool:
        """The measured saving lies in the prediction's range (``Finding.saving_range_ns``: the harness's error)."""
        rng = self.finding.saving_range_ns()
        return rng is not None and rng[0] <= self.measured_ns <= rng[1]

    @property
    def error(self) -> float:
        """``predicted / measured - 1`` (NaN when nothing was saved)."""
        return self.predicted_ns / self.measured_ns - 1 if self.measured_ns > 0 else float("nan")


def _part_columns(part: str) -> tuple[str, ...]:
    """The step-breakdown columns of a verdict part; a carved part (``sync_wait``, ``python``) reads the part it is
    carved from (``host``, ``idle``)."""
    from .verdict import PARTS

    carved = {"sync_wait": "host", "python": "idle"}
    return PARTS.get(part) or PARTS.get(carved.get(part, ""), ())


def prediction_check(before: Trace, after: Trace, findings: Sequence[Finding] | None = None
                     ) -> PredictionCheck | None:
    """The ``before`` run's prediction for the fix made, against the measured change (module docstring).

    ``findings``: the ``before`` run's ranked findings (default :func:`nbprof.analysis.advisor.advise`). Returns
    None when no finding of ``before`` is quantified.

    Raises
    ------
    ValueError
        When a trace has no host events (no step time), as :func:`step_times`.
    """
    if findings is None:
        from .advisor import advise

        findings = advise(before)
    quantified = [(i, f) for i, f in enumerate(findings, 1) if f.quantified]
    if not quantified:
        return None
    avg_b, avg_a = breakdown_average(steady_breakdown(before)), breakdown_average(steady_breakdown(after))

    def part_ns(avg: pd.Series, part: str) -> float:
        cols = _part_columns(part)
        return float(sum(float(avg[c]) for c in cols)) if cols else float("nan")

    shrink = [(part_ns(avg_b, f.part) - part_ns(avg_a, f.part), i, f) for i, f in quantified]
    shrink = [x for x in shrink if x[0] == x[0] and x[0] > 0]
    if shrink:
        _, pos, f = max(shrink, key=lambda x: (x[0], -x[1]))
        chosen = "part"
    else:
        pos, f = quantified[0]
        chosen = "first"
    measured = float(np.mean(step_times(before, steady=True))) - float(np.mean(step_times(after, steady=True)))
    return PredictionCheck(finding=f, position=pos, chosen_by=chosen, measured_ns=measured,
                           part_before_ns=part_ns(avg_b, f.part), part_after_ns=part_ns(avg_a, f.part))


@dataclass
class BeforeAfter:
    """The answer of :func:`before_after` (times in float ns).

    Attributes
    ----------
    check : RegressionCheck
        Median step time of each side, ``ratio = after / before`` and its bootstrap interval
        (``ci_low``, ``ci_high``), verdict ``"improvement"`` / ``"regression"`` / ``"no significant change"``.
    cpu_exec_ns, dataloader_ns : tuple of float
        Average CPU Exec / DataLoader time per step, ``(before, after)`` (ns).
    contention : bool
        ``after`` is slower and its CPU Exec time per step grew by more than :data:`CONTENTION_GROWTH`.
    prediction : PredictionCheck or None
        The ``before`` run's predicted saving against the measured change (:func:`prediction_check`); None when not
        asked for or no finding is quantified.
    """

    check: RegressionCheck
    cpu_exec_ns: tuple[float, float]
    dataloader_ns: tuple[float, float]
    contention: bool
    prediction: PredictionCheck | None = None

    @property
    def claim(self) -> str:
        """One of :data:`CLAIMS`: ``"too few steps"`` when :func:`separation_floor` of the step counts exceeds
        ``1 - confidence``; else ``"faster"`` / ``"slower"`` when the ratio's interval lies below / above 1, else
        ``"no clear change"`` (see the module docstring)."""
        c = self.check
        if separation_floor(len(c.baseline_steps_ns), len(c.candidate_steps_ns)) > 1 - c.confidence:
            return "too few steps"
        if c.ci_high < 1:
            return "faster"
        if c.ci_low > 1:
            return "slower"
        return "no clear change"

    @property
    def cpu_exec_growth(self) -> float:
        """``after / before`` of the average CPU Exec time per step (NaN when ``before`` has none)."""
        a, b = self.cpu_exec_ns
        return b / a if a > 0 else float("nan")


def before_after(before: Trace, after: Trace, *, max_regress: float = 0.05, predict: bool = False,
                 findings: Sequence[Finding] | None = None) -> BeforeAfter:
    """Compare the step times of ``before`` and ``after`` (see the module docstring).

    Parameters
    ----------
    before, after : Trace
        The run before the change (the baseline) and after it.
    max_regress : float, default 0.05
        Threshold of :func:`check_regression`'s verdict (a change within ±5 % is "no significant change").
    predict : bool, default False
        Also set the ``before`` run's prediction against the measured change (:func:`prediction_check`; runs the
        advisor on ``before`` unless ``findings`` are given).
    findings : sequence of Finding, optional
        The ``before`` run's ranked findings, for ``predict``.

    Returns
    -------
    BeforeAfter

    Raises
    ------
    ValueError
        When a trace has no host events (no step time), as :func:`step_times`.
    """
    check = check_regression(step_times(before, steady=True), step_times(after, steady=True), max_regress=max_regress)
    check.baseline, check.candidate = "before", "after"
    avg_b, avg_a = breakdown_average(steady_breakdown(before)), breakdown_average(steady_breakdown(after))
    cpu = (float(avg_b["cpu_exec_ns"]), float(avg_a["cpu_exec_ns"]))
    dl = (float(avg_b["dataloader_ns"]), float(avg_a["dataloader_ns"]))
    contention = check.ratio > 1 and cpu[0] > 0 and cpu[1] / cpu[0] > CONTENTION_GROWTH
    pc = prediction_check(before, after, findings) if predict else None
    return BeforeAfter(check=check, cpu_exec_ns=cpu, dataloader_ns=dl, contention=contention, prediction=pc)
