"""A before/after pair of runs in one answer: did the change make the step faster, by how much, how sure, and why
not when it got slower.

The step-time comparison is :func:`nbprof.analysis.regression.check_regression` (median per-step time, bootstrap
interval of the ratio ``after / before``) on :func:`nbprof.analysis.steps.step_times`; the per-step role times
are :func:`nbprof.analysis.steps.breakdown_average`. No second definition of either lives here.

Contention: a change that moves work off the training process (DataLoader workers, a prefetch thread) makes the
step slower when the freed work competes for the same cores: the training process's own CPU work then runs
slower, which the breakdown shows as a larger average *CPU Exec* time per step. :func:`before_after` flags it when
the ``after`` run is slower (ratio > 1) and its CPU Exec time per step grew by more than
:data:`CONTENTION_GROWTH` (the same code taking that much longer is the CPU being shared, not the change).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..trace.model import Trace
from .regression import RegressionCheck, check_regression
from .steps import breakdown_average, step_breakdown, step_times

__all__ = ["BeforeAfter", "before_after", "CONTENTION_GROWTH"]

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
    def faster(self) -> bool:
        """The ``after`` run's median step is shorter (``ratio < 1``)."""
        return self.check.ratio < 1

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
