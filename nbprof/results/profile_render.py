"""Text and HTML renderers of :class:`~nbprof.results.profile.ProfileResult`.

The summary (wall time, steps, top operators, files, notes) and the operator table, formatted with
``nbprof.units`` (ms, KiB/MiB/GiB, FLOPs). HTML escapes every trace-supplied string.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..analysis.operator_keys import resolve_sort_key
from ..units import fmt_bytes, fmt_flops, fmt_ms

if TYPE_CHECKING:  # pragma: no cover
    from .profile import ProfileResult

__all__ = ["ProfileRenderer"]


class ProfileRenderer:
    """``text(result)`` (summary + table) and ``html(result)`` of a ``ProfileResult``."""

    def headline(self, r: ProfileResult) -> list[str]:
        """The first line(s): activities, steps, wall time, traced span, events; the user's exception."""
        lines = []
        acts = "+".join(r.activities) or "CPU"
        if r.running:
            return [f"torch.profiler ({acts}): running"]
        wall = f"{fmt_ms(r.wall_ns, 1)} ms" if r.wall_ns is not None else "?"
        if r.traces:
            steps = sorted({s for t in r.traces for s in t.steps})
            nev = sum(len(t.events) for t in r.traces)
            span = sum(t.duration_ns for t in r.traces)
            srange = f"{len(steps)} recorded step(s)" + (f" (#{steps[0]}-#{steps[-1]})" if steps else "")
            cyc = f", {len(r.traces)} cycles" if len(r.traces) > 1 else ""
            lines.append(
                f"torch.profiler ({acts}): {r.steps_run} step(s) run, {srange}{cyc}; "
                f"wall {wall}, traced span {fmt_ms(span, 1)} ms, {nev:,} events"
            )
        else:
            lines.append(f"torch.profiler ({acts}): {r.steps_run} step(s) run, wall {wall}; nothing recorded")
        if r.exception is not None:
            lines.append(f"the profiled code raised {type(r.exception).__name__}: {r.exception} (partial profile)")
        return lines

    def top_line(self, r: ProfileResult, n: int = 5) -> str | None:
        """``top operators by <key>: a 1.000 ms (40%), ...`` or None when nothing was recorded."""
        if not r.traces:
            return None
        col = resolve_sort_key(r.options.sort_by)
        df = r.table(row_limit=0)
        if "cat" in df.columns:  # operators only, not ProfilerStep#N annotations or python frames
            df = df[df["cat"].astype(str) == "cpu_op"]
        if col not in df.columns or not len(df):
            return None
        total = float(df[col].sum()) if col.endswith(("_ns", "_bytes")) or col == "flops" else 0.0
        parts = []
        for _, row in df.head(n).iterrows():
            v = row[col]
            if col.endswith("_ns"):
                txt = f"{fmt_ms(v)} ms"
            elif col.endswith("_bytes"):
                txt = fmt_bytes(v)
            elif col == "flops":
                txt = f"{fmt_flops(v)} FLOP"
            else:
                txt = f"{v:,}"
            if total > 0 and not (isinstance(v, float) and np.isnan(v)):
                txt += f" ({100 * float(v) / total:.0f}%)"
            parts.append(f"{row['name']} {txt}")
        return f"top operators by {r.options.sort_by}: " + ", ".join(parts)

    def no_device_note(self, r: ProfileResult) -> str | None:
        """Said when the table is sorted by a device column but the profile has no device time."""
        if not r.traces or "device" not in resolve_sort_key(r.options.sort_by):
            return None
        if any(t.has_device for t in r.traces):
            return None
        return (f"no device time in this profile (CPU-only): sorting by {r.options.sort_by} orders nothing; "
                "use --sort-by cpu_time_total")

    def summary(self, r: ProfileResult) -> str:
        """The ``text/plain`` summary: wall time, steps, top operators, files, notes."""
        lines = self.headline(r)
        top = self.top_line(r)
        if top:
            lines.append(top)
        nd = self.no_device_note(r)
        if nd:
            lines.append(f"note: {nd}")
        for p in r.paths:
            lines.append(f"wrote {p}")
        for n in r.notes:
            lines.append(f"note: {n}")
        return "\n".join(lines)

    def display_frame(self, r: ProfileResult) -> tuple[pd.DataFrame, int]:
        """The formatted table (strings) and the total number of rows."""
        gb = r.options.group_by
        full = r.operators(gb)
        shown = r.table()
        has_dev = any(t.has_device for t in r.traces)
        mem = r.options.profile_memory or bool(full.get("host_mem_bytes", pd.Series(dtype="int64")).abs().sum())
        cols: list[tuple[str, str, Any]] = [("name", "Name", str)]
        if gb == "shapes":
            cols.append(("input_dims", "Input shapes", str))
        if gb == "stack":
            cols.append(("stack", "Stack", str))
        tot_self = float(full["self_host_ns"].sum()) or 1.0
        out = pd.DataFrame(index=shown.index)
        for c, h, f in cols:
            out[h] = shown[c].astype(str).map(f)
        out["Self host %"] = (100 * shown["self_host_ns"] / tot_self).map(lambda v: f"{v:.1f}%")
        out["Self host (ms)"] = shown["self_host_ns"].map(fmt_ms)
        out["Total host (ms)"] = shown["total_host_ns"].map(fmt_ms)
        out["Avg host (ms)"] = shown["avg_host_ns"].map(fmt_ms)
        if has_dev:
            tot_dev = float(full["self_device_ns"].sum()) or 1.0
            out["Self device %"] = (100 * shown["self_device_ns"] / tot_dev).map(lambda v: f"{v:.1f}%")
            out["Self device (ms)"] = shown["self_device_ns"].map(fmt_ms)
            out["Total device (ms)"] = shown["total_device_ns"].map(fmt_ms)
        if mem:
            out["Host mem"] = shown["host_mem_bytes"].map(fmt_bytes)
            out["Self host mem"] = shown["self_host_mem_bytes"].map(fmt_bytes)
            if has_dev:
                out["Device mem"] = shown["device_mem_bytes"].map(fmt_bytes)
                out["Self device mem"] = shown["self_device_mem_bytes"].map(fmt_bytes)
        if r.options.with_flops or shown["flops"].notna().any():
            out["FLOPs"] = shown["flops"].map(fmt_flops)
        out["Calls"] = shown["count"].map(lambda v: f"{int(v):,}")
        return out, len(full)

    def text(self, r: ProfileResult) -> str:
        """Summary, then the operator table (and how many rows are not shown)."""
        text = self.summary(r)
        if r.traces:
            df, total = self.display_frame(r)
            text += "\n\n" + df.to_string(index=False, max_colwidth=60)
            if total > len(df):
                text += f"\n(showing {len(df)} of {total} rows; result.table(row_limit=0) has all)"
        return text

    def html(self, r: ProfileResult) -> str:
        """The summary and the operator table as escaped HTML."""
        esc = html.escape
        head = "".join(f"<div>{esc(line)}</div>" for line in self.headline(r))
        top = self.top_line(r)
        body = [f'<div class="nbprof-summary" style="margin-bottom:0.5em"><b>{head}</b>']
        if top:
            body.append(f"<div>{esc(top)}</div>")
        for p in r.paths:
            body.append(f"<div>wrote <code>{esc(str(p))}</code></div>")
        nd = self.no_device_note(r)
        for n in [*r.notes, *([nd] if nd else [])]:
            body.append(f'<div style="color:#a15c00">note: {esc(n)}</div>')
        body.append("</div>")
        if r.traces:
            df, total = self.display_frame(r)
            # DataFrame.to_html escapes cell text (escape=True); names come from the trace
            table = df.to_html(index=False, escape=True, border=0, classes="nbprof-operators", justify="left")
            body.append(table)
            if total > len(df):
                body.append(
                    f"<div><i>showing {len(df)} of {total} rows sorted by {esc(r.options.sort_by)}; "
                    "result.table(row_limit=0) has all</i></div>"
                )
        return '<div class="nbprof-profile-result">' + "".join(body) + "</div>"
