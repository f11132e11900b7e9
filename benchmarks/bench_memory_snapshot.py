"""Memory snapshot at scale: load + analyses + view build on a generated 500k-entry snapshot.

    python benchmarks/bench_memory_snapshot.py [--entries 500000]

Prints, in one run on the same pickle: nbprof's safe load, the analyses (timeline, peak breakdown,
leak suspects), the view build (live widget and static layout) and the bytes of the static document
sent to the browser — against the floor of a plain ``pickle.load`` of the same file. The official
memory_viz page ships every entry to the browser (pytorch #158364, #176290); nbprof ships an
aggregated curve and top-N tables.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def make_snapshot(n_entries: int, seed: int = 0) -> dict:
    """A caching-allocator-shaped snapshot: alloc/free_requested/free_completed triples over 200 stacks,
    a segment_alloc every 64 allocations, and one site leaking 1 MiB per 1000 entries."""
    rng = random.Random(seed)
    stacks = []
    for s in range(200):
        fr = [{"name": f"c10::alloc_{k}", "filename": "CUDACachingAllocator.cpp", "line": 0} for k in range(6)]
        fr += [{"name": f"at::_ops::op{s % 37}::call", "filename": "??", "line": 0}]
        fr += [{"name": f"forward_{s}", "filename": f"/home/u/model_{s % 11}.py", "line": 10 + s}]
        fr += [{"name": "train_step", "filename": "/home/u/train.py", "line": 42}]
        stacks.append(fr)
    leak = [{"name": "train_step", "filename": "/home/u/train.py", "line": 99}]
    entries, live, t, addr = [], [], 1_700_000_000_000_000, 1 << 40
    seg_total = 0
    while len(entries) < n_entries:
        t += rng.randint(1, 20)
        if live and rng.random() < 0.48:
            a, size, fr = live.pop(rng.randrange(len(live)))
            entries.append({"action": "free_requested", "addr": a, "size": size, "stream": 0, "time_us": t, "frames": fr})
            entries.append({"action": "free_completed", "addr": a, "size": size, "stream": 0, "time_us": t, "frames": fr})
            continue
        size = 512 * rng.randint(1, 4096)
        if len(entries) % 1000 < 3:
            size, fr = 1 << 20, leak
        else:
            fr = stacks[rng.randrange(len(stacks))]
        if len(entries) % 64 == 0:
            entries.append({"action": "segment_alloc", "addr": addr, "size": 20 << 20, "stream": 0, "time_us": t, "frames": fr})
            seg_total += 20 << 20
        addr += size
        entries.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": fr})
        if fr is not leak:
            live.append((addr, size, fr))
    blocks = [{"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": fr} for a, s, fr in live[:5000]]
    segments = [{"device": 0, "address": 1 << 40, "total_size": seg_total, "allocated_size": 0, "active_size": 0,
                 "requested_size": 0, "stream": 0, "segment_type": "large", "blocks": blocks}]
    return {"segments": segments, "device_traces": [entries]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=500_000)
    a = ap.parse_args()
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    import nbprof
    from nbprof.analysis import memory_snapshot as ams
    from nbprof.viz.memory_snapshot import memory_snapshot_view

    d = tempfile.mkdtemp()
    path = os.path.join(d, "snap.pickle")
    t = time.perf_counter()
    snap_obj = make_snapshot(a.entries)
    with open(path, "wb") as f:
        pickle.dump(snap_obj, f, protocol=4)
    del snap_obj
    print(f"generated {a.entries:,} entries, {os.path.getsize(path) / 2**20:.1f} MiB pickle in {time.perf_counter() - t:.1f} s")

    t = time.perf_counter()
    with open(path, "rb") as f:
        pickle.load(f)
    floor = time.perf_counter() - t
    t = time.perf_counter()
    snap = nbprof.load(path)
    load = time.perf_counter() - t
    t = time.perf_counter()
    ams.snapshot_timeline(snap, max_points=4000)
    pk = ams.snapshot_peak(snap)
    lk = ams.leak_suspects(snap)
    analyses = time.perf_counter() - t
    t = time.perf_counter()
    view = memory_snapshot_view(snap)
    build = time.perf_counter() - t
    html = file_html(view.static_layout(), INLINE, "snapshot")
    from bokeh.models import Div

    bokehjs = len(file_html(Div(text="x"), INLINE, "empty"))
    print(f"plain pickle.load (floor)      {floor:6.2f} s")
    print(f"nbprof safe load -> tables     {load:6.2f} s  ({load / floor:.1f}x floor)")
    print(f"analyses (timeline/peak/leaks) {analyses:6.2f} s  peak {pk.allocated_bytes / 2**20:.1f} MiB, top leak {lk.iloc[0, 0]!s}")
    print(f"view build                     {build:6.2f} s")
    beyond = (len(html) - bokehjs) / 2**20
    print(f"static page                    {len(html) / 2**20:6.2f} MiB ({beyond:.2f} MiB beyond an empty Bokeh page)")


if __name__ == "__main__":
    main()
