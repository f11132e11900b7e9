"""DeepSpeed on CPU, profiled three ways: flops profiler, comms logger and nbprof's torch.profiler window.

Run it plainly and it launches itself on 2 ranks under torchrun (gloo, 127.0.0.1) and prints what nbprof
reads back::

    python examples/train_deepspeed.py --stage 2            # one call: traces + parsed tables + analysis

Or launch the ranks yourself (this file is then each rank's training script)::

    torchrun --nproc_per_node 2 --master_addr 127.0.0.1 --master_port 29561 \\
        examples/train_deepspeed.py --rank-script --stage 2 --out-dir ds_out

The model is a 64-256-256-10 MLP (85 K parameters), micro-batch 8, AdamW (``torch_adam``), ZeRO stage
1, 2 or 3; the training code is ``nbprof/deepspeed/example.py``.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))


def main() -> int:
    if "--rank-script" in sys.argv:
        from nbprof.deepspeed.example import main as rank_main

        return rank_main([a for a in sys.argv[1:] if a != "--rank-script"])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stage", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--start-step", type=int, default=2)
    p.add_argument("--end-step", type=int, default=4)
    p.add_argument("--out-dir", default=None, help="new or empty directory (default: a temporary one)")
    p.add_argument("--comms-verbose", action="store_true")
    args = p.parse_args()

    import pandas as pd

    from nbprof.deepspeed import run_example

    pd.set_option("display.width", 200)
    run = run_example(args.stage, steps=args.steps, start_step=args.start_step, end_step=args.end_step,
                      out_dir=args.out_dir, comms_verbose=args.comms_verbose)
    print(f"ZeRO-{run.stage}: traces in {run.out_dir}")
    for t in run.traces:
        print("  ", t.name)
    if run.flops is not None:
        print("\nflops profiler (rank 0, step", run.flops.step, "):")
        print(run.flops.summary[["key", "text", "value", "unit", "flag"]].to_string(index=False))
        if len(run.flops.quirks):
            print(run.flops.quirks[["kind", "message"]].to_string(index=False))
    print("\ncomms logger (rank 0):")
    print(run.comms.summary.drop(columns=["rank", "table"]).to_string(index=False))
    rep = run.report()
    print("\ncollectives per rank (nccl-tests bandwidth, bytes/s):")
    print(rep.summary.to_string(index=False))
    print("\ncompute/communication overlap per rank:")
    print(rep.overlap.to_string(index=False))
    print("\nskew:")
    print(rep.skew.to_string(index=False))
    print("\nZeRO pattern:", rep.zero)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
