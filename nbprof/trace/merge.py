"""One run, two sources: an Nsight Systems trace and a Kineto trace of the *same run* merged into one ``Trace``.

Nsight Systems sees the system (OS runtime calls, thread scheduling, CPU samples, NVTX ranges, CUDA API and
kernels); the PyTorch profiler sees the framework (operators, shapes, modules, memory, its own annotations
and the same kernels). ``nbprof.report --script`` records both on one run (torch.profiler inside the
script, ``nsys profile`` around it); :func:`merge` puts them on one clock and in one table.

Clock alignment
---------------
1. **Coarse**: nsys times are ns from the session start, whose UTC time is
   ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` (the nsys loader's ``meta.origin_ns``); Kineto times are
   relative to ``baseTimeNanoseconds`` (+ the first event; the Kineto loader's ``meta.origin_ns``). Their
   difference ``D`` puts a Kineto time ``t`` at ``t + D`` on the nsys session's time base. When either
   origin is missing, or fewer than half of the anchors match within 2 ms, ``D`` is searched instead:
   each nsys anchor of the first Kineto anchor's key is tried and the ``D`` matching most anchors within
   200 µs wins.
2. **Anchors**: events both profilers record. GPU runs: kernels, matched by name, device, stream and order
   (nearest in time on that stream); CPU runs (no kernels): NVTX ranges (``nbprof.nvtx.range``) against the
   Kineto ``user_annotation`` of the same name on the same thread (``examples/train_cnn.py`` marks
   ``data``/``forward``/``backward``/``optimizer`` with both: an NVTX range and a
   ``torch.profiler.record_function``); an NVTX step range (``step``, ``step N``) pairs with Kineto's
   ``ProfilerStep#N`` (``prof.step()`` right after the NVTX range ends). Matching is one-to-one (the
   nearest wins).
3. **Fit**: one offset + drift least-squares fit ``kineto - nsys = c + d * (nsys - x0)`` over the starts
   and ends of the matched pairs (``x0`` their mean nsys time), refitted (at most 3 times) without the
   points whose residual exceeds ``max(3 x 1.4826 x MAD, 2 µs)`` -- robust to the rare long delay between
   the two calls of one pair when the thread is preempted between them (counted as ``outliers``; the
   largest residual of all points is kept too). nsys times are then mapped onto Kineto's clock; Kineto's
   rows keep their own times (shifted by a whole number of ns). The residuals (max, median), the number
   of pairs, ``c``, ``d`` and the anchor kind go into ``meta.extra["merge"]`` and the load report
   (``clock_alignment``).

Limits: the fit is as good as the anchors. NVTX ranges and ``record_function`` annotations are entered one
after the other, so each pair differs by the few µs between the two calls (a residual of that size is
expected; kernels, timed by CUPTI for both, align to about 1 µs). Without any matched pair (no NVTX in
the profiled steps, no kernels) the trace is aligned on the session start times only and the report says
so. Both traces must come from one process tree on one host (one clock); traces of two runs are refused
when nothing matches and their origins are unknown.

Merged rows
-----------
Rows seen by both sources (kernels, memcpys and memsets; CUDA runtime/driver calls, by name and thread;
NVTX ranges vs ``user_annotation``) become **one** row: Kineto's (with its shapes, module, external id),
with the launch geometry nsys adds where Kineto has none, and the nsys row's time and duration in the
merge table. Everything else is kept from its source: OS runtime calls, unmatched NVTX ranges and the side
tables (``osrt``, ``sched``, ``cpu_samples``, ...) from nsys (times mapped onto the merged clock);
operators, shapes, modules, memory, counters and flows from Kineto. ``trace.tables["merge"]`` is aligned
row for row with ``trace.events`` (:data:`MERGE_COLUMNS`): its ``source`` column says ``"kineto"``,
``"nsys"`` or ``"both"``. By default (``window="kineto"``) nsys rows outside the Kineto capture window are
left out (counted in the report); ``window="all"`` keeps the whole nsys session.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import schema
from .model import LoadReport, Trace, TraceMeta
from .steps import assign_steps, step_ranges

__all__ = ["merge", "Alignment", "align", "event_sources", "MERGE_TABLE", "MERGE_COLUMNS", "SOURCES"]

#: name of the side table aligned with ``trace.events`` of a merged trace
MERGE_TABLE = "merge"
#: the values of its ``source`` column
SOURCES = ("kineto", "nsys", "both")
#: columns of ``trace.tables["merge"]`` (one row per event row, same order)
MERGE_COLUMNS: dict[str, tuple[str, str, str]] = {
    "source": ("category", "", "'kineto', 'nsys' or 'both' (a row both profilers recorded, merged into one)"),
    "kineto_row": ("int64", "", "position of the row in the Kineto trace's events, -1 if none"),
    "nsys_row": ("int64", "", "position of the row in the nsys trace's events, -1 if none"),
    "nsys_ts_ns": ("int64", "ns", "the nsys row's start on the merged clock, -1 if none"),
    "nsys_dur_ns": ("int64", "ns", "the nsys row's duration, -1 if none"),
}

_DEVICE_CATS = (schema.KERNEL, schema.GPU_MEMCPY, schema.GPU_MEMSET)
_COARSE_TOL_NS = 2_000_000
_SEARCH_TOL_NS = 200_000
_MIN_DUP_TOL_NS = 20_000
_MAX_CANDIDATES = 2000


@dataclass
class Alignment:
    """How nsys times map onto Kineto's clock: ``kineto = nsys + c + d * (nsys - x0)`` (all on the nsys
    session's time base, ns; Kineto times there are ``ts_ns + coarse_ns``).

    Attributes
    ----------
    coarse_ns : int
        ``D``: Kineto origin - nsys origin (UTC ns), or the searched value (``coarse_source``).
    coarse_source : str
        ``"origins"`` (session start and ``baseTimeNanoseconds``) or ``"search"``.
    offset_ns, drift, x0_ns : float
        ``c`` (ns), ``d`` (ns per ns), ``x0`` (ns on the nsys time base).
    anchor : str
        ``"kernels"``, ``"nvtx"`` or ``"none"`` (no matched pair: origins only).
    pairs : int
        Matched anchor pairs (each gives two fit points: its start and its end).
    outliers : int
        Fit points left out of the refit (residual above ``max(3 x 1.4826 x MAD, 2 µs)``).
    residual_max_ns, residual_median_ns : float
        Absolute residuals of the fit over the points kept, ns.
    residual_max_all_ns : float
        The largest absolute residual over all points, outliers included, ns.
    nvtx_ranges, nvtx_matched : int
        NVTX ranges inside the Kineto window whose name Kineto also annotates, and how many matched.
    """

    coarse_ns: int = 0
    coarse_source: str = "origins"
    offset_ns: float = 0.0
    drift: float = 0.0
    x0_ns: float = 0.0
    anchor: str = "none"
    pairs: int = 0
    outliers: int = 0
    residual_max_ns: float = float("nan")
    residual_median_ns: float = float("nan")
    residual_max_all_ns: float = float("nan")
    nvtx_ranges: int = 0
    nvtx_matched: int = 0

    def map(self, nsys_ns: np.ndarray) -> np.ndarray:
        """nsys times (ns from the session start) on Kineto's clock (same time base), int64 ns."""
        x = np.asarray(nsys_ns, dtype=np.int64)
        corr = self.offset_ns + self.drift * (x.astype(np.float64) - self.x0_ns)
        return x + np.rint(corr).astype(np.int64)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values."""
        return {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in asdict(self).items()}


# ------------------------------------------------------------------ matching
def _keys(df: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """One int code per row for the tuple of ``cols`` (shared code space when frames are concatenated)."""
    return pd.MultiIndex.from_frame(df[cols].astype(str)).factorize()[0] if len(df) else np.zeros(0, np.int64)


def _match(xk: np.ndarray, xt: np.ndarray, yk: np.ndarray, yt: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """One-to-one nearest-in-time pairs (i into x, j into y) with equal keys and ``|x - y| <= tol``.

    One sort of both sides by (key, time); for each y the x just before and just after it in that order
    (same key) are the candidates; an x claimed by several y goes to the nearest."""
    nx, ny = len(xt), len(yt)
    if not nx or not ny:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    k = np.r_[xk, yk].astype(np.int64)
    t = np.r_[xt, yt].astype(np.int64)
    is_x = np.r_[np.ones(nx, bool), np.zeros(ny, bool)]
    order = np.lexsort((~is_x, t, k))  # x before y at equal times
    sk, st, sx = k[order], t[order], is_x[order]
    pos = np.arange(len(order))
    prev = np.maximum.accumulate(np.where(sx, pos, -1))
    nxt = np.minimum.accumulate(np.where(sx, pos, len(order))[::-1])[::-1]
    ys = np.flatnonzero(~sx)
    best = np.full(len(ys), -1, np.int64)
    dist = np.full(len(ys), np.inf)
    for cand in (prev[ys], nxt[ys]):
        ok = (cand >= 0) & (cand < len(order))
        okk = ok.copy()
        okk[ok] = sk[cand[ok]] == sk[ys[ok]]
        d = np.full(len(ys), np.inf)
        d[okk] = np.abs(st[cand[okk]] - st[ys[okk]])
        better = d < dist
        best[better], dist[better] = cand[better], d[better]
    keep = np.flatnonzero(dist <= tol)
    if not len(keep):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ordd = keep[np.argsort(dist[keep], kind="stable")]
    _, first = np.unique(best[ordd], return_index=True)
    sel = ordd[first]
    i = order[best[sel]]
    j = order[ys[sel]] - nx
    return i.astype(np.int64), j.astype(np.int64)


@dataclass
class _Anchors:
    kind: str
    xk: np.ndarray
    xs: np.ndarray
    xe: np.ndarray
    yk: np.ndarray
    ys: np.ndarray
    ye: np.ndarray
    x_rows: np.ndarray
    y_rows: np.ndarray


def _nvtx_text(nsys: Trace) -> pd.Series:
    """NVTX row name -> its text (the name without the ``domain:`` prefix nsys stats adds)."""
    nv = nsys.tables.get("nvtx")
    if nv is None or not len(nv) or "text" not in nv:
        return pd.Series(dtype=object)
    m = nv[["name", "text"]].dropna().drop_duplicates("name")
    return pd.Series(m["text"].astype(str).to_numpy(), index=m["name"].astype(str).to_numpy())


def _select(ev: pd.DataFrame, mask: np.ndarray, names: np.ndarray, keycols: list[str]) -> pd.DataFrame:
    """The rows of ``mask`` as a candidates frame: key columns, ``name`` (the match key), ``row``, ``ts``, ``end``."""
    rows = np.flatnonzero(mask)
    sub = ev[keycols].iloc[rows].reset_index(drop=True)
    sub["name"] = names
    sub["row"] = rows
    sub["ts"] = ev["ts_ns"].to_numpy()[mask]
    sub["end"] = sub["ts"] + ev["dur_ns"].to_numpy()[mask]
    return sub


_STEP_KEY = "\x00step"
_NVTX_STEP_RE = re.compile(r"^(?:ProfilerStep\s*#\s*\d+|step(?:[ #_:]?\d+)?)$", re.IGNORECASE)


def _step_key(name: str) -> str:
    """One key for every spelling of a step range (``step``, ``step 3``, ``ProfilerStep#3``), else the name."""
    return _STEP_KEY if _NVTX_STEP_RE.match(name) else name


def _names_at(ev: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """``name`` of the given rows as str (missing -> ""), decoded once per category, not per row."""
    col = ev["name"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        lut = np.array([str(c) for c in col.cat.categories] + [""], dtype=object)
        out: np.ndarray = lut[col.cat.codes.to_numpy()[rows]]
        return out
    v = col.to_numpy(dtype=object)[rows]
    return np.array(["" if x is None or (isinstance(x, float) and np.isnan(x)) else str(x) for x in v], dtype=object)


def _pair_frames(nsys: Trace, kineto: Trace, kind: str) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Candidate rows of each side for one kind of duplicate: ``device`` (kernels/memcpy/memset),
    ``runtime`` (CUDA API calls) or ``nvtx`` (NVTX ranges vs user annotations)."""
    ne, ke = nsys.events, kineto.events
    ncat, kcat = ne["cat"].astype(str).to_numpy(), ke["cat"].astype(str).to_numpy()
    if kind == "device":
        nm = np.isin(ncat, _DEVICE_CATS) & (ne["device"].to_numpy() >= 0)
        km = np.isin(kcat, _DEVICE_CATS) & (ke["device"].to_numpy() >= 0)
        # kernels by name; copies and memsets by kind only (nsys and Kineto spell their names differently)
        nkey = np.where(ncat[nm] == schema.KERNEL, _names_at(ne, np.flatnonzero(nm)), ncat[nm])
        kkey = np.where(kcat[km] == schema.KERNEL, _names_at(ke, np.flatnonzero(km)), kcat[km])
        cols = ["cat", "device", "stream"]
    elif kind == "runtime":
        rt = list(schema.RUNTIME_CATEGORIES)
        nm, km = np.isin(ncat, rt), np.isin(kcat, rt)
        nkey, kkey = _names_at(ne, np.flatnonzero(nm)), _names_at(ke, np.flatnonzero(km))
        cols = ["tid"]
    else:
        text = _nvtx_text(nsys)
        nm = (ncat == schema.NVTX) & (ne["ph"].astype(str).to_numpy() == "X")
        km = kcat == schema.USER_ANNOTATION
        # a step range is one concept in both: NVTX "step" / "step N" / "ProfilerStep#N" = Kineto ProfilerStep#N
        nkey = np.array([_step_key(text.get(x, x)) for x in _names_at(ne, np.flatnonzero(nm))], dtype=object)
        kkey = np.array([_step_key(x) for x in _names_at(ke, np.flatnonzero(km))], dtype=object)
        cols = ["tid"]
    a = _select(ne, nm, nkey, cols)
    b = _select(ke, km, kkey, cols)
    return a, b, cols


def _anchors(nsys: Trace, kineto: Trace, kind: str) -> _Anchors:
    a, b, cols = _pair_frames(nsys, kineto, kind)
    if kind == "device":
        a, b = a[a["cat"].astype(str) == schema.KERNEL], b[b["cat"].astype(str) == schema.KERNEL]
    if kind == "nvtx":
        common = set(a["name"]) & set(b["name"])
        a, b = a[a["name"].isin(common)], b[b["name"].isin(common)]
    both = pd.concat([a[cols + ["name"]], b[cols + ["name"]]], ignore_index=True)
    k = _keys(both, cols + ["name"])
    return _Anchors(kind, k[: len(a)], a["ts"].to_numpy(), a["end"].to_numpy(), k[len(a):], b["ts"].to_numpy(),
                    b["end"].to_numpy(), a["row"].to_numpy(), b["row"].to_numpy())


def _fit(xs: np.ndarray, ys: np.ndarray, side: np.ndarray | None = None,
         group: np.ndarray | None = None) -> tuple[float, float, float, np.ndarray]:
    """Least squares ``y - x = c + d (x - x0) [+ b_g side]``: (c, d, x0, residuals).

    ``side`` (+1 for a range's start, -1 for its end) adds, per anchor name ``group``, the half gap ``b_g``
    of the two nested calls: an NVTX push precedes the ``record_function`` enter and its pop follows the
    exit, so starts sit ``+b`` and ends ``-b`` around the offset ``c`` (``ProfilerStep#N`` encloses the NVTX
    step range instead: its ``b`` is negative). Kernels, timed by CUPTI for both sources, need no such term."""
    x = xs.astype(np.float64)
    r = (ys - xs).astype(np.float64)
    x0 = float(x.mean())
    cols = [np.ones_like(x)]
    has_drift = len(x) >= 3 and float(np.ptp(x)) > 0
    if has_drift:
        cols.append(x - x0)
    if side is not None:
        g = np.zeros(len(x), np.int64) if group is None else group
        for k in np.unique(g):
            sel = g == k
            if sel.sum() >= 4 and len(np.unique(side[sel])) > 1:
                cols.append(np.where(sel, side, 0.0).astype(np.float64))
    a = np.column_stack(cols)
    coef, *_ = np.linalg.lstsq(a, r, rcond=None)
    return float(coef[0]), (float(coef[1]) if has_drift else 0.0), x0, r - a @ coef


def _points(an: _Anchors, i: np.ndarray, j: np.ndarray,
            coarse: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Fit points of matched pairs: their starts and their ends (nsys time, Kineto time + ``coarse``), the
    side of each (+1 start, -1 end; None for kernels) and its anchor key."""
    side = None if an.kind == "device" else np.r_[np.ones(len(i)), -np.ones(len(i))]
    return np.r_[an.xs[i], an.xe[i]], np.r_[an.ys[j], an.ye[j]] + coarse, side, np.r_[an.xk[i], an.xk[i]]


def _robust_fit(xs: np.ndarray, ys: np.ndarray, side: np.ndarray | None,
                group: np.ndarray) -> tuple[float, float, float, np.ndarray, np.ndarray]:
    """:func:`_fit`, refitted (up to 3 times) without the points whose residual exceeds
    ``max(3 x 1.4826 x MAD, 2 µs)`` (a scheduling delay between the two calls of one NVTX/record_function
    pair, one-sided and rare); returns (c, d, x0, residuals of all points, inlier mask)."""
    def refit(good: np.ndarray) -> tuple[float, float, float, np.ndarray]:
        c, d, x0, _r = _fit(xs[good], ys[good], None if side is None else side[good], group[good])
        # every point's residual under the refit: the per-group half gaps as the inliers give them
        base = (ys - xs) - (c + d * (xs.astype(np.float64) - x0))
        if side is not None:
            for k in np.unique(group):
                sel, gs = group == k, (group == k) & good
                b = float(np.sum(base[gs] * side[gs]) / max(float(np.sum(side[gs] ** 2)), 1.0)) if gs.any() else 0.0
                base[sel] -= b * side[sel]
        return c, d, x0, base

    # start from the points near their own (group, side) median offset: one delay of milliseconds among a few
    # pairs (a preempted thread) would otherwise tilt the first least-squares fit and its residuals with it
    d0 = (ys - xs).astype(np.float64)
    key = group if side is None else np.array([f"{g}\x00{sd}" for g, sd in zip(group, side)], dtype=object)
    r0 = d0.copy()
    for k in np.unique(key):
        sel = key == k
        r0[sel] -= np.median(d0[sel])
    good = np.abs(r0) <= max(3 * 1.4826 * float(np.median(np.abs(r0))), 2000.0)
    if good.sum() < 2:
        good = np.ones(len(xs), bool)
    c, d, x0, res = refit(good)
    for _ in range(3):
        r = res - np.median(res[good])
        mad = float(np.median(np.abs(r[good])))
        nxt = np.abs(r) <= max(3 * 1.4826 * mad, 2000.0)
        if nxt.sum() < 2 or (nxt == good).all():
            break
        good = nxt
        c, d, x0, res = refit(good)
    return c, d, x0, res, good


def _search_coarse(an: _Anchors) -> int | None:
    """``D`` matching the most anchors within 200 µs, trying each nsys anchor of the first Kineto anchor's key."""
    if not len(an.ys) or not len(an.xs):
        return None
    j = int(np.argmin(an.ys))
    cands = an.xs[an.xk == an.yk[j]] - an.ys[j]
    if len(cands) > _MAX_CANDIDATES:
        cands = cands[np.linspace(0, len(cands) - 1, _MAX_CANDIDATES).astype(np.int64)]
    best, best_n = None, 0
    for dlt in cands:
        n = len(_match(an.xk, an.xs, an.yk, an.ys + dlt, _SEARCH_TOL_NS)[0])
        if n > best_n:
            best, best_n = int(dlt), n
    return best


def align(nsys: Trace, kineto: Trace) -> Alignment:
    """The :class:`Alignment` of ``nsys`` onto ``kineto`` (module docstring: method and limits).

    Raises
    ------
    nbprof.errors.SchemaError
        When neither origins nor matching anchors give an alignment, or nothing matches and the Kineto
        capture lies outside the nsys session (traces of two different runs).
    """
    from ..errors import SchemaError

    al = Alignment()
    an = _anchors(nsys, kineto, "device")
    if len(an.xs) < 3 or len(an.ys) < 3:
        an = _anchors(nsys, kineto, "nvtx")
    coarse: int | None = None
    if nsys.meta.origin_ns is not None and kineto.meta.origin_ns is not None:
        coarse = int(kineto.meta.origin_ns) - int(nsys.meta.origin_ns)
    n_any = min(len(an.xs), len(an.ys))
    if n_any and (coarse is None or len(_match(an.xk, an.xs, an.yk, an.ys + coarse, _COARSE_TOL_NS)[0]) < 0.5 * n_any):
        found = _search_coarse(an)
        if found is not None:
            coarse, al.coarse_source = found, "search"
    if coarse is None:
        raise SchemaError("cannot align the traces: no session start time / baseTimeNanoseconds and no event "
                          "both profilers recorded (kernels, NVTX ranges vs record_function annotations)")
    al.coarse_ns = coarse
    i, j = _match(an.xk, an.xs, an.yk, an.ys + coarse, _COARSE_TOL_NS)
    if len(i):
        xs, ys, side, grp = _points(an, i, j, coarse)
        c, d, x0, _res = _fit(xs, ys, side, grp)
        # the rematch below maps starts without the per-group half gap of NVTX pairs (an NVTX range sits tens of
        # µs inside its record_function): the tolerance comes from the residuals without that gap, so it covers it
        raw = (ys - xs) - (c + d * (xs.astype(np.float64) - x0))
        tol = max(float(np.percentile(np.abs(raw), 90)) * 4, float(_MIN_DUP_TOL_NS))
        # rematch with the fitted map and a tolerance from the first fit, then refit without outliers
        i, j = _match(an.xk, an.xs + np.rint(c + d * (an.xs - x0)).astype(np.int64), an.yk, an.ys + coarse, tol)
        xs, ys, side, grp = _points(an, i, j, coarse)
        c, d, x0, res, good = _robust_fit(xs, ys, side, grp)
        al.outliers = int((~good).sum())
        al.residual_max_all_ns = float(np.abs(res).max())
        res = res[good]
        al.offset_ns, al.drift, al.x0_ns = c, d, x0
        al.anchor, al.pairs = ("kernels" if an.kind == "device" else "nvtx"), int(len(i))
        al.residual_max_ns = float(np.abs(res).max())
        al.residual_median_ns = float(np.median(np.abs(res)))
    if not al.pairs:
        ne, ke = nsys.events, kineto.events
        if len(ne) and len(ke):
            n0, n1 = int(ne["ts_ns"].min()), int((ne["ts_ns"] + ne["dur_ns"]).max())
            k0, k1 = int(ke["ts_ns"].min()) + coarse, int((ke["ts_ns"] + ke["dur_ns"]).max()) + coarse
            if k1 < n0 or k0 > n1:
                raise SchemaError("cannot merge: no event both profilers recorded, and the Kineto capture "
                                  f"({k0 - n0} .. {k1 - n0} ns from the nsys session start) lies outside the nsys "
                                  f"session (0 .. {n1 - n0} ns): these are not traces of one run")
    # the NVTX coverage: ranges inside the Kineto window whose name Kineto annotates, and how many matched
    nv = an if an.kind == "nvtx" else _anchors(nsys, kineto, "nvtx")
    if len(nv.xs):
        kt = kineto.events
        k0 = int(kt["ts_ns"].min()) + coarse if len(kt) else 0
        k1 = int((kt["ts_ns"] + kt["dur_ns"]).max()) + coarse if len(kt) else 0
        mx = al.map(nv.xs)
        inside = (mx >= k0) & (al.map(nv.xe) <= k1)
        tol = _dup_tol(al)
        ii, _jj = _match(nv.xk, mx, nv.yk, nv.ys + coarse, tol)
        al.nvtx_ranges = int(inside.sum())
        al.nvtx_matched = int(inside[ii].sum())
    return al


def _dup_tol(al: Alignment) -> float:
    """Tolerance for merging duplicates: 3x the largest residual of all fit points, at least 20 µs."""
    r = 0.0 if np.isnan(al.residual_max_all_ns) else al.residual_max_all_ns
    return max(3.0 * r, float(_MIN_DUP_TOL_NS))


# ------------------------------------------------------------------ merge
def _duplicates(nsys: Trace, kineto: Trace, al: Alignment) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """(nsys rows, Kineto rows) of the events both recorded, and the count per kind."""
    tol = _dup_tol(al)
    xs_all, ys_all, counts = [], [], {}
    for kind in ("device", "runtime", "nvtx"):
        a, b, cols = _pair_frames(nsys, kineto, kind)
        if not len(a) or not len(b):
            continue
        both = pd.concat([a[cols + ["name"]], b[cols + ["name"]]], ignore_index=True)
        k = _keys(both, cols + ["name"])
        i, j = _match(k[: len(a)], al.map(a["ts"].to_numpy()), k[len(a):], b["ts"].to_numpy() + al.coarse_ns, tol)
        xs_all.append(a["row"].to_numpy()[i])
        ys_all.append(b["row"].to_numpy()[j])
        counts[kind] = int(len(i))
    if not xs_all:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), counts
    return np.concatenate(xs_all), np.concatenate(ys_all), counts


def _shift_side_table(df: pd.DataFrame, al: Alignment, t0: int) -> pd.DataFrame:
    """An nsys side table with its time columns (``ts_ns``, ``end_ns``; -1 kept) on the merged clock."""
    out = df.copy()
    for c in ("ts_ns", "end_ns"):
        if c in out and pd.api.types.is_integer_dtype(out[c]):
            v = out[c].to_numpy(np.int64)
            out[c] = np.where(v >= 0, al.map(v) - t0, v)
    return out


def _fill_from(dst: pd.DataFrame, src: pd.DataFrame, cols: tuple[str, ...]) -> None:
    """Copy ``src`` values into ``dst`` (same length) where ``dst`` has none (-1 / NaN)."""
    for c in cols:
        d, s = dst[c], src[c]
        if isinstance(d.dtype, pd.CategoricalDtype):
            vals = d.astype(object).where(d.notna(), s.astype(object).to_numpy())
            dst[c] = vals.to_numpy()
        elif d.dtype.kind == "f":
            dst[c] = np.where(np.isnan(d.to_numpy()), s.to_numpy(), d.to_numpy())
        else:
            dst[c] = np.where(d.to_numpy() < 0, s.to_numpy(), d.to_numpy())


def merge(nsys: Trace, kineto: Trace, *, window: str = "kineto") -> Trace:
    """Merge an Nsight Systems trace and a Kineto trace of the same run into one ``Trace``.

    Parameters
    ----------
    nsys, kineto : Trace
        As loaded by ``nbprof.load`` (``meta.source_format`` ``"nsys"`` and ``"kineto"``; given the
        other way round they are swapped).
    window : {"kineto", "all"}
        ``"kineto"``: keep the nsys rows that overlap the Kineto capture window (the profiled steps);
        ``"all"``: the whole nsys session.

    Returns
    -------
    Trace
        ``meta.source_format == "kineto+nsys"``; events on Kineto's clock (int64 ns from the earliest
        kept row; ``meta.origin_ns`` its absolute time on Kineto's clock); ``tables["merge"]`` aligned with
        the events (:data:`MERGE_COLUMNS`: ``source``, ``kineto_row``, ``nsys_row``, ``nsys_ts_ns``,
        ``nsys_dur_ns``); nsys side tables with their times mapped; ``meta.extra["merge"]`` the
        :class:`Alignment` (``to_dict``) and the duplicate counts. The load report lists both sources'
        issues and ``clock_alignment`` (pairs, residual max/median), ``merged_duplicates`` and
        ``nsys_outside_window``.

    Raises
    ------
    nbprof.errors.SchemaError
        When the two traces are not one nsys and one Kineto trace, ``window`` is unknown, or they cannot
        be aligned (:func:`align`).
    """
    from ..errors import SchemaError

    if nsys.meta.source_format == "kineto" and kineto.meta.source_format == "nsys":
        nsys, kineto = kineto, nsys
    if nsys.meta.source_format != "nsys" or kineto.meta.source_format != "kineto":
        raise SchemaError(f"merge needs one Nsight Systems and one Kineto trace, got {nsys.meta.source_format!r} "
                          f"and {kineto.meta.source_format!r}")
    if window not in ("kineto", "all"):
        raise SchemaError(f"window must be 'kineto' or 'all', not {window!r}")
    al = align(nsys, kineto)
    xrows, yrows, dup_counts = _duplicates(nsys, kineto, al)
    ne, ke = nsys.events.reset_index(drop=True), kineto.events.reset_index(drop=True)

    # nsys rows on the merged clock (relative to the nsys session start, Kineto's clock), steps from Kineto
    n_ev = ne.copy()
    n_ev["ts_ns"] = al.map(ne["ts_ns"].to_numpy())
    k_ev = ke.copy()
    k_ev["ts_ns"] = ke["ts_ns"].to_numpy() + al.coarse_ns
    host_k = ke["device"].to_numpy() < 0
    kr = step_ranges(k_ev, host_k)
    if len(kr):
        assign_steps(n_ev, kr, timed=n_ev["device"].to_numpy() < 0)
    else:  # no ProfilerStep: each side's detected iterations are dropped; the merged Trace detects its own
        n_ev["step"] = np.int32(-1)
        k_ev["step"] = np.int32(-1)
    n_ev["rank"] = np.int32(kineto.meta.rank)
    dup_n = np.zeros(len(ne), bool)
    dup_n[xrows] = True
    k_lo = int(k_ev["ts_ns"].min()) if len(k_ev) else 0
    k_hi = int((k_ev["ts_ns"] + k_ev["dur_ns"]).max()) if len(k_ev) else 0
    keep_n = ~dup_n
    outside = clipped = 0
    if window == "kineto" and len(k_ev):
        inwin = (n_ev["ts_ns"].to_numpy() + n_ev["dur_ns"].to_numpy() >= k_lo) & (n_ev["ts_ns"].to_numpy() <= k_hi)
        outside = int((keep_n & ~inwin).sum())
        keep_n &= inwin
        ts_n = n_ev["ts_ns"].to_numpy()
        end_n = ts_n + n_ev["dur_ns"].to_numpy()
        over = keep_n & ((ts_n < k_lo) | (end_n > k_hi))
        clipped = int(over.sum())
        new_ts = np.clip(ts_n, k_lo, None)
        n_ev["ts_ns"] = np.where(keep_n, new_ts, ts_n)
        n_ev["dur_ns"] = np.where(keep_n, np.maximum(np.minimum(end_n, k_hi) - new_ts, 0), n_ev["dur_ns"].to_numpy())
    # Kineto rows that nsys also saw: nsys's launch geometry where Kineto has none
    if len(yrows):
        sub = k_ev.iloc[yrows].reset_index(drop=True)
        _fill_from(sub, n_ev.iloc[xrows].reset_index(drop=True), ("grid", "block", "registers", "shared_mem_bytes"))
        for c in ("grid", "block", "registers", "shared_mem_bytes"):
            col = k_ev[c]
            if isinstance(col.dtype, pd.CategoricalDtype):
                vals = col.astype(object).to_numpy().copy()
                vals[yrows] = sub[c].astype(object).to_numpy()
                k_ev[c] = vals
            else:
                vals = col.to_numpy().copy()
                vals[yrows] = sub[c].to_numpy()
                k_ev[c] = vals

    nk, nn = len(k_ev), int(keep_n.sum())
    src = np.array(["kineto"] * nk + ["nsys"] * nn, dtype=object)
    k_row = np.r_[np.arange(nk), np.full(nn, -1)].astype(np.int64)
    n_row = np.r_[np.full(nk, -1), np.flatnonzero(keep_n)].astype(np.int64)
    nsys_ts = np.r_[np.full(nk, -1), n_ev["ts_ns"].to_numpy()[keep_n]].astype(np.int64)
    nsys_dur = np.r_[np.full(nk, -1), n_ev["dur_ns"].to_numpy()[keep_n]].astype(np.int64)
    src[yrows] = "both"
    n_row[yrows] = xrows
    nsys_ts[yrows] = n_ev["ts_ns"].to_numpy()[xrows]
    nsys_dur[yrows] = n_ev["dur_ns"].to_numpy()[xrows]
    both_ev = _concat_events(k_ev, n_ev[keep_n])
    t0 = int(both_ev["ts_ns"].min()) if len(both_ev) else 0
    both_ev["ts_ns"] = both_ev["ts_ns"].to_numpy() - t0
    nsys_ts = np.where(nsys_ts >= 0, nsys_ts - t0, -1)
    order = np.lexsort((-both_ev["dur_ns"].to_numpy(), both_ev["ts_ns"].to_numpy()))
    events = schema.coerce(both_ev.iloc[order].reset_index(drop=True), schema.EVENT_COLUMNS)
    mt = pd.DataFrame({"source": pd.Categorical(src[order], categories=list(SOURCES)), "kineto_row": k_row[order],
                       "nsys_row": n_row[order], "nsys_ts_ns": nsys_ts[order], "nsys_dur_ns": nsys_dur[order]})

    shift_k = al.coarse_ns - t0
    memory = kineto.memory.copy()
    memory["ts_ns"] = memory["ts_ns"].to_numpy() + shift_k
    counters = kineto.counters.copy()
    counters["ts_ns"] = counters["ts_ns"].to_numpy() + shift_k
    flows = _flows(kineto, nsys, al, shift_k, t0, set(xrows.tolist()))
    threads = pd.concat([kineto.threads, nsys.threads], ignore_index=True).drop_duplicates(
        ["pid", "tid", "kind"]).reset_index(drop=True)
    tables = {name: df for name, df in (kineto.tables or {}).items()}
    for name, df in (nsys.tables or {}).items():
        tables[name] = _shift_side_table(df, al, t0)
    tables[MERGE_TABLE] = mt

    report = LoadReport(path=kineto.report.path or kineto.meta.source_path)
    for it in list(kineto.report.issues) + list(nsys.report.issues):
        report.issues.append(it)
    if al.pairs:
        report.add("clock_alignment", "assumed", al.pairs,
                   f"{al.pairs} {al.anchor} pairs aligned the nsys clock onto Kineto's (offset + drift least squares: "
                   f"offset {al.offset_ns:.0f} ns, drift {al.drift * 1e6:.3f} ppm; residual max "
                   f"{al.residual_max_ns:.0f} ns, median {al.residual_median_ns:.0f} ns over the starts and ends "
                   f"kept; coarse offset from {al.coarse_source}; {al.outliers} of {2 * al.pairs} points left out as "
                   f"outliers, largest residual of all {al.residual_max_all_ns:.0f} ns)")
    else:
        report.add("clock_alignment", "assumed", 0, "0 event pairs both profilers recorded: the clocks are aligned "
                   f"on the session start times only (coarse offset from {al.coarse_source})")
    ndup = int(len(xrows))
    if ndup:
        report.add("merged_duplicates", "assumed", ndup,
                   f"{ndup} events recorded by both profilers were merged into one row each ("
                   + ", ".join(f"{k}: {v}" for k, v in dup_counts.items()) + ")")
    if outside:
        report.add("nsys_outside_window", "dropped", outside,
                   f"{outside} nsys events outside the Kineto capture window were left out (window='all' keeps them)")
    if clipped:
        report.add("nsys_clipped_to_window", "assumed", clipped,
                   f"{clipped} nsys events that overlap the Kineto capture window's edges were cut to it (e.g. a call "
                   "blocked since before the first profiled step)")
    extra = {"merge": al.to_dict() | {"duplicates": dup_counts, "window": window, "nsys_path": nsys.meta.source_path,
                                      "kineto_path": kineto.meta.source_path},
             "kineto": dict(kineto.meta.extra), "nsys": dict(nsys.meta.extra)}
    km = kineto.meta
    meta = TraceMeta(
        source_path=km.source_path, source_format="kineto+nsys", producer=f"{km.producer} + {nsys.meta.producer}",
        origin_ns=(int(km.origin_ns) - shift_k if km.origin_ns is not None else None), rank=km.rank,
        world_size=km.world_size, rank_source=km.rank_source, distributed_info=dict(km.distributed_info),
        device_properties=list(km.device_properties or nsys.meta.device_properties), schema_version=km.schema_version,
        flags=dict(km.flags), extra=extra,
    )
    return Trace(events=events, flows=flows, memory=memory, counters=counters, threads=threads, meta=meta,
                 report=report, tables=tables)


def _concat_events(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Two events frames as one, categorical columns kept categorical (union of the categories: no detour
    through Python objects row by row)."""
    a, b = a.reset_index(drop=True).copy(), b.reset_index(drop=True).copy()
    for c, (dtype, _u, _d) in schema.EVENT_COLUMNS.items():
        if dtype != "category":
            continue
        ca = a[c] if isinstance(a[c].dtype, pd.CategoricalDtype) else pd.Series(pd.Categorical(a[c].astype(object)))
        cb = b[c] if isinstance(b[c].dtype, pd.CategoricalDtype) else pd.Series(pd.Categorical(b[c].astype(object)))
        cats = pd.Index(ca.cat.categories.astype(str)).union(pd.Index(cb.cat.categories.astype(str)), sort=False)
        a[c] = pd.Categorical(ca.astype(object), categories=cats) if len(a) else pd.Categorical([], categories=cats)
        b[c] = pd.Categorical(cb.astype(object), categories=cats) if len(b) else pd.Categorical([], categories=cats)
    return pd.concat([a, b], ignore_index=True)


def _flows(kineto: Trace, nsys: Trace, al: Alignment, shift_k: int, t0: int, dup: set[int]) -> pd.DataFrame:
    """Kineto's flows (shifted) and nsys's ac2g flows between rows only nsys recorded (mapped)."""
    kf = kineto.flows.copy()
    for c in ("src_ts_ns", "dst_ts_ns"):
        v = kf[c].to_numpy()
        kf[c] = np.where(v >= 0, v + shift_k, v) if c == "dst_ts_ns" else v + shift_k
    nf = nsys.flows
    if len(nf):
        ne = nsys.events
        dup_corr = set(ne["correlation"].to_numpy()[sorted(dup)].tolist()) if dup else set()
        nf = nf[~nf["id"].isin(dup_corr)].copy()
        for c in ("src_ts_ns", "dst_ts_ns"):
            v = nf[c].to_numpy(np.int64)
            nf[c] = np.where(v >= 0, al.map(v) - t0, v)
        kf = pd.concat([kf, nf], ignore_index=True)
    return schema.coerce(kf, schema.FLOW_COLUMNS)


def event_sources(trace: Trace) -> pd.Series:
    """Which source each event row came from: ``"kineto"``, ``"nsys"`` or ``"both"`` (categorical, aligned with
    ``trace.events``); for a trace that is not merged, its own source format for every row."""
    mt = (trace.tables or {}).get(MERGE_TABLE)
    if mt is not None and len(mt) == len(trace.events):
        return pd.Series(mt["source"].to_numpy(), index=trace.events.index, name="source")
    fmt = trace.meta.source_format or "unknown"
    return pd.Series(pd.Categorical([fmt] * len(trace.events)), index=trace.events.index, name="source")
