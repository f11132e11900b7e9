"""Write the workflow notebooks in notebooks/ (their single source: edit here, then run this script).

    python scripts/make_notebooks.py

Each notebook has one ``parameters`` cell of literals (papermill) and resolves relative paths against the
repository root, so it runs from notebooks/ (nbval, JupyterLab) and from the root (``nbprof report``).
"""

from __future__ import annotations

import os

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "notebooks")

SETUP = '''\
from pathlib import Path
import pandas as pd
import nbprof
from nbprof.viz.embed import show
ROOT = Path.cwd() if (Path.cwd() / "data").is_dir() else Path.cwd().parent
CORPUS = ROOT.parent / "shared" / "corpus"
def resolve(p):
    """A parameter path, relative to the repository root unless absolute; '' stays ''."""
    return str(p if not p or Path(p).is_absolute() else ROOT / p)
pd.set_option("display.max_colwidth", 80)
EXAMPLES = {  # real traces: an H200 run of examples/train_cnn.py (data/gpu) and public corpus files
    "trace": "data/gpu/cnn_nw0_prep.pt.trace.json.gz",
    "compare_trace": "data/gpu/cnn_nw4_prep.pt.trace.json.gz",
    "nsys_report": str(CORPUS / "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"),
    "ds_log": str(ROOT.parent / "shared/notes/samples/ds_launcher_stage2.log"),
}
def param(value, name):
    """The parameter's path, or (use_examples) the example's, or '' when neither exists."""
    if value:
        return resolve(value)
    ex = EXAMPLES.get(name, "") if use_examples else ""
    return resolve(ex) if ex and Path(resolve(ex)).exists() else ""'''


def nb(cells, name):
    n = new_notebook(cells=cells)
    n.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    n.metadata["language_info"] = {"name": "python"}
    path = os.path.join(OUT, name)
    nbformat.write(n, path)
    print("wrote", path)


def params(src):
    c = new_code_cell(src)
    c.metadata["tags"] = ["parameters"]
    return c


md = new_markdown_cell
code = new_code_cell

PARAMS = '''\
# Parameters (papermill): artefacts of one training job. Empty strings mean "not available".
trace = ""              # Kineto trace (torch.profiler), .json or .json.gz
compare_trace = ""      # optional second trace ("after the fix")
nsys_report = ""        # .nsys-rep or .sqlite from Nsight Systems
logdir = ""             # TensorBoard logdir with tensorboard_trace_handler runs
ds_log = ""             # DeepSpeed launcher/torchrun log (flops profiler, comms logger)
ds_traces = []          # per-rank traces of a distributed job
use_examples = True     # fill what is missing with bundled/corpus examples (teaching); reports set False
static_views = False    # views as static components (nbprof report sets True; its page loads BokehJS once)'''

# --------------------------------------------------------------------------- 01
nb01 = [
    md("""# Step 1 — The system view: is the job CPU-, GPU- or I/O-bound?

**The question this step answers.** Before looking at any operator, find out *where the time goes at the
system level*: is the GPU busy, or idle while the CPU prepares the next batch? Is data loading in the
critical path? This is what Nsight Systems is for (`nsys profile -t cuda,nvtx,osrt -o out python train.py`).

**How to read it.**
- *GPU utilisation* — the share of the window in which at least one kernel or copy runs. Below ~50% the GPU
  waits on something.
- *Idle time split* (HTA's definition): **host wait** = the GPU had nothing queued (the CPU was late: data
  loading, Python overhead, synchronisation); **kernel wait** = short gaps between back-to-back kernels
  (launch overhead); **other**.
- *Step breakdown* — per training step, time in Kernel / Memcpy / Memset / Communication / Runtime /
  DataLoader / CPU Exec / Other, counted with the priority of the old TensorBoard plugin's Overview page.

**What to try next** (the decision flow): DataLoader dominates → step 2 confirms which part of loading;
raise `num_workers`, `prefetch_factor`, use `pin_memory`. Host wait with little DataLoader → CPU-side
Python overhead; look at operators (step 2). GPU busy → kernels themselves (step 2, kernel table).
Communication large → step 4."""),
    params(PARAMS),
    code(SETUP),
    md("## The Nsight Systems report (when there is one)"),
    code('''\
nsys_report = param(nsys_report, "nsys_report")
if nsys_report:
    sys_trace = nbprof.load(nsys_report)
    print(repr(sys_trace))
    print(sys_trace.report)
    from nbprof.analysis import nsys_stats, nsys_rules
    # the nsys stats reports (same rows and numbers as `nsys stats`): NVTX ranges, OS runtime, CUDA API, kernels, copies
    for name, df in nsys_stats.summaries(sys_trace).items():
        if len(df):
            print(name)
            display(df.head(10))
    # the nsys analyze expert rules as findings (GPU gaps, low utilisation, synchronous APIs, pageable copies)
    from nbprof.analysis import advisor
    display(advisor.findings_frame(nsys_rules.nsys_findings(sys_trace)))
else:
    sys_trace = None
    print("No Nsight Systems report: the system view below comes from the PyTorch profiler trace.")'''),
    md("## GPU utilisation, idle time and the step breakdown"),
    code('''\
from nbprof.analysis import steps, utilization
trace = param(trace, "trace")
tr = nbprof.load(trace) if trace else sys_trace
if tr is None:
    print("Nothing to analyse: give a trace or an nsys report.")
elif not tr.has_device:
    print("This profile has no GPU activity (CPU-only machine or CPU-only profile): GPU utilisation does "
          "not apply; the step breakdown still shows CPU vs DataLoader time.")
else:
    print(repr(tr))
    display(utilization.gpu_utilization(tr))
    display(utilization.idle_breakdown(tr))'''),
    code('''\
if tr is not None:
    bd = steps.step_breakdown(tr)
    display(bd)
    ratios = steps.breakdown_ratios(bd)
    print("share of step time:")
    print((ratios * 100).round(1).astype(str) + " %")'''),
    md("## Findings"),
    code('''\
from nbprof.analysis import advisor
if tr is not None:
    findings = advisor.advise(tr)
    display(advisor.findings_frame(findings))'''),
    md("## Timeline\nZoom with the mouse wheel or W/S, pan with A/D. In the live notebook, selecting a kernel shows the CPU op that launched it."),
    code('''\
if tr is not None:
    show(tr, views=["overview", "timeline"], static=static_views)'''),
]

# --------------------------------------------------------------------------- 02
nb02 = [
    md("""# Step 2 — Which operators and kernels? (PyTorch Profiler)

**The question.** Step 1 said *where* (CPU, GPU, data loading). Now pin it to *which* operator, input shape
and kernel. This is `torch.profiler` with `record_shapes=True`, `profile_memory=True` and the table of
`prof.key_averages().table(sort_by="cuda_time_total")` — computed here from the exported trace by nbprof
(the same numbers as `key_averages`, much faster on long runs).

**How to read the table.** *Self* time excludes child operators, *total* includes them. Host (CPU) time is
what Python/ATen spend dispatching; device time is the kernels each operator launched (attributed through
the CUPTI correlation id). A large host total with small device time = CPU overhead (small ops, Python);
large device time = the math itself — check the kernel table and the input shapes.

**What to try next.** Many tiny kernels → fuse (torch.compile), bigger batches, CUDA graphs. One GEMM
dominating in fp32 → mixed precision / Tensor Cores. `aten::copy_`/`to` high → data placement, pinned memory."""),
    params(PARAMS),
    code(SETUP),
    code('''\
from nbprof.analysis import operators, kernels
trace = param(trace, "trace")
tr = nbprof.load(trace) if trace else None
if tr is None:
    print("No PyTorch profiler trace: this step needs one (profile with %%torchprof or torch.profiler).")
else:
    print(repr(tr))
    ops = operators.operator_summary(tr)
    cols = ["name", "count", "self_host_ns", "total_host_ns", "self_device_ns", "total_device_ns", "host_mem_bytes", "device_mem_bytes"]
    display(ops[cols].head(20))'''),
    md("### Grouped by input shapes\nThe same operator with different shapes can behave very differently (`record_shapes=True`)."),
    code('''\
if tr is not None:
    by_shape = operators.operator_summary(tr, group_by="shapes")
    display(by_shape[["name", "input_dims", "count", "total_host_ns", "total_device_ns"]].head(15))'''),
    md("### Kernels\nPer kernel name: instances, total/avg/median/min/max time and share of GPU time (the `nsys stats` kernel summary)."),
    code('''\
ks = kernels.kernel_summary(tr) if tr is not None else []
if len(ks):
    display(ks.head(15))
else:
    print("No GPU kernels (CPU-only profile or no trace).")'''),
    md("### Memory\nWith `profile_memory=True` the trace holds every allocation: the peak, the operator active at the peak, the largest allocations."),
    code('''\
from nbprof.analysis import memory
if tr is not None and len(tr.memory):
    display(memory.memory_peak(tr))
    display(memory.largest_allocations(tr, 10))
else:
    print("No [memory] events: profile with profile_memory=True to see allocations.")'''),
    code('''\
if tr is not None:
    show(tr, views=["operators", "memory"], static=static_views)'''),
    md("""### Profile your own cell
In a live notebook: `%load_ext nbprof`, then

```
%%torchprof --steps 5 --record-shapes --profile-memory --sort-by cuda_time_total
train_step()
```"""),
]

# --------------------------------------------------------------------------- 03
nb03 = [
    md("""# Step 3 — Visualise and compare runs (TensorBoard)

**The question.** Did the change help? Profiling is a before/after loop: keep each run in a TensorBoard
logdir (`tensorboard_trace_handler("./logs")` layout: `<logdir>/<run>/<worker>.<time>.pt.trace.json`), look
at them side by side, and check the step time and the breakdown moved the way you expected.

The PyTorch profiler plugin for TensorBoard was removed upstream in 2026; nbprof keeps the workflow: it
writes runs (traces + scalars TensorBoard shows: step time, breakdown, GPU utilisation, memory peak, top
operators as text) and reads logdirs back for its own Overview / Operator / Trace / Memory views.

**How to read the comparison.** Negative deltas are improvements (less time). Look first at step time,
then at the breakdown category you targeted (e.g. DataLoader after raising `num_workers`), then at
operators/kernels that changed unexpectedly."""),
    params(PARAMS),
    code(SETUP),
    code('''\
import tempfile
from nbprof import tensorboard as tb
logdir = resolve(logdir)
trace, compare_trace = param(trace, "trace"), param(compare_trace, "compare_trace")
if not logdir and trace:
    # no logdir given: make one from the trace(s): "before" and "after"
    logdir = tempfile.mkdtemp(prefix="nbprof_tb_")
    tb.write_run(trace, logdir, run="before")
    if compare_trace:
        tb.write_run(compare_trace, logdir, run="after")
runs = tb.discover(logdir) if logdir else pd.DataFrame(columns=["run"])
if logdir:
    display(runs)
else:
    print("No TensorBoard logdir and no trace: nothing to show in this step.")'''),
    code('''\
from nbprof.analysis import compare, steps
names = list(dict.fromkeys(runs["run"]))
if len(names) >= 2:
    cmp = tb.compare_runs(logdir, names[0], names[1])
    print(f"comparing {names[0]!r} (a) with {names[1]!r} (b)")
    display(cmp.steps)
    display(cmp.breakdown)
    display(cmp.operators.head(10))
else:
    print("Only one run in the logdir: nothing to compare yet. Write a second run after your change.")'''),
    md("### The views of each run"),
    code('''\
for name in names[:2]:
    tr = tb.load_run(logdir, name)
    print(name, repr(tr))
    show(tr, views=["overview"], static=static_views)'''),
    md("""### In a live notebook
`nbprof.tensorboard.start(logdir)` starts TensorBoard on 127.0.0.1 and embeds it; the scalars of every run
appear under `nbprof/…`."""),
]

# --------------------------------------------------------------------------- 04
nb04 = [
    md("""# Step 4 — Distributed jobs (DeepSpeed)

**The question.** In data-parallel / ZeRO training, is communication efficient and hidden behind compute?
Which rank is the straggler everybody waits for?

**How to read it.**
- *Collectives* — per collective (all_reduce, all_gather, reduce_scatter…): calls, time, bytes, algorithm
  bandwidth and **bus bandwidth** (the nccl-tests definition: algbw × 2(n−1)/n for all_reduce, × (n−1)/n for
  all_gather / reduce_scatter). Bus bandwidth far below the link's peak = small messages or contention.
- *Overlap* — the share of communication time hidden under compute; *exposed* communication adds directly to
  step time.
- *Skew* — per-rank step and collective times; one slow rank makes all others wait in the next collective.
- *ZeRO pattern* — stage 1/2 reduce-scatter/all-reduce gradients; stage 3 also all-gathers parameters every
  forward/backward (more communication, less memory).
- DeepSpeed's own reports: the **flops profiler** (params, MACs, latency per module) and the **comms logger**
  (per-op message sizes and bandwidth).

**What to try next.** Exposed communication → bigger buckets (`reduce_bucket_size`), `overlap_comm: true`,
gradient accumulation. Low bus bandwidth with small messages → fewer, larger collectives. A straggler →
check its data loading and its host."""),
    params(PARAMS),
    code(SETUP),
    code('''\
from nbprof.analysis import distributed
paths = [resolve(p) for p in ds_traces]
if not paths and use_examples and (CORPUS / "facebookresearch__HolisticTraceAnalysis").is_dir():
    base = CORPUS / "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter"
    paths = [str(base / "sampled_rank-0.json.gz"), str(base / "sampled_rank-1.json.gz")]
    print("No per-rank traces given: using two ranks of a real 128-rank NCCL job from the corpus.")
if paths:
    from nbprof.scale import load_ranks
    job = load_ranks(paths, progress=False)
    print(repr(job))
    traces = list(job.traces())
    rep = distributed.distributed_report(traces)
    display(rep.summary)
    display(rep.overlap)
    display(rep.skew)
    print("ZeRO pattern per rank:", rep.zero)
else:
    print("No distributed traces: this step applies to multi-rank jobs.")'''),
    md("### DeepSpeed's own reports"),
    code('''\
from nbprof import deepspeed as nds
log_path = param(ds_log, "ds_log")
if log_path and not ds_log:
    print("No DeepSpeed log given: using a real 2-rank ZeRO-2 CPU run's log (example).")
if log_path:
    log = nds.parse_log(Path(log_path))
    if log.flops:
        display(log.flops[0].summary)
    display(log.comms.summary)
    display(log.timer_means())
    if len(log.quirks):
        print("quirks flagged while parsing:")
        display(log.quirks)
else:
    print("No DeepSpeed log: this step applies to DeepSpeed jobs.")'''),
]

# --------------------------------------------------------------------------- 00
nb00 = [
    md("""# nbprof — the four-step profiling workflow

1. **System view** (Nsight Systems): CPU-, GPU- or I/O-bound? → `01_system_nsys.ipynb`
2. **Operators and kernels** (PyTorch Profiler): which op, which shape, which kernel? → `02_operators_pytorch.ipynb`
3. **Visualise and compare** (TensorBoard): did the fix help? → `03_visualize_tensorboard.ipynb`
4. **Distributed** (DeepSpeed): collectives, overlap, stragglers, ZeRO memory → `04_distributed_deepspeed.ipynb`

This driver runs the four notebooks with papermill on the same artefacts and links the executed copies.
From a terminal, `nbprof report --script examples/train_cnn.py` does the same and writes one HTML page.
On a machine without a GPU every step still runs; GPU-only numbers are marked as not applicable."""),
    params(PARAMS + '\nout_dir = "results/workflow"'),
    code(SETUP),
    code('''\
from nbprof.report import Artefacts, build_report
art = Artefacts(trace=param(trace, "trace"), compare_trace=param(compare_trace, "compare_trace"),
                nsys_report=param(nsys_report, "nsys_report"), logdir=resolve(logdir), ds_log=param(ds_log, "ds_log"),
                ds_traces=[resolve(p) for p in ds_traces])
html = build_report(art, resolve(out_dir), progress=False, extra_parameters={"use_examples": use_examples})
print("report:", html)
print("executed notebooks:", sorted(p.name for p in html.parent.glob("*.ipynb")))'''),
]

# --------------------------------------------------------------------------- case study
case = [
    md("""# Case study — the DataLoader stall, on real data

The anecdote: *the GPU sat idle because the DataLoader thread was preprocessing on the CPU; raising
`num_workers` (and `prefetch_factor`) fixed it.* Here it is on three sets of real profiles:

1. the two **V100 ResNet-50** traces published with the TensorBoard profiler plugin (`num_workers=0` vs `4`);
2. the example CNN on an **NVIDIA H200** (0.3 ms of Python preprocessing per sample, `num_workers=0` vs `4`),
   profiled for this project (`scripts/gpu_capture.py`);
3. the same experiment **live on this machine's CPU** — a sweep over `num_workers`, `prefetch_factor` and the
   preprocessing cost."""),
    params('''\
sweep_steps = 6
sweep_workers = [0, 2]
sweep_prefetch = [2]
sweep_preprocess_ms = [0.0, 0.3]'''),
    code(SETUP),
    code('''\
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
    return pd.DataFrame(rows)'''),
    md("## 1. V100 ResNet-50 (TensorBoard plugin samples)"),
    code('''\
base = CORPUS / "pytorch__kineto/tb_plugin/samples"
if base.is_dir():
    r0 = nbprof.load(next((base / "resnet50_num_workers_0").glob("*.pt.trace.json.gz")))
    r4 = nbprof.load(next((base / "resnet50_num_workers_4").glob("*.pt.trace.json.gz")))
    display(side_by_side(r0, r4, ["num_workers=0", "num_workers=4"]).round(3))
    display(advisor.findings_frame(advisor.advise(r0)))
else:
    print("Skipped: ../shared/corpus is not on this machine (the V100 traces are public: pytorch/kineto tb_plugin/samples).")'''),
    md("## 2. H200, example CNN with Python preprocessing"),
    code('''\
h0 = nbprof.load(ROOT / "data/gpu/cnn_nw0_prep.pt.trace.json.gz")
h4 = nbprof.load(ROOT / "data/gpu/cnn_nw4_prep.pt.trace.json.gz")
display(side_by_side(h0, h4, ["num_workers=0", "num_workers=4"]).round(3))
display(utilization.idle_breakdown(h0))'''),
    md("""With `num_workers=0` the GPU waits on the host (idle time is *host wait*) while `__getitem__` runs in
the training process; with 4 workers the batches are ready when the step starts."""),
    md("## 3. Live on this machine"),
    code('''\
import itertools, subprocess, sys, tempfile
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
display(sweep.round(3))'''),
]

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    nb(nb00, "00_workflow.ipynb")
    nb(nb01, "01_system_nsys.ipynb")
    nb(nb02, "02_operators_pytorch.ipynb")
    nb(nb03, "03_visualize_tensorboard.ipynb")
    nb(nb04, "04_distributed_deepspeed.ipynb")
    nb(case, "case_study_dataloader.ipynb")
