# Step 1: the system view (Nsight Systems).
# Source of notebooks/01_system_nsys.ipynb: edit here, then run `python scripts/make_notebooks.py`.

# %% [markdown] id="a6a53e01"
# # Step 1 — The system view: is the job CPU-, GPU- or I/O-bound?
#
# **The question this step answers.** Before looking at any operator, find out *where the time goes at the
# system level*: is the GPU busy, or idle while the CPU prepares the next batch? Is data loading in the
# critical path? This is what Nsight Systems is for (`nsys profile -t cuda,nvtx,osrt -o out python train.py`).
#
# **How to read it.**
# - *GPU utilisation* — the share of the window in which at least one kernel or copy runs. Below ~50% the GPU
#   waits on something.
# - *Idle time split* (HTA's definition): **host wait** = the GPU had nothing queued (the CPU was late: data
#   loading, Python overhead, synchronisation); **kernel wait** = short gaps between back-to-back kernels
#   (launch overhead); **other**.
# - *Step breakdown* — per training step, time in Kernel / Memcpy / Memset / Communication / Runtime /
#   DataLoader / CPU Exec / Other, counted with the priority of the old TensorBoard plugin's Overview page.
#
# **What to try next** (the decision flow): DataLoader dominates → step 2 confirms which part of loading;
# raise `num_workers`, `prefetch_factor`, use `pin_memory`. Host wait with little DataLoader → CPU-side
# Python overhead; look at operators (step 2). GPU busy → kernels themselves (step 2, kernel table).
# Communication large → step 4.

# %% id="a34c5ced" tags=["parameters"]
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
in_report = False       # nbprof report sets True: its page opens with the verdict, so this notebook does not repeat it

# %% id="c4706c7a"
import pandas as pd
import nbprof
from nbprof.viz.embed import show
from nbprof.results.table import table, findings_table
from nbprof.report import load_input
from nbprof.report import NotebookInputs
inputs = NotebookInputs(use_examples)  # paths of the parameters (one helper for every notebook)
ROOT, CORPUS, resolve, param = inputs.root, inputs.corpus, inputs.resolve, inputs.param
pd.set_option("display.max_colwidth", 80)
# %% [markdown] id="0c5a3f74"
# ## The Nsight Systems report (when there is one)

# %% id="dc6cba91"
nsys_report = param(nsys_report, "nsys_report")
if nsys_report:
    sys_trace = load_input(nsys_report)  # read once per kernel (the report's verdict cell may have read it)
    from nbprof.analysis import nsys_stats, nsys_rules
    # the nsys stats reports (same rows and numbers as `nsys stats`): NVTX ranges, OS runtime, CUDA API, kernels, copies
    for name, df in nsys_stats.summaries(sys_trace).items():
        if len(df):
            display(table(df, caption=name, max_rows=10))
    # the nsys analyze expert rules as findings (GPU gaps, low utilisation, synchronous APIs, pageable copies)
    rule_findings = nsys_rules.nsys_findings(sys_trace)
    if rule_findings:
        display(findings_table(rule_findings))
    else:
        print("nsys analyze rules: nothing flagged.")
else:
    sys_trace = None
    print("No Nsight Systems report: the system view below comes from the PyTorch profiler trace.")

# %% [markdown] id="cc168a34"
# ## Verdict: what bounds the step, and what to fix first

# %% id="c59b0e4e"
from nbprof.analysis import advisor, steps, utilization, verdict
from nbprof.results.verdict import verdict_html
from IPython.display import HTML
trace = param(trace, "trace")
tr = load_input(trace, trace_cache) if trace else sys_trace
if merged_cache:  # nbprof report merged the two once (the page's verdict above is computed on this trace)
    tr = load_input(trace, merged_cache)
    from nbprof.units import fmt_ns
    al = tr.meta.extra["merge"]
    print(f"One run, two sources: the nsys report and the PyTorch trace merged into one trace ({al['pairs']} "
          f"{al['anchor']} pairs aligned the clocks, residual max {fmt_ns(al['residual_max_ns'] or 0)}, median "
          f"{fmt_ns(al['residual_median_ns'] or 0)}; {sum(al['duplicates'].values())} events both recorded "
          "merged into one row each).")
elif tr is not None and sys_trace is not None and tr is not sys_trace:
    # one run, two sources: the nsys report and the PyTorch trace of the same run merged into one trace
    # (nbprof.merge: clocks aligned on the NVTX ranges / kernels both saw; OS runtime calls join the operators)
    try:
        tr = nbprof.merge(sys_trace, tr)
        from nbprof.units import fmt_ns
        al = tr.meta.extra["merge"]
        print(f"One run, two sources: the nsys report and the PyTorch trace merged into one trace ({al['pairs']} "
              f"{al['anchor']} pairs aligned the clocks, residual max {fmt_ns(al['residual_max_ns'] or 0)}, median "
              f"{fmt_ns(al['residual_median_ns'] or 0)}; {sum(al['duplicates'].values())} events both recorded "
              "merged into one row each).")
    except nbprof.NbprofError as exc:
        print(f"The nsys report and the PyTorch trace were not merged ({exc}); the views below use the PyTorch trace.")
if tr is None:
    print("Nothing to analyse: give a trace or an nsys report.")
else:
    bd = steps.step_breakdown(tr)
    if in_report:
        print("The verdict and what to fix first open the report (above); all findings are in the overview below.")
    else:
        display(HTML(verdict_html(verdict.verdict(tr, breakdown=bd), advisor.advise(tr))))

# %% [markdown] id="7ab5b06e"
# ## GPU utilisation, idle time and the step breakdown

# %% id="6684511e"
if tr is not None and not tr.has_device:
    print("This profile has no GPU activity (CPU-only machine or CPU-only profile): GPU utilisation does "
          "not apply; the step breakdown still shows CPU vs DataLoader time.")
elif tr is not None:
    display(table(utilization.gpu_utilization(tr), caption="GPU utilisation"))
    display(table(utilization.idle_breakdown(tr), caption="Idle time by cause (HTA)"))
if tr is not None:
    display(table(bd, caption="Step breakdown (priority counting)"))
    r = steps.breakdown_ratios(bd)
    display(table(r.rename("share_ratio").rename_axis("part").reset_index()
                  .assign(part=lambda d: d["part"].str.replace("_ratio", "")), caption="Share of the average step"))

# %% [markdown] id="9babcce7"
# ## Overview (with every finding) and timeline
# <a id="nbprof-timeline"></a>
# Zoom with the mouse wheel or W/S, pan with A/D. In the live notebook, selecting a kernel shows the CPU op that launched it.
# When the nsys report and the PyTorch trace come from the same run, the timeline is the merged one: each thread's
# lanes are split by source — `[Kineto + nsys]` (ranges both profilers saw), `[Kineto]` (operators, shapes) and
# `[nsys]` (OS runtime calls) — and the advisor's `data_stall_chain` finding links a step's data wait to what the
# thread did meanwhile.

# %% id="f4a66c84"
if tr is not None:
    show(tr, views=["overview", "timeline"], static=static_views)
