"""What grew in a watched step: the phase of a slow step, from the step watch's per-step log.

The log is ``nbprof.sources.watch_run.WatchRun.steps`` (int64 ns per phase; ``nbprof.capture.watch``
defines each). A step's **excess** in a phase is its time minus that phase's median over the unflagged,
unprofiled steps; the phase that **grew** is the one with the largest excess among :data:`PHASES`. The main
thread's off-CPU time outside the DataLoader (``blocked_ns``) is named ``io``: blocking I/O, sleeps and waits
that yield the CPU; its wait for a CPU held by other processes (``runqueue_ns``) is ``cpu_wait``: a slow step
from CPU contention, not from the job. When no phase explains at least half of the step's excess, ``other``
(unattributed host time) is named instead.

In a captured window (a trace), :func:`step_syncs` counts the host syncs of each step: the calls the
``host_sync`` rule names (:data:`nbprof.analysis.rules_host.SYNC_NAMES`: ``aten::item``,
``aten::_local_scalar_dense``, ``cudaStreamSynchronize``, ``cudaDeviceSynchronize`` ...), on CPU traces too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ..trace.model import Trace

__all__ = ["PHASES", "what_grew", "step_syncs"]

#: phase name -> per-step log column
PHASES: dict[str, str] = {"data_wait": "data_wait_ns", "forward": "forward_ns", "backward": "backward_ns",
                          "optimizer": "optimizer_ns", "gc": "gc_ns", "io": "blocked_ns", "cpu_wait": "runqueue_ns"}


def what_grew(steps: pd.DataFrame) -> pd.DataFrame:
    """The phase that grew in each flagged step.

    Parameters
    ----------
    steps : pandas.DataFrame
        The watch's per-step log (``step``, ``step_ns``, ``flagged``, ``profiled`` and the :data:`PHASES` columns).

    Returns
    -------
    pandas.DataFrame
        One row per flagged step: ``step``, ``step_ns``, ``excess_ns`` (step minus the median step, int64 ns),
        ``grew`` (a :data:`PHASES` name or ``other``), ``grew_ns`` (that phase's excess, int64 ns).
    """
    cols = ["step", "step_ns", "excess_ns", "grew", "grew_ns"]
    if steps.empty or not steps["flagged"].any():
        return pd.DataFrame({c: pd.Series(dtype="object" if c == "grew" else "int64") for c in cols})
    calm = steps[~steps["flagged"].astype(bool) & ~steps["profiled"].astype(bool)]
    base = calm if len(calm) else steps
    med = {p: float(np.median(base[c])) for p, c in PHASES.items() if c in steps.columns}
    med_step = float(np.median(base["step_ns"]))
    slow = steps[steps["flagged"].astype(bool)]
    ex = pd.DataFrame({p: slow[PHASES[p]].to_numpy(np.float64) - m for p, m in med.items()}, index=slow.index)
    best = ex.idxmax(axis=1)
    best_ns = ex.max(axis=1)
    excess = slow["step_ns"].to_numpy(np.float64) - med_step
    named = np.where(best_ns.to_numpy() >= 0.5 * excess, best.to_numpy(), "other")
    grew_ns = np.where(named == "other", excess, best_ns.to_numpy())
    return pd.DataFrame({"step": slow["step"].to_numpy(np.int64), "step_ns": slow["step_ns"].to_numpy(np.int64),
                         "excess_ns": excess.astype(np.int64), "grew": named, "grew_ns": grew_ns.astype(np.int64)})


def step_syncs(trace: Trace) -> pd.DataFrame:
    """Host syncs per step of a trace (a captured window, or any trace with steps).

    A sync is a host event named in :data:`nbprof.analysis.rules_host.SYNC_NAMES` (the ``host_sync`` rule's
    definition) that starts inside the step's window (:func:`nbprof.analysis.steps.step_windows`) and lies inside
    no other such event (``aten::item`` and the ``aten::_local_scalar_dense`` it calls are one sync).

    Returns
    -------
    pandas.DataFrame
        One row per step (every step, 0 when it has none): ``step``, ``syncs`` (int64 count), ``sync_ns``
        (int64 ns: their total duration).
    """
    from ..trace import predicates as pred
    from .rules_host import SYNC_NAMES
    from .steps import step_windows

    w = step_windows(trace).sort_values("start_ns")
    out = pd.DataFrame({"step": w["step"].to_numpy(np.int64), "syncs": np.zeros(len(w), np.int64),
                        "sync_ns": np.zeros(len(w), np.int64)})
    ev = trace.events
    m = np.flatnonzero(np.asarray(pred.name_mask(ev["name"], lambda n: n in SYNC_NAMES), dtype=bool)
                       & (ev["device"].to_numpy() < 0))
    if not len(w) or not m.size:
        return out
    ts = ev["ts_ns"].to_numpy(np.int64)[m]
    end = ts + ev["dur_ns"].to_numpy(np.int64)[m]
    order = np.lexsort((-end, ts))
    ts, end = ts[order], end[order]
    outer = end > np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(end)[:-1]))
    ts, end = ts[outer], end[outer]
    ws, we = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
    i = np.searchsorted(ws, ts, side="right") - 1
    ok = (i >= 0) & (ts < we[np.maximum(i, 0)])
    out["syncs"] = np.bincount(i[ok], minlength=len(w)).astype(np.int64)
    out["sync_ns"] = np.bincount(i[ok], weights=(end - ts)[ok], minlength=len(w)).astype(np.int64)
    return out
