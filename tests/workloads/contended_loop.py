"""A small MLP training loop on one CPU, profiled through nbprof's capture (automatic steps): the CPU-contention
before/after pair (issue 30) runs it with busy processes pinned to the same CPU (before) and without (after).

``python contended_loop.py OUT.pt.trace.json --cpu C [--threads K] [--steps S]``: the process pins itself to CPU ``C``
(before torch starts its threads, which inherit it), then trains ``S`` steps under
``nbprof.capture.torch_profiler.Session`` (``auto_steps``: wait 2, warm-up 1, active 5) with
``torch.set_num_threads(K)``. ``python contended_loop.py --hog --cpu C``: a busy process, pinned to CPU ``C``, that
prints ``ready`` and spins until killed (started by the test, not by the loop: other processes, not children).
"""

from __future__ import annotations

import argparse
import os
import sys


def _hog(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    print("ready", flush=True)
    while True:
        pass


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--cpu", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--hog", action="store_true", help="spin on --cpu until killed")
    a = ap.parse_args(argv)
    if a.hog:
        _hog(a.cpu)
        return 0
    os.sched_setaffinity(0, {a.cpu})
    import torch

    from nbprof.capture.options import ProfileOptions
    from nbprof.capture.torch_profiler import Session

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(128, 256, generator=g), torch.randint(0, 10, (128,), generator=g)
    options = ProfileOptions(activities=("cpu",), trace=a.out, record_shapes=True, quiet=True, wait=2, warmup=1,
                             active=5, auto_steps=True).validated()
    with Session(options):
        for _ in range(a.steps):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
