"""The CPU scheduler's view of a capture: how long the training thread waited for a CPU (CPU contention).

A Kineto trace has no scheduler data: an ``aten::mm`` that ran 5 ms of CPU time while three other processes held
the core lasts 20 ms in the trace, and nothing in the trace says why. Linux counts it per thread in
``/proc/<pid>/task/<tid>/schedstat`` (``Documentation/scheduler/sched-stats.rst``): three numbers, the time spent
on the CPU (ns), the time spent **waiting on a run queue** (runnable, but another task held the CPU; ns), and the
number of timeslices run. :class:`SchedSampler` reads them for the automatic steps of a capture
(:mod:`nbprof.capture.auto_steps`, which writes them into the trace's ``"nbprof_capture"`` object):

- per step, the stepping thread's run-queue wait (``/proc/thread-self/schedstat`` of the thread that entered the
  capture, read through one open file descriptor: ~3 µs a read);
- per profiled step, the sums over all of the process's threads (torch's intra-op pool included) of the on-CPU
  time and of the run-queue wait, their number, and the machine's runnable tasks at the step's end (``/proc/loadavg``
  field 4, ``runnable/total``, the reader itself included);
- once, the facts that say *why*: the CPUs this process may run on (``os.sched_getaffinity``), torch's intra-op
  and inter-op thread counts, the process's child processes (DataLoader workers are children), and the load
  averages (``/proc/loadavg``).

Capture only: nothing here reads a trace; :mod:`nbprof.analysis.cpu_wait` reads what was written. Off Linux (no
schedstat) every read returns None and nothing is written.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["SchedSampler", "SCHEDSTAT", "LOADAVG", "loadavg", "runnable_tasks"]

#: the calling thread's schedstat (Linux >= 3.17: ``/proc/thread-self``)
SCHEDSTAT = "/proc/thread-self/schedstat"
LOADAVG = "/proc/loadavg"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read()
    except (OSError, ValueError):
        return None


def loadavg() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (``/proc/loadavg``: runnable plus uninterruptible tasks, averaged);
    None where unavailable."""
    text = _read(LOADAVG)
    try:
        return [float(x) for x in text.split()[:3]] if text else None
    except ValueError:
        return None


def runnable_tasks() -> int | None:
    """Tasks (threads) runnable on the machine now, the reader included (``/proc/loadavg`` field 4, ``R/T``); None
    where unavailable."""
    text = _read(LOADAVG)
    try:
        return int(text.split()[3].split("/")[0]) if text else None
    except (IndexError, ValueError):
        return None


def _children() -> int | None:
    """The number of child processes of this process (``/proc/self/task/<tid>/children``, all threads: a
    DataLoader's workers are children of the thread that started them); None where unavailable."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    n, seen = 0, False
    for t in tasks:
        text = _read(f"/proc/self/task/{t}/children")
        if text is None:
            continue
        seen = True
        n += len(text.split())
    return n if seen else None


class SchedSampler:
    """Reads the scheduler's counters of the thread that created it and of its process (see the module docstring).

    Attributes
    ----------
    available : bool
        True when the thread's schedstat could be opened (Linux with schedstat); every read is None otherwise.
    """

    def __init__(self) -> None:
        try:  # the fd names the creating thread even when read from another one
            self._fd: int | None = os.open(SCHEDSTAT, os.O_RDONLY)
        except OSError:
            self._fd = None
        self.available = self._fd is not None
        self._load0 = loadavg()

    def close(self) -> None:
        """Close the thread's schedstat file (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def thread_runqueue_ns(self) -> int | None:
        """The creating thread's run-queue wait since it started (schedstat field 2, ns); None when unavailable."""
        if self._fd is None:
            return None
        try:
            return int(os.pread(self._fd, 96, 0).split()[1])
        except (OSError, IndexError, ValueError):
            return None

    def process_totals(self) -> tuple[int, int, int] | None:
        """``(on_cpu_ns, runqueue_ns, threads)`` summed over the process's live threads (schedstat fields 1 and 2,
        ns); None when unavailable. A thread that exited since an earlier call is no longer counted: compare two
        calls over a window in which the thread pool is stable (a profiled step)."""
        if self._fd is None:
            return None
        try:
            tasks = os.listdir("/proc/self/task")
        except OSError:
            return None
        cpu = rq = n = 0
        for t in tasks:
            text = _read(f"/proc/self/task/{t}/schedstat")
            if text is None:  # exited meanwhile
                continue
            try:
                a, b = text.split()[:2]
                cpu, rq, n = cpu + int(a), rq + int(b), n + 1
            except ValueError:
                continue
        return (cpu, rq, n) if n else None

    def facts(self) -> dict[str, Any]:
        """The capture's ``"cpu"`` object: ``cpus`` (CPUs this process may run on, ``os.sched_getaffinity``),
        ``cpu_count`` (``os.cpu_count()``), ``torch_threads`` / ``torch_interop_threads`` (``torch.get_num_threads()``
        / ``get_num_interop_threads()``; None without torch imported), ``child_processes`` (DataLoader workers and any
        other children alive now; None where unknown), ``loadavg_start`` / ``loadavg_end`` (``/proc/loadavg``'s three
        averages when the sampler was made and now; None where unavailable), ``schedstat`` (bool: the per-step
        run-queue numbers were measured)."""
        try:
            cpus: int | None = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count()
        import sys

        torch = sys.modules.get("torch")
        threads = interop = None
        if torch is not None:
            try:
                threads, interop = int(torch.get_num_threads()), int(torch.get_num_interop_threads())
            except Exception:  # a torch without them (or half-imported): unknown
                threads = interop = None
        return {"cpus": cpus, "cpu_count": os.cpu_count(), "torch_threads": threads, "torch_interop_threads": interop,
                "child_processes": _children(), "loadavg_start": self._load0, "loadavg_end": loadavg(),
                "schedstat": self.available}
