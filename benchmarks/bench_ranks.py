"""Multi-rank load benchmark: nbprof local pool vs nbprof + Dask LocalCluster vs HTA, same files, one run.

    python benchmarks/bench_ranks.py --ranks 8 --mb 50            # HTA included
    python benchmarks/bench_ranks.py --ranks 64 --mb 50 --skip hta

Each measurement runs in a fresh subprocess; peak RSS is sampled over the whole process tree (parent +
pool workers / Dask workers) every 50 ms with psutil. Files are generated once (benchmarks/gen_kineto.py,
Kineto-shaped: python_function, cpu_op with shapes, cuda_runtime, kernels with full args, flows, [memory],
steps) and copied per rank with the rank written into ``distributedInfo``.

Targets (issue 12, 2 cores): 64 ranks x 50 MB summarised in < 60 s with peak RSS < 4 GB; cached reopen < 5 s.
HTA: its multi-rank loader (``Trace.parse_traces`` → a multiprocessing pool over ``parse_trace_file``) fails on
these files under pandas 3 (``transform_correlation_to_index``: int16 dtype error once a rank has >32k events),
so the benchmark runs HTA's per-file parser (``parse_trace_dataframe``) in the same kind of 2-process pool needs ~5x the trace size in RAM,
so it is only run on the 8-rank case here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

SNIPPETS = {
    "nbprof-local": """
from nbprof.scale import load_ranks
mr = load_ranks(sys.argv[1] + "/rank-*.json", cache_dir=sys.argv[2], progress=False)
out = {"ranks": len(mr), "kernel_rows": int(len(mr.table("kernels")))}
""",
    "nbprof-reopen": """
from nbprof.scale import load_ranks
mr = load_ranks(sys.argv[1] + "/rank-*.json", cache_dir=sys.argv[2], progress=False)
out = {"ranks": len(mr), "from_cache": sum(mr.from_cache.values())}
""",
    "nbprof-dask": """
from dask.distributed import Client, LocalCluster
from nbprof.scale import load_ranks
with LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None, memory_limit=0) as lc, Client(lc) as c:
    mr = load_ranks(sys.argv[1] + "/rank-*.json", client=c, cache=False, progress=False)
out = {"ranks": len(mr), "kernel_rows": int(len(mr.table("kernels")))}
""",
    "hta": """
import glob, multiprocessing as mp
from hta.common.trace_parser import parse_trace_dataframe
from hta.configs.parser_config import ParserConfig
def one(p):
    meta, df, sym = parse_trace_dataframe(p, ParserConfig())
    return len(df)
# HTA's Trace.parse_multiple_ranks: a multiprocessing pool over parse_trace_file; its post-step
# (transform_correlation_to_index) fails under pandas 3 on these files, so the pool runs the parser itself
with mp.get_context("fork").Pool(min(mp.cpu_count(), 2)) as pool:
    rows = pool.map(one, sorted(glob.glob(sys.argv[1] + "/rank-*.json")))
out = {"ranks": len(rows), "rows": sum(rows)}
""",
}

RUNNER = """
import json, sys, time
t0 = time.perf_counter()
{body}
out["seconds"] = time.perf_counter() - t0
print("RESULT " + json.dumps(out))
"""


def _measure(name: str, trace_dir: str, cache_dir: str, *, body: str | None = None, extra: list[str] | None = None) -> dict:
    """Run snippet ``name`` (or ``body``) in a fresh process with ``sys.argv[1:] = [trace_dir, cache_dir, *extra]``;
    its ``out`` dict plus ``seconds`` and the process tree's ``peak_rss_gib`` (sampled every 50 ms)."""
    import psutil

    code = RUNNER.format(body=body if body is not None else SNIPPETS[name])
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-c", code, trace_dir, cache_dir, *(extra or [])], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        try:
            proc = psutil.Process(p.pid)
        except psutil.NoSuchProcess:
            return
        while not stop.is_set():
            try:
                rss = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
                peak = max(peak, rss)
            except psutil.Error:
                pass
            time.sleep(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = p.communicate()
    stop.set()
    th.join()
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        return {"error": err.strip().splitlines()[-1] if err.strip() else f"exit {p.returncode}"}
    res = json.loads(line[7:])
    res["peak_rss_gib"] = peak / 2**30
    return res


def make_ranks(n: int, mb: float, folder: str) -> None:
    from gen_kineto import generate

    os.makedirs(folder, exist_ok=True)
    src = os.path.join(folder, "_template.json")
    generate(src, int(mb * 2**20 / 250), steps=10)
    with open(src, "rb") as f:
        data = f.read()
    os.remove(src)
    for r in range(n):
        body = data.replace(b'"rank": 0, "world_size": 8', f'"rank": {r}, "world_size": {n}'.encode(), 1)
        with open(os.path.join(folder, f"rank-{r}.json"), "wb") as f:
            f.write(body)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--skip", nargs="*", default=[])
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir, removed after)")
    a = ap.parse_args()
    folder = a.dir or tempfile.mkdtemp(prefix="nbprof_ranks_")
    cache = tempfile.mkdtemp(prefix="nbprof_cache_")
    t = time.perf_counter()
    make_ranks(a.ranks, a.mb, folder)
    total = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print(f"{a.ranks} ranks x {a.mb:.0f} MB = {total / 2**30:.2f} GiB generated in {time.perf_counter() - t:.0f} s ({folder})")
    order = ["nbprof-local", "nbprof-reopen", "nbprof-dask", "hta"]
    results = {}
    for name in order:
        if name in a.skip or (name == "hta" and "hta" in a.skip):
            continue
        r = _measure(name, folder, cache)
        results[name] = r
        if "error" in r:
            print(f"{name:14s} failed: {r['error']}")
        else:
            rest = json.dumps({k: v for k, v in r.items() if k not in ("seconds", "peak_rss_gib")})
            print(f"{name:14s} {r['seconds']:7.1f} s   peak RSS {r['peak_rss_gib']:5.2f} GiB   {rest}")
    base = results.get("nbprof-local", {}).get("seconds")
    if base:
        for name, r in results.items():
            if "seconds" in r and name != "nbprof-local":
                print(f"  {name} / nbprof-local = {r['seconds'] / base:.2f}x")
    if not a.dir:
        shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
