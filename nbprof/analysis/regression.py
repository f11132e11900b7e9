"""Noise-aware step-time regression check between a baseline and a candidate trace (``nbprof check``).

Method
------
Each trace gives a distribution of per-step times (:func:`nbprof.analysis.steps.step_times`, int64 ns: the step
windows, from ``ProfilerStep#N`` or, without it, from the iterations :mod:`nbprof.trace.iterations` detects).
The statistic (median by default, or mean) of each side is compared as the ratio ``candidate / baseline``; its uncertainty is a percentile
bootstrap interval (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13): ``resamples``
times, each side is resampled with replacement independently (its own size), the statistic is recomputed on
both resamples and their ratio kept; the interval is the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
quantiles of those ratios. The random generator is ``numpy.random.default_rng(seed)`` (fixed seed 0 by
default), so a check gives the same interval on the same inputs every time.

Verdict: ``"regression"`` when the interval's lower bound of the slowdown (``ci_low - 1``) exceeds
``max_regress`` (the candidate is slower by more than the threshold even in the most favourable case),
``"improvement"`` when its upper bound is below ``-max_regress``, ``"no significant change"`` when the upper
bound stays within ``max_regress`` (a slowdown beyond the threshold is ruled out), otherwise ``"inconclusive"``:
the interval is too wide for these steps to tell (e.g. a +40 % median over 6 vs 6 noisy steps). The result also
gives ``min_detectable_change``: the interval's half-width relative to the ratio, the smallest change these
step counts and this noise can resolve. With
one step on a side there is no spread to resample: that side's statistic is fixed and the interval reflects
the other side's noise only (``notes`` says so).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["RegressionCheck", "check_regression", "STATISTICS"]

STATISTICS = ("median", "mean")


@dataclass
class RegressionCheck:
    """The result of :func:`check_regression` (times in int64/float ns; ratios are candidate / baseline).

    Attributes
    ----------
    statistic : str
        ``"median"`` or ``"mean"``.
    baseline_ns, candidate_ns : float
        The statistic of each side's step times (ns).
    ratio : float
        ``candidate_ns / baseline_ns``.
    ci_low, ci_high : float
        Bootstrap interval of ``ratio`` at ``confidence``.
    max_regress : float
        Threshold on the slowdown (0.05 = 5 %).
    verdict : str
        ``"regression"``, ``"improvement"``, ``"no significant change"`` or ``"inconclusive"``.
    min_detectable_change : float
        ``(ci_high - ci_low) / (2 * ratio)``: the interval's half-width as a fraction of the ratio (0.2 = a change
        smaller than about 20 % is lost in these steps' noise).
    baseline_steps_ns, candidate_steps_ns : list of int
        The per-step times used (ns), in step order.
    """

    statistic: str
    baseline_ns: float
    candidate_ns: float
    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    max_regress: float
    resamples: int
    seed: int
    verdict: str
    baseline_steps_ns: list[int]
    candidate_steps_ns: list[int]
    baseline: str = ""
    candidate: str = ""
    notes: list[str] = field(default_factory=list)
    min_detectable_change: float = float("nan")

    @property
    def failed(self) -> bool:
        """True for a ``"regression"`` verdict (``nbprof check`` then exits with status 1)."""
        return self.verdict == "regression"

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready Python values (plus ``failed``)."""
        d = asdict(self)
        d["failed"] = self.failed
        return d


def _stat(x: np.ndarray, statistic: str, axis: int | None = None) -> Any:
    return np.median(x, axis=axis) if statistic == "median" else np.mean(x, axis=axis)


def check_regression(baseline_ns: Any, candidate_ns: Any, *, max_regress: float = 0.05, statistic: str = "median",
                     confidence: float = 0.95, resamples: int = 10_000, seed: int = 0) -> RegressionCheck:
    """Compare two step-time samples (ns) with a bootstrap interval of the ratio (see the module docstring).

    Parameters
    ----------
    baseline_ns, candidate_ns : array-like of int
        Per-step times in ns (e.g. :func:`nbprof.analysis.steps.step_times`).
    max_regress : float, default 0.05
        Allowed slowdown as a fraction (0.05 = 5 %).
    statistic : {"median", "mean"}
    confidence : float, default 0.95
    resamples : int, default 10000
    seed : int, default 0

    Returns
    -------
    RegressionCheck

    Raises
    ------
    ValueError
        For an empty sample, a non-positive statistic, an unknown ``statistic`` or ``confidence`` outside (0, 1).

    Examples
    --------
    >>> r = check_regression([100, 101, 99, 100], [120, 121, 119, 122], max_regress=0.05)
    >>> r.verdict, round(r.ratio, 3), r.ci_low > 1.05
    ('regression', 1.205, True)
    >>> check_regression([100, 101, 99], [100, 99, 101]).verdict
    'no significant change'
    >>> r = check_regression([100, 130, 90, 110, 95, 140], [150, 120, 180, 100, 160, 130])
    >>> r.verdict, r.failed, r.min_detectable_change > 0.1
    ('inconclusive', False, True)
    """
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; use one of {', '.join(STATISTICS)}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    a = np.asarray(baseline_ns, dtype=np.float64)
    b = np.asarray(candidate_ns, dtype=np.float64)
    if not len(a) or not len(b):
        raise ValueError("both sides need at least one step time")
    sa, sb = float(_stat(a, statistic)), float(_stat(b, statistic))
    if sa <= 0 or sb <= 0:
        raise ValueError(f"step times must be positive (baseline {statistic} {sa}, candidate {statistic} {sb})")
    rng = np.random.default_rng(seed)
    ra = _stat(a[rng.integers(0, len(a), size=(resamples, len(a)))], statistic, axis=1)
    rb = _stat(b[rng.integers(0, len(b), size=(resamples, len(b)))], statistic, axis=1)
    ratios = rb / ra
    lo, hi = (float(q) for q in np.quantile(ratios, [(1 - confidence) / 2, (1 + confidence) / 2]))
    if lo - 1 > max_regress:
        verdict = "regression"
    elif hi - 1 < -max_regress:
        verdict = "improvement"
    elif hi - 1 <= max_regress:
        verdict = "no significant change"
    else:
        verdict = "inconclusive"
    mdc = (hi - lo) / (2 * (sb / sa))
    notes = []
    if verdict == "inconclusive":
        notes.append(f"the interval is too wide to rule out a slowdown beyond {100 * max_regress:.1f}%: with these "
                     f"{len(a)} vs {len(b)} steps only a change of about {100 * mdc:.0f}% or more can be detected "
                     "(profile more steps, or quieter ones)")
    for side, x in (("baseline", a), ("candidate", b)):
        if len(x) == 1:
            notes.append(f"the {side} has one step: its spread is unknown, the interval only reflects the other side")
        elif len(x) < 5:
            notes.append(f"the {side} has {len(x)} steps: the interval is coarse (profile more steps for a firmer answer)")
    return RegressionCheck(statistic=statistic, baseline_ns=sa, candidate_ns=sb, ratio=sb / sa, ci_low=lo, ci_high=hi,
                           confidence=confidence, max_regress=float(max_regress), resamples=int(resamples),
                           seed=int(seed), verdict=verdict, baseline_steps_ns=[int(x) for x in a],
                           candidate_steps_ns=[int(x) for x in b], notes=notes, min_detectable_change=float(mdc))
