"""Peak bandwidth of GPU interconnects, and bus bandwidth as a fraction of it.

The table (``nbprof/analysis/data/link_peaks.csv``, one row per link, with its sources) gives each
link's **per-direction** peak per GPU (NVLink, xGMI: all links of one GPU together) or per port
(PCIe x16, one NIC): nccl-tests' bus bandwidth is compared with the unidirectional figure
(NVIDIA/nccl-tests#189: an A100's ~235 GB/s is ~80 % of the 300 GB/s per direction, not of the
advertised 600 GB/s "total"). nccl-tests' ``doc/PERFORMANCE.md``: busbw "should reflect the speed of
the hardware bottleneck"; NVIDIA/nccl-tests#40 (sjeaugey): "The Bus BW column should reach the peak
bandwidth of your platform ... for large enough sizes".

What NCCL's developers say is achievable (the ``achievable_fraction`` column, each with its source):
NVLink ~80 % of the line rate (SMs move 128-byte payloads: 25 GB/s per link -> ~20 GB/s effective,
nccl-tests#149; H100 ~360-370 of 450 GB/s, nccl-tests#312, nccl#1374); InfiniBand/RoCE ~96 %
(24 GB/s per 200G NIC, 12 GB/s per 100G NIC, nccl-tests#119). PCIe and xGMI fractions are rules of
thumb, marked so. NVLS/SHARP (in-network reduction) can report busbw above the link peak
(nccl-tests#153, #312): a fraction > 1 means the formula, not the wire.

Units: bytes/s (1 GB/s = 1e9 bytes/s; the CSV writes GB/s).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import resources

import pandas as pd

from ..trace.model import Trace

__all__ = ["LINK_PEAKS_CSV", "link_peaks", "link_peak", "guess_link"]

LINK_PEAKS_CSV = "data/link_peaks.csv"

_COLUMNS = ["link", "family", "peak_bytes_per_s", "achievable_fraction", "achievable_bytes_per_s", "description",
            "source", "fraction_source"]


def link_peaks(override: Mapping[str, float] | str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The link table.

    Parameters
    ----------
    override : mapping or path, optional
        ``{link: peak_bytes_per_s}`` (a new name adds a link, source ``"user override"``), or the path of
        a CSV with the columns of ``data/link_peaks.csv`` (``peak_GBps`` in GB/s) whose rows replace or
        add to the built-in ones.

    Returns
    -------
    pandas.DataFrame
        ``link, family, peak_bytes_per_s`` (per direction), ``achievable_fraction``,
        ``achievable_bytes_per_s``, ``description, source, fraction_source``.

    Raises
    ------
    ValueError
        A non-positive override.
    """
    with resources.files("nbprof.analysis").joinpath(LINK_PEAKS_CSV).open("r", encoding="utf-8") as f:
        t = pd.read_csv(f)
    if override is not None:
        if isinstance(override, Mapping):
            rows = []
            for name, peak in override.items():
                if not float(peak) > 0:
                    msg = f"link peak override {name!r} must be > 0 bytes/s, got {peak!r}"
                    raise ValueError(msg)
                old = t[t["link"] == name]
                frac = float(old["achievable_fraction"].iloc[0]) if len(old) else float("nan")
                fam = str(old["family"].iloc[0]) if len(old) else "user"
                rows.append(dict(link=name, family=fam, peak_GBps=float(peak) / 1e9, achievable_fraction=frac,
                                 description="user override", source="user override",
                                 fraction_source=str(old["fraction_source"].iloc[0]) if len(old) else ""))
            extra = pd.DataFrame(rows)
        else:
            extra = pd.read_csv(os.fspath(override))
        t = pd.concat([t[~t["link"].isin(extra["link"])], extra], ignore_index=True)
    t["peak_bytes_per_s"] = t["peak_GBps"].astype(float) * 1e9
    t["achievable_bytes_per_s"] = t["peak_bytes_per_s"] * t["achievable_fraction"].astype(float)
    return t[_COLUMNS].reset_index(drop=True)


def link_peak(link: str, override: Mapping[str, float] | str | os.PathLike[str] | None = None) -> float:
    """Per-direction peak of ``link`` in bytes/s (see :func:`link_peaks`).

    >>> link_peak("nvlink4") / 1e9, link_peak("ib_ndr") / 1e9
    (450.0, 50.0)

    Raises
    ------
    ValueError
        Unknown link (the message lists the known ones).
    """
    t = link_peaks(override)
    row = t[t["link"] == link]
    if row.empty:
        msg = f"unknown link {link!r}; choose from {t['link'].tolist()} or pass override={{name: bytes_per_s}}"
        raise ValueError(msg)
    return float(row["peak_bytes_per_s"].iloc[0])


_GPU_LINK = (("GB200", "nvlink5"), ("B200", "nvlink5"), ("B100", "nvlink5"), ("H200", "nvlink4"),
             ("H100", "nvlink4"), ("H800", "nvlink4"), ("H20", "nvlink4"), ("A100", "nvlink3"), ("A800", "nvlink3"),
             ("V100", "nvlink2"), ("MI300", "xgmi_mi300x"), ("MI250", "xgmi_mi250x"))


def guess_link(trace: Trace) -> str | None:
    """The intra-node link of the trace's GPU from its device name (H100 SXM -> ``nvlink4``...), or None.

    Only a guess: a PCIe card of the same name (H100 PCIe) has no NVLink switch; inter-node collectives
    run at the NIC's rate. Pass the link explicitly when you know it.
    """
    for d in trace.meta.device_properties:
        name = str(d.get("name", "")).upper()
        if "PCIE" in name:
            continue
        for key, link in _GPU_LINK:
            if key in name:
                return link
    return None
