"""``nbprof.profile`` / ``nbprof.step``: capture -> load -> result (-> TensorBoard), composed in one place.

The capture layer (``nbprof.capture.torch_profiler.Session``) only runs torch.profiler and writes
files; this façade loads each exported file with :func:`nbprof.load`, fills the
:class:`~nbprof.results.profile.ProfileResult` the ``with`` block yields, and, with the
``tensorboard`` option, writes nbprof's scalars and text beside the traces
(``nbprof.tensorboard.write.write_scalars``). ``%%torchprof`` uses the same façade.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from .capture._files import unlink_quietly
from .capture.options import ProfileOptions, option_specs
from .capture.torch_profiler import Session, active_session, step
from .results.profile import ProfileResult
from .sources import load

__all__ = ["profile", "step", "active_session"]


class profile:  # named like torch.profiler.profile, which it wraps
    """Profile a block of code with ``torch.profiler`` and get an nbprof result.

    ``with nbprof.profile(record_shapes=True, trace="run.json.gz") as p: ...`` runs the block
    under ``torch.profiler.profile`` with a wait/warmup/active/repeat schedule, exports each
    profiling cycle as a Kineto Chrome trace, loads it with :func:`nbprof.load` and fills
    ``p``, a :class:`nbprof.results.profile.ProfileResult` (operator table, summary, viewers).
    Call ``p.step()`` or :func:`nbprof.step` at the end of each training step.

    Parameters
    ----------
    activities : str or sequence of str, default ("cpu",)
        ``"cpu"``, ``"cuda"``, ``"gpu"``. A requested device that is not available prints a
        one-line note and the profile is CPU-only.
    options : ProfileOptions, optional
        All options at once (the magic uses this); keyword arguments override its fields.
    **kwargs
        Any :class:`~nbprof.capture.options.ProfileOptions` field: {fields}.

    Raises
    ------
    TypeError
        Unknown keyword.
    ValueError
        Bad options (before anything runs).
    CaptureError
        When torch.profiler cannot start.
    MissingDependencyError
        On entering the block when torch is not installed (the message names ``nbprof[torch]``).

    Notes
    -----
    If the block raises, the profiler is stopped, what was recorded is exported and loaded into
    the result (``p.exception`` holds the exception), and the exception propagates unchanged.
    Output files are never overwritten unless ``force=True``; a taken name gets a
    ``.<worker>.<time_ns>`` suffix and ``p.paths`` lists what was written.
    """

    def __init__(self, activities: str | Iterable[str] | None = None, *, options: ProfileOptions | None = None,
                 **kwargs: Any) -> None:
        base = options or ProfileOptions()
        if activities is not None:
            kwargs["activities"] = (activities,) if isinstance(activities, str) else tuple(activities)
        unknown = sorted(set(kwargs) - set(ProfileOptions.__dataclass_fields__))
        if unknown:
            msg = f"unknown option(s) {', '.join(unknown)}; known: {', '.join(ProfileOptions.__dataclass_fields__)}"
            raise TypeError(msg)
        self.options = replace(base, **kwargs).validated()
        self.session = Session(self.options)
        self.result = ProfileResult(self.options)
        # the result shows the capture's notes and activities as they come
        self.result.notes = self.session.notes
        self.result.activities = self.session.activities

    def __enter__(self) -> ProfileResult:
        self.session.__enter__()
        self.result._session = self.session
        self.result.running = True
        return self.result

    def step(self) -> None:
        """End the current step (``torch.profiler.profile.step``)."""
        self.session.step()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        r, s = self.result, self.session
        try:
            try:
                s.__exit__(exc_type, exc, tb)
            finally:
                r.memory_snapshot = s.memory_snapshot
                r.wall_ns = s.wall_ns
                r.steps_run = s.steps_run
                r.running = False
                r.exception = exc
            self._finish()
        except Exception as err:
            if exc is None:
                raise
            # keep the user's exception; say what went wrong with the profile
            r.notes.append(f"the profile could not be completed: {type(err).__name__}: {err}")
        return False

    def _finish(self) -> None:
        r, s = self.result, self.session
        r.trace_files = list(s.cycle_files)
        r.paths = list(s.written)
        r.traces = [load(p) for p in s.cycle_files]
        for path, trace in zip(s.cycle_files, r.traces):
            if path in s.temp_files:  # the temporary file lives as long as the Trace read from it
                weakref.finalize(trace, unlink_quietly, path)
        if r.traces:  # automatic steps: the profiler's measured overhead (every cycle file carries the same step times)
            from .analysis.overhead import profiler_overhead
            from .results.overhead import overhead_sentence

            ov = profiler_overhead(r.traces[0])
            if ov is not None:
                r.notes.append(overhead_sentence(ov))
        if self.options.tensorboard and r.traces:
            # nbprof's scalars/text beside the traces: <logdir> = <parent>/<run>
            try:
                from .tensorboard.write import write_scalars

                logdir = Path(self.options.tensorboard).resolve()
                for trace in r.traces:
                    write_scalars(trace, str(logdir.parent), logdir.name)
            except Exception as err:  # the traces are written; scalars are extra
                r.notes.append(f"TensorBoard scalars not written: {type(err).__name__}: {err}")


profile.__doc__ = (profile.__doc__ or "").replace("{fields}", ", ".join(f"``{s.name}``" for s in option_specs()))
