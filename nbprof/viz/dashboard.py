"""Dashboard: one widget composing the overview, operators, timeline and memory views of a Trace.

Bokeh layouts rendered inside an initially hidden tab measure zero size and collapse
(bokeh/bokeh#8655), so the dashboard does not use ``ipywidgets.Tab``: a ``ToggleButtons`` bar swaps
the visible view, and each view is built the first time it is selected (so a large trace's
timeline costs nothing until asked for).

Given several ranks (a list of traces or a ``MultiRankTrace``), the dashboard shows the first rank's views
and adds the multi-rank views (``registry.default_views``): ``distributed`` (also for one trace with
collectives) and ``ranks_timeline``; those views receive every rank.
"""

from __future__ import annotations

import os

import ipywidgets as widgets

from . import registry
from ._escape import escape_html

__all__ = ["dashboard", "Dashboard", "VIEWS", "show_trace"]

#: the views of the dashboard, in order (``nbprof.viz.registry``)
VIEWS = registry.VIEWS


def _verdict_html(trace) -> str:
    """The verdict and the top findings (``results.verdict``), shown above every tab; empty when it cannot be made."""
    from ..analysis import advisor
    from ..analysis.verdict import verdict
    from ..results.verdict import verdict_html

    try:
        return verdict_html(verdict(trace), advisor.advise(trace))
    except (ValueError, KeyError) as e:  # e.g. a trace without the columns the step breakdown needs
        return f"<i>verdict not available: {escape_html(str(e))}</i>"


class Dashboard(widgets.VBox):
    """The composed widget (see :func:`dashboard`).

    Attributes
    ----------
    views : dict
        View name -> the view widget, for the views built so far.
    errors : dict
        View name -> the error message when a view could not be built for this trace.
    """

    def __init__(self, trace, *, views=None, start: str | None = None, theme: str = "auto", width: int = 1100):
        self.ranks = registry.ranks_of(trace)
        trace = self.trace = self.ranks[0]
        self.theme = theme
        self.width = width
        self.views: dict = {}
        self.errors: dict = {}
        names = list(views) if views is not None else list(registry.default_views(trace, len(self.ranks)))
        for n in names:
            registry.get(n)  # ValueError for an unknown view
        s = trace.summary()
        head = widgets.HTML(
            f"<b>nbprof</b> <code>{escape_html(s['path'])}</code> &mdash; {s['events']} events, "
            f"{len(s['steps'])} steps, {s['duration_ns'] / 1e6:.3f} ms, rank {s['rank']}"
            + (f", devices: {escape_html(', '.join(s['devices']))}" if s["devices"] else "")
            + (f" (of {len(self.ranks)} ranks given)" if len(self.ranks) > 1 else ""))
        self.verdict = widgets.HTML(_verdict_html(trace))
        self.selector = widgets.ToggleButtons(options=names, value=start or names[0])
        self.body = widgets.VBox([])
        self.selector.observe(self._on_select, names="value")
        super().__init__([head, self.verdict, self.selector, self.body])
        self.add_class("nbprof-dashboard")
        self.show_view(self.selector.value)

    def _on_select(self, change) -> None:
        self.show_view(change["new"])

    def show_view(self, name: str):
        """Build (once) and show the view ``name``; returns it (or the error widget)."""
        if name not in self.views and name not in self.errors:
            try:
                job = self.ranks if registry.get(name).ranks else self.trace
                self.views[name] = registry.live(name, job, theme=self.theme, width=self.width)
            except (ValueError, KeyError) as e:  # e.g. no operators / no steps in this trace
                self.errors[name] = f"{name} view not available for this trace: {e}"
        w = self.views.get(name) or widgets.HTML(f"<i>{escape_html(self.errors[name])}</i>")
        self.body.children = [w]
        if self.selector.value != name:
            self.selector.value = name
        return w

    def __repr__(self) -> str:
        s = self.trace.summary()
        name = os.path.basename(str(s["path"])) or "trace"
        return (f"nbprof dashboard ({', '.join(self.selector.options)}) of {name}: {s['events']} events, "
                f"{len(s['steps'])} steps")

    def _repr_mimebundle_(self, **kwargs):
        data, meta = super()._repr_mimebundle_(**kwargs), {}
        if isinstance(data, tuple):
            data, meta = data
        if data is not None:
            data["text/plain"] = repr(self)
        return data, meta


def dashboard(trace, *, views=None, start: str | None = None, theme: str = "auto", width: int = 1100) -> Dashboard:
    """One widget with the views of ``trace`` (or of a job's ranks).

    Parameters
    ----------
    trace : nbprof.Trace, sequence of Trace or MultiRankTrace
        One trace, or one per rank (the single-trace views show the first).
    views : sequence of str
        Which views, in order (default ``registry.default_views``: the trace views, plus ``distributed``
        when there are collectives and ``ranks_timeline`` with several ranks).
    start : str
        The view shown first (default the first of ``views``).
    theme : {"auto", "light", "dark"}
    width : int

    Returns
    -------
    Dashboard
        An ipywidgets ``VBox``: a header, a view selector, and the selected view (built on first use).
    """
    return Dashboard(trace, views=views, start=start, theme=theme, width=width)


def show_trace(trace, view: str | None = None, **kwargs):
    """``Trace.show``: the dashboard of all views (``view=None``) or that one view (registered as the trace's viewer)."""
    if view is None:
        return dashboard(trace, **kwargs)
    return dashboard(trace, views=(view,), **kwargs).show_view(view)
