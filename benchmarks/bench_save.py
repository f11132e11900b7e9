"""Saved-trace benchmark (issue 23): reopening a ``.nbprof`` file vs loading the JSON it came from, one run.

    python benchmarks/bench_save.py                      # the largest corpus Kineto trace (HTA df_index_resolver)
    python benchmarks/bench_save.py --trace T.json.gz    # any trace nbprof loads
    python benchmarks/bench_save.py --repeat 5

Both loads run in this one process, alternately, after one warm-up each (imports paid: a notebook that
reopens a trace has pandas/pyarrow loaded already); the best of ``--repeat`` wall times of each is compared.
Prints one line per loader and the ratio; with ``--json`` one JSON object. The .nbprof file is written to a
temporary folder and removed.

Target (issue 23): the .nbprof reload >= 10x faster than loading the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

DEFAULT = os.path.join(ROOT, "..", "shared", "corpus", "facebookresearch__HolisticTraceAnalysis", "tests", "data",
                       "df_index_resolver", "df_index_resolver.json.gz")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if not os.path.exists(a.trace):
        print(f"no such trace: {a.trace}", file=sys.stderr)
        return 2
    import nbprof

    tr = nbprof.load(a.trace)
    with tempfile.TemporaryDirectory() as d:
        saved = os.path.join(d, "t.nbprof")
        t0 = time.perf_counter()
        tr.save(saved)
        save_s = time.perf_counter() - t0
        nbprof.load(saved)
        best = {"json": float("inf"), "nbprof": float("inf")}
        for _ in range(a.repeat):
            for what, path in (("json", a.trace), ("nbprof", saved)):
                t0 = time.perf_counter()
                back = nbprof.load(path)
                best[what] = min(best[what], time.perf_counter() - t0)
                assert len(back.events) == len(tr.events)
        size = os.path.getsize(saved)
    res = {"trace": os.path.basename(a.trace), "events": len(tr.events), "json_bytes": os.path.getsize(a.trace),
           "nbprof_bytes": size, "save_s": round(save_s, 4), "load_json_s": round(best["json"], 4),
           "load_nbprof_s": round(best["nbprof"], 4), "ratio": round(best["json"] / best["nbprof"], 1)}
    if a.json:
        print(json.dumps(res))
    else:
        print(f"{res['trace']}: {res['events']} events; file {res['json_bytes'] / 2**20:.1f} MiB, "
              f".nbprof {size / 2**20:.1f} MiB (save {res['save_s']:.3f} s)")
        print(f"  nbprof.load(json)    {res['load_json_s']:.3f} s")
        print(f"  nbprof.load(.nbprof) {res['load_nbprof_s']:.3f} s")
        print(f"  ratio {res['ratio']}x (target >= 10x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
