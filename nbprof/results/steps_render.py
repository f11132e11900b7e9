"""Where the steps came from, which were left out and which were slow: one paragraph for the report's first screen.

Inputs are :func:`nbprof.trace.iterations.step_source`, :func:`nbprof.analysis.steps.steady_state` and
:func:`nbprof.analysis.steps.step_outliers`; every trace-supplied string (a marker's name) is escaped.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from ..units import fmt_ns_short

__all__ = ["steps_text", "steps_html"]

#: how many slow steps the paragraph names (the rest are counted)
MAX_OUTLIERS = 3


#: ``nbprof_capture.step_source`` (the capture's automatic steps) -> what ended each ``ProfilerStep``
_MARKED_BY = {"optimizer": "each optimizer.step()", "dataloader": "each DataLoader batch"}


def steps_text(source: Any, steady: pd.DataFrame, outliers: pd.DataFrame, marked_by: str | None = None) -> list[str]:
    """Plain sentences: the steps' source and confidence, the steady state (skipped steps and why), the step-time
    spread and each slow step with what grew. ``marked_by`` is the ``step_source`` of the trace's
    ``nbprof_capture`` object (:func:`nbprof.analysis.overhead.capture_metadata`): ``"optimizer"`` or
    ``"dataloader"`` when nbprof's automatic steps (an unmodified script) wrote the ``ProfilerStep`` ranges."""
    lines = []
    n = len(steady)
    if source.source == "profiler_step" and marked_by in _MARKED_BY:
        lines.append(f"Steps: {n} ProfilerStep ranges, marked by nbprof at {_MARKED_BY[marked_by]} of the script.")
    elif source.source == "profiler_step":
        lines.append(f"Steps: {n} ProfilerStep ranges (the profiler's own).")
    elif source.source == "whole_trace":
        lines.append(f"Steps: none found ({source.note}).")
    else:
        lines.append(f"Steps: {source.steps} found from {source.source.replace('_', ' ')} ({source.marker}), "
                     f"confidence {source.confidence}: {source.note}.")
    if n:
        kept = steady.loc[~steady["skipped"]]
        skipped = steady.loc[steady["skipped"]]
        if len(skipped):
            why = "; ".join(f"step {int(r.step)}: {r.skip_reason}" for r in skipped.itertuples(index=False))
            lines.append(f"Steady state: {len(kept)} of {n} steps; skipped {why}.")
        if len(kept) >= 2:
            d = kept["step_ns"]
            lines.append(f"Step time: median {fmt_ns_short(float(d.median()))}, min {fmt_ns_short(float(d.min()))}, "
                         f"max {fmt_ns_short(float(d.max()))} over {len(kept)} steps.")
    for r in outliers.head(MAX_OUTLIERS).itertuples(index=False):
        lines.append(f"Slow step {int(r.step)}: {fmt_ns_short(r.step_ns)} ({r.ratio:.2f}x the median); {r.grew} grew by "
                     f"{fmt_ns_short(r.grew_ns)}.")
    if len(outliers) > MAX_OUTLIERS:
        lines.append(f"... and {len(outliers) - MAX_OUTLIERS} more slow steps.")
    return lines


def steps_html(source: Any, steady: pd.DataFrame, outliers: pd.DataFrame, marked_by: str | None = None) -> str:
    """:func:`steps_text` as one escaped HTML block (``<div class="nbprof-steps">``)."""
    items = "".join(f"<div>{html.escape(s)}</div>" for s in steps_text(source, steady, outliers, marked_by))
    return f'<div class="nbprof-steps" style="margin:4px 12px;line-height:1.45">{items}</div>'
