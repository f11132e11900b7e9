"""Load-time / peak-memory benchmark: nbprof vs the JSON-decode floor vs HTA, on one file.

Each measurement runs in a fresh Python subprocess (so peak RSS, ``ru_maxrss``, is its own) on the
same trace file, one after the other; CPU time and peak RSS include the loader's child processes
(nbprof decodes large files in two), and a separate run per loader samples the peak PSS of the
whole process tree (the physical memory it uses):

- ``orjson``     floor 1: ``orjson.loads(file bytes)`` with the cyclic GC off (a bare JSON decode into
                 Python objects; ../shared/notes/user-complaints.md "Measured load costs");
- ``msgspec``    floor 2: a typed msgspec decode of the same bytes into Structs holding the fields
                 nbprof reads (``ph cat name pid tid ts dur id s`` + the args nbprof keeps), GC off;
- ``nbprof``     ``nbprof.load(path)``: the full ``Trace`` (typed int64-ns tables, steps, flows,
                 memory, load report);
- ``hta``        HolisticTraceAnalysis ``parse_trace_dataframe`` with its default parser config
                 (JSON backend), the peer loader.

Targets (issue 3) on the 288 MB / 1.16 M-event trace: nbprof <= 1.5x the orjson floor, >= 8x faster
than HTA, peak RSS <= 1.5 GiB.

Usage::

    python benchmarks/bench_load.py --events 1160000            # generate into a temp dir, then measure
    python benchmarks/bench_load.py --trace some.pt.trace.json  # measure an existing file
    python benchmarks/bench_load.py --events 145000 --skip hta  # quick run

Not part of the test suite (tests/test_bench_smoke.py only runs the generator + loader on a tiny file).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Each snippet prints one JSON line: {"seconds": wall time of the load, "rss_mib": peak RSS, ...}.
# CPU time and peak RSS include the loader's child processes (nbprof loads large traces in two).
_PRELUDE = """
import gc, json, resource, sys, time
path = sys.argv[1]
def cpu():
    r, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime
def read_trace(path):
    import gzip
    with open(path, "rb") as f:
        raw = f.read()
    return gzip.decompress(raw) if raw[:2] == b"\\x1f\\x8b" else raw
def done(t0, c0, **kw):
    dt = time.perf_counter() - t0
    kw.update(seconds=dt, cpu_seconds=cpu() - c0, rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              child_rss_mib=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    print(json.dumps(kw))
"""

SNIPPETS = {
    "orjson": _PRELUDE + """
import orjson
gc.disable()
t0, c0 = time.perf_counter(), cpu()
raw = read_trace(path)
doc = orjson.loads(raw)
done(t0, c0, events=len(doc["traceEvents"] if isinstance(doc, dict) else doc))
""",
    "msgspec": _PRELUDE + """
import msgspec
Int = int | str | None
Num = int | float | str | None
class Args(msgspec.Struct, gc=False):
    external_id: Int = msgspec.field(default=None, name="External id")
    correlation: Int = None
    device: Int = None
    stream: Int = None
    seq: Int = msgspec.field(default=None, name="Sequence number")
    fwd_tid: Int = msgspec.field(default=None, name="Fwd thread id")
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    call_stack: str | None = msgspec.field(default=None, name="Call stack")
    flops: Num = None
    nbytes: Num = msgspec.field(default=None, name="bytes")
    grid: msgspec.Raw = msgspec.Raw()
    block: msgspec.Raw = msgspec.Raw()
    registers: Num = msgspec.field(default=None, name="registers per thread")
    shared_mem: Num = msgspec.field(default=None, name="shared memory")
    occupancy: Num = msgspec.field(default=None, name="est. achieved occupancy %")
    mem_bytes: Num = msgspec.field(default=None, name="Bytes")
    total_alloc: Num = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Num = msgspec.field(default=None, name="Total Reserved")
    device_id: Num = msgspec.field(default=None, name="Device Id")
    addr: Num = msgspec.field(default=None, name="Addr")
class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str | int | float | None = ""
    pid: Int = None
    tid: Int = None
    ts: float | str | None = None
    dur: float | str | None = None
    id: int | float | str | None = None
    s: str | None = None
    args: Args | None = None
class Top(msgspec.Struct):
    traceEvents: list[Event] = []
gc.disable()
t0, c0 = time.perf_counter(), cpu()
raw = read_trace(path)
top = msgspec.json.decode(raw, type=Top)
done(t0, c0, events=len(top.traceEvents))
""",
    "nbprof": _PRELUDE + """
sys.path.insert(0, sys.argv[2])
import nbprof
t0, c0 = time.perf_counter(), cpu()
tr = nbprof.load(path)
done(t0, c0, events=len(tr.events), memory=len(tr.memory), flows=len(tr.flows), steps=len(tr.steps),
     clean=tr.report.clean, frame_mib=float(tr.events.memory_usage(deep=True).sum()) / 2**20)
""",
    "hta": _PRELUDE + """
import logging
logging.disable(logging.WARNING)
from hta.common.trace_parser import parse_trace_dataframe
from hta.configs.parser_config import ParserConfig
t0, c0 = time.perf_counter(), cpu()
meta, df, symbols = parse_trace_dataframe(path, ParserConfig())
done(t0, c0, events=len(df))
""",
}


def _pss_mib(pid: int) -> float:
    """Proportional set size of ``pid`` and its child processes (Linux ``smaps_rollup``; 0 elsewhere).

    PSS counts a page shared by two processes (the file bytes after a fork) half in each, so the
    sum over the process tree is the physical memory the tree uses.
    """
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += next(int(ln.split()[1]) for ln in f if ln.startswith("Pss:")) / 1024
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, StopIteration, ValueError):
            pass
    return total


def measure(kind: str, path: str, timeout: float = 1800, sample_pss: bool = False) -> dict:
    """Run one loader in a fresh interpreter; return its JSON line (``seconds``, ``rss_mib``, ...).

    ``sample_pss``: also record ``pss_peak_mib``, the highest sum of PSS over the interpreter and its
    children, sampled every 50 ms from this process. Reading ``smaps_rollup`` takes the target's
    memory-map lock and slows its allocations, so the times of such a run are not reported.
    """
    cmd = [sys.executable, "-c", SNIPPETS[kind], path, ROOT]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, t0 = 0.0, time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < timeout:
        if sample_pss:
            peak = max(peak, _pss_mib(proc.pid))
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    out, err = proc.communicate()
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (err or out).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]}
    res = json.loads(lines[-1])
    res["pss_peak_mib"] = peak
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", help="an existing trace file to measure")
    ap.add_argument("--events", type=int, default=1_160_000, help="generate a trace with this many events")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--skip", action="append", default=[], choices=sorted(SNIPPETS), help="leave a loader out")
    ap.add_argument("--repeat", type=int, default=1, help="runs per loader (the best is reported)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    a = ap.parse_args(argv)

    tmp = None
    path = a.trace
    if path is None:
        sys.path.insert(0, HERE)
        from gen_kineto import generate

        tmp = tempfile.TemporaryDirectory(prefix="nbprof-bench-")
        path = os.path.join(tmp.name, "bench.pt.trace.json")
        t0 = time.perf_counter()
        counts = generate(path, a.events, a.steps)
        print(f"generated {path}: {counts['total']} events, {counts['bytes'] / 1e6:.0f} MB "
              f"in {time.perf_counter() - t0:.1f} s")
    size = os.path.getsize(path)
    print(f"file: {path} ({size / 1e6:.0f} MB)  python {sys.version.split()[0]}  cpus {os.cpu_count()}  "
          f"load avg {os.getloadavg()[0]:.1f}")
    results: dict[str, dict] = {}
    for kind in ("orjson", "msgspec", "nbprof", "hta"):
        if kind in a.skip:
            continue
        best = None
        for _ in range(a.repeat):
            r = measure(kind, path)
            if "error" in r:
                best = r
                break
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        if "error" not in best:  # a separate run for the memory of the whole process tree
            best["pss_peak_mib"] = measure(kind, path, sample_pss=True).get("pss_peak_mib", float("nan"))
        results[kind] = best
        if "error" in best:
            print(f"{kind:8s} ERROR {best['error']}")
        else:
            extra = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in best.items()
                     if k not in ("seconds", "cpu_seconds", "rss_mib", "child_rss_mib", "pss_peak_mib")}
            print(f"{kind:8s} {best['seconds']:8.2f} s wall  {best['cpu_seconds']:7.2f} s CPU  "
                  f"peak RSS {best['rss_mib']:7.0f} MiB (children {best['child_rss_mib']:.0f})  "
                  f"peak PSS {best['pss_peak_mib']:7.0f} MiB  {extra}")
    nb = results.get("nbprof", {})
    if "seconds" in nb:
        print("---")
        for floor in ("orjson", "msgspec"):
            if "seconds" in results.get(floor, {}):
                f = results[floor]
                print(f"nbprof / {floor} floor: {nb['seconds'] / f['seconds']:.2f}x wall time "
                      f"({nb['cpu_seconds'] / f['cpu_seconds']:.2f}x CPU time), "
                      f"{nb['rss_mib'] / f['rss_mib']:.2f}x peak RSS")
        if "seconds" in results.get("hta", {}):
            h = results["hta"]
            print(f"HTA / nbprof: {h['seconds'] / nb['seconds']:.1f}x faster wall "
                  f"({h['cpu_seconds'] / nb['cpu_seconds']:.1f}x CPU), "
                  f"peak RSS {nb['rss_mib']:.0f} vs {h['rss_mib']:.0f} MiB")
        ok_floor = "seconds" in results.get("orjson", {}) and nb["seconds"] <= 1.5 * results["orjson"]["seconds"]
        ok_hta = "seconds" in results.get("hta", {}) and results["hta"]["seconds"] >= 8 * nb["seconds"]
        print(f"targets: <=1.5x orjson floor {'met' if ok_floor else 'NOT met'}; "
              f">=8x HTA {'met' if ok_hta else 'NOT met'}; "
              f"peak memory <=1.5 GiB {'met' if max(nb['rss_mib'], nb['pss_peak_mib']) <= 1536 else 'NOT met'} "
              f"(PSS of the process tree {nb['pss_peak_mib']:.0f} MiB, parent RSS {nb['rss_mib']:.0f} MiB)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"file": path, "bytes": size, "results": results}, f, indent=1)
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
