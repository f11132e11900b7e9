"""Compatibility: ``ProfileResult`` lives in ``nbprof.results.profile``, the sort keys in ``nbprof.analysis.operator_keys``."""

from __future__ import annotations

from .analysis.operator_keys import GROUP_BY, resolve_sort_key
from .results.profile import ProfileResult

__all__ = ["ProfileResult", "resolve_sort_key", "GROUP_BY"]
