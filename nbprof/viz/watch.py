"""Live chart of the step watch: step time per step with its parts stacked, the running-median band, the
flagged steps, and for each captured one a button that opens its trace's dashboard below the chart.

``nbprof.watch(..., live=True)`` displays it before the loop starts; the watch calls :meth:`WatchView.push`
after every step (``Watch.listener``) and the view streams new rows to the browser at most every
``interval_s`` (``ColumnDataSource.stream`` over the widget comm), then once more when the watch closes
(``Watch.on_close``). ``watch_view(run_dir)`` draws a finished run folder. The chart's state lives in the
kernel's widgets, so a reloaded page draws it again (the bundle is refreshed with
``BokehModel.update_from_model`` after each flush).

Not a registry view (``nbprof.viz.registry`` views take a Trace; this one takes a watch or a run folder); the
dashboard of a captured step is the registry's (``nbprof.viz.dashboard``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import numpy as np
import pandas as pd

from ..units import fmt_ns
from ._base import NbprofView
from ._escape import escape_html
from .theme import apply_theme, on_render

__all__ = ["watch_view", "WatchView", "PARTS"]

#: stacked parts: name -> (label, colour); ``io`` is the main thread's blocked time outside the model's
#: phases (``min(blocked_ns, other_ns)``) and ``other`` the rest of ``other_ns``, so a stack sums to ``step_ns``
PARTS = {
    "data_wait": ("DataLoader wait", "#e45756"),
    "forward": ("forward", "#4c78a8"),
    "backward": ("backward", "#72b7b2"),
    "optimizer": ("optimizer", "#54a24b"),
    "io": ("blocked (I/O, sleep)", "#eeca3b"),
    "other": ("other host", "#9d9da1"),
}


def _rows(recs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Column data (ms) of step records (``nbprof.capture.watch`` fields)."""
    out: dict[str, list[Any]] = {c: [] for c in ("step", "step_ms", "median_ms", "high_ms", "flagged", "profiled",
                                                 *PARTS)}
    for r in recs:
        other = int(r["other_ns"])
        io = min(int(r["blocked_ns"]), other)
        out["step"].append(int(r["step"]))
        out["step_ms"].append(r["step_ns"] / 1e6)
        out["median_ms"].append(r["median_ns"] / 1e6)
        out["high_ms"].append(r.get("_k", 3.0) * r["median_ns"] / 1e6)
        out["flagged"].append(bool(r["flagged"]))
        out["profiled"].append(bool(r["profiled"]))
        for p, v in (("data_wait", r["data_wait_ns"]), ("forward", r["forward_ns"]), ("backward", r["backward_ns"]),
                     ("optimizer", r["optimizer_ns"]), ("io", io), ("other", other - io)):
            out[p].append(v / 1e6)
    return out


class WatchView(NbprofView):
    """The live chart (an ipywidgets VBox): the Bokeh figure, a line of text, one button per captured flagged
    step, and the area where its dashboard opens.

    Attributes
    ----------
    source, flags : bokeh.models.ColumnDataSource
        All steps; the flagged steps (markers).
    buttons : dict
        Watch step -> its "open the captured trace" button.
    opened : int or None
        The step whose dashboard is shown.
    """

    def __init__(self, *, k: float = 3.0, run_dir: str | os.PathLike[str] | None = None, theme: str = "auto",
                 width: int = 1100, interval_s: float = 0.5) -> None:
        from bokeh.layouts import column
        from bokeh.models import Band, ColumnDataSource, HoverTool, TapTool
        from bokeh.plotting import figure

        self.k, self.interval_s = float(k), float(interval_s)
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._pending: list[dict[str, Any]] = []
        self._last = 0.0
        self._n = 0
        self._captures: list[dict[str, Any]] = []
        self.source = ColumnDataSource(_rows([]))
        self.flags = ColumnDataSource({"step": [], "step_ms": []})
        # min_width: the chart is laid out while the cell still runs (its output area may not have its width yet);
        # fit_width (viz._base) then stretches it from there up to ``width``
        p = figure(height=300, width=width, min_width=min(width, 600), title="step time (ms) per step, parts stacked; band: running median "
                   f"to {self.k:g}x it; triangles: flagged", x_axis_label="step", y_axis_label="ms",
                   tools="xpan,xwheel_zoom,box_zoom,reset,save")
        p.vbar_stack(list(PARTS), x="step", width=0.9, source=self.source, color=[c for _, c in PARTS.values()],
                     legend_label=[lab for lab, _ in PARTS.values()])
        p.add_layout(Band(base="step", lower="median_ms", upper="high_ms", source=self.source, fill_alpha=0.15,
                          fill_color="#4c78a8", line_color="#4c78a8"))
        marks = p.scatter("step", "step_ms", source=self.flags, marker="inverted_triangle", size=11,
                          color="#d62728")
        p.add_tools(HoverTool(tooltips=[("step", "@step"), ("step", "@step_ms{0.000} ms"),
                                        ("median", "@median_ms{0.000} ms"), ("data wait", "@data_wait{0.000} ms"),
                                        ("forward", "@forward{0.000} ms"), ("backward", "@backward{0.000} ms"),
                                        ("optimizer", "@optimizer{0.000} ms"), ("blocked", "@io{0.000} ms")]),
                    TapTool(renderers=[marks]))
        p.legend.location = "top_left"
        p.legend.orientation = "horizontal"
        p.legend.click_policy = "hide"
        self.figure = p
        apply_theme([p], theme if theme != "auto" else "light")
        layout = column(p)
        on_render(layout, [p], theme)
        self.status = widgets.HTML("<i>waiting for the first step</i>")
        self.status.add_class("nbprof-watch-status")
        self.links = widgets.HBox([], layout=widgets.Layout(flex_flow="row wrap"))
        self.links.add_class("nbprof-watch-links")
        self.detail = widgets.VBox([])
        self.buttons: dict[int, widgets.Button] = {}
        self.opened: int | None = None
        self.flags.selected.on_change("indices", self._on_tap)
        super().__init__(layout, "nbprof watch: live step chart", "watch", extra=None)
        self.children = (*self.children, self.status, self.links, self.detail)  # type: ignore[has-type]
        self.add_class("nbprof-watch")

    # ------------------------------------------------------------------------------------------------ data
    def push(self, rec: dict[str, Any]) -> None:
        """Queue one step record (the watch's listener); flushed every ``interval_s``."""
        self._pending.append(dict(rec, _k=self.k))
        if time.monotonic() - self._last >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        """Stream the queued steps to the chart and refresh the text (and the bundle a reloaded page draws)."""
        recs, self._pending = self._pending, []
        self._last = time.monotonic()
        if recs:
            self.source.stream(_rows(recs))
            fl = [r for r in recs if r["flagged"]]
            if fl:
                self.flags.stream({"step": [int(r["step"]) for r in fl], "step_ms": [r["step_ns"] / 1e6 for r in fl]})
            self._n += len(recs)
            last = recs[-1]
            self.status.value = (f"{self._n} steps; last {escape_html(fmt_ns(last['step_ns']))}, running median "
                                 f"{escape_html(fmt_ns(last['median_ns']))}; flagged: {len(self.flags.data['step'])}")
        self.bokeh_widget.update_from_model(self.bokeh_layout)

    def close_run(self, watch: Any) -> None:
        """The watch closed: last flush, and one button per captured flagged step (``Watch.on_close``)."""
        self.run_dir = Path(watch.run_dir)
        self.flush()
        self.set_captures(watch.captures)

    def set_captures(self, captures: list[dict[str, Any]]) -> None:
        """One "open" button per flagged step of each kept window (``Watch.captures`` / summary.json)."""
        self._captures = list(captures)
        self.buttons = {}
        for cap in captures:
            for s in cap.get("flagged_steps", []):
                b = widgets.Button(description=f"step {int(s)}: open its captured trace", icon="search",
                                   tooltip=str(cap["path"]), layout=widgets.Layout(width="auto"))
                b.add_class("nbprof-watch-open")
                b.on_click(lambda _b, s=int(s): self.open_step(s))
                self.buttons[int(s)] = b
        self.links.children = list(self.buttons.values())

    def _on_tap(self, attr: str, old: Any, new: Any) -> None:
        if new:
            s = int(self.flags.data["step"][new[0]])
            if s in self.buttons:
                self.open_step(s)

    def open_step(self, step: int) -> Any:
        """Show the dashboard of the trace that captured flagged ``step`` below the chart; returns it.

        Raises
        ------
        KeyError
            When ``step`` was not captured.
        """
        from ..sources import load
        from .dashboard import dashboard

        for cap in self._captures:
            if step in [int(s) for s in cap.get("flagged_steps", [])]:
                path = Path(self.run_dir or ".") / cap["path"]
                n = cap["profiler_steps"].get(str(step), cap["profiler_steps"].get(step))
                head = widgets.HTML(f"<b>step {step}</b> is <code>ProfilerStep#{escape_html(str(n))}</code> in "
                                    f"<code>{escape_html(str(path))}</code>")
                d = dashboard(load(str(path)))
                self.detail.children = [head, d]
                self.opened = step
                return d
        raise KeyError(f"step {step} was not captured")


def watch_view(watch_or_run: Any, *, theme: str = "auto", width: int = 1100, interval_s: float = 0.5) -> WatchView:
    """The live chart of a running :class:`nbprof.capture.watch.Watch` (it becomes the watch's listener and is
    told when the watch closes), or of a finished run folder (path).

    Raises
    ------
    nbprof.errors.TraceFormatError
        A path that is not a watch run folder.
    """
    from ..capture.watch import Watch

    if isinstance(watch_or_run, Watch):
        w = watch_or_run
        v = WatchView(k=w.k, run_dir=w.run_dir, theme=theme, width=width, interval_s=interval_s)
        w.add_listener(v.push)
        w.on_close.append(v.close_run)
        return v
    from ..sources.watch_run import read_run

    run = read_run(watch_or_run)
    k = float(run.summary.get("config", {}).get("k", 3.0))
    v = WatchView(k=k, run_dir=run.path, theme=theme, width=width, interval_s=interval_s)
    df: pd.DataFrame = run.steps
    recs = df.to_dict("records")
    for r in recs:
        r["step_ns"], r["median_ns"] = int(np.int64(r["step_ns"])), int(np.int64(r["median_ns"]))
    v._pending = [dict(r, _k=k) for r in recs]
    v.flush()
    v.set_captures(run.summary.get("captures", []))
    return v
