"""CPU contention, from the scheduler counters a capture wrote into the trace: the one definition of how long the
training thread waited for a CPU in a step.

A Kineto trace has no scheduler data: an op that waited for a CPU (other processes, or more runnable threads than
cores) just lasts longer. An nbprof capture with automatic steps (``nbprof report --script``,
``python -m nbprof.capture.script``, ``%%torchprof`` / ``nbprof.profile`` on a loop) writes Linux's schedstat
counters per step into the trace's ``"nbprof_capture"`` object (:mod:`nbprof.capture.cpu_sched`,
:meth:`nbprof.capture.auto_steps.AutoSteps.metadata`); this module reads them. A trace without them (a plain
``torch.profiler`` export, another OS) has no CPU-wait numbers: :func:`cpu_wait` returns None, nothing is guessed.

The **run-queue wait** of a step is the stepping thread's schedstat field 2 (time runnable on a run queue while
another task held the CPU; Linux ``Documentation/scheduler/sched-stats.rst``) between the step's two boundaries,
nbprof's own work at the boundary excluded (as from the step's wall time). It is time the step would not have
taken with a CPU free for the thread: the cpu_contention finding's saving (measured, not replayed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .overhead import capture_metadata

__all__ = ["CpuWait", "step_cpu_wait", "cpu_wait", "CPU_WAIT_COLUMNS"]

#: the columns of :func:`step_cpu_wait`
CPU_WAIT_COLUMNS = ("step", "wall_ns", "runqueue_ns", "threads_cpu_ns", "threads_runqueue_ns", "threads", "runnable")


def step_cpu_wait(trace: Any) -> pd.DataFrame:
    """The recorded (``active``) steps' scheduler counters, one row per step, from the trace's ``"nbprof_capture"``
    object (:func:`nbprof.analysis.overhead.capture_metadata`).

    Columns (int64; -1 where the capture did not measure it): ``step`` (the ``ProfilerStep#N`` number),
    ``wall_ns`` (the step's wall time as the capture timed it, ns), ``runqueue_ns`` (the stepping thread's
    run-queue wait in the step, ns), ``threads_cpu_ns`` / ``threads_runqueue_ns`` (on-CPU time / run-queue wait
    summed over the process's threads, ns: can exceed ``wall_ns`` with several threads), ``threads`` (the
    process's threads), ``runnable`` (the machine's runnable tasks at the step's end, ``/proc/loadavg``).
    Empty (these columns) when the trace carries no run-queue numbers.
    """
    meta = capture_metadata(trace) or {}
    rows = []
    for s in meta.get("steps") or ():
        if not isinstance(s, dict) or s.get("phase") != "active" or "runqueue_ns" not in s:
            continue
        try:
            rows.append([int(s.get(c, -1)) for c in CPU_WAIT_COLUMNS])
        except (TypeError, ValueError):
            continue
    return pd.DataFrame(np.asarray(rows, dtype=np.int64).reshape(-1, len(CPU_WAIT_COLUMNS)),
                        columns=list(CPU_WAIT_COLUMNS))


@dataclass(frozen=True)
class CpuWait:
    """How long the training thread waited for a CPU in the judged steps, and what competed for the CPUs.

    Attributes
    ----------
    steps : tuple of int
        The steps judged (``ProfilerStep#N`` numbers).
    step_runqueue_ns : dict of int to int
        Step -> the stepping thread's run-queue wait in it, ns.
    runqueue_ns : float
        Mean run-queue wait per step, ns.
    step_ns : float
        Mean step time of those steps, ns (the trace's steps when given, else the capture's wall times).
    threads_runqueue_ns, threads_cpu_ns : float
        Mean per step of the run-queue wait / on-CPU time summed over the process's threads, ns (NaN: not measured).
    threads : int
        The most threads the process had in a judged step (-1: not measured).
    runnable : float
        Median of the machine's runnable tasks at the steps' ends (NaN: not measured).
    cpus : int or None
        CPUs the process may run on (``os.sched_getaffinity``).
    cpu_count : int or None
        CPUs of the machine (``os.cpu_count()``): what ``runnable`` and ``loadavg`` compete for.
    torch_threads : int or None
        torch's intra-op threads (``torch.get_num_threads()``).
    child_processes : int or None
        The process's child processes at the end of the capture (DataLoader workers among them).
    loadavg : float or None
        The 1-minute load average at the end of the capture.
    """

    steps: tuple[int, ...]
    step_runqueue_ns: dict[int, int]
    runqueue_ns: float
    step_ns: float
    threads_runqueue_ns: float
    threads_cpu_ns: float
    threads: int
    runnable: float
    cpus: int | None
    cpu_count: int | None
    torch_threads: int | None
    child_processes: int | None
    loadavg: float | None

    @property
    def ratio(self) -> float:
        """``runqueue_ns / step_ns``: the share of the step the training thread waited for a CPU (NaN: no step)."""
        return self.runqueue_ns / self.step_ns if self.step_ns > 0 else float("nan")


def _opt_int(x: Any) -> int | None:
    try:
        return int(x) if x is not None else None
    except (TypeError, ValueError):
        return None


def cpu_wait(trace: Any, steps: pd.DataFrame | None = None) -> CpuWait | None:
    """The training thread's CPU wait over ``steps`` (see the module docstring).

    Parameters
    ----------
    trace : Trace
    steps : pandas.DataFrame, optional
        Steps to judge, with columns ``step`` and ``step_ns`` (:func:`nbprof.analysis.steps.steady_breakdown`): the
        recorded steps among them, with their ``step_ns`` as the step time. Default: every recorded step, at the
        capture's wall time.

    Returns
    -------
    CpuWait or None
        None when the trace carries no run-queue numbers (not an nbprof capture, no Linux schedstat) or none of
        ``steps`` was measured.
    """
    df = step_cpu_wait(trace)
    if df.empty:
        return None
    if steps is not None and len(steps):
        own = dict(zip(steps["step"].astype(int), steps["step_ns"].astype(float), strict=True))
        df = df[df["step"].isin(list(own))]
        if df.empty:
            return None
        step_ns = float(np.mean([own[int(s)] for s in df["step"]]))
    else:
        step_ns = float(df["wall_ns"].mean())
    meta = capture_metadata(trace) or {}
    got = meta.get("cpu")
    facts: dict[str, Any] = got if isinstance(got, dict) else {}

    def mean(col: str) -> float:
        v = df[col].to_numpy(np.int64)
        return float(v.mean()) if (v >= 0).all() else float("nan")

    run = df["runnable"].to_numpy(np.int64)
    la = facts.get("loadavg_end")
    return CpuWait(tuple(int(s) for s in df["step"]),
                   {int(s): int(r) for s, r in zip(df["step"], df["runqueue_ns"], strict=True)},
                   float(df["runqueue_ns"].mean()), step_ns, mean("threads_runqueue_ns"), mean("threads_cpu_ns"),
                   int(df["threads"].max()), float(np.median(run)) if (run >= 0).all() else float("nan"),
                   _opt_int(facts.get("cpus")), _opt_int(facts.get("cpu_count")), _opt_int(facts.get("torch_threads")),
                   _opt_int(facts.get("child_processes")),
                   float(la[0]) if isinstance(la, list) and la else None)

