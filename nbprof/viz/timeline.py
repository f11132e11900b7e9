"""Timeline view: Bokeh rendering of the level-of-detail layout of ``nbprof.viz.timeline_lod``.

The browser never receives the whole trace: :class:`~nbprof.viz.timeline_lod.TimelineLayout` decides
which rows, events and aggregated bins to draw; :class:`TimelineModel` adds the Bokeh figure, glyphs
and browser callbacks. Live views (:func:`timeline`) re-aggregate in the kernel on every range
change (Bokeh ``RangesUpdate`` over the ``jupyter_bokeh`` widget comm); static views
(:meth:`TimelineModel.static_layout`, used by :func:`nbprof.viz.to_html`) carry a few
pre-aggregated resolutions and switch between them in the browser.

This is the approach of the Bokeh user guide ("very large data needs downsampling before it
reaches the browser", docs "Controlling level of detail") and of Perfetto's summary tracks.

Highlights: ``timeline(tr, critical_path=True)`` draws the events of the critical path
(:func:`nbprof.analysis.critical_path.critical_path`, ``ProfilerStep`` ranges left out) over their own
rows in :data:`nbprof.viz.critical_path.HIGHLIGHT_COLOR`; ``timeline(tr, highlight=finding)`` does the
same for a finding's ``evidence_rows`` (or any positional rows) and zooms to them. Live views merge
highlighted events per pixel of the visible window on every range change, static views once at 16x the
plot's resolution.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..units import fmt_ns
from ._base import NbprofView
from ._escape import truncate
from .theme import apply_theme, on_render, style_widgets
from .timeline_lod import Lane, TimelineLayout, _depths  # noqa: F401 - re-exported

__all__ = ["TimelineModel", "TimelineView", "timeline", "static_view", "Lane"]


class TimelineModel(TimelineLayout):
    """:class:`~nbprof.viz.timeline_lod.TimelineLayout` plus its Bokeh rendering (figure, glyphs, callbacks).

    Same parameters and attributes as ``TimelineLayout``; ``static_layout`` builds the standalone form.
    ``highlights`` (``(name, positional rows)`` pairs, set by :func:`timeline`) are drawn over the rows
    in the highlight colour, each in a data source named ``name``; ``focus_ns`` (``(start, end)``, ns)
    is the initial window when set.
    """

    highlights: Sequence[tuple[str, np.ndarray]] = ()
    focus_ns: tuple[float, float] | None = None

    def _draw_highlights(self, p, x0_ns: float | None, x1_ns: float | None, width_px: int) -> list:
        from .critical_path import draw_highlight, highlight_segments

        return [(rows, draw_highlight(p, highlight_segments(self, rows, x0_ns, x1_ns, width_px=width_px), name))
                for name, rows in self.highlights]

    def _apply_focus(self, p) -> None:
        if self.focus_ns is not None:
            p.x_range.update(start=self.focus_ns[0] / 1e6, end=self.focus_ns[1] / 1e6)

    # ------------------------------------------------------------------ bokeh
    def _figure(self, *, width: int, height: int | None, theme: str):
        from bokeh.models import (
            BoxZoomTool,
            ColumnDataSource,
            CustomJSHover,
            HoverTool,
            PanTool,
            Range1d,
            ResetTool,
            SaveTool,
            Span,
            TapTool,
            WheelZoomTool,
        )
        from bokeh.plotting import figure

        rows = max(self.n_rows, 1)
        # at most 48 rows at first; drag vertically to see the others (the y-range is bounded)
        visible_rows = min(rows, 48)
        if height is None:
            height = int(min(900, max(220, 60 + 18 * visible_rows)))
        pad = (self.t1_ns - self.t0_ns) * 0.01
        x_range = Range1d(start=(self.t0_ns - pad) / 1e6, end=(self.t1_ns + pad) / 1e6)
        y_range = Range1d(start=visible_rows, end=0, bounds=(0, rows))
        wheel = WheelZoomTool(dimensions="width")
        p = figure(width=width, height=height, x_range=x_range, y_range=y_range,
                   tools=[PanTool(dimensions="both" if rows > visible_rows else "width"), wheel,
                          BoxZoomTool(dimensions="width"), ResetTool(), SaveTool()],
                   active_scroll=wheel, output_backend="canvas", x_axis_label="time (ms)",
                   lod_threshold=None, title="Timeline")
        p.ygrid.grid_line_color = None
        p.yaxis.ticker = [ln.first_row + ln.n_rows / 2 for ln in self.lanes] or [0.5]
        p.yaxis.major_label_overrides = {ln.first_row + ln.n_rows / 2: truncate(ln.label, 48)
                                         for ln in self.lanes}
        p.yaxis.major_label_text_font_size = "8pt"
        # lane separators
        for ln in self.lanes[1:]:
            p.add_layout(Span(location=ln.first_row, dimension="width", line_color="#999999", line_alpha=0.4,
                              line_width=1))
        names = ColumnDataSource({"name": self.names}, name="nbprof_names")
        shapes = ColumnDataSource({"shape": self.shapes}, name="nbprof_shapes")
        name_fmt = CustomJSHover(args=dict(names=names), code="""
            const i = value; return (i >= 0 && i < names.data.name.length) ? String(names.data.name[i]) : '';""")
        shape_fmt = CustomJSHover(args=dict(shapes=shapes), code="""
            const i = value; return (i >= 0 && i < shapes.data.shape.length) ? String(shapes.data.shape[i]) : '-';""")
        dur_fmt = CustomJSHover(code="""
            const v = Math.abs(value);
            if (v >= 1e9) return (value/1e9).toFixed(3) + ' s';
            if (v >= 1e6) return (value/1e6).toFixed(3) + ' ms';
            if (v >= 1e3) return (value/1e3).toFixed(2) + ' µs';
            return value.toFixed(0) + ' ns';""")
        hover = HoverTool(tooltips=[("name", "@nid{custom}"), ("duration", "@dur_ns{custom}"),
                                    ("events", "@count"), ("busy", "@busy_ratio{0%}"),
                                    ("shapes", "@sid{custom}"), ("launched by", "@oid{custom}")],
                          formatters={"@nid": name_fmt, "@dur_ns": dur_fmt, "@sid": shape_fmt,
                                      "@oid": name_fmt},
                          point_policy="follow_mouse", attachment="below")
        p.add_tools(hover, TapTool())
        apply_theme([p], "dark" if theme == "dark" else "light")
        return p, names

    def _glyph(self, p, source):
        from bokeh.models import LinearColorMapper

        mapper = LinearColorMapper(palette=self.palette, low=-0.5, high=len(self.palette) - 0.5)
        r = p.hbar(y="y", left="left", right="right", height=0.8, source=source,
                   fill_color={"field": "cidx", "transform": mapper}, fill_alpha="alpha",
                   line_color=None, hover_line_color="#000000", hover_fill_alpha=1.0,
                   selection_fill_alpha=1.0, selection_line_color="#d62728", nonselection_fill_alpha="alpha")
        return r

    def _link_widgets(self, p, sources, names, info):
        """Tap a device op: draw the flow to its launching runtime call and name the CPU op."""
        from bokeh.models import ColumnDataSource, CustomJS

        flow = ColumnDataSource({"x0": [], "y0": [], "x1": [], "y1": []}, name="nbprof_flow")
        p.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=flow, line_color="#d62728", line_width=2)
        p.scatter(x="x0", y="y0", source=flow, size=9, marker="triangle", color="#d62728")
        code = """
        const sel = src.selected.indices;
        if (sel.length == 0) { flow.data = {x0: [], y0: [], x1: [], y1: []}; return; }
        const i = sel[0]; const d = src.data;
        const nm = (k) => (k >= 0 && k < names.data.name.length) ? String(names.data.name[k]) : '';
        let txt = nm(d.nid[i]) + '  (' + (d.dur_ns[i] / 1000).toFixed(2) + ' µs';
        txt += d.count[i] > 1 ? ', ' + d.count[i] + ' events)' : ')';
        if (!Number.isNaN(d.lx[i])) {
          flow.data = {x0: [d.lx[i]], y0: [d.ly[i]], x1: [d.left[i]], y1: [d.y[i]]};
          txt += '  \\u2190 launched by CPU op: ' + (d.oid[i] >= 0 ? nm(d.oid[i]) : '(unknown)');
        } else { flow.data = {x0: [], y0: [], x1: [], y1: []}; }
        info.text = txt;
        """
        for s in sources:
            s.selected.js_on_change("indices", CustomJS(args=dict(src=s, flow=flow, names=names, info=info),
                                                         code=code))
        return flow

    @staticmethod
    def _keys_callbacks(p):
        """Perfetto-style W/S (zoom) and A/D (pan) keys while the pointer is over the plot.

        Bokeh has no keyboard-navigation tool; a document ``keydown`` listener (installed once per
        plot) acts when the last ``mouseenter`` was on this plot and no ``mouseleave`` followed.
        """
        from bokeh.models import CustomJS

        install = CustomJS(args=dict(xr=p.x_range, plot=p), code="""
        if (window.__nbprof_keys === undefined) { window.__nbprof_keys = new Set(); }
        if (window.__nbprof_keys.has(plot.id)) { return; }
        window.__nbprof_keys.add(plot.id);
        document.addEventListener('keydown', (e) => {
          if (window.__nbprof_hover !== plot.id) return;
          const k = (e.key || '').toLowerCase();
          if (!['w', 'a', 's', 'd'].includes(k)) return;
          const span = xr.end - xr.start; const mid = (xr.start + xr.end) / 2;
          if (k === 'w') { xr.setv({start: mid - span * 0.35, end: mid + span * 0.35}); }
          if (k === 's') { xr.setv({start: mid - span * 0.7, end: mid + span * 0.7}); }
          if (k === 'a') { xr.setv({start: xr.start - span * 0.2, end: xr.end - span * 0.2}); }
          if (k === 'd') { xr.setv({start: xr.start + span * 0.2, end: xr.end + span * 0.2}); }
          e.stopPropagation(); e.preventDefault();
        }, true);
        """)
        enter = CustomJS(args=dict(plot=p), code="window.__nbprof_hover = plot.id;")
        leave = CustomJS(args=dict(plot=p), code="if (window.__nbprof_hover === plot.id) { window.__nbprof_hover = null; }")
        return install, enter, leave

    def static_layout(self, *, width: int = 1200, height: int | None = None, theme: str = "light",
                      level_budget: int = 12000, max_levels: int = 6):
        """A Bokeh layout with pre-aggregated resolutions, switched in the browser on zoom.

        Level ``k`` aggregates with bins ``4**k`` times finer than the whole-trace view; levels are added
        until all events are sent individually, ``max_levels`` is reached or a level exceeds
        ``level_budget`` rectangles. The browser shows the finest level whose bins are still at least as
        wide as the visible window's pixels.
        """
        from bokeh.layouts import column
        from bokeh.models import ColumnDataSource, CustomJS, Div

        p, names = self._figure(width=width, height=height, theme=theme)
        span = self.t1_ns - self.t0_ns
        sources, renderers, spans = [], [], []
        for k in range(max_levels):
            w = width * (4 ** k)
            data = self.query(self.t0_ns, self.t1_ns, width_px=w, max_quads=level_budget)
            if k > 0 and len(data["left"]) > level_budget:
                break
            src = ColumnDataSource(data, name=f"nbprof_level{k}")
            r = self._glyph(p, src)
            r.visible = k == 0
            sources.append(src)
            renderers.append(r)
            spans.append(span / (4 ** k) / 1e6)
            if int((data["count"] > 1).sum()) == 0:
                break
        self._draw_highlights(p, None, None, width * 16)
        if self.focus_ns is not None:
            self._apply_focus(p)
            vis = (self.focus_ns[1] - self.focus_ns[0]) / 1e6
            best = max([k for k, sp in enumerate(spans) if sp >= vis * 0.999] or [0])
            for k, r in enumerate(renderers):
                r.visible = k == best
        info = Div(text="Hover for details; click a GPU kernel to see its launching CPU op. "
                        "Keys: W/S zoom, A/D pan.", render_as_text=True, width=width, name="nbprof_info")
        self._link_widgets(p, sources, names, info)
        switch = CustomJS(args=dict(xr=p.x_range, rs=renderers, spans=spans), code="""
            const vis = xr.end - xr.start; let best = 0;
            for (let k = 0; k < spans.length; k++) { if (spans[k] >= vis * 0.999) best = k; }
            for (let k = 0; k < rs.length; k++) { rs[k].visible = (k === best); }""")
        p.x_range.js_on_change("start", switch)
        p.x_range.js_on_change("end", switch)
        lay = column(p, info, name="nbprof_timeline")
        self._attach_js(p, lay, theme)
        return lay

    def _attach_js(self, p, lay, theme: str) -> None:

        style_widgets(lay, theme)
        install, enter, leave = self._keys_callbacks(p)
        p.js_on_event("mouseenter", install, enter)
        p.js_on_event("mousemove", enter)
        p.js_on_event("mouseleave", leave)
        on_render(lay, [p], theme, document_ready=True)


#: brings the live timeline's plot into the window once per request (:meth:`TimelineView.scroll_into_view`): the
#: request is a counter in the figure's ``tags``, read when the figure renders or is laid out (a dashboard
#: re-renders the timeline tab) and when the tag changes; the figure's view (``Bokeh.index``) is scrolled to when it is on the page
_SCROLL_JS = """
const tag = (fig.tags || []).find((t) => t != null && typeof t === "object" && t.nbprof_scroll);
if (!tag) { return; }
const n = tag.nbprof_scroll;
const seen = window.__nbprof_scrolled = window.__nbprof_scrolled || {};
let tries = 0;
function box(el) {  // a view's host element may be laid out as contents: its nearest ancestor with a box
  for (let e = el; e != null; e = e.parentElement || (e.getRootNode && e.getRootNode().host) || null) {
    if (e.isConnected && e.getBoundingClientRect().height > 0) { return e; }
  }
  return null;
}
function go() {
  if (seen[fig.id] === n) { return; }
  let el = null;
  for (const v of (window.Bokeh && Bokeh.index ? Bokeh.index.find(fig) : [])) {
    const b = v.el ? box(v.el) : null;
    if (b) { el = b; }
  }
  if (el) {
    seen[fig.id] = n;
    el.scrollIntoView({block: "start"});
  } else if (tries++ < 100) {
    setTimeout(go, 100);
  }
}
setTimeout(go, 50);
"""


class TimelineView(NbprofView):
    """The live timeline widget (see :func:`timeline`).

    Attributes
    ----------
    model : TimelineModel
    source : bokeh.models.ColumnDataSource
        What the browser currently draws.
    last_update_s : float
        Seconds the last re-aggregation took (kernel side).
    updates : int
        How many range changes have been re-aggregated.
    """

    def __init__(self, model: TimelineModel, *, width: int, height: int | None, theme: str,
                 max_quads: int):
        from bokeh.events import RangesUpdate
        from bokeh.layouts import column
        from bokeh.models import ColumnDataSource, CustomJS, Div

        self.model = model
        self.width_px = width
        self.max_quads = max_quads
        self.updates = 0
        t = time.perf_counter()
        p, names = model._figure(width=width, height=height, theme=theme)
        self.source = ColumnDataSource(model.query(width_px=width, max_quads=max_quads), name="nbprof_lod")
        model._glyph(p, self.source)
        self.highlight_sources = model._draw_highlights(p, None, None, width)
        self.info = Div(text=self._status_text(), render_as_text=True, width=width, name="nbprof_info")
        model._link_widgets(p, [self.source], names, self.info)
        self.figure = p
        lay = column(p, self.info, name="nbprof_timeline")
        model._attach_js(p, lay, theme)
        scroll = CustomJS(args={"fig": p}, code=_SCROLL_JS)
        p.js_on_event("document_ready", scroll)
        p.js_on_change("inner_width", scroll)  # the first layout of each render (as theme.on_render)
        p.js_on_change("tags", scroll)
        self._scroll_requests = 0
        p.on_event(RangesUpdate, self._on_range)
        if model.focus_ns is not None:
            self.set_range(model.focus_ns[0] / 1e6, model.focus_ns[1] / 1e6)
        self.last_update_s = time.perf_counter() - t
        super().__init__(lay, self._text(), "timeline",
                         static_builder=lambda theme="light": model.static_layout(width=width, height=height,
                                                                                  theme=theme))

    def _status_text(self) -> str:
        d = self.source.data
        n_single = int((np.asarray(d["count"]) == 1).sum())
        n_bins = len(d["count"]) - n_single
        covered = int(np.asarray(d["count"]).sum())
        return (f"{self.model.n_events} events in {len(self.model.lanes)} lanes; showing {n_single} events "
                f"individually and {covered - n_single} more in {n_bins} aggregated bins. "
                "Hover for details; click a GPU kernel for its launching CPU op; W/S zoom, A/D pan.")

    def _text(self) -> str:
        m = self.model
        lanes = "; ".join(ln.label for ln in m.lanes[:8]) + ("; ..." if len(m.lanes) > 8 else "")
        return (f"nbprof timeline: {m.n_events} events, {fmt_ns(m.t1_ns - m.t0_ns)}, "
                f"{len(m.lanes)} lanes ({lanes})")

    def set_range(self, x0_ms: float, x1_ms: float) -> None:
        """Show ``[x0_ms, x1_ms]`` (ms from the trace origin): moves the x-range and re-aggregates."""
        self.figure.x_range.update(start=float(x0_ms), end=float(x1_ms))
        self.refresh(x0_ms, x1_ms)

    def scroll_into_view(self) -> None:
        """Ask the browser to bring the plot into the window (once: now if it is shown, else when it next renders).

        A dashboard's "show on the timeline" button calls it: the zoom alone left the plot below the window.
        """
        self._scroll_requests += 1
        keep = [t for t in self.figure.tags if not (isinstance(t, dict) and "nbprof_scroll" in t)]
        self.figure.tags = [*keep, {"nbprof_scroll": self._scroll_requests}]

    def refresh(self, x0_ms: float, x1_ms: float) -> None:
        """Re-aggregate for the window ``[x0_ms, x1_ms]`` and send the new rectangles to the browser."""
        t = time.perf_counter()
        data = self.model.query(x0_ms * 1e6, x1_ms * 1e6, width_px=self.width_px, max_quads=self.max_quads)
        if self.source.selected.indices:  # indices into the old rectangles: drop them
            self.source.selected.indices = []
        self.source.data = data
        if self.highlight_sources:
            from .critical_path import highlight_segments

            for rows, src in self.highlight_sources:
                src.data = highlight_segments(self.model, rows, x0_ms * 1e6, x1_ms * 1e6, width_px=self.width_px)
        self.info.text = self._status_text()
        self.updates += 1
        self.last_update_s = time.perf_counter() - t

    def _on_range(self, event) -> None:
        if event.x0 is None or event.x1 is None:
            return
        self.refresh(float(event.x0), float(event.x1))


def _highlights(trace, critical_path: Any, highlight: Any) -> tuple[list[tuple[str, np.ndarray]],
                                                                     tuple[float, float] | None]:
    """``(name, rows)`` highlights and the focus window of :func:`timeline`'s options."""
    out: list[tuple[str, np.ndarray]] = []
    focus = None
    if critical_path is not None and critical_path is not False:
        from ..analysis.critical_path import CriticalPath
        from ..analysis.critical_path import critical_path as _cp
        from .critical_path import path_rows

        cp = critical_path if isinstance(critical_path, CriticalPath) else _cp(trace, slack=False)
        out.append(("nbprof_cp_highlight", path_rows(trace, cp)))
    if highlight is not None:
        rows = np.asarray(getattr(highlight, "evidence_rows", highlight), dtype=np.int64).reshape(-1)
        rows = rows[(rows >= 0) & (rows < len(trace.events))]
        out.append(("nbprof_evidence_highlight", rows))
        if rows.size:
            ts = trace.events["ts_ns"].to_numpy(np.int64)[rows]
            end = ts + trace.events["dur_ns"].to_numpy(np.int64)[rows]
            lo, hi = float(ts.min()), float(end.max())
            pad = max((hi - lo) * 0.05, 1000.0)
            focus = (lo - pad, hi + pad)
    return out, focus


def timeline(trace, *, width: int = 1100, height: int | None = None, theme: str = "auto",
             max_depth: int = 8, include_python: bool = True, max_quads: int = 8000,
             critical_path: Any = False, highlight: Sequence[int] | Any | None = None) -> TimelineView:
    """Interactive timeline of ``trace`` (an ipywidgets widget with a Bokeh figure inside).

    Parameters
    ----------
    trace : nbprof.Trace
    width, height : int
        Plot size in pixels (height defaults to one 18 px row per nesting row, 220-900 px).
    theme : {"auto", "light", "dark"}
        ``"auto"`` follows JupyterLab's theme in the browser.
    max_depth : int
        Nesting rows per host thread.
    include_python : bool
        Draw ``python_function`` events.
    max_quads : int
        Most individual rectangles per update (the rest is aggregated per pixel bin).
    critical_path : bool or CriticalPath
        Highlight the critical path (True: ``critical_path(trace)`` of the whole trace; or a
        :class:`~nbprof.analysis.critical_path.CriticalPath`, e.g. of one step).
    highlight : Finding or sequence of int, optional
        Highlight a finding's ``evidence_rows`` (or these positional rows of ``trace.events``) and
        start zoomed to them.

    Returns
    -------
    TimelineView
        Zoom/pan (wheel, box, W/A/S/D keys) re-aggregates in the kernel; hover shows name, duration,
        shapes and, for GPU ops, the launching CPU op; clicking a GPU op draws the correlation flow.
    """
    if theme not in ("auto", "light", "dark"):
        raise ValueError(f"theme must be 'auto', 'light' or 'dark', got {theme!r}")
    model = TimelineModel(trace, max_depth=max_depth, include_python=include_python)
    model.highlights, model.focus_ns = _highlights(trace, critical_path, highlight)
    return TimelineView(model, width=width, height=height, theme=theme, max_quads=max_quads)


def static_view(trace, *, theme: str = "light", width: int = 1100, critical_path: Any = False,
                highlight: Sequence[int] | Any | None = None):
    """The timeline as a static Bokeh layout with pre-aggregated resolutions (``TimelineModel.static_layout``);
    ``critical_path`` / ``highlight`` as in :func:`timeline`."""
    model = TimelineModel(trace)
    model.highlights, model.focus_ns = _highlights(trace, critical_path, highlight)
    return model.static_layout(width=width, theme=theme)
