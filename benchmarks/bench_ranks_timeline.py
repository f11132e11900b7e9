"""All-ranks timeline benchmark: N ranks of a generated Kineto trace on one clock, level of detail per rank.

What is measured, in one run (ratios, not absolute targets: the machine is shared):

- ``first_view_s`` / ``first_view_bytes``: ``nbprof.viz.ranks_timeline.ranks_timeline_view(traces)`` (per-rank
  lane layouts, the clock, the first LOD query, the Bokeh document and the ``jupyter_bokeh`` render bundle);
- ``single_first_view_s`` / ``single_first_view_bytes``: the single-rank timeline of one rank, the same way --
  ``per_rank_ratio_s = first_view_s / (ranks * single_first_view_s)`` shows that stacking costs about one
  timeline per rank, and ``bytes_ratio = first_view_bytes / single_first_view_bytes`` that what is sent grows
  with the rows drawn, not with the events;
- per zoom step: kernel-side re-aggregation of every rank plus the PATCH-DOC bytes;
- the peer for scale: every event of every rank as one rectangle (no LOD), serialised the same way.

Ranks are copies of one trace with ``meta.rank`` set and the clock shifted by 1 ms per rank (the generated trace
has no collectives: links are measured by the tests on real runs, not here).

Usage::

    python benchmarks/bench_ranks_timeline.py [--events 200000] [--ranks 8] [--trace PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000, help="events per rank (generated)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--trace", default=None, help="use this trace (one rank) instead of generating one")
    ap.add_argument("--zooms", type=int, default=6)
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args(argv)

    from bench_timeline import _trace
    from bokeh.core.json_encoder import serialize_json
    from bokeh.models import ColumnDataSource
    from bokeh.plotting import figure
    from jupyter_bokeh import BokehModel

    from nbprof.viz.ranks_timeline import ranks_timeline_view
    from nbprof.viz.timeline import timeline

    tr, load_s, path = _trace(a.trace, a.events)
    if tr.meta.origin_ns is None:
        tr.meta.origin_ns = 0
    traces = []
    for r in range(a.ranks):
        t = copy.copy(tr)
        t.meta = copy.copy(tr.meta)
        t.meta.rank = r
        t.meta.origin_ns = int(tr.meta.origin_ns) + r * 1_000_000
        traces.append(t)
    print(f"{a.ranks} ranks of {path}: {len(tr.events)} events each", flush=True)

    t0 = time.perf_counter()
    one = timeline(tr, theme="auto")
    one_bytes = len(serialize_json(one.bokeh_widget.render_bundle).encode())
    one_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    view = ranks_timeline_view(traces, theme="auto")
    bundle = serialize_json(view.bokeh_widget.render_bundle)
    first_s = time.perf_counter() - t0
    first_bytes = len(bundle.encode())
    first_rects = len(view.source.data["left"])

    sent: list[int] = []

    def capture(content, buffers=None):
        sent.append(len(json.dumps(content)) + sum(len(b) for b in (buffers or [])))

    view.bokeh_widget.send = capture
    m = view.model
    lo, hi = m.t0_ns / 1e6, m.t1_ns / 1e6
    zooms = []
    for i in range(a.zooms):
        mid = (lo + hi) / 2 + (hi - lo) * (0.1 if i % 2 else -0.1)
        span = (hi - lo) / 4 if i < a.zooms - 1 else (hi - lo) * 16
        lo, hi = mid - span / 2, mid + span / 2
        sent.clear()
        t0 = time.perf_counter()
        view.set_range(lo, hi)
        dt = time.perf_counter() - t0
        d = view.source.data
        zooms.append({"window_ms": hi - lo, "update_s": dt, "bytes": sum(sent), "rects": len(d["left"]),
                      "events_covered": int(np.asarray(d["count"]).sum())})
        print(f"zoom {i}: window {hi - lo:.4f} ms, {dt * 1e3:.0f} ms, {sum(sent) / 1e3:.0f} kB, {len(d['left'])} rects",
              flush=True)

    t0 = time.perf_counter()
    p = figure()
    left = np.concatenate([lay.ts for _r, lay, _o, _n, _s in m.parts]) / 1e6
    right = np.concatenate([lay.end for _r, lay, _o, _n, _s in m.parts]) / 1e6
    y = np.concatenate([lay.row + off for _r, lay, off, _n, _s in m.parts]).astype(np.float32)
    nid = np.concatenate([lay.nid for _r, lay, _o, _n, _s in m.parts])
    p.hbar(y="y", left="left", right="right", height=0.8,
           source=ColumnDataSource({"left": left, "right": right, "y": y, "nid": nid}))
    naive_bytes = len(serialize_json(BokehModel(p).render_bundle).encode())
    naive_s = time.perf_counter() - t0

    res = {"ranks": a.ranks, "events_per_rank": len(tr.events), "events": m.n_events, "load_s": load_s,
           "single_first_view_s": one_s, "single_first_view_bytes": one_bytes,
           "single_first_view_rects": len(one.source.data["left"]), "first_view_rects": first_rects,
           "first_view_s": first_s, "first_view_bytes": first_bytes,
           "per_rank_ratio_s": first_s / (a.ranks * one_s), "bytes_ratio": first_bytes / one_bytes,
           "zoom_updates": zooms, "max_update_s": max(z["update_s"] for z in zooms),
           "naive_first_view_bytes": naive_bytes, "naive_s": naive_s, "naive_over_lod_bytes": naive_bytes / first_bytes}
    res["naive_over_lod_rects"] = m.n_events / max(first_rects, 1)
    print(f"{a.ranks} ranks, {m.n_events} events: first view {first_s:.2f} s ({res['per_rank_ratio_s']:.2f}x "
          f"{a.ranks} single-rank views), {first_rects} rectangles ({first_rects / res['single_first_view_rects']:.1f}x "
          f"one rank's; no LOD: {m.n_events}, {res['naive_over_lod_rects']:.0f}x more); worst zoom "
          f"{res['max_update_s'] * 1e3:.0f} ms", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
