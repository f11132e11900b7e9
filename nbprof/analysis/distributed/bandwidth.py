"""Bus bandwidth across ranks: per rank and collective, and as a fraction of the link it crossed.

Computed from the job's per-rank reductions (:mod:`nbprof.analysis.distributed.reductions`): pass the traces
(one per rank) or their concatenated reductions. Formulas: :mod:`nbprof.analysis.distributed`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .comms import busbw_factor
from .reductions import analysis_collectives, job_reductions


def collective_summary(source: Any) -> pd.DataFrame:
    """Per rank and collective: ``rank, collective, family, count, total_ns, mean_ns, total_bytes,
    algbw_bytes_per_s, busbw_bytes_per_s, group_size``.

    Bandwidths are time-weighted (total bytes over total time of the calls that have a size); see the
    module docstring for the formula and units.

    Parameters
    ----------
    source : Trace, iterable of Trace, or mapping of table name to frame
        The ranks' traces or their concatenated reductions (the ``collectives`` table).
    """
    cols = ["rank", "collective", "family", "count", "total_ns", "mean_ns", "total_bytes", "algbw_bytes_per_s",
            "busbw_bytes_per_s", "group_size"]
    c = analysis_collectives(job_reductions(source, ("collectives",))["collectives"])
    if c.empty:
        return pd.DataFrame(columns=cols)
    sized = c["msg_bytes"].notna().to_numpy() & (c["dur_ns"].to_numpy() > 0)
    c = c.assign(sized=sized, sized_bytes=c["msg_bytes"].where(sized, 0.0), sized_ns=c["dur_ns"].where(sized, 0))
    out = c.groupby(["rank", "collective"], sort=True).agg(
        family=("family", "first"), count=("dur_ns", "size"), total_ns=("dur_ns", "sum"), mean_ns=("dur_ns", "mean"),
        n_sized=("sized", "sum"), sized_bytes=("sized_bytes", "sum"), sized_ns=("sized_ns", "sum"),
        group_size=("group_size", "first")).reset_index()
    has = out["n_sized"].to_numpy() > 0
    tb = np.where(has, out["sized_bytes"].to_numpy(np.float64), np.nan)
    tt = np.where(has, out["sized_ns"].to_numpy(np.float64) * 1e-9, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        alg = np.where(has & (tt > 0), tb / tt, np.nan)
    factor = np.array([busbw_factor(str(k), int(n)) for k, n in zip(out["collective"], out["group_size"])])
    out = out.assign(rank=out["rank"].astype(np.int64), count=out["count"].astype(np.int64),
                     total_ns=out["total_ns"].astype(np.int64), mean_ns=out["mean_ns"].astype(np.float64),
                     total_bytes=tb, algbw_bytes_per_s=alg, busbw_bytes_per_s=alg * factor,
                     group_size=out["group_size"].astype(np.int64))
    return out[cols]


def busbw_vs_link(frame: Any, link: str | None = None, *,
                  peak_bytes_per_s: float | None = None, override: Any = None, inter_link: str | None = None,
                  gpus_per_node: int = 8) -> pd.DataFrame:
    """Bus bandwidth as a fraction of the peak of the link it crossed (see :mod:`nbprof.analysis.links`).

    A two-tier link model: a collective whose group fits in one node (``group_size <= gpus_per_node``)
    runs over the intra-node link (``link``: NVLink, xGMI, PCIe); a larger group is bottlenecked by the
    inter-node network (``inter_link``: the NIC, one per GPU as in rail-optimised clusters), whatever the
    intra-node link (nccl-tests ``doc/PERFORMANCE.md``: busbw "should reflect the speed of the hardware
    bottleneck"). A fraction above 1 means the model does not fit the measurement (a wrong link or tier,
    in-network reduction such as NVLS/SHARP, nccl-tests#153, #312, or a duration that misses part of
    the transfer): such rows have ``model_fits`` False and must not be read as a utilisation.

    Parameters
    ----------
    frame : DataFrame, Trace, sequence of Trace, or mapping of table name to frame
        A frame with ``busbw_bytes_per_s`` (:func:`collectives` or :func:`collective_summary`), or traces or
        their concatenated reductions (their :func:`collective_summary`).
    link : str, optional
        The intra-node tier: a row of the link table (``nvlink4``, ``pcie5``, ``xgmi_mi300x``...); default
        :func:`~nbprof.analysis.links.guess_link` of the first rank's GPU (``rank_info.link``; traces and
        reductions only).
    peak_bytes_per_s : float, optional
        Your own per-direction peak of the intra-node tier; wins over ``link``'s (``link`` is then only a
        label).
    override : mapping or path, optional
        Passed to :func:`~nbprof.analysis.links.link_peaks`.
    inter_link : str, optional
        The inter-node tier (``ib_ndr``, ``roce400``...); without it, rows of groups larger than a node
        have NaN fractions (their bottleneck is unknown).
    gpus_per_node : int, default 8
        Ranks per node (HGX/DGX and MI300X platforms have 8): a group larger than this spans nodes.

    Returns
    -------
    pandas.DataFrame
        ``frame`` (for traces, :func:`collective_summary`: ``rank, collective, family, count, total_ns,
        mean_ns, total_bytes, algbw_bytes_per_s, busbw_bytes_per_s, group_size``) plus ``tier``
        (``"intra-node"``/``"inter-node"``), ``link`` (that tier's link), ``link_peak_bytes_per_s``,
        ``busbw_link_fraction`` (busbw / peak), ``achievable_bytes_per_s`` (peak x NCCL's achievable
        fraction, NaN for a user peak of an unknown link), ``busbw_achievable_fraction`` and
        ``model_fits`` (False where ``busbw_link_fraction`` > 1). Without a link or peak for a row's tier
        its fractions are NaN (and ``model_fits`` True: nothing is claimed).

    Raises
    ------
    ValueError
        Unknown link or inter_link.
    """
    from .. import links as L

    if isinstance(frame, pd.DataFrame):
        out = frame.copy()
    else:
        red = job_reductions(frame, ("rank_info", "collectives"))
        links = red["rank_info"]["link"]
        if link is None and peak_bytes_per_s is None and len(links) and links.iloc[0] is not None:
            link = str(links.iloc[0])
        out = collective_summary(red)
    table = L.link_peaks(override)

    def tier_peaks(name: str | None, own: float | None) -> tuple[float, float]:
        peak = ach = float("nan")
        if name is not None:
            row = table[table["link"] == name]
            if row.empty and own is None:
                msg = f"unknown link {name!r}; choose from {table['link'].tolist()} or pass peak_bytes_per_s"
                raise ValueError(msg)
            if len(row):
                peak = float(row["peak_bytes_per_s"].iloc[0])
                ach = float(row["achievable_bytes_per_s"].iloc[0])
        if own is not None:
            frac = ach / peak if peak == peak and peak > 0 else float("nan")
            peak = float(own)
            ach = peak * frac
        return peak, ach

    intra_peak, intra_ach = tier_peaks(link, peak_bytes_per_s)
    inter_peak, inter_ach = tier_peaks(inter_link, None) if inter_link is not None else (float("nan"), float("nan"))
    bus = out["busbw_bytes_per_s"].astype(float) if "busbw_bytes_per_s" in out else pd.Series(float("nan"), index=out.index)
    gs = out["group_size"].to_numpy(dtype=np.float64) if "group_size" in out else np.full(len(out), np.nan)
    inter = gs > gpus_per_node
    peak = np.where(inter, inter_peak, intra_peak)
    ach = np.where(inter, inter_ach, intra_ach)
    out["tier"] = np.where(inter, "inter-node", "intra-node")
    out["link"] = pd.Series([inter_link if x else link for x in inter], index=out.index, dtype=object)
    out["link_peak_bytes_per_s"] = peak
    with np.errstate(divide="ignore", invalid="ignore"):
        out["busbw_link_fraction"] = bus.to_numpy() / peak
        out["achievable_bytes_per_s"] = ach
        out["busbw_achievable_fraction"] = bus.to_numpy() / ach
    out["model_fits"] = ~(out["busbw_link_fraction"].to_numpy(dtype=np.float64) > 1.0)
    return out
