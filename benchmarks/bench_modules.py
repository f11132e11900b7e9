"""Module view: torch-tb-profiler 0.4.3's module statistics vs nbprof's ``module_tree`` on the same file.

* plugin: ``RunProfileData.from_json`` + ``process()`` (its event parse and operator tree, which the Module view
  needs) + ``aggegate_module_view`` — what the plugin computes before it can draw the view; the file is decoded
  with ``json.loads`` outside the timing (the plugin's own reader does the same work);
* nbprof: ``nbprof.load(path)`` + ``modules.module_tree(trace)`` (+ ``call_stack`` separately).

The calls per instance are checked to agree before the ratio is printed. Usage::

    python benchmarks/bench_modules.py                       # data/gpu/lm_mem.pt.trace.json.gz
    python benchmarks/bench_modules.py --trace ../shared/corpus/AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _calls(stats: list, out: dict) -> dict:
    """{instance: calls} of the plugin's module statistics tree."""
    for s in stats:
        out[s.name] = s.occurences
        _calls(s.children, out)
    return out


def main(argv: list[str] | None = None) -> None:
    """Print the plugin's and nbprof's times and their ratio."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", default=str(ROOT / "data" / "gpu" / "lm_mem.pt.trace.json.gz"))
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    path = Path(a.trace)

    import nbprof
    from nbprof.analysis import modules

    best_nb = best_cs = best_tb = float("inf")
    ours = theirs = None
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        trace = nbprof.load(path)
        ours = modules.module_tree(trace)
        best_nb = min(best_nb, time.perf_counter() - t0)
        t0 = time.perf_counter()
        modules.call_stack(trace)
        best_cs = min(best_cs, time.perf_counter() - t0)

        from torch_tb_profiler.profiler.data import RunProfileData
        from torch_tb_profiler.profiler.module_op import aggegate_module_view

        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        raw = json.loads(data)
        for e in raw["traceEvents"]:  # 0.4.3's vocabulary (tests/test_analysis_modules.py _modernised)
            if e.get("cat") in ("cuda_runtime", "cuda_driver"):
                e["cat"] = "Runtime"
                e.setdefault("args", {}).setdefault("External id", 0)
        logging.disable(logging.WARNING)
        t0 = time.perf_counter()
        prof = RunProfileData.from_json("worker0", "span", raw)
        prof.process()
        stats = aggegate_module_view(prof.tid2tree, prof.events)
        best_tb = min(best_tb, time.perf_counter() - t0)
        logging.disable(logging.NOTSET)
        theirs = _calls(stats or [], {})
    assert ours is not None and theirs is not None
    mine = ours.groupby("name")["calls"].sum().to_dict()
    assert mine == theirs, "module calls differ from the plugin's"
    print(f"{path.name}: {len(ours)} module nodes, {int(ours['calls'].sum())} calls")
    print(f"  torch-tb-profiler parse+tree+module view : {best_tb:8.3f} s")
    print(f"  nbprof load + module_tree                : {best_nb:8.3f} s   ({best_tb / best_nb:.1f}x faster)")
    print(f"  nbprof call_stack (trace loaded)         : {best_cs:8.3f} s")


if __name__ == "__main__":
    main()
