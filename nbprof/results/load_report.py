"""Renderer of a ``LoadReport`` (what a loader repaired, dropped or assumed) for people."""

from __future__ import annotations

import html

from ..trace.model import LoadReport

__all__ = ["LoadReportRenderer"]


class LoadReportRenderer:
    """``text``: the report's own ``str``; ``html``: one list item per issue (every string escaped)."""

    def text(self, result: LoadReport) -> str:
        """The report as plain text (``str(report)``)."""
        return str(result)

    def html(self, result: LoadReport) -> str:
        """The report as an HTML ``<div>``: action, message and byte offset per issue; "clean" when empty."""
        rows = "".join(
            f"<li><b>{html.escape(i.action)}</b>: {html.escape(i.message)}"
            f"{f' (byte {i.offset})' if i.offset is not None else ''}</li>"
            for i in result.issues
        ) or "<li>clean</li>"
        return f"<div><b>Load report</b> for <code>{html.escape(result.path)}</code><ul>{rows}</ul></div>"
