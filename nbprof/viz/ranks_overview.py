"""The all-ranks overview: one row per rank, one cell per time bin, coloured by computation / communication / idle
-- the all-ranks timeline at job scale, drawn from the per-rank reductions only (issue 37, "Past one machine").

Data: :func:`nbprof.analysis.distributed.ranks_overview` (per rank and bin of :func:`~nbprof.analysis.distributed.
ranks_clock`'s common axis: ``compute_ns``, ``comm_ns``, ``busy_ns``, ``idle_ns``, int64 ns). The job is a dataset
opened with :func:`nbprof.open_job` (its reductions are read, no full trace), a reductions mapping, or the ranks'
traces. The browser receives one rectangle per rank and bin and nothing per event: ``ranks x bins`` rows (the
number of bins is capped so that ``ranks x bins <= max_cells``; 1,024 ranks get 64 bins).

Colour of a cell: the mix of computation (green), overlapped communication (purple), exposed communication (red)
and idle (grey) weighted by their share of the bin inside the rank's trace; its opacity is that share (time
outside the rank's trace -- before its first event or after its last -- is transparent). The colours are those
of the Distributed view's per-step breakdown. Hover: the rank (and its source file), the bin, and each part's
time, formatted by :mod:`nbprof.units` in Python (the browser only looks the texts up).

Zoom: in a notebook, clicking a cell (or box-selecting cells) loads the full trace of that rank only
(``job.trace(rank)``) and opens it in the single-rank timeline (:func:`nbprof.viz.timeline.timeline`) on the
selected time range, below the overview; :meth:`RanksOverviewView.zoom` does the same from code. Panning or
zooming the overview re-bins the visible window (live view). A static page (``nbprof report --ranks``) holds the
overview only, zoomed in the browser without re-binning.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import distributed as D
from ..analysis.distributed import reductions as R
from ..units import fmt_ns
from ._base import NbprofView
from ._escape import escape_html
from .theme import apply_theme, on_render, style_widgets

__all__ = ["RanksOverviewModel", "RanksOverviewView", "ranks_overview_view", "static_view", "PARTS"]

#: (part, colour, label): the parts a cell's colour mixes, in the Distributed view's colours
PARTS: tuple[tuple[str, str, str], ...] = (
    ("compute", "#2ca02c", "computation"),
    ("overlapped", "#9467bd", "overlapped communication"),
    ("exposed", "#d62728", "exposed communication"),
    ("idle", "#c7c7c7", "idle"),
)
_RGB = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for _p, c, _l in PARTS], dtype=np.float64)
_TABLES = ("rank_info", "collectives", "compute")
#: the data columns sent to the browser (one row per rank and bin)
CELL_COLUMNS = ("x", "y", "b", "ci", "a", "hc", "hm", "hx", "hi")


def default_bins(n_ranks: int, max_cells: int = 65_536, max_bins: int = 200, min_bins: int = 8) -> int:
    """Bins per rank: ``max_bins``, fewer when ``n_ranks x bins`` would exceed ``max_cells`` (never below
    ``min_bins``): 2 ranks get 200 bins, 1,024 ranks 64."""
    return int(max(min_bins, min(max_bins, max_cells // max(int(n_ranks), 1))))


def _job_parts(job: Any) -> tuple[Mapping[str, pd.DataFrame], Callable[[int], Any] | None, dict[int, str]]:
    """(reductions, rank -> full Trace loader or None, rank -> source name) of what the view was given."""
    from ..trace.model import Trace

    ds = getattr(job, "dataset", None)  # a MultiRankTrace written to a dataset: read its reductions
    if isinstance(ds, str) and os.path.isfile(os.path.join(ds, "manifest.json")):
        from ..job import open_job

        job = open_job(ds)
    if callable(getattr(job, "reductions", None)) and callable(getattr(job, "trace", None)):  # nbprof.Job
        names = {int(s["rank"]): os.path.basename(str(s["source"]).split("::")[-1])
                 for s in job.manifest.get("sources", []) if s.get("status") == "ok" and s.get("rank") is not None}
        return job.reductions(), job.trace, names
    if isinstance(job, Mapping):
        return job, None, {}
    traces = [job] if isinstance(job, Trace) else (list(job.traces()) if callable(getattr(job, "traces", None))
                                                   else list(job))
    if not traces:
        raise ValueError("no rank given: the overview needs a job dataset, its reductions or the ranks' traces")
    by_rank = {int(t.meta.rank): t for t in traces}
    names = {r: os.path.basename(t.meta.source_path or "") for r, t in by_rank.items()}
    return R.job_reductions(list(by_rank.values()), _TABLES), by_rank.__getitem__, names


class RanksOverviewModel:
    """The overview's data: :func:`~nbprof.analysis.distributed.ranks_overview` of a job and the cells drawn.

    Parameters
    ----------
    job : nbprof.Job, mapping of reductions, MultiRankTrace, Trace or sequence of Trace
        See :func:`ranks_overview_view`.
    bins : int, optional
        Bins per rank (default :func:`default_bins` of the rank count and ``max_cells``).
    align : {"end", "none"}
        :func:`~nbprof.analysis.distributed.ranks_clock`'s clock refinement.
    max_cells : int
        Most cells (ranks x bins) drawn.

    Attributes
    ----------
    ranks : list of int
        The ranks drawn (those with an absolute clock), one row each, top to bottom.
    names : dict
        Rank -> its source file's name ("" when unknown): trace-supplied text, escaped wherever it reaches HTML.
    shifts : dict
        Rank -> ns added to its own clock to put it on the common axis.
    t0_ns, t1_ns : int
        The job's extent on the common axis.
    bins : int
    frame : pandas.DataFrame
        The last :meth:`cells` call's ``ranks_overview`` frame (columns as that function documents).

    Raises
    ------
    ValueError
        No rank with an absolute clock, or no rank at all.
    """

    def __init__(self, job: Any, *, bins: int | None = None, align: str = "end", max_cells: int = 65_536):
        self.red, self._loader, names = _job_parts(job)
        self.align = align
        self.shifts, _links = D.ranks_clock(self.red, align=align)
        info = self.red["rank_info"]
        self.ranks = [int(r) for r in info["rank"] if int(r) in self.shifts]
        if not self.ranks:
            raise ValueError("no rank with an absolute clock (Kineto baseTimeNanoseconds): the ranks cannot be put "
                             "on one timeline")
        self.names = {r: names.get(r, "") for r in self.ranks}
        self.row = {r: i for i, r in enumerate(self.ranks)}
        self.max_cells = int(max_cells)
        self.bins = int(bins) if bins is not None else default_bins(len(self.ranks), self.max_cells)
        sel = info[info["rank"].isin(self.ranks)]
        sh = sel["rank"].map(self.shifts).to_numpy(np.int64)
        self.t0_ns = int((sel["first_ts_ns"].to_numpy(np.int64) + sh).min())
        self.t1_ns = max(int((sel["last_end_ns"].to_numpy(np.int64) + sh).max()), self.t0_ns + 1)
        self.frame = pd.DataFrame()
        self.palette: list[str] = []
        self.labels: list[str] = []
        self.bin_labels: list[str] = []
        self.bin_ms = 0.0
        self.source: Any = None
        self.renderer: Any = None
        self.mapper: Any = None
        self.hover: Any = None

    @property
    def can_zoom(self) -> bool:
        """Whether a rank's full trace can be loaded (a dataset or traces were given, not bare reductions)."""
        return self._loader is not None

    def trace(self, rank: int) -> Any:
        """The full ``Trace`` of ``rank`` (``job.trace(rank)`` for a dataset: only that rank is read).

        Raises
        ------
        KeyError
            Not a rank of the job, or only reductions were given (no trace to load).
        """
        if self._loader is None:
            raise KeyError(f"rank {rank}: only reductions were given, no trace to load (open the job with "
                           "nbprof.open_job(PATH))")
        return self._loader(int(rank))

    def cells(self, x0_ns: float | None = None, x1_ns: float | None = None) -> dict[str, Any]:
        """The cells of the window ``[x0_ns, x1_ns)`` (common axis, default the whole job): one per rank and bin.

        Returns
        -------
        dict
            A data-source payload of numpy arrays (:data:`CELL_COLUMNS`): ``x`` (bin centre, ms), ``y`` (the
            rank's row), ``b`` (bin), ``ci`` (index of the cell's colour in ``self.palette``), ``a`` (opacity:
            the share of the bin inside the rank's trace), ``hc, hm, hx, hi`` (indices in ``self.labels`` of the
            computation, communication, exposed communication and idle times, ``fmt_ns`` texts). Sets
            ``frame``, ``palette``, ``labels``, ``bin_labels`` and ``bin_ms`` (the bin width).
        """
        lo = self.t0_ns if x0_ns is None else int(max(float(x0_ns), self.t0_ns - (self.t1_ns - self.t0_ns)))
        hi = self.t1_ns if x1_ns is None else int(min(float(x1_ns), self.t1_ns + (self.t1_ns - self.t0_ns)))
        hi = max(hi, lo + self.bins)  # at least 1 ns per bin
        f = D.ranks_overview(self.red, bins=self.bins, x0_ns=lo, x1_ns=hi, align=self.align)
        f = f[f["rank"].isin(self.row)].reset_index(drop=True)
        self.frame = f
        comp, comm, busy, idle = (f[c].to_numpy(np.int64) for c in ("compute_ns", "comm_ns", "busy_ns", "idle_ns"))
        width = (f["end_ns"] - f["start_ns"]).to_numpy(np.int64)
        overlapped = comp + comm - busy
        parts = np.stack([comp - overlapped, overlapped, comm - overlapped, idle], axis=1).astype(np.float64)
        inside = parts.sum(axis=1)
        mix = (parts @ _RGB) / np.where(inside > 0, inside, 1.0)[:, None]
        key = (mix.round().astype(np.int64) * np.array([1 << 16, 1 << 8, 1])).sum(axis=1)
        colours, ci = np.unique(key, return_inverse=True)
        self.palette = [f"#{int(k):06x}" for k in colours]
        texts = np.concatenate([comp, comm, comm - overlapped, idle])
        uniq, inv = np.unique(texts, return_inverse=True)
        self.labels = [fmt_ns(float(v)) for v in uniq]
        n = len(f)
        starts, ends = f["start_ns"].to_numpy(np.int64)[:self.bins], f["end_ns"].to_numpy(np.int64)[:self.bins]
        self.bin_labels = [f"{fmt_ns(float(a))} to {fmt_ns(float(b))}" for a, b in zip(starts, ends)]
        self.bin_ms = float(width[0]) / 1e6 if n else (hi - lo) / self.bins / 1e6
        return {
            "x": (f["start_ns"].to_numpy(np.float64) + width / 2) / 1e6,
            "y": f["rank"].map(self.row).to_numpy(np.int32),
            "b": f["bin"].to_numpy(np.int32),
            "ci": ci.reshape(-1).astype(np.int32),
            "a": np.where(width > 0, inside / np.where(width > 0, width, 1), 0.0).clip(0, 1).astype(np.float32),
            "hc": inv[:n].astype(np.int32), "hm": inv[n:2 * n].astype(np.int32),
            "hx": inv[2 * n:3 * n].astype(np.int32), "hi": inv[3 * n:].astype(np.int32),
        }

    def _hover(self):
        from bokeh.models import CustomJSHover, HoverTool

        look = "return xs[value]"
        lab = CustomJSHover(args={"xs": self.labels}, code=look, name="nbprof_overview_labels")
        bins = CustomJSHover(args={"xs": self.bin_labels}, code=look, name="nbprof_overview_bins")
        # rank names are trace-supplied: BokehJS escapes a tuple tooltip's formatted value before it is shown
        who = CustomJSHover(args={"xs": [f"rank {r}" + (f" ({self.names[r]})" if self.names[r] else "")
                                         for r in self.ranks]}, code=look, name="nbprof_overview_ranks")
        return HoverTool(renderers=[self.renderer], tooltips=[
            ("", "@y{custom}"), ("time", "@b{custom}"), ("computation", "@hc{custom}"),
            ("communication", "@hm{custom}"), ("of it exposed", "@hx{custom}"), ("idle", "@hi{custom}")],
            formatters={"@y": who, "@b": bins, "@hc": lab, "@hm": lab, "@hx": lab, "@hi": lab})

    def _update_lookups(self) -> None:
        """Point the colour map and the hover's texts at the last :meth:`cells` call's tables."""
        self.renderer.glyph.width = self.bin_ms
        self.mapper.update(palette=self.palette, low=-0.5, high=len(self.palette) - 0.5)
        for name, xs in (("nbprof_overview_labels", self.labels), ("nbprof_overview_bins", self.bin_labels)):
            for m in self.hover.select({"name": name}):
                m.args = {"xs": xs}

    def figure(self, *, width: int = 1100, height: int | None = None, theme: str = "light"):
        """The Bokeh figure with the whole job's cells (``self.source``: a data source named ``nbprof_overview``).

        Tools: x wheel zoom, box zoom, pan, tap and box select (the live view zooms into the selected rank),
        reset, save."""
        from bokeh.models import BasicTicker, ColumnDataSource, FixedTicker, LinearColorMapper, Range1d
        from bokeh.plotting import figure

        data = self.cells()
        n = len(self.ranks)
        h = height or int(min(820, max(180, 70 + 16 * n)))
        pad = (self.t1_ns - self.t0_ns) * 0.01
        p = figure(width=width, height=h, name="nbprof_overview_plot",
                   title=f"All {n} ranks: computation, communication and idle per time bin ({self.bins} bins)",
                   x_range=Range1d((self.t0_ns - pad) / 1e6, (self.t1_ns + pad) / 1e6),
                   y_range=Range1d(n - 0.5, -0.5, bounds=(-0.5, n - 0.5)),
                   x_axis_label="ms on the job's clock (ranks aligned on their collectives)", y_axis_label="rank",
                   tools="xwheel_zoom,box_zoom,xpan,tap,box_select,reset,save", active_scroll="xwheel_zoom",
                   toolbar_location="right")
        self.source = ColumnDataSource(data, name="nbprof_overview")
        self.mapper = LinearColorMapper(palette=self.palette, low=-0.5, high=len(self.palette) - 0.5)
        self.renderer = p.rect(x="x", y="y", width=self.bin_ms, height=0.92, source=self.source,
                               fill_color={"field": "ci", "transform": self.mapper}, fill_alpha="a", line_color=None,
                               name="nbprof_overview_cells", nonselection_fill_alpha=0.35,
                               selection_line_color="#111111", selection_line_width=1)
        self.hover = self._hover()
        p.add_tools(self.hover)
        # rows are integers: ticks on rows only (every row up to 48 ranks), labelled with their rank
        p.yaxis.ticker = FixedTicker(ticks=list(range(n))) if n <= 48 else BasicTicker(desired_num_ticks=16,
                                                                                       min_interval=1)
        p.yaxis.major_label_overrides = {i: str(r) for i, r in enumerate(self.ranks)}
        p.ygrid.visible = False
        p.yaxis.minor_tick_line_color = None
        p.xgrid.visible = False
        apply_theme([p], "dark" if theme == "dark" else "light")
        return p

    def legend_html(self) -> str:
        """The colour key (fixed text, no trace data)."""
        sw = "".join(f'<span style="display:inline-block;width:12px;height:12px;background:{c};margin:0 4px 0 12px;'
                     f'vertical-align:middle"></span>{escape_html(lab)}' for _p, c, lab in PARTS)
        return f"<div>Each cell mixes {sw}; faded: outside the rank's trace.</div>"

    def summary_text(self) -> str:
        """One line: ranks, bins, cells, the job's span and how to zoom."""
        return (f"{len(self.ranks)} ranks x {self.bins} bins = {len(self.ranks) * self.bins} cells over "
                f"{fmt_ns(self.t1_ns - self.t0_ns)}, from the per-rank reductions (no trace loaded). "
                + ("Click a cell (or box-select cells) to open that rank's full timeline on that time range."
                   if self.can_zoom else "Give the job dataset (nbprof.open_job) to open a rank's full timeline."))

    def static_layout(self, *, width: int = 1100, height: int | None = None, theme: str = "light"):
        """The overview as a static Bokeh layout (browser-side zoom, no re-binning, no trace loading)."""
        from bokeh.layouts import column
        from bokeh.models import Div

        p = self.figure(width=width, height=height, theme=theme)
        note = (f"{len(self.ranks)} ranks x {self.bins} bins over {fmt_ns(self.t1_ns - self.t0_ns)}, from the "
                "per-rank reductions. In a notebook, nbprof.viz.ranks_overview.ranks_overview_view(job) opens a "
                "clicked rank's full timeline.")
        lay = column(p, Div(text=self.legend_html(), width=width, name="nbprof_overview_legend"),
                     Div(text=note, render_as_text=True, width=width, name="nbprof_overview_note"),
                     name="nbprof_ranks_overview")
        style_widgets(lay, theme)
        on_render(lay, [p], theme)
        return lay


class RanksOverviewView(NbprofView):
    """The live overview (see :func:`ranks_overview_view`): re-bins on every range change, zooms into a rank.

    Attributes
    ----------
    model : RanksOverviewModel
    zoomed : tuple of (int, TimelineView) or None
        The rank whose full timeline is open below the overview, and that view.
    updates : int
        Range changes re-binned.
    """

    def __init__(self, model: RanksOverviewModel, *, width: int, height: int | None, theme: str):
        import ipywidgets as widgets
        from bokeh.events import RangesUpdate
        from bokeh.layouts import column
        from bokeh.models import Div

        self.model = model
        self.width_px = width
        self.theme = theme
        self.updates = 0
        self.zoomed: tuple[int, Any] | None = None
        p = model.figure(width=width, height=height, theme=theme)
        self.figure = p
        self.info = Div(text=model.summary_text(), render_as_text=True, width=width, name="nbprof_overview_info")
        lay = column(p, Div(text=model.legend_html(), width=width, name="nbprof_overview_legend"), self.info,
                     name="nbprof_ranks_overview")
        style_widgets(lay, theme)
        on_render(lay, [p], theme)
        p.on_event(RangesUpdate, self._on_range)
        model.source.selected.on_change("indices", self._on_select)
        self.zoom_box = widgets.VBox([])
        super().__init__(lay, self._text(), "ranks_overview",
                         static_builder=lambda theme="light": model.static_layout(width=width, height=height,
                                                                                  theme=theme))
        self.children = (*self.children, self.zoom_box)  # type: ignore[has-type]

    def _text(self) -> str:
        return "nbprof all-ranks overview: " + self.model.summary_text()

    def refresh(self, x0_ms: float, x1_ms: float) -> None:
        """Re-bin the window ``[x0_ms, x1_ms]`` (ms on the common axis) and send the new cells."""
        m = self.model
        data = m.cells(x0_ms * 1e6, x1_ms * 1e6)
        if m.source.selected.indices:
            m.source.selected.indices = []
        m.source.data = data
        m._update_lookups()
        self.updates += 1

    def _on_range(self, event) -> None:
        if event.x0 is None or event.x1 is None:
            return
        self.refresh(float(event.x0), float(event.x1))

    def _on_select(self, _attr, _old, new) -> None:
        if not new or not self.model.can_zoom:
            return
        idx = np.asarray(new, dtype=np.int64)
        d = self.model.source.data
        rows = np.asarray(d["y"])[idx]
        row = int(rows.min())
        x = np.asarray(d["x"])[idx][rows == row]
        half = self.model.bin_ms / 2
        if len(idx) == 1:  # a click: the rank over the visible window
            x0, x1 = self.figure.x_range.start, self.figure.x_range.end
        else:  # a box: the rank over the selected bins
            x0, x1 = float(x.min()) - half, float(x.max()) + half
        self.zoom(self.model.ranks[row], float(x0) * 1e6, float(x1) * 1e6)

    def zoom(self, rank: int, x0_ns: float | None = None, x1_ns: float | None = None):
        """Load ``rank``'s full trace only (``job.trace(rank)``) and open it in the timeline view below the overview,
        on ``[x0_ns, x1_ns)`` of the common axis (default: the whole trace).

        Returns
        -------
        nbprof.viz.timeline.TimelineView

        Raises
        ------
        KeyError
            Not a rank of the job, or only reductions were given.
        """
        import ipywidgets as widgets

        from .timeline import timeline

        rank = int(rank)
        if rank not in self.model.row:
            raise KeyError(f"rank {rank} is not drawn (ranks {self.model.ranks[:8]}...)")
        tr = self.model.trace(rank)
        tv = timeline(tr, theme=self.theme, width=self.width_px)
        if x0_ns is not None and x1_ns is not None:
            sh = self.model.shifts[rank]
            tv.set_range((float(x0_ns) - sh) / 1e6, (float(x1_ns) - sh) / 1e6)
        name = self.model.names.get(rank, "")
        head = escape_html(f"Rank {rank}" + (f" ({name})" if name else "") + ": its full trace")
        self.zoom_box.children = (widgets.HTML(f"<b>{head}</b>"), tv)
        self.zoomed = (rank, tv)
        return tv


def ranks_overview_view(job, *, theme: str = "auto", width: int = 1100, height: int | None = None,
                        bins: int | None = None, align: str = "end", max_cells: int = 65_536) -> RanksOverviewView:
    """All ranks of a job as a heat strip (a widget): one row per rank, one cell per time bin.

    Parameters
    ----------
    job : nbprof.Job, mapping of reductions, MultiRankTrace, Trace or sequence of Trace
        A dataset opened with :func:`nbprof.open_job` (only its reductions are read; a clicked rank's full trace
        is read with ``job.trace(rank)``), the reductions themselves (no zoom), or the ranks' traces.
    theme : {"auto", "light", "dark"}
    width, height : int
    bins : int, optional
        Bins per rank (default: 200, fewer above ``max_cells / 200`` ranks).
    align : {"end", "none"}
        :func:`nbprof.analysis.distributed.ranks_clock`'s clock refinement.
    max_cells : int
        Most cells drawn (ranks x bins).

    Returns
    -------
    RanksOverviewView
        Panning / zooming re-bins the window; clicking a cell opens that rank's full timeline below
        (:meth:`RanksOverviewView.zoom`).

    Raises
    ------
    ValueError
        Unknown theme or align, no rank, no rank with an absolute clock.
    """
    if theme not in ("auto", "light", "dark"):
        raise ValueError(f"theme must be 'auto', 'light' or 'dark', got {theme!r}")
    model = RanksOverviewModel(job, bins=bins, align=align, max_cells=max_cells)
    return RanksOverviewView(model, width=width, height=height, theme=theme)


def static_view(job, *, theme: str = "light", width: int = 1100, bins: int | None = None, align: str = "end",
                max_cells: int = 65_536):
    """The overview as a static Bokeh layout (``job`` as in :func:`ranks_overview_view`)."""
    return RanksOverviewModel(job, bins=bins, align=align, max_cells=max_cells).static_layout(width=width, theme=theme)
