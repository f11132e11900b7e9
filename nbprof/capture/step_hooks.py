"""Step boundaries of an *unmodified* training loop, from process-global PyTorch hooks.

A script that never calls ``nbprof.step()`` or ``prof.step()`` still has steps: each ends when its
optimizer steps. :class:`StepHooks` finds them without touching the script's code:

- **optimizer** (preferred): ``torch.optim.optimizer.register_optimizer_step_post_hook`` -- a post-hook
  shared by every ``torch.optim.Optimizer`` (torch >= 2.0) -- ends a step right after ``optimizer.step()``
  returns. With several optimizers stepping once per iteration (a GAN's generator and discriminator),
  the step ends after the *last* of them: the first cycle of distinct optimizers is learned (until the first
  optimizer steps again), and from then on only the last optimizer of that cycle ends a step (an optimizer
  that steps twice with no step of that one between takes over: a new optimizer in a later phase).
  Gradient accumulation is one step per ``optimizer.step()``. An AMP ``GradScaler`` that skips
  ``optimizer.step()`` (inf/NaN gradients) merges that iteration into the next step.
- **DataLoader** (fallback while no optimizer has stepped, e.g. evaluation or inference loops):
  ``torch.utils.data.dataloader._BaseDataLoaderIter.__next__`` (every single- and multi-process
  DataLoader iterator; neither subclass overrides it, torch 2.13) is wrapped; a step ends when the next
  batch is *requested*, so each step starts with its own batch fetch. The request that meets an
  exhausted loader (``StopIteration``) ends the epoch's last step and opens none: the time until the
  next epoch's first batch is in no step. Once an optimizer has stepped, DataLoader calls no longer end steps.
- **Gradient accumulation**: ``torch.autograd.backward`` (what ``Tensor.backward()`` calls) is wrapped too. A
  batch requested after a backward, before any optimizer has stepped, is the next micro-batch of a step that
  an ``optimizer.step()`` will end, not a step end: a loop that accumulates gradients over k batches has one
  step per ``optimizer.step()`` from its first step on. After :data:`MAX_MICROBATCHES` such batches with no
  optimizer step (a hand-written update, no ``torch.optim``), that request ends the step and every batch
  ends one from then on. Another patch of ``torch.autograd.backward`` made after the hooks were entered must be
  removed before they exit (last in, first out), else the wrapper stays, passing straight through.

In both modes the time spent inside ``__next__`` (the DataLoader wait: fetch, collate, pin-memory,
waiting for workers) is summed per step as ``data_wait_ns``.

Usage::

    from nbprof.capture.step_hooks import StepHooks, StepEnd

    def on_step_end(ev: StepEnd) -> None:
        print(ev.index, ev.duration_ns, ev.data_wait_ns, ev.source)

    with StepHooks(on_step_end) as hooks:   # installs; always removes on exit, also when the body raises
        runpy.run_path("train.py", run_name="__main__")
    hooks.steps          # steps ended so far
    hooks.errors         # callback exceptions (swallowed: a failing callback never breaks the loop)

Clock: ``time.perf_counter_ns()`` (``CLOCK_MONOTONIC`` on Linux), ns. Step 0 starts when the hooks are
installed, or at the first ``DataLoader.__next__`` call if that comes first. Callbacks run on the thread
that ended the step (the training thread), synchronously, inside the optimizer's ``step()`` call or
before the DataLoader fetch; keep them short. Several :class:`StepHooks` may be active at once (a
profiler capture and a live monitor); each has its own count. DataLoader waits are counted from every
thread. Entering an instance twice raises ``RuntimeError``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["StepEnd", "StepHooks", "StepCallback", "MAX_MICROBATCHES"]

#: Batches after a backward, with no optimizer step, that one step may hold before DataLoader batches end steps
MAX_MICROBATCHES = 64

StepSource = Literal["optimizer", "dataloader"]


@dataclass(frozen=True)
class StepEnd:
    """One finished step, as handed to the ``on_step_end`` callback.

    Attributes
    ----------
    index : int
        0-based step number (the n-th step ended since the hooks were installed).
    start_ns, end_ns : int
        ``time.perf_counter_ns()`` at the step's start and end, ns.
    data_wait_ns : int
        Time spent inside ``DataLoader`` iterators' ``__next__`` during this step, ns (0 without a DataLoader).
    source : {"optimizer", "dataloader"}
        What ended the step: an optimizer's ``step()`` post-hook, or the next DataLoader batch request.
    data_wait_cpu_ns : int
        CPU time of the waiting thread inside those ``__next__`` calls (``time.thread_time_ns``), ns: near 0
        while it waits for worker processes, close to ``data_wait_ns`` when it loads the batch itself.
    """

    index: int
    start_ns: int
    end_ns: int
    data_wait_ns: int
    source: StepSource
    data_wait_cpu_ns: int = 0

    @property
    def duration_ns(self) -> int:
        """``end_ns - start_ns``, ns."""
        return self.end_ns - self.start_ns


StepCallback = Callable[[StepEnd], None]

# ------------------------------------------------------------------ the one DataLoader patch, shared

_lock = threading.RLock()
_active: list[StepHooks] = []
_orig_next: Any = None
_orig_backward: Any = None
_tls = threading.local()


def _patched_next(self: Any) -> Any:
    if getattr(_tls, "depth", 0):  # a DataLoader iterated inside another's fetch: counted once, outermost
        return _orig_next(self)
    hooks = list(_active)
    t0 = time.perf_counter_ns()
    c0 = time.thread_time_ns()
    for h in hooks:
        try:
            h._batch_requested(t0)
        except Exception as exc:  # never break the user's loop
            h._record_error(exc)
    _tls.depth = 1
    stopped = False
    try:
        return _orig_next(self)
    except StopIteration:
        stopped = True
        raise
    finally:
        _tls.depth = 0
        t1 = time.perf_counter_ns()
        cpu = time.thread_time_ns() - c0
        for h in hooks:
            try:
                h._batch_done(t1 - t0, stopped, t1, cpu)
            except Exception as exc:
                h._record_error(exc)


def _patched_backward(*args: Any, **kwargs: Any) -> Any:
    for h in list(_active):
        h._backward_ran = True
    return _orig_backward(*args, **kwargs)


def _install_dataloader_patch() -> None:
    global _orig_next, _orig_backward
    import torch.autograd
    from torch.utils.data import dataloader

    if _orig_next is None:
        _orig_next = dataloader._BaseDataLoaderIter.__next__
        dataloader._BaseDataLoaderIter.__next__ = _patched_next  # type: ignore[method-assign]
    if torch.autograd.backward is not _patched_backward:
        _orig_backward = torch.autograd.backward
        torch.autograd.backward = _patched_backward


def _remove_dataloader_patch() -> None:
    """Remove both patches. A patch of ``torch.autograd.backward`` made after ours (the watch's) must be removed
    first (last in, first out); while it is still there ours stays, passing straight through."""
    global _orig_next
    if _orig_next is not None:
        from torch.utils.data import dataloader

        dataloader._BaseDataLoaderIter.__next__ = _orig_next  # type: ignore[method-assign]
        _orig_next = None
    import torch.autograd

    if _orig_backward is not None and torch.autograd.backward is _patched_backward:
        torch.autograd.backward = _orig_backward


class StepHooks:
    """Process-global step hooks (optimizer post-hook, DataLoader fallback) as a context manager.

    Parameters
    ----------
    on_step_end : callable ``(StepEnd) -> None``, optional
        Called once per finished step, synchronously on the training thread. An exception it raises is
        caught and recorded in :attr:`errors` (the user's loop never sees it).
    dataloader : bool
        Also wrap ``DataLoader`` iterators (data wait, and the fallback boundaries). Default True.

    Attributes
    ----------
    steps : int
        Steps ended so far.
    source : {"optimizer", "dataloader"} or None
        What ends steps now (None before the first boundary).
    errors : list of str
        ``"<Type>: <message>"`` of the first 10 callback exceptions; :attr:`error_count` counts all.
    installed_ns : int
        ``time.perf_counter_ns()`` when the hooks were installed.
    data_wait_total_ns, data_wait_cpu_total_ns : int
        Running totals since installation of the DataLoader wait and the waiting thread's CPU time in it
        (ns), updated after every ``__next__``: the wait between any two moments is the difference (the watch's
        :meth:`~nbprof.capture.watch.Watch.step` boundaries use it).

    Raises
    ------
    MissingDependencyError
        On entering, when torch is not installed.
    RuntimeError
        On entering an instance that is already active.
    """

    def __init__(self, on_step_end: StepCallback | None = None, *, dataloader: bool = True) -> None:
        self.on_step_end = on_step_end
        self.dataloader = dataloader
        self.steps = 0
        self.source: StepSource | None = None
        self.errors: list[str] = []
        self.error_count = 0
        self.installed_ns = 0
        self._handle: Any = None
        self._start_ns = 0
        self._wait_ns = 0
        self._wait_cpu_ns = 0
        self.data_wait_total_ns = 0
        self.data_wait_cpu_total_ns = 0
        self._open = False  # DataLoader mode: a step has started and not ended
        self._anchor = 0  # id() of the optimizer whose step() ends a step
        self._learning = False  # still in the first cycle of distinct optimizers
        self._seen: set[int] = set()  # id() of optimizers stepped since the anchor's last step
        self._backward_ran = False  # a backward ran in the open DataLoader-mode step
        self._micro = 0  # batches requested after a backward in the open step (gradient accumulation)
        self._no_optimizer = False  # MAX_MICROBATCHES passed without an optimizer step: batches end steps

    # ------------------------------------------------------------ protocol
    def __enter__(self) -> StepHooks:
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook
        except ImportError as exc:
            from .._deps import missing

            raise missing("torch", "torch", "step hooks on PyTorch training loops", exc) from exc

        with _lock:
            if self._handle is not None:
                msg = "these StepHooks are already installed"
                raise RuntimeError(msg)
            self.installed_ns = self._start_ns = time.perf_counter_ns()
            self._handle = register_optimizer_step_post_hook(self._optimizer_stepped)
            if self.dataloader:
                _install_dataloader_patch()
                _active.append(self)
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        with _lock:
            if self._handle is not None:
                self._handle.remove()
                self._handle = None
            if self in _active:
                _active.remove(self)
            if not _active:
                _remove_dataloader_patch()
        return False

    # ------------------------------------------------------------ boundaries
    def _end_step(self, t_ns: int, source: StepSource) -> None:
        ev = StepEnd(self.steps, self._start_ns, t_ns, self._wait_ns, source, self._wait_cpu_ns)
        self.steps += 1
        self.source = source
        self._start_ns, self._wait_ns, self._wait_cpu_ns = t_ns, 0, 0
        if self.on_step_end is None:
            return
        try:
            self.on_step_end(ev)
        except Exception as exc:  # never break the user's loop
            self._record_error(exc)

    def _record_error(self, exc: BaseException) -> None:
        self.error_count += 1
        if len(self.errors) < 10:
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _optimizer_stepped(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            self._optimizer_boundary(id(optimizer), time.perf_counter_ns())
        except Exception as exc:  # a bug here must not break optimizer.step()
            self._record_error(exc)

    def _optimizer_boundary(self, key: int, t: int) -> None:
        if self.source != "optimizer":  # the first optimizer step: from now on optimizers end steps
            self._anchor, self._learning, self._seen = key, True, {key}
            self._open = False
            self._end_step(t, "optimizer")
            return
        if self._learning:  # the first cycle: the step ends after the last distinct optimizer of it
            if key not in self._seen:
                self._seen.add(key)
                self._anchor = key
                return
            self._learning, self._seen = False, set()
            if key != self._anchor:
                self._seen.add(key)
                return
        if key == self._anchor:
            self._seen.clear()
            self._end_step(t, "optimizer")
        elif key in self._seen:  # stepped twice without the anchor between: a new optimizer took over
            self._anchor = key
            self._seen.clear()
            self._end_step(t, "optimizer")
        else:
            self._seen.add(key)

    def _batch_requested(self, t_ns: int) -> None:
        if self.source == "optimizer":
            return
        if self._open and self._backward_ran and not self._no_optimizer:
            self._micro += 1  # the next micro-batch of a step an optimizer.step() will end
            if self._micro < MAX_MICROBATCHES:
                return
            self._no_optimizer = True  # gradients, but no torch.optim step: each batch is a step
        if self._open:
            self._end_step(t_ns, "dataloader")
        else:
            self._start_ns, self._wait_ns, self._wait_cpu_ns = t_ns, 0, 0
        self._backward_ran, self._micro = False, 0
        self._open = True

    def _batch_done(self, wait_ns: int, stopped: bool, t_ns: int, cpu_ns: int = 0) -> None:
        self.data_wait_total_ns += wait_ns
        self.data_wait_cpu_total_ns += cpu_ns
        if stopped and self.source != "optimizer":
            # the loader is exhausted: the request ended the epoch's last step and opened none
            self._open = False
            return
        self._wait_ns += wait_ns
        self._wait_cpu_ns += cpu_ns
