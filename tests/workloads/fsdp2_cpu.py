"""2-rank FSDP2 (``fully_shard``) on CPU/gloo: 3 Linear layers, each its own FSDP unit, plus the root.

Run under torchrun: ``python -m torch.distributed.run --nproc_per_node 2 fsdp2_cpu.py OUT_DIR``.
Writes ``OUT_DIR/rank{R}.pt.trace.json`` (torch.profiler, ``--steps`` active steps after one warmup)."""

import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.profiler import ProfilerActivity, profile, schedule

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--steps", type=int, default=3)
p.add_argument("--layers", type=int, default=3)
a = p.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(a.layers)])
for layer in model:
    fully_shard(layer)
fully_shard(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 128)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
             schedule=schedule(wait=0, warmup=1, active=a.steps, repeat=1)) as prof:
    for _ in range(a.steps + 1):
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        prof.step()
prof.export_chrome_trace(os.path.join(a.out, f"rank{rank}.pt.trace.json"))
dist.barrier()
dist.destroy_process_group()
