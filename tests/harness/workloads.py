"""CPU before/after workloads of the validation harness (issue 30): each kind of common waste, and its fix.

Run as a script: ``python tests/harness/workloads.py OUT_DIR NAME[:VARIANT] ...`` writes
``OUT_DIR/NAME.VARIANT.pt.trace.json`` (torch.profiler, CPU, ``with_stack=True``, schedule wait=1 warmup=1
active=ACTIVE) for each requested workload variant (``before`` and ``after`` when no variant is named), the two
variants of one workload interleaved round by round so that they see the same machine load.

Every workload trains one small MLP (one thread: the shared 2-core machine) and differs from its fix in one place:

================  ===========================================  ===========================================
name              before                                       after (the fix)
================  ===========================================  ===========================================
dataloader        DataLoader(num_workers=0), 0.5 ms/sample     num_workers=4, persistent, prefetch 4
slow_collate      a collate_fn that sleeps 12 ms per batch     the same collate in 4 DataLoader workers
print_tensor      print(weight) every step (to /dev/null)      no print
logging           logging.info("%s", weight) every step        no logging in the step
checkpoint        torch.save(state_dict) every step            every 100 steps (none in the profiled ones)
optimizer         Adam(foreach=False) over 96 small params     Adam(foreach=True)
python_metrics    a Python sum of .item() per output (640)     the sum kept as a tensor (read every N steps)
tiny_batch        batch 4                                      batch 64 (the same samples: x16 fewer steps)
================  ===========================================  ===========================================
"""

from __future__ import annotations

import io
import logging
import os
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule

ACTIVE = 4
WARM = 2  # wait=1, warmup=1
BATCH = 64
WORKLOADS = ("dataloader", "slow_collate", "print_tensor", "logging", "checkpoint", "optimizer", "python_metrics",
             "tiny_batch")


class _SlowData(torch.utils.data.Dataset):
    """Samples that take ``ms`` of wall time each to produce (a read / decode stand-in: sleeping, so that workers
    overlap it even on a 2-core machine)."""

    def __init__(self, n: int, ms: float):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 256, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.ms = ms

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        if self.ms:
            time.sleep(self.ms / 1e3)
        return self.x[i], self.y[i]


def _slow_collate(batch):
    time.sleep(0.012)
    return torch.utils.data.default_collate(batch)


def _mlp(width: int = 512) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, 10))


def _many_params() -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = [torch.nn.Linear(256, 32)]
    for _ in range(47):
        layers += [torch.nn.Linear(32, 32)]
    layers.append(torch.nn.Linear(32, 10))
    return torch.nn.Sequential(*layers)


def run(name: str, variant: str, out: str) -> None:
    """Profile workload ``name`` in ``variant`` (``before``/``after``) into ``out`` (a Chrome trace)."""
    before = variant == "before"
    batch = 4 if (name == "tiny_batch" and before) else BATCH
    model = _many_params() if name == "optimizer" else _mlp()
    if name == "optimizer":
        opt: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=not before)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    steps = WARM + ACTIVE
    if name in ("dataloader", "slow_collate"):
        ds = _SlowData(batch * (steps + 2), 0.5 if name == "dataloader" else 0.0)
        kw: dict = {}
        if name == "dataloader" and not before:
            kw = {"num_workers": 4, "persistent_workers": True, "prefetch_factor": 4}
        if name == "slow_collate":
            kw = {"collate_fn": _slow_collate}
            if not before:
                kw.update(num_workers=4, persistent_workers=True, prefetch_factor=4)
        data = iter(torch.utils.data.DataLoader(ds, batch_size=batch, **kw))
    else:
        g = torch.Generator().manual_seed(1)
        fixed = [(torch.randn(batch, 256, generator=g), torch.randint(0, 10, (batch,), generator=g))
                 for _ in range(steps)]
        data = iter(fixed)
    log = logging.getLogger(f"nbprof.harness.{os.getpid()}")
    log.handlers[:] = [logging.StreamHandler(io.StringIO())]
    log.setLevel(logging.INFO)
    log.propagate = False
    sink = open(os.devnull, "w")  # noqa: SIM115 -- closed below
    ck = os.path.join(tempfile.mkdtemp(prefix="nbprof_harness_"), "ck.pt")
    weight = model[2].weight if name != "optimizer" else model[1].weight
    with profile(activities=[ProfilerActivity.CPU], with_stack=True,
                 schedule=schedule(wait=1, warmup=1, active=ACTIVE, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
        for i in range(steps):
            x, y = next(data)
            out_ = model(x)
            loss = torch.nn.functional.cross_entropy(out_, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if name == "print_tensor" and before:
                print(weight, file=sink)
            if name == "logging" and before:
                log.info("step %d weight %s", i, weight)
            if name == "checkpoint" and (before or i % 100 == 99):
                torch.save(model.state_dict(), ck)
            if name == "python_metrics":
                # before: one .item() per output value (a host sync each on a GPU); after: kept as a tensor
                d = out_.detach()
                total = sum(v.item() for v in d.flatten()) if before else d.sum()
                del total
            prof.step()
    sink.close()


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    out_dir, rounds, names = argv[0], int(argv[1]), argv[2:]
    for name in names:
        if name not in WORKLOADS:
            raise SystemExit(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    for name in names:
        for r in range(rounds):
            for v in ("before", "after"):
                run(name, v, os.path.join(out_dir, f"{name}.{v}.r{r}.pt.trace.json"))


if __name__ == "__main__":
    main(sys.argv[1:])
