"""Small Transformer language-model step (torch.nn) on synthetic tokens.

Usage::

    python examples/train_transformer.py --steps 5
    python examples/train_transformer.py --steps 5 --profile lm.pt.trace.json.gz
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 512, d_model: int = 128, nhead: int = 4, layers: int = 2, seq: int = 64) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, seq, d_model))
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, batch_first=True, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.lm_head = nn.Linear(d_model, vocab)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1), persistent=False)

    def forward(self, tokens):
        x = self.emb(tokens) * math.sqrt(self.emb.embedding_dim) + self.pos[:, : tokens.shape[1]]
        x = self.encoder(x, mask=self.mask[: tokens.shape[1], : tokens.shape[1]], is_causal=True)
        return self.lm_head(x)


def train(steps: int = 5, batch_size: int = 8, seq: int = 64, vocab: int = 512, device: str = "cpu", profiler=None) -> float:
    """Run ``steps`` next-token-prediction steps on random tokens; returns mean step time in ms."""
    torch.manual_seed(0)
    model = TinyLM(vocab=vocab, seq=seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator().manual_seed(0)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        tokens = torch.randint(0, vocab, (batch_size, seq + 1), generator=g).to(device)
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if profiler is not None:
            profiler.step()
        times.append((time.perf_counter() - t0) * 1000)
    return float(np.mean(times))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--profile", default=None, help="write a Kineto trace (.json or .json.gz)")
    p.add_argument("--profile-memory", action="store_true")
    a = p.parse_args(argv)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    if a.profile:
        from torch.profiler import ProfilerActivity, profile, schedule

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if a.device.startswith("cuda") else [])
        with profile(
            activities=acts,
            schedule=schedule(wait=1, warmup=1, active=max(1, a.steps - 2), repeat=1),
            record_shapes=True,
            profile_memory=a.profile_memory,
            with_flops=True,
            on_trace_ready=lambda prof: prof.export_chrome_trace(a.profile),
        ) as prof:
            ms = train(a.steps, a.batch_size, a.seq, device=a.device, profiler=prof)
        print(f"wrote {a.profile}")
    else:
        ms = train(a.steps, a.batch_size, a.seq, device=a.device)
    print(f"steps={a.steps} mean_step_ms={ms:.2f}")


if __name__ == "__main__":
    main()
