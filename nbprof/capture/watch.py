"""The always-on step watch: per-step timings from cheap hooks, a profiler armed on an anomalous step.

No profiler runs while the watch only watches. Each training step is timed from hooks that cost a few
microseconds per step (``benchmarks/bench_watch.py`` measures the ratio against the same loop unwatched):

==================  ===================================================================================
``step_ns``         wall time between two step boundaries (``time.perf_counter_ns``)
``data_wait_ns``    time inside ``DataLoader`` iterators' ``__next__`` (``nbprof.capture.step_hooks``)
``forward_ns``      outermost ``nn.Module`` forward calls (global module forward pre/post hooks)
``backward_ns``     ``torch.autograd.backward`` calls (``Tensor.backward`` goes through it; a wrapper)
``optimizer_ns``    ``Optimizer.step`` (global optimizer step pre/post hooks)
``gc_ns``           CPython garbage-collection pauses (``gc.callbacks`` start/stop)
``blocked_ns``      the main thread off the CPU outside the DataLoader and not waiting for a CPU: wall minus
                    thread CPU time (``time.thread_time_ns``) minus ``runqueue_ns``, floored at 0, i.e. blocking
                    I/O, sleeps, locks, waits that yield the CPU
``runqueue_ns``     the main thread runnable but waiting for a CPU (other processes hold them: CPU contention),
                    from Linux's ``/proc/thread-self/schedstat`` (its second field, ns; 0 elsewhere)
``other_ns``        ``step_ns`` minus the parts above that do not overlap (data wait, forward, backward,
                    optimizer), floored at 0
``syncs``           host reads of tensor values and device syncs called in the step: ``Tensor.item`` /
                    ``Tensor.tolist`` calls, and with CUDA ``torch.cuda.synchronize`` / ``Stream.synchronize`` /
                    ``Event.synchronize`` (counting wrappers; implicit reads such as ``float(t)`` or ``if t:``
                    are counted only in a profiled window, :func:`nbprof.analysis.watch.step_syncs`)
``device_step_ns``  CUDA only: the step on the current stream, between CUDA events recorded at its two
                    boundaries (filled once the events complete, never by waiting for them during the loop;
                    -1 without CUDA). Untested on a GPU here: this machine has none
``watch_ns``        the watch's own work after the step (judging it; starting, stopping or exporting a
                    profiled window): in no step, so a profiler's start never reads as a slow step
==================  ===================================================================================

Step boundaries, first that applies: :meth:`Watch.step` calls (``nbprof.watch.step()``), else those of
:class:`nbprof.capture.step_hooks.StepHooks` (the end of the last optimizer's ``step()`` of an iteration, else
each ``DataLoader`` batch request), the one definition shared with the script capture. The step is flagged when
it takes more than ``k`` times the running median of the last ``window`` unflagged, unprofiled steps (and at
least ``min_excess_ns`` more; the first step of a profiled window ``startup_allowance_ns`` more again: it
carries the profiler's start-up, a false alarm otherwise), or when a user ``predicate(record)`` says so (it
decides alone; ``record["profiled"]`` tells it a profiled step). A flag arms ``torch.profiler`` for the next
``capture_steps`` steps (each a ``ProfilerStep#N`` range); a window is kept (its trace written into the run
folder) when it holds a flagged step, otherwise dropped and the watch re-arms, up to ``max_profiled_steps``
profiled steps in all. Under Nsight Systems the same windows are ``cudaProfilerStart/Stop`` ranges
(``torch.cuda.profiler.start/stop``, only when CUDA is available): run ``nsys profile
--capture-range=cudaProfilerApi --capture-range-end=repeat ...`` to record only them.

A hook that raises never breaks the user's loop: the error is caught, the step's ``errors`` field names
the hook and the exception, and that hook keeps running. The run folder (``nbprof.capture.watch_log``)
holds ``steps.parquet`` (one row per step, :data:`RECORD_FIELDS`), ``summary.json`` and the captured traces.
Capture only: nothing here loads a trace (``nbprof.watching`` does, for the verdict of a captured step).
"""

from __future__ import annotations

import bisect
import gc
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .cpu_sched import SchedSampler
from .watch_log import RECORD_FIELDS, RunLog

__all__ = ["Watch", "RECORD_FIELDS", "active_watch"]

_NS = time.perf_counter_ns
_CPU = time.thread_time_ns
_ACTIVE: list[Watch] = []


def _always_record(step: int) -> Any:
    from torch.profiler import ProfilerAction

    return ProfilerAction.RECORD


def active_watch() -> Watch | None:
    """The innermost running :class:`Watch`, or None."""
    return _ACTIVE[-1] if _ACTIVE else None


class Watch:
    """Per-step monitor and trigger (a context manager); see the module docstring for every field.

    Parameters
    ----------
    run_dir : path-like
        The run folder (created; ``steps.parquet``, ``summary.json`` and ``capture-*.pt.trace.json.gz``).
    k : float, default 3.0
        A step longer than ``k`` x the running median is flagged.
    window : int, default 64
        Steps in the running median (unflagged, unprofiled steps only).
    warmup : int, default 5
        Steps before the first flag can be raised (the median needs them; the first steps compile/allocate).
    min_excess_ns : int, default 2_000_000
        A flagged step is also at least this much longer than the median (ns): scheduler noise on a
        millisecond step is not a stall.
    startup_allowance_ns : int, default 50_000_000
        Extra excess the first step of a profiled window needs to be flagged (ns): that step carries the
        profiler's start-up (first-use costs after ``torch.profiler``'s start; a loaded 2-core CPU machine showed
        over 30 ms on 3 ms steps). A real stall longer than this is still flagged there.
    predicate : callable, optional
        ``predicate(record: dict) -> bool`` replaces the k x median rule (the record has :data:`RECORD_FIELDS`
        filled so far, plus ``median_ns``).
    capture_steps : int, default 20
        Steps per profiled window; ``0`` never starts a profiler.
    max_captures : int, default 2
        Windows with a flagged step to keep.
    max_profiled_steps : int, default 200
        Profiled steps in all (kept or dropped windows): the profiler's cost is bounded.
    activities : tuple of str, default ("cpu", "cuda")
        ``torch.profiler`` activities (``cuda`` only when available).
    listener : callable, optional
        ``listener(record: dict)`` after every step (the live view); its errors are recorded like a hook's.
    with_stack : bool, default True
        Profiled windows record Python frames (``torch.profiler``'s ``with_stack``: the Python tracer), so a
        stall in the user's own code (a write, a checkpoint, a print) is named in the captured trace; it makes
        the profiled steps slower, never the watched ones.
    manual : bool, default False
        Only :meth:`step` calls end steps from the start (a trainer callback that knows its steps); otherwise
        the optimizer/DataLoader boundaries count until the first :meth:`step` call.

    Attributes
    ----------
    records : list of dict
        One dict per finished step (:data:`RECORD_FIELDS`).
    captures : list of dict
        ``{"path", "first_step", "last_step", "flagged_steps", "profiler_steps"}`` per kept window; the
        ``profiler_steps`` map watch step -> ``ProfilerStep#N`` number in that trace. Each kept trace also holds
        its window as the top-level object ``"nbprof_watch"`` (:data:`~nbprof.capture.watch_log.WATCH_KEY`).
    """

    def __init__(self, run_dir: str | os.PathLike[str], *, k: float = 3.0, window: int = 64, warmup: int = 5,
                 min_excess_ns: int = 2_000_000, startup_allowance_ns: int = 50_000_000,
                 predicate: Callable[[dict[str, Any]], bool] | None = None,
                 capture_steps: int = 20, max_captures: int = 2, max_profiled_steps: int = 200,
                 activities: tuple[str, ...] = ("cpu", "cuda"),
                 listener: Callable[[dict[str, Any]], None] | None = None, manual: bool = False,
                 with_stack: bool = True) -> None:
        if k <= 1:
            raise ValueError(f"k={k}: a slow step is k x the median with k > 1")
        self.log = RunLog(Path(run_dir))
        self.run_dir = self.log.run_dir
        self.k, self.window, self.warmup, self.min_excess_ns = float(k), int(window), int(warmup), int(min_excess_ns)
        self.startup_allowance_ns = int(startup_allowance_ns)
        self.predicate = predicate
        self._listeners: list[Callable[[dict[str, Any]], None]] = [listener] if listener is not None else []
        #: ``fn(watch)`` called once the run folder is written (the live view's last refresh); errors are kept in
        #: :attr:`close_errors`, never raised
        self.on_close: list[Callable[[Watch], None]] = []
        self.close_errors: list[str] = []
        self.view: Any = None  # the live chart, when nbprof.watch(..., live=True) made one
        self.capture_steps, self.max_captures, self.max_profiled_steps = capture_steps, max_captures, max_profiled_steps
        self.activities = activities
        self.with_stack = bool(with_stack)
        self.records: list[dict[str, Any]] = []
        self.captures: list[dict[str, Any]] = []
        self._median: list[int] = []  # sorted window
        self._fifo: deque[int] = deque()
        self._mode = "manual" if manual else ""  # "", "dataloader", "optimizer", "manual"
        self._handles: list[Any] = []
        self._patches: list[tuple[Any, str, Any]] = []  # (object, attribute, original), restored in reverse
        self._cuda = False  # CUDA events per step (torch.cuda.is_available() at install)
        self._ev_last: Any = None  # the CUDA event recorded at the last boundary
        self._ev_pending: deque[tuple[dict[str, Any], Any, Any]] = deque()  # (record, start event, end event)
        self._syncs = 0
        self._sched: SchedSampler | None = None  # the schedstat of the thread that installed the watch
        self._rq0 = 0
        self._hooks: Any = None  # the StepHooks (optimizer post-hook and DataLoader boundaries, data wait)
        self._opt_t0 = 0
        self._torch: Any = None
        self._origin = _NS()
        self._reset_step(self._origin, _CPU())
        self._rearm = False
        self._prof: Any = None
        self._prof_window: dict[str, Any] = {}
        self._profiled = 0
        self._fwd_depth = 0
        self._fwd_t0 = 0
        self._gc_t0 = 0

    # ---------------------------------------------------------------------------------------- step accounting
    def _data_totals(self) -> tuple[int, int]:
        h = self._hooks
        return (h.data_wait_total_ns, h.data_wait_cpu_total_ns) if h is not None else (0, 0)

    def _runqueue(self) -> int:
        """The installing thread's run-queue wait so far (ns; 0 without schedstat)."""
        rq = self._sched.thread_runqueue_ns() if self._sched is not None else None
        return rq if rq is not None else 0

    def _reset_step(self, t: int, cpu: int, rq: int | None = None) -> None:
        self._t0, self._cpu0 = t, cpu
        self._rq0 = self._runqueue() if rq is None else rq
        self._data0, self._data_cpu0 = self._data_totals()
        self._fwd = self._bwd = self._opt = self._gc = self._syncs = 0
        self._fwd_depth = 0  # a forward that raised (and was caught) never ran its post-hook
        self._errors: list[str] = []

    def _error(self, where: str, exc: BaseException) -> None:
        self._errors.append(f"{where}: {type(exc).__name__}: {exc}"[:300])

    def _boundary(self, t: int, cpu: int) -> None:
        """End the current step at ``t`` (perf_counter ns) and start the next one (after the watch's own work)."""
        step_ns = t - self._t0
        tot, tot_cpu = self._data_totals()
        data, data_cpu = tot - self._data0, tot_cpu - self._data_cpu0
        rq = self._runqueue()
        runq = max(0, rq - self._rq0)
        blocked = max(0, (step_ns - data) - (cpu - self._cpu0 - data_cpu) - runq)
        parts = data + self._fwd + self._bwd + self._opt
        rec: dict[str, Any] = {
            "step": len(self.records), "start_ns": self._t0 - self._origin, "step_ns": step_ns,
            "data_wait_ns": data, "forward_ns": self._fwd, "backward_ns": self._bwd,
            "optimizer_ns": self._opt, "gc_ns": self._gc, "blocked_ns": blocked, "runqueue_ns": runq,
            "other_ns": max(0, step_ns - parts), "syncs": self._syncs, "device_step_ns": -1,
            "profiled": self._prof is not None,
            "flagged": False, "median_ns": self._median[len(self._median) // 2] if self._median else 0,
            "capture": "", "errors": "; ".join(self._errors),
        }
        if self._cuda:
            self._device_boundary(rec)
        try:
            self._judge(rec)
        except Exception as exc:  # a user predicate that raises: the step is not flagged, the record says why
            rec["errors"] = (rec["errors"] + "; " if rec["errors"] else "") + f"predicate: {type(exc).__name__}: {exc}"
        self.records.append(rec)
        self._profile_boundary(rec)
        for fn in self._listeners:
            try:
                fn(rec)
            except Exception as exc:
                rec["errors"] = (rec["errors"] + "; " if rec["errors"] else "") + f"listener: {type(exc).__name__}: {exc}"
        t1 = _NS()
        rec["watch_ns"] = t1 - t
        # the watch's own bookkeeping (profiler start/stop/export) is in no step; one schedstat read per boundary
        # (~3 us): a run-queue wait during that bookkeeping counts in the next step
        self._reset_step(t1, _CPU(), rq)

    def _device_boundary(self, rec: dict[str, Any], *, wait: bool = False) -> None:
        """Record a CUDA event at this boundary; fill ``device_step_ns`` of the steps whose events completed
        (``wait``: synchronize first, at the end of the watch)."""
        try:
            torch = self._torch
            if not wait:
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                if self._ev_last is not None:
                    self._ev_pending.append((rec, self._ev_last, ev))
                self._ev_last = ev
            else:
                torch.cuda.synchronize()
            while self._ev_pending and self._ev_pending[0][2].query():
                r, a, b = self._ev_pending.popleft()
                r["device_step_ns"] = int(a.elapsed_time(b) * 1e6)  # elapsed_time: ms (torch.cuda.Event)
        except Exception as exc:
            rec["errors"] = (rec["errors"] + "; " if rec["errors"] else "") + f"cuda events: {type(exc).__name__}: {exc}"
            self._cuda = False

    def _judge(self, rec: dict[str, Any]) -> None:
        med = rec["median_ns"]
        n = len(self.records)
        if self.predicate is not None:
            rec["flagged"] = bool(self.predicate(rec))
        else:
            # the first step of a profiled window carries the profiler's start-up: it needs startup_allowance_ns
            # more excess (a 200 ms stall there is still flagged: no step of a window is blind)
            starting = self._prof is not None and not self._prof_window["steps"]
            excess = self.min_excess_ns + (self.startup_allowance_ns if starting else 0)
            rec["flagged"] = bool(n >= self.warmup and med > 0 and rec["step_ns"] > self.k * med
                                  and rec["step_ns"] - med >= excess)
        if rec["flagged"] or rec["profiled"]:
            return
        v = rec["step_ns"]
        self._fifo.append(v)
        bisect.insort(self._median, v)
        if len(self._fifo) > self.window:
            old = self._fifo.popleft()
            del self._median[bisect.bisect_left(self._median, old)]

    # ----------------------------------------------------------------------------------------------- profiler
    def _profile_boundary(self, rec: dict[str, Any]) -> None:
        """Advance, close or open the profiled window at a step boundary (time here is in no step)."""
        try:
            if self._prof is not None:
                w = self._prof_window
                w["steps"].append(rec["step"])
                if rec["flagged"]:
                    w["flagged"].append(rec["step"])
                self._profiled += 1
                if len(w["steps"]) < self.capture_steps and self._profiled < self.max_profiled_steps:
                    self._prof.step()
                    return
                self._stop_profiler(keep=bool(w["flagged"]))
            # armed by a flag, or still armed when the last window held no flagged step (no gap between windows)
            if ((rec["flagged"] or self._rearm) and self.capture_steps > 0 and len(self.captures) < self.max_captures
                    and self._profiled < self.max_profiled_steps):
                self._start_profiler(rec["step"] + 1)
        except Exception as exc:
            rec["errors"] = (rec["errors"] + "; " if rec["errors"] else "") + f"profiler: {type(exc).__name__}: {exc}"
            self._prof = None

    def _start_profiler(self, first_step: int) -> None:
        from .quiet import quiet_profiler
        from .torch_profiler import resolve_activities

        torch = self._torch
        acts, _ = resolve_activities([a for a in self.activities if a != "cuda" or torch.cuda.is_available()])
        # a schedule that always records: step() then writes ProfilerStep#N ranges (torch records steps only
        # when a schedule is given: torch/profiler/profiler.py, profile.__init__)
        prof = torch.profiler.profile(activities=acts, schedule=_always_record, with_stack=self.with_stack)
        with quiet_profiler():
            prof.start()
        if torch.cuda.is_available():
            torch.cuda.profiler.start()  # an nsys --capture-range=cudaProfilerApi range
        self._prof = prof
        self._prof_window = {"first_step": first_step, "steps": [], "flagged": [], "step0": prof.step_num}

    def _stop_profiler(self, *, keep: bool) -> None:
        from .quiet import quiet_profiler

        prof, w = self._prof, self._prof_window
        self._prof = None
        torch = self._torch
        if torch.cuda.is_available():
            torch.cuda.profiler.stop()
        with quiet_profiler():
            prof.stop()
        self._rearm = not keep
        try:
            if keep:
                self._export(w, prof)
        finally:
            # free the stopped profiler now: left to the cyclic GC (its action_map holds bound methods), it was
            # freed inside the next profile's __init__ and crashed the process (torch 2.13, CPU)
            prof.profiler = None
            prof.action_map = None

    def _export(self, w: dict[str, Any], prof: Any) -> None:
        path = self.log.trace_path(w["first_step"])
        tmp = path.with_name(path.name[: -len(".gz")])
        prof.export_chrome_trace(str(tmp))
        cap = {"path": path.name, "first_step": w["steps"][0], "last_step": w["steps"][-1],
               "flagged_steps": list(w["flagged"]),
               "profiler_steps": {int(s): int(w["step0"] + i) for i, s in enumerate(w["steps"])}}
        # the window in the trace itself: the analysis keeps a flagged stall that opens it out of warm-up
        self.log.finish_trace(tmp, path, window={
            "first_step": cap["first_step"], "last_step": cap["last_step"], "flagged_steps": cap["flagged_steps"],
            "profiler_steps": {str(s): n for s, n in cap["profiler_steps"].items()},
            "flagged_profiler_steps": [cap["profiler_steps"][int(s)] for s in cap["flagged_steps"]]})
        self.captures.append(cap)
        for s in w["flagged"]:
            self.records[s]["capture"] = path.name

    # --------------------------------------------------------------------------------------------------- hooks
    def step(self) -> None:
        """Mark the end of a step (a loop without optimizer or DataLoader; also overrides their boundaries)."""
        t, c = _NS(), _CPU()
        self._mode = "manual"
        if self._opt_t0:  # an optimizer step inside a manual step (pre-hook seen, its end is now at the latest)
            self._opt += t - self._opt_t0
            self._opt_t0 = 0
        self._boundary(t, c)

    def _on_step_end(self, ev: Any) -> None:
        """A boundary found by :class:`~nbprof.capture.step_hooks.StepHooks` (optimizer step, or the next batch)."""
        t, c = _NS(), _CPU()
        if self._mode == "manual":
            return
        self._mode = ev.source
        if ev.start_ns > self._t0:  # the first batch request starts the first step: setup before it is none
            self._t0 = ev.start_ns
        if ev.source == "optimizer" and self._opt_t0:
            self._opt += ev.end_ns - self._opt_t0
            self._opt_t0 = 0
        self._boundary(t, c)

    def _opt_pre(self, opt: Any, args: Any, kwargs: Any) -> None:
        self._opt_t0 = _NS()

    def _fwd_pre(self, module: Any, args: Any) -> None:
        if self._fwd_depth == 0:
            self._fwd_t0 = _NS()
        self._fwd_depth += 1

    def _fwd_post(self, module: Any, args: Any, out: Any) -> None:
        self._fwd_depth -= 1
        if not self._fwd_depth:
            self._fwd += _NS() - self._fwd_t0

    def _on_backward(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        def backward(*args: Any, **kwargs: Any) -> Any:
            t0 = _NS()
            try:
                return orig(*args, **kwargs)
            finally:
                watch._bwd += _NS() - t0

        backward.__wrapped__ = orig  # type: ignore[attr-defined]
        return backward

    def _counting(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        """``orig`` counted into the step's ``syncs`` (a host read of a tensor's value, or a device sync)."""
        watch = self

        def counted(*args: Any, **kwargs: Any) -> Any:
            watch._syncs += 1
            return orig(*args, **kwargs)

        counted.__wrapped__ = orig  # type: ignore[attr-defined]
        counted.__name__, counted.__doc__ = getattr(orig, "__name__", "counted"), getattr(orig, "__doc__", None)
        return counted

    def _patch(self, obj: Any, name: str, new: Callable[..., Any]) -> None:
        orig = getattr(obj, name)
        setattr(obj, name, new(orig))
        self._patches.append((obj, name, orig))

    def _gc_cb(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_t0 = _NS()
        elif self._gc_t0:
            self._gc += _NS() - self._gc_t0
            self._gc_t0 = 0

    def _guard(self, where: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with every exception caught and written into the current step's ``errors``."""
        watch = self

        def guarded(*a: Any) -> Any:
            try:
                return fn(*a)
            except Exception as exc:
                watch._error(where, exc)
                return None

        return guarded

    # ------------------------------------------------------------------------------------------ enter / exit
    def install(self) -> None:
        """Install the hooks (torch is imported now; without torch only :meth:`step` and GC are watched)."""
        self._sched = SchedSampler()  # the run-queue wait of this thread (Linux), read from any thread
        self._origin = _NS()
        self._reset_step(self._origin, _CPU())
        gc.callbacks.append(self._gc_cb)
        try:
            import torch
        except ImportError:
            self._torch = None
            self.capture_steps = 0
            return
        self._torch = torch
        from torch.nn.modules import module as tm
        from torch.optim import optimizer as to

        from .step_hooks import StepHooks

        self._handles += [
            to.register_optimizer_step_pre_hook(self._guard("optimizer", self._opt_pre)),
            tm.register_module_forward_pre_hook(self._guard("forward", self._fwd_pre)),
            tm.register_module_forward_hook(self._guard("forward", self._fwd_post)),
        ]
        self._hooks = StepHooks(self._guard("step", self._on_step_end))
        self._hooks.__enter__()
        self._patch(torch.autograd, "backward", self._on_backward)  # Tensor.backward calls it (torch/_tensor.py)
        self._patch(torch.Tensor, "item", self._counting)
        self._patch(torch.Tensor, "tolist", self._counting)
        self._cuda = bool(torch.cuda.is_available())
        if self._cuda:
            self._patch(torch.cuda, "synchronize", self._counting)
            self._patch(torch.cuda.Stream, "synchronize", self._counting)
            self._patch(torch.cuda.Event, "synchronize", self._counting)
            self._ev_last = torch.cuda.Event(enable_timing=True)
            self._ev_last.record()
        self._reset_step(_NS(), _CPU())

    def uninstall(self) -> None:
        """Remove every hook and patch (idempotent)."""
        while self._handles:
            self._handles.pop().remove()
        while self._patches:  # before the step hooks: patched after them, restored first
            obj, name, orig = self._patches.pop()
            setattr(obj, name, orig)
        if self._hooks is not None:
            self._hooks.__exit__(None, None, None)
            self._hooks = None
        if self._gc_cb in gc.callbacks:
            gc.callbacks.remove(self._gc_cb)
        if self._sched is not None:
            self._sched.close()
            self._sched = None

    def __enter__(self) -> Watch:
        self.install()
        _ACTIVE.append(self)
        self.log.start({"k": self.k, "window": self.window, "warmup": self.warmup,
                        "min_excess_ns": self.min_excess_ns,
                        "startup_allowance_ns": self.startup_allowance_ns, "capture_steps": self.capture_steps,
                        "predicate": getattr(self.predicate, "__name__", repr(self.predicate)) if self.predicate else None})
        return self

    def __exit__(self, *exc: Any) -> None:
        try:  # what follows the last boundary (loop teardown) is no step
            if self._cuda and self._ev_pending:
                self._device_boundary(self._ev_pending[-1][0], wait=True)
            if self._prof is not None:
                w = self._prof_window
                self._stop_profiler(keep=bool(w["flagged"]))
        finally:
            self.uninstall()
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            self.log.write(self.records, self.captures)
            for fn in self.on_close:
                try:
                    fn(self)
                except Exception as exc:
                    self.close_errors.append(f"{type(exc).__name__}: {exc}")

    def add_listener(self, fn: Callable[[dict[str, Any]], None]) -> None:
        """Call ``fn(record)`` after every step, as the ``listener`` argument (errors go to the step's record)."""
        self._listeners.append(fn)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)

    @property
    def flagged(self) -> list[int]:
        """Step numbers flagged so far."""
        return [r["step"] for r in self.records if r["flagged"]]
