"""A finding and its ranking: the one home of both (issue 35).

A :class:`Finding` is one cause of lost step time, found by a rule (:mod:`nbprof.analysis.advisor`,
:mod:`nbprof.analysis.rules_device`, :mod:`nbprof.analysis.rules_host`, :mod:`nbprof.analysis.nsys_rules`),
with the events that prove it, the user's code line when the trace has Python frames, the knob that fixes it
and the step time the fix saves (a what-if replay, :func:`nbprof.analysis.whatif.predict`).

Rules take one typed :class:`RuleInputs` (the trace, the thresholds, the analyses every rule shares, the other
ranks of a multi-rank job) and return a list of findings. :func:`quantify` predicts each finding's saving,
:func:`rank` orders them -- the only ranking: the report's verdict, the dashboard and the CLI show the list in
the order :func:`nbprof.analysis.advisor.advise` returns it.

The ranking: the *ranked* findings first (:attr:`Finding.ranked`: a predicted saving of at least
:data:`MIN_SAVING_RATIO` of the mean step), largest saving first; then, *listed apart*, the others: a saving that
is unknown (no scenario models the change, or the replay predicts none: never shown as "saves nothing") or too small
to be a fix to start with (a ~50 ns copy in a 20 ms step), each with ``saving_reason``. Ties: severity (high first),
then the rule's registration order.

One finding per cause (:func:`one_per_cause`): two rules that find one cause (the ``dataloader`` share and the
``data_stall_chain`` that explains the same wait) give findings whose fix is the same change -- the same what-if
scenario on the same verdict part (:func:`cause_key`) -- and so the same saving. They are one finding: the first in
the ranking's order (severity, then registration) keeps its title and saving, the others become its evidence
(``evidence["same_cause"]``, their evidence rows after its own, their explanation appended to its next step).

Precision of a saving: :data:`SAVING_REL_ERROR` is the relative error the validation harness
(``scripts/harness_table.py``, ``docs/harness.md``) measured for predicted savings; a saving is shown as the
range ``saving * (1 -+ SAVING_REL_ERROR)`` (:meth:`Finding.saving_range_ns`), at two significant digits
(formatting: :mod:`nbprof.results.verdict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..units import fmt_pct_text as pct
from . import whatif
from .steps import steady_breakdown

if TYPE_CHECKING:
    from ..trace.model import Trace

__all__ = ["Finding", "RuleInputs", "Scenario", "SEVERITIES", "PARTS_FIXED", "SAVING_REL_ERROR", "MIN_SAVING_RATIO",
           "describe", "quantify", "steady_saving", "rank", "ranked_on", "saving_on", "split", "findings_frame",
           "cause_key", "one_per_cause"]

#: A what-if scenario as :func:`nbprof.analysis.whatif.predict` takes it.
Scenario = str | whatif.Change | list[str | whatif.Change]

SEVERITIES = ("high", "medium", "low")

#: The verdict parts a finding's fix shrinks (:data:`nbprof.analysis.verdict.PARTS`), for "the verdict's bound is
#: the bound of the first finding": ``Finding.part``.
PARTS_FIXED = ("gpu_compute", "communication", "memcpy", "host", "sync_wait", "dataloader", "idle", "")

#: Relative error of a predicted saving, from the validation harness (median absolute error over its pairs,
#: rounded up; docs/harness.md). A saving s is shown as ``s*(1-e) .. s*(1+e)``.
SAVING_REL_ERROR = 0.25

#: The saving floor: a finding is ranked ("what to fix first") when its predicted saving is at least this share of the
#: mean step it was predicted on (:attr:`Finding.step_ns`); under it the finding is listed apart. The verdict's bound
#: is the part of the first ranked finding (:mod:`nbprof.analysis.verdict`), so the same share decides both. 5%: the
#: harness's savings are known to ~20-25% (:data:`SAVING_REL_ERROR`), so a 5% saving is still distinguishable from
#: the run-to-run spread of a quiet step (issue 30).
MIN_SAVING_RATIO = 0.05


@dataclass
class Finding:
    """One cause of lost step time.

    Attributes
    ----------
    rule : str
        Rule key (``advisor.RULES``, or ``nsys_*`` for :mod:`nbprof.analysis.nsys_rules`).
    severity : str
        One of :data:`SEVERITIES`.
    title : str
        One sentence with the key number.
    evidence : dict
        The numbers the rule used (ns, bytes, ratios, counts, names), JSON-serialisable.
    where : str
        Where in the trace: steps, device/stream, rank, time from the trace origin.
    next_step : str
        What to change or look at next.
    predicted_saving_ns : int or None
        Mean step time the fix is predicted to save, ns (:func:`nbprof.analysis.whatif.predict` with the
        finding's scenario, over the steady-state steps the verdict averages: :func:`steady_saving`; negative:
        slower); None when it cannot be quantified.
    saving_reason : str
        How the saving was predicted (scenario, mean step before -> after, steps), or why not
        (``"not quantified: ..."``).
    evidence_rows : list of int
        Positional row ids into ``trace.events`` of the events that prove the finding, most telling first
        (at most :data:`nbprof.analysis.evidence.MAX_ROWS`).
    scenario : str, Change, list of them, or None
        The what-if scenario that quantifies this finding (None: the rule's default, see
        ``advisor.RULE_SCENARIOS``, or not quantified).
    part : str
        The verdict part (:data:`PARTS_FIXED`) the fix shrinks; ``""`` when it is not one part.
    code_line : str
        The user's code line (``file.py(123): function`` of a ``python_function`` frame) when the trace has
        stacks (``with_stack=True``), else ``""``.
    knob : str
        The setting that fixes it (``DataLoader(num_workers=4)``, ``foreach=True``...), ``""`` when none.
    step_savings_ns : dict of int to int, or None
        The same replay's saving per step (step number -> baseline minus predicted step time, ns; steps the
        replay could not place are absent): :func:`saving_on` averages it over the steps a caller judges (one
        slow step of a window); None when not quantified.
    step_ns : float or None
        The mean step time (ns) the saving was predicted on: the steady-state steps' mean, the verdict's
        ``step_ns`` (:func:`steady_saving`); None when not quantified.
    """

    rule: str
    severity: str
    title: str
    evidence: dict[str, Any] = field(default_factory=dict)
    where: str = ""
    next_step: str = ""
    predicted_saving_ns: int | None = None
    saving_reason: str = ""
    evidence_rows: list[int] = field(default_factory=list)
    scenario: Scenario | None = None
    part: str = ""
    code_line: str = ""
    knob: str = ""
    step_savings_ns: dict[int, int] | None = None
    step_ns: float | None = None

    @property
    def quantified(self) -> bool:
        """True when the finding carries a predicted saving > 0."""
        return self.predicted_saving_ns is not None and self.predicted_saving_ns > 0

    @property
    def ranked(self) -> bool:
        """True when the finding is a fix to rank: a predicted saving of at least :data:`MIN_SAVING_RATIO` of the
        mean step (``step_ns``; a saving without a known step counts). The others are listed apart."""
        return ranked_on(self)

    def saving_range_ns(self) -> tuple[float, float] | None:
        """``(low, high)`` ns of the predicted saving at the harness's error (:data:`SAVING_REL_ERROR`); None when
        not quantified.

        With the step known (:attr:`step_ns`, T) the high end is also at most ``T - P * (1 - SAVING_REL_ERROR)``,
        P = T - saving the predicted step: the step left after the fix carries the same relative error, so a
        saving close to the whole step is never shown as larger than the step (B200 ``eager_trace``'s CUDA-graphs
        fix: 3.2 of a 3.94 ms step, "~2.4-3.4 ms", not "~2.4-4.0 ms")."""
        if not self.quantified:
            return None
        s = float(self.predicted_saving_ns or 0)
        hi = s * (1 + SAVING_REL_ERROR)
        if self.step_ns is not None and self.step_ns > s:
            hi = min(hi, self.step_ns - (self.step_ns - s) * (1 - SAVING_REL_ERROR))
        return s * (1 - SAVING_REL_ERROR), hi

    def to_dict(self) -> dict[str, Any]:
        """The finding as a plain dict (JSON-serialisable; ``scenario`` as its text)."""
        d = asdict(self)
        d["scenario"] = describe(self.scenario) if self.scenario is not None else None
        return d


@dataclass(frozen=True)
class RuleInputs:
    """What every rule reads: the trace, the thresholds, and the analyses the rules share (computed once).

    Attributes
    ----------
    trace : Trace
    thresholds : dict of str to float
        ``advisor.THRESHOLDS`` with the caller's overrides.
    steps : pandas.DataFrame
        :func:`nbprof.analysis.steps.steady_breakdown` (int64 ns per step: the steady steps).
    util : pandas.DataFrame
        :func:`nbprof.analysis.utilization.gpu_utilization`.
    idle : pandas.DataFrame
        :func:`nbprof.analysis.utilization.idle_breakdown`.
    ranks : tuple of Trace
        Every rank of the job (``trace`` among them) when several were given, else ``()``.
    """

    trace: Trace
    thresholds: dict[str, float]
    steps: pd.DataFrame
    util: pd.DataFrame
    idle: pd.DataFrame
    ranks: tuple[Trace, ...] = ()

    def th(self, key: str) -> float:
        """Threshold ``key`` (KeyError for an unknown one)."""
        return self.thresholds[key]


def describe(sc: Scenario) -> str:
    """A scenario as text (``no_dataloader``, ``scale('gemm', 0.5)``, ``[a, b]``)."""
    if isinstance(sc, list):
        return "[" + ", ".join(str(c) for c in sc) + "]"
    return str(sc)


def _change_key(sc: Scenario) -> Any:
    if isinstance(sc, list):
        return tuple(_change_key(c) for c in sc)
    if isinstance(sc, whatif.Change):  # the label only names the matched events: not part of the change
        return (sc.kind, float(sc.factor), sc.pattern)
    return str(sc)


def cause_key(f: Finding, defaults: dict[str, Scenario]) -> Any:
    """What identifies the cause a finding fixes: its verdict part and its what-if change (its own ``scenario``, or
    ``defaults[rule]``; a :class:`whatif.Change`'s label left out). None when the finding has no scenario (an
    unquantified finding is its own cause)."""
    sc = f.scenario if f.scenario is not None else defaults.get(f.rule)
    if sc is None:
        return None
    return (f.part, _change_key(sc))


def one_per_cause(found: Sequence[Finding], defaults: dict[str, Scenario],
                  rule_order: Sequence[str] = ()) -> list[Finding]:
    """``found`` with one finding per cause (:func:`cause_key`; see the module docstring), order kept.

    The finding kept is the first of its cause by severity (high first), then ``rule_order``; each other finding of
    that cause is folded into it: ``evidence["same_cause"]`` gets ``{"rule", "title", "where", "evidence"}`` of it, its
    ``evidence_rows`` follow the kept finding's own (no duplicates, at most :data:`nbprof.analysis.evidence.MAX_ROWS`),
    its title is appended to the kept finding's ``next_step`` ("Same cause, found by <rule>: <title>."), and an empty
    ``code_line`` / ``knob`` is filled from it. Findings are changed in place.
    """
    from .evidence import MAX_ROWS

    sev = {s: i for i, s in enumerate(SEVERITIES)}
    order = {r: i for i, r in enumerate(rule_order)}
    groups: dict[Any, list[Finding]] = {}
    for f in found:
        k = cause_key(f, defaults)
        if k is not None:
            groups.setdefault(k, []).append(f)
    gone: set[int] = set()
    for group in groups.values():
        if len(group) < 2:
            continue
        keep, *rest = sorted(group, key=lambda f: (sev.get(f.severity, 9), order.get(f.rule, len(order))))
        for o in rest:
            keep.evidence.setdefault("same_cause", []).append(
                {"rule": o.rule, "title": o.title, "where": o.where, "evidence": o.evidence})
            seen = set(keep.evidence_rows)
            keep.evidence_rows = (keep.evidence_rows + [r for r in o.evidence_rows if r not in seen])[:MAX_ROWS]
            keep.next_step = f"{keep.next_step} Same cause, found by {o.rule}: {o.title.rstrip('.')}.".strip()
            keep.code_line = keep.code_line or o.code_line
            keep.knob = keep.knob or o.knob
            gone.add(id(o))
    return [f for f in found if id(f) not in gone]


def steady_saving(trace: Trace, p: whatif.Prediction) -> tuple[float | None, float, int]:
    """A what-if prediction of ``trace`` on the steps a page averages: the steady-state steps
    (:func:`nbprof.analysis.steps.steady_breakdown`, warm-up left out), the steps and step time of the verdict.

    Returns
    -------
    tuple
        ``(saving_ns, step_ns, steps)``: the mean of ``baseline_ns - predicted_ns`` over the steady steps the replay
        placed (float ns; None when it placed none of them), the mean step time of the steady steps (float ns: the
        verdict's ``step_ns``; NaN without steps), and the number of steady steps.
    """
    steady = steady_breakdown(trace)
    step_ns = float(steady["step_ns"].mean()) if len(steady) else float("nan")
    per = p.per_step
    on = per[per["step"].isin(steady["step"]) & (per["predicted_ns"] >= 0)]
    saving = float((on["baseline_ns"] - on["predicted_ns"]).mean()) if len(on) else None
    return saving, step_ns, int(len(steady))


def quantify(trace: Trace, found: Sequence[Finding], defaults: dict[str, Scenario],
             unquantified: dict[str, str]) -> None:
    """Set ``predicted_saving_ns`` / ``saving_reason`` of each finding (one replay per distinct scenario).

    The saving and its step (``step_ns``) are over the steps a page averages (:func:`steady_saving`: the steady-state
    steps of the verdict, so a saving's share of the step has the verdict's denominator); ``step_savings_ns`` keeps
    every step the replay placed. A finding's own ``scenario`` wins over ``defaults[rule]``; without either, the
    reason is ``unquantified[rule]`` (or "no what-if scenario for rule ..."), except for a finding whose rule measured
    its saving (``predicted_saving_ns`` and ``step_ns`` set, no scenario: ``cpu_contention``'s run-queue wait), which
    keeps it. A replay that fails (ValueError) leaves the
    finding unquantified with the error as reason.
    """
    done: dict[str, tuple[int | None, str, dict[int, int] | None, float | None]] = {}
    for f in found:
        sc = f.scenario if f.scenario is not None else defaults.get(f.rule)
        if sc is None and f.predicted_saving_ns is not None and f.step_ns is not None:
            # a saving the rule measured (cpu_contention: the run-queue wait), with its step: kept as it is
            if f.quantified and not f.ranked:
                f.saving_reason += f" (under {pct(MIN_SAVING_RATIO)} of the step: not ranked)"
            continue
        if sc is None:
            f.predicted_saving_ns, f.step_savings_ns, f.step_ns = None, None, None
            f.saving_reason = "not quantified: " + unquantified.get(f.rule, f"no what-if scenario for rule {f.rule!r}")
            continue
        key = describe(sc)
        if key not in done:
            try:
                p = whatif.predict(trace, sc)
            except ValueError as e:
                done[key] = (None, f"not quantified: whatif.predict({key}) failed: {e}", None, None)
            else:
                per = p.per_step[p.per_step["predicted_ns"] >= 0]
                saving, step_ns, n = steady_saving(trace, p)
                apart = f" (the steady state of {len(p.per_step)}: warm-up left out)" if n < len(p.per_step) else ""
                done[key] = ((None, f"not quantified: whatif.predict({key}) placed none of the {n} steady steps",
                              None, None) if saving is None else
                             (int(round(saving)),
                              f"whatif.predict({key}): mean step {step_ns / 1e6:.3f} ms -> "
                              f"{(step_ns - saving) / 1e6:.3f} ms over {n} steps{apart}",
                              {int(s): int(b - q) for s, b, q in zip(per["step"], per["baseline_ns"],
                                                                     per["predicted_ns"], strict=True)},
                              step_ns))
        f.predicted_saving_ns, f.saving_reason, f.step_savings_ns, f.step_ns = done[key]
        if f.quantified and not f.ranked:
            f.saving_reason += f" (under {pct(MIN_SAVING_RATIO)} of the step: not ranked)"


def saving_on(f: Finding, steps: Sequence[int] | None = None) -> int | None:
    """The finding's predicted saving per step on ``steps`` (step numbers, ``steps.step_breakdown``'s ``step``),
    ns: the mean of :attr:`Finding.step_savings_ns` over those of them the replay placed. ``steps`` None, or no
    per-step savings: :attr:`Finding.predicted_saving_ns` (the mean over the trace's steady steps). None when not
    quantified or none of ``steps`` was placed."""
    if steps is None or f.step_savings_ns is None:
        return f.predicted_saving_ns
    got = [f.step_savings_ns[int(s)] for s in steps if int(s) in f.step_savings_ns]
    return int(round(sum(got) / len(got))) if got else None


def ranked_on(f: Finding, steps: Sequence[int] | None = None, step_ns: float | None = None) -> bool:
    """True when ``f`` is a fix to rank: its saving (:func:`saving_on` ``steps``) is > 0 and at least
    :data:`MIN_SAVING_RATIO` of the step — ``step_ns`` (ns, the judged steps' mean) when ``steps`` and ``step_ns``
    are given, else the steady steps' mean (:attr:`Finding.step_ns`); a saving without a known step counts. The one
    floor of the ranking, the verdict's bound and the "no finding saves 5%" sentence."""
    saving = saving_on(f, steps)
    if saving is None or saving <= 0:
        return False
    base = step_ns if steps is not None and step_ns is not None else f.step_ns
    return base is None or float(saving) >= MIN_SAVING_RATIO * base


def _key(order: dict[str, int], steps: Sequence[int] | None, step_ns: float | None) -> Any:
    sev = {s: i for i, s in enumerate(SEVERITIES)}

    def key(f: Finding) -> tuple[int, int, int, int]:
        s, r = sev.get(f.severity, 9), order.get(f.rule, len(order))
        saving = saving_on(f, steps)
        if ranked_on(f, steps, step_ns):
            return (0, -int(saving or 0), s, r)
        if saving is not None and saving > 0:  # under the floor: apart, before the unquantified ones, largest first
            return (1, -int(saving), s, r)
        return (2, 0, s, r)

    return key


def rank(found: Sequence[Finding], rule_order: Sequence[str] = (), steps: Sequence[int] | None = None,
         step_ns: float | None = None) -> list[Finding]:
    """The one ranking: the ranked findings (:func:`ranked_on`), largest saving first, then the others (listed
    apart: those with a saving under the floor, largest first, then those without one); ties by severity (high
    first), then by ``rule_order``. ``steps``/``step_ns``: rank on the savings on those steps against their step
    time (ns; :func:`saving_on`: the ranking for one slow step of a window), default the trace's mean saving
    against the steady steps' mean step."""
    return sorted(found, key=_key({r: i for i, r in enumerate(rule_order)}, steps, step_ns))


def split(ranked: Sequence[Finding]) -> tuple[list[Finding], list[Finding]]:
    """``(ranked, apart)`` of a ranked list, order kept: the findings to fix first (:attr:`Finding.ranked`), and the
    others."""
    return [f for f in ranked if f.ranked], [f for f in ranked if not f.ranked]


def findings_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    """Findings as a DataFrame, in their order, with columns ``rule, severity, title, where, next_step, evidence,
    predicted_saving_ns`` (ns, None when not quantified), ``saving_reason, evidence_rows, part, code_line, knob,
    step_ns`` (ns, the step the saving was predicted on), ``ranked`` (bool: listed under what to fix first)."""
    cols = ["rule", "severity", "title", "where", "next_step", "evidence", "predicted_saving_ns", "saving_reason",
            "evidence_rows", "part", "code_line", "knob", "step_ns", "ranked"]
    return pd.DataFrame([{c: getattr(f, c) for c in cols} for f in findings], columns=cols)
