"""A comparison (``analysis.compare.Comparison``, deltas ``b - a``) in words and human units.

``a`` is the baseline ("before"), ``b`` the candidate ("after"): a negative delta is time saved.

Whether ``b`` is faster is one claim with one home: :func:`before_after_sentence` (the median step time's ratio
and its bootstrap interval, :mod:`nbprof.analysis.before_after`).
"""

from __future__ import annotations

import html as _html
from typing import Any

import pandas as pd

from ..analysis.before_after import separation_floor
from ..units import fmt_ns, fmt_pct_text
from .table import Table, table

__all__ = ["side_by_side_table", "BASELINE_NAMES", "before_after_sentence", "before_after_html", "prediction_sentence"]

#: run names that read as the baseline, in order of preference
BASELINE_NAMES = ("before", "baseline", "base", "control", "a")


def order_runs(names: list[str]) -> list[str]:
    """Two run names as (baseline, candidate): a run called "before"/"baseline"/... first, else the given order."""
    for b in BASELINE_NAMES:
        if b in names:
            return [b] + [n for n in names if n != b]
    return list(names)


def side_by_side_table(df: pd.DataFrame, a_name: str, b_name: str, caption: str = "") -> Table:
    """A ``compare`` side-by-side frame (index metric; columns ``a, b, delta, ratio``) in ms, ``delta`` = b - a."""
    rows = df[[not str(i).endswith("steps") for i in df.index]]
    out = pd.DataFrame({
        "metric": [str(i)[:-3].replace("_", " ") if str(i).endswith("_ns") else str(i) for i in rows.index],
        f"{a_name}_ns": rows["a"].to_numpy(), f"{b_name}_ns": rows["b"].to_numpy(),
        f"change ({b_name} - {a_name})_ns": rows["delta"].to_numpy(),
        f"{b_name} / {a_name}_x": rows["ratio"].to_numpy(),
    })
    return table(out, {f"{b_name} / {a_name}_x": "count"}, caption=caption)


def before_after_sentence(ba: Any, a_name: str = "before", b_name: str = "after") -> str:
    """A :class:`nbprof.analysis.before_after.BeforeAfter` in words: its claim (:attr:`BeforeAfter.claim`: faster /
    slower with the median step of ``b_name`` vs ``a_name`` (the baseline), the ratio and its bootstrap interval; no
    clear change, with the interval and no ratio as a result; too few steps to separate from noise), and (when
    ``b_name`` is slower with a grown CPU Exec time) the contention.

    >>> from nbprof.analysis.before_after import BeforeAfter
    >>> from nbprof.analysis.regression import check_regression
    >>> ba = BeforeAfter(check_regression([400e6, 410e6, 395e6, 405e6], [150e6, 160e6, 155e6, 152e6]), (20e6, 22e6),
    ...                  (380e6, 5e6), False)
    >>> before_after_sentence(ba)
    "'after' vs 'before': 2.62x faster (median step 153.500 ms instead of 402.500 ms; 95 % interval 2.52x-2.70x faster, 4 and 4 steps)."
    """
    c = ba.check
    claim = ba.claim
    n, m = len(c.baseline_steps_ns), len(c.candidate_steps_ns)
    medians = f"median step {fmt_ns(c.candidate_ns)} instead of {fmt_ns(c.baseline_ns)}"
    if c.ci_high < 1:
        interval = f"{1 / c.ci_high:.2f}x-{1 / c.ci_low:.2f}x faster"
    elif c.ci_low > 1:
        interval = f"{c.ci_low:.2f}x-{c.ci_high:.2f}x slower"
    else:
        interval = f"{1 / c.ci_low:.2f}x faster to {c.ci_high:.2f}x slower"
    if claim == "too few steps":
        out = (f"{b_name!r} vs {a_name!r}: {n} and {m} steps: too few to separate from noise ({medians}; even if "
               f"every step of one run were shorter than every step of the other, the exact rank test's p-value "
               f"would be {separation_floor(n, m):.2f}, over {1 - c.confidence:.2f}). Profile at least 4 steps per run.")
    elif claim == "no clear change":
        out = (f"{b_name!r} vs {a_name!r}: no clear change: the {c.confidence * 100:.0f} % interval of the median "
               f"step's ratio, {interval}, includes no change ({medians}, {n} and {m} steps).")
    else:
        how = f"{1 / c.ratio:.2f}x faster" if claim == "faster" else f"{c.ratio:.2f}x slower"
        out = (f"{b_name!r} vs {a_name!r}: {how} ({medians}; {c.confidence * 100:.0f} % interval {interval}, {n} and "
               f"{m} steps).")
    if ba.contention:
        out += (f" The same host work took longer in {b_name!r}: its CPU Exec time per step grew {ba.cpu_exec_growth:.2f}x "
                f"({fmt_ns(ba.cpu_exec_ns[0])} -> {fmt_ns(ba.cpu_exec_ns[1])}), so the training process got less "
                "CPU: the DataLoader workers (or other jobs on this machine) compete with it for the same cores. "
                "Fewer workers, a quieter machine or preprocessing that waits instead of computing shows the fix's gain.")
    return out


def prediction_sentence(pc: Any, a_name: str = "before", b_name: str = "after") -> str:
    """A :class:`nbprof.analysis.before_after.PredictionCheck` in words: which fix of the ``a_name`` run it checks
    (the one whose part shrank the most, with that part in each run, else the first), what it predicted (its range,
    :func:`nbprof.results.verdict.saving_words`), what was measured (the mean step's change), and whether the
    measurement lies in the predicted range (else the error, predicted / measured - 1, and, when the change left more
    than a fifth of the part, how much of it the change removed: the prediction is for the whole fix).

    >>> from nbprof.analysis.before_after import PredictionCheck
    >>> from nbprof.analysis.findings import Finding
    >>> f = Finding("dataloader", "warning", "87% of the step waits for the DataLoader", predicted_saving_ns=21_000_000,
    ...             part="dataloader", step_ns=24e6)
    >>> s = prediction_sentence(PredictionCheck(f, 1, "part", 18.6e6, 21.1e6, 3.3e6))
    >>> s.split(". ")[0]
    'The dataloader part shrank the most (21.100 ms -> 3.300 ms per step)'
    >>> s.split(": ")[-1]
    '18.600 ms per step saved, within the predicted range.'
    """
    from .verdict import saving_words

    f = pc.finding
    about = f"(finding {pc.position}, {f.rule}: {f.title})"
    if pc.chosen_by == "part":
        head = (f"The {f.part.replace('_', ' ')} part shrank the most ({fmt_ns(pc.part_before_ns)} -> "
                f"{fmt_ns(pc.part_after_ns)} per step). {a_name!r} predicted for its fix {about}: {saving_words(f)}.")
    else:
        head = f"{a_name!r} predicted for its first fix {about}: {saving_words(f)}."
    if pc.measured_ns <= 0:
        return f"{head} Measured: no step time saved ({fmt_ns(-pc.measured_ns)} per step slower in {b_name!r})."
    if pc.within:
        how = "within the predicted range"
    else:
        how = (f"{'over' if pc.error > 0 else 'under'}-predicted by {fmt_pct_text(abs(pc.error))} "
               f"(predicted {fmt_ns(pc.predicted_ns)})")
    partial = ""
    if (pc.chosen_by == "part" and not pc.within and pc.error > 0 and pc.part_before_ns > 0
            and pc.part_after_ns > 0.2 * pc.part_before_ns):
        # the change removed only part of what the finding's fix removes: the prediction is for the whole fix
        partial = (f"; the change removed {fmt_pct_text(1 - pc.part_after_ns / pc.part_before_ns)} of the "
                   f"{f.part.replace('_', ' ')} part, the prediction is for removing it")
    return f"{head} Measured: {fmt_ns(pc.measured_ns)} per step saved, {how}{partial}."


def before_after_html(ba: Any, a_name: str = "before", b_name: str = "after") -> str:
    """:func:`before_after_sentence` as the report's first-screen block (``nbprof-before-after``), escaped; with the
    prediction set against the measurement (:func:`prediction_sentence`) when ``ba.prediction`` is there."""
    color = "#2ca02c" if ba.claim == "faster" else "#d62728" if ba.claim == "slower" else "#7f7f7f"
    head, _, rest = before_after_sentence(ba, a_name, b_name).partition(": ")
    pc = getattr(ba, "prediction", None)
    pred = (f'<div class="nbprof-prediction-check">{_html.escape(prediction_sentence(pc, a_name, b_name))}</div>'
            if pc is not None else "")
    return (f'<div class="nbprof-before-after" style="border-left:6px solid {color};padding:6px 12px;margin:6px 0">'
            f'<b>{_html.escape(head)}:</b> {_html.escape(rest)}{pred}</div>')
