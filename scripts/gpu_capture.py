"""Generate the small real GPU test inputs committed under data/gpu/ (run on a CUDA machine).

    python scripts/gpu_capture.py OUTDIR

Writes (all small):
  cnn_nw0_prep.pt.trace.json.gz   CNN, num_workers=0, 0.3 ms/sample CPU preprocessing (data stall)
  cnn_nw4_prep.pt.trace.json.gz   same with num_workers=4 (stall hidden)
  lm_mem.pt.trace.json.gz         Transformer LM, record_shapes + profile_memory + with_stack + flops
  ddp_nccl_rank0.pt.trace.json.gz CNN under DDP (NCCL, world_size 1): NCCL kernels + distributedInfo
  lm_leak_snapshot.pickle         CUDA memory snapshot (protocol 4) of LM steps with a deliberate leak
  lm_memory_timeline.raw.json.gz  export_memory_timeline raw rows for the LM
  env.json                        torch/CUDA/GPU versions
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import train_cnn
import train_transformer
from torch.profiler import ProfilerActivity, profile, schedule

out = sys.argv[1] if len(sys.argv) > 1 else "gpu_out"
os.makedirs(out, exist_ok=True)
dev = "cuda" if torch.cuda.is_available() else "cpu"
acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
log = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"}


def t(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def prof_cnn(path, nw, prep, steps=8):
    with profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=steps - 2), record_shapes=True,
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as p:
        ms = train_cnn.train(steps, 64, nw, 2 if nw else None, prep, dev, p)
    log[os.path.basename(path)] = {"mean_step_ms": ms, "num_workers": nw, "preprocess_ms": prep}
    t(f"{path}: {ms:.1f} ms/step")


try:
    prof_cnn(os.path.join(out, "cnn_nw0_prep.pt.trace.json.gz"), 0, 0.3)
    prof_cnn(os.path.join(out, "cnn_nw4_prep.pt.trace.json.gz"), 4, 0.3)
except Exception as e:  # keep going: each artefact is independent
    t(f"cnn failed: {e!r}")

try:
    path = os.path.join(out, "lm_mem.pt.trace.json.gz")
    with profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=3), record_shapes=True, profile_memory=True,
                 with_stack=True, with_flops=True, with_modules=True,
                 experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as p:
        ms = train_transformer.train(5, 8, 64, device=dev, profiler=p)
    try:
        p.export_memory_timeline(os.path.join(out, "lm_memory_timeline.raw.json.gz"), device=f"{dev}:0" if dev == "cuda" else "cpu")
    except Exception as e:
        t(f"memory timeline failed: {e!r}")
    log["lm_mem"] = {"mean_step_ms": ms}
    t(f"lm: {ms:.1f} ms/step")
except Exception as e:
    t(f"lm failed: {e!r}")

if dev == "cuda":
    try:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1)
        torch.manual_seed(0)
        model = DDP(train_cnn.SmallCNN().cuda(), device_ids=[0])
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        loader = train_cnn.make_loader(64, 0, None, 0.0)
        it = iter(loader)
        path = os.path.join(out, "ddp_nccl_rank0.pt.trace.json.gz")
        with profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=4), record_shapes=True,
                     on_trace_ready=lambda p: p.export_chrome_trace(path)) as p:
            for _ in range(6):
                x, y = next(it)
                x, y = x.cuda(), y.cuda()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                buf = torch.ones(1 << 20, device="cuda")
                dist.all_reduce(buf)
                dist.all_gather_into_tensor(torch.empty(1 << 20, device="cuda"), buf)
                opt.step()
                p.step()
        dist.destroy_process_group()
        t("ddp done")
    except Exception as e:
        t(f"ddp failed: {e!r}")

    try:
        torch.cuda.memory._record_memory_history(max_entries=50000)
        model = train_transformer.TinyLM().cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
        leak = []
        for _ in range(6):
            tok = torch.randint(0, 512, (8, 65), device="cuda")
            logits = model(tok[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 512), tok[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            leak.append(logits.detach().clone())  # deliberate leak: 8*64*512*4 bytes per step
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        with open(os.path.join(out, "lm_leak_snapshot.pickle"), "wb") as f:
            pickle.dump(snap, f, protocol=4)
        log["snapshot"] = {"leak_tensor_bytes": 8 * 64 * 512 * 4, "leak_steps": 6}
        t("snapshot done")
    except Exception as e:
        t(f"snapshot failed: {e!r}")

with open(os.path.join(out, "env.json"), "w") as f:
    json.dump(log, f, indent=1)
for fn in sorted(os.listdir(out)):
    t(f"{fn} {os.path.getsize(os.path.join(out, fn))} bytes")
