"""2-rank CPU DDP (gloo) job with an injected straggler: rank 1 sleeps ``--sleep`` s before backward.

Run under torchrun: ``python -m torch.distributed.run --nproc_per_node 2 ddp_straggler.py OUT_DIR``.
Writes ``OUT_DIR/rank{R}.pt.trace.json`` (torch.profiler, 4 active steps) and ``OUT_DIR/rank{R}.backward.json``:
the wall clock (``time.time_ns``, the clock Kineto's ``baseTimeNanoseconds`` is on) when each step called
backward -- an independent record of how late rank 1 really was (the sleep plus any scheduling delay)."""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--sleep", type=float, default=0.05)
p.add_argument("--steps", type=int, default=4)
a = p.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
called: list = []
with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
             schedule=schedule(wait=0, warmup=1, active=a.steps, repeat=1)) as prof:
    for _ in range(a.steps + 1):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if rank == 1:
            time.sleep(a.sleep)
        called.append(time.time_ns())
        loss.backward()
        opt.step()
        opt.zero_grad()
        prof.step()
prof.export_chrome_trace(os.path.join(a.out, f"rank{rank}.pt.trace.json"))
with open(os.path.join(a.out, f"rank{rank}.backward.json"), "w") as f:
    json.dump(called[1:], f)  # the profiled steps (after the warmup step)
dist.barrier()
dist.destroy_process_group()
