# Case study: the DataLoader stall, on real data.
# Source of notebooks/case_study_dataloader.ipynb: edit here, then run `python scripts/make_notebooks.py`.

# %% [markdown] id="291f252c"
# # Case study — the DataLoader stall, on real data
#
# The anecdote: *the GPU sat idle because the DataLoader thread was preprocessing on the CPU; raising
# `num_workers` (and `prefetch_factor`) fixed it.* Here it is on three sets of real profiles:
#
# 1. the two **V100 ResNet-50** traces published with the TensorBoard profiler plugin (`num_workers=0` vs `4`);
# 2. the example CNN on an **NVIDIA H200** (0.3 ms of Python preprocessing per sample, `num_workers=0` vs `4`),
#    profiled for this project (`scripts/gpu_capture.py`);
# 3. the same experiment **live on this machine's CPU** — a sweep over `num_workers`, `prefetch_factor` and the
#    preprocessing cost.

# %% id="238af5cd" tags=["parameters"]
sweep_steps = 6
sweep_workers = [0, 2]
sweep_prefetch = [2]
sweep_preprocess_ms = [0.0, 0.3]

# %% id="2c31a867"
from pathlib import Path
import pandas as pd
import nbprof
from nbprof.report import NotebookInputs
inputs = NotebookInputs(False)  # paths of the parameters (one helper for every notebook)
ROOT, CORPUS, resolve, param = inputs.root, inputs.corpus, inputs.resolve, inputs.param
pd.set_option("display.max_colwidth", 80)
# %% id="3a759130"
from nbprof.analysis import steps, utilization, advisor
def side_by_side(a, b, labels):
    rows = {}
    for lab, t in zip(labels, (a, b)):
        bd = steps.step_breakdown(t)
        r = steps.breakdown_ratios(bd)
        r["avg step (ms)"] = bd["step_ns"].mean() / 1e6
        if t.has_device:
            u = utilization.gpu_utilization(t)
            r["GPU utilisation"] = float(u["utilization_ratio"].mean())
        rows[lab] = r
    return pd.DataFrame(rows)

# %% [markdown] id="06c4f377"
# ## 1. V100 ResNet-50 (TensorBoard plugin samples)

# %% id="17e64cd8"
base = CORPUS / "pytorch__kineto/tb_plugin/samples"
if base.is_dir():
    r0 = nbprof.load(next((base / "resnet50_num_workers_0").glob("*.pt.trace.json.gz")))
    r4 = nbprof.load(next((base / "resnet50_num_workers_4").glob("*.pt.trace.json.gz")))
    display(side_by_side(r0, r4, ["num_workers=0", "num_workers=4"]).round(3))
    display(advisor.findings_frame(advisor.advise(r0)))
else:
    print("Skipped: ../shared/corpus is not on this machine (the V100 traces are public: pytorch/kineto tb_plugin/samples).")

# %% [markdown] id="bb2f4eb8"
# ## 2. H200, example CNN with Python preprocessing

# %% id="e1b47bd0"
h0 = nbprof.load(ROOT / "data/gpu/cnn_nw0_prep.pt.trace.json.gz")
h4 = nbprof.load(ROOT / "data/gpu/cnn_nw4_prep.pt.trace.json.gz")
display(side_by_side(h0, h4, ["num_workers=0", "num_workers=4"]).round(3))
display(utilization.idle_breakdown(h0))

# %% [markdown] id="4c27cbac"
# With `num_workers=0` the GPU waits on the host (idle time is *host wait*) while `__getitem__` runs in
# the training process; with 4 workers the batches are ready when the step starts.

# %% [markdown] id="dea5482f"
# ## 3. Live on this machine

# %% id="9ace1e19"
import itertools
import subprocess
import sys
import tempfile
rows = []
tmp = Path(tempfile.mkdtemp(prefix="nbprof_sweep_"))
for nw, pf, prep in itertools.product(sweep_workers, sweep_prefetch, sweep_preprocess_ms):
    out = tmp / f"nw{nw}_pf{pf}_prep{prep}.pt.trace.json.gz"
    argv = [sys.executable, str(ROOT / "examples/train_cnn.py"), "--steps", str(sweep_steps), "--num-workers", str(nw),
            "--preprocess-ms", str(prep), "--profile", str(out)] + (["--prefetch-factor", str(pf)] if nw else [])
    subprocess.run(argv, check=True, capture_output=True)
    t = nbprof.load(out)
    bd = steps.step_breakdown(t)
    r = steps.breakdown_ratios(bd)
    rows.append({"num_workers": nw, "prefetch_factor": pf if nw else None, "preprocess_ms": prep,
                 "avg step (ms)": bd["step_ns"].mean() / 1e6, "DataLoader share": r.get("dataloader_ratio", 0.0)})
sweep = pd.DataFrame(rows)
display(sweep.round(3))
