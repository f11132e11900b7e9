"""Text for people about a watched run (``nbprof watch``): the step-time distribution, the flagged steps with
what grew, and the verdict of each captured one. Numbers come from ``nbprof.sources.watch_run`` and
``nbprof.watching.captured``; this module only formats them (``nbprof.units``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..units import fmt_ns, fmt_ns_short, fmt_pct_text

__all__ = ["watch_text", "captured_line"]


def watch_text(run_path: str, steps: pd.DataFrame, grew: pd.DataFrame, captured: pd.DataFrame,
               summary: dict[str, Any]) -> str:
    """A few lines: steps and median, each flagged step (what grew, by how much), each captured step's verdict.

    ``steps``: the per-step log; ``grew``: :func:`nbprof.analysis.watch.what_grew`; ``captured``:
    :func:`nbprof.watching.captured` (all int64 ns)."""
    calm = steps[~steps["profiled"].astype(bool)]
    st = calm["step_ns"].to_numpy(np.int64) if len(calm) else steps["step_ns"].to_numpy(np.int64)
    lines = [f"watched run: {run_path}"]
    if not len(st):
        return lines[0] + "\n  no step recorded (no optimizer step, DataLoader batch or nbprof.watch.step() call)\n"
    lines.append(f"  {len(steps)} steps, median {fmt_ns(float(np.median(st)))}, p90 {fmt_ns(float(np.percentile(st, 90)))}, "
                 f"max {fmt_ns(float(st.max()))}; {int(steps['profiled'].sum())} profiled")
    lines.append(f"  flagged: {len(grew)} step(s) slower than k x the running median "
                 f"(k={summary.get('config', {}).get('k', '?')})")
    for r in grew.itertuples(index=False):
        lines.append(f"    step {r.step}: {fmt_ns(r.step_ns)} (+{fmt_ns(r.excess_ns)}), grew: {r.grew} "
                     f"+{fmt_ns(r.grew_ns)}")
    for r in captured.itertuples(index=False):
        lines.append("  " + captured_line(r))
    errs = steps.loc[steps["errors"].astype(str) != "", ["step", "errors"]]
    if len(errs):
        lines.append(f"  {len(errs)} step(s) with a failed hook, first: step {errs.iloc[0]['step']}: {errs.iloc[0]['errors']}")
    return "\n".join(lines) + "\n"


def captured_line(r: Any) -> str:
    """One captured flagged step (a row of :func:`nbprof.watching.captured`) in words: where it is in its trace,
    the watch's numbers, the trace's verdict of that step alone and its first fix, the host syncs."""
    return (f"captured step {r.step} (ProfilerStep#{r.profiler_step} in {r.trace}): {fmt_ns(r.step_ns)} vs median "
            f"{fmt_ns(r.median_ns)}, watch: {r.grew}; trace verdict {r.bound} {fmt_pct_text(r.bound_ratio)} of "
            f"{fmt_ns_short(r.trace_step_ns)}"
            + (f"; first fix: {r.first_rule} ({r.first_finding})" if r.first_rule else "")
            + f"; host syncs {r.syncs} (window median {r.median_syncs:g})"
            + ("" if r.in_window_verdict else "; left out of the window's verdict (one of its leading steps, taken for warm-up)")
            + (f"; largest: {', '.join(r.contributors)}" if len(r.contributors) else ""))
