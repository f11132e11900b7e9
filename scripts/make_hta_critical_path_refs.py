"""Make the HTA critical-path oracle files of ``tests/test_analysis_critical_path.py``.

Runs Holistic Trace Analysis (HTA 0.5.0, ``hta.trace_analysis.TraceAnalysis.critical_path_analysis``)
on the four critical-path traces of HTA's own test data and writes, per trace,
``tests/data/hta_critical_path/<name>.json``: the annotation and instance HTA was given, HTA's path
length (µs, the sum of the critical edges' weights) and the critical events, each identified by stable
keys of the *raw* trace event (``name``, ``ts_ns``/``dur_ns`` = the file's µs × 1000 as integers,
``pid``, ``tid``). For the traces of HTA's ``test_ns_resolution_trace`` and ``test_amd_trace``
(``DIGEST_CASES``, in ``tests/data/<name>`` beside ``critical_path``) it writes the length, the number of
critical events and the SHA-1 of their keys instead of the events.

HTA does not run under this project's pandas 3.x, so run this with a separate interpreter outside the
repository::

    python3 -m venv /tmp/hta-venv
    /tmp/hta-venv/bin/pip install "HolisticTraceAnalysis==0.5.0" "pandas<3"
    /tmp/hta-venv/bin/python scripts/make_hta_critical_path_refs.py \
        /work/shared/corpus/facebookresearch__HolisticTraceAnalysis/tests/data/critical_path tests/data/hta_critical_path

``--bench TRACE_DIR`` instead times HTA's critical path on one trace directory (used by
``benchmarks/bench_critical_path.py``) and prints ``{"hta_s": seconds, "events": n, "n_critical": k,
"keys_sha1": digest of the critical events' keys}`` as JSON.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import sys
import time
import warnings
from decimal import Decimal

#: trace directory -> (annotation, instance_id) given to HTA (those of HTA's own tests where it has them)
CASES = {
    "simple_add": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "alexnet": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "cuda_event_sync": ("", 0),
    "cuda_event_sync_multi_stream": ("", 0),
}
#: HTA's test_ns_resolution_trace / test_amd_trace (``tests/data/<dir>``, ``ProfilerStep`` instance 1):
#: their oracle keeps the critical events' digest (``critical_keys_digest``), not the events
DIGEST_CASES = {
    "ns_resolution_trace": ("ProfilerStep", 1),
    "amd_trace": ("ProfilerStep", 1),
}


def _raw_events(trace_dir: str) -> list:
    files = [f for f in os.listdir(trace_dir) if f.endswith((".json", ".json.gz"))]
    assert len(files) == 1, files
    p = os.path.join(trace_dir, files[0])
    op = gzip.open if p.endswith(".gz") else open
    with op(p, "rt") as fh:
        return json.load(fh)["traceEvents"]


def _us_to_ns(v) -> int:
    """Exact µs -> ns (a float64 product would lose the last digits of epoch-µs timestamps)."""
    return int((Decimal(str(v)) * 1000).to_integral_value())


def critical_keys_digest(events, with_ts: bool = True) -> dict:
    """``n_critical`` and ``keys_sha1``: SHA-1 of the sorted ``name|ts_ns|dur_ns|pid|tid`` lines of the
    critical events (the same digest ``benchmarks/bench_critical_path.py`` computes for nbprof).
    ``with_ts=False``: ``name|dur_ns|pid|tid`` lines (an ns-resolution trace's epoch-µs timestamps lose
    their last digits in a float64, and an AMD trace's clock base is not the file's)."""
    import hashlib

    keys = sorted(f"{e['name']}|{_us_to_ns(e['ts'])}|{_us_to_ns(e.get('dur', 0))}|{e['pid']}|{e['tid']}"
                  if with_ts else f"{e['name']}|{_us_to_ns(e.get('dur', 0))}|{e['pid']}|{e['tid']}" for e in events)
    return {"n_critical": len(keys), "keys_sha1": hashlib.sha1("\n".join(keys).encode()).hexdigest()}


def run_one(trace_dir: str, annotation: str, instance_id):
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_dir=trace_dir)
    t0 = time.perf_counter()
    g, ok = ta.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance_id)
    elapsed = time.perf_counter() - t0
    return ta, g, ok, elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus_dir", nargs="?")
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--bench")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    if args.bench:
        ta, g, ok, elapsed = run_one(args.bench, "", 0)
        out = {"hta_s": elapsed, "ok": bool(ok), "events": len(ta.t.get_trace(0))}
        if ok:
            raw = _raw_events(args.bench)
            out.update(critical_keys_digest([raw[int(i)] for i in g.critical_path_events_set]))
            # HTA's parser leaves the last ProfilerStep's events out: say which window it analysed
            kept = [_us_to_ns(raw[int(i)]["ts"]) for i in ta.t.get_trace(0)["index"] if "ts" in raw[int(i)]]
            out["first_ts_ns"], out["last_ts_ns"] = min(kept), max(kept)
            out["raw_min_ts_ns"] = min(_us_to_ns(e["ts"]) for e in raw if "ts" in e and e.get("ph") == "X")
        print(json.dumps(out))
        return 0
    import hta

    os.makedirs(args.out_dir, exist_ok=True)
    for name, (ann, inst) in CASES.items():
        d = os.path.join(args.corpus_dir, name)
        ta, g, ok, elapsed = run_one(d, ann, inst)
        assert ok, name
        raw = _raw_events(d)
        df = ta.t.get_trace(0)
        sym = ta.t.symbol_table.get_sym_table()
        events = []
        for ev in sorted(g.critical_path_events_set):
            r = raw[int(ev)]
            # HTA's row index is the raw event's position: check it is the same event
            assert sym[int(df.loc[ev, "name"])] == r["name"], (ev, r["name"])
            events.append({
                "name": r["name"], "ts_ns": _us_to_ns(r["ts"]), "dur_ns": _us_to_ns(r.get("dur", 0)),
                "pid": r["pid"], "tid": r["tid"], "cat": r.get("cat"),
            })
        events.sort(key=lambda e: (e["ts_ns"], -e["dur_ns"], e["name"]))
        length_us = int(sum(e.weight for e in g.critical_path_edges_set))
        out = {
            "trace": f"facebookresearch__HolisticTraceAnalysis/tests/data/critical_path/{name}",
            "hta_version": getattr(hta, "__version__", "0.5.0"),
            "annotation": ann, "instance_id": inst,
            "length_us": length_us,
            "n_events": len(events),
            "events": events,
        }
        with open(os.path.join(args.out_dir, f"{name}.json"), "w") as fh:
            json.dump(out, fh, indent=0)
        print(f"{name}: {len(events)} critical events, length {length_us} us, HTA {elapsed:.2f} s", file=sys.stderr)
    for name, (ann, inst) in DIGEST_CASES.items():
        d = os.path.join(os.path.dirname(os.path.abspath(args.corpus_dir)), name)
        ta, g, ok, elapsed = run_one(d, ann, inst)
        assert ok, name
        raw = _raw_events(d)
        out = {"trace": f"facebookresearch__HolisticTraceAnalysis/tests/data/{name}",
               "hta_version": getattr(hta, "__version__", "0.5.0"), "annotation": ann, "instance_id": inst,
               "length_us": int(sum(e.weight for e in g.critical_path_edges_set)),
               **critical_keys_digest([raw[int(i)] for i in g.critical_path_events_set], with_ts=False)}
        with open(os.path.join(args.out_dir, f"{name}.json"), "w") as fh:
            json.dump(out, fh, indent=0)
        print(f"{name}: {out['n_critical']} critical events, length {out['length_us']} us", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
