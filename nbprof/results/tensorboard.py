"""TensorBoard renderer: the Markdown of nbprof's text tags (TensorBoard's text plugin renders Markdown).

``nbprof.tensorboard.write`` writes these strings into ``events.out.tfevents.*``; every trace-supplied
string goes through :func:`md_escape`, every number through ``nbprof.units``.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from ..units import fmt_devices, fmt_ms

if TYPE_CHECKING:  # pragma: no cover
    from ..trace.model import Trace

__all__ = ["md_escape", "operators_markdown", "findings_markdown", "summary_markdown"]

# Python-Markdown's backslash-escapable characters (markdown.Markdown.ESCAPED_CHARS) plus '|' (tables
# extension); '<', '>' and '&' become entities instead, which the sanitiser keeps as text.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|])")


def md_escape(text: Any) -> str:
    """Escape a trace-supplied string for a Markdown table cell (TensorBoard's text plugin renders Markdown).

    Backslash-escapes Markdown punctuation (including ``|``), writes ``& < >`` as entities and folds
    newlines, so an operator name can neither break the table nor inject markup.
    """
    s = str(text).replace("\r", " ").replace("\n", " ")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def operators_markdown(df, top: int) -> str:
    """Markdown table of the top ``top`` rows of an ``operator_summary`` frame (times in ms)."""
    cols = [
        ("count", "count", lambda v: f"{int(v)}"),
        ("self_host_ns", "self host ms", fmt_ms),
        ("total_host_ns", "total host ms", fmt_ms),
        ("self_device_ns", "self device ms", fmt_ms),
        ("total_device_ns", "total device ms", fmt_ms),
    ]
    cols = [c for c in cols if c[0] in df.columns]
    if "self_device_ns" in df.columns and not (df["self_device_ns"].fillna(0) > 0).any():
        cols = [c for c in cols if "device" not in c[0]]
    head = "| operator | " + " | ".join(c[1] for c in cols) + " |"
    sep = "|---|" + "---:|" * len(cols)
    rows = []
    for _, r in df.head(top).iterrows():
        rows.append("| " + md_escape(r["name"]) + " | " + " | ".join(f(r[c]) for c, _, f in cols) + " |")
    note = f"\n\nTop {min(top, len(df))} of {len(df)} operators by total host time (nbprof.analysis.operators)."
    return "\n".join([head, sep, *rows]) + note


def findings_markdown(findings: list[Any]) -> str:
    """Markdown table of advisor findings (severity, rule, finding, where, next step)."""
    if not findings:
        return "No findings: none of nbprof's advisor rules fired on this trace."
    lines = ["| severity | rule | finding | where | next step |", "|---|---|---|---|---|"]
    for f in findings:
        cells = (md_escape(getattr(f, k, "")) for k in ("severity", "rule", "title", "where", "next_step"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_markdown(trace: Trace, trace_path: str | None = None) -> str:
    """Markdown table of ``Trace.summary()`` (source, producer, rank, events, steps, duration, devices, load)."""
    s = trace.summary()
    lines = [
        "| field | value |",
        "|---|---|",
        f"| source | {md_escape(s['path'])} |",
        f"| producer | {md_escape(s['producer'])} |",
        f"| rank / world size | {s['rank']} / {s['world_size']} |",
        f"| events | {s['events']} |",
        f"| steps | {md_escape(', '.join(map(str, s['steps'])) or 'none')} |",
        f"| duration ms | {s['duration_ns'] / 1e6:.3f} |",
        f"| devices | {md_escape(fmt_devices(s['devices'], s.get('event_devices')) or 'none (host only)')} |",
        f"| load report | {'clean' if s['clean_load'] else md_escape(str(len(trace.report.issues)) + ' issues')} |",
    ]
    if trace_path:
        lines.append(f"| trace file | {md_escape(os.path.basename(trace_path))} |")
    return "\n".join(lines)
