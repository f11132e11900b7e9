"""Device peaks: the datasheet table (``nbprof/analysis/data/device_peaks.json``) and the match to a trace's device."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import pandas as pd

from ...trace.model import Trace

# --------------------------------------------------------------------------------------------- peaks

_PEAK_DTYPES = ("fp64", "fp64_tensor", "fp32", "fp32_tensor", "tf32", "bf16", "fp16", "fp8")


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, Any], ...]:
    text = resources.files("nbprof.analysis").joinpath("data/device_peaks.json").read_text(encoding="utf-8")
    rows = json.loads(text)["devices"]
    return tuple(rows)


def device_table(trace: Trace | None = None) -> pd.DataFrame:
    """The peak table (``nbprof/analysis/data/device_peaks.json``): one row per device variant with
    ``key``, ``match`` (name regex), ``sms``, ``boost_mhz``, dense peaks in TFLOP/s (``fp64``,
    ``fp64_tensor``, ``fp32``, ``fp32_tensor``, ``tf32``, ``bf16``, ``fp16``, ``fp8``; NaN = no such mode),
    ``bandwidth_gbs`` (GB/s = 10^9 bytes/s), ``source`` (the datasheet) and ``matched`` (True on the
    row :func:`peaks` matches for ``trace``'s device 0; all False without a trace)."""
    df = pd.DataFrame(list(_table())).astype({c: "float64" for c in _PEAK_DTYPES})
    key = peaks(trace).key if trace is not None else None
    df["matched"] = df["key"] == key
    return df


@dataclass
class Peaks:
    """Peaks of one device.

    Attributes
    ----------
    device : str
        Device name as recorded (``deviceProperties`` ``name``), or ``"custom"``.
    key : str or None
        The matched row of the peak table, None when unknown.
    flops_per_s : dict
        Dense peak FLOP/s per dtype column (``fp64``, ``fp32``, ``tf32``, ``bf16``, ``fp16``, ``fp8``,
        ``fp64_tensor``); a dtype without a mode is absent.
    bytes_per_s : float
        Memory bandwidth in bytes/s (NaN when unknown).
    source : str
    note : str
        How the row was matched, or why none was (unknown device, SM count differs).
    """

    device: str
    key: str | None
    flops_per_s: dict[str, float] = field(default_factory=dict)
    bytes_per_s: float = math.nan
    source: str = ""
    note: str = ""

    @property
    def known(self) -> bool:
        """Whether peaks are available."""
        return bool(self.flops_per_s) and not math.isnan(self.bytes_per_s)

    def compute_peak(self, dtype: str, kind: str = "gemm") -> float:
        """Peak FLOP/s for work of ``kind`` in ``dtype``: matrix kinds (gemm, conv, attention) use the
        Tensor Core column (``fp64_tensor`` for fp64; fp32 GEMMs use the FP32 column, as torch's
        default ``allow_tf32=False`` does, or ``fp32_tensor`` where matrix cores run fp32 faster: AMD
        CDNA2), other kinds the FP32 vector peak. NaN when unknown."""
        f = self.flops_per_s
        if kind in ("gemm", "conv", "attention"):
            col = f"{dtype}_tensor" if dtype in ("fp64", "fp32") and f"{dtype}_tensor" in f else dtype
            return f.get(col, f.get("fp32", math.nan))
        return f.get("fp64" if dtype == "fp64" else "fp32", math.nan)


def _row_peaks(row: Mapping[str, Any], device: str, note: str) -> Peaks:
    fl = {c: float(row[c]) * 1e12 for c in _PEAK_DTYPES if row.get(c) is not None}
    return Peaks(device, str(row["key"]), fl, float(row["bandwidth_gbs"]) * 1e9, str(row["source"]), note)


def _clock_mhz(v: Any) -> float | None:
    """A recorded clock rate in MHz: nsys writes Hz, CUDA's ``cudaDeviceProp.clockRate`` kHz."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if not f > 0:
        return None
    return f / 1e6 if f > 1e7 else (f / 1e3 if f > 1e4 else f)


def peaks(trace: Trace | None = None, *, device: int = 0, custom: Mapping[str, Any] | None = None) -> Peaks:
    """The dense peaks of ``trace``'s device ``device``, matched from ``deviceProperties``.

    Parameters
    ----------
    trace : Trace, optional
    device : int, default 0
        Index into ``trace.meta.device_properties`` (by ``id`` when present).
    custom : mapping, optional
        Override or supply peaks: a table ``key`` (``{"key": "H100-SXM5"}``) and/or values in
        TFLOP/s per dtype (``{"bf16": 989.4, ...}``) and ``bandwidth_gbs`` (GB/s). Given values
        replace the matched row's.

    Returns
    -------
    Peaks
        ``known`` is False (and ``note`` says why) when the device is not in the table and no
        ``custom`` values were given: efficiency frames then have NaN peaks and ``bound``.

    Notes
    -----
    Matching: rows whose ``match`` regex finds the device name (case-insensitive); the most
    specific (longest regex) wins, so "H100 PCIe" takes the PCIe row and "A100-SXM4-40GB" the
    40 GB row. A mismatch of the SM count (``numSms``/``multiProcessorCount``) with the row's is
    reported in ``note`` (a MIG slice or a variant not in the table), as is a recorded clock
    (``clockRate``: nsys, in Hz; CUDA's kHz) more than 5 % from the row's boost clock.

    >>> p = peaks(custom={"key": "H200-SXM"})
    >>> p.flops_per_s["bf16"], p.bytes_per_s
    (989400000000000.0, 4800000000000.0)
    """
    rows = _table()
    props: dict[str, Any] = {}
    if trace is not None:
        dp = trace.meta.device_properties
        by_id = [d for d in dp if d.get("id") == device]
        props = by_id[0] if by_id else (dp[device] if 0 <= device < len(dp) else {})
    name = str(props.get("name", ""))
    result = Peaks(name or "unknown", None, note="")
    custom = dict(custom or {})
    if "key" in custom:
        hit = [r for r in rows if r["key"] == custom["key"]]
        if not hit:
            msg = f"unknown peak-table key {custom['key']!r}; choose from {[r['key'] for r in rows]}"
            raise ValueError(msg)
        result = _row_peaks(hit[0], name or "custom", f"custom key {custom['key']}")
    elif name:
        cand = [r for r in rows if re.search(str(r["match"]), name, re.IGNORECASE)]
        if cand:
            best = max(cand, key=lambda r: len(str(r["match"])))
            sms = props.get("numSms", props.get("multiProcessorCount"))
            note = f"matched {best['key']} by name {name!r}"
            if sms is not None and best.get("sms") is not None and int(sms) != int(best["sms"]):
                note += f"; SM count {sms} differs from the row's {best['sms']} (MIG slice or unlisted variant)"
            mhz = _clock_mhz(props.get("clockRate"))
            if mhz and best.get("boost_mhz") and abs(mhz / float(best["boost_mhz"]) - 1) > 0.05:
                note += (f"; recorded clock {mhz:.0f} MHz differs from the datasheet boost {best['boost_mhz']} MHz "
                         "(peaks are at the datasheet clock)")
            result = _row_peaks(best, name, note)
        else:
            result.note = (f"device {name!r} is not in the peak table; pass peaks(custom={{'key': ...}}) or "
                           "custom TFLOP/s and bandwidth_gbs")
    else:
        if trace is not None and trace.has_device:
            # Kineto wrote deviceProperties only from torch 1.9 (2021): older GPU traces have none
            result.note = ("the trace records no deviceProperties (Kineto before torch 1.9 did not write them) "
                           "although it has device activity: peaks unknown; pass peaks(custom={'key': ...})")
        else:
            result.note = "the trace records no deviceProperties and no device activity (a CPU-only trace): peaks unknown"
    for c in _PEAK_DTYPES:
        if c in custom:
            result.flops_per_s[c] = float(custom[c]) * 1e12
    if "bandwidth_gbs" in custom:
        result.bytes_per_s = float(custom["bandwidth_gbs"]) * 1e9
    if any(c in custom for c in (*_PEAK_DTYPES, "bandwidth_gbs")):
        result.note = (result.note + "; " if result.note else "") + "custom values applied"
        if result.key is None:
            result.key = "custom"
    return result
