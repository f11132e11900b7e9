# Step 2: operators and kernels (PyTorch Profiler).
# Source of notebooks/02_operators_pytorch.ipynb: edit here, then run `python scripts/make_notebooks.py`.

# %% [markdown] id="fccac689"
# # Step 2 — Which operators and kernels? (PyTorch Profiler)
#
# **The question.** Step 1 said *where* (CPU, GPU, data loading). Now pin it to *which* operator, input shape
# and kernel. This is `torch.profiler` with `record_shapes=True`, `profile_memory=True` and the table of
# `prof.key_averages().table(sort_by="cuda_time_total")` — computed here from the exported trace by nbprof
# (the same numbers as `key_averages`, much faster on long runs).
#
# **How to read the table.** *Self* time excludes child operators, *total* includes them. Host (CPU) time is
# what Python/ATen spend dispatching; device time is the kernels each operator launched (attributed through
# the CUPTI correlation id). A large host total with small device time = CPU overhead (small ops, Python);
# large device time = the math itself — check the kernel table and the input shapes.
#
# **What to try next.** Many tiny kernels → fuse (torch.compile), bigger batches, CUDA graphs. One GEMM
# dominating in fp32 → mixed precision / Tensor Cores. `aten::copy_`/`to` high → data placement, pinned memory.

# %% id="02bfe994" tags=["parameters"]
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
in_report = False       # nbprof report sets True (its page opens with the verdict)

# %% id="52ee1e5a"
import pandas as pd
from nbprof.viz.embed import show
from nbprof.report import NotebookInputs
inputs = NotebookInputs(use_examples)  # paths of the parameters (one helper for every notebook)
ROOT, CORPUS, resolve, param = inputs.root, inputs.corpus, inputs.resolve, inputs.param
pd.set_option("display.max_colwidth", 80)
# %% id="35cfaca0"
from nbprof.analysis import operators, kernels
from nbprof.report import load_input
from nbprof.results.table import table
from nbprof.results.operators_table import operator_table
trace = param(trace, "trace")
tr = load_input(trace, trace_cache) if trace else None
if tr is None:
    print("No PyTorch profiler trace: this step needs one (profile with %%torchprof or torch.profiler).")
else:
    ops = operators.operator_summary(tr)  # once; the views below get it too
    # host operators (cpu_op, record_function ranges) by device time, then self host time; Python frames left out
    display(operator_table(ops))

# %% [markdown] id="29350cc6"
# ### Grouped by input shapes
# The same operator with different shapes can behave very differently (`record_shapes=True`).

# %% id="02b152f1"
if tr is not None:
    by_shape = operators.operator_summary(tr, group_by="shapes")
    by_shape = by_shape[by_shape["cat"].astype(str).isin(["cpu_op", "user_annotation"])
                        & ~by_shape["name"].astype(str).str.startswith("ProfilerStep")]
    by_shape = by_shape.sort_values(["total_device_ns", "total_host_ns"], ascending=False)
    display(table(by_shape, columns=["name", "input_dims", "count", "total_device_ns", "total_host_ns"],
                  max_rows=15, caption="Operators by input shapes"))

# %% [markdown] id="4504086f"
# ### Kernels
# Per kernel name: instances, total/avg/median/min/max time and share of GPU time (the `nsys stats` kernel summary).
# Then the GPU Kernel view (torch-tb-profiler's): per device GPU utilisation, est. SM efficiency, est. achieved
# occupancy and Tensor Core use, and per kernel (and per kernel + launching operator) the mean blocks per SM and
# the mean estimated achieved occupancy: low occupancy on a long kernel = too few blocks or too many registers.

# %% id="1cf0293b"
ks = kernels.kernel_summary(tr) if tr is not None else []
if len(ks):
    display(table(ks, max_rows=15, caption="Kernels"))
    show(tr, views=["kernels"], static=static_views)
else:
    print("No GPU kernels (CPU-only profile or no trace).")

# %% [markdown] id="7e1f0a21"
# ### Compute efficiency against the device's peak
# FLOPs and bytes from the recorded shapes (the formulas of `torch.utils.flop_counter`), achieved TFLOP/s and GB/s
# per kernel against the device's datasheet peak (`nbprof.analysis.efficiency.peaks`), the roofline, and the model
# FLOPs utilisation (MFU) of each step. A big kernel far below its roof is where a better kernel, a better dtype
# (Tensor Cores: bf16/fp16/tf32) or fusion pays.

# %% id="5b3c9d47"
from nbprof.analysis import efficiency
if tr is not None and tr.has_device:
    pk = efficiency.peaks(tr)
    print(f"Device: {pk.device or 'unknown'} ({pk.note})")
    display(table(efficiency.step_mfu(tr, peaks_=pk), {"mfu": "percent", "hfu": "percent"},
                  caption="MFU per step: model (matrix) FLOPs / (step time x peak); HFU counts every modelled op"))
    keff = efficiency.kernel_efficiency(tr, peaks_=pk).sort_values("total_ns", ascending=False)
    display(table(keff, columns=["name", "instances", "total_ns", "achieved_tflops_per_s", "achieved_gb_per_s",
                                 "peak_ratio", "bound"], max_rows=10, caption="Kernels against the roofline"))
    show(tr, views=["roofline"], static=static_views)
else:
    print("No device kernels: efficiency against a device peak needs a GPU trace.")

# %% [markdown] id="0c6e0e9c"
# ### Memory
# With `profile_memory=True` the trace holds every allocation: the peak, the operator active at the peak, the largest allocations.

# %% id="552febd6"
from nbprof.analysis import memory
if tr is not None and len(tr.memory):
    display(table(memory.memory_peak(tr).drop(columns=["device_type"], errors="ignore"), caption="Memory peak"))
    big = memory.largest_allocations(tr, 10)
    never = ~big["freed"].astype(bool)
    big = big.assign(addr=[f"0x{a:x}" if a >= 0 else "" for a in big["addr"]],
                     free_ts_ns=big["free_ts_ns"].where(~never), lifetime_ns=big["lifetime_ns"].where(~never),
                     freed=["yes" if f else "never freed" for f in big["freed"]])
    display(table(big.drop(columns=["device_type"], errors="ignore"), {"addr": "text"}, caption="Largest allocations"))
else:
    print("No [memory] events: profile with profile_memory=True to see allocations.")

# %% id="df5c266b"
if tr is not None:
    show(tr, views=["operators"] + (["memory"] if len(tr.memory) else []), static=static_views)

# %% [markdown] id="7d1c2e90"
# ### Modules and the Python call stack
# With `with_modules=True` (or `with_stack=True`) the Python tracer records every `nn.Module` call: the module
# tree with calls and host/device self/total time (torch-tb-profiler's Module view), and the Python call tree
# that the operator table leaves out.

# %% id="3f8a61b4"
from nbprof.analysis import modules
if tr is not None and modules.has_module_frames(tr):
    display(table(modules.module_tree(tr).drop(columns=["node_id", "parent_id", "path"]).head(30),
                  caption="nn.Module tree (depth-first)"))
    show(tr, views=["modules", "call_stack"], static=static_views)
elif tr is not None:
    print(f"No nn.Module frames: {modules.RECORD_HINT}")

# %% [markdown] id="df52923a"
# ### Profile your own cell
# In a live notebook: `%load_ext nbprof`, then
#
# ```
# %%torchprof --steps 5 --record-shapes --profile-memory --sort-by cuda_time_total
# train_step()
# ```
