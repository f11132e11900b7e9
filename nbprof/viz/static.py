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


def static_layout(trace_or_view, views=None, *, theme: str = "light", width: int = 1100, rank: int | None = None):
    """A Bokeh layout (tabs when several views) of ``trace_or_view`` for static embedding.

    ``trace_or_view`` as in :func:`to_html`. For a job dataset (``nbprof.open_job``) no view reads every rank's full
    trace (:class:`nbprof.viz.registry.JobInput`): the all-ranks overview and the distributed view read its
    reductions, the views of one trace show rank ``rank``'s full trace (default the lowest rank) and the all-ranks
    timeline the straggler's and the lowest rank's (``registry.zoom_ranks``).
    """
    from bokeh.models import Div

    from ..trace.model import Trace
    from ._base import NbprofView
    from .dashboard import Dashboard

    if theme not in ("light", "dark", "auto"):
        raise ValueError(f"static theme must be 'light', 'dark' or 'auto', got {theme!r}")
    if isinstance(trace_or_view, NbprofView):
        return trace_or_view.static_layout(theme=theme)
    if isinstance(trace_or_view, Dashboard):
        src = trace_or_view.source
        views = views or list(trace_or_view.selector.options)
    elif isinstance(trace_or_view, Trace):
        src = registry.JobInput(trace_or_view)
        views = views or list(registry.default_views(trace_or_view))
    elif (isinstance(trace_or_view, (list, tuple)) or callable(getattr(trace_or_view, "traces", None))
          or registry.is_job(trace_or_view)):
        src = registry.JobInput(trace_or_view, rank=rank)  # a job dataset, a list or a MultiRankTrace
        views = views or list(src.default_views())
    else:
        raise TypeError(f"to_html takes a Trace, a list of rank traces, a MultiRankTrace, a job dataset "
                        f"(nbprof.open_job), a view or a dashboard, not {type(trace_or_view).__name__}")
    panels = []
    for name in views:
        registry.get(name)  # ValueError for an unknown view
        try:
            lay = registry.static(name, src.view_input(name), theme=theme, width=width)
        except (ValueError, KeyError) as e:
            lay = Div(text=f"{name} view not available for this trace: {e}", render_as_text=True)
        if src.job is not None and name in registry.trace_views():
            lay = _with_rank_note(lay, f"{name}: rank {src.rank}'s full trace (of {src.n_ranks} ranks)")
        elif src.job is not None and name == "ranks_timeline":
            shown = sorted({src.rank, *registry.zoom_ranks(src.job)})
            lay = _with_rank_note(lay, f"ranks {shown} of {src.n_ranks}: the straggler and the lowest rank "
                                       "(their full traces; the all-ranks overview draws every rank)")
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


def _with_rank_note(lay, text: str):
    """``lay`` under a line saying which ranks' full traces it shows (escaped: it may hold a file name)."""
    from bokeh.layouts import column
    from bokeh.models import Div

    return column(Div(text=text, render_as_text=True, name="nbprof_rank_note"), lay)


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
            width: int = 1100, overwrite: bool = False, rank: int | None = None) -> Path:
    """Write a standalone HTML page of a Trace's views (or of one view) to ``path``.

    Parameters
    ----------
    trace_or_view : Trace, sequence of Trace (one per rank), MultiRankTrace, nbprof.Job, NbprofView or Dashboard
        A job dataset (``nbprof.open_job``) is drawn from its reductions, with the full traces of the ranks shown
        only (:func:`static_layout`).
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
    rank : int, optional
        For several ranks: the rank the views of one trace show (default the lowest rank of a job dataset, the
        first trace given otherwise).

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
    lay = static_layout(trace_or_view, views, theme=theme, width=width, rank=rank)
    if title is None and registry.is_job(trace_or_view):
        title = f"nbprof: job {os.path.basename(str(trace_or_view.path))}"
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
