"""All ranks on one timeline: the single-rank timeline's lanes, stacked per rank, on one clock, with the
collectives linked across ranks (pytorch/pytorch#128292; issue 24).

Clock: :func:`nbprof.analysis.distributed.ranks_clock` -- each rank's absolute Kineto clock
(``baseTimeNanoseconds``), refined by the median offset of matched collective completions
(``align="end"``, the default), relative to the job's first event. Lanes: one group per rank, each the
lanes of :class:`~nbprof.viz.timeline_lod.TimelineLayout` (step band, host threads, device streams),
labelled ``rank <r> / ...``. Level of detail: each rank's layout aggregates its events per pixel bin as
the single-rank timeline does (live: re-aggregated in the kernel on every range change; static:
pre-aggregated resolutions switched in the browser). Links: one segment between consecutive ranks'
arrivals at the same collective instance (:func:`~nbprof.analysis.distributed.wait_transfer`'s
matching: k-th call of a collective per process group), drawn from the start of the collective's
execution row on each rank; at most ``max_links`` per window (those with the longest wait first), with a
visible "showing N of M".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import distributed as D
from ..units import fmt_ns
from .distributed import _traces
from .timeline import TimelineModel, TimelineView
from .timeline_lod import Lane, TimelineLayout

__all__ = ["RanksTimelineModel", "RanksTimelineView", "ranks_timeline_view", "static_view"]

_LINK_COLOR = "#9467bd"
_LINK_KEYS: dict[str, Any] = {"x0": [], "y0": [], "x1": [], "y1": [], "collective": [], "k": [], "wait_ms": [],
                              "last_rank": []}


class RanksTimelineModel(TimelineModel):
    """Several ranks' :class:`TimelineLayout` stacked on the common clock (same drawing as :class:`TimelineModel`).

    Parameters
    ----------
    traces : sequence of Trace
        One per rank; traces without an absolute origin (``meta.origin_ns``) are left out.
    align : {"end", "none"}
        :func:`~nbprof.analysis.distributed.ranks_clock`'s alignment.
    max_depth, include_python
        As in :class:`TimelineLayout`.
    max_links : int
        Most collective links drawn per window.

    Attributes
    ----------
    ranks : list of int
    shifts : dict
        Rank -> ns added to its events (``ranks_clock``).
    links : pandas.DataFrame
        ``ranks_clock``'s links plus ``y`` (the row centre of the collective's execution on its rank).
    parts : list of (rank, TimelineLayout, first_row, name_offset, shape_offset)

    Raises
    ------
    ValueError
        No trace with an absolute origin, or two traces of the same rank.
    """

    def __init__(self, traces: Sequence[Any], *, align: str = "end", max_depth: int = 8, include_python: bool = True,
                 max_links: int = 4000):
        ts = sorted((t for t in traces if t.meta.origin_ns is not None), key=lambda t: int(t.meta.rank))
        if not ts:
            raise ValueError("no trace with an absolute clock (Kineto baseTimeNanoseconds): the ranks cannot be "
                             "put on one timeline")
        ranks = [int(t.meta.rank) for t in ts]
        if len(set(ranks)) != len(ranks):
            dup = sorted({r for r in ranks if ranks.count(r) > 1})
            raise ValueError(f"several traces of rank {dup}: give one trace per rank")
        self.trace = ts[0]
        self.traces = ts
        self.ranks = ranks
        self.max_links = int(max_links)
        self.shifts, links = D.ranks_clock(ts, align=align)
        self.parts: list[tuple[int, TimelineLayout, int, int, int]] = []
        lanes: list[Lane] = []
        names: list[str] = []
        shapes: list[str] = []
        row = 0
        for t, r in zip(ts, ranks):
            lay = TimelineLayout(t, max_depth=max_depth, include_python=include_python)
            sh = int(self.shifts.get(r, 0))
            for a in ("ts", "end", "end_cummax"):
                setattr(lay, a, getattr(lay, a) + sh)
            lay.t0_ns += sh
            lay.t1_ns += sh
            self.parts.append((r, lay, row, len(names), len(shapes)))
            lanes += [Lane(f"rank {r} / {ln.label}", ln.kind, ln.first_row + row, ln.n_rows) for ln in lay.lanes]
            names += lay.names
            shapes += lay.shapes
            row += lay.n_rows
        self.lanes = lanes
        self.n_rows = row
        self.names = names
        self.shapes = shapes
        self.palette = self.parts[0][1].palette
        self.n_events = sum(p[1].n_events for p in self.parts)
        self.t0_ns = min(p[1].t0_ns for p in self.parts)
        self.t1_ns = max(p[1].t1_ns for p in self.parts)
        self.links = self._link_rows(links)
        self.link_source: Any = None
        self.n_links_shown = 0

    def _link_rows(self, links: pd.DataFrame) -> pd.DataFrame:
        """Each link row's ``y``: the row of the event that executed the collective on its rank (same start and
        duration on the common axis), else the rank's first row."""
        if links.empty:
            return links.assign(y=pd.Series(dtype=np.float64))
        ys = []
        for r, lay, row0, _n, _s in self.parts:
            lk = links[links["rank"] == r]
            if lk.empty:
                continue
            ev = pd.DataFrame({"ts_ns": lay.ts, "dur_ns": lay.dur, "y": lay.row.astype(np.float64) + row0 + 0.5})
            ev = ev.drop_duplicates(["ts_ns", "dur_ns"])
            m = lk[["ts_ns", "dur_ns"]].astype(np.int64).merge(ev, on=["ts_ns", "dur_ns"], how="left")
            ys.append(pd.Series(m["y"].fillna(row0 + 0.5).to_numpy(), index=lk.index))
        out = links.copy()
        out["y"] = pd.concat(ys) if ys else np.nan
        out = out[out["y"].notna()]
        return out.sort_values(["collective", "pg_name", "k", "rank"], kind="stable").reset_index(drop=True)

    def query(self, x0_ns: float | None = None, x1_ns: float | None = None, *, width_px: int = 1200,
              max_quads: int = 8000, min_px: float = 2.0, bin_px: float = 2.0) -> dict[str, np.ndarray]:
        """:meth:`TimelineLayout.query` of every rank for the window (ns on the common axis), rows and name/shape
        indices moved to the stacked layout, plus a ``rank`` column (``ev`` indexes that rank's events).
        ``max_quads`` is shared between the ranks."""
        x0 = float(self.t0_ns if x0_ns is None else x0_ns)
        x1 = float(self.t1_ns if x1_ns is None else x1_ns)
        per = max(1, int(max_quads) // max(len(self.parts), 1))
        outs = []
        for r, lay, row0, noff, soff in self.parts:
            d = lay.query(x0, x1, width_px=width_px, max_quads=per, min_px=min_px, bin_px=bin_px)
            d["y"] = (d["y"] + row0).astype(np.float32)
            d["ly"] = d["ly"] + row0
            for k, off in (("nid", noff), ("oid", noff), ("sid", soff)):
                d[k] = np.where(d[k] >= 0, d[k] + off, -1).astype(np.int32)
            d["rank"] = np.full(len(d["left"]), r, dtype=np.int32)
            outs.append(d)
        return {k: np.concatenate([d[k] for d in outs]) for k in outs[0]}

    def link_segments(self, x0_ns: float | None = None, x1_ns: float | None = None) -> dict[str, list]:
        """Segments joining consecutive ranks' arrivals at each collective instance overlapping the window.

        Returns
        -------
        dict
            A data-source payload: ``x0, y0, x1, y1`` (ms on the common axis, row centres), ``collective``,
            ``k``, ``wait_ms`` (the instance's longest wait), ``last_rank``; at most ``max_links`` instances
            (longest wait first). Sets ``n_links_shown`` / ``n_links_window``.
        """
        lk = self.links
        out: dict[str, list] = {k: [] for k in _LINK_KEYS}
        self.n_links_shown = self.n_links_window = 0
        if lk.empty:
            return out
        x0 = float(self.t0_ns if x0_ns is None else x0_ns)
        x1 = float(self.t1_ns if x1_ns is None else x1_ns)
        key = ["collective", "pg_name", "k"]
        end = lk["ts_ns"] + lk["dur_ns"]
        g = lk.assign(end=end).groupby(key, sort=False)
        inst = g.agg(t0=("ts_ns", "min"), t1=("end", "max"), wait=("wait_ns", "max"), n=("rank", "size")).reset_index()
        inst = inst[(inst["t1"] >= x0) & (inst["t0"] <= x1) & (inst["n"] >= 2)]
        self.n_links_window = len(inst)
        inst = inst.sort_values("wait", ascending=False, kind="stable").head(self.max_links)
        self.n_links_shown = len(inst)
        sel = lk.merge(inst[key], on=key)
        nxt = sel.groupby(key, sort=False).shift(-1)
        ok = nxt["ts_ns"].notna()
        a, b = sel[ok], nxt[ok]
        wmax = sel.groupby(key, sort=False)["wait_ns"].transform("max")[ok]
        out.update(x0=(a["ts_ns"].to_numpy(np.float64) / 1e6).tolist(), y0=a["y"].to_numpy(np.float64).tolist(),
                   x1=(b["ts_ns"].to_numpy(np.float64) / 1e6).tolist(), y1=b["y"].to_numpy(np.float64).tolist(),
                   collective=a["collective"].astype(str).tolist(), k=a["k"].astype(int).tolist(),
                   wait_ms=(wmax.to_numpy(np.float64) / 1e6).tolist(), last_rank=a["last_rank"].astype(int).tolist())
        return out

    def _figure(self, *, width: int, height: int | None, theme: str):
        from bokeh.models import ColumnDataSource, HoverTool, Span

        p, names = super()._figure(width=width, height=height, theme=theme)
        p.title.text = f"All ranks ({len(self.ranks)}) on one clock"
        for lay_first in [row0 for _r, _l, row0, _n, _s in self.parts[1:]]:
            p.add_layout(Span(location=lay_first, dimension="width", line_color="#444444", line_alpha=0.9,
                              line_width=2, name="nbprof_rank_separator"))
        self.link_source = ColumnDataSource(self.link_segments(), name="nbprof_rank_links")
        seg = p.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=self.link_source, line_color=_LINK_COLOR,
                        line_width=2, line_alpha=0.85, name="nbprof_rank_links_glyph")
        self._event_hover = next((t for t in p.tools if isinstance(t, HoverTool)), None)
        if self._event_hover is not None:
            self._event_hover.renderers = []  # the event hover: only the event glyphs (added in _glyph)
        p.add_tools(HoverTool(renderers=[seg], tooltips=[("collective", "@collective #@k"), ("last rank", "@last_rank"),
                                                         ("longest wait", "@wait_ms{0,0.000} ms")]))
        return p, names

    def _glyph(self, p, source):
        r = super()._glyph(p, source)
        h = getattr(self, "_event_hover", None)
        if h is not None:
            h.renderers = [*h.renderers, r]
        return r

    def links_text(self) -> str:
        """``"showing N of M collective links ..."`` for the last :meth:`link_segments` call."""
        if self.links.empty:
            return "No collective matched across ranks: no links."
        return (f"Collective links: showing {self.n_links_shown} of {self.n_links_window} instances in view "
                f"({len(self.links[['collective', 'pg_name', 'k']].drop_duplicates())} matched in all).")

    def static_layout(self, *, width: int = 1200, height: int | None = None, theme: str = "light",
                      level_budget: int = 12000, max_levels: int = 6):
        """As :meth:`TimelineModel.static_layout`, with the links and a "showing N of M" line."""
        from bokeh.models import Div

        lay = super().static_layout(width=width, height=height, theme=theme, level_budget=level_budget,
                                    max_levels=max_levels)
        lay.children = [*lay.children, Div(text=self.links_text(), render_as_text=True, width=width,
                                           name="nbprof_rank_links_note")]
        lay.name = "nbprof_ranks_timeline"
        return lay


class RanksTimelineView(TimelineView):
    """The live all-ranks timeline (see :func:`ranks_timeline_view`); links re-selected on every range change."""

    model: RanksTimelineModel

    def __init__(self, model: RanksTimelineModel, *, width: int, height: int | None, theme: str, max_quads: int):
        super().__init__(model, width=width, height=height, theme=theme, max_quads=max_quads)
        self.kind = "ranks_timeline"
        self.add_class("nbprof-ranks_timeline")

    def _status_text(self) -> str:
        return super()._status_text() + " " + self.model.links_text()

    def _text(self) -> str:
        m = self.model
        return (f"nbprof all-ranks timeline: ranks {m.ranks}, {m.n_events} events, {fmt_ns(m.t1_ns - m.t0_ns)}, "
                f"{len(m.lanes)} lanes; " + m.links_text())

    def refresh(self, x0_ms: float, x1_ms: float) -> None:
        """Re-aggregate every rank and re-select the links for the window ``[x0_ms, x1_ms]`` (ms)."""
        if self.model.link_source is not None:
            self.model.link_source.data = self.model.link_segments(x0_ms * 1e6, x1_ms * 1e6)
        super().refresh(x0_ms, x1_ms)


def ranks_timeline_view(traces, *, theme: str = "auto", width: int = 1100, height: int | None = None,
                        align: str = "end", max_depth: int = 8, include_python: bool = True, max_quads: int = 8000,
                        max_links: int = 4000) -> RanksTimelineView:
    """All ranks of a job on one timeline (a widget).

    Parameters
    ----------
    traces : Trace, sequence of Trace or MultiRankTrace
        One trace per rank (each with an absolute Kineto clock).
    theme : {"auto", "light", "dark"}
    width, height : int
    align : {"end", "none"}
        Clock refinement (:func:`nbprof.analysis.distributed.ranks_clock`).
    max_depth, include_python, max_quads
        As in :func:`nbprof.viz.timeline.timeline` (``max_quads`` shared by the ranks).
    max_links : int
        Most collective instances linked per window.

    Returns
    -------
    RanksTimelineView
        Lanes ``rank <r> / ...`` stacked per rank; purple segments join each collective instance across
        ranks (hover: collective, last rank, longest wait).

    Raises
    ------
    ValueError
        Unknown theme or align; no trace with an absolute clock; two traces of one rank.
    """
    if theme not in ("auto", "light", "dark"):
        raise ValueError(f"theme must be 'auto', 'light' or 'dark', got {theme!r}")
    model = RanksTimelineModel(_traces(traces), align=align, max_depth=max_depth, include_python=include_python,
                               max_links=max_links)
    return RanksTimelineView(model, width=width, height=height, theme=theme, max_quads=max_quads)


def static_view(traces, *, theme: str = "light", width: int = 1100, align: str = "end"):
    """The all-ranks timeline as a static Bokeh layout (pre-aggregated resolutions, all links up to the cap)."""
    return RanksTimelineModel(_traces(traces), align=align).static_layout(width=width, theme=theme)
