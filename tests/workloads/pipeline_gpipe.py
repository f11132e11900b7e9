"""2-stage GPipe (torch.distributed.pipelining) on CPU/gloo, 4 microbatches, balanced stages.

Each stage is Linear layers plus a fixed cost per microbatch (``--fwd-ms`` in forward, ``--bwd-ms`` in
backward, slept inside an autograd Function): on a shared CPU the matmuls' time varies with the load of
other processes, a slept cost does not, so the stages stay balanced as GPipe's theory assumes.

Run under torchrun: ``python -m torch.distributed.run --nproc_per_node 2 pipeline_gpipe.py OUT_DIR``.
Writes ``OUT_DIR/rank{R}.pt.trace.json`` (torch.profiler, ``--steps`` active steps after one warmup)."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
from torch.profiler import ProfilerActivity, profile, schedule

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--microbatches", type=int, default=4)
p.add_argument("--steps", type=int, default=3)
p.add_argument("--hidden", type=int, default=64)
p.add_argument("--layers", type=int, default=2)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--fwd-ms", type=float, default=80.0)
p.add_argument("--bwd-ms", type=float, default=160.0)
a = p.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)


class FixedCost(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        time.sleep(a.fwd_ms / 1e3)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        time.sleep(a.bwd_ms / 1e3)
        return g


class Cost(torch.nn.Module):
    def forward(self, x):
        return FixedCost.apply(x)


h = a.hidden
layers: list = []
for _ in range(a.layers):
    layers += [torch.nn.Linear(h, h), torch.nn.Tanh()]
layers.append(Cost())  # after a Linear: its input needs a gradient on stage 0 too, so backward runs it
block = torch.nn.Sequential(*layers)
stage = PipelineStage(block, rank, world, torch.device("cpu"))
sched = ScheduleGPipe(stage, n_microbatches=a.microbatches, loss_fn=lambda y, t: ((y - t) ** 2).mean())
x, target = torch.randn(a.batch, h), torch.randn(a.batch, h)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
             schedule=schedule(wait=0, warmup=1, active=a.steps, repeat=1)) as prof:
    for _ in range(a.steps + 1):
        if rank == 0:
            sched.step(x)
        elif rank == world - 1:
            sched.step(target=target, losses=[])
        else:
            sched.step()
        dist.barrier()
        prof.step()
prof.export_chrome_trace(os.path.join(a.out, f"rank{rank}.pt.trace.json"))
dist.barrier()
dist.destroy_process_group()
