"""Escaping of trace-supplied text.

Every string that comes from a trace (operator and kernel names, shapes, call stacks,
thread names, file paths, advisor evidence) is untrusted: a trace file can hold
``</script>`` or ``<img onerror=...>``. Whatever nbprof turns into HTML goes through
:func:`escape_html`; text handed to Bokeh is either rendered as text by BokehJS (data
sources, ``Div(render_as_text=True)``, DataTable ``StringFormatter``) or escaped here.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["escape_html", "truncate"]


def escape_html(value: Any) -> str:
    """HTML-escape ``str(value)``, quotes included (safe in text and in quoted attributes).

    ``None`` and NaN become the empty string.
    """
    if value is None:
        return ""
    if isinstance(value, float) and value != value:  # NaN
        return ""
    return html.escape(str(value), quote=True)


def truncate(text: str, limit: int = 160) -> str:
    """Shorten ``text`` to at most ``limit`` characters, marking the cut with an ellipsis."""
    text = str(text)
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "\u2026"
