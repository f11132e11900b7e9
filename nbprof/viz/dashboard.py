"""Dashboard: one widget composing the overview, operators, timeline and memory views of a Trace.

Bokeh layouts rendered inside an initially hidden tab measure zero size and collapse
(bokeh/bokeh#8655), so the dashboard does not use ``ipywidgets.Tab``: a ``ToggleButtons`` bar swaps
the visible view, and each view is built the first time it is selected (so a large trace's
timeline costs nothing until asked for).

Above the views: the verdict and the top findings (``results.verdict``); each finding with evidence gets a
"show on the timeline" button whose click (a Python callback in the kernel) selects the timeline view and sets
its range to the finding's evidence window (``analysis.evidence.finding_window``, the window of the report's
links too), re-aggregated for that window (``TimelineView.set_range``).

Given several ranks (a list of traces or a ``MultiRankTrace``), the dashboard shows the first rank's views
and adds the multi-rank views (``registry.default_views``): ``distributed`` (also for one trace with
collectives) and ``ranks_timeline``; those views receive every rank.

Given a job dataset (``nbprof.open_job``), the dashboard reads no rank's full trace but the one it shows
(``rank=``, default the lowest): the all-ranks overview (first) and the distributed view read the job's
reductions, the views of one trace show that rank, the all-ranks timeline the straggler's and the lowest rank's
full traces (``registry.JobInput``). The verdict is the shown rank's, with the job's straggler from the reductions.
"""

from __future__ import annotations

import os

import ipywidgets as widgets

from ..units import fmt_devices, fmt_ns
from . import registry
from ._escape import escape_html

__all__ = ["dashboard", "Dashboard", "VIEWS", "show_trace"]

#: the views of the dashboard, in order (``nbprof.viz.registry``)
VIEWS = registry.VIEWS
#: findings listed under the verdict (the report lists as many)
TOP_FINDINGS = 3


def _verdict(trace, ranks=()) -> tuple[str, list]:
    """The verdict and the top findings (``results.verdict``), shown above every tab, and ``(finding, window)``
    pairs of the ranked findings listed (window: ``evidence.finding_window``, ns, or None); the HTML says why when
    the verdict cannot be made. ``ranks``: every rank given (the straggler is in the verdict)."""
    from ..analysis import advisor, evidence
    from ..analysis.verdict import verdict
    from ..results.verdict import listed, verdict_html

    try:
        findings = advisor.advise(trace, ranks=tuple(ranks) if len(ranks) > 1 else None)
        html = verdict_html(verdict(trace, ranks=ranks if len(ranks) > 1 else None), findings, top=TOP_FINDINGS)
    except (ValueError, KeyError) as e:  # e.g. a trace without the columns the step breakdown needs
        return f"<i>verdict not available: {escape_html(str(e))}</i>", []
    # the findings the section lists, as the advisor ranked them (with a saving, then apart)
    ranked, apart = listed(findings, TOP_FINDINGS)
    return html, [(f, evidence.finding_window(trace, f)) for f in ranked + apart]


def _job_straggler_html(job) -> str:
    """The job's straggler line (the distributed view's text of ``job.stragglers()``, from the reductions), or why
    it is not there."""
    from .distributed import straggler_text

    try:
        text = straggler_text(job.stragglers())
    except (ValueError, KeyError) as e:
        text = f"straggler not available: {e}"
    return f"<div class='nbprof-job-straggler'>{escape_html(text)}</div>"


def _zoom_button(i: int, finding, window: tuple[int, int]) -> widgets.Button:
    """Finding ``i``'s "show on the timeline" button: its label names the window (human units); the finding's title
    (trace text) goes to the tooltip, which the browser shows as text."""
    x0, x1 = window
    b = widgets.Button(description=f"{i}. show on the timeline ({fmt_ns(max(x0, 0))} to {fmt_ns(x1)})",
                       tooltip=str(getattr(finding, "title", "")), icon="search",
                       layout=widgets.Layout(width="auto"))
    b.add_class("nbprof-zoom")
    return b


class Dashboard(widgets.VBox):
    """The composed widget (see :func:`dashboard`).

    Attributes
    ----------
    views : dict
        View name -> the view widget, for the views built so far.
    errors : dict
        View name -> the error message when a view could not be built for this trace.
    findings : list
        ``(Finding, window)`` of the findings listed under the verdict, ranked; window: ``(start_ns, end_ns)``
        from the trace origin (``evidence.finding_window``) or None.
    zoom_buttons : list of ipywidgets.Button
        The "show on the timeline" buttons (one per listed finding with a window; none without a timeline view).
    """

    def __init__(self, trace, *, views=None, start: str | None = None, theme: str = "auto", width: int = 1100,
                 rank: int | None = None):
        #: what the views take (``registry.JobInput``: a job dataset's full traces are read only when shown)
        self.source = registry.JobInput(trace, rank=rank)
        job = self.source.job
        trace = self.trace = self.source.trace
        #: the full traces given (a job dataset: the shown rank's; the others stay in the dataset)
        self.ranks = [trace] if job is not None else self.source.traces()
        self.theme = theme
        self.width = width
        self.views: dict = {}
        self.errors: dict = {}
        names = list(views) if views is not None else list(self.source.default_views())
        for n in names:
            registry.get(n)  # ValueError for an unknown view
        s = trace.summary()
        head = widgets.HTML(
            f"<b>nbprof</b> <code>{escape_html(s['path'])}</code> &mdash; {s['events']} events, "
            f"{len(s['steps'])} steps, {s['duration_ns'] / 1e6:.3f} ms, rank {s['rank']}"
            + (f", devices: {escape_html(fmt_devices(s['devices'], s.get('event_devices')))}" if s["devices"] else "")
            + (f" (of {len(self.ranks)} ranks given)" if len(self.ranks) > 1 else "")
            + (f" (of {self.source.n_ranks} ranks in the job dataset <code>{escape_html(str(job.path))}</code>)"
               if job is not None else ""))
        html, self.findings = _verdict(trace, self.ranks)
        if job is not None:  # the straggler of the whole job, from its reductions (the verdict saw one rank)
            html += _job_straggler_html(job)
        self.verdict = widgets.HTML(html)
        # each listed finding with evidence gets a button that zooms the timeline there (when it is a view here)
        self.zoom_buttons: list = []
        if "timeline" in names:
            for i, (f, window) in enumerate(self.findings, 1):
                if window is not None:
                    b = _zoom_button(i, f, window)
                    b.on_click(lambda _b, i=i: self.zoom_to_finding(i))
                    self.zoom_buttons.append(b)
        links = widgets.HBox(self.zoom_buttons, layout=widgets.Layout(flex_flow="row wrap"))
        links.add_class("nbprof-zoom-links")
        self.selector = widgets.ToggleButtons(options=names, value=start or names[0])
        self.body = widgets.VBox([])
        self.selector.observe(self._on_select, names="value")
        super().__init__([head, self.verdict, links, self.selector, self.body])
        self.add_class("nbprof-dashboard")
        self.show_view(self.selector.value)

    def _on_select(self, change) -> None:
        self.show_view(change["new"])

    def _view(self, name: str):
        """The view ``name``, built on first use (None when it cannot be built for this trace: ``errors``)."""
        if name not in self.views and name not in self.errors:
            try:
                self.views[name] = registry.live(name, self.source.view_input(name), theme=self.theme,
                                                 width=self.width)
            except (ValueError, KeyError) as e:  # e.g. no operators / no steps in this trace
                self.errors[name] = f"{name} view not available for this trace: {e}"
        return self.views.get(name)

    def show_view(self, name: str):
        """Build (once) and show the view ``name``; returns it (or the error widget)."""
        w = self._view(name) or widgets.HTML(f"<i>{escape_html(self.errors[name])}</i>")
        self.body.children = [w]
        if self.selector.value != name:
            self.selector.value = name
        return w

    def zoom_to_finding(self, i: int):
        """Select the timeline and show finding ``i``'s evidence window (1-based, as listed under the verdict).

        The window is :func:`nbprof.analysis.evidence.finding_window` (ns; the timeline's axis is ms); the live
        timeline re-aggregates for it in the kernel (``TimelineView.set_range``). Returns the timeline view, or
        None when the finding has no evidence window. Raises ``IndexError`` for a finding not listed and
        ``ValueError`` when this dashboard has no timeline view.
        """
        if "timeline" not in self.selector.options:
            raise ValueError("this dashboard has no timeline view")
        if not 1 <= i <= len(self.findings):
            raise IndexError(f"finding {i} is not listed (1..{len(self.findings)})")
        window = self.findings[i - 1][1]
        if window is None:
            return None
        view = self._view("timeline")
        if view is not None and hasattr(view, "set_range"):
            view.set_range(window[0] / 1e6, window[1] / 1e6)
            if hasattr(view, "scroll_into_view"):
                view.scroll_into_view()  # the zoomed plot comes into the window (it may lie below it)
            # jupyter_bokeh sends range/data patches only to a BokehView that exists; the tab's view is (re)made
            # from ``render_bundle`` when shown, so that bundle must hold the new window
            view.bokeh_widget.update_from_model(view.bokeh_layout)
        self.show_view("timeline")
        return view

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


def dashboard(trace, *, views=None, start: str | None = None, theme: str = "auto", width: int = 1100,
              rank: int | None = None) -> Dashboard:
    """One widget with the views of ``trace`` (or of a job's ranks).

    Parameters
    ----------
    trace : nbprof.Trace, sequence of Trace, MultiRankTrace or nbprof.Job
        One trace, or one per rank (the single-trace views show the first), or a job dataset
        (``nbprof.open_job``: only the shown ranks' full traces are read, see the module doc).
    views : sequence of str
        Which views, in order (default ``registry.default_views``: the trace views, plus ``distributed``
        when there are collectives and ``ranks_timeline`` with several ranks).
    start : str
        The view shown first (default the first of ``views``).
    theme : {"auto", "light", "dark"}
    width : int
    rank : int, optional
        A job dataset's rank the single-trace views show (default the lowest; with traces: one of their ranks).

    Returns
    -------
    Dashboard
        An ipywidgets ``VBox``: a header, a view selector, and the selected view (built on first use).
    """
    return Dashboard(trace, views=views, start=start, theme=theme, width=width, rank=rank)


def show_trace(trace, view: str | None = None, **kwargs):
    """``Trace.show``: the dashboard of all views (``view=None``) or that one view (registered as the trace's viewer)."""
    if view is None:
        return dashboard(trace, **kwargs)
    return dashboard(trace, views=(view,), **kwargs).show_view(view)
