"""The profiler's own overhead, measured on the run: profiled vs unprofiled step wall times.

A capture with automatic steps (``nbprof.capture.auto_steps``: ``python -m nbprof.capture.script``,
``nbprof report --script``, ``%%torchprof`` on a loop) times every step of the run with
``time.perf_counter_ns`` -- the ones torch.profiler recorded and the ones it did not -- and writes them
into the trace as the top-level object ``"nbprof_capture"`` (``meta.extra``; a merged trace keeps it under
``meta.extra["kineto"]``). :func:`profiler_overhead` is the one definition of the overhead from them:

- **profiled** steps: the schedule's ``active`` steps (recorded by the profiler);
- **unprofiled** steps: the ``wait`` steps except step 0 (the first iteration pays lazy initialisation,
  allocator growth and first-call caches), and the steps after the recorded window (``after``);
- **ratio** = median profiled wall time / median unprofiled wall time.

Each step's wall time excludes the time nbprof's own ``prof.step()`` call at its start took (the profiler's
start and the trace export are one-off costs, not per-step distortion). Medians keep one disturbed step
(a preempted thread on a shared machine) from deciding the number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ProfilerOverhead", "profiler_overhead", "capture_metadata", "DISTORTION_RATIO"]

#: Ratio above which per-step shares measured under the profiler may be distorted (the report says so).
DISTORTION_RATIO = 1.25


@dataclass(frozen=True)
class ProfilerOverhead:
    """Profiled vs unprofiled step wall times of one run.

    Attributes
    ----------
    ratio : float
        ``profiled_median_ns / unprofiled_median_ns`` (2.5 = profiled steps took 2.5x as long).
    profiled_median_ns, unprofiled_median_ns : int
        Median wall time of the profiled (``active``) and unprofiled steps, ns.
    profiled_steps, unprofiled_steps : tuple of int
        The step numbers on each side.
    step_source : str or None
        What ended the steps: ``"optimizer"`` or ``"dataloader"``.
    """

    ratio: float
    profiled_median_ns: int
    unprofiled_median_ns: int
    profiled_steps: tuple[int, ...]
    unprofiled_steps: tuple[int, ...]
    step_source: str | None

    @property
    def distorted(self) -> bool:
        """True when ``ratio > DISTORTION_RATIO``: shares measured under the profiler may be distorted."""
        return self.ratio > DISTORTION_RATIO


def capture_metadata(trace: Any) -> dict[str, Any] | None:
    """The ``"nbprof_capture"`` object of ``trace`` (``meta.extra``, or ``meta.extra["kineto"]`` of a merged
    trace), else None. Keys: see ``nbprof.capture.auto_steps.AutoSteps.metadata``."""
    extra = getattr(getattr(trace, "meta", None), "extra", None) or {}
    for d in (extra, extra.get("kineto") if isinstance(extra.get("kineto"), dict) else None):
        found = d.get("nbprof_capture") if isinstance(d, dict) else None
        if isinstance(found, dict):
            return found
    return None


def profiler_overhead(trace: Any) -> ProfilerOverhead | None:
    """The profiler's overhead on the run ``trace`` was captured from (see the module docstring).

    Parameters
    ----------
    trace : Trace
        A Kineto trace written by an automatic-steps capture, or a merge of one with an nsys trace.

    Returns
    -------
    ProfilerOverhead or None
        None when the trace carries no step times (another capture) or when either side has no step
        (e.g. the run ended inside the recorded window and its only unprofiled step was step 0).
    """
    meta = capture_metadata(trace)
    if meta is None:
        return None
    prof: list[tuple[int, int]] = []
    unprof: list[tuple[int, int]] = []
    for s in meta.get("steps") or ():
        try:
            step, wall, phase = int(s["step"]), int(s["wall_ns"]), str(s["phase"])
        except (KeyError, TypeError, ValueError):
            continue
        if wall <= 0:
            continue
        if phase == "active":
            prof.append((step, wall))
        elif phase == "after" or (phase == "wait" and step > 0):
            unprof.append((step, wall))
    if not prof or not unprof:
        return None
    pm = int(np.median([w for _, w in prof]))
    um = int(np.median([w for _, w in unprof]))
    return ProfilerOverhead(pm / um, pm, um, tuple(s for s, _ in prof), tuple(s for s, _ in unprof),
                            meta.get("step_source"))
