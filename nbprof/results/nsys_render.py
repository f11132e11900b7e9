"""Text and HTML renderers of :class:`~nbprof.results.nsys.NsysResult` (escaped; numbers via ``nbprof.units``)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from .render import render
from .table import table

if TYPE_CHECKING:  # pragma: no cover
    from .nsys import NsysResult

__all__ = ["NsysRenderer"]


class NsysRenderer:
    """``text(result)`` and ``html(result)`` of an ``NsysResult``."""

    def head(self, r: NsysResult) -> str:
        """The one-line headline: where, events by category, NVTX steps, duration, producer."""
        t = r.trace
        s = t.summary()
        cats = ", ".join(f"{k} {v}" for k, v in sorted(s["categories"].items(), key=lambda kv: -kv[1]))
        where = f"{r.run.report_path} ({r.run.elapsed_s:.1f} s)" if r.run else t.meta.source_path
        return (f"Nsight Systems profile {where}: {s['events']} events ({cats}); {len(s['steps'])} NVTX steps; "
                f"{s['duration_ns'] / 1e6:.1f} ms; {t.meta.producer}")

    def text(self, r: NsysResult) -> str:
        """Headline, the non-empty summary tables (15 rows each, human units) and the findings."""
        lines = [self.head(r)]
        for k, df in r.summaries.items():
            if len(df):  # an empty summary is left out, not shown as a header row
                lines.append(f"\n{k}:\n{table(df, max_rows=15).text}")
        for f in r.findings:
            lines.append(f"\n[{f.severity}] {f.title} -- {f.next_step}")
        return "\n".join(lines)

    def html(self, r: NsysResult, max_rows: int = 15) -> str:
        """The summary as escaped HTML (NVTX steps, tables in human units via ``results.table``, findings, load report);
        empty summaries are left out."""
        parts = [f"<div class='nbprof-nsys'><p><b>{html.escape(self.head(r))}</b></p>"]
        steps = r.steps
        if len(steps):
            st = table(steps[["step", "name", "dur_ns"]], max_rows=max_rows)
            parts.append(f"<details open><summary>NVTX steps ({len(steps)})</summary>{st.html}</details>")
        for k, df in r.summaries.items():
            if not len(df):  # an empty summary is left out, not shown as a header row
                continue
            parts.append(f"<details open><summary>{html.escape(k)} ({len(df)} rows)</summary>"
                         f"{table(df, max_rows=max_rows).html}</details>")
        if r.findings:
            items = "".join(f"<li><b>{html.escape(f.severity)}</b> {html.escape(f.title)} "
                            f"<i>({html.escape(f.where)})</i>: {html.escape(f.next_step)}</li>" for f in r.findings)
            parts.append(f"<p><b>Expert rules</b></p><ul>{items}</ul>")
        if not r.trace.report.clean:
            parts.append(render(r.trace.report, "html"))
        parts.append("</div>")
        return "".join(parts)
