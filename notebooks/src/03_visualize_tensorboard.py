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
# **How to read the comparison.** Every change is *after − before*: a negative change is time saved. Look first at step time,
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
trace_cache = ""        # `trace` as loaded by nbprof report (it loads each input once and hands it over)
compare_cache = ""      # the same for `compare_trace`
merged_cache = ""       # `nsys_report` and `trace` merged once by nbprof report (one run, two sources)
in_report = False       # nbprof report sets True (its page opens with the verdict)

# %% id="911309b6"
import pandas as pd
from nbprof.viz.embed import show
from nbprof.report import NotebookInputs
inputs = NotebookInputs(use_examples)  # paths of the parameters (one helper for every notebook)
ROOT, CORPUS, resolve, param = inputs.root, inputs.corpus, inputs.resolve, inputs.param
pd.set_option("display.max_colwidth", 80)
# %% id="67fe6461"
from nbprof import tensorboard as tb
from nbprof.analysis import compare
from nbprof.report import load_input
from nbprof.results.table import table
from nbprof.analysis.before_after import before_after
from nbprof.results.compare_render import before_after_sentence, order_runs, side_by_side_table
logdir = resolve(logdir)
trace, compare_trace = param(trace, "trace"), param(compare_trace, "compare_trace")
# two traces given: compare them as loaded (one parse each; no logdir copy is written)
pair = {}
if trace and compare_trace:
    pair = {"before": load_input(trace, trace_cache), "after": load_input(compare_trace, compare_cache)}
runs = tb.discover(logdir) if logdir else pd.DataFrame(columns=["run"])
if logdir:
    from nbprof.units import fmt_epoch_digits
    shown = runs.drop(columns=["path"], errors="ignore").rename(columns={"span_ts": "written"})
    if "written" in shown:  # the file name's time digits as a date (a raw ns number reads as a duration)
        shown["written"] = shown["written"].map(fmt_epoch_digits)
    display(table(shown, caption=f"Runs in {logdir}"))
elif not pair:
    print("One run given: nothing to compare yet. Give a second trace (--compare-trace, the run after "
          "your change) or a logdir with two runs.")

# %% id="da1a26b3"
if not pair:
    names = order_runs(list(dict.fromkeys(runs["run"])))
    # each run loaded once: the comparison and the views below share it (tb.compare_runs would load them again)
    pair_runs = {n: tb.load_run(logdir, n) for n in names[:2]}
    if len(names) >= 2:
        cmp = compare.compare(pair_runs[names[0]], pair_runs[names[1]])
        a_name, b_name = names[0], names[1]
else:
    names = ["before", "after"]
    a_name, b_name = names
    cmp = compare.compare(pair["before"], pair["after"])
if len(names) >= 2:
    # faster or not: the median step's ratio with its bootstrap interval (and why, when the CPU was contended)
    before_run, after_run = (pair["before"], pair["after"]) if pair else (pair_runs[a_name], pair_runs[b_name])
    print(before_after_sentence(before_after(before_run, after_run), a_name, b_name))
    # every delta is after - before: negative = the change saved time
    display(side_by_side_table(cmp.steps, a_name, b_name, caption="Step time (change = after - before; negative is faster)"))
    display(side_by_side_table(cmp.breakdown, a_name, b_name, caption="Average step breakdown"))
    ops = cmp.operators
    ops = ops[ops["cat"].astype(str).isin(["cpu_op", "user_annotation"])
              & ~ops["name"].astype(str).str.startswith("ProfilerStep")]
    display(table(ops, columns=["name", "count_a", "count_b", "self_host_ns_a", "self_host_ns_b", "self_host_ns_delta",
                                "total_device_ns_delta"], max_rows=10,
                  caption=f"Operators that changed most (a = {a_name}, b = {b_name}; delta = b - a)"))

# %% [markdown] id="6c1d2f0a"
# ### The diff view
# The mean step time before, the change of each Overview category (a waterfall; delta = after − before, negative =
# faster), the mean step time after; then the operators and kernels whose time moved most.

# %% id="9e4b7a13"
from nbprof.viz import registry
# the two traces, or the two runs of the logdir (loaded once above)
before_after = ((pair["before"], pair["after"]) if pair
                else tuple(pair_runs[n] for n in names[:2]) if len(names) >= 2 else ())
if before_after:
    show(registry.static("diff", before_after) if static_views else registry.live("diff", before_after),
         static=static_views)

# %% [markdown] id="b0ed5889"
# ### The views of each run

# %% id="4d04773b"
if pair:
    for name, t in pair.items():
        print(name)
        show(t, views=["overview"], static=static_views)
else:
    for name in names[:2]:
        show(pair_runs[name], views=["overview"], static=static_views)

# %% [markdown] id="5a161772"
# ### In a live notebook
# `nbprof.tensorboard.start(logdir)` starts TensorBoard on 127.0.0.1 and embeds it; the scalars of every run
# appear under `nbprof/…`.
