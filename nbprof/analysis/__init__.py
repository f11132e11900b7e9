"""Analyses: pure functions over a ``Trace`` returning pandas DataFrames (no display code)."""

from . import advisor, annotations, compare, kernels, launch, launch_ops, memory, operators, steps, utilization
from .compare import Comparison  # the function stays compare.compare
from .kernels import kernel_summary
from .memory import growth_by_step, largest_allocations, memory_curve, memory_peak, suspected_leaks
from .operators import SORT_KEYS, operator_summary

__all__ = [
    "SORT_KEYS",
    "Comparison",
    "advisor",
    "annotations",
    "compare",
    "growth_by_step",
    "kernel_summary",
    "kernels",
    "largest_allocations",
    "launch",
    "launch_ops",
    "memory",
    "memory_curve",
    "memory_peak",
    "operator_summary",
    "operators",
    "steps",
    "suspected_leaks",
    "utilization",
]
