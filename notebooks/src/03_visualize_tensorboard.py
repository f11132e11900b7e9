# Step 3: visualise and compare runs (TensorBoard).
# Source of notebooks/03_visualize_tensorboard.ipynb: edit here, then run `python scripts/make_notebooks.py`.

# %% [markdown] id="487678d4"
# # Step 3 — Visualise and compare runs (TensorBoard)
#
# **The question.** Did the change help? Profiling is a before/after loop: keep each run in a TensorBoard
# logdir (`tensorboard_trace_handler("./logs")` layout: `<logdir>/<run>/<worker>.<time>.pt.trace.json`), look
# at them side by side, and check the step time and the breakdown moved the way you expected.
#
# The PyTorch profiler plugin for TensorBoard was removed upstream in 2026; nbprof keeps the workflow: it
# writes runs (traces + scalars TensorBoard shows: step time, breakdown, GPU utilisation, memory peak, top
# operators as text) and reads logdirs back for its own Overview / Operator / Trace / Memory views.
#
# **How to read the comparison.** Negative deltas are improvements (less time). Look first at step time,
# then at the breakdown category you targeted (e.g. DataLoader after raising `num_workers`), then at
# operators/kernels that changed unexpectedly.

# %% id="b5f99419" tags=["parameters"]
# Parameters (papermill): artefacts of one training job. Empty strings mean "not available".
trace = ""              # Kineto trace (torch.profiler), .json or .json.gz
compare_trace = ""      # optional second trace ("after the fix")
nsys_report = ""        # .nsys-rep or .sqlite from Nsight Systems
logdir = ""             # TensorBoard logdir with tensorboard_trace_handler runs
ds_log = ""             # DeepSpeed launcher/torchrun log (flops profiler, comms logger)
ds_traces = []          # per-rank traces of a distributed job
use_examples = True     # fill what is missing with bundled/corpus examples (teaching); reports set False
static_views = False    # views as static components (nbprof report sets True; its page loads BokehJS once)

# %% id="911309b6"
from pathlib import Path
import pandas as pd
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
    return resolve(ex) if ex and Path(resolve(ex)).exists() else ""

# %% id="67fe6461"
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
    print("No TensorBoard logdir and no trace: nothing to show in this step.")

# %% id="da1a26b3"
names = list(dict.fromkeys(runs["run"]))
if len(names) >= 2:
    cmp = tb.compare_runs(logdir, names[0], names[1])
    print(f"comparing {names[0]!r} (a) with {names[1]!r} (b)")
    display(cmp.steps)
    display(cmp.breakdown)
    display(cmp.operators.head(10))
else:
    print("Only one run in the logdir: nothing to compare yet. Write a second run after your change.")

# %% [markdown] id="b0ed5889"
# ### The views of each run

# %% id="4d04773b"
for name in names[:2]:
    tr = tb.load_run(logdir, name)
    print(name, repr(tr))
    show(tr, views=["overview"], static=static_views)

# %% [markdown] id="5a161772"
# ### In a live notebook
# `nbprof.tensorboard.start(logdir)` starts TensorBoard on 127.0.0.1 and embeds it; the scalars of every run
# appear under `nbprof/…`.
