"""Analyses: pure functions over a ``Trace`` returning pandas DataFrames (no display code)."""

# part 2 (steps, utilisation, launch, advisor); other analyses add their own imports
from . import advisor, launch, steps, utilization  # noqa: F401
