"""What grew in a watched step: the phase of a slow step, from the step watch's per-step log.

The log is ``nbprof.sources.watch_run.WatchRun.steps`` (int64 ns per phase; ``nbprof.capture.watch``
defines each). A step's **excess** in a phase is its time minus that phase's median over the unflagged,
unprofiled steps; the phase that **grew** is the one with the largest excess among :data:`PHASES`. The main
thread's off-CPU time outside the DataLoader (``blocked_ns``) is named ``io``: blocking I/O, sleeps and waits
that yield the CPU. When no phase explains at least half of the step's excess, ``other`` (unattributed
host time) is named instead.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["PHASES", "what_grew"]

#: phase name -> per-step log column
PHASES: dict[str, str] = {"data_wait": "data_wait_ns", "forward": "forward_ns", "backward": "backward_ns",
                          "optimizer": "optimizer_ns", "gc": "gc_ns", "io": "blocked_ns"}


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
