"""A CPU training loop whose DataLoader worker stalls now and then, plus one stall in the main thread's I/O.

The issue-32 workload: a small MLP (a few ms per step on CPU), a ``DataLoader`` with one worker process whose
``__getitem__`` sleeps ``stall_ms`` on about one batch in ``every`` (chosen at random, seeded), and at step
``io_step`` the main thread blocks in a real write into a full pipe that a thread drains ``stall_ms`` later.

``python tests/workloads/watch_stalls.py --steps 500`` runs it bare (``python -m nbprof watch`` watches it);
:func:`run` runs it inside an ``nbprof`` watch and returns what the test needs.
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def stall_plan(steps: int, every: int, seed: int) -> list[int]:
    """Batches whose loading stalls: one at random in each run of ``every`` batches (after the first run)."""
    rng = random.Random(seed)
    return [b + rng.randrange(every) for b in range(every, steps - 1, every) if b + every <= steps - 1]


class Batches(Dataset):
    """Batch ``i`` (``batch_size=None`` loading): its number (the loop turns it into tensors); batches in ``stall``
    sleep ``stall_ms`` first."""

    def __init__(self, n: int, stall: list[int], stall_ms: float, batch: int = 128, dim: int = 256) -> None:
        self.n, self.stall, self.stall_s, self.batch, self.dim = n, set(stall), stall_ms / 1000, batch, dim

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i in self.stall:
            time.sleep(self.stall_s)
        return i  # a plain int crosses the worker queue without shared-memory tensors (cheap on a busy machine)


def slow_write(delay_s: float) -> int:
    """A real blocking write: ``FileIO.write`` into a full pipe that a reader thread drains after ``delay_s``."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:  # fill the pipe's buffer
        while True:
            os.write(w, b"\0" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)

    def drain() -> None:
        time.sleep(delay_s)
        while os.read(r, 65536):
            pass

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    with os.fdopen(w, "wb", buffering=0) as f:
        n = f.write(b"x" * 4096)  # blocks until the reader has made room
    t.join()
    os.close(r)
    return int(n or 0)


def train(steps: int = 500, every: int = 40, stall_ms: float = 200.0, io_step: int | None = None,
          seed: int = 0, dim: int = 256) -> tuple[list[int], int]:
    """Train ``steps`` steps; returns (stalled batch numbers, the I/O stall's step)."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    stall = stall_plan(steps, every, seed)
    io_step = steps // 2 + every // 2 if io_step is None else io_step
    stall = [s for s in stall if abs(s - io_step) > 2]
    model = nn.Sequential(nn.Linear(dim, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Batches(steps, stall, stall_ms, dim=dim), batch_size=None, num_workers=1,
                        prefetch_factor=2)
    xs = torch.randn(8, 128, dim)
    ys = torch.randint(0, 10, (8, 128))
    for i, b in enumerate(loader):
        x, y = xs[b % 8], ys[b % 8]
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if i == io_step:
            slow_write(stall_ms / 1000)
        opt.step()
    return stall, io_step


def run(run_dir: str, steps: int = 500, every: int = 40, stall_ms: float = 200.0, io_step: int | None = None,
        **watch_kw):
    """:func:`train` inside ``nbprof.watch(run_dir, **watch_kw)``; returns (watch, stalled batches, I/O step)."""
    import nbprof

    with nbprof.watch(run_dir, **watch_kw) as w:
        stall, io_step = train(steps, every, stall_ms, io_step)
    return w, stall, io_step


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--every", type=int, default=40)
    a = ap.parse_args()
    train(a.steps, a.every)
