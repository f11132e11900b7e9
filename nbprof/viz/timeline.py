"""Timeline view with level-of-detail (LOD) aggregation.

Lanes: a step band (``ProfilerStep#N``), then per host process/thread an annotation lane
(``user_annotation`` / ``nvtx``) and an operator lane (``cpu_op``, ``python_function``,
``cuda_runtime``, ... nested by depth), then per device/stream a GPU annotation lane and a
kernel/memcpy/memset lane.

Level of detail: the browser never receives the whole trace. For a visible window ``[x0, x1]``
and a plot width of ``W`` pixels, events at least ``min_px`` pixels wide are sent one by one (at
most ``max_quads``, longest first); the others are summed per row into ``bin_px``-pixel bins and
sent as one rectangle per non-empty bin, labelled with its event count, busy fraction and the
longest event's name. Live views (:func:`timeline`) re-aggregate in the kernel on every range
change (Bokeh ``RangesUpdate`` over the ``jupyter_bokeh`` widget comm); static views
(:meth:`TimelineModel.static_layout`, used by :func:`nbprof.viz.to_html`) carry a few
pre-aggregated resolutions and switch between them in the browser.

This is the approach of the Bokeh user guide ("very large data needs downsampling before it
reaches the browser", docs "Controlling level of detail") and of Perfetto's summary tracks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace import schema
from ..trace.predicates import step_number
from ._base import NbprofView, fmt_ns
from ._escape import truncate
from .theme import apply_theme, auto_theme_callback, palette, style_widgets

__all__ = ["TimelineModel", "timeline", "Lane"]

_NAME_LIMIT = 200
_ANNOT_CATS = {schema.USER_ANNOTATION, schema.NVTX}
_DEVICE_ANNOT_CATS = {schema.GPU_USER_ANNOTATION}


@dataclass
class Lane:
    """One labelled band of rows: ``first_row`` .. ``first_row + n_rows - 1``."""

    label: str
    kind: str  # "step" | "host_annotation" | "host" | "device_annotation" | "device"
    first_row: int
    n_rows: int


def _depths(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting depth of intervals already sorted by (ts asc, end desc).

    For properly nested intervals, depth(i) = i - #(ends <= ts_i among earlier intervals); computed
    with one sort and one ``searchsorted`` (O(n log n), no Python loop).
    """
    n = len(ts)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    ends_sorted = np.sort(end)
    closed = np.searchsorted(ends_sorted, ts, side="right")
    d = np.arange(n, dtype=np.int64) - closed
    return np.maximum(d, 0)


class TimelineModel:
    """The trace laid out in rows, with range queries that return LOD-aggregated rectangles.

    Parameters
    ----------
    trace : nbprof.Trace
    max_depth : int
        Nesting rows per host thread; deeper events are drawn on the last row.
    include_python : bool
        Keep ``python_function`` events (they are often half of a trace).

    Attributes
    ----------
    lanes : list of Lane
    n_rows : int
    t0_ns, t1_ns : int
        The trace's extent.
    names : list of str
        Event names (truncated to 200 characters), indexed by the ``nid`` column of query results.
    shapes : list of str
        ``input_dims`` strings, indexed by the ``sid`` column (-1: none).
    """

    def __init__(self, trace, *, max_depth: int = 8, include_python: bool = True):
        self.trace = trace
        ev = trace.events
        colors, self._cat_base = palette()
        self.palette = colors
        cat_col = ev["cat"]
        if not isinstance(cat_col.dtype, pd.CategoricalDtype):
            cat_col = cat_col.astype("category")
        cat_names = [str(c) for c in cat_col.cat.categories]
        all_cat_codes = cat_col.cat.codes.to_numpy()

        def cat_mask(codes: np.ndarray, wanted) -> np.ndarray:
            lut = np.array([c in wanted for c in cat_names] + [False], dtype=bool)  # code -1 -> last
            return lut[codes]

        drop = {schema.TRACE_SPAN} | (set() if include_python else {schema.PYTHON_FUNCTION})
        keep = ~cat_mask(all_cat_codes, drop)
        self._keep = keep
        self._ev_index = ev.index.to_numpy()[keep]
        cat_codes = all_cat_codes[keep]

        def col(name, dtype=np.int64):
            return ev[name].to_numpy(dtype)[keep]

        ts = col("ts_ns")
        dur = np.maximum(col("dur_ns"), 0)
        end = ts + dur
        name_cat = ev["name"]
        if not isinstance(name_cat.dtype, pd.CategoricalDtype):
            name_cat = name_cat.astype("category")
        nid = name_cat.cat.codes.to_numpy(np.int32)[keep]
        self.names = [truncate(str(x), _NAME_LIMIT) for x in name_cat.cat.categories]
        dims = ev["input_dims"]
        if not isinstance(dims.dtype, pd.CategoricalDtype):
            dims = dims.astype("category")
        sid = dims.cat.codes.to_numpy(np.int32)[keep]
        self.shapes = [truncate(str(x), _NAME_LIMIT) for x in dims.cat.categories]
        cat_base_arr = np.array([self._cat_base.get(c, self._cat_base["other"]) for c in cat_names]
                                + [self._cat_base["other"]], dtype=np.int16)
        cidx = cat_base_arr[cat_codes] + (nid % 2).astype(np.int16)
        is_step = np.zeros(len(ts), dtype=bool)
        annot_mask = cat_mask(cat_codes, _ANNOT_CATS)
        if annot_mask.any():
            step_names = np.array([step_number(n) is not None for n in name_cat.cat.categories] + [False])
            is_step = annot_mask & step_names[nid]
        cidx[is_step] = self._cat_base["step"] + (np.arange(is_step.sum()) % 2)
        device = col("device")
        pid = col("pid")
        tid = col("tid")
        is_dev = device >= 0
        is_dev_annot = is_dev & cat_mask(cat_codes, _DEVICE_ANNOT_CATS)
        is_host_annot = ~is_dev & annot_mask & ~is_step
        self._cat_names = cat_names
        self._cat_codes = cat_codes

        # ------------------------------------------------------------------ lanes
        proc_names, thread_names = self._thread_labels(trace.threads)
        # one lane per (group, a, b, sub): group 0 steps, 1 host (pid, tid), 2 device (device, stream);
        # sub 0 = annotations, 1 = the rest. One lexsort orders all lanes and, inside each lane, the
        # events by (ts asc, end desc) for the depth computation - no per-lane scan of the whole trace.
        n_ev = len(ts)
        group = np.where(is_step, 0, np.where(is_dev, 2, 1)).astype(np.int64)
        ka = np.where(is_step, 0, np.where(is_dev, device, pid))
        kb = np.where(is_step, 0, tid)
        sub = np.where(is_host_annot | is_dev_annot, 0, 1)
        lane_id = pd.DataFrame({"g": group, "a": ka, "b": kb, "s": sub}).groupby(
            ["g", "a", "b", "s"], sort=True).ngroup().to_numpy(np.int64)
        order = np.lexsort((-end, ts, lane_id))
        lid = lane_id[order]
        if n_ev:
            brk = np.flatnonzero(lid[1:] != lid[:-1]) + 1
            starts = np.r_[0, brk]
            stops = np.r_[brk, n_ev]
        else:
            starts = stops = np.zeros(0, dtype=np.int64)
        lane_order = order
        lane_key = np.full(n_ev, -1, dtype=np.int64)
        row = np.zeros(n_ev, dtype=np.int32)
        lanes: list[Lane] = []
        next_row = 0
        for li, (a0, a1) in enumerate(zip(starts, stops)):
            f = order[a0]
            g, ka_, kb_, sb = int(group[f]), int(ka[f]), int(kb[f]), int(sub[f])
            if g == 0:
                label, kind = "steps", "step"
            elif g == 1:
                label = f"{proc_names.get(ka_, f'process {ka_}')} / {thread_names.get((ka_, kb_), f'thread {kb_}')}"
                kind = "host_annotation" if sb == 0 else "host"
            else:
                label, kind = f"GPU {ka_} / stream {kb_}", ("device_annotation" if sb == 0 else "device")
            if sb == 0 and g != 0:
                label += " annotations"
            idx = order[a0:a1]
            depth = _depths(ts[idx], end[idx])
            depth = np.minimum(depth, (1 if kind == "step" else max_depth) - 1)
            n_rows = int(depth.max()) + 1 if len(depth) else 1
            row[idx] = next_row + depth
            lane_key[idx] = li
            lanes.append(Lane(label, kind, next_row, n_rows))
            next_row += n_rows
        self.lanes = lanes
        self.n_rows = next_row

        # ------------------------------------------------------ arrays sorted by (row, ts)
        # lane_order is sorted by (lane, ts); rows of a lane are contiguous, so a stable sort on row
        # gives (row, ts) order
        order = lane_order[np.argsort(row[lane_order], kind="stable")]
        self.row = row[order]
        self.ts = ts[order]
        self.end = end[order]
        self.dur = dur[order]
        self.nid = nid[order]
        self.sid = sid[order]
        self.cidx = cidx[order].astype(np.int16)
        self.src = self._ev_index[order]  # index into trace.events
        self.n_events = len(order)
        bounds = np.searchsorted(self.row, np.arange(self.n_rows + 1), side="left")
        self.row_lo = bounds[:-1]
        self.row_hi = bounds[1:]
        # running max of ends within each row: makes "first event ending after x0" a searchsorted
        self.end_cummax = np.empty_like(self.end)
        for r in range(self.n_rows):
            lo, hi = self.row_lo[r], self.row_hi[r]
            if hi > lo:
                np.maximum.accumulate(self.end[lo:hi], out=self.end_cummax[lo:hi])
        if self.n_events:
            self.t0_ns = int(self.ts.min())
            self.t1_ns = int(self.end.max())
        else:
            self.t0_ns, self.t1_ns = 0, 1
        if self.t1_ns <= self.t0_ns:
            self.t1_ns = self.t0_ns + 1
        self._build_launch_links(ev, order)
        self.cat_names = cat_names

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _thread_labels(threads: pd.DataFrame) -> tuple[dict, dict]:
        proc: dict = {}
        thr: dict = {}
        if threads is None or threads.empty:
            return proc, thr
        for r in threads.itertuples(index=False):
            kind = str(getattr(r, "kind", ""))
            name = truncate(str(getattr(r, "name", "")), 60)
            if kind == "process_labels":
                proc[int(r.pid)] = name
            elif kind == "process" and int(r.pid) not in proc:
                proc[int(r.pid)] = f"{name} {int(r.pid)}"
            elif kind == "thread":
                thr[(int(r.pid), int(r.tid))] = name
        return proc, thr

    def _build_launch_links(self, ev: pd.DataFrame, order: np.ndarray) -> None:
        """For device events: the runtime call with the same correlation id and its CPU op.

        Kineto links a kernel to its ``cudaLaunchKernel`` by the CUPTI correlation id, and both to the
        launching ``cpu_op`` by ``External id`` (libkineto output_json.cpp; notes/formats.md).
        Sets ``launch_pos`` (position in the sorted arrays of the runtime call, -1 none) and
        ``op_pos`` (position of the CPU op, -1 none) per sorted event.
        """
        n = self.n_events
        self.launch_pos = np.full(n, -1, dtype=np.int64)
        self.op_pos = np.full(n, -1, dtype=np.int64)
        if n == 0:
            return
        keep = self._keep
        codes = self._cat_codes[order]
        corr = ev["correlation"].to_numpy(np.int64)[keep][order]
        ext = ev["external_id"].to_numpy(np.int64)[keep][order]
        dev = ev["device"].to_numpy(np.int64)[keep][order]
        rt_lut = np.array([c in schema.RUNTIME_CATEGORIES for c in self._cat_names] + [False])
        op_lut = np.array([c == schema.CPU_OP for c in self._cat_names] + [False])
        is_rt = rt_lut[codes] & (corr >= 0)
        is_devop = (dev >= 0) & (corr >= 0)
        if is_rt.any() and is_devop.any():
            rt_pos = np.flatnonzero(is_rt)
            s = pd.Series(rt_pos, index=corr[rt_pos])
            s = s[~s.index.duplicated()]
            dpos = np.flatnonzero(is_devop)
            m = s.reindex(corr[dpos]).to_numpy()
            ok = ~np.isnan(m)
            self.launch_pos[dpos[ok]] = m[ok].astype(np.int64)
        is_op = op_lut[codes] & (ext >= 0)
        if is_op.any():
            op_pos = np.flatnonzero(is_op)
            s = pd.Series(op_pos, index=ext[op_pos])
            s = s[~s.index.duplicated()]
            want = np.flatnonzero((dev >= 0) & (ext >= 0))
            m = s.reindex(ext[want]).to_numpy()
            ok = ~np.isnan(m)
            self.op_pos[want[ok]] = m[ok].astype(np.int64)

    def launcher(self, src_index: int) -> dict | None:
        """The launching runtime call and CPU op of the device event at ``trace.events`` index ``src_index``.

        Returns
        -------
        dict or None
            ``{"kernel", "runtime", "runtime_ts_ns", "cpu_op", "cpu_op_ts_ns", "correlation"}`` (names as
            in the trace), or None when the event is not a device op or has no correlated launch.
        """
        pos = np.flatnonzero(self.src == src_index)
        if not len(pos):
            return None
        p = int(pos[0])
        lp, op = int(self.launch_pos[p]), int(self.op_pos[p])
        if lp < 0 and op < 0:
            return None
        ev = self.trace.events
        out = {"kernel": str(ev.at[src_index, "name"]),
               "correlation": int(ev.at[src_index, "correlation"]),
               "runtime": None, "runtime_ts_ns": None, "cpu_op": None, "cpu_op_ts_ns": None}
        if lp >= 0:
            out["runtime"] = self.names[self.nid[lp]] if self.nid[lp] >= 0 else None
            out["runtime_ts_ns"] = int(self.ts[lp])
        if op >= 0:
            out["cpu_op"] = self.names[self.nid[op]] if self.nid[op] >= 0 else None
            out["cpu_op_ts_ns"] = int(self.ts[op])
        return out

    # ------------------------------------------------------------------ queries
    def query(self, x0_ns: float | None = None, x1_ns: float | None = None, *, width_px: int = 1200,
              max_quads: int = 8000, min_px: float = 2.0, bin_px: float = 2.0) -> dict[str, np.ndarray]:
        """Rectangles to draw for the window ``[x0_ns, x1_ns]`` (default: the whole trace).

        Parameters
        ----------
        x0_ns, x1_ns : float
            Visible window, ns relative to the trace origin.
        width_px : int
            Plot width in pixels (sets the bin width ``(x1 - x0) / width_px * bin_px``).
        max_quads : int
            Most individual events sent; beyond it the shortest are aggregated too.
        min_px : float
            Events narrower than this many pixels are aggregated.
        bin_px : float
            Aggregation bin width in pixels.

        Returns
        -------
        dict of numpy arrays (a Bokeh ``ColumnDataSource`` payload, numeric only)
            ``left``/``right`` (ms), ``y`` (row centre), ``cidx`` (palette index), ``alpha``,
            ``nid`` (name index, -1 none), ``sid`` (shapes index), ``count`` (events in the rectangle),
            ``dur_ns`` (summed duration), ``busy_ratio`` (of the rectangle's width), ``ev`` (trace.events
            index for single events, -1 for bins), ``lx``/``ly`` (launching runtime call, NaN none),
            ``oid`` (name index of the launching CPU op, -1 none).
        """
        x0 = float(self.t0_ns if x0_ns is None else x0_ns)
        x1 = float(self.t1_ns if x1_ns is None else x1_ns)
        if x1 <= x0:
            x1 = x0 + 1.0
        width_px = max(int(width_px), 50)
        ns_per_px = (x1 - x0) / width_px
        # 1. candidate events per row: start < x1 and end > x0
        parts = []
        for r in range(self.n_rows):
            lo, hi = int(self.row_lo[r]), int(self.row_hi[r])
            if hi <= lo:
                continue
            a = lo + int(np.searchsorted(self.end_cummax[lo:hi], x0, side="right"))
            b = lo + int(np.searchsorted(self.ts[lo:hi], x1, side="left"))
            if b > a:
                parts.append(np.arange(a, b))
        idx = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        if len(idx):
            idx = idx[self.end[idx] > x0] if True else idx
        ts = self.ts[idx]
        end = self.end[idx]
        cs = np.maximum(ts, x0)
        ce = np.minimum(end, x1)
        vis = (ce - cs).astype(np.float64)
        big = vis >= min_px * ns_per_px
        if big.sum() > max_quads:
            thr = np.partition(vis[big], -max_quads)[-max_quads]
            big &= vis >= thr
            if big.sum() > max_quads:  # ties
                keep = np.flatnonzero(big)[:max_quads]
                big[:] = False
                big[keep] = True
        bi = idx[big]
        # 2. single events
        single = self._single_columns(bi)
        # 3. aggregate the rest per (row, bin)
        si = idx[~big]
        agg = self._aggregate(si, cs[~big], ce[~big], x0, ns_per_px * bin_px)
        out = {k: np.concatenate([single[k], agg[k]]) for k in single}
        return out

    def _single_columns(self, bi: np.ndarray) -> dict[str, np.ndarray]:
        n = len(bi)
        lp = self.launch_pos[bi]
        has = lp >= 0
        lx = np.full(n, np.nan)
        ly = np.full(n, np.nan)
        lx[has] = self.ts[lp[has]] / 1e6
        ly[has] = self.row[lp[has]] + 0.5
        op = self.op_pos[bi]
        oid = np.where(op >= 0, self.nid[np.maximum(op, 0)], -1).astype(np.int32)
        return {
            "left": self.ts[bi] / 1e6,
            "right": np.maximum(self.end[bi], self.ts[bi] + 1) / 1e6,
            "y": (self.row[bi] + 0.5).astype(np.float32),
            "cidx": self.cidx[bi].astype(np.int16),
            "alpha": np.full(n, 0.9, dtype=np.float32),
            "nid": self.nid[bi].astype(np.int32),
            "sid": self.sid[bi].astype(np.int32),
            "count": np.ones(n, dtype=np.int32),
            "dur_ns": self.dur[bi].astype(np.float64),
            "busy_ratio": np.ones(n, dtype=np.float32),
            "ev": self.src[bi].astype(np.int64),
            "lx": lx,
            "ly": ly,
            "oid": oid,
        }

    def _aggregate(self, si: np.ndarray, cs: np.ndarray, ce: np.ndarray, x0: float, binw: float):
        if len(si) == 0 or binw <= 0:
            return self._single_columns(np.zeros(0, dtype=np.int64))
        b = np.floor((cs - x0) / binw).astype(np.int64)
        nb = int(b.max()) + 1
        key = self.row[si].astype(np.int64) * nb + b
        vis = (ce - cs).astype(np.int64)
        # the longest event of each bin names the bin: sort by (key, vis)
        packed = key * (1 << 24) + np.minimum(vis, (1 << 24) - 1)
        order = np.argsort(packed, kind="stable")
        ks = key[order]
        last = np.flatnonzero(np.r_[ks[1:] != ks[:-1], True])
        first = np.r_[0, last[:-1] + 1]
        ukey = ks[last]
        counts = (last - first + 1).astype(np.int32)
        sums = np.add.reduceat(vis[order].astype(np.float64), first)
        rep = si[order[last]]
        rows = ukey // nb
        bins = ukey % nb
        left_ns = x0 + bins * binw
        busy = np.minimum(sums / binw, 1.0).astype(np.float32)
        n = len(ukey)
        return {
            "left": left_ns / 1e6,
            "right": (left_ns + binw) / 1e6,
            "y": (rows + 0.5).astype(np.float32),
            "cidx": self.cidx[rep].astype(np.int16),
            "alpha": (0.25 + 0.65 * busy).astype(np.float32),
            "nid": self.nid[rep].astype(np.int32),
            "sid": np.full(n, -1, dtype=np.int32),
            "count": counts,
            "dur_ns": sums,
            "busy_ratio": busy,
            "ev": np.full(n, -1, dtype=np.int64),
            "lx": np.full(n, np.nan),
            "ly": np.full(n, np.nan),
            "oid": np.full(n, -1, dtype=np.int32),
        }

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
            if (v >= 1e3) return (value/1e3).toFixed(2) + ' us';
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
        let txt = nm(d.nid[i]) + '  (' + (d.dur_ns[i] / 1000).toFixed(2) + ' us';
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
        from bokeh.models import CustomJS

        style_widgets(lay, theme)
        install, enter, leave = self._keys_callbacks(p)
        p.js_on_event("mouseenter", install, enter)
        p.js_on_event("mousemove", enter)
        p.js_on_event("mouseleave", leave)
        cbs = []
        if theme == "auto":
            cbs.append(auto_theme_callback([p], lay))
        else:
            cbs.append(CustomJS(code="""if (typeof document !== 'undefined') {
                document.body.dataset.nbprofReady = String(Number(document.body.dataset.nbprofReady || 0) + 1); }"""))
        for cb in cbs:
            p.js_on_change("inner_width", cb)
            p.js_on_event("document_ready", cb)


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
        from bokeh.models import ColumnDataSource, Div

        self.model = model
        self.width_px = width
        self.max_quads = max_quads
        self.updates = 0
        t = time.perf_counter()
        p, names = model._figure(width=width, height=height, theme=theme)
        self.source = ColumnDataSource(model.query(width_px=width, max_quads=max_quads), name="nbprof_lod")
        model._glyph(p, self.source)
        self.info = Div(text=self._status_text(), render_as_text=True, width=width, name="nbprof_info")
        model._link_widgets(p, [self.source], names, self.info)
        self.figure = p
        lay = column(p, self.info, name="nbprof_timeline")
        model._attach_js(p, lay, theme)
        p.on_event(RangesUpdate, self._on_range)
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

    def refresh(self, x0_ms: float, x1_ms: float) -> None:
        """Re-aggregate for the window ``[x0_ms, x1_ms]`` and send the new rectangles to the browser."""
        t = time.perf_counter()
        data = self.model.query(x0_ms * 1e6, x1_ms * 1e6, width_px=self.width_px, max_quads=self.max_quads)
        if self.source.selected.indices:  # indices into the old rectangles: drop them
            self.source.selected.indices = []
        self.source.data = data
        self.info.text = self._status_text()
        self.updates += 1
        self.last_update_s = time.perf_counter() - t

    def _on_range(self, event) -> None:
        if event.x0 is None or event.x1 is None:
            return
        self.refresh(float(event.x0), float(event.x1))


def timeline(trace, *, width: int = 1100, height: int | None = None, theme: str = "auto",
             max_depth: int = 8, include_python: bool = True, max_quads: int = 8000) -> TimelineView:
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

    Returns
    -------
    TimelineView
        Zoom/pan (wheel, box, W/A/S/D keys) re-aggregates in the kernel; hover shows name, duration,
        shapes and, for GPU ops, the launching CPU op; clicking a GPU op draws the correlation flow.
    """
    if theme not in ("auto", "light", "dark"):
        raise ValueError(f"theme must be 'auto', 'light' or 'dark', got {theme!r}")
    model = TimelineModel(trace, max_depth=max_depth, include_python=include_python)
    return TimelineView(model, width=width, height=height, theme=theme, max_quads=max_quads)
