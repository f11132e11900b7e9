"""One guard for the timing-bound tests on a shared machine: detect a disturbed measurement, rerun it, and when
every try was disturbed skip the timing assertions with the numbers (never a bare wall-clock bound).

A measurement is *disturbed* when

* runnable tasks waited for a CPU more than :data:`MAX_STALL` of the wall time it took: the kernel's pressure
  stall information, ``/proc/pressure/cpu`` line ``some`` (``total`` in µs; Linux
  ``Documentation/accounting/psi.rst``), read before and after; on a kernel without PSI this part is not checked;
* or the test's own control says so (``check(value)`` returns a reason with the numbers, e.g. two runs of the same
  work that differ by more than the run-to-run spread of a quiet machine).

Usage (a module fixture measures, the timing-bound tests call :meth:`Measured.skip_if_disturbed`)::

    m = measure(lambda attempt: run_workload(tmp / f"try{attempt}"), what="the 2-rank DDP run", check=control)
    m.skip_if_disturbed()   # in the tests whose assertions are bounds on times
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

#: share of a measurement's wall time during which runnable tasks waited for a CPU above which it is disturbed.
#: Quiet 2-core machine running one test's workload: 0-30 %; with 8 CPU-bound jobs beside it: 95-100 %.
MAX_STALL = 0.5
PSI_CPU = "/proc/pressure/cpu"


def cpu_stall_us() -> int | None:
    """``some`` ``total`` of :data:`PSI_CPU` (µs that at least one runnable task waited for a CPU); None without PSI."""
    try:
        with open(PSI_CPU, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("some "):
                    return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def load_note() -> str:
    """``load average 9.4 on 2 cores`` (the one-minute load average), for skip messages."""
    try:
        return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    except OSError:
        return f"{os.cpu_count()} cores"


@dataclass
class Measured:
    """What :func:`measure` returns: the last try's ``value`` and why it was disturbed (``""`` when clean)."""

    value: Any
    what: str
    tries: int
    stall: float | None
    wall_s: float
    reason: str = ""

    @property
    def disturbed(self) -> bool:
        return bool(self.reason)

    def skip_if_disturbed(self) -> None:
        """Skip the calling test, with the numbers, when every try was disturbed."""
        if self.reason:
            pytest.skip(f"disturbed measurement of {self.what} ({self.tries} tries, {load_note()}): {self.reason}")


def _timed_try(fn: Callable[[int], Any], attempt: int, max_stall: float) -> tuple[Any, float | None, float, list[str]]:
    """Run ``fn(attempt)`` once: ``(value, stall, wall_s, reasons)``, ``stall`` the share of the wall time runnable
    tasks waited for a CPU (:data:`PSI_CPU`; None without PSI) and ``reasons`` ``[why]`` when it exceeds
    ``max_stall``, else ``[]``."""
    s0, t0 = cpu_stall_us(), time.monotonic()
    value = fn(attempt)
    wall = max(time.monotonic() - t0, 1e-9)
    s1 = cpu_stall_us()
    stall = (s1 - s0) / 1e6 / wall if s0 is not None and s1 is not None else None
    reasons = []
    if stall is not None and stall > max_stall:
        reasons.append(f"runnable tasks waited for a CPU {stall:.0%} of the {wall:.1f} s it ran "
                       f"(over {max_stall:.0%}: {PSI_CPU})")
    return value, stall, wall, reasons


def measure(fn: Callable[[int], Any], *, what: str, tries: int = 2, max_stall: float = MAX_STALL,
            check: Callable[[Any], str] | None = None) -> Measured:
    """Run ``fn(attempt)`` (attempt 0, 1, ...) until one try is not disturbed, at most ``tries`` times.

    ``check(value)`` returns ``""`` for a clean measurement or the reason (with its numbers) it is not.
    """
    m = Measured(None, what, 0, None, 0.0)
    for attempt in range(tries):
        value, stall, wall, reasons = _timed_try(fn, attempt, max_stall)
        extra = check(value) if check is not None else ""
        if extra:
            reasons.append(extra)
        m = Measured(value, what, attempt + 1, stall, wall, "; ".join(reasons))
        if not m.reason:
            break
    return m


def until_right(fn: Callable[[int], Any], *, what: str, wrong: Callable[[Any], str], tries: int = 2,
                max_stall: float = MAX_STALL, disturbed: Callable[[Any], str] | None = None) -> Any:
    """Run ``fn(attempt)`` until ``wrong(value)`` returns ``""`` (the timing-bound result holds), at most ``tries``
    times, and return that value.

    For results that a CPU-contended run can spoil (a step flagged because other processes took the CPU, a capture
    slot used up by such a false alarm). A wrong result from a *disturbed* try (see :func:`measure`) is run again;
    when the last try is wrong and disturbed the test is skipped with both the reason and the numbers. A wrong result
    from an undisturbed try (or where the kernel has no PSI) is returned, so the test's assertions fail on it.

    ``disturbed(value)`` is the result's own evidence of a disturbance (``""`` when it has none), for disturbances
    too short to move the whole run's PSI share: e.g. a watched step flagged where no stall was planted, whose
    run-queue and off-CPU time (the watch's ``runqueue_ns`` + ``blocked_ns``) explain its excess.
    """
    for attempt in range(tries):
        value, _, _, why = _timed_try(fn, attempt, max_stall)
        reason = wrong(value)
        if not reason:
            return value
        own = disturbed(value) if disturbed is not None else ""
        if own:
            why.append(own)
        if not why:
            return value
        if attempt == tries - 1:
            pytest.skip(f"disturbed measurement of {what} ({tries} tries, {load_note()}): {reason}; "
                        + "; ".join(why))
    return value
