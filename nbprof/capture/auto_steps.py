"""Profiler steps for an unmodified loop: :mod:`.step_hooks` boundaries drive ``torch.profiler``'s schedule.

:class:`AutoSteps` belongs to one :class:`~nbprof.capture.torch_profiler.Session` (``auto_steps`` option;
``python -m nbprof.capture.script`` and ``nbprof report --script`` turn it on). At each step end found by
:class:`~nbprof.capture.step_hooks.StepHooks` (an ``optimizer.step()``, else a ``DataLoader`` batch
request) it:

1. pops the NVTX range of the step (``nbprof.nvtx``, named ``ProfilerStep#N`` like Kineto's), so that under
   ``nsys profile -t nvtx`` the nsys trace and the Kineto trace share the step ranges that
   :func:`nbprof.trace.merge.merge` aligns on (an NVTX step range pairs with ``ProfilerStep#N`` on the same
   thread);
2. calls ``torch.profiler.profile.step()`` (the ``ProfilerStep#N`` annotation and the wait/warmup/active
   schedule: after the last active step the profiler stops and exports while the script runs on);
3. pushes the NVTX range of the next step.

It also records each step's wall time (``perf_counter`` ns, minus the time its own ``prof.step()`` call at
the step's start took: the profiler's start and export are one-off costs, not per-step overhead), its
DataLoader wait, its schedule phase (``wait``, ``warmup``, ``active``, ``after``) and the CPU scheduler's counters
(:mod:`nbprof.capture.cpu_sched`: the stepping thread's run-queue wait, and in the recorded steps the process's
threads and the machine's runnable tasks: CPU contention, which the trace itself cannot show), written at the end
into each exported trace as the top-level key ``"nbprof_capture"`` (the Kineto loader keeps it in
``meta.extra``; :func:`nbprof.analysis.overhead.profiler_overhead` reads it). A step still open when the
profile ends inside the recorded window (the rest of a cell after its last ``optimizer.step()``) is not a
step: its ``ProfilerStep#N`` annotation is dropped from the trace (:func:`finish_trace`).

The user's own steps win: an explicit ``nbprof.step()`` (``Session.step``) or a torch.profiler of the
script's own (seen enabled at a boundary while nbprof's is not recording) turns the automatic steps off,
with a note.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from .. import nvtx
from .cpu_sched import SchedSampler, runnable_tasks
from .step_hooks import StepEnd, StepHooks

__all__ = ["AutoSteps", "CAPTURE_KEY", "KEEP_AFTER", "finish_trace"]

#: Top-level key of the exported trace that holds the capture's step times (``meta.extra[CAPTURE_KEY]``).
CAPTURE_KEY = "nbprof_capture"
#: Steps kept after the recorded window (their wall times are the "unprofiled" side of the overhead).
KEEP_AFTER = 20
#: At most this many steps are kept (a schedule repeated until the end would otherwise grow the list forever).
MAX_KEPT = 10_000


class AutoSteps:
    """Drive ``session``'s profiler from the process-global step hooks (see the module docstring).

    Parameters
    ----------
    session : Session
        The running capture session (its ``_prof`` and ``notes`` are used).

    Attributes
    ----------
    steps : list of dict
        ``{"step", "wall_ns", "data_wait_ns", "phase"}`` per step ended (at most the window + ``KEEP_AFTER``),
        plus the scheduler's counters where Linux has them (see :meth:`metadata`).
    off_reason : str or None
        Why the automatic steps were turned off (None while on).
    """

    def __init__(self, session: Any) -> None:
        self.session = session
        self.steps: list[dict[str, Any]] = []
        self.off_reason: str | None = None
        self.source: str | None = None
        self._hooks = StepHooks(self._on_step_end)
        self.entered = False
        self._thread = threading.get_ident()
        self._nvtx = False
        self._carry_ns = 0
        sched = session.options.schedule_args(auto=True)
        self._wait, self._warmup, self._active = sched["wait"], sched["warmup"], sched["active"]
        self._repeat = sched["repeat"]
        self._sched: SchedSampler | None = None
        self._rq0: int | None = None  # the stepping thread's run-queue total at the current step's start
        self._tot0: tuple[int, int, int] | None = None  # the process's (cpu, runqueue, threads) at a recorded step's start
        self._cpu_facts: dict[str, Any] = {}

    # ------------------------------------------------------------------ schedule
    def phase(self, step: int) -> str:
        """The schedule phase of ``step`` (torch.profiler.schedule's rule): wait, warmup, active or after."""
        cycle = self._wait + self._warmup + self._active
        if self._repeat > 0 and step >= cycle * self._repeat:
            return "after"
        pos = step % cycle
        return "wait" if pos < self._wait else "warmup" if pos < self._wait + self._warmup else "active"

    def _window_end(self) -> int:
        cycle = self._wait + self._warmup + self._active
        return cycle * self._repeat if self._repeat > 0 else 2**62

    # ------------------------------------------------------------------ protocol
    def __enter__(self) -> AutoSteps:
        self._hooks.__enter__()
        self.entered = True
        self._sched = SchedSampler()  # this thread's schedstat: the one whose optimizer.step() ends the steps
        self._rq0 = self._sched.thread_runqueue_ns()
        try:
            if nvtx.available():
                nvtx.mark("nbprof auto steps")  # the first NVTX call initialises the injection
                nvtx.push("ProfilerStep#0")
                self._nvtx = True
        except Exception:  # NVTX is an extra: the Kineto steps do not need it
            self._nvtx = False
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(None, None, None)
        self.source = self._hooks.source
        if self._sched is not None:
            self._cpu_facts = self._sched.facts()
            self._sched.close()
        if self._nvtx:
            self._nvtx_pop()
        if self._hooks.error_count:
            self.session.notes.append(f"automatic steps: {self._hooks.error_count} step(s) failed "
                                      f"({self._hooks.errors[0]})")

    def turn_off(self, reason: str) -> None:
        """Stop driving the profiler (the hooks still record step times)."""
        if self.off_reason is None:
            self.off_reason = reason
            self.session.notes.append(reason)
            if self._nvtx:
                self._nvtx_pop()
            self._nvtx = False

    # ------------------------------------------------------------------ a step ended
    def _nvtx_pop(self) -> None:
        if threading.get_ident() == self._thread:
            nvtx.pop()

    def _sched_fields(self, index: int) -> dict[str, Any]:
        """The scheduler's counters of the step ``index`` ending now (see :meth:`metadata`)."""
        out: dict[str, Any] = {}
        sch = self._sched
        if sch is None or not sch.available:
            return out
        rq = sch.thread_runqueue_ns()
        if rq is not None and self._rq0 is not None:
            out["runqueue_ns"] = max(0, rq - self._rq0)
        if self.phase(index) == "active":
            tot = sch.process_totals()
            if tot is not None and self._tot0 is not None:
                out.update(threads_cpu_ns=max(0, tot[0] - self._tot0[0]),
                           threads_runqueue_ns=max(0, tot[1] - self._tot0[1]), threads=tot[2])
            n = runnable_tasks()
            if n is not None:
                out["runnable"] = n
        return out

    def _sched_restart(self, index: int) -> None:
        """The counters at the start of the step after ``index`` (after nbprof's own work at the boundary)."""
        sch = self._sched
        if sch is None or not sch.available:
            return
        self._rq0 = sch.thread_runqueue_ns()
        self._tot0 = sch.process_totals() if self.phase(index + 1) == "active" else None

    def _on_step_end(self, ev: StepEnd) -> None:
        stepping = ev.index < self._window_end()  # torch.profiler still has schedule steps to take
        if len(self.steps) < MAX_KEPT and ev.index < self._window_end() + KEEP_AFTER:
            self.steps.append({"step": ev.index, "wall_ns": ev.duration_ns - self._carry_ns,
                               "data_wait_ns": ev.data_wait_ns, "phase": self.phase(ev.index),
                               **self._sched_fields(ev.index)})
        self._carry_ns = 0
        try:
            self._step_end(ev, stepping)
        finally:
            self._sched_restart(ev.index)

    def _step_end(self, ev: StepEnd, stepping: bool) -> None:
        if self.off_reason is not None:
            return
        if self.phase(ev.index) in ("wait", "warmup"):
            import torch

            if torch.autograd.profiler._is_profiler_enabled:
                self.turn_off("the script runs its own torch.profiler: its steps win, nbprof's automatic "
                              "steps are off")
                return
        same_thread = threading.get_ident() == self._thread
        # the profiler prints (USDT start/stop lines) only where the phase changes; the filter is entered before
        # the NVTX pop and left after the push, so both ranges' ends are only a few calls apart. The NVTX step
        # ranges go on after the recorded window (cheap; the nsys trace covers the whole run).
        quiet = stepping and self.phase(ev.index) != self.phase(ev.index + 1)
        with self.session.quiet_profiler_calls() if quiet else contextlib.nullcontext():
            if self._nvtx and same_thread:
                self._nvtx_pop()
            if stepping:
                self.session._profiler_step(quiet=False)
            if self._nvtx and same_thread:
                nvtx.push(f"ProfilerStep#{ev.index + 1}")
        self._carry_ns = time.perf_counter_ns() - ev.end_ns

    # ------------------------------------------------------------------ what goes into the trace
    def metadata(self) -> dict[str, Any]:
        """The ``"nbprof_capture"`` object: step source, schedule and per-step wall times (int ns).

        Keys: ``step_source`` ("optimizer", "dataloader" or None), ``steps_seen`` (int), ``schedule``
        (wait, warmup, active, repeat), ``steps`` (list of ``{"step", "wall_ns", "data_wait_ns", "phase"}``; where
        Linux has schedstat also ``runqueue_ns``: the stepping thread's run-queue wait in the step, ns, and in the
        ``active`` steps ``threads_cpu_ns`` / ``threads_runqueue_ns`` (summed over the process's threads, ns),
        ``threads`` (their number) and ``runnable`` (the machine's runnable tasks at the step's end,
        ``/proc/loadavg``)), ``cpu`` (:meth:`nbprof.capture.cpu_sched.SchedSampler.facts`: the CPUs, torch's thread
        counts, child processes, load averages; ``{}`` before the capture ended),
        ``partial_step`` (the number of the step still open when the profile ended inside the recorded window,
        after at least one complete step; else None), ``auto_steps_off`` (the reason, or None), ``clock``
        ("perf_counter_ns").
        """
        n = self._hooks.steps
        partial = n if self.off_reason is None and n >= 1 and self.phase(n) == "active" else None
        return {
            "partial_step": partial,
            "step_source": self._hooks.source,
            "steps_seen": self._hooks.steps,
            "schedule": {"wait": self._wait, "warmup": self._warmup, "active": self._active, "repeat": self._repeat},
            "steps": list(self.steps),
            "auto_steps_off": self.off_reason,
            "clock": "perf_counter_ns",
            "cpu": dict(self._cpu_facts),
        }


def finish_trace(path: Any, meta: dict[str, Any]) -> None:
    """Write ``meta`` (:meth:`AutoSteps.metadata`) into the Chrome trace at ``path`` as the top-level
    ``"nbprof_capture"`` object, and drop the ``ProfilerStep#N`` annotation of its ``partial_step`` (the time
    from the last step end to the profiler's stop is not a step: a cell that runs one training step stays one
    step, not one step and a sliver). The events inside that time stay. The file is replaced atomically
    (``_files.write_trace_bytes``); a document that is not a JSON object is left alone.
    """
    import orjson

    from ._files import read_trace_bytes, write_trace_bytes

    doc = orjson.loads(read_trace_bytes(path))
    if not isinstance(doc, dict):
        return
    partial = meta.get("partial_step")
    events = doc.get("traceEvents")
    if partial is not None and isinstance(events, list):
        name = f"ProfilerStep#{partial}"
        doc["traceEvents"] = [e for e in events if not (isinstance(e, dict) and e.get("name") == name)]
    doc[CAPTURE_KEY] = meta
    write_trace_bytes(orjson.dumps(doc), path)
