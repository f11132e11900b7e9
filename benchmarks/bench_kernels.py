"""GPU Kernel view: torch-tb-profiler 0.4.3's parser vs nbprof load + ``kernels.gpu_metrics`` + ``kernel_table``.

The plugin computes its Kernel view and Overview GPU metrics only as part of its whole-run parse
(``RunProfileData.from_json`` after ``json.loads`` of the file, what TensorBoard pays per run); nbprof
loads the file (``nbprof.load``) and computes the two kernel tables and the per-device metrics. Both
results are checked to agree (utilisation, est. SM efficiency, kernel table totals) before the ratio
is printed, so the speed is not bought with wrong numbers. Median of ``--repeat`` runs each, in this
process (no trace cache).

Usage::

    python benchmarks/bench_kernels.py                      # the V100 ResNet-50 samples of ../shared/corpus
    python benchmarks/bench_kernels.py path/to/trace.json.gz --repeat 5
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT.parent / "shared" / "corpus" / "pytorch__kineto" / "tb_plugin" / "samples"


def _plugin(path: Path):
    from torch_tb_profiler.profiler import data as tbp

    raw = path.read_bytes()
    raw = gzip.decompress(raw) if path.suffix == ".gz" else raw
    doc = json.loads(raw)
    # today's Kineto categories in 0.4.3's vocabulary (no-op on a 2021 trace), as tests/test_analysis_kernel_view.py
    ren = {"cuda_runtime": "Runtime", "cuda_driver": "Runtime", "user_annotation": "cpu_op"}
    doc["traceEvents"] = [dict(e, cat=ren.get(e.get("cat"), e.get("cat"))) for e in doc["traceEvents"]
                          if e.get("cat") != "gpu_user_annotation"]
    logging.disable(logging.WARNING)
    try:
        return tbp.RunProfileData.from_json("worker0", "span", doc)
    finally:
        logging.disable(logging.NOTSET)


def _nbprof(path: Path):
    import nbprof
    from nbprof.analysis import kernels

    t = nbprof.load(path)
    return kernels.gpu_metrics(t), kernels.kernel_table(t), kernels.kernel_table(t, by="kernel_operator")


def _timed(fn, path: Path, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(path)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", type=Path, help="Kineto traces (default: the V100 ResNet-50 samples)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    paths = args.traces or sorted(SAMPLES.glob("*/*.pt.trace.json.gz"))
    if not paths:
        print(f"no traces given and {SAMPLES} is absent", file=sys.stderr)
        return 2
    for p in paths:
        t_p, prof = _timed(_plugin, p, args.repeat)
        t_n, (m, kt, ko) = _timed(_nbprof, p, args.repeat)
        g = prof.gpu_metrics_parser
        dev = int(m.device.iloc[0])
        # exact on integer-µs traces; float µs -> int ns moves the ratios by ~1e-6
        assert abs(m.utilization_ratio.iloc[0] - g.gpu_utilization[dev]) < 1e-5
        assert abs(m.est_sm_efficiency_ratio.iloc[0] - g.avg_approximated_sm_efficiency_per_device[dev]) < 1e-5
        assert int(kt.calls.sum()) == int(prof.kernel_stat["count"].sum())
        assert len(ko) == len(prof.kernel_list_groupby_name_op)
        print(f"{p.name}: torch-tb-profiler 0.4.3 {t_p:.3f} s, nbprof {t_n:.3f} s (load + gpu_metrics + 2 kernel "
              f"tables): {t_p / t_n:.1f}x; {len(kt)} kernels, {len(ko)} kernel+operator rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
