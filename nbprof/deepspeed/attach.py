"""Profile chosen DeepSpeed steps on every rank with torch.profiler, driven by the engine's global step.

``attach(engine, start_step, end_step, out_dir)`` wraps ``engine.step`` (an instance attribute, the
class is untouched) so that torch.profiler records the engine's global steps ``[start_step, end_step)``
(``engine.global_steps`` before each step runs). Each rank writes
``{out_dir}/rank{R}.steps{S}-{E}.pt.trace.json.gz`` (``ProfilerStep#N`` numbered with the engine's global
step N), never overwriting an existing file. The traces carry ``distributedInfo`` (rank, world size,
backend), so ``nbprof.load`` puts the right rank on them, and the top-level key ``"deepspeed"`` with what the
engine says of itself (``{"zero_stage": engine.zero_optimization_stage()}``; DeepSpeed 0.19 logs the stage
only at INFO, so the log may lack it): ``nbprof.deepspeed.zero_stage_of_traces`` reads it back.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

__all__ = ["DeepSpeedProfilerWindow", "attach", "engine_facts", "set_deepspeed_log_level", "trace_path", "TRACE_KEY"]

#: the trace's top-level key holding :func:`engine_facts`
TRACE_KEY = "deepspeed"


def engine_facts(engine: Any) -> dict[str, Any]:
    """What a DeepSpeed engine says of its configuration, for the trace: ``{"zero_stage": int}``
    (``DeepSpeedEngine.zero_optimization_stage()``); ``{}`` for an engine without that method."""
    get = getattr(engine, "zero_optimization_stage", None)
    if not callable(get):
        return {}
    st = get()
    return {"zero_stage": int(st)} if isinstance(st, int) and not isinstance(st, bool) else {}


def set_deepspeed_log_level(level: str | int = "info") -> None:
    """Set DeepSpeed's logger (and its handlers) to ``level`` in this process.

    Works with every DeepSpeed version (newer ones also take ``"log_level"`` in the config). Needed for
    the comms logger's per-op ``comm op: ...`` lines, which DeepSpeed logs at INFO on rank 0.
    """
    from deepspeed.utils import logger

    lvl = logging.getLevelName(level.upper()) if isinstance(level, str) else int(level)
    logger.setLevel(lvl)
    for h in logger.handlers:
        h.setLevel(lvl)


def trace_path(out_dir: str | os.PathLike[str], rank: int, start: int, end: int) -> str:
    """``{out_dir}/rank{rank}.steps{start}-{end}.pt.trace.json.gz``, with ``-1``, ``-2``... appended
    before the suffix when that file exists (user files are never overwritten)."""
    base = os.path.join(os.fspath(out_dir), f"rank{rank}.steps{start}-{end}")
    p = base + ".pt.trace.json.gz"
    k = 1
    while os.path.exists(p):
        p = f"{base}-{k}.pt.trace.json.gz"
        k += 1
    return p


def _always_record(_step: int):
    from torch.profiler import ProfilerAction

    return ProfilerAction.RECORD


class DeepSpeedProfilerWindow:
    """The torch.profiler window attached to one engine (see :func:`attach`).

    Attributes
    ----------
    traces : list of str
        Trace files written so far by this rank.
    rank : int
    active : bool
        True while recording.
    """

    def __init__(
        self,
        engine: Any,
        start_step: int,
        end_step: int,
        out_dir: str | os.PathLike[str],
        *,
        record_shapes: bool = True,
        profile_memory: bool = False,
        with_stack: bool = False,
        flush_every_n_steps: int | None = None,
        comms_verbose: bool = False,
        activities: list | None = None,
    ) -> None:
        if start_step < 0 or end_step <= start_step:
            msg = f"profiling window needs 0 <= start_step < end_step, got [{start_step}, {end_step})"
            raise ValueError(msg)
        from ..capture.torch_profiler import _import_torch

        torch = _import_torch()  # MissingDependencyError naming nbprof[torch] when torch is absent

        self.engine = engine
        self.start_step = int(start_step)
        self.end_step = int(end_step)
        self.out_dir = os.fspath(out_dir)
        self.flush = int(flush_every_n_steps) if flush_every_n_steps else None
        self.traces: list[str] = []
        self._prof: Any = None
        self._chunk_start = -1
        self._kw: dict[str, Any] = dict(record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack)
        if activities is None:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._activities = activities
        if comms_verbose:
            set_deepspeed_log_level("info")
        try:
            self.rank = int(torch.distributed.get_rank()) if torch.distributed.is_initialized() else 0
        except (RuntimeError, ValueError):
            self.rank = 0
        os.makedirs(self.out_dir, exist_ok=True)
        self._orig_step = engine.step
        self._had_instance_step = "step" in getattr(engine, "__dict__", {})
        engine.step = self._step  # instance attribute: the class is untouched
        self._maybe_start(self._global_step())

    # ------------------------------------------------------------------ engine hook
    def _global_step(self) -> int:
        return int(getattr(self.engine, "global_steps", 0))

    def _step(self, *args: Any, **kwargs: Any) -> Any:
        before = self._global_step()
        out = self._orig_step(*args, **kwargs)
        after = self._global_step()
        if self._prof is not None and after != before:
            if after >= self.end_step:
                self._stop()
            elif self.flush and after - self._chunk_start >= self.flush:
                self._stop()
                self._maybe_start(after)
            else:
                self._prof.step()
        elif self._prof is None and after != before:
            self._maybe_start(after)
        return out

    def _maybe_start(self, step: int) -> None:
        if self._prof is not None or not (self.start_step <= step < self.end_step):
            return
        import torch

        # a schedule (always RECORD) makes torch emit ProfilerStep#N ranges; without one it does not
        prof = torch.profiler.profile(activities=self._activities, schedule=_always_record, **self._kw)
        prof.step_num = step  # ProfilerStep#N carries the engine's global step
        prof.start()
        facts = engine_facts(self.engine)
        if facts:  # a top-level key of the trace (Kineto writes it as given)
            prof.add_metadata_json(TRACE_KEY, json.dumps(facts))
        self._prof = prof
        self._chunk_start = step

    def _stop(self) -> None:
        prof, self._prof = self._prof, None
        if prof is None:
            return
        end = self._global_step()
        prof.stop()
        path = trace_path(self.out_dir, self.rank, self._chunk_start, min(end, self.end_step))
        prof.export_chrome_trace(path)
        self.traces.append(path)

    # ------------------------------------------------------------------ public
    @property
    def active(self) -> bool:
        """True while torch.profiler is recording."""
        return self._prof is not None

    def close(self) -> list[str]:
        """Stop (writing what was recorded, if recording) and restore ``engine.step``; return ``traces``."""
        self._stop()
        if self.engine.__dict__.get("step") == self._step:  # bound methods compare equal, never identical
            if self._had_instance_step:
                self.engine.step = self._orig_step
            else:
                del self.engine.step
        return self.traces

    def __enter__(self) -> DeepSpeedProfilerWindow:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def attach(
    engine: Any,
    start_step: int,
    end_step: int,
    out_dir: str | os.PathLike[str],
    *,
    record_shapes: bool = True,
    profile_memory: bool = False,
    with_stack: bool = False,
    flush_every_n_steps: int | None = None,
    comms_verbose: bool = False,
    activities: list | None = None,
) -> DeepSpeedProfilerWindow:
    """Profile the engine's global steps ``[start_step, end_step)`` with torch.profiler on this rank.

    Call it in every rank after ``deepspeed.initialize``. Recording starts when ``engine.global_steps``
    reaches ``start_step`` (immediately if it already has) and stops after the step that takes it to
    ``end_step``; the trace is then written to ``{out_dir}/rank{R}.steps{S}-{E}.pt.trace.json.gz``.

    Parameters
    ----------
    engine : deepspeed.DeepSpeedEngine
        Anything with ``step()`` and ``global_steps``.
    start_step, end_step : int
        The window over engine global steps, end exclusive.
    out_dir : str or PathLike
        Created if missing; existing files are never overwritten.
    record_shapes, profile_memory, with_stack : bool
        Passed to ``torch.profiler.profile``.
    flush_every_n_steps : int, optional
        Write one trace per n steps instead of one for the whole window (the seed's
        ``profiler.flush_every_n_steps``).
    comms_verbose : bool
        Set DeepSpeed's logger to INFO so the comms logger's per-op lines print.
    activities : list, optional
        torch.profiler activities (default CPU, plus CUDA when available).

    Returns
    -------
    DeepSpeedProfilerWindow
        ``.traces`` lists the files written; ``.close()`` ends early and restores ``engine.step``.

    Raises
    ------
    ValueError
        When the window is empty or negative.
    MissingDependencyError
        When torch is not installed (the message names ``nbprof[torch]``).
    """
    return DeepSpeedProfilerWindow(
        engine, start_step, end_step, out_dir, record_shapes=record_shapes, profile_memory=profile_memory,
        with_stack=with_stack, flush_every_n_steps=flush_every_n_steps, comms_verbose=comms_verbose,
        activities=activities,
    )
