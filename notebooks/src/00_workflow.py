# The workflow driver: runs steps 1-4 with papermill on the same artefacts.
# Source of notebooks/00_workflow.ipynb: edit here, then run `python scripts/make_notebooks.py`.

# %% [markdown] id="fcac6caa"
# # nbprof — the four-step profiling workflow
#
# 1. **System view** (Nsight Systems): CPU-, GPU- or I/O-bound? → `01_system_nsys.ipynb`
# 2. **Operators and kernels** (PyTorch Profiler): which op, which shape, which kernel? → `02_operators_pytorch.ipynb`
# 3. **Visualise and compare** (TensorBoard): did the fix help? → `03_visualize_tensorboard.ipynb`
# 4. **Distributed** (DeepSpeed): collectives, overlap, stragglers, ZeRO memory → `04_distributed_deepspeed.ipynb`
#
# This driver runs the four notebooks with papermill on the same artefacts and links the executed copies.
# From a terminal, `nbprof report --script examples/train_cnn.py` does the same and writes one HTML page.
# On a machine without a GPU every step still runs; GPU-only numbers are marked as not applicable.

# %% id="6547cbec" tags=["parameters"]
# Parameters (papermill): artefacts of one training job. Empty strings mean "not available".
trace = ""              # Kineto trace (torch.profiler), .json or .json.gz
compare_trace = ""      # optional second trace ("after the fix")
nsys_report = ""        # .nsys-rep or .sqlite from Nsight Systems
logdir = ""             # TensorBoard logdir with tensorboard_trace_handler runs
ds_log = ""             # DeepSpeed launcher/torchrun log (flops profiler, comms logger)
ds_traces = []          # per-rank traces of a distributed job
use_examples = True     # fill what is missing with bundled/corpus examples (teaching); reports set False
static_views = False    # views as static components (nbprof report sets True; its page loads BokehJS once)
trace_cache = ""        # `trace` as loaded by nbprof report (it loads each input once and hands it over)
compare_cache = ""      # the same for `compare_trace`
merged_cache = ""       # `nsys_report` and `trace` merged once by nbprof report (one run, two sources)
out_dir = "results/workflow"

# %% id="fbf76bb5"
import pandas as pd
from nbprof.report import NotebookInputs
inputs = NotebookInputs(use_examples)  # paths of the parameters (one helper for every notebook)
ROOT, CORPUS, resolve, param = inputs.root, inputs.corpus, inputs.resolve, inputs.param
pd.set_option("display.max_colwidth", 80)
# %% id="fa90e9f2"
from nbprof.report import Artefacts, build_report
art = Artefacts(trace=param(trace, "trace"), compare_trace=param(compare_trace, "compare_trace"),
                nsys_report=param(nsys_report, "nsys_report"), logdir=resolve(logdir), ds_log=param(ds_log, "ds_log"),
                ds_traces=[resolve(p) for p in ds_traces])
html = build_report(art, resolve(out_dir), progress=False, extra_parameters={"use_examples": use_examples})
print("report:", html)
print("executed notebooks:", sorted(p.name for p in html.parent.glob("*.ipynb")))
