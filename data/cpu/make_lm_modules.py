"""CPU profile of the Transformer LM example recorded with ``with_modules=True`` (plus stacks and shapes).

The oracle trace of ``tests/test_analysis_modules.py`` (nbprof's Module view against torch-tb-profiler
0.4.3's ``module_op.py``). Made with torch 2.13.0+cpu from the repository root:
``python data/cpu/make_lm_modules.py data/cpu/lm_modules.pt.trace.json.gz``.
"""
import gzip
import os
import shutil
import sys

sys.path.insert(0, "examples")
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from train_transformer import train

torch.manual_seed(0)
torch.set_num_threads(1)
out = sys.argv[1]
with profile(activities=[ProfilerActivity.CPU], with_modules=True, with_stack=True, record_shapes=True,
             schedule=schedule(wait=1, warmup=1, active=3, repeat=1)) as prof:
    train(5, profiler=prof)
raw = out[:-3] if out.endswith(".gz") else out
prof.export_chrome_trace(raw)
if out.endswith(".gz"):
    with open(raw, "rb") as f, gzip.open(out, "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)
print("wrote", out)
