"""Analyses: pure functions over a ``Trace`` returning pandas DataFrames (no display code)."""

# part 2 (steps, utilisation, launch, advisor); other analyses add their own imports
from . import advisor, launch, steps, utilization  # noqa: F401

# part 1 (operators, kernels, memory, compare)
from . import compare, kernels, memory, operators  # noqa: E402,F401
from .compare import Comparison  # noqa: E402,F401  (the function stays compare.compare)
from .kernels import kernel_summary  # noqa: E402,F401
from .memory import growth_by_step, largest_allocations, memory_curve, memory_peak, suspected_leaks  # noqa: E402,F401
from .operators import SORT_KEYS, operator_summary  # noqa: E402,F401
