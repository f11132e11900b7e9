"""What the ``nbprof`` command prints for people: the summary text, ``stats`` tables with ``nsys stats``
headers, and the ``check`` summary (Markdown). Machine formats (JSON, CSV, Parquet) keep the analyses'
int64 ns / bytes values; only the text forms here use human units (:mod:`nbprof.units`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..units import fmt_bytes, fmt_devices, fmt_ns, is_missing
from .table import table

__all__ = ["NSYS_HEADERS", "NSYS_ROUND1", "nsys_columns", "summary_text", "stats_text", "check_markdown",
           "machine_frame"]

#: nbprof column of :mod:`nbprof.analysis.nsys_stats` -> the header ``nsys stats`` prints (Nsight Systems 2022.4
#: report scripts ``target-linux-x64/reports/*.py``, e.g. ``"Total Time:dur_ns"`` printed as ``Total Time (ns)``).
#: Sizes stay in bytes (``(B)``) where nsys prints MB.
NSYS_HEADERS: dict[str, str] = {
    "time_ratio": "Time (%)", "total_ns": "Total Time (ns)", "instances": "Instances", "num_calls": "Num Calls",
    "count": "Count", "avg_ns": "Avg (ns)", "med_ns": "Med (ns)", "min_ns": "Min (ns)", "max_ns": "Max (ns)",
    "std_ns": "StdDev (ns)", "grid": "GridXYZ", "block": "BlockXYZ", "name": "Name", "operation": "Operation",
    "style": "Style", "range": "Range", "total_bytes": "Total (B)", "avg_bytes": "Avg (B)", "med_bytes": "Med (B)",
    "min_bytes": "Min (B)", "max_bytes": "Max (B)", "std_bytes": "StdDev (B)",
}
#: columns nsys rounds to 0.1 (``round(x, 1)`` in its report SQL); ``Time (%)`` is ``round(100 * ratio, 1)``
NSYS_ROUND1 = ("avg_ns", "med_ns", "std_ns")


def nsys_columns(df: pd.DataFrame) -> pd.DataFrame:
    """A ``nbprof.analysis.nsys_stats`` frame with ``nsys stats``'s headers and rounding (``Time (%)`` = 100 x
    ``time_ratio`` rounded to 0.1; averages, medians and standard deviations rounded to 0.1 ns, as nsys's report
    SQL does). Columns without an nsys header keep their name."""
    out = df.copy()
    if "time_ratio" in out:
        out["time_ratio"] = (out["time_ratio"].astype("float64") * 100).round(1)
    for c in NSYS_ROUND1:
        if c in out:
            out[c] = out[c].astype("float64").round(1)
    return out.rename(columns=NSYS_HEADERS)


def _jsonable(v: Any) -> Any:
    import json

    if isinstance(v, (list, tuple, dict, set)):
        return json.dumps(v if not isinstance(v, set) else sorted(v), default=str)
    if isinstance(v, np.ndarray):
        return json.dumps(v.tolist(), default=str)
    return v


def machine_frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` ready for CSV/JSON/Parquet: categoricals as strings, nested objects (lists, dicts) as JSON text;
    numbers unchanged (ns, bytes)."""
    out = df.reset_index(drop=True).copy()
    for c in out.columns:
        s = out[c]
        if isinstance(s.dtype, pd.CategoricalDtype):
            out[c] = s.astype(object).where(s.notna(), None)
        elif s.dtype == object:
            vals = s.map(_jsonable)
            kind = pd.api.types.infer_dtype(vals, skipna=True)
            if kind not in ("string", "empty", "integer", "floating", "boolean", "mixed-integer-float"):
                vals = vals.map(lambda x: None if is_missing(x) else str(x))
            out[c] = vals
    return out


def stats_text(name: str, df: pd.DataFrame, *, nsys: bool, path: str = "") -> str:
    """One ``nbprof stats -f table`` report: a title line as nsys prints it, then the aligned table (nsys-named
    reports show their numbers unscaled, ns and bytes with thousands separators; nbprof's in ms / human sizes)."""
    title = f"** {name}" + (f" ({path})" if path else "") + ":"
    body = _nsys_text(nsys_columns(df)) if nsys else table(machine_frame(df), max_rows=max(len(df), 1)).text
    return f"\n{title}\n\n{body}\n"


def _nsys_cell(v: Any, is_float: bool) -> str:
    if is_missing(v):
        return ""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):,.1f}" if is_float else f"{int(v):,}"
    return str(v)


def _nsys_text(d: pd.DataFrame) -> str:
    """The column layout of ``nsys stats`` (``--format column``): numbers right-aligned with thousands
    separators, rounded columns with one decimal, text left-aligned."""
    cols = [str(c) for c in d.columns]
    num = {c: pd.api.types.is_numeric_dtype(d[c]) for c in cols}
    flt = {c: pd.api.types.is_float_dtype(d[c]) for c in cols}
    rows = [[_nsys_cell(v, flt[c]) for c, v in zip(cols, r)] for r in d.itertuples(index=False, name=None)]
    w = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
    line = lambda cells: "  ".join(x.rjust(w[i]) if num[cols[i]] else x.ljust(w[i])  # noqa: E731
                                   for i, x in enumerate(cells)).rstrip()
    out = [line(cols), "  ".join("-" * x for x in w)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def summary_text(summary: Mapping[str, Any], report: Any) -> str:
    """``nbprof summary`` in text: one line per fact of ``Trace.summary()``, then the load report."""
    cats = summary.get("categories") or {}
    top = ", ".join(f"{k} {v:,}" for k, v in list(cats.items())[:8]) + (", ..." if len(cats) > 8 else "")
    steps = summary.get("steps") or []
    lines = [
        f"trace:     {summary.get('path', '')}",
        f"producer:  {summary.get('producer', '')}",
        f"rank:      {summary.get('rank')} of {summary.get('world_size')}",
        f"events:    {summary.get('events', 0):,}" + (f" ({top})" if top else ""),
        f"steps:     {', '.join(str(s) for s in steps) if steps else 'none (no ProfilerStep#N and nothing repeats)'}",
        f"duration:  {fmt_ns(summary.get('duration_ns') or 0)}",
        f"devices:   {fmt_devices(summary.get('devices') or [], summary.get('event_devices')) or 'none'}",
        f"memory:    {summary.get('memory_events', 0):,} events    flows: {summary.get('flows', 0):,}",
    ]
    for k, v in summary.items():
        if k not in ("path", "producer", "rank", "world_size", "events", "categories", "steps", "duration_ns",
                     "devices", "event_devices", "memory_events", "flows", "clean_load"):
            shown = fmt_ns(v) if k.endswith("_ns") and isinstance(v, (int, float)) else (
                fmt_bytes(v) if k.endswith("_bytes") and isinstance(v, (int, float)) else v)
            lines.append(f"{k + ':':<10} {shown}")
    return "\n".join(lines) + "\n" + str(report) + "\n"


def _md_code(text: Any) -> str:
    """``text`` as one Markdown code span inside a table cell: a fence longer than any run of backticks in it,
    ``|`` escaped, line breaks as spaces (a file name cannot end the cell, the row or the table)."""
    s = re.sub(r"[\r\n]+", " ", str(text)).replace("|", "\\|")
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def check_markdown(result: Any) -> str:
    """The ``nbprof check`` summary as Markdown (for a CI job summary): verdict, the ratio with its interval,
    each side's statistic and step count, the method."""
    r = result
    pct = lambda x: f"{100 * (x - 1):+.1f}%"  # noqa: E731
    icon = {"regression": "FAIL", "improvement": "ok (faster)",
            "inconclusive": f"cannot tell: smallest detectable change about {100 * r.min_detectable_change:.0f}%"
            }.get(r.verdict, "ok")
    lines = [
        f"### nbprof check: {r.verdict} ({icon})",
        "",
        f"Step time {r.statistic}: candidate / baseline = **{r.ratio:.3f}** ({pct(r.ratio)}), "
        f"{100 * r.confidence:.0f}% bootstrap interval [{r.ci_low:.3f}, {r.ci_high:.3f}] "
        f"({pct(r.ci_low)} to {pct(r.ci_high)}); allowed slowdown {100 * r.max_regress:.1f}%.",
        "",
        "| side | trace | steps | step time (" + r.statistic + ") |",
        "|---|---|---:|---:|",
        f"| baseline | {_md_code(r.baseline)} | {len(r.baseline_steps_ns)} | {fmt_ns(r.baseline_ns)} |",
        f"| candidate | {_md_code(r.candidate)} | {len(r.candidate_steps_ns)} | {fmt_ns(r.candidate_ns)} |",
        "",
        f"Method: percentile bootstrap of the {r.statistic} ratio, {r.resamples:,} resamples of each side's "
        f"per-step times, seed {r.seed}; fails when the interval's lower bound exceeds the allowed slowdown.",
    ]
    lines += [f"- note: {n}" for n in r.notes]
    return "\n".join(lines) + "\n"
