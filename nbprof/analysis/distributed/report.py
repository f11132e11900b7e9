"""The distributed report: every multi-rank table of :mod:`nbprof.analysis.distributed` at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ...trace.model import Trace
from .comms import _COLL_COLUMNS, collective_summary, collectives
from .overlap_skew import collective_skew, memory_per_rank, overlap, skew, zero_stage_pattern
from .waits import _WT_COLUMNS, stragglers, wait_transfer, wait_transfer_summary


@dataclass
class DistributedReport:
    """Everything :func:`distributed_report` computes (each a DataFrame, see the functions)."""

    collectives: pd.DataFrame
    summary: pd.DataFrame
    overlap: pd.DataFrame
    skew: pd.DataFrame
    collective_skew: pd.DataFrame
    memory: pd.DataFrame
    zero: dict[int, Any]
    #: :func:`wait_transfer`, :func:`wait_transfer_summary`, :func:`stragglers` (issue 24)
    wait_transfer: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_WT_COLUMNS))
    wait_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    stragglers: pd.DataFrame = field(default_factory=pd.DataFrame)

    def __repr__(self) -> str:
        return (f"DistributedReport(ranks={sorted(self.overlap['rank'].tolist())}, "
                f"collectives={len(self.collectives)}, zero={self.zero})")


def distributed_report(traces: Sequence[Trace]) -> DistributedReport:
    """Run every analysis of this module over the traces of one job (one per rank)."""
    traces = list(traces)
    coll = [collectives(t) for t in traces]
    coll = [c for c in coll if len(c)]
    wt = wait_transfer(traces)
    return DistributedReport(
        collectives=pd.concat(coll, ignore_index=True) if coll else pd.DataFrame(columns=_COLL_COLUMNS),
        summary=collective_summary(traces),
        overlap=overlap(traces),
        skew=skew(traces),
        collective_skew=collective_skew(traces),
        memory=memory_per_rank(traces),
        zero={t.meta.rank: zero_stage_pattern(t).stage for t in traces},
        wait_transfer=wt,
        wait_summary=wait_transfer_summary(wt),
        stragglers=stragglers(wt),
    )
