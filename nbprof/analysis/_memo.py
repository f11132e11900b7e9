"""Each analysis once per Trace: the one memo of nbprof's cached results (issue 20; issue 35: one mechanism).

A report asks the same questions of one Trace several times (the verdict, the overview view, the
TensorBoard scalars and step 3's comparison all want ``step_breakdown`` and ``advise``). :func:`per_trace`
keeps a function's result on the Trace it was computed from (in ``trace.__dict__``, never in a table, so
nothing is saved with the trace) and hands back that result the next time with the same arguments.

It is the only cache of analysis results: the whole-trace dependency graph
(:func:`nbprof.analysis.critical_path.whole_graph`) and the what-if replay plan of a graph
(``whatif._plan_of``) are ``per_trace`` functions too; the latter shows that the first argument may be any
object a result is a pure function of (a ``Graph``): its memo lives on it and goes with it.

Rules:

- only calls whose arguments are all hashable are kept (a DataFrame argument means "compute"),
- the memo belongs to the Trace's ``events`` frame: a Trace whose ``events`` is replaced by another frame
  (or whose row count changed) starts empty; an object without ``events`` keeps its memo while it lives,
- :func:`clear` forgets one object's memo, or every memo (a generation count) when given nothing,
- DataFrames and Series come back as shallow copies (pandas copy-on-write: the caller may add or change
  columns without touching the memo); lists and dicts come back as new lists/dicts of the same objects.

>>> from nbprof.analysis._memo import per_trace
>>> calls = []
>>> @per_trace
... def n_events(trace, k=1):
...     calls.append(k)
...     return len(trace.events) * k
>>> import nbprof, pandas as pd
>>> tr = nbprof.Trace(pd.DataFrame({"a": [1, 2]}), *(pd.DataFrame() for _ in range(4)), None, None)
>>> n_events(tr), n_events(tr), n_events(tr, k=2), calls
(2, 2, 4, [1, 2])
>>> clear(); n_events(tr), calls
(2, [1, 2, 1])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import pandas as pd

__all__ = ["per_trace", "clear"]

P = ParamSpec("P")
R = TypeVar("R")

_ATTR = "_nbprof_memo"
#: bumped by ``clear()``: every memo made before is stale
_GENERATION = [0]


def _store(trace: Any) -> dict[Any, Any] | None:
    d = getattr(trace, "__dict__", None)
    if d is None:
        return None
    ev = getattr(trace, "events", None)
    owner = (_GENERATION[0],) if ev is None else (_GENERATION[0], id(ev), len(ev))
    memo = d.get(_ATTR)
    if memo is None or memo.get("__owner__") != owner:
        memo = {"__owner__": owner}
        d[_ATTR] = memo
    return memo  # type: ignore[no-any-return]


def _fresh(v: Any) -> Any:
    if isinstance(v, (pd.DataFrame, pd.Series)):
        return v.copy(deep=False)
    if isinstance(v, list):
        return list(v)
    if isinstance(v, dict):
        return dict(v)
    return v


def per_trace(fn: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """Decorate an analysis ``fn(trace, ...)`` so that it runs once per Trace and argument set (see the module)."""

    @functools.wraps(fn)
    def wrapper(trace: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        key = (fn.__module__, fn.__qualname__, args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:
            return fn(trace, *args, **kwargs)
        memo = _store(trace)
        if memo is None:
            return fn(trace, *args, **kwargs)
        if key not in memo:
            memo[key] = fn(trace, *args, **kwargs)
        return _fresh(memo[key])  # type: ignore[no-any-return]

    return wrapper


def clear(trace: Any = None) -> None:
    """Forget every memoised result of ``trace``; of every object when ``trace`` is None."""
    if trace is None:
        _GENERATION[0] += 1
        return
    d = getattr(trace, "__dict__", None)
    if d is not None:
        d.pop(_ATTR, None)
