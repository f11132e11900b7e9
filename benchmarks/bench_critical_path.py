"""Critical path + slack of a big trace: nbprof vs HTA's ``critical_path_analysis`` on the same file.

The trace is ``gen_kineto.py``'s Kineto-shaped trace (per op: 2 ``python_function``, 1 ``cpu_op``,
1 ``cudaLaunchKernel``, 1 ``kernel``, an ``ac2g`` flow pair; ``ProfilerStep#N`` ranges), 1.16 M events
by default. nbprof is timed in this process after ``nbprof.load`` (not timed): ``build_graph`` (the
dependency graph), ``critical_path(trace)`` over the whole trace (graph + HTA's longest path + slack),
and one ``whatif.predict`` replay. HTA (HolisticTraceAnalysis 0.5.0, which needs pandas < 3: give
its interpreter with ``--hta-python``, e.g. ``/tmp/hta-venv/bin/python``, see
``scripts/make_hta_critical_path_refs.py``) runs in its own process on the same file; only its
``critical_path_analysis(rank=0, annotation="", instance_id=0)`` call is timed, not its parse.

Usage::

    python benchmarks/bench_critical_path.py --events 1160000 --hta-python /tmp/hta-venv/bin/python
    python benchmarks/bench_critical_path.py --trace /tmp/t.pt.trace.json --repeat 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _best(fn, repeat):
    best, out = None, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        el = time.perf_counter() - t0
        best = el if best is None else min(best, el)
    return best, out


def _digest(trace, cp, offset_ns: int = 0) -> dict:
    """The digest of ``make_hta_critical_path_refs.critical_keys_digest`` for nbprof's critical events
    (HTA's categories only: nbprof's path also lists user_annotation ranges); ``offset_ns`` maps
    nbprof's ``ts_ns`` to the file's timestamps."""
    import hashlib

    e = cp.events[cp.events["cat"].astype(str).isin(
        ["cpu_op", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset"])]
    keys = sorted(f"{n}|{ts + offset_ns}|{d}|{p}|{t}" for n, ts, d, p, t in zip(
        e["name"].astype(str), e["ts_ns"].tolist(), e["dur_ns"].tolist(), e["pid"].tolist(), e["tid"].tolist()))
    return {"n_critical": len(keys), "keys_sha1": hashlib.sha1("\n".join(keys).encode()).hexdigest()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", help="an existing Kineto trace (.json); default: generate one")
    ap.add_argument("--events", type=int, default=1_160_000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hta-python", help="interpreter with HTA 0.5.0 installed (pandas < 3)")
    ap.add_argument("--hta-timeout", type=int, default=1800)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import nbprof
    from nbprof.analysis import whatif
    from nbprof.analysis.critical_path import build_graph, critical_path

    tmp = Path(tempfile.mkdtemp(prefix="nbprof-cp-"))
    try:
        d = tmp / "hta"  # HTA reads a directory of traces
        d.mkdir()
        if a.trace:
            path = d / Path(a.trace).name
            path.symlink_to(Path(a.trace).resolve())
        else:
            path = d / "rank0.pt.trace.json"
            from gen_kineto import generate  # beside this script

            generate(str(path), a.events, steps=a.steps)
        t0 = time.perf_counter()
        trace = nbprof.load(path)
        load_s = time.perf_counter() - t0
        n_ev = len(trace.events)
        g_s, g = _best(lambda: build_graph(trace), a.repeat)
        cp_s, cp = _best(lambda: critical_path(trace), a.repeat)
        cp_noslack_s, _ = _best(lambda: critical_path(trace, slack=False), a.repeat)
        wi_s, pred = _best(lambda: whatif.predict(trace, whatif.faster_host(2), graph=g), a.repeat)
        res = {
            "events": n_ev, "graph_events": int(g.rows.size), "graph_nodes": g.n_nodes, "graph_edges": int(g.src.size),
            "path_events": len(cp.row_ids), "nbprof_load_s": load_s, "nbprof_graph_s": g_s,
            "nbprof_critical_path_s": cp_s, "nbprof_critical_path_no_slack_s": cp_noslack_s,
            "nbprof_whatif_replay_s": wi_s, "repeat": a.repeat,
        }
        print(f"trace: {n_ev} events ({path}), graph {g.rows.size} events / {g.n_nodes} nodes / {g.src.size} edges")
        print(f"nbprof load {load_s:.2f} s (not counted)")
        print(f"nbprof build_graph           {g_s:6.2f} s (best of {a.repeat})")
        print(f"nbprof critical_path + slack {cp_s:6.2f} s   (without slack {cp_noslack_s:.2f} s)")
        print(f"nbprof whatif replay         {wi_s:6.2f} s   ({pred})")
        res["nbprof_n_critical"] = int(cp.events["cat"].astype(str).isin(
            ["cpu_op", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset"]).sum())
        if a.hta_python:
            cmd = [a.hta_python, str(ROOT / "scripts" / "make_hta_critical_path_refs.py"), "--bench", str(d)]
            t0 = time.perf_counter()
            try:
                out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=a.hta_timeout)
                line = [x for x in out.stdout.splitlines() if x.startswith("{")]
                if line:
                    h = json.loads(line[-1])
                    res["hta_critical_path_s"] = h["hta_s"]
                    res["hta_ok"] = h["ok"]
                    res["hta_n_critical"] = h.get("n_critical")
                    shift = int(trace.events["ts_ns"].min()) - h.get("raw_min_ts_ns", 0)
                    mine = _digest(trace, cp, -shift)
                    res["same_critical_events"] = h.get("keys_sha1") == mine["keys_sha1"]
                    if not res["same_critical_events"] and "last_ts_ns" in h:
                        # HTA's parser drops the last ProfilerStep's events: compare on the window it kept
                        w = (h["first_ts_ns"] + shift, h["last_ts_ns"] + shift)
                        mine_w = _digest(trace, critical_path(trace, window=w, slack=False), -shift)
                        res["same_critical_events_in_hta_window"] = h.get("keys_sha1") == mine_w["keys_sha1"]
                        res["nbprof_n_critical_in_hta_window"] = mine_w["n_critical"]
                        print(f"  HTA analysed ts {w[0]}..{w[1]} ns only (its parser drops the last step); "
                              f"nbprof on that window: {mine_w['n_critical']} critical events, same set: "
                              f"{res['same_critical_events_in_hta_window']}")
                    print(f"critical events: nbprof {mine['n_critical']}, HTA {h.get('n_critical')}, "
                          f"same set: {res['same_critical_events']}")
                    print(f"HTA critical_path_analysis   {h['hta_s']:6.2f} s (ok={h['ok']}; whole HTA process "
                          f"{time.perf_counter() - t0:.1f} s incl. its parse) -> nbprof {h['hta_s'] / cp_s:.1f}x faster")
                else:
                    res["hta_error"] = (out.stderr or "")[-2000:]
                    print("HTA failed:", res["hta_error"][-500:])
            except subprocess.TimeoutExpired:
                res["hta_error"] = f"timeout after {a.hta_timeout} s"
                print("HTA:", res["hta_error"])
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
