"""The distributed report: every multi-rank table of :mod:`nbprof.analysis.distributed` at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .bandwidth import collective_summary
from .overlap_skew import collective_skew, memory_per_rank, overlap, skew, zero_stage_pattern
from .reductions import analysis_collectives, by_rank, job_reductions
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


def distributed_report(traces: Any) -> DistributedReport:
    """Run every analysis of this module over one job: its traces (one per rank) or their concatenated
    reductions (:mod:`~nbprof.analysis.distributed.reductions`: ``rank_info``, ``steps``, ``collectives``,
    ``compute``, ``memory``). ``collectives`` is the job's ``collectives`` table in
    :func:`~nbprof.analysis.distributed.collectives`' form (``rank`` int64)."""
    red = job_reductions(traces, ("rank_info", "steps", "collectives", "compute", "memory"))
    coll = analysis_collectives(red["collectives"])
    per_rank = by_rank(coll)
    wt = wait_transfer(red)
    return DistributedReport(
        collectives=coll,
        summary=collective_summary(red),
        overlap=overlap(red),
        skew=skew(red),
        collective_skew=collective_skew(wt),
        memory=memory_per_rank(red),
        zero={int(r): zero_stage_pattern(per_rank.get(int(r), coll.iloc[0:0])).stage for r in red["rank_info"]["rank"]},
        wait_transfer=wt,
        wait_summary=wait_transfer_summary(wt),
        stragglers=stragglers(wt),
    )
