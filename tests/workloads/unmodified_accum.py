"""A small MLP trained with gradient accumulation -- an *unmodified* script: no nbprof import, no profiler code.
Each optimizer step takes ``--accum`` micro-batches from a DataLoader (``loss / accum``, ``backward()`` per
micro-batch, ``optimizer.step()`` after the last), so there are ``accum`` DataLoader batches per step.

``python unmodified_accum.py [--steps N] [--accum K]``; profiled by ``nbprof report --script`` /
``python -m nbprof.capture.script``.
"""

import argparse

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6, help="optimizer steps")
p.add_argument("--accum", type=int, default=4, help="micro-batches per optimizer step")
a = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)
x, y = torch.randn(a.steps * a.accum * 16, 32), torch.randn(a.steps * a.accum * 16, 4)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
opt.zero_grad()
for i, (xb, yb) in enumerate(loader):
    (nn.functional.mse_loss(model(xb), yb) / a.accum).backward()
    if (i + 1) % a.accum == 0:
        opt.step()
        opt.zero_grad()
