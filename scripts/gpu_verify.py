"""Check nbprof's CUDA paths on a GPU machine and write the small real outputs used as test data.

    python scripts/gpu_verify.py OUTDIR

Runs examples/train_transformer.py's model for 6 steps under ``nbprof.profile("cpu,cuda",
memory_snapshot=..., profile_memory=True, record_shapes=True)``, with a deliberate leak (a logits copy
kept every step, the line marked LEAK below), then prints what nbprof's analyses say. Writes
``torchprof_lm.pt.trace.json.gz`` and ``torchprof_lm_snapshot.pickle`` (made by nbprof's own capture).
"""

from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import train_transformer

import nbprof
from nbprof.analysis import kernels, operators, steps, utilization
from nbprof.analysis import memory_snapshot as ms

out = sys.argv[1] if len(sys.argv) > 1 else "gpu_verify_out"
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
model = train_transformer.TinyLM().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
kept = []
with nbprof.profile("cpu,cuda", memory_snapshot=os.path.join(out, "torchprof_lm_snapshot.pickle"), profile_memory=True,
                    record_shapes=True, trace=os.path.join(out, "torchprof_lm.pt.trace.json.gz"), wait=1, warmup=1,
                    quiet=True) as p:
    for _ in range(6):
        tok = torch.randint(0, 512, (8, 65), device="cuda")
        logits = model(tok[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 512), tok[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        kept.append(logits.detach().clone())  # LEAK: 8*64*512 fp32 = 1 MiB per step
        p.step()
print("notes:", p.notes)
print("activities:", p.activities, "files:", [str(x) for x in p.paths], "snapshot:", p.memory_snapshot)
with open(p.memory_snapshot, "rb") as f:
    head = f.read(2)
print("pickle protocol byte:", head)
snap = nbprof.load(p.memory_snapshot)
print(snap)
print(ms.leak_suspects(snap).drop(columns="stack").head(3).to_string())
pk = ms.snapshot_peak(snap)
print("peak bytes", pk.allocated_bytes)
tr = p.trace
print(repr(tr))
print(kernels.kernel_summary(tr).head(5)[["instances", "total_ns", "gpu_time_ratio"]].to_string())
print(steps.step_breakdown(tr)[["step", "step_ns", "kernel_ns", "runtime_ns", "cpu_exec_ns"]].to_string())
print(utilization.gpu_utilization(tr).to_string())
ops = operators.operator_summary(tr)
print(ops[["name", "count", "self_device_ns", "total_device_ns"]].head(8).to_string())
res = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "kernels": int((tr.events["cat"] == "kernel").sum()),
       "leak_top": str(ms.leak_suspects(snap).iloc[0, 0]), "protocol": head.hex()}
with open(os.path.join(out, "gpu_verify.json"), "w") as f:
    json.dump(res, f, indent=1)
print(res)
