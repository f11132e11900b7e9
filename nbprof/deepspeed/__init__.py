"""DeepSpeed support: profiling config, per-rank torch.profiler windows, log parsers, a 2-rank runner.

- :mod:`nbprof.deepspeed.config` -- ``profiling_config()``: a valid DeepSpeed config fragment
  (flops_profiler, comms_logger, wall_clock_breakdown, log_level) plus nbprof's profiler window;
  translates the seed's invented ``"profiler"`` section / ``--profiling`` flag with a warning.
- :mod:`nbprof.deepspeed.attach` -- ``attach(engine, start_step, end_step, out_dir)``.
- :mod:`nbprof.deepspeed.parsers` -- flops profiler, comms logger, timers, see_memory_usage -> DataFrames.
- :mod:`nbprof.deepspeed.run` -- ``run_example(stage=2)``: a real 2-rank CPU run under torchrun.

Importing this package does not import deepspeed or torch.
"""

from __future__ import annotations

from .config import DeepSpeedConfigWarning, profiling_config, translate_seed_config
from .parsers import (
    CommsLog,
    DeepSpeedLog,
    FlopsProfile,
    parse_comms_ops,
    parse_comms_summary,
    parse_flops_profile,
    parse_flops_profiles,
    parse_log,
    parse_memory_usage,
    parse_timers,
    zero_stage_of_traces,
)


def attach(engine, start_step: int, end_step: int, out_dir, **kwargs):
    """See :func:`nbprof.deepspeed.attach.attach` (imported lazily: it needs torch)."""
    from .attach import attach as _attach

    return _attach(engine, start_step, end_step, out_dir, **kwargs)


def run_example(*args, **kwargs):
    """See :func:`nbprof.deepspeed.run.run_example`."""
    from .run import run_example as _run

    return _run(*args, **kwargs)


__all__ = [
    "attach",
    "run_example",
    "profiling_config",
    "translate_seed_config",
    "DeepSpeedConfigWarning",
    "FlopsProfile",
    "CommsLog",
    "DeepSpeedLog",
    "parse_flops_profile",
    "parse_flops_profiles",
    "parse_comms_summary",
    "parse_comms_ops",
    "parse_timers",
    "parse_memory_usage",
    "parse_log",
    "zero_stage_of_traces",
]
