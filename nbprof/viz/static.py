"""Standalone HTML export of nbprof views (BokehJS inline, browser-side interaction only).

The page works offline and inside nbconvert/papermill reports: BokehJS is embedded
(``bokeh.resources.INLINE``; no CDN is reachable here), the timeline carries pre-aggregated
resolutions switched in the browser (:meth:`TimelineModel.static_layout`), and the operator view's
grouping, filter and CSV buttons are ``CustomJS``. Python callbacks do not run in a static page.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from . import registry
from ._escape import escape_html

__all__ = ["to_html", "static_layout", "VIEWS"]

#: the views a static page can hold (``nbprof.viz.registry``)
VIEWS = registry.VIEWS


def static_layout(trace_or_view, views=None, *, theme: str = "light", width: int = 1100):
    """A Bokeh layout (tabs when several views) of ``trace_or_view`` for static embedding."""
    from bokeh.models import Div

    from ..trace.model import Trace
    from ._base import NbprofView
    from .dashboard import Dashboard

    if theme not in ("light", "dark", "auto"):
        raise ValueError(f"static theme must be 'light', 'dark' or 'auto', got {theme!r}")
    if isinstance(trace_or_view, NbprofView):
        return trace_or_view.static_layout(theme=theme)
    if isinstance(trace_or_view, Dashboard):
        trace, ranks = trace_or_view.trace, trace_or_view.ranks
        views = views or list(trace_or_view.selector.options)
    elif isinstance(trace_or_view, Trace):
        trace, ranks = trace_or_view, [trace_or_view]
        views = views or list(registry.default_views(trace))
    elif isinstance(trace_or_view, (list, tuple)) or callable(getattr(trace_or_view, "traces", None)):
        ranks = registry.ranks_of(trace_or_view)  # one trace per rank (a list or a MultiRankTrace)
        trace = ranks[0]
        views = views or list(registry.default_views(trace, len(ranks)))
    else:
        raise TypeError(f"to_html takes a Trace, a list of rank traces, a view or a dashboard, "
                        f"not {type(trace_or_view).__name__}")
    panels = []
    for name in views:
        spec = registry.get(name)  # ValueError for an unknown view
        try:
            lay = registry.static(name, ranks if spec.ranks else trace, theme=theme, width=width)
        except (ValueError, KeyError) as e:
            lay = Div(text=f"{name} view not available for this trace: {e}", render_as_text=True)
        panels.append((name, lay))
    if len(panels) == 1:
        return panels[0][1]
    # the views stack vertically, all visible: plots in initially hidden tabs render at zero size
    # (bokeh/bokeh#8655)
    from bokeh.layouts import column

    items = []
    for name, lay in panels:
        items += [Div(text=f"<h2>{escape_html(registry.get(name).title)}</h2>"), lay]
    return column(*items, name="nbprof_static")


_HEAD_BODY = re.compile(r"</head>(\s*)<body>")


def _themed_page(html: str, *, head: str = "", body_start: str = "", body_style: str = "") -> str:
    """``head`` at the end of the page's ``<head>`` and ``body_start`` right after its ``<body>`` tag (with
    ``body_style`` as the tag's style when given). The page's own ``</head><body>`` is the last pair of those tags
    with nothing but space between: the inline BokehJS in the head has both tags in its code, while the body's
    document JSON is escaped by Bokeh."""
    m = list(_HEAD_BODY.finditer(html))[-1]
    tag = f'<body style="{body_style}">' if body_style else "<body>"
    return html[:m.start()] + head + "</head>" + m.group(1) + tag + body_start + html[m.end():]


def to_html(trace_or_view, path, views=None, *, theme: str = "auto", title: str | None = None,
            width: int = 1100, overwrite: bool = False) -> Path:
    """Write a standalone HTML page of a Trace's views (or of one view) to ``path``.

    Parameters
    ----------
    trace_or_view : Trace, sequence of Trace (one per rank), MultiRankTrace, NbprofView or Dashboard
    path : str or Path
    views : list of str, optional
        Registered view names (default ``registry.default_views``: the trace views, plus the distributed view
        when there are collectives and the all-ranks timeline with several ranks).
    theme : {"auto", "light", "dark"}
        ``"auto"`` (default): light, dark under the reader's ``prefers-color-scheme: dark``.
    title : str, optional
        Page title (default from the trace path); escaped.
    width : int
    overwrite : bool
        Replace an existing file (default False: nbprof never overwrites a file silently).

    Returns
    -------
    pathlib.Path
        The written file. BokehJS is inline, so the page needs no network.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False.
    """
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
    lay = static_layout(trace_or_view, views, theme=theme, width=width)
    if title is None:
        tr = getattr(trace_or_view, "trace", None) or getattr(getattr(trace_or_view, "model", None), "trace", None) \
            or trace_or_view
        src = getattr(getattr(tr, "meta", None), "source_path", "") or ""
        title = f"nbprof: {os.path.basename(src)}" if src else "nbprof"
    html = file_html(lay, INLINE, title=title)  # bokeh escapes the title and the JSON it embeds
    if theme == "dark":
        html = _themed_page(html, body_style="background:#1e1e1e;color:#e0e0e0")
    elif theme == "auto":
        from .theme import DARK_SCHEME_SCRIPT, dark_scheme_css

        html = _themed_page(html, head=dark_scheme_css() + "\n", body_start=DARK_SCHEME_SCRIPT)
    from ..atomic import atomic_write  # a private temp file, renamed into place (never a planted symlink)

    atomic_write(path, html, overwrite=overwrite)
    return path
