"""The profiler's overhead in words (``nbprof.analysis.overhead.profiler_overhead``), for the report's first screen.

"Profiled steps took 2.5x the unprofiled ones (median 120 ms vs 48 ms over 5 and 7 steps): per-step shares
may be distorted." -- or, when the ratio is at most ``DISTORTION_RATIO``, that the profiler cost little.
"""

from __future__ import annotations

import html as _html
from typing import Any

from ..units import fmt_ns_short

__all__ = ["overhead_sentence", "overhead_html"]


def overhead_sentence(ov: Any) -> str:
    """One plain-text sentence for a :class:`~nbprof.analysis.overhead.ProfilerOverhead`."""
    n_p, n_u = len(ov.profiled_steps), len(ov.unprofiled_steps)
    s = (f"Profiler overhead: profiled steps took {ov.ratio:.2f}x the unprofiled ones (median "
         f"{fmt_ns_short(ov.profiled_median_ns)} vs {fmt_ns_short(ov.unprofiled_median_ns)} over {n_p} and {n_u} "
         f"step{'s' if n_u != 1 else ''})")
    if ov.distorted:
        return s + ": per-step shares may be distorted."
    if ov.ratio < 1:
        return s + ": the step times vary more than the profiler costs (no measurable overhead)."
    return s + ": the shares below are close to the unprofiled run's."


def overhead_html(trace: Any) -> str:
    """``<p class="nbprof-overhead">...</p>`` for ``trace``, or "" when it carries no step times."""
    from ..analysis.overhead import profiler_overhead

    ov = profiler_overhead(trace)
    if ov is None:
        return ""
    return f'<p class="nbprof-overhead">{_html.escape(overhead_sentence(ov))}</p>'
