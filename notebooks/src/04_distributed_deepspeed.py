# Step 4: distributed jobs (DeepSpeed).
# Source of notebooks/04_distributed_deepspeed.ipynb: edit here, then run `python scripts/make_notebooks.py`.

# %% [markdown] id="3f430db0"
# # Step 4 — Distributed jobs (DeepSpeed)
#
# **The question.** In data-parallel / ZeRO training, is communication efficient and hidden behind compute?
# Which rank is the straggler everybody waits for?
#
# **How to read it.**
# - *Collectives* — per collective (all_reduce, all_gather, reduce_scatter…): calls, time, bytes, algorithm
#   bandwidth and **bus bandwidth** (the nccl-tests definition: algbw × 2(n−1)/n for all_reduce, × (n−1)/n for
#   all_gather / reduce_scatter). Bus bandwidth far below the link's peak = small messages or contention.
# - *Overlap* — the share of communication time hidden under compute; *exposed* communication adds directly to
#   step time.
# - *Skew* — per-rank step and collective times; one slow rank makes all others wait in the next collective.
# - *ZeRO pattern* — stage 1/2 reduce-scatter/all-reduce gradients; stage 3 also all-gathers parameters every
#   forward/backward (more communication, less memory).
# - DeepSpeed's own reports: the **flops profiler** (params, MACs, latency per module) and the **comms logger**
#   (per-op message sizes and bandwidth).
#
# **What to try next.** Exposed communication → bigger buckets (`reduce_bucket_size`), `overlap_comm: true`,
# gradient accumulation. Low bus bandwidth with small messages → fewer, larger collectives. A straggler →
# check its data loading and its host.

# %% id="2adf30eb" tags=["parameters"]
# Parameters (papermill): artefacts of one training job. Empty strings mean "not available".
trace = ""              # Kineto trace (torch.profiler), .json or .json.gz
compare_trace = ""      # optional second trace ("after the fix")
nsys_report = ""        # .nsys-rep or .sqlite from Nsight Systems
logdir = ""             # TensorBoard logdir with tensorboard_trace_handler runs
ds_log = ""             # DeepSpeed launcher/torchrun log (flops profiler, comms logger)
ds_traces = []          # per-rank traces of a distributed job (or one folder / glob / .tar.gz of them)
use_examples = True     # fill what is missing with bundled/corpus examples (teaching); reports set False
static_views = False    # views as static components (nbprof report sets True; its page loads BokehJS once)
trace_cache = ""        # `trace` as loaded by nbprof report (it loads each input once and hands it over)
compare_cache = ""      # the same for `compare_trace`
merged_cache = ""       # `nsys_report` and `trace` merged once by nbprof report (one run, two sources)
in_report = False       # nbprof report sets True (its page opens with the verdict)

# %% id="b618e5bf"
import os
from pathlib import Path
import pandas as pd
from nbprof.report import NotebookInputs
inputs = NotebookInputs(use_examples)  # paths of the parameters (one helper for every notebook)
ROOT, CORPUS, resolve, param = inputs.root, inputs.corpus, inputs.resolve, inputs.param
pd.set_option("display.max_colwidth", 80)
# %% id="eb132bb8"
from nbprof.analysis import distributed
from nbprof.viz.embed import show
paths = [resolve(p) for p in ds_traces]
if not paths and use_examples and (CORPUS / "facebookresearch__HolisticTraceAnalysis").is_dir():
    base = CORPUS / "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter"
    paths = [str(base / "sampled_rank-0.json.gz"), str(base / "sampled_rank-1.json.gz")]
    print("No per-rank traces given: using two ranks of a real 128-rank NCCL job from the corpus.")
from nbprof.report import load_input, report_has_collectives
from nbprof.results.table import table
traces, rep, ds_job = [], None, None
if paths and os.path.isfile(os.path.join(paths[0], "manifest.json")):  # a job dataset (nbprof report --ranks DIR)
    import nbprof
    ds_job = nbprof.open_job(paths[0])
    rep = ds_job.distributed_report()  # every table from the per-rank reductions: no trace held in memory
    zoom = ds_job.zoom_ranks()  # the views zoom into two ranks: the straggler (if any) and the first rank
    traces = ds_job.traces(zoom)
    print(f"{len(ds_job.ranks)} ranks from the job dataset {paths[0]} (docs/dataset.md); the views show ranks {zoom}")
    for name, err in ds_job.failed.items():
        print(f"not loaded, skipped: {name}: {err}")
elif paths:
    from nbprof.scale import load_ranks
    job = load_ranks(paths[0] if len(paths) == 1 else paths, progress=False)  # one entry: a folder, glob or archive
    traces = list(job.traces())
    print(f"{len(traces)} ranks loaded")
elif trace:
    one = load_input(param(trace, "trace"), trace_cache)
    if report_has_collectives(one):
        traces = [one]
        print(f"One rank of a distributed job (rank {one.meta.rank} of {one.meta.world_size}): "
              "per-rank numbers below; give every rank's trace (--ds-trace) for skew and stragglers.")
if traces:
    rep = rep if rep is not None else distributed.distributed_report(traces)
    display(table(rep.summary, caption="Per rank"))
    display(table(rep.overlap, caption="Compute / communication overlap"))
    if len(rep.zero) > 1:
        display(table(rep.skew, caption="Skew across ranks"))
        display(table(rep.wait_summary, caption="Wait vs transfer per rank and collective "
                      "(wait: for the last rank to arrive; transfer: the rest)"))
        display(table(rep.stragglers, caption="Stragglers: the rank the others wait for, step after step"))
    # the Distributed view (per step: computation / overlapped / exposed communication / idle; the collectives;
    # waiting vs transfer and the straggler with several ranks) -- for one rank too
    if ds_job is not None:  # every rank of the dataset, per time bin: computation / communication / idle
        from nbprof.viz import ranks_overview as ro_view
        show(ro_view.static_view(ds_job) if static_views else ro_view.ranks_overview_view(ds_job), static=static_views)
    from nbprof.viz import distributed as dist_view
    show(dist_view.static_view(traces) if static_views else dist_view.distributed_view(traces), static=static_views)
    if len(traces) > 1:  # all ranks on one clock, the same collective linked across ranks
        from nbprof.viz import ranks_timeline as rt_view
        show(rt_view.static_view(traces) if static_views else rt_view.ranks_timeline_view(traces), static=static_views)
    print("ZeRO pattern per rank:", rep.zero)
else:
    print("No distributed traces and no collectives in the trace: this step applies to multi-rank jobs.")

# %% [markdown] id="51bc188e"
# ### DeepSpeed's own reports

# %% id="c8c2785c"
from nbprof import deepspeed as nds
log_path = param(ds_log, "ds_log")
if log_path and not ds_log:
    print("No DeepSpeed log given: using a real 2-rank ZeRO-2 CPU run's log (example).")
if log_path:
    log = nds.parse_log(Path(log_path))
    if log.flops:
        display(table(log.flops[0].summary))
    display(table(log.comms.summary))
    display(table(log.timer_means()))
    # the stage as the log prints it, else as the engine reported it into the traces (nbprof.deepspeed.attach):
    # DeepSpeed 0.19 logs "ZeRO stage N" at INFO under its WARNING-level logger, so a log may lack it
    stage, where = log.zero_stage, "printed in the log"
    if stage is None:
        stage, where = nds.zero_stage_of_traces(traces), "the engine's zero_optimization_stage(), recorded in the traces"
    print(f"ZeRO stage: {stage} ({where})" if stage is not None else
          "ZeRO stage: unknown (not in the log, nor in the traces)", end="; ")
    print(f"steps skipped (fp16 overflow): {log.skipped_steps}")
    if len(log.throughput):
        display(table(log.throughput, caption="Throughput lines (DeepSpeed ThroughputTimer / pipeline engine)"))
    if len(log.quirks):
        print("quirks flagged while parsing:")
        display(table(log.quirks))
else:
    print("No DeepSpeed log: this step applies to DeepSpeed jobs.")
