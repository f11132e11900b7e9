"""A tiny DeepSpeed training run, profiled three ways (run under torchrun or the deepspeed launcher).

Per rank: DeepSpeed's flops profiler (rank 0 writes ``flops_rank0.txt``), comms logger (table printed by
rank 0 at the end; each rank also writes its raw counts to ``rank{R}.comms.json``), wall-clock breakdown,
and nbprof's torch.profiler window (``rank{R}.steps{S}-{E}.pt.trace.json.gz``).

    torchrun --nproc_per_node 2 --master_addr 127.0.0.1 --master_port 29561 \\
        -m nbprof.deepspeed.example --stage 2 --out-dir ds_out

On CPU the comm backend is gloo and the optimizer ``torch_adam`` (no C++ op builds); DeepSpeed's 140 s
shared-memory op build is skipped (../shared/notes/feasibility.md §3) unless ``--build-shm``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any


def _comms_counts() -> dict[str, int]:
    import deepspeed.comm as dist

    cl = getattr(dist, "comms_logger", None)
    d = getattr(cl, "comms_dict", {}) or {}
    return {op: int(sum(v[0] for v in sizes.values())) for op, sizes in d.items()}


def main(argv: list[str] | None = None) -> int:
    """Run the example; see the module docstring. Returns 0."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stage", default="2", help="ZeRO stage 0-3, or several separated by commas (one launch)")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--start-step", type=int, default=2, help="first profiled global step")
    p.add_argument("--end-step", type=int, default=4, help="end of the window (exclusive)")
    p.add_argument("--out-dir", default="ds_out")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--comms-verbose", action="store_true", help="per-op comms lines (DeepSpeed logger at INFO)")
    p.add_argument("--profile-memory", action="store_true")
    p.add_argument("--build-shm", action="store_true", help="let DeepSpeed JIT-build its shm comm op (~140 s)")
    p.add_argument("--local_rank", type=int, default=-1, help=argparse.SUPPRESS)  # deepspeed launcher
    args = p.parse_args(argv)

    import deepspeed
    import deepspeed.comm as dist
    import torch

    if not args.build_shm and "deepspeed.comm.torch" in sys.modules:
        # `import deepspeed.comm.torch as m` binds torch itself (name clash): go through sys.modules
        comm_torch: Any = sys.modules["deepspeed.comm.torch"]
        comm_torch.build_shm_op = lambda: None
    os.makedirs(args.out_dir, exist_ok=True)
    deepspeed.init_distributed(dist_backend="gloo" if not torch.cuda.is_available() else None)
    rank, world = dist.get_rank(), dist.get_world_size()

    try:
        stages = [int(x) for x in str(args.stage).split(",") if x.strip()]
    except ValueError:
        p.error(f"--stage takes stage numbers separated by commas, got {args.stage!r}")
    for stage in stages:
        out = os.path.join(args.out_dir, f"zero{stage}") if len(stages) > 1 else args.out_dir
        if rank == 0:
            print(f"=== nbprof zero stage {stage} ===", flush=True)
        _train_one(args, stage, out, rank, world)
    return 0


def _train_one(args: argparse.Namespace, stage: int, out_dir: str, rank: int, world: int) -> None:
    import deepspeed
    import deepspeed.comm as dist
    import torch
    from torch import nn

    from nbprof.deepspeed.attach import attach
    from nbprof.deepspeed.config import profiling_config

    os.makedirs(out_dir, exist_ok=True)
    cl = getattr(dist, "comms_logger", None)
    if cl is not None and getattr(cl, "comms_dict", None):
        cl.comms_dict.clear()  # one comms table per stage when several run in one launch
    prof_cfg = profiling_config(
        args.start_step, args.end_step, flops_output_file=os.path.join(out_dir, "flops_rank0.txt"),
        comms_verbose=args.comms_verbose, profile_memory=args.profile_memory, out_dir=out_dir,
    )
    base = {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}},
        "zero_optimization": {"stage": stage},
    }
    ds_config = prof_cfg.apply(base)

    torch.manual_seed(0)
    h = args.hidden
    model = nn.Sequential(nn.Linear(64, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))
    n_params = sum(p.numel() for p in model.parameters())
    engine, _opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
    window = attach(engine, **prof_cfg.window.attach_kwargs())
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1234 + rank)
    counts_at: dict[int, dict[str, int]] = {}
    t0 = time.perf_counter()
    for _ in range(args.steps):
        g = int(engine.global_steps)
        if g in (args.start_step, args.end_step):
            counts_at[g] = _comms_counts()
        x = torch.randn(args.micro_batch, 64, generator=gen)
        y = torch.randint(0, 10, (args.micro_batch,), generator=gen)
        loss = loss_fn(engine(x), y)
        engine.backward(loss)
        engine.step()
        if rank == 0:
            print(f"step {g} loss {loss.item():.4f}", flush=True)
    if int(engine.global_steps) == args.end_step and args.end_step not in counts_at:
        counts_at[args.end_step] = _comms_counts()
    train_s = time.perf_counter() - t0
    traces = window.close()
    total = _comms_counts()
    start_c = counts_at.get(args.start_step, {})
    end_c = counts_at.get(args.end_step, total)
    info = {
        "rank": rank,
        "world_size": world,
        "zero_stage": int(engine.zero_optimization_stage()),
        "optimizer": type(engine.optimizer).__name__,
        "backend": str(torch.distributed.get_backend()),
        "model_params": int(n_params),
        "steps": args.steps,
        "window": [args.start_step, args.end_step],
        "traces": [os.path.basename(t) for t in traces],
        "comms_total": total,
        "comms_window": {k: end_c.get(k, 0) - start_c.get(k, 0) for k in end_c if end_c.get(k, 0) - start_c.get(k, 0)},
        "train_s": train_s,
    }
    with open(os.path.join(out_dir, f"rank{rank}.comms.json"), "w") as f:
        json.dump(info, f, indent=1)
    dist.log_summary()
    if hasattr(engine, "destroy"):
        engine.destroy()


if __name__ == "__main__":
    raise SystemExit(main())
