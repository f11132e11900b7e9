"""DeepSpeed profiling configuration: what DeepSpeed really takes, plus nbprof's torch.profiler window.

DeepSpeed's own switches (DeepSpeed 0.19.8, ``profiling/constants.py``, ``comm/constants.py``,
``runtime/constants.py``; ../shared/notes/formats.md §4.7):

- ``"flops_profiler": {"enabled", "recompute_fwd_factor", "profile_step", "module_depth", "top_modules",
  "detailed", "output_file"}`` -- one report, by global rank 0 only, at global step ``profile_step``
  (printed as "step profile_step+1"). Enabling it forces ``wall_clock_breakdown`` on.
- ``"comms_logger": {"enabled", "verbose", "prof_all", "debug", "prof_ops"}`` -- ``log_summary()`` prints
  the table; ``verbose`` adds one ``comm op: ...`` line per call, **but only if DeepSpeed's logger is at
  INFO**: the per-op lines go through ``log_dist(..., ranks=[0])`` = ``logger.info``, and the
  ``DeepSpeed`` logger is created at WARNING.
- ``"wall_clock_breakdown": true`` -- ``[Rank 0] time (ms) | fwd: .. | bwd: ..`` every ``steps_per_print``.

How to get the per-op lines (the logger level):

- DeepSpeed releases with a top-level ``"log_level"`` config key (added by deepspeedai/DeepSpeed PR #8067,
  present in 0.19.8: ``runtime/constants.py`` ``LOG_LEVEL = "log_level"``, applied in
  ``DeepSpeedEngine.__init__`` via ``set_log_level_from_string``) take ``"log_level": "info"``.
  :func:`profiling_config` adds it only when the installed DeepSpeed declares that key.
- Every version: ``deepspeed.utils.logger.setLevel(logging.INFO)`` (and its handlers) in each rank before
  ``deepspeed.initialize``; :func:`nbprof.deepspeed.attach.set_deepspeed_log_level` does this and
  :func:`~nbprof.deepspeed.attach.attach` calls it when ``comms_verbose`` is set.
- The launcher's ``deepspeed --log_level info`` sets the level of the *launcher* process only (the
  samples show ``--log_level=info`` in every launcher command line, with no per-op lines unless the ranks
  themselves log at INFO).

Mapping of the seed's invented settings (neither exists in DeepSpeed; :func:`translate_seed_config`
warns with :class:`DeepSpeedConfigWarning` whenever it translates):

=========================================  ==================================================================
seed                                        what nbprof passes instead
=========================================  ==================================================================
``"profiler": {"enabled": b}``              nbprof window on/off (``attach``); section removed from the config
``"profiler": {"start_step": s}``           window start (engine global step); ``flops_profiler.profile_step = s``
``"profiler": {"end_step": e}``             window end, exclusive: torch.profiler records steps s..e-1
``"profiler": {"record_shapes": b}``        ``torch.profiler.profile(record_shapes=b)``
``"profiler": {"profile_memory": b}``       ``torch.profiler.profile(profile_memory=b)``
``"profiler": {"flush_every_n_steps": n}``  the window is written as one trace per n steps (stop/export/restart)
``deepspeed --profiling``                   flag removed from argv; same as ``"profiler": {"enabled": true}``
=========================================  ==================================================================
"""

from __future__ import annotations

import copy
import importlib.util
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import NbprofWarning

__all__ = [
    "DeepSpeedConfigWarning",
    "ProfilingWindow",
    "ProfilingConfig",
    "profiling_config",
    "translate_seed_config",
    "translate_seed_argv",
    "deepspeed_supports_log_level",
    "SEED_PROFILER_KEYS",
]

#: The seed's invented ``"profiler"`` keys and where each goes.
SEED_PROFILER_KEYS = {
    "enabled": "nbprof window enabled (nbprof.deepspeed.attach)",
    "start_step": "window start (engine global step) and flops_profiler.profile_step",
    "end_step": "window end (exclusive)",
    "record_shapes": "torch.profiler.profile(record_shapes=...)",
    "profile_memory": "torch.profiler.profile(profile_memory=...)",
    "flush_every_n_steps": "one trace file written per n steps of the window",
}


class DeepSpeedConfigWarning(NbprofWarning):
    """Issued when nbprof translates settings that DeepSpeed does not have (the seed's ``"profiler"``
    section, the ``--profiling`` flag) or drops a setting the installed DeepSpeed would not accept."""


@dataclass
class ProfilingWindow:
    """nbprof's torch.profiler window over engine global steps ``[start_step, end_step)``.

    Attributes
    ----------
    enabled : bool
    start_step, end_step : int
        Global steps (``engine.global_steps`` before the step runs); end exclusive.
    record_shapes, profile_memory, with_stack : bool
        Passed to ``torch.profiler.profile``.
    flush_every_n_steps : int or None
        Write one trace per n steps (None: one trace for the whole window).
    out_dir : str
        Where per-rank traces go (``rank{R}.steps{S}-{E}.pt.trace.json.gz``).
    comms_verbose : bool
        Raise DeepSpeed's logger to INFO in each rank so the comms logger's per-op lines print.
    """

    enabled: bool = True
    start_step: int = 2
    end_step: int = 4
    record_shapes: bool = True
    profile_memory: bool = False
    with_stack: bool = False
    flush_every_n_steps: int | None = None
    out_dir: str = "nbprof_traces"
    comms_verbose: bool = False

    def __post_init__(self) -> None:
        if self.start_step < 0 or self.end_step <= self.start_step:
            msg = f"profiling window needs 0 <= start_step < end_step, got [{self.start_step}, {self.end_step})"
            raise ValueError(msg)
        if self.flush_every_n_steps is not None and self.flush_every_n_steps < 1:
            msg = f"flush_every_n_steps must be >= 1, got {self.flush_every_n_steps}"
            raise ValueError(msg)

    def attach_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`nbprof.deepspeed.attach` (without the engine)."""
        d = asdict(self)
        d.pop("enabled")
        return d


@dataclass
class ProfilingConfig:
    """A DeepSpeed config fragment plus nbprof's window.

    Attributes
    ----------
    ds_config : dict
        Only keys DeepSpeed knows: ``flops_profiler``, ``comms_logger``, ``wall_clock_breakdown`` and,
        when the installed DeepSpeed has it, ``log_level``.
    window : ProfilingWindow
    notes : list of str
        What was translated or dropped, one sentence each.
    """

    ds_config: dict[str, Any]
    window: ProfilingWindow
    notes: list[str] = field(default_factory=list)

    def apply(self, config: dict[str, Any] | None = None) -> dict[str, Any]:
        """A new config = ``config`` (not modified) updated with :attr:`ds_config` (sections merged)."""
        out = copy.deepcopy(config) if config else {}
        for k, v in self.ds_config.items():
            if isinstance(v, dict) and isinstance(out.get(k), dict):
                out[k] = {**out[k], **v}
            else:
                out[k] = copy.deepcopy(v)
        return out


def deepspeed_supports_log_level() -> bool:
    """True when the installed DeepSpeed declares the top-level ``"log_level"`` config key.

    Reads ``deepspeed/runtime/constants.py`` without importing DeepSpeed (which takes seconds).
    """
    spec = importlib.util.find_spec("deepspeed")
    if spec is None or not spec.submodule_search_locations:
        return False
    path = os.path.join(next(iter(spec.submodule_search_locations)), "runtime", "constants.py")
    try:
        with open(path, encoding="utf-8") as f:
            return 'LOG_LEVEL = "log_level"' in f.read()
    except OSError:
        return False


def profiling_config(
    start_step: int = 2,
    end_step: int = 4,
    *,
    flops_profiler: bool = True,
    module_depth: int = -1,
    top_modules: int = 1,
    detailed: bool = True,
    flops_output_file: str | None = None,
    comms_logger: bool = True,
    comms_verbose: bool = False,
    comms_debug: bool = False,
    prof_ops: Sequence[str] = (),
    wall_clock_breakdown: bool = True,
    record_shapes: bool = True,
    profile_memory: bool = False,
    with_stack: bool = False,
    flush_every_n_steps: int | None = None,
    out_dir: str = "nbprof_traces",
    log_level: str | None = None,
) -> ProfilingConfig:
    """DeepSpeed config fragment enabling the flops profiler, comms logger and wall-clock breakdown,
    plus an nbprof torch.profiler window over global steps ``[start_step, end_step)``.

    Parameters
    ----------
    start_step, end_step : int
        The window (engine global steps, end exclusive). The flops profiler profiles ``start_step``
        (DeepSpeed's ``profile_step``; it needs ``>= 1``, so 0 becomes 1).
    flops_profiler, module_depth, top_modules, detailed, flops_output_file
        DeepSpeed ``flops_profiler`` settings (``output_file=None`` prints to stdout of rank 0).
    comms_logger, comms_verbose, comms_debug, prof_ops
        DeepSpeed ``comms_logger`` settings (``prof_all`` is true unless ``prof_ops`` is given).
        ``comms_verbose`` also asks for DeepSpeed's logger at INFO (see the module docstring).
    wall_clock_breakdown : bool
    record_shapes, profile_memory, with_stack, flush_every_n_steps, out_dir
        The nbprof window (:class:`ProfilingWindow`).
    log_level : str, optional
        DeepSpeed's ``log_level`` (default ``"info"`` when ``comms_verbose``); written only when the
        installed DeepSpeed declares the key, otherwise noted (``attach`` sets the level at run time).

    Returns
    -------
    ProfilingConfig
        ``.ds_config`` for ``deepspeed.initialize(config=cfg.apply(your_config))``, ``.window`` for
        :func:`nbprof.deepspeed.attach`.

    Raises
    ------
    ValueError
        When the window is empty or negative.
    """
    window = ProfilingWindow(
        enabled=True, start_step=start_step, end_step=end_step, record_shapes=record_shapes,
        profile_memory=profile_memory, with_stack=with_stack, flush_every_n_steps=flush_every_n_steps,
        out_dir=out_dir, comms_verbose=comms_verbose,
    )
    notes: list[str] = []
    ds: dict[str, Any] = {}
    if flops_profiler:
        ds["flops_profiler"] = {
            "enabled": True,
            "profile_step": max(1, int(start_step)),
            "module_depth": int(module_depth),
            "top_modules": int(top_modules),
            "detailed": bool(detailed),
            "output_file": flops_output_file,
        }
        if start_step < 1:
            notes.append("flops_profiler.profile_step set to 1: DeepSpeed never profiles global step 0")
    if comms_logger:
        ds["comms_logger"] = {
            "enabled": True,
            "verbose": bool(comms_verbose),
            "prof_all": not prof_ops,
            "debug": bool(comms_debug),
            "prof_ops": list(prof_ops),
        }
    if wall_clock_breakdown or flops_profiler:
        ds["wall_clock_breakdown"] = True
    level = log_level or ("info" if comms_verbose else None)
    if level is not None:
        if deepspeed_supports_log_level():
            ds["log_level"] = level
        else:
            notes.append(
                f"installed DeepSpeed has no 'log_level' config key: not written; nbprof.deepspeed.attach "
                f"sets DeepSpeed's logger to {level.upper()} in each rank instead"
            )
    return ProfilingConfig(ds_config=ds, window=window, notes=notes)


def translate_seed_config(config: dict[str, Any], *, warn: bool = True, **overrides: Any) -> tuple[dict[str, Any], ProfilingConfig]:
    """Accept the seed's invented ``"profiler"`` section and return what DeepSpeed and torch really take.

    Parameters
    ----------
    config : dict
        A DeepSpeed config, possibly holding ``"profiler": {"enabled", "start_step", "end_step",
        "record_shapes", "profile_memory", "flush_every_n_steps"}``. Not modified.
    warn : bool
        Issue a :class:`DeepSpeedConfigWarning` naming what was translated.
    **overrides
        Passed to :func:`profiling_config` (e.g. ``comms_verbose=True``).

    Returns
    -------
    (ds_config, profiling) : tuple
        ``ds_config``: the config without ``"profiler"`` and with the real DeepSpeed sections merged in
        (every key the user wrote wins, with or without a ``"profiler"`` section: sections are merged
        key by key, the user's values kept); ``profiling``: the
        :class:`ProfilingConfig` whose ``.window`` goes to :func:`nbprof.deepspeed.attach`.
        A section with ``"enabled": false`` yields ``window.enabled = False`` and adds no DeepSpeed section.

    Raises
    ------
    TypeError
        When ``"profiler"`` is not a dict.
    """
    cfg = copy.deepcopy(config)
    seed = cfg.pop("profiler", None)
    if seed is None:
        prof = profiling_config(**overrides)
        return _user_keys_win(prof.apply(cfg), config), prof
    if not isinstance(seed, dict):
        msg = f"'profiler' section must be a dict, got {type(seed).__name__}"
        raise TypeError(msg)
    unknown = sorted(set(seed) - set(SEED_PROFILER_KEYS))
    kw: dict[str, Any] = {}
    for k in ("start_step", "end_step", "record_shapes", "profile_memory", "flush_every_n_steps"):
        if k in seed:
            kw[k] = seed[k]
    kw.update(overrides)
    enabled = bool(seed.get("enabled", True))
    prof = profiling_config(**kw)
    prof.window.enabled = enabled
    used = ", ".join(f"{k}={seed[k]!r}" for k in seed if k in SEED_PROFILER_KEYS)
    note = (
        f"DeepSpeed has no 'profiler' config section: translated ({used}) to an nbprof torch.profiler window "
        f"over global steps [{prof.window.start_step}, {prof.window.end_step})"
        + (f", flops_profiler.profile_step={prof.ds_config['flops_profiler']['profile_step']}" if enabled else "")
        + "; see nbprof.deepspeed.config for the mapping"
    )
    if unknown:
        note += f"; ignored unknown keys {unknown}"
    prof.notes.insert(0, note)
    if warn:
        warnings.warn(note, DeepSpeedConfigWarning, stacklevel=2)
    if not enabled:
        return cfg, prof
    return _user_keys_win(prof.apply(cfg), config), prof


def _user_keys_win(merged: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """``merged`` with every key the user wrote restored: a user section is merged over ours key by key,
    a user scalar (``wall_clock_breakdown``, ``log_level``...) replaces ours; ``"profiler"`` stays removed."""
    for k, v in user.items():
        if k == "profiler":
            continue
        if isinstance(v, dict) and isinstance(merged.get(k), dict):
            merged[k] = {**merged[k], **copy.deepcopy(v)}
        else:
            merged[k] = copy.deepcopy(v)
    return merged


def translate_seed_argv(argv: Sequence[str], *, warn: bool = True) -> tuple[list[str], bool]:
    """Remove the seed's ``--profiling`` flag (not a DeepSpeed launcher flag) from a launcher argv.

    Returns
    -------
    (argv, profiling) : tuple
        The argv without ``--profiling`` / ``--profiling=true|false`` and whether profiling was asked for.
        With ``warn``, a :class:`DeepSpeedConfigWarning` says it was removed.
    """
    out: list[str] = []
    asked = False
    for a in argv:
        if a == "--profiling":
            asked = True
            continue
        if a.startswith("--profiling="):
            asked = a.split("=", 1)[1].strip().lower() not in ("0", "false", "no", "off", "")
            continue
        out.append(a)
    if len(out) != len(argv) and warn:
        warnings.warn(
            "the deepspeed launcher has no --profiling flag: removed it; nbprof enables DeepSpeed's "
            "flops_profiler/comms_logger/wall_clock_breakdown through the config (profiling_config) and the "
            "torch.profiler window through nbprof.deepspeed.attach",
            DeepSpeedConfigWarning,
            stacklevel=2,
        )
    return out, asked
