"""Overhead of the always-on step watch (``nbprof.watch``), as a ratio against the same loop unwatched, one run.

Two loops, each timed step by step with ``time.perf_counter_ns`` around the whole iteration (batch fetch,
forward, backward, optimizer step), in interleaved blocks (unwatched, watched, unwatched, ...) so that the
machine's load drifts equally over both:

- ``train``: an MLP (256 -> 512 -> 512 -> 10, batch 128, one torch thread) fed by a single-process DataLoader:
  a few-ms CPU step, the issue's "< 1 % of the step time" case;
- ``tiny``: a 8 -> 8 linear layer on one sample: the step is almost only framework overhead, so the
  difference of the medians is the watch's absolute cost per step (µs), whatever the step.

The watch runs with its defaults and ``capture_steps=0`` (hooks only: no profiler is ever started; a profiled
window is the rare event the watch exists to trigger). Prints, per loop, the median step unwatched and
watched, their difference per step, their ratio, and the median (with quartiles) of the ratios of each pair of
adjacent blocks (a pair sees the same machine load, so this ratio is the one to read on a busy machine).

Usage::

    python benchmarks/bench_watch.py                 # 30 rounds of 2 x 30 steps per loop
    python benchmarks/bench_watch.py --rounds 4      # quick
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def _loop(kind: str):
    import torch
    from torch import nn

    torch.manual_seed(0)
    if kind == "train":
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        data = [(torch.randn(128, 256), torch.randint(0, 10, (128,))) for _ in range(8)]
    else:
        model = nn.Linear(8, 8)
        data = [(torch.randn(1, 8), torch.randint(0, 8, (1,))) for _ in range(8)]
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def run(steps: int) -> list[int]:
        loader = torch.utils.data.DataLoader(data * (steps // len(data) + 1), batch_size=None)
        out = []
        it = iter(loader)
        for _ in range(steps):
            t0 = time.perf_counter_ns()
            x, y = next(it)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(time.perf_counter_ns() - t0)
        return out

    return run


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--steps", type=int, default=30, help="steps per block")
    a = ap.parse_args(argv)
    import torch

    import nbprof

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        for kind in ("train", "tiny"):
            run = _loop(kind)
            run(20)  # warm-up
            bare: list[int] = []
            watched: list[int] = []
            ratios: list[float] = []
            for r in range(a.rounds):
                blk: dict[bool, list[int]] = {}
                for watch in ((False, True) if r % 2 == 0 else (True, False)):
                    if watch:
                        with nbprof.watch(Path(d) / f"{kind}{r}", capture_steps=0):
                            blk[True] = run(a.steps)
                    else:
                        blk[False] = run(a.steps)
                bare += blk[False]
                watched += blk[True]
                ratios.append(statistics.median(blk[True]) / statistics.median(blk[False]))
            mb, mw = statistics.median(bare), statistics.median(watched)
            q = statistics.quantiles(ratios, n=4)
            print(f"{kind:5s}  unwatched median {mb / 1e6:8.3f} ms  watched {mw / 1e6:8.3f} ms  "
                  f"difference {(mw - mb) / 1e3:+8.1f} µs/step  ratio of the medians {mw / mb:.4f}  "
                  f"median of the {len(ratios)} adjacent-block ratios {statistics.median(ratios):.4f} "
                  f"(quartiles {q[0]:.4f}-{q[2]:.4f})")


if __name__ == "__main__":
    main()
