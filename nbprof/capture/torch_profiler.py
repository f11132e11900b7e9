"""Run ``torch.profiler`` around user code and export Kineto traces that nbprof loads.

This is the capture layer behind ``%%torchprof`` and ``nbprof.profile()``: it owns the
options (:class:`ProfileOptions`), turns them into ``torch.profiler.profile(...)`` arguments,
exports one Chrome trace per profiling cycle (never overwriting an existing file unless
``force=True``) and loads each exported file with :func:`nbprof.load` into the
:class:`nbprof.result.ProfileResult` it returns. torch is imported only when a profile starts.

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

import atexit
import gzip
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import warnings
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = [
    "ACTIVITY_NAMES",
    "ProfileOptions",
    "profile",
    "step",
    "resolve_activities",
    "unique_path",
    "active_session",
]

#: Activity names accepted by ``%%torchprof --activities`` and ``nbprof.profile(activities=...)``.
ACTIVITY_NAMES = ("cpu", "cuda", "gpu")

_TRACE_SUFFIXES = (".json.gz", ".json")
_UNBOUNDED_ACTIVE = 2**31 - 1


@dataclass
class ProfileOptions:
    """Everything ``%%torchprof`` / ``nbprof.profile`` can be asked for.

    Attributes
    ----------
    activities : tuple of str
        Any of ``"cpu"``, ``"cuda"``, ``"gpu"`` (the available accelerator). An unavailable
        device activity is dropped with a one-line note; if nothing is left, CPU is profiled.
    record_shapes, profile_memory, with_stack, with_flops, with_modules : bool
        Passed to ``torch.profiler.profile`` (see the module docstring for what nbprof adds).
    wait, warmup : int
        Schedule phases, in steps (``torch.profiler.schedule``).
    active : int or None
        Recorded steps per cycle; ``None`` records every step after ``wait + warmup``
        (with ``steps`` known: ``steps - wait - warmup``).
    repeat : int
        Number of cycles (0 = until the end). Each cycle is exported to its own file.
    steps : int
        How many times the magic runs the cell body, stepping the profiler between runs
        (with ``nbprof.profile``: how many steps the block will take; it sets the default ``active``).
    sort_by : str
        torch ``key_averages().table`` sort key (``cpu_time_total``, ``self_cuda_time_total``...);
        see ``nbprof.result.resolve_sort_key``.
    row_limit : int
        Rows of the operator table shown.
    group_by : str
        ``"name"``, ``"shapes"`` or ``"stack"`` (``operator_summary(group_by=...)``).
    trace : str or None
        Chrome-trace output path ending in ``.json`` or ``.json.gz``.
    tensorboard : str or None
        Log directory for the ``tensorboard_trace_handler`` layout; nbprof's scalars and text
        (step time, breakdown, top operators...) are written beside the traces
        (``nbprof.tensorboard.write_scalars``).
    memory_snapshot : str or None
        Also record CUDA allocator history and write a snapshot pickle here (protocol 4; needs CUDA,
        otherwise a one-line note). See ``nbprof.capture.memory_snapshot``.
    worker_name : str or None
        Worker part of TensorBoard file names; default ``<hostname>_<pid>`` as torch.
    gzip : bool
        Write TensorBoard files as ``.pt.trace.json.gz``.
    force : bool
        Allow overwriting an existing ``trace`` file.
    quiet : bool
        Do not display the result (the magic) and do not print notes.
    """

    activities: tuple[str, ...] = ("cpu",)
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    wait: int = 0
    warmup: int = 0
    active: int | None = None
    repeat: int = 1
    steps: int = 1
    sort_by: str = "cpu_time_total"
    row_limit: int = 20
    group_by: str = "name"
    trace: str | None = None
    tensorboard: str | None = None
    memory_snapshot: str | None = None
    worker_name: str | None = None
    gzip: bool = False
    force: bool = False
    quiet: bool = False

    def validated(self) -> ProfileOptions:
        """A normalised copy; raises ``ValueError`` naming the bad option.

        Raises
        ------
        ValueError
            Unknown activity, negative schedule values, ``steps < 1``, ``steps`` not larger
            than ``wait + warmup``, a ``trace`` path without a ``.json``/``.json.gz`` suffix,
            an unknown ``sort_by`` or ``group_by``.
        """
        from ..result import GROUP_BY, resolve_sort_key

        acts: list[str] = []
        for a in self.activities:
            for part in str(a).split(","):
                name = part.strip().lower()
                if not name:
                    continue
                if name not in ACTIVITY_NAMES:
                    msg = f"unknown activity {part.strip()!r}: expected one of {', '.join(ACTIVITY_NAMES)}"
                    raise ValueError(msg)
                if name not in acts:
                    acts.append(name)
        if not acts:
            msg = "no activity given: expected one or more of cpu, cuda, gpu"
            raise ValueError(msg)
        for nm in ("wait", "warmup", "repeat"):
            if int(getattr(self, nm)) < 0:
                msg = f"{nm} must be >= 0, got {getattr(self, nm)}"
                raise ValueError(msg)
        if self.active is not None and int(self.active) < 1:
            msg = f"active must be >= 1, got {self.active}"
            raise ValueError(msg)
        if int(self.steps) < 1:
            msg = f"steps must be >= 1, got {self.steps}"
            raise ValueError(msg)
        if self.steps > 1 and self.active is None and self.steps <= self.wait + self.warmup:
            msg = (
                f"steps={self.steps} leaves nothing to record after wait={self.wait} + warmup={self.warmup}; "
                "give more steps"
            )
            raise ValueError(msg)
        if int(self.row_limit) < 1:
            msg = f"row_limit must be >= 1, got {self.row_limit}"
            raise ValueError(msg)
        resolve_sort_key(self.sort_by)
        if self.group_by not in GROUP_BY:
            msg = f"unknown group_by {self.group_by!r}: expected one of {', '.join(GROUP_BY)}"
            raise ValueError(msg)
        if self.trace is not None and not str(self.trace).lower().endswith(_TRACE_SUFFIXES):
            msg = f"trace path {str(self.trace)!r} must end in .json or .json.gz (Chrome trace)"
            raise ValueError(msg)
        return replace(self, activities=tuple(acts))

    def schedule_args(self) -> dict[str, int]:
        """``wait, warmup, active, repeat`` for ``torch.profiler.schedule``.

        ``active=None`` becomes ``steps - wait - warmup`` when ``steps > 1`` (every remaining run
        of the cell), else unbounded (record until the profile ends).
        """
        active = self.active
        if active is None:
            active = self.steps - self.wait - self.warmup if self.steps > 1 else _UNBOUNDED_ACTIVE
        return {"wait": int(self.wait), "warmup": int(self.warmup), "active": int(active), "repeat": int(self.repeat)}


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
        from ..errors import MissingDependencyError

        msg = (
            f"profiling needs PyTorch, which is not importable in this environment ({sys.executable}): {exc}\n"
            "hint: pip install 'nbprof[torch]' (or install torch for your platform from https://pytorch.org)"
        )
        raise MissingDependencyError(msg, name="torch") from exc
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


def _split_suffix(name: str) -> tuple[str, str]:
    low = name.lower()
    for suf in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json"):
        if low.endswith(suf):
            return name[: -len(suf)], name[-len(suf):]
    return name, ""


def unique_path(path: str | os.PathLike[str], *, tag: str, force: bool = False, taken: set[Path] | None = None) -> Path:
    """A path to write ``path`` to without overwriting anything.

    Parameters
    ----------
    path : path-like
        The wanted file.
    tag : str
        Inserted before the suffix when the file exists, TensorBoard style
        (``out.json`` -> ``out.<tag>.json``; ``run.pt.trace.json.gz`` -> ``run.<tag>.pt.trace.json.gz``).
    force : bool
        Return ``path`` even if it exists (unless it is in ``taken``).
    taken : set of Path, optional
        Paths already written by this session; never returned.

    Returns
    -------
    Path
    """
    p = Path(path)
    taken = taken or set()
    if p.resolve() not in taken and (force or not p.exists()):
        return p
    stem, suf = _split_suffix(p.name)
    n = 0
    while True:
        extra = f".{n}" if n else ""
        cand = p.with_name(f"{stem}.{tag}{extra}{suf}")
        if not cand.exists() and cand.resolve() not in taken:
            return cand
        n += 1


def _read_trace_bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _write_trace_bytes(data: bytes, path: Path) -> None:
    """Write (decompressed) trace bytes to ``path``, gzip-compressed when it ends in ``.gz``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = gzip.compress(data, compresslevel=6) if path.name.lower().endswith(".gz") else data
    tmp = path.with_name(path.name + ".nbprof-tmp")
    tmp.write_bytes(payload)
    os.replace(tmp, path)


def _copy_trace(src: Path, dst: Path) -> None:
    """Copy a trace, converting between ``.json`` and ``.json.gz`` as the names say."""
    if src.name.lower().endswith(".gz") == dst.name.lower().endswith(".gz"):
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    else:
        _write_trace_bytes(_read_trace_bytes(src), dst)


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
        hit = flops_by_ext.get(args.get("External id"))
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
    """Silence torch.profiler warnings that do not apply to nbprof (only around nbprof's own calls)."""
    with warnings.catch_warnings():
        for msg in _TORCH_NOISE:
            warnings.filterwarnings("ignore", message=re.escape(msg))
        yield


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


_TMP_ROOT: list[str] = []


def _tmp_dir() -> Path:
    if not _TMP_ROOT:
        d = tempfile.mkdtemp(prefix="nbprof-torchprof-")
        _TMP_ROOT.append(d)
        atexit.register(shutil.rmtree, d, True)
    return Path(_TMP_ROOT[0])


# --------------------------------------------------------------------------- the session


_ACTIVE: list[profile] = []


def active_session() -> profile | None:
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


class profile:  # named like torch.profiler.profile, which it wraps
    """Profile a block of code with ``torch.profiler`` and get an nbprof result.

    ``with nbprof.profile(record_shapes=True, trace="run.json.gz") as p: ...`` runs the block
    under ``torch.profiler.profile`` with a wait/warmup/active/repeat schedule, exports each
    profiling cycle as a Kineto Chrome trace, loads it with :func:`nbprof.load` and fills
    ``p``, a :class:`nbprof.result.ProfileResult` (operator table, summary, viewers).
    Call ``p.step()`` or :func:`nbprof.step` at the end of each training step.

    Parameters
    ----------
    activities : str or sequence of str, default ("cpu",)
        ``"cpu"``, ``"cuda"``, ``"gpu"``. A requested device that is not available prints a
        one-line note and the profile is CPU-only.
    options : ProfileOptions, optional
        All options at once (the magic uses this); keyword arguments override its fields.
    **kwargs
        Any :class:`ProfileOptions` field: ``record_shapes``, ``profile_memory``, ``with_stack``,
        ``with_flops``, ``with_modules``, ``wait``, ``warmup``, ``active``, ``repeat``,
        ``sort_by``, ``row_limit``, ``group_by``, ``trace``, ``tensorboard``, ``worker_name``,
        ``gzip``, ``force``, ``quiet``.

    Raises
    ------
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

    def __init__(self, activities: str | Iterable[str] | None = None, *, options: ProfileOptions | None = None, **kwargs: Any) -> None:
        base = options or ProfileOptions()
        if activities is not None:
            kwargs["activities"] = (activities,) if isinstance(activities, str) else tuple(activities)
        unknown = sorted(set(kwargs) - set(ProfileOptions.__dataclass_fields__))
        if unknown:
            msg = f"unknown option(s) {', '.join(unknown)}; known: {', '.join(ProfileOptions.__dataclass_fields__)}"
            raise TypeError(msg)
        self.options = replace(base, **kwargs).validated()
        from ..result import ProfileResult

        self.result = ProfileResult(self.options)
        self._prof: Any = None
        self._t0 = 0
        self._taken: set[Path] = set()
        self._cycle_files: list[Path] = []
        self._written: list[Path] = []
        self._worker = self.options.worker_name or f"{socket.gethostname()}_{os.getpid()}"
        self._steps = 0
        self._export_errors: list[str] = []
        self._temp_files: list[Path] = []

    # ---------------------------------------------------------------- torch
    def _make_profiler(self) -> Any:
        torch = _import_torch()
        from torch.profiler import profile as torch_profile
        from torch.profiler import schedule as torch_schedule

        o = self.options
        acts, notes = resolve_activities(o.activities)
        for n in notes:
            self.result.notes.append(n)
            if not o.quiet:
                print(f"nbprof: {n}", file=sys.stderr)
        self.result.activities = [str(a).split(".")[-1] for a in acts]
        if "CPU" not in self.result.activities:
            self.result.notes.append(
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
        return torch_profile(**kw)

    def _on_trace_ready(self, prof: Any) -> None:
        """Export one profiling cycle: to the TensorBoard dir and/or --trace path, else a temp file."""
        try:
            self._export_cycle(prof)
        except Exception as exc:  # an export failure must not hide the user's exception
            self._export_errors.append(f"cycle {len(self._cycle_files) + 1}: {type(exc).__name__}: {exc}")

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
                self.result.notes.append(
                    f"{want} exists: wrote {got} instead (pass --force / force=True to overwrite)"
                )
            targets.append(got)
        if targets:
            primary = targets[0]
        else:
            # not compressed: a temporary file, removed with the result (or at exit)
            primary = _tmp_dir() / f"{self._worker}.{ns}.pt.trace.json"
            self._temp_files.append(primary)
        for t in targets + [primary]:
            self._taken.add(t.resolve())
        primary.parent.mkdir(parents=True, exist_ok=True)
        if o.with_flops:
            flops = {}
            for ev in prof.profiler.kineto_results.events():
                f = ev.flops()
                if f:
                    flops[int(ev.external_id())] = (ev.name(), int(f))
            tmp = _tmp_dir() / f"export.{ns}.json"
            prof.export_chrome_trace(str(tmp))
            try:
                _write_trace_bytes(_add_flops(tmp.read_bytes(), flops), primary)
            finally:
                tmp.unlink(missing_ok=True)
        else:
            prof.export_chrome_trace(str(primary))
        for t in targets[1:]:
            _copy_trace(primary, t)
        self._cycle_files.append(primary)
        self._written.extend(targets)

    # ---------------------------------------------------------------- protocol
    def __enter__(self) -> Any:
        from ..errors import CaptureError

        if self._prof is not None:
            msg = "an nbprof.profile can be entered once; create a new one for another profile"
            raise RuntimeError(msg)
        self._prof = self._make_profiler()
        self._snapshot_cm = None
        if self.options.memory_snapshot:
            from .memory_snapshot import record

            self._snapshot_cm = record(self.options.memory_snapshot, force=self.options.force, quiet=True)
            self._snapshot_cap = self._snapshot_cm.__enter__()
            if self._snapshot_cap.note:
                self.result.notes.append(self._snapshot_cap.note)
        self.result._session = self
        self.result.running = True
        self._t0 = time.perf_counter_ns()
        try:
            with _quiet_torch_warnings():
                self._prof.__enter__()
        except Exception as exc:
            self.result.running = False
            msg = f"torch.profiler could not start: {type(exc).__name__}: {exc}"
            raise CaptureError(msg) from exc
        _ACTIVE.append(self)
        return self.result

    def step(self) -> None:
        """End the current step (``torch.profiler.profile.step``)."""
        if self._prof is None or not self.result.running:
            msg = "this profile is not running: step() only works inside its `with` block or cell"
            raise RuntimeError(msg)
        self._steps += 1
        with _quiet_torch_warnings():
            self._prof.step()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        r = self.result
        try:
            try:
                with _quiet_torch_warnings():
                    self._prof.__exit__(None, None, None)
            finally:
                if getattr(self, "_snapshot_cm", None) is not None:
                    try:
                        self._snapshot_cm.__exit__(None, None, None)
                        r.memory_snapshot = self._snapshot_cap.path
                    except Exception as err:  # never hide the user's exception
                        r.notes.append(f"memory snapshot failed: {type(err).__name__}: {err}")
                r.wall_ns = time.perf_counter_ns() - self._t0
                r.steps_run = self._steps + 1
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
        from ..sources import load

        r = self.result
        r.trace_files = list(self._cycle_files)
        r.paths = list(self._written)
        for e in self._export_errors:
            r.notes.append(f"export failed for {e}")
        r.traces = [load(p) for p in self._cycle_files]
        for path, trace in zip(self._cycle_files, r.traces):
            if path in self._temp_files:  # the temporary file lives as long as the Trace read from it
                weakref.finalize(trace, _unlink_quietly, path)
        if self.options.tensorboard and r.traces:
            # nbprof's scalars/text beside the traces: <logdir> = <parent>/<run>
            try:
                from ..tensorboard.write import write_scalars

                logdir = Path(self.options.tensorboard).resolve()
                for trace in r.traces:
                    write_scalars(trace, str(logdir.parent), logdir.name)
            except Exception as err:  # the traces are written; scalars are extra
                r.notes.append(f"TensorBoard scalars not written: {type(err).__name__}: {err}")
        if not self._cycle_files:
            sched = self.options.schedule_args()
            r.notes.append(
                f"nothing was recorded: the profile ended after {r.steps_run} step(s), before the first "
                f"active step (wait={sched['wait']}, warmup={sched['warmup']})"
            )
