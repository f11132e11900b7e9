"""Timeline level of detail (LOD): which rows, events and aggregated bins to draw - pure data, no Bokeh.

Lanes: a step band (``ProfilerStep#N``), then per host process/thread an annotation lane
(``user_annotation`` / ``nvtx``) and an operator lane (``cpu_op``, ``python_function``,
``cuda_runtime``, ... nested by depth), then per device/stream a GPU annotation lane and a
kernel/memcpy/memset lane. On a merged nsys + Kineto trace (``nbprof.merge``) each of those is split by
source, named by a label prefix: rows both profilers recorded (``[Kineto + nsys]``), Kineto-only rows
(``[Kineto]``: operators, shapes) and nsys-only rows (``[nsys]``: OS runtime calls, NVTX ranges Kineto did
not annotate).

For a visible window ``[x0, x1]`` and a plot width of ``W`` pixels, :meth:`TimelineLayout.query`
returns events at least ``min_px`` pixels wide one by one (at most ``max_quads``, longest first);
the others are summed per row into ``bin_px``-pixel bins, one rectangle per non-empty bin, labelled
with its event count, busy fraction and the longest event's name. The rectangles are plain numpy
columns; ``nbprof.viz.timeline`` draws them with Bokeh.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace import schema
from ..trace.ids import exact_ids
from ..trace.predicates import step_number
from ._escape import truncate
from .theme import palette

__all__ = ["TimelineLayout", "Lane"]

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


#: lane label prefix per source group of a merged trace (``nbprof.trace.merge``): rows both profilers
#: recorded, Kineto-only rows, nsys-only rows (a prefix: long labels are cut at their end)
_SOURCE_LABELS = ("[Kineto + nsys] ", "[Kineto] ", "[nsys] ")


def _source_groups(trace, keep: np.ndarray) -> np.ndarray:
    """Per kept event: 0 both sources, 1 Kineto only, 2 nsys only, from ``trace.tables["merge"]``; all 0
    for a trace that is not merged (then no lane is split)."""
    mt = (getattr(trace, "tables", None) or {}).get("merge")
    if mt is None or len(mt) != len(trace.events) or "source" not in mt:
        return np.zeros(int(keep.sum()), dtype=np.int64)
    src = mt["source"].astype(str).to_numpy()[keep]
    return np.select([src == "both", src == "kineto"], [0, 1], 2).astype(np.int64)


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


class TimelineLayout:
    """The trace laid out in rows, with range queries that return LOD-aggregated rectangles (no Bokeh).

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
        # a merged nsys + Kineto trace: each thread's / stream's lanes split by source (both, Kineto, nsys)
        srcg = _source_groups(trace, keep)
        lane_id = pd.DataFrame({"g": group, "a": ka, "b": kb, "src": srcg, "s": sub}).groupby(
            ["g", "a", "b", "src", "s"], sort=True).ngroup().to_numpy(np.int64)
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
            if g != 0 and srcg.any():
                label = _SOURCE_LABELS[int(srcg[f])] + label
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
        is_rt = rt_lut[codes] & (corr != -1)
        is_devop = (dev >= 0) & (corr != -1)
        if is_rt.any() and is_devop.any():
            rt_pos = np.flatnonzero(is_rt)
            s = pd.Series(rt_pos, index=corr[rt_pos])
            s = s[~s.index.duplicated()]
            dpos = np.flatnonzero(is_devop)
            m = s.reindex(corr[dpos]).to_numpy()
            ok = ~np.isnan(m)
            self.launch_pos[dpos[ok]] = m[ok].astype(np.int64)
        is_op = op_lut[codes] & (ext != -1)
        if is_op.any():
            op_pos = np.flatnonzero(is_op)
            s = pd.Series(op_pos, index=ext[op_pos])
            s = s[~s.index.duplicated()]
            want = np.flatnonzero((dev >= 0) & (ext != -1))
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
               "correlation": exact_ids(self.trace, "correlation", [ev.at[src_index, "correlation"]])[0],
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
            idx = idx[self.end[idx] > x0]
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
