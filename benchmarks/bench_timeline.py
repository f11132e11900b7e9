"""Timeline level-of-detail benchmark on a generated 1M-event Kineto trace.

Targets (issue 6): first view built in < 2 s, < 5 MB sent to the browser, each zoom update < 300 ms.

What is measured, in one run:

- ``first_view_s``: ``nbprof.viz.timeline(trace)`` (lane layout + first LOD query + Bokeh document
  + the ``jupyter_bokeh`` render bundle), the trace already loaded.
- ``first_view_bytes``: the serialized ``BokehModel.render_bundle`` (what the widget sends first;
  BokehJS itself is loaded once per page and not counted).
- per zoom step (the window shrinks 4x around the centre, then pans): kernel-side re-aggregation
  plus the PATCH-DOC messages ``jupyter_bokeh`` sends (captured from ``BokehModel.send``).
- a peer for scale: the cost of merely serialising the whole trace's rectangles (no LOD) in the
  same run, so the ratio shows what LOD saves.

Usage::

    python benchmarks/bench_timeline.py [--events 1000000] [--trace PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def _trace(path: str | None, n_events: int):
    import nbprof

    if path is None:
        path = os.path.join(tempfile.gettempdir(), f"nbprof_bench_{n_events}.pt.trace.json.gz")
        if not os.path.exists(path):
            import gen_kineto

            print(f"generating {path} ({n_events} events)...", flush=True)
            # the generator counts trace events incl. flow and [memory] records; ~1.46 of them per
            # row of the events table
            gen_kineto.generate(path, int(n_events * 1.46))
    t = time.perf_counter()
    tr = nbprof.load(path)
    return tr, time.perf_counter() - t, path


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--trace", default=None, help="use this trace instead of generating one")
    ap.add_argument("--zooms", type=int, default=8)
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args(argv)

    from bokeh.core.json_encoder import serialize_json

    from nbprof.viz.timeline import timeline

    tr, load_s, path = _trace(a.trace, a.events)
    n = len(tr.events)
    print(f"trace {path}: {n} events, loaded in {load_s:.2f} s", flush=True)

    t = time.perf_counter()
    view = timeline(tr, theme="auto")
    bundle = serialize_json(view.bokeh_widget.render_bundle)
    first_s = time.perf_counter() - t
    first_bytes = len(bundle.encode())
    first_rects = len(view.source.data["left"])

    sent: list[int] = []

    def capture(content, buffers=None):
        sent.append(len(json.dumps(content)) + sum(len(b) for b in (buffers or [])))

    view.bokeh_widget.send = capture  # what jupyter_bokeh would put on the comm

    m = view.model
    lo, hi = m.t0_ns / 1e6, m.t1_ns / 1e6
    zooms = []
    for i in range(a.zooms):
        mid = (lo + hi) / 2 + (hi - lo) * (0.1 if i % 2 else -0.1)  # zoom with a small pan
        span = (hi - lo) / 4 if i < a.zooms - 2 else (hi - lo) * 8  # ... then zoom back out
        lo, hi = mid - span / 2, mid + span / 2
        sent.clear()
        t = time.perf_counter()
        view.set_range(lo, hi)
        dt = time.perf_counter() - t
        d = view.source.data
        zooms.append({"window_ms": hi - lo, "update_s": dt, "bytes": sum(sent),
                      "rects": len(d["left"]), "events_covered": int(np.asarray(d["count"]).sum())})
        print(f"zoom {i}: window {hi - lo:.4f} ms, {dt * 1e3:.1f} ms, {sum(sent) / 1e3:.0f} kB, "
              f"{len(d['left'])} rects covering {zooms[-1]['events_covered']} events", flush=True)

    # peer: the naive way (every event one rectangle, no LOD), 4 numeric columns, Bokeh's encoding
    from bokeh.models import ColumnDataSource
    from bokeh.plotting import figure
    from jupyter_bokeh import BokehModel

    t = time.perf_counter()
    p = figure()
    p.hbar(y="y", left="left", right="right", height=0.8,
           source=ColumnDataSource({"left": m.ts / 1e6, "right": m.end / 1e6, "y": m.row.astype(np.float32),
                                    "nid": m.nid}))
    naive_bytes = len(serialize_json(BokehModel(p).render_bundle).encode())
    naive_s = time.perf_counter() - t
    # static mode: the pre-aggregated multi-resolution page (BokehJS inline) that to_html writes
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    t = time.perf_counter()
    static_html = file_html(m.static_layout(), INLINE, title="bench")
    static_s = time.perf_counter() - t
    static_bytes = len(static_html.encode())
    empty = figure()
    empty.line([0, 1], [0, 1])
    js_bytes = len(file_html(empty, INLINE, title="empty").encode())

    res = {
        "events": n, "load_s": load_s, "first_view_s": first_s, "first_view_bytes": first_bytes,
        "zoom_updates": zooms, "max_update_s": max(z["update_s"] for z in zooms),
        "max_update_bytes": max(z["bytes"] for z in zooms),
        "naive_first_view_bytes": naive_bytes, "first_view_rects": first_rects, "naive_s": naive_s,
        "static_s": static_s, "static_bytes": static_bytes, "static_bytes_without_bokehjs": static_bytes - js_bytes,
        "targets": {"first_view_s": 2.0, "first_view_bytes": 5_000_000, "update_s": 0.3},
    }
    res["meets_targets"] = bool(first_s < 2.0 and first_bytes < 5_000_000 and res["max_update_s"] < 0.3)
    print(f"first view {first_s:.2f} s, {first_bytes / 1e6:.2f} MB; worst zoom update "
          f"{res['max_update_s'] * 1e3:.0f} ms, {res['max_update_bytes'] / 1e6:.2f} MB; "
          f"(first view {first_rects} rects); naive no-LOD first view {naive_bytes / 1e6:.1f} MB in {naive_s:.1f} s; "
          f"static page {static_bytes / 1e6:.2f} MB ({(static_bytes - js_bytes) / 1e6:.2f} MB data) in {static_s:.1f} s; "
          f"targets met: {res['meets_targets']}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
