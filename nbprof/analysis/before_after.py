"""A before/after pair of runs in one answer: did the change make the step faster, by how much, how sure, and why
not when it got slower.

The step-time comparison is :func:`nbprof.analysis.regression.check_regression` (median per-step time, bootstrap
interval of the ratio ``after / before``) on :func:`nbprof.analysis.steps.step_times`; the per-step role times
are :func:`nbprof.analysis.steps.breakdown_average`. No second definition of either lives here.

The claim (:attr:`BeforeAfter.claim`, the one home of "faster"): the ``after`` run is *faster* (*slower*) when the
bootstrap interval of the ratio lies entirely below (above) 1; when the interval contains 1 the runs differ by no
more than their noise ("no clear change": no ratio is stated as a result). Before either, the step counts must be
able to show a change at all: with ``n`` and ``m`` steps, even a complete separation (every ``after`` step shorter
than every ``before`` one) has the two-sided exact Mann-Whitney p-value ``2 / C(n + m, n)`` (under no change each of
the ``C(n + m, n)`` orderings of the pooled steps is equally likely; Mann & Whitney, *Ann. Math. Statist.* 18(1),
1947). When that floor exceeds ``1 - confidence`` (3 vs 3 steps: 0.10 > 0.05) no interval from these steps can be
trusted to separate the runs -- a percentile bootstrap interval is too narrow on so few values (Hesterberg, *What
teachers should know about the bootstrap*, Amer. Statist. 69(4), 2015) -- and the claim is ``"too few steps"``.

Contention: a change that moves work off the training process (DataLoader workers, a prefetch thread) makes the
step slower when the freed work competes for the same cores: the training process's own CPU work then runs
slower, which the breakdown shows as a larger average *CPU Exec* time per step. :func:`before_after` flags it when
the ``after`` run is slower (ratio > 1) and its CPU Exec time per step grew by more than
:data:`CONTENTION_GROWTH` (the same code taking that much longer is the CPU being shared, not the change).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

from ..trace.model import Trace
from .regression import RegressionCheck, check_regression
from .steps import breakdown_average, step_breakdown, step_times

__all__ = ["BeforeAfter", "before_after", "CONTENTION_GROWTH", "CLAIMS", "separation_floor"]

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
    """

    check: RegressionCheck
    cpu_exec_ns: tuple[float, float]
    dataloader_ns: tuple[float, float]
    contention: bool

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


def before_after(before: Trace, after: Trace, *, max_regress: float = 0.05) -> BeforeAfter:
    """Compare the step times of ``before`` and ``after`` (see the module docstring).

    Parameters
    ----------
    before, after : Trace
        The run before the change (the baseline) and after it.
    max_regress : float, default 0.05
        Threshold of :func:`check_regression`'s verdict (a change within ±5 % is "no significant change").

    Returns
    -------
    BeforeAfter

    Raises
    ------
    ValueError
        When a trace has no host events (no step time), as :func:`step_times`.
    """
    check = check_regression(step_times(before), step_times(after), max_regress=max_regress)
    check.baseline, check.candidate = "before", "after"
    avg_b, avg_a = breakdown_average(step_breakdown(before)), breakdown_average(step_breakdown(after))
    cpu = (float(avg_b["cpu_exec_ns"]), float(avg_a["cpu_exec_ns"]))
    dl = (float(avg_b["dataloader_ns"]), float(avg_a["dataloader_ns"]))
    contention = check.ratio > 1 and cpu[0] > 0 and cpu[1] / cpu[0] > CONTENTION_GROWTH
    return BeforeAfter(check=check, cpu_exec_ns=cpu, dataloader_ns=dl, contention=contention)
