"""Run ``torch.profiler`` around user code and export Kineto traces that nbprof loads.

This is the capture layer behind ``%%torchprof`` and ``nbprof.profile()``: a :class:`Session`
turns :class:`~nbprof.capture.options.ProfileOptions` into ``torch.profiler.profile(...)``
arguments and exports one Chrome trace per profiling cycle (never overwriting an existing file
unless ``force=True``). It produces files only: loading them and building the result is
``nbprof.profiling``'s job. torch is imported only when a profile starts.

Facts about torch 2.13 this module relies on (``../shared/notes/feasibility.md`` §1):

- ``ProfilerActivity`` has ``CPU, XPU, MTIA, CUDA, HPU, PrivateUse1`` and **no** ``GPU``:
  the activity name ``"gpu"`` is mapped to the available accelerator
  (``torch.accelerator.current_accelerator()``).
- ``with_stack=True`` alone writes no ``"Call stack"`` args; they appear with
  ``experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True)``, which this
  module passes whenever ``with_stack`` is asked for.
- ``with_flops=True`` computes FLOPs (``KinetoEvent.flops()``) but the C++ Chrome-trace exporter
  does not write them; this module adds them as the ``flops`` arg of the matching ``cpu_op``
  (matched on ``External id``), so the exported file carries them.
- ``with_modules=True`` records ``Module Hierarchy`` only for TorchScript; for eager models the
  module structure comes from the Python tracer's ``nn.Module: <Class>_<n>`` python_function
  events, so ``with_modules`` also turns the Python tracer on.
- ``tensorboard_trace_handler`` names files ``<worker>.<time_ns>.pt.trace.json[.gz]`` with
  ``worker = <hostname>_<pid>`` (torch/profiler/profiler.py); torch-tb-profiler reads the
  ``<worker>.<span>`` part of that name.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from ..atomic import atomic_path
from ._files import copy_trace, tmp_dir, unique_path, write_trace_bytes
from .options import ACTIVITY_NAMES, ProfileOptions
from .quiet import quiet_profiler

__all__ = [
    "ACTIVITY_NAMES",
    "ProfileOptions",
    "Session",
    "step",
    "resolve_activities",
    "unique_path",
    "active_session",
]

# --------------------------------------------------------------------------- helpers


def _import_torch() -> Any:
    """Import torch, or raise :class:`~nbprof.errors.MissingDependencyError` naming ``nbprof[torch]``.

    Raises
    ------
    MissingDependencyError
        When torch is not importable in this environment (``sys.executable``).
    """
    try:
        import torch
        import torch.profiler  # the profiler sub-package is what capture needs
    except ImportError as exc:
        from .._deps import missing

        raise missing("torch", "torch", f"profiling with PyTorch ({sys.executable}; or install torch for your "
                      "platform from https://pytorch.org)", exc) from exc
    return torch


def resolve_activities(names: Iterable[str]) -> tuple[list[Any], list[str]]:
    """Map activity names to ``torch.profiler.ProfilerActivity`` members.

    Parameters
    ----------
    names : iterable of str
        ``"cpu"``, ``"cuda"``, ``"gpu"``.

    Returns
    -------
    activities : list of ProfilerActivity
        Never empty: CPU when nothing requested is available.
    notes : list of str
        One line per requested activity that is not available here.

    Notes
    -----
    ``ProfilerActivity.GPU`` does not exist (torch 2.13: ``CPU, XPU, MTIA, CUDA, HPU,
    PrivateUse1``); ``"gpu"`` means the accelerator ``torch.accelerator.current_accelerator()``
    reports, mapped to the activity of that device type.

    Raises
    ------
    MissingDependencyError
        When torch is not installed (the message names ``nbprof[torch]``).
    """
    torch = _import_torch()
    from torch.profiler import ProfilerActivity, supported_activities

    supported = set(supported_activities())
    out: list[Any] = []
    notes: list[str] = []
    ver = torch.__version__
    for name in names:
        if name == "cpu":
            act = ProfilerActivity.CPU
        elif name == "cuda":
            if not (torch.cuda.is_available() and ProfilerActivity.CUDA in supported):
                notes.append(
                    f"CUDA was requested but is not available here (torch {ver}, "
                    "torch.cuda.is_available() is False): profiling the CPU only."
                )
                continue
            act = ProfilerActivity.CUDA
        else:  # "gpu"
            acc = None
            accel = getattr(torch, "accelerator", None)
            if accel is not None and accel.is_available():
                acc = accel.current_accelerator()
            elif torch.cuda.is_available():
                acc = torch.device("cuda")
            if acc is None:
                notes.append(
                    f"a GPU was requested but torch {ver} sees no accelerator here: profiling the CPU only."
                )
                continue
            by_type = {"cuda": "CUDA", "xpu": "XPU", "mtia": "MTIA", "hpu": "HPU"}
            act = getattr(ProfilerActivity, by_type.get(acc.type, "PrivateUse1"))
            if act not in supported:
                notes.append(
                    f"a GPU was requested ({acc.type}) but this torch build cannot profile it: profiling the CPU only."
                )
                continue
        if act not in out:
            out.append(act)
    if not out:
        out.append(ProfilerActivity.CPU)
    return out, notes


def _add_flops(data: bytes, flops_by_ext: dict[int, tuple[str, int]]) -> bytes:
    """Add ``"flops"`` to the args of ``cpu_op`` events whose ``External id`` is in ``flops_by_ext``."""
    import orjson

    doc = orjson.loads(data)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    for ev in events:
        if ev.get("cat") != "cpu_op":
            continue
        args = ev.get("args")
        if not isinstance(args, dict):
            continue
        ext = args.get("External id")
        hit = flops_by_ext.get(ext) if isinstance(ext, int) else None
        if hit is not None and hit[0] == ev.get("name"):
            args["flops"] = hit[1]
    return orjson.dumps(doc)


_TORCH_NOISE = (
    # warmup=0 is nbprof's documented default (record every run), not a mistake to warn about
    "Profiler won't be using warmup",
    # nbprof exports every cycle itself; torch's note is about key_averages() across cycles
    "Warning: Profiler clears events at the end of each cycle",
)


@contextmanager
def _quiet_torch_warnings() -> Iterator[None]:
    """Silence torch.profiler warnings that do not apply to nbprof and the profiler's own fd-2 lines
    (:mod:`nbprof.capture.quiet`: ``USDT ... profiler_start``, Kineto ``STAGE:``) — only around nbprof's own
    calls: the user's code between them is untouched."""
    with warnings.catch_warnings(), quiet_profiler(python_warnings=False):
        for msg in _TORCH_NOISE:
            warnings.filterwarnings("ignore", message=re.escape(msg))
        yield


# --------------------------------------------------------------------------- the session


_ACTIVE: list[Session] = []


def active_session() -> Session | None:
    """The innermost running ``nbprof.profile`` (or ``%%torchprof``) session, else None."""
    return _ACTIVE[-1] if _ACTIVE else None


def step() -> None:
    """Mark the end of a training step in the innermost running nbprof profile.

    Call it once per iteration of a loop inside ``%%torchprof`` or ``with nbprof.profile():``;
    it drives the wait/warmup/active schedule and the ``ProfilerStep#N`` annotations
    (``torch.profiler.profile.step``). Outside a profile it does nothing, so the call can
    stay in training code.
    """
    sess = active_session()
    if sess is not None:
        sess.step()


class Session:
    """One ``torch.profiler`` run around a block of code, exported as Kineto Chrome traces (files only).

    ``nbprof.profile`` (``nbprof.profiling``) drives a session, then loads its files into a
    ``ProfileResult``; the session itself never loads a trace.

    Parameters
    ----------
    options : ProfileOptions
        Validated options (``ProfileOptions.validated()``).

    Attributes
    ----------
    options : ProfileOptions
    cycle_files : list of Path
        One exported Chrome trace per profiling cycle (temporary files when no output was asked for).
    written : list of Path
        Files written for the user (``trace`` / ``tensorboard`` outputs).
    temp_files : list of Path
        The subset of ``cycle_files`` in nbprof's temporary folder.
    activities : list of str
        The ``ProfilerActivity`` names actually profiled.
    notes : list of str
        One-line notes (device not available, file renamed, export failed, nothing recorded...).
    memory_snapshot : Path or None
        The CUDA allocator snapshot written (``memory_snapshot`` option).
    wall_ns : int or None
        Wall time of the profiled block (perf_counter, ns), export excluded.
    steps_run : int
        Profiler steps taken (``step()`` calls + 1).
    running : bool
        True inside the ``with`` block.

    Raises
    ------
    CaptureError
        On entering, when torch.profiler cannot start.
    MissingDependencyError
        On entering, when torch is not installed (the message names ``nbprof[torch]``).
    """

    def __init__(self, options: ProfileOptions) -> None:
        self.options = options
        self.cycle_files: list[Path] = []
        self.written: list[Path] = []
        self.temp_files: list[Path] = []
        self.activities: list[str] = []
        self.notes: list[str] = []
        self.memory_snapshot: Path | None = None
        self.wall_ns: int | None = None
        self.steps_run = 0
        self.running = False
        self._prof: Any = None
        self._t0 = 0
        self._taken: set[Path] = set()
        self._worker = self.options.worker_name or f"{socket.gethostname()}_{os.getpid()}"
        self._steps = 0
        self._export_errors: list[str] = []
        self._snapshot_cm: Any = None
        self._snapshot_cap: Any = None
        self.auto: Any = None  # AutoSteps while the auto_steps option drives the profiler

    # ---------------------------------------------------------------- torch
    def _make_profiler(self) -> Any:
        torch = _import_torch()
        from torch.profiler import profile as torch_profile
        from torch.profiler import schedule as torch_schedule

        o = self.options
        acts, notes = resolve_activities(o.activities)
        for n in notes:
            self.notes.append(n)
            if not o.quiet:
                print(f"nbprof: {n}", file=sys.stderr)
        self.activities[:] = [str(a).split(".")[-1] for a in acts]
        if "CPU" not in self.activities:
            self.notes.append(
                "the CPU activity is not profiled: the trace has device activity and runtime calls but no "
                "operators, steps, shapes, stacks or FLOPs (add cpu to the activities for the operator table)"
            )
        kw: dict[str, Any] = {
            "activities": acts,
            "record_shapes": o.record_shapes,
            "profile_memory": o.profile_memory,
            "with_stack": o.with_stack or o.with_modules,
            "with_flops": o.with_flops,
            "with_modules": o.with_modules,
            "on_trace_ready": self._on_trace_ready,
        }
        if o.with_stack:
            kw["experimental_config"] = torch._C._profiler._ExperimentalConfig(verbose=True)
        with _quiet_torch_warnings():
            kw["schedule"] = torch_schedule(**o.schedule_args())
            if o.auto_steps:
                # the automatic steps' schedule (a bounded window) while they drive the profiler; the caller's own
                # schedule once its own step() calls took over (AutoSteps.turn_off)
                auto, own = torch_schedule(**o.schedule_args(auto=True)), kw["schedule"]
                kw["schedule"] = lambda step: (auto if self.auto is not None and self.auto.off_reason is None
                                               else own)(step)
        return torch_profile(**kw)

    def _on_trace_ready(self, prof: Any) -> None:
        """Export one profiling cycle: to the TensorBoard dir and/or --trace path, else a temp file."""
        try:
            self._export_cycle(prof)
        except Exception as exc:  # an export failure must not hide the user's exception
            self._export_errors.append(f"cycle {len(self.cycle_files) + 1}: {type(exc).__name__}: {exc}")

    def _export_cycle(self, prof: Any) -> None:
        o = self.options
        ns = time.time_ns()
        tag = f"{self._worker}.{ns}"
        targets: list[Path] = []
        if o.tensorboard:
            logdir = Path(o.tensorboard)
            logdir.mkdir(parents=True, exist_ok=True)
            name = f"{self._worker}.{ns}.pt.trace.json" + (".gz" if o.gzip else "")
            # the TensorBoard name embeds time_ns: never force-overwrite an existing one
            targets.append(unique_path(logdir / name, tag="dup", force=False, taken=self._taken))
        if o.trace:
            want = Path(o.trace)
            got = unique_path(want, tag=tag, force=o.force, taken=self._taken)
            if got != want and want.resolve() not in self._taken:
                self.notes.append(
                    f"{want} exists: wrote {got} instead (pass --force / force=True to overwrite)"
                )
            targets.append(got)
        if targets:
            primary = targets[0]
        else:
            # not compressed: a temporary file, removed with the result (or at exit)
            primary = tmp_dir() / f"{self._worker}.{ns}.pt.trace.json"
            self.temp_files.append(primary)
        for t in targets + [primary]:
            self._taken.add(t.resolve())
        primary.parent.mkdir(parents=True, exist_ok=True)
        if o.with_flops:
            flops = {}
            for ev in prof.profiler.kineto_results.events():
                f = ev.flops()
                if f:
                    flops[int(ev.external_id())] = (ev.name(), int(f))
            tmp = tmp_dir() / f"export.{ns}.json"
            prof.export_chrome_trace(str(tmp))
            try:
                write_trace_bytes(_add_flops(tmp.read_bytes(), flops), primary)
            finally:
                tmp.unlink(missing_ok=True)
        else:
            with atomic_path(primary) as tmp_name:  # never through a link planted at the name (nbprof.atomic)
                prof.export_chrome_trace(tmp_name)
        for t in targets[1:]:
            copy_trace(primary, t)
        self.cycle_files.append(primary)
        self.written.extend(targets)

    # ---------------------------------------------------------------- protocol
    def __enter__(self) -> Session:
        from ..errors import CaptureError

        if self._prof is not None:
            msg = "an nbprof.profile can be entered once; create a new one for another profile"
            raise RuntimeError(msg)
        if self.options.auto_steps:
            from .auto_steps import AutoSteps

            self.auto = AutoSteps(self)
        self._prof = self._make_profiler()
        if self.options.memory_snapshot:
            from .memory_snapshot import record

            self._snapshot_cm = record(self.options.memory_snapshot, force=self.options.force, quiet=True)
            self._snapshot_cap = self._snapshot_cm.__enter__()
            if self._snapshot_cap.note:
                self.notes.append(self._snapshot_cap.note)
        self.running = True
        self._t0 = time.perf_counter_ns()
        try:
            with _quiet_torch_warnings():
                self._prof.__enter__()
        except Exception as exc:
            self.running = False
            msg = f"torch.profiler could not start: {type(exc).__name__}: {exc}"
            raise CaptureError(msg) from exc
        _ACTIVE.append(self)
        if self.auto is not None:
            self.auto.__enter__()
        return self

    def step(self) -> None:
        """End the current step (``torch.profiler.profile.step``); turns the automatic steps off (the caller's
        steps win)."""
        if self._prof is None or not self.running:
            msg = "this profile is not running: step() only works inside its `with` block or cell"
            raise RuntimeError(msg)
        if self.auto is not None:
            self.auto.turn_off("nbprof.step() was called: the script's own steps are used, the automatic ones are off")
        self._profiler_step()

    def _profiler_step(self, *, quiet: bool = True) -> None:
        """``prof.step()``; ``quiet=False`` skips the warning/fd-2 filter (the automatic steps enter it themselves,
        around their NVTX pop/push too, so the NVTX and Kineto step ranges stay a few µs apart)."""
        self._steps += 1
        if not quiet:
            self._prof.step()
            return
        with _quiet_torch_warnings():
            self._prof.step()

    quiet_profiler_calls = staticmethod(_quiet_torch_warnings)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        """Stop the profiler (exporting the last cycle) and the allocator recording; never swallows ``exc``."""
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self.auto is not None and self.auto.entered:
            self.auto.__exit__(None, None, None)
        try:
            with _quiet_torch_warnings():
                self._prof.__exit__(None, None, None)
        finally:
            if self._snapshot_cm is not None:
                try:
                    self._snapshot_cm.__exit__(None, None, None)
                    self.memory_snapshot = self._snapshot_cap.path
                except Exception as err:  # never hide the user's exception
                    self.notes.append(f"memory snapshot failed: {type(err).__name__}: {err}")
            self.wall_ns = time.perf_counter_ns() - self._t0
            self.steps_run = self._steps + 1
            self.running = False
        for e in self._export_errors:
            self.notes.append(f"export failed for {e}")
        if self.auto is not None and self.auto.entered:
            self._finish_auto()
        elif not self.cycle_files:
            sched = self.options.schedule_args()
            self.notes.append(
                f"nothing was recorded: the profile ended after {self.steps_run} step(s), before the first "
                f"active step (wait={sched['wait']}, warmup={sched['warmup']})"
            )
        return False

    def _finish_auto(self) -> None:
        """Write the automatic steps' times into every exported trace; say what was (not) recorded."""
        from .auto_steps import finish_trace

        meta = self.auto.metadata()
        for path in self.cycle_files:
            try:
                finish_trace(path, meta)
            except Exception as err:  # the trace itself is written
                self.notes.append(f"step times not added to {path}: {type(err).__name__}: {err}")
        if self.cycle_files:
            return
        sched = meta["schedule"]
        if not meta["steps_seen"]:
            self.notes.append(
                "nothing was recorded: no step boundary was found (no optimizer.step(), no DataLoader batch); "
                "profile the whole run instead (python -m nbprof.capture.script --whole-run) or call nbprof.step() "
                "at the end of each iteration")
        else:
            self.notes.append(
                f"nothing was recorded: the run ended after {meta['steps_seen']} step(s) "
                f"({meta['step_source']} steps), before the first recorded one (skip {sched['wait']} + "
                f"warm-up {sched['warmup']}); lower --wait/--warmup or run more steps")
