"""Human units, in one place: durations (ns -> ns/µs/ms/s), milliseconds, sizes (bytes -> KiB/MiB/GiB), FLOPs,
percentages and rates.

The ground floor: imports nothing from nbprof, so every layer may use it. Analyses still return int64 ns and
bytes; they format only the text of a finding (title, evidence) and reprs, and they do it here. Every text,
HTML, TensorBoard and viewer output of nbprof formats numbers through these functions, so a duration or a size
reads the same in the operator table, the dashboard, a finding and TensorBoard; ``tests/test_layers.py`` fails
on a formatter defined anywhere else. Two forms where two are needed: a table cell (``fmt_ms``: the number, the
unit in the column header; ``fmt_pct``: ``55.51 %``) and a sentence (``fmt_ms_text``: ``12.345 ms``;
``fmt_pct_text``: ``87%``, Python's ``:.0%``). Missing values (``None``, NaN) format as ``""``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["is_missing", "fmt_devices", "fmt_epoch_digits", "fmt_ns", "fmt_ns_short", "fmt_ms", "fmt_ms_text", "fmt_ns_of", "fmt_bytes",
           "fmt_flops", "fmt_pct", "fmt_pct_text", "fmt_delta_ns", "fmt_rate"]


def is_missing(v: Any) -> bool:
    """True for ``None`` and NaN (the values the formatters turn into ``""``)."""
    if v is None:
        return True
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return False


def fmt_ns(ns: float) -> str:
    """Human duration with its unit: ``1.500 s``, ``1.230 ms``, ``456.00 µs``, ``789 ns``."""
    if is_missing(ns):
        return ""
    a = abs(float(ns))
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def fmt_ns_short(ns: float) -> str:
    """A duration for a sentence, three significant digits in :func:`fmt_ns`'s unit (a step time of a
    sentence, not a table cell: 560.023 ms reads as 560 ms).

    >>> fmt_ns_short(560_023_000), fmt_ns_short(48_312_000), fmt_ns_short(1_419_000_000), fmt_ns_short(789)
    ('560 ms', '48.3 ms', '1.42 s', '789 ns')
    """
    if is_missing(ns):
        return ""
    a = abs(float(ns))
    if a < 1e3:
        return f"{ns:.0f} ns"
    unit, div = ("s", 1e9) if a >= 1e9 else ("ms", 1e6) if a >= 1e6 else ("µs", 1e3)
    v = float(ns) / div
    digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    return f"{v:.{digits}f} {unit}"


def fmt_ms(ns: float, digits: int = 3) -> str:
    """A duration in ns as a number of milliseconds (no unit), ``digits`` decimals, thousands grouped: ``1,234.500``."""
    if is_missing(ns):
        return ""
    return f"{float(ns) / 1e6:,.{int(digits)}f}"


def fmt_ms_text(ns: float, digits: int = 3) -> str:
    """A duration in ns as milliseconds with the unit, for a sentence (a finding's title, a repr), not grouped.

    >>> fmt_ms_text(3_346_152_000), fmt_ms_text(1_500), fmt_ms_text(float("nan"))
    ('3346.152 ms', '0.002 ms', '')
    """
    if is_missing(ns):
        return ""
    return f"{float(ns) / 1e6:.{int(digits)}f} ms"


def fmt_ns_of(part_ns: float, whole_ns: float) -> str:
    """A part of a duration and the whole in the whole's unit (s, ms or µs), 1 decimal from 10 up, else 2.

    >>> fmt_ns_of(11_700_000, 18_800_000), fmt_ns_of(900, 2_500)
    ('11.7 of 18.8 ms', '0.90 of 2.50 µs')
    """
    b = float(whole_ns)
    unit, div = ("s", 1e9) if b >= 1e9 else ("ms", 1e6) if b >= 1e6 else ("µs", 1e3)
    digits = 1 if b / div >= 10 else 2
    return f"{float(part_ns) / div:.{digits}f} of {b / div:.{digits}f} {unit}"


def fmt_bytes(b: float) -> str:
    """Human size in binary units: ``512 B``, ``1.50 KiB``, ``2.00 MiB``, ``1.50 GiB`` (thousands grouped)."""
    if is_missing(b):
        return ""
    v = float(b)
    for unit in ("B", "KiB", "MiB"):
        if abs(v) < 1024:
            return f"{v:,.0f} {unit}" if unit == "B" else f"{v:,.2f} {unit}"
        v /= 1024
    return f"{v:,.2f} GiB"


def fmt_flops(f: float) -> str:
    """A FLOP count with a decimal prefix (no unit): ``950``, ``1.50 K``, ``2.00 M``, ``3.10 G``, ``1.00 T``."""
    if is_missing(f):
        return ""
    v = float(f)
    for unit in ("", "K", "M", "G"):
        if abs(v) < 1000:
            return f"{v:,.0f}" if unit == "" else f"{v:,.2f} {unit}"
        v /= 1000
    return f"{v:,.2f} T"


def fmt_pct(ratio: float, digits: int = 2) -> str:
    """A fraction (0..1) as a percentage, ``digits`` decimals: ``0.55514`` -> ``55.51 %``."""
    if is_missing(ratio):
        return ""
    return f"{float(ratio) * 100:.{int(digits)}f} %"


def fmt_pct_text(ratio: float, digits: int = 0) -> str:
    """A fraction (0..1) as a percentage for a sentence, no space (Python's ``:.0%``): ``0.871`` -> ``87%``.

    >>> fmt_pct_text(0.871), fmt_pct_text(0.0059, 1), fmt_pct_text(None)
    ('87%', '0.6%', '')
    """
    if is_missing(ratio):
        return ""
    return f"{float(ratio) * 100:.{int(digits)}f}%"


def fmt_rate(bytes_per_s: float) -> str:
    """A rate in bytes/s with a decimal prefix, as bandwidths are quoted (NCCL's busbw, a link's spec): ``GB/s``.

    >>> fmt_rate(25e9), fmt_rate(float("nan"))
    ('25.00 GB/s', '')
    """
    if is_missing(bytes_per_s):
        return ""
    return f"{float(bytes_per_s) / 1e9:,.2f} GB/s"


def fmt_delta_ns(ns: float) -> str:
    """A signed duration change (after - before): ``+1.230 ms``, ``-456.00 µs``, ``0 ns``."""
    if is_missing(ns):
        return ""
    v = float(ns)
    return ("+" if v > 0 else "-" if v < 0 else "") + fmt_ns(abs(v))


def fmt_devices(names: Sequence[str], used: Sequence[int] | None = None) -> str:
    """A trace's ``deviceProperties`` names, equal names counted, and the devices its events ran on.

    >>> fmt_devices(["Tesla V100"] * 4, [0])
    '4 x Tesla V100 (events on device 0)'
    >>> fmt_devices(["NVIDIA H200"], [0])
    'NVIDIA H200'
    >>> fmt_devices([], [])
    ''
    """
    counts: dict[str, int] = {}
    for n in names:
        counts[str(n)] = counts.get(str(n), 0) + 1
    text = ", ".join(f"{c} x {n}" if c > 1 else n for n, c in counts.items())
    if used is not None and len(names) > 1 and text:
        ids = list(used)
        text += (f" (events on device{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))})" if ids
                 else " (no device events)")
    return text


def fmt_epoch_digits(digits: str) -> str:
    """A Unix time written as digits (a ``tensorboard_trace_handler`` file name's ``<time>``: seconds, ms, µs or ns
    since 1970, told apart by the digit count) as ``YYYY-MM-DD HH:MM:SS UTC``; other text unchanged.

    >>> fmt_epoch_digits("1796187122473433073"), fmt_epoch_digits("1623143089861"), fmt_epoch_digits("")
    ('2026-12-02 04:52:02 UTC', '2021-06-08 09:04:49 UTC', '')
    """
    import datetime as _dt

    d = str(digits).strip()
    if not d.isdigit() or not 10 <= len(d) <= 19:
        return str(digits)
    scale = 10 ** (3 * ((len(d) - 10) // 3))  # 10 digits: s, 13: ms, 16: µs, 19: ns
    t = _dt.datetime.fromtimestamp(int(d) / scale, tz=_dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")
