"""Times: float64 µs ``ts`` -> exact int64 ns, and the trace origin.

``ts`` is decoded as float64 µs, which is exact to well below 1 ns for values under 2**43 µs (101
days) when the integer µs are split off before rounding (``_us_to_ns``): all current traces, whose
``ts`` are relative to ``baseTimeNanoseconds``. Old traces write absolute µs since the epoch
(~1.7e15), where float64 steps are 0.25 µs; when such values carry a fraction
(``1712195495519689.047``) the ``ts`` texts are decoded a second time as raw bytes and converted to
ns with integer arithmetic (``_exact_ts_ns``), so no nanosecond is lost.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .columns import _raw_texts
from .structs import _TS_DECODER, _Event

_BIG_FRACTIONAL_TS = re.compile(rb'"ts"\s*:\s*"?-?\d{13,}\.\d')
_EXACT_TS_MIN_US = 2.0**43  # below this, _us_to_ns recovers the exact 3-decimal ns from float64 µs


def _us_to_ns(ts: np.ndarray) -> np.ndarray:
    """float64 µs (3 decimals as written by Kineto) -> exact int64 ns, for ``|ts| < 2**43`` µs.

    Below 2**43 µs a float64's spacing is at most 2**-10 µs, so the float is within 0.49 ns of the
    decimal text. Splitting off the integer µs (exact) and rounding the fraction's ns recovers the
    written digits exactly; ``rint(ts * 1000)`` would not (the product rounds at ~1e15 ns).
    """
    ip = np.floor(ts)
    ns: np.ndarray = ip.astype(np.int64) * 1000 + np.rint((ts - ip) * 1000.0).astype(np.int64)
    return ns


def _exact_ts_ns(texts: list[str]) -> np.ndarray:
    """Decimal µs texts (``"1712195495519689.047"``, quoted or not) -> int64 ns, by integer arithmetic.

    Returns one int64 per text: the integer µs times 1000 plus the first three fraction digits
    (rounded half up on the fourth); a text in another form (exponent) goes through ``float``. A
    text that is not a number at all (an absent or null ``ts`` gives ``""``/``"null"``) gives 0: the
    array has no missing-value marker, so callers take validity from the float64 decode of the same
    ``ts`` (``np.isfinite(ts_us)``), never from this array.
    """
    out = np.zeros(len(texts), dtype=np.int64)
    for i, t in enumerate(texts):
        t = t.strip().strip('"')
        ip, _, fr = t.partition(".")
        try:
            if ip.lstrip("-").isdigit() and (not fr or fr.isdigit()):
                sign = -1 if ip.startswith("-") else 1
                frac = int((fr + "000")[:3]) + (1 if len(fr) > 3 and fr[3] >= "5" else 0)
                out[i] = int(ip) * 1000 + sign * frac
            else:
                out[i] = int(round(float(t) * 1000.0))
        except (ValueError, OverflowError):
            out[i] = 0
    return out


def _maybe_exact_ts(data: bytes, raw_events: Any, events: list[_Event]) -> np.ndarray | None:
    """Absolute ns of every event's ts decoded exactly, when float64 µs would lose ns digits."""
    big = False
    for e in events[:64] + events[-64:]:
        if isinstance(e.ts, float) and abs(e.ts) >= _EXACT_TS_MIN_US:
            big = True
            break
    if not big or not _BIG_FRACTIONAL_TS.search(data):
        return None
    raws = _TS_DECODER.decode(raw_events)
    return _exact_ts_ns(_raw_texts([r.ts for r in raws]))


def _timeline(
    ts_all: np.ndarray, ns_parts: list[np.ndarray] | None, exact_ts: np.ndarray | None, pool: np.ndarray,
    meta: dict[str, Any], ok_all: np.ndarray | None = None,
) -> tuple[np.ndarray, int | None]:
    """Every event's time in int64 ns relative to the trace origin, and the origin's absolute ns.

    ``ts_all``: float64 µs of every event in file order (NaN where unusable); ``ns_parts``: the
    parts' exact int64 ns of the same values (``_us_to_ns``), or None when a value is beyond 2**43
    µs; ``exact_ts``: the exact ns from the ``ts`` texts (``_exact_ts_ns``), when decoded; ``pool``:
    the positions whose minimum is the origin (``ts_ns == 0``). Rows whose ``ts`` is unusable get
    an arbitrary value (callers drop them). The absolute origin is ``baseTimeNanoseconds`` plus the
    first ``ts``, or the first ``ts`` itself when it is absolute µs since the epoch; else None.
    ``ok_all``: the usable rows (default: finite ``ts``); the others never enter a conversion (a
    dropped outlier such as 2**64 µs would overflow the int64 cast).
    """
    if ok_all is None:
        ok_all = np.isfinite(ts_all)
    base_ns: Any = meta.get("baseTimeNanoseconds")
    has_base = isinstance(base_ns, (int, float)) and not isinstance(base_ns, bool)
    if exact_ts is not None:
        origin_exact = int(exact_ts[pool].min()) if pool.size else 0
        t_all = exact_ts - origin_exact
        if has_base:
            origin_abs: int | None = int(base_ns) + origin_exact
        else:
            origin_abs = origin_exact if origin_exact > 10**18 else None
    elif ns_parts is not None:  # every |ts| < 2**43 µs: exact ns computed by the parts
        ns_all = ns_parts[0] if len(ns_parts) == 1 else np.concatenate(ns_parts)
        origin_rel_ns = int(ns_all[pool].min()) if pool.size else 0
        t_all = np.where(ok_all, ns_all - origin_rel_ns, 0)
        del ns_all
        origin_abs = int(base_ns) + origin_rel_ns if has_base else None
    else:
        origin_us = float(ts_all[pool].min()) if pool.size else 0.0
        if abs(origin_us) < _EXACT_TS_MIN_US and (not pool.size or abs(float(ts_all[pool].max())) < _EXACT_TS_MIN_US):
            ns_all = _us_to_ns(np.where(ok_all, ts_all, origin_us))
            origin_rel_ns = int(_us_to_ns(np.array([origin_us]))[0])
            t_all = ns_all - origin_rel_ns
        else:  # integer-µs absolute timestamps (old traces): no fraction to lose
            t_all = np.rint((np.where(ok_all, ts_all, origin_us) - origin_us) * 1000.0).astype(np.int64)
            whole = int(origin_us)  # integer arithmetic: origin_us * 1000 would round above 2**53
            origin_rel_ns = whole * 1000 + int(round((origin_us - whole) * 1000.0))
        if has_base:
            origin_abs = int(base_ns) + origin_rel_ns
        elif origin_us > 1e15:  # absolute µs since the epoch (old traces)
            origin_abs = origin_rel_ns
        else:
            origin_abs = None
    return t_all, origin_abs
