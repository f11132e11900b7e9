"""The options of ``%%torchprof`` / ``nbprof.profile``, declared once.

:class:`ProfileOptions` is a dataclass whose fields carry their command-line flag, help text and
metavar in ``field(metadata=...)``. The magic's ``magic_arguments`` / argparse arguments
(:func:`argparse_arguments`), the keyword list of ``nbprof.profile`` and the ``Attributes`` section of
this class's docstring are all built from those fields, so the three cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..analysis.operator_keys import GROUP_BY, resolve_sort_key

__all__ = ["ACTIVITY_NAMES", "AUTO_ACTIVE", "ProfileOptions", "OptionSpec", "option_specs", "argparse_arguments", "options_doc"]

#: Activity names accepted by ``%%torchprof --activities`` and ``nbprof.profile(activities=...)``.
ACTIVITY_NAMES = ("cpu", "cuda", "gpu")

_TRACE_SUFFIXES = (".json.gz", ".json")
_UNBOUNDED_ACTIVE = 2**31 - 1
#: Steps recorded by default when the automatic steps drive the profiler (``auto_steps`` without ``active``).
AUTO_ACTIVE = 5


def _opt(default: Any, help: str, *, flags: tuple[str, ...] = (), metavar: str | None = None,
         type: Any = None, choices: tuple[str, ...] | None = None, action: str | None = None) -> Any:
    meta = {"help": help, "flags": flags, "metavar": metavar, "type": type, "choices": choices, "action": action}
    return field(default=default, metadata=meta)


@dataclass
class ProfileOptions:
    activities: tuple[str, ...] = _opt(
        ("cpu",),
        "What to profile: cpu, cuda, gpu (comma-separated or repeated). 'gpu' means the available "
        "accelerator (torch has no ProfilerActivity.GPU). A device that is not available gives a one-line "
        "note and a CPU-only profile.",
        flags=("-a", "--activities"), metavar="LIST", action="append")
    record_shapes: bool = _opt(False, "Record operator input shapes.")
    profile_memory: bool = _opt(False, "Record tensor allocations and frees (the memory timeline).")
    with_stack: bool = _opt(False, "Record Python call stacks of operators ('Call stack'; nbprof passes "
                                   "torch's verbose experimental config, without which torch writes none).")
    with_flops: bool = _opt(False, "Estimate FLOPs of matrix multiplications and convolutions (nbprof writes "
                                   "them into the exported trace as the 'flops' arg of each operator).")
    with_modules: bool = _opt(False, "Record the nn.Module hierarchy (turns the Python tracer on).")
    wait: int = _opt(0, "Schedule: steps skipped before warm-up.", metavar="N", type=int)
    warmup: int = _opt(0, "Schedule: warm-up steps, profiled but discarded.", metavar="N", type=int)
    active: int | None = _opt(None, "Schedule: recorded steps per cycle (default: every step after wait + "
                                    "warmup; with steps known, steps - wait - warmup).", metavar="N", type=int)
    repeat: int = _opt(1, "Schedule: number of cycles, 0 = until the end; each cycle is exported to its own file.",
                       metavar="N", type=int)
    steps: int = _opt(1, "Run the cell N times, one profiler step each (nbprof.profile: how many steps the "
                         "block will take; it sets the default active).", metavar="N", type=int)
    auto_steps: bool = _opt(
        False, "Steps of an unmodified loop: each optimizer.step() (else each DataLoader batch) ends a profiler "
               "step (ProfilerStep#N, also an NVTX range) and the schedule stops the profiler after the active "
               "steps while the code runs on; the step wall times go into the trace (nbprof_capture) for the "
               "profiler-overhead estimate. An explicit nbprof.step() turns them off (nbprof.capture.auto_steps).")
    sort_by: str = _opt(
        "cpu_time_total",
        "Sort key of the operator table, as torch's key_averages().table: cpu_time_total, "
        "self_cpu_time_total, cuda_time_total / self_cuda_time_total (= device time), device_time_total, "
        "cpu_memory_usage, count, flops ... (nbprof.analysis.operator_keys.resolve_sort_key).", metavar="KEY")
    row_limit: int = _opt(20, "Rows of the operator table shown.", metavar="N", type=int)
    group_by: str = _opt("name", "Operator table key (operator_summary(group_by=...)).", choices=GROUP_BY)
    trace: str | None = _opt(None, "Write the Chrome trace to PATH (.json or .json.gz).", metavar="PATH")
    tensorboard: str | None = _opt(
        None, "Write LOGDIR/<worker>.<time_ns>.pt.trace.json (tensorboard_trace_handler layout) and nbprof's "
              "scalars and text beside the traces (nbprof.tensorboard.write_scalars).", metavar="LOGDIR")
    memory_snapshot: str | None = _opt(
        None, "Record CUDA allocator history and write a snapshot pickle to PATH (protocol 4; needs CUDA, "
              "otherwise a one-line note; see nbprof.capture.memory_snapshot).", metavar="PATH")
    worker_name: str | None = _opt(None, "Worker part of TensorBoard file names (default <hostname>_<pid>, as torch).",
                                   metavar="NAME")
    gzip: bool = _opt(False, "Write TensorBoard files gzip-compressed (.pt.trace.json.gz).")
    force: bool = _opt(False, "Overwrite an existing trace file (default: write a new name).")
    quiet: bool = _opt(False, "Do not display the result (the magic), do not print notes, and hide the profiler's own stderr "
                      "lines (torch's USDT profiler_start/stop, Kineto and allocator warnings; the cell's own "
                      "output stays).", flags=("-q", "--quiet"))

    def validated(self) -> ProfileOptions:
        """A normalised copy; raises ``ValueError`` naming the bad option.

        Raises
        ------
        ValueError
            Unknown activity, negative schedule values, ``steps < 1``, ``steps`` not larger
            than ``wait + warmup``, a ``trace`` path without a ``.json``/``.json.gz`` suffix,
            an unknown ``sort_by`` or ``group_by``.
        """
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

    def schedule_args(self, *, auto: bool = False) -> dict[str, int]:
        """``wait, warmup, active, repeat`` for ``torch.profiler.schedule``.

        ``active=None`` becomes ``steps - wait - warmup`` when ``steps > 1`` (every remaining run
        of the cell), else unbounded (record until the profile ends). With ``auto=True`` (the schedule the
        automatic steps follow, ``auto_steps``) ``active=None`` is ``AUTO_ACTIVE`` steps: the profiler stops
        after them while the code runs on.
        """
        active = self.active
        if active is None:
            unbounded = self.steps - self.wait - self.warmup if self.steps > 1 else _UNBOUNDED_ACTIVE
            active = AUTO_ACTIVE if auto else unbounded
        return {"wait": int(self.wait), "warmup": int(self.warmup), "active": int(active), "repeat": int(self.repeat)}

    @classmethod
    def from_namespace(cls, ns: Any) -> ProfileOptions:
        """The options an argparse namespace built from :func:`argparse_arguments` holds (not validated)."""
        kw = {f.name: getattr(ns, f.name) for f in dataclasses.fields(cls)}
        kw["activities"] = tuple(kw["activities"] or cls.activities)
        return cls(**kw)


@dataclass(frozen=True)
class OptionSpec:
    """One option as the command line sees it: the field ``name``, its ``flags`` and argparse keywords."""

    name: str
    flags: tuple[str, ...]
    kwargs: dict[str, Any]
    help: str
    default: Any
    type: str


def option_specs() -> Iterator[OptionSpec]:
    """The options of :class:`ProfileOptions` in declaration order, with their command-line form."""
    for f in dataclasses.fields(ProfileOptions):
        m = f.metadata
        flags = m["flags"] or ("--" + f.name.replace("_", "-"),)
        kw: dict[str, Any] = {"dest": f.name}
        help_text = m["help"]
        if isinstance(f.default, bool) and m["action"] is None:
            kw["action"] = "store_true"
        elif m["action"] == "append":
            kw.update(action="append", default=None)
            shown = ",".join(f.default) if isinstance(f.default, (list, tuple)) else str(f.default)
            help_text += f" Default: {shown}."
        else:
            kw["default"] = f.default
            if m["type"] is not None:
                kw["type"] = m["type"]
            if m["choices"] is not None:
                kw["choices"] = list(m["choices"])
            if f.default is not None:
                help_text += f" Default: {f.default}."
        if m["metavar"]:
            kw["metavar"] = m["metavar"]
        kw["help"] = help_text
        yield OptionSpec(f.name, tuple(flags), kw, m["help"], f.default, str(f.type))


def argparse_arguments() -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """``(flags, keywords)`` of each option for ``ArgumentParser.add_argument`` / IPython's ``argument``."""
    return [(s.flags, dict(s.kwargs)) for s in option_specs()]


def options_doc() -> str:
    """The numpydoc ``Attributes`` section of :class:`ProfileOptions`, from the fields' metadata."""
    lines = ["Attributes", "----------"]
    for s in option_specs():
        lines.append(f"{s.name} : {s.type}, default {s.default!r}")
        lines.append(f"    {s.help} Command line: ``{' / '.join(s.flags)}``.")
    return "\n".join(lines)


ProfileOptions.__doc__ = (
    "Everything ``%%torchprof`` / ``nbprof.profile`` can be asked for (validated by :meth:`validated`).\n\n"
    + options_doc()
)
