"""``nbprof.watch``: the always-on step watch for a notebook cell, a script or a trainer callback (glue).

::

    with nbprof.watch("runs/a") as w:        # hooks only: no profiler until a step is k x the median
        for x, y in loader:
            ...
            opt.step()                         # a step ends here (or at nbprof.watch.step())
    nbprof.watch.captured("runs/a")          # each captured slow step with its verdict

The monitor, trigger and run folder are :mod:`nbprof.capture.watch` (capture: files only); this module adds
what needs loading: :func:`captured` loads each kept window's trace and computes
:func:`nbprof.analysis.verdict.verdict` on the flagged step alone (its ``ProfilerStep#N`` row of the step
breakdown), next to what the watch's own hooks say grew (:func:`nbprof.analysis.watch.what_grew`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

from .capture.watch import Watch, active_watch

__all__ = ["watch", "step", "captured", "default_run_dir", "run_script", "Watch"]


def default_run_dir(root: str | os.PathLike[str] = "nbprof-watch") -> Path:
    """``<root>/run-<YYYYmmdd-HHMMSS>`` (a new name when that exists)."""
    base = Path(root) / time.strftime("run-%Y%m%d-%H%M%S")
    p, n = base, 1
    while p.exists():
        p, n = base.with_name(f"{base.name}.{n}"), n + 1
    return p


def step() -> None:
    """Mark the end of a training step for the running watch (nothing when no watch runs)."""
    w = active_watch()
    if w is not None:
        w.step()


def captured(run: str | os.PathLike[str], *, top: int = 3) -> pd.DataFrame:
    """The verdict of every captured flagged step of a run folder.

    Parameters
    ----------
    run : path-like
        A watch run folder (``summary.json``, ``steps.parquet``, ``capture-*.pt.trace.json.gz``).
    top : int
        Contributors kept per verdict.

    Returns
    -------
    pandas.DataFrame
        One row per flagged step inside a kept window: ``step`` (watch step), ``profiler_step`` (its
        ``ProfilerStep#N`` in the trace), ``trace`` (path), ``step_ns`` / ``median_ns`` (watch, int64 ns),
        ``grew`` (the watch's phase that grew most, :func:`nbprof.analysis.watch.what_grew`), ``bound``,
        ``bound_ns``, ``bound_ratio``, ``trace_step_ns`` (the verdict of that step alone in the trace),
        ``contributors`` (event names of the bound, largest first), ``syncs`` / ``median_syncs`` (host syncs in
        that step and the median over the window's steps: :func:`nbprof.analysis.watch.step_syncs`),
        ``in_window_verdict`` (the step is among the steady steps the window's own verdict averages:
        :func:`nbprof.analysis.steps.steady_state` takes a run of slow *leading* steps of a trace for warm-up),
        ``first_rule`` / ``first_finding`` (the rule and title of the verdict's first finding: the fix with the
        largest predicted saving on that step, ``""`` when none) and ``findings`` (the advisor's rules on the
        captured window, ranked by their saving on that step: :func:`nbprof.analysis.findings.rank`). Empty when
        nothing was captured.

    Raises
    ------
    nbprof.errors.TraceFormatError
        When the folder is not a watch run (from :func:`nbprof.sources.watch_run.read_run`).
    """
    from .analysis import steps as st
    from .analysis.advisor import advise
    from .analysis.findings import rank
    from .analysis.verdict import verdict
    from .analysis.watch import step_syncs, what_grew
    from .sources import load
    from .sources.watch_run import read_run

    r = read_run(run)
    grew = what_grew(r.steps).set_index("step")
    rows = []
    for cap in r.summary.get("captures", []):
        path = r.path / cap["path"]
        tr = load(str(path))
        bd = st.step_breakdown(tr)
        found = advise(tr)  # the window's findings; ranked for each flagged step by what they save on it
        syncs = step_syncs(tr).set_index("step")["syncs"]
        steady = set(st.steady_breakdown(tr)["step"].tolist())  # what the window's own verdict averages
        for s in cap.get("flagged_steps", []):
            n = cap["profiler_steps"].get(str(s), cap["profiler_steps"].get(s))
            one = bd[bd["step"] == n]
            v = verdict(tr, breakdown=one, top=top, findings=found)
            ranked = rank(found, steps=[n])
            rec = r.steps.set_index("step").loc[s]
            rows.append({"step": int(s), "profiler_step": n, "trace": str(path), "step_ns": int(rec["step_ns"]),
                         "median_ns": int(rec["median_ns"]),
                         "grew": grew.loc[s, "grew"] if s in grew.index else "",
                         "bound": v.bound, "bound_ns": v.bound_ns, "bound_ratio": v.bound_ratio,
                         "trace_step_ns": v.step_ns, "contributors": [c.name for c in v.contributors],
                         "syncs": int(syncs.get(n, 0)), "median_syncs": float(syncs.median()) if len(syncs) else 0.0,
                         "in_window_verdict": n in steady, "first_rule": v.first_rule,
                         "first_finding": next((f.title for f in ranked if f.rule == v.first_rule), ""),
                         "findings": [f.rule for f in ranked]})
    cols = ["step", "profiler_step", "trace", "step_ns", "median_ns", "grew", "bound", "bound_ns", "bound_ratio",
            "trace_step_ns", "contributors", "syncs", "median_syncs", "in_window_verdict", "first_rule", "first_finding", "findings"]
    return pd.DataFrame(rows, columns=cols)


class _WatchEntry:
    """``nbprof.watch(...)`` makes a :class:`Watch`; ``nbprof.watch.step()`` marks a step; ``.captured(run)``."""

    step = staticmethod(step)
    captured = staticmethod(captured)

    def __call__(self, run_dir: str | os.PathLike[str] | None = None, *, live: bool = False,
                 **kwargs: Any) -> Watch:
        """A :class:`nbprof.capture.watch.Watch` on ``run_dir`` (default :func:`default_run_dir`); ``live=True``
        displays the live chart (:func:`nbprof.viz.watch.watch_view`) now, in the notebook; other keywords go
        to :class:`Watch` (``k``, ``window``, ``warmup``, ``min_excess_ns``, ``predicate``, ``capture_steps``, ...)."""
        w = Watch(default_run_dir() if run_dir is None else run_dir, **kwargs)
        if live:
            from IPython.display import display

            from .viz.watch import watch_view

            w.view = watch_view(w)
            display(w.view)
        return w

    def __repr__(self) -> str:
        return "nbprof.watch(run_dir=None, *, live=False, k=3.0, ...): the always-on step watch"


watch = _WatchEntry()


def run_script(script: str, args: list[str] | tuple[str, ...], run_dir: str | os.PathLike[str],
               **kwargs: Any) -> tuple[int, Watch]:
    """Run ``script`` as ``__main__`` (``runpy.run_path``, ``sys.argv = [script, *args]``) inside a watch on
    ``run_dir``; returns (the script's exit status, the finished :class:`Watch`). The script's own exceptions
    propagate after the run folder is written; ``SystemExit`` becomes the status."""
    import runpy
    import sys

    old_argv = sys.argv
    sys.argv = [script, *args]
    code = 0
    w = Watch(run_dir, **kwargs)
    try:
        with w:
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old_argv
    return code, w
