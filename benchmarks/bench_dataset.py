"""Job dataset benchmark (issue 37): cross-rank analyses from the Parquet dataset vs from every full Trace.

    python benchmarks/bench_dataset.py                       # 16 ranks x 5 MB (sized for a 2-core machine)
    python benchmarks/bench_dataset.py --ranks 256 --mb 50   # the issue's case: 12.8 GB generated

Ranks are one generated Kineto trace (``gen_kineto.py``: cpu_ops, runtime calls, kernels, flows, [memory],
``ProfilerStep``s) with an NCCL all-reduce kernel added at the end of each step (``Collective name``, message
size, group size, process group), copied per rank with the rank in ``distributedInfo`` and the clock
(``baseTimeNanoseconds``) 1 µs later per rank, so the last rank arrives last at every all-reduce.

Phases, each in a fresh subprocess; peak RSS is sampled every 50 ms over the process tree
(``bench_ranks._measure``):

1. ``write``: ``load_ranks(folder, client=<local Dask cluster>, dataset=DS)`` -- parse, reduce and write each rank
   on the Dask workers (``--workers`` processes, 1 thread each);
2. ``rewrite``: the same call again (every source unchanged: nothing is parsed);
3. ``dataset``: the analysing process: ``nbprof.open_job(DS)`` then the cross-rank analyses (``distributed_report``,
   ``stragglers``, ``step_breakdown``, ``ranks_clock``) from the reductions;
4. ``full``: today's way: ``nbprof.load`` of every rank in one process, then the same analyses on the traces.

Reported: seconds, ``analysis_s`` (the analyses alone, reading the reductions included) and ``analysis_cpu_s``
(the same in CPU seconds of the process: on a shared machine the wall-clock time mostly measures the others), peak
RSS, the machine's load before and after each phase, and dataset / full ratios (one run, same
machine: ratios, not absolute numbers, carry over). Issue 37's targets at 256 x 50 MB: the analysing process
under 2 GiB and the analyses under 10 s once the dataset exists.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

WRITE = """
from dask.distributed import Client, LocalCluster
from nbprof.scale import load_ranks
n = int(sys.argv[3])
with LocalCluster(n_workers=n, threads_per_worker=1, host="127.0.0.1", dashboard_address=None, memory_limit=0) as lc, \\
        Client(lc) as c:
    mr = load_ranks(sys.argv[1], client=c, dataset=sys.argv[2], progress=False)
out = {"ranks": len(mr), "parsed": sum(not v for v in mr.from_cache.values())}
"""

ANALYSES = """
t1, c1 = time.perf_counter(), time.process_time()
rep = D.distributed_report(src)
st = D.stragglers(src)
sb = D.step_breakdown(src)
shifts, links = D.ranks_clock(src)
out = {"ranks": len(rep.overlap), "collectives": len(rep.collectives), "steps": len(sb),
       "straggler": [int(r) for r in st.loc[st["straggler"], "rank"]], "analysis_s": time.perf_counter() - t1,
       "analysis_cpu_s": time.process_time() - c1, "load_s": t1 - t0}
"""

DATASET = """
import nbprof
from nbprof.analysis import distributed as D
job = nbprof.open_job(sys.argv[2])
src = job.reductions()
""" + ANALYSES

FULL = """
import glob, nbprof
from nbprof.analysis import distributed as D
src = [nbprof.load(p) for p in sorted(glob.glob(sys.argv[1] + "/rank-*.json"))]
""" + ANALYSES


def make_ranks(n: int, mb: float, folder: str) -> None:
    """``n`` rank files of about ``mb`` MB: the generated trace plus one NCCL all-reduce per step."""
    from gen_kineto import generate

    os.makedirs(folder, exist_ok=True)
    src = os.path.join(folder, "_template.json")
    steps = 10
    generate(src, int(mb * 2**20 / 250), steps=steps)
    with open(src) as f:
        doc = json.load(f)
    os.remove(src)
    ev = doc["traceEvents"]
    corr = 1 + max(int(e.get("args", {}).get("correlation", 0)) for e in ev)
    for s in (e for e in list(ev) if str(e.get("name", "")).startswith("ProfilerStep#")):
        end = float(s["ts"]) + float(s["dur"])
        ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 20,
                   "ts": round(end - 30.0, 3), "dur": 25.0,
                   "args": {"device": 0, "stream": 20, "correlation": corr, "Collective name": "allreduce",
                            "In msg nelems": 4194304, "Out msg nelems": 4194304, "Group size": n, "dtype": "Float",
                            "Process Group Name": "0", "Process Group Description": "default_pg"}})
        corr += 1
    data = json.dumps(doc).encode()
    base = b'"baseTimeNanoseconds": 1700000000000000000'
    for r in range(n):
        body = data.replace(b'"rank": 0, "world_size": 8', f'"rank": {r}, "world_size": {n}'.encode(), 1)
        body = body.replace(base, f'"baseTimeNanoseconds": {1700000000000000000 + 1000 * r}'.encode(), 1)
        with open(os.path.join(folder, f"rank-{r}.json"), "wb") as f:
            f.write(body)


def _load() -> str:
    """The machine's load average and CPU pressure (``/proc/loadavg``, ``/proc/pressure/cpu`` ``some avg60``), to
    read a run's seconds against (``analysis_cpu_s`` is the analysing process's own CPU time)."""
    try:
        with open("/proc/loadavg") as f:
            la = " ".join(f.read().split()[:3])
        with open("/proc/pressure/cpu") as f:
            psi = f.readline().split()[2]
    except OSError:
        return "unknown"
    return f"loadavg {la}, cpu pressure {psi}"


def main() -> None:
    from bench_ranks import _measure

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--mb", type=float, default=5.0, help="size of each rank's trace (MB)")
    ap.add_argument("--workers", type=int, default=2, help="Dask worker processes (1 thread each)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["write", "rewrite", "dataset", "full"])
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary one, removed after)")
    a = ap.parse_args()
    work = a.dir or tempfile.mkdtemp(prefix="nbprof_dataset_")
    folder, ds = os.path.join(work, "ranks"), os.path.join(work, "dataset")
    t = time.perf_counter()
    if not os.path.isdir(folder):
        make_ranks(a.ranks, a.mb, folder)
    total = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print(f"{a.ranks} ranks x {a.mb:g} MB = {total / 2**30:.2f} GiB generated in {time.perf_counter() - t:.0f} s ({folder})")
    res = {}
    for name, body in (("write", WRITE), ("rewrite", WRITE), ("dataset", DATASET), ("full", FULL)):
        if name in a.skip:
            continue
        load = _load()
        r = _measure(name, folder, ds, body=body, extra=[str(a.workers)])
        res[name] = r
        print(f"{name:8s} machine before: {load}; after: {_load()}")
        if "error" in r:
            print(f"{name:8s} failed: {r['error']}")
            continue
        rest = json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()
                           if k not in ("seconds", "peak_rss_gib")})
        print(f"{name:8s} {r['seconds']:7.1f} s   peak RSS {r['peak_rss_gib']:5.2f} GiB   {rest}")
    if os.path.isdir(ds):
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(ds) for f in fs)
        print(f"dataset: {size / 2**30:.2f} GiB on disk ({size / total:.2f}x the traces)")
    d, f = res.get("dataset", {}), res.get("full", {})
    if "analysis_s" in d and "analysis_s" in f:
        print(f"dataset / full: peak RSS {d['peak_rss_gib'] / f['peak_rss_gib']:.3f}x, "
              f"analyses {d['analysis_s'] / f['analysis_s']:.2f}x, whole process {d['seconds'] / f['seconds']:.3f}x")
        same = all(d[k] == f[k] for k in ("ranks", "collectives", "steps", "straggler"))
        print(f"same results (ranks, collectives, steps, stragglers): {same}")
    if not a.dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
