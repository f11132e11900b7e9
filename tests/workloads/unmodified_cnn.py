"""A small CNN whose ``Dataset.__getitem__`` is slow (a sleep per sample, like decoding images from a slow
disk) -- an *unmodified* script: no nbprof import, no profiler code.

``python unmodified_cnn.py [--steps N] [--sleep-ms MS]``; profiled by ``nbprof report --script``.
"""

import argparse
import time

import torch
from torch import nn


class SlowImages(torch.utils.data.Dataset):
    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), i % 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--sleep-ms", type=float, default=3.0)
    a = ap.parse_args()
    torch.manual_seed(0)
    batch = 8
    loader = torch.utils.data.DataLoader(SlowImages(a.steps * batch, a.sleep_ms / 1000), batch_size=batch)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
