"""Differential tests: nbprof's nsys_stats / nsys_rules against the REAL `nsys stats` / `nsys analyze`
of Debian's nsight-systems 2022.4, on the real GPU export in ../shared/corpus and on CPU reports
profiled here (OS runtime + NVTX through the C ABI). Same rows, same numbers."""

from __future__ import annotations

import shutil
import sys
import textwrap

import pandas as pd
import pytest
from _support.nsys import agents_running, assert_matches, nsys_or_skip, oracle_frame
from _support.paths import corpus_path

from nbprof.analysis import nsys_rules, nsys_stats
from nbprof.api import load_nsys_run
from nbprof.sources.nsys import load_nsys

SAXPY = "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
NBODY_PP = "hpcgroup__pipit/pipit/tests/data/nbody-nvtx/trace.csv"


def _stats(path, *reports):
    from nbprof.capture.nsys import stats_csv

    inst = nsys_or_skip()
    return {k: oracle_frame(v) for k, v in stats_csv(path, reports, nsys=inst).items()}


def _sum_pairs(count_col: str, nsys_count: str, *, share: bool = True):
    p = [("total_ns", "Total Time (ns)", "int"), (count_col, nsys_count, "int"), ("avg_ns", "Avg (ns)", "r1"),
         ("med_ns", "Med (ns)", "r1"), ("min_ns", "Min (ns)", "int"), ("max_ns", "Max (ns)", "int"),
         ("std_ns", "StdDev (ns)", "r1")]
    return ([("time_ratio", "Time (%)", "pct")] if share else []) + p


def _tree_frame(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["parent_id"] = [("None" if int(v) < 0 else str(int(v))) for v in df["parent_id"]]
    return df


# ----------------------------------------------------------------------------- corpus GPU export


@pytest.fixture(scope="module")
def saxpy(tmp_path_factory):
    src = corpus_path(SAXPY)
    dst = tmp_path_factory.mktemp("saxpy") / "saxpy.sqlite"  # nsys stats gets a copy, never the corpus file
    shutil.copyfile(src, dst)
    return dst, load_nsys(dst)


def test_gpu_kernel_summary_matches_nsys(saxpy):
    path, trace = saxpy
    theirs = _stats(path, "gpukernsum")["gpukernsum"]
    ours = nsys_stats.cuda_gpu_kern_sum(trace)
    ours["grid_n"] = [" ".join(f"{int(x):4d}" for x in g.split(",")) for g in ours["grid"]]
    ours["block_n"] = [" ".join(f"{int(x):4d}" for x in g.split(",")) for g in ours["block"]]
    assert_matches(ours, theirs, _sum_pairs("instances", "Instances") + [
        ("grid_n", "GridXYZ", "str"), ("block_n", "BlockXYZ", "str"), ("name", "Name", "str")], ["name", "total_ns"])
    assert ours.loc[0, "name"] == "saxpy(double *, double *, double *, double, int)"
    assert int(ours.loc[0, "total_ns"]) == 88573480


def test_cuda_api_summary_matches_nsys(saxpy):
    path, trace = saxpy
    theirs = _stats(path, "cudaapisum")["cudaapisum"]
    ours = nsys_stats.cuda_api_sum(trace)
    assert_matches(ours, theirs, _sum_pairs("num_calls", "Num Calls") + [("name", "Name", "str")],
                   ["name", "total_ns"])
    assert len(ours) == 11  # cudaMemcpy_v3020 and cudaMemcpy records are two rows, as in nsys


def test_gpu_memory_summaries_match_nsys(saxpy):
    path, trace = saxpy
    o = _stats(path, "gpumemtimesum", "gpumemsizesum")
    ours = nsys_stats.cuda_gpu_mem_time_sum(trace)
    assert_matches(ours, o["gpumemtimesum"], _sum_pairs("count", "Count") + [("operation", "Operation", "str")],
                   ["operation"])
    size = nsys_stats.cuda_gpu_mem_size_sum(trace)
    assert_matches(size, o["gpumemsizesum"], [
        ("total_bytes", "Total (MB)", "mb"), ("count", "Count", "int"), ("avg_bytes", "Avg (MB)", "mb"),
        ("med_bytes", "Med (MB)", "mb"), ("min_bytes", "Min (MB)", "mb"), ("max_bytes", "Max (MB)", "mb"),
        ("std_bytes", "StdDev (MB)", "mb"), ("operation", "Operation", "str")], ["operation"])
    assert int(size.set_index("operation").loc["[CUDA memcpy HtoD]", "total_bytes"]) == 2_621_440_000


def test_nvtx_reports_match_nsys_on_gpu_export(saxpy):
    path, trace = saxpy
    o = _stats(path, "nvtxsum", "nvtxpptrace", "nvtxgpuproj")
    assert_matches(nsys_stats.nvtx_sum(trace), o["nvtxsum"],
                   _sum_pairs("instances", "Instances") + [("style", "Style", "str"), ("range", "Range", "str")],
                   ["range", "style"])
    pp = _tree_frame(nsys_stats.nvtx_pushpop_trace(trace))
    assert_matches(pp, o["nvtxpptrace"], _PP_PAIRS, ["range_id"])
    proj = _tree_frame(nsys_stats.nvtx_gpu_proj_trace(trace))
    assert_matches(proj, o["nvtxgpuproj"], [
        ("name", "Name", "str"), ("projected_start_ns", "Projected Start (ns)", "int"),
        ("projected_dur_ns", "Projected Duration (ns)", "int"), ("orig_start_ns", "Orig Start (ns)", "int"),
        ("orig_dur_ns", "Orig Duration (ns)", "int"), ("style", "Style", "str"), ("pid", "PID", "int"),
        ("tid", "TID", "int"), ("num_gpu_ops", "NumGPUOps", "int"), ("lvl", "Lvl", "int"),
        ("num_child", "NumChild", "int"), ("range_id", "RangeId", "int"), ("parent_id", "ParentId", "str"),
        ("range_stack", "RangeStack", "str")], ["range_id"])
    assert len(proj) == 5 and set(proj["name"]) == {"saxpy"}


_PP_PAIRS = [
    ("start_ns", "Start (ns)", "int"), ("end_ns", "End (ns)", "int"), ("dur_ns", "Duration (ns)", "int"),
    ("dur_child_ns", "DurChild (ns)", "int"), ("dur_nonchild_ns", "DurNonChild (ns)", "int"), ("name", "Name", "str"),
    ("pid", "PID", "int"), ("tid", "TID", "int"), ("lvl", "Lvl", "int"), ("num_child", "NumChild", "int"),
    ("range_id", "RangeId", "int"), ("parent_id", "ParentId", "str"), ("range_stack", "RangeStack", "str"),
    ("name_tree", "NameTree", "str"),
]


def _analyze(path, rule):
    inst = nsys_or_skip()
    import subprocess

    cp = subprocess.run([inst.path, "analyze", "-q", "--format", "csv", "-r", rule, str(path)], capture_output=True,
                        text=True, env=inst.environ(), timeout=300, check=False)
    assert cp.returncode == 0, cp.stderr
    return oracle_frame(cp.stdout)


def test_expert_rules_match_nsys_analyze(saxpy):
    path, trace = saxpy
    low = nsys_rules.gpu_low_utilization(trace)
    theirs = _analyze(path, "gpu-low-util")
    low["pct"] = low["in_use_ratio"]
    assert_matches(low, theirs, [("pct", "In-Use (%)", "pct"), ("duration_ns", "Duration (ns)", "int"),
                                 ("start_ns", "Start (ns)", "int"), ("pid", "PID", "int"),
                                 ("device", "Device ID", "int")], ["start_ns"])
    gaps = nsys_rules.gpu_gaps(trace, min_gap_ns=100_000_000)
    assert_matches(gaps, _analyze(path, "gpu-starv:gap=100"), [
        ("duration_ns", "Duration (ns)", "int"), ("gap_start_ns", "Start (ns)", "int"), ("pid", "PID", "int"),
        ("device", "Device ID", "int")], ["gap_start_ns"])
    assert nsys_rules.gpu_gaps(trace).empty  # default 500 ms: nsys finds none either
    assert _analyze(path, "gpu-starv").empty
    sm = nsys_rules.sync_memcpy(trace)
    assert_matches(sm, _analyze(path, "cuda-sync-memcpy"), [
        ("duration_ns", "Duration (ns)", "int"), ("start_ns", "Start (ns)", "int"), ("src_kind", "Src Kind", "str"),
        ("dst_kind", "Dst Kind", "str"), ("bytes", "Bytes (MB)", "mb"), ("pid", "PID", "int"),
        ("device", "Device ID", "int"), ("api_name", "API Name", "str")], ["start_ns", "api_name"])
    rules = {f.rule: f for f in nsys_rules.nsys_findings(trace)}
    assert set(rules) == {"nsys_gpu_low_util", "nsys_sync_memcpy"}
    assert rules["nsys_sync_memcpy"].evidence["count"] == 15  # unique copies (each has 2 API records)
    assert rules["nsys_sync_memcpy"].next_step


# ----------------------------------------------------------------------------- nbody nvtxpptrace CSV


def test_pushpop_tree_matches_nsys_csv_of_nbody():
    """The corpus holds only the `nsys stats -r nvtxpptrace` CSV of an n-body run: rebuild its tree
    (level, parent, children, child time, stacks) from the ranges' start/end/thread alone."""
    theirs = oracle_frame(corpus_path(NBODY_PP).read_text())
    for c in ("Start (ns)", "End (ns)", "RangeId", "PID", "TID"):
        theirs[c] = theirs[c].astype("int64")
    from nbprof.trace import schema
    from nbprof.trace.model import LoadReport, Trace, TraceMeta

    nv = pd.DataFrame({
        "ts_ns": theirs["Start (ns)"], "end_ns": theirs["End (ns)"], "name": theirs["Name"], "style": "PushPop",
        "row_id": theirs["RangeId"], "pid": theirs["PID"], "tid": theirs["TID"],
        "global_tid": theirs["PID"] * 0x1000000 + theirs["TID"],
    })
    tr = Trace(schema.empty_frame(schema.EVENT_COLUMNS), schema.empty_frame(schema.FLOW_COLUMNS),
               schema.empty_frame(schema.MEMORY_COLUMNS), schema.empty_frame(schema.COUNTER_COLUMNS),
               pd.DataFrame(columns=["pid", "tid", "name", "kind"]),
               TraceMeta(), LoadReport(), tables={"nvtx": nv})
    ours = _tree_frame(nsys_stats.nvtx_pushpop_trace(tr))
    assert_matches(ours, theirs, _PP_PAIRS, ["range_id"])
    assert ours["lvl"].max() >= 1


# ----------------------------------------------------------------------------- CPU report made here

WORKLOAD = textwrap.dedent('''
    import os, threading, time
    import nbprof.nvtx as nv
    nv.mark("begin")
    with nv.range("outer", color="green"):
        for i in range(3):
            with nv.range("step", payload=i):
                with nv.range("inner"):
                    time.sleep(0.01)
                with open(os.devnull, "rb") as fh:
                    fh.read(16)
    rid = nv.start_range("async-region", domain="mydomain")
    def worker():
        with nv.range("worker", domain="mydomain", payload=2.5):
            time.sleep(0.005)
        nv.end_range(rid, domain="mydomain")   # ends on another thread
    t = threading.Thread(target=worker); t.start(); t.join()
    with nv.range("tail"):
        time.sleep(0.002)
''')


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    inst = nsys_or_skip()
    from nbprof.capture.nsys import profile

    d = tmp_path_factory.mktemp("nsyscpu")
    script = d / "workload.py"
    script.write_text(WORKLOAD)
    before = set(agents_running())
    run = profile([sys.executable, str(script)], results_dir=d / "results", nsys=inst, timeout_s=240)
    assert set(agents_running()) <= before, "an nsys agent of this run survived"
    return run


def test_cpu_report_reports_match_nsys(cpu_report):
    run = cpu_report
    assert run.returncode == 0, run.output[-2000:]
    trace = load_nsys_run(run)
    o = _stats(run.sqlite_path, "osrtsum", "nvtxsum", "nvtxpptrace")
    assert_matches(nsys_stats.osrt_sum(trace), o["osrtsum"],
                   _sum_pairs("num_calls", "Num Calls") + [("name", "Name", "str")], ["name", "total_ns"])
    ns = nsys_stats.nvtx_sum(trace)
    assert_matches(ns, o["nvtxsum"], _sum_pairs("instances", "Instances") + [
        ("style", "Style", "str"), ("range", "Range", "str")], ["range", "style"])
    assert_matches(_tree_frame(nsys_stats.nvtx_pushpop_trace(trace)), o["nvtxpptrace"], _PP_PAIRS, ["range_id"])
    # what nbprof.nvtx recorded, through the real nsys
    by = ns.set_index("range")
    assert int(by.loc["step", "instances"]) == 3 and int(by.loc["inner", "instances"]) == 3
    assert by.loc["mydomain:async-region", "style"] == "StartEnd"
    assert by.loc["mydomain:worker", "style"] == "PushPop"
    assert int(by.loc["outer", "instances"]) == 1


def test_cpu_report_loads_into_trace_model(cpu_report):
    trace = load_nsys_run(cpu_report)
    trace.validate()
    from nbprof.sources.nsys import nsys_tables

    nv = nsys_tables(trace)["nvtx"]
    assert trace.steps == [0, 1, 2]  # NVTX "step" ranges with an integer payload
    assert list(nv.loc[nv["text"] == "step", "payload"]) == [0, 1, 2]
    w = nv[nv["text"] == "worker"].iloc[0]
    assert w["payload"] == 2.5 and w["payload_type"] == "double" and w["domain"] == "mydomain"
    se = nv[nv["text"] == "async-region"].iloc[0]
    assert se["style"] == "StartEnd" and se["end_tid"] != se["tid"]  # ended on the worker thread
    assert (nv["style"] == "Mark").sum() == 1
    ev = trace.events
    assert {"osrt", "nvtx"} <= set(ev["cat"].astype(str))
    assert (ev.loc[ev["name"] == "clock_nanosleep", "dur_ns"] > 1_000_000).any()
    names = set(trace.threads["name"])
    assert any("python" in n for n in names)
    assert trace.meta.origin_ns and trace.meta.origin_ns > 1_600_000_000 * 10**9
    assert trace.meta.producer.startswith("Nsight Systems 2022.4")
