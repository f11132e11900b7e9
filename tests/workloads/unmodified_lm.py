"""A small transformer language model trained on random tokens -- an *unmodified* script: no nbprof import,
no profiler code. Its batches go through a Python ``collate_fn`` (padding variable-length lists).

``python unmodified_lm.py [--steps N]``; profiled by ``nbprof report --script`` / ``python -m nbprof.capture.script``.
"""

import argparse
import random

import torch
from torch import nn


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, vocab, max_len):
        rng = random.Random(0)
        self.rows = [[rng.randrange(vocab) for _ in range(rng.randrange(max_len // 2, max_len + 1))] for _ in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def collate(rows):  # pure Python padding: the host work of this input pipeline
    width = max(len(r) for r in rows)
    padded = [r + [0] * (width - len(r)) for r in rows]
    return torch.tensor(padded, dtype=torch.long)


class LM(nn.Module):
    def __init__(self, vocab, dim, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=2 * dim, batch_first=True)
        self.body = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(dim, vocab)

    def forward(self, x):
        return self.head(self.body(self.emb(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=14)
    a = ap.parse_args()
    torch.manual_seed(0)
    vocab, batch = 128, 4
    loader = torch.utils.data.DataLoader(Tokens(a.steps * batch, vocab, 32), batch_size=batch, collate_fn=collate)
    model = LM(vocab, 32, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    for x in loader:
        logits = model(x[:, :-1])
        loss = loss_fn(logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
