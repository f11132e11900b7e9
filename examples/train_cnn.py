"""Small CNN on scikit-learn's digits (8x8 images) with a real DataLoader.

Reproduces the two DataLoader anecdotes on CPU:

* ``--preprocess-ms`` adds a per-sample cost in ``__getitem__``: with ``--num-workers 0`` it stalls the
  training loop. ``--preprocess-kind cpu`` (default) spends it on the CPU holding the GIL (augmentation done
  in Python); ``--preprocess-kind io`` waits it out (one ``time.sleep`` per batch: a read from disk or network), so
  DataLoader workers overlap it even when every core is busy with other jobs;
* ``--num-workers N --prefetch-factor P``: too little prefetch starves the loop.

Usage::

    python examples/train_cnn.py --steps 20 --num-workers 0 --preprocess-ms 1
    python examples/train_cnn.py --steps 20 --profile out.pt.trace.json.gz

The ``--profile`` option records the steps with torch.profiler (schedule
wait=1, warmup=1, active=steps-2) and writes a Kineto Chrome trace.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def _nvtx_range(message: str, **kw):
    """An NVTX range (nbprof.nvtx) when nbprof is importable, else a no-op context."""
    try:
        from nbprof.nvtx import range as nvtx_range
    except ImportError:
        import contextlib

        return contextlib.nullcontext()
    return nvtx_range(message, **kw)


@contextlib.contextmanager
def _mark(message: str, **kw):
    """The same range seen by both profilers: an NVTX range (Nsight Systems) and a
    ``record_function`` (a Kineto ``user_annotation`` of the same name), so ``nbprof.merge`` can
    align the two clocks on them. Both are cheap no-ops when no profiler is attached."""
    with _nvtx_range(message, **kw), torch.profiler.record_function(message):
        yield


#: what ``--preprocess-ms`` spends: CPU time (busy-wait) or a blocking wait (sleep, like I/O)
PREPROCESS_KINDS = ("cpu", "io")


class Digits(Dataset):
    """scikit-learn's 1797 8x8 digit images, upsampled to 16x16, with a synthetic per-sample cost.

    ``preprocess_kind``: ``"cpu"`` busy-waits ``preprocess_ms`` (CPU work that holds the GIL, like Python
    augmentation), ``"io"`` sleeps it (a blocking read: no CPU used, so workers overlap it on a loaded machine).
    """

    def __init__(self, preprocess_ms: float = 0.0, preprocess_kind: str = "cpu") -> None:
        if preprocess_kind not in PREPROCESS_KINDS:
            raise ValueError(f"preprocess_kind {preprocess_kind!r}: one of {PREPROCESS_KINDS}")
        from sklearn.datasets import load_digits

        d = load_digits()
        x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
        self.x = torch.nn.functional.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False)
        self.y = torch.tensor(d.target, dtype=torch.long)
        self.preprocess_ms = preprocess_ms
        self.preprocess_kind = preprocess_kind

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.__getitems__([i])[0]

    def __getitems__(self, indices: list[int]) -> list:
        """The samples of one batch (the DataLoader's batched fetch): with ``"io"`` one blocking read of the
        whole batch (``len(indices) * preprocess_ms``: one wake-up, as a read of a shard), with ``"cpu"`` the
        per-sample busy-wait."""
        if self.preprocess_ms > 0 and self.preprocess_kind == "io":  # a blocking read: the process sleeps
            time.sleep(len(indices) * self.preprocess_ms / 1000.0)
        out = []
        for i in indices:
            x = self.x[i]
            if self.preprocess_ms > 0 and self.preprocess_kind == "cpu":
                end = time.perf_counter() + self.preprocess_ms / 1000.0  # busy-wait: CPU work holding the GIL
                acc = 0.0
                while time.perf_counter() < end:
                    acc += 1.0
            if i % 2:  # a cheap real augmentation: random flip
                x = torch.flip(x, dims=[2])
            out.append((x, self.y[i]))
        return out


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def make_loader(batch_size: int, num_workers: int, prefetch_factor: int | None, preprocess_ms: float,
                preprocess_kind: str = "cpu") -> DataLoader:
    kw = {}
    if num_workers > 0:
        kw["prefetch_factor"] = prefetch_factor or 2
        kw["persistent_workers"] = True
    return DataLoader(Digits(preprocess_ms, preprocess_kind), batch_size=batch_size, shuffle=True, num_workers=num_workers, **kw)


def train(
    steps: int = 10,
    batch_size: int = 64,
    num_workers: int = 0,
    prefetch_factor: int | None = None,
    preprocess_ms: float = 0.0,
    device: str = "cpu",
    profiler=None,
    step_callback=None,
    preprocess_kind: str = "cpu",
) -> float:
    """Run ``steps`` optimizer steps; returns the mean step time in ms.

    ``profiler``: an active torch.profiler.profile whose ``step()`` is called after each step.
    """
    torch.manual_seed(0)
    model = SmallCNN().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    loader = make_loader(batch_size, num_workers, prefetch_factor, preprocess_ms, preprocess_kind)
    it = iter(loader)
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        # NVTX step range (payload = step number); Kineto's own step range is ProfilerStep#i (profiler.step())
        with _nvtx_range("step", payload=i):
            with _mark("data"):
                try:
                    x, y = next(it)
                except StopIteration:
                    it = iter(loader)
                    x, y = next(it)
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            with _mark("forward"):
                loss = loss_fn(model(x), y)
            with _mark("backward"):
                loss.backward()
            with _mark("optimizer"):
                opt.step()
        if profiler is not None:
            profiler.step()
        if step_callback is not None:
            step_callback()
        times.append((time.perf_counter() - t0) * 1000)
    return float(np.mean(times))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--prefetch-factor", type=int, default=None)
    p.add_argument("--preprocess-ms", type=float, default=0.0, help="synthetic cost per sample (ms)")
    p.add_argument("--preprocess-kind", choices=PREPROCESS_KINDS, default="cpu",
                   help="cpu: busy-wait holding the GIL (Python augmentation); io: sleep (a blocking read)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads (default min(2, cores)); 1 on a machine busy with other jobs, where a "
                        "second OpenMP thread waits for a core at every parallel region")
    p.add_argument("--profile", default=None, help="write a Kineto trace (.json or .json.gz) of the run")
    p.add_argument("--profile-memory", action="store_true")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads if a.threads else max(1, min(2, os.cpu_count() or 1)))
    if a.profile:
        from torch.profiler import ProfilerActivity, profile, schedule

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if a.device.startswith("cuda") else [])
        active = max(1, a.steps - 2)
        with profile(
            activities=acts,
            schedule=schedule(wait=1, warmup=1, active=active, repeat=1),
            record_shapes=True,
            profile_memory=a.profile_memory,
            on_trace_ready=lambda prof: prof.export_chrome_trace(a.profile),
        ) as prof:
            ms = train(a.steps, a.batch_size, a.num_workers, a.prefetch_factor, a.preprocess_ms, a.device, prof,
                       preprocess_kind=a.preprocess_kind)
        print(f"wrote {a.profile}")
    else:
        ms = train(a.steps, a.batch_size, a.num_workers, a.prefetch_factor, a.preprocess_ms, a.device,
                   preprocess_kind=a.preprocess_kind)
    print(f"steps={a.steps} num_workers={a.num_workers} preprocess_ms={a.preprocess_ms} "
          f"preprocess_kind={a.preprocess_kind} mean_step_ms={ms:.2f}")


if __name__ == "__main__":
    main()
