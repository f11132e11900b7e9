"""Every Kineto trace in ../shared/corpus loads with the MANIFEST's per-category counts.

The expected values come from ../shared/corpus/MANIFEST.md (its ``cats:`` lists count every
``traceEvents`` entry by its raw ``cat``; ``[memory] events=N``; ``distributedInfo ... rank=R``),
mapped onto nbprof's tables: old capitalised categories to Kineto's (``Operator`` -> ``cpu_op``...),
flow events (``ac2g``/``async``/``async_cpu_to_gpu``/``fwdbwd``) to the flows table (one row per
start, with its finish), ``[memory]`` instants to the memory table. Steps are checked against a
regex over the file's bytes (an implementation independent of the loader).
"""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pandas as pd
import pytest
from _support.paths import CORPUS, corpus_path

import nbprof
from nbprof.trace import iterations

FLOW_CATS = {"ac2g": "ac2g", "async": "ac2g", "async_cpu_to_gpu": "ac2g", "fwdbwd": "fwdbwd"}
OLD = {"Operator": "cpu_op", "Kernel": "kernel", "Runtime": "cuda_runtime", "Memcpy": "gpu_memcpy",
       "Memset": "gpu_memset"}


def _manifest_rows() -> list[dict]:
    path = CORPUS / "MANIFEST.md"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if "| kineto-trace |" not in line:
            continue
        rel = re.search(r"`corpus/([^`]+)`", line).group(1)
        cats = {k.strip(): int(v) for k, v in re.findall(r"([\w ]+):(\d+)", line.split("cats:")[1].split(".")[0])}
        mem = int(re.search(r"\[memory\] events=(\d+)", line).group(1))
        kernels = int(re.search(r"kernels=(\d+)", line).group(1))
        m = re.search(r"distributedInfo[^;]*rank=(\d+)", line)
        rows.append({"rel": rel, "cats": cats, "memory": mem, "kernels": kernels,
                     "rank": int(m.group(1)) if m else None})
    return rows


ROWS = _manifest_rows()


def _raw_bytes(p) -> bytes:
    data = p.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


@pytest.mark.skipif(not ROWS, reason="../shared/corpus/MANIFEST.md is absent on this machine")
def test_manifest_lists_the_corpus_traces():
    assert len(ROWS) >= 30


@pytest.mark.parametrize("row", ROWS, ids=[r["rel"].split("/")[-1] + f"-{i}" for i, r in enumerate(ROWS)])
def test_corpus_trace(row):
    p = corpus_path(row["rel"])
    tr = nbprof.load(p)
    tr.validate()
    got = tr.category_counts()
    got = got[got > 0]

    # events table: every non-flow category of the MANIFEST, old spellings mapped
    expected: dict[str, int] = {}
    for cat, n in row["cats"].items():
        if cat in FLOW_CATS:
            continue
        cat = OLD.get(cat, cat)
        expected[cat] = expected.get(cat, 0) + n
    if "cpu_instant_event" in expected:  # the [memory] instants go to the memory table
        expected["cpu_instant_event"] -= row["memory"]
        if expected["cpu_instant_event"] == 0:
            del expected["cpu_instant_event"]
    got = got.to_dict()
    listed = [c for c in row["cats"]]
    if len(listed) >= 8:  # the MANIFEST lists the 8 largest categories only
        floor = min(row["cats"].values())
        extra = {c: n for c, n in got.items() if c not in expected}
        assert all(n <= floor for n in extra.values()), extra
        got = {c: n for c, n in got.items() if c in expected}
    assert got == expected
    assert int(got.get("kernel", 0)) == row["kernels"]
    assert len(tr.memory) == row["memory"]

    # flows, lossless: every start and every finish is in exactly one row (real traces reuse ids:
    # one start with several finishes, or the same id again later)
    for cat in ("ac2g", "fwdbwd"):
        listed = [c for c in row["cats"] if FLOW_CATS.get(c) == cat]
        n_events = sum(row["cats"][c] for c in listed)
        f = tr.flows[tr.flows["cat"] == cat]
        if listed:  # the MANIFEST lists a file's 8 largest categories only
            starts = f[f["src_ts_ns"] >= 0].drop_duplicates(["id", "src_ts_ns", "src_pid", "src_tid"])
            assert len(starts) + int((f["dst_ts_ns"] >= 0).sum()) == n_events
        assert (len(f) > 0) == (n_events > 0) or not listed
        paired = f[(f["src_ts_ns"] >= 0) & (f["dst_ts_ns"] >= 0)]
        if cat == "ac2g" and len(paired):  # a launch precedes (or starts with) the device op it launched
            assert (paired["dst_ts_ns"] >= paired["src_ts_ns"]).mean() > 0.99

    # rank: distributedInfo, else the file name, else 0 (noted)
    if row["rank"] is not None:
        assert (tr.rank, tr.meta.rank_source) == (row["rank"], "distributedInfo")
    else:
        m = re.search(r"(?:^|[^a-z])rank[-_]?(\d+)", p.name, re.I)
        assert tr.rank == (int(m.group(1)) if m else 0)
        assert tr.report.get("rank_from_filename" if m else "rank_assumed") is not None

    # steps: the ProfilerStep#N numbers in the file
    steps = sorted({int(n) for n in re.findall(rb'"name":\s*"ProfilerStep\s*#\s*(\d+)"', _raw_bytes(p))})
    if steps:
        assert tr.steps == steps
        k = tr.events[tr.events["device"] >= 0]
        assert (k["step"] >= 0).mean() > 0.5 if len(k) else True
    else:  # without ProfilerStep the detected iterations (if any) are the steps, said in the report
        assert tr.report.get("no_steps") is not None
        src = iterations.step_source(tr)
        detected = src.source != "whole_trace"
        assert tr.steps == (list(range(src.steps)) if detected else [])
        assert src.source in tr.report.get("steps_detected").message

    # times: int64 ns from the first event, durations never negative
    assert tr.events["ts_ns"].min() == 0 and tr.events["dur_ns"].min() >= 0
    assert tr.events["ts_ns"].is_monotonic_increasing
    # nothing was repaired or dropped in these real files
    assert {i.action for i in tr.report.issues} <= {"assumed", "flagged"}


KERNEL_TOTALS = [
    "facebookresearch__HolisticTraceAnalysis/tests/data/trace_compare/base/base.json.gz",
    "facebookresearch__HolisticTraceAnalysis/tests/data/triton_example/triton_example.json.gz",
    "AMD-AGI__TraceLens/tests/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz",
    "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "facebookresearch__HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
]


@pytest.mark.parametrize("rel", KERNEL_TOTALS, ids=[r.split("/")[-1] for r in KERNEL_TOTALS])
def test_kernel_time_totals_match_a_stdlib_json_sum(rel):
    """Sum of kernel ``dur`` (µs, 3 decimals) per stream, computed with stdlib json + Decimal."""
    from decimal import Decimal

    p = corpus_path(rel)
    doc = json.loads(_raw_bytes(p), parse_float=Decimal)
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    want: dict[int, int] = {}
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel"):
            s = e.get("args", {}).get("stream", e.get("tid"))
            want[int(s)] = want.get(int(s), 0) + int(Decimal(e["dur"]) * 1000)
    tr = nbprof.load(p)
    k = tr.events[tr.events["cat"] == "kernel"]
    got = k.groupby("stream")["dur_ns"].sum()
    assert {int(s): int(v) for s, v in got.items()} == want


def test_old_schema_memory_events_and_times():
    tr = nbprof.load(corpus_path("pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"))
    assert len(tr.memory) == 12838
    assert tr.meta.origin_ns == 1623142623460016000  # absolute µs in 2021 traces: the earliest ts, exact
    assert tr.events["ts_ns"].min() == 0
    k = tr.events[tr.events["cat"] == "kernel"]
    assert set(k["device"].unique()) == {0} and 7 in set(k["stream"].unique())
    assert (k["pid"] == k["device"]).all() and (k["tid"] == k["stream"]).all()
    # "external id" (2021 spelling) links kernels to their operators
    assert (k["external_id"] >= 0).mean() > 0.99
    assert set(tr.memory["device_type"].unique()) <= {0, 1}


def test_ns_resolution_trace_keeps_nanoseconds():
    """HTA's ns-resolution fixture: absolute µs with 3 decimals (1.7e15), displayTimeUnit "ns"."""
    p = corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    from decimal import Decimal

    doc = json.loads(_raw_bytes(p), parse_float=Decimal)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") and "ts" in e]
    origin = min(Decimal(e["ts"]) for e in xs)
    want = sorted(int((Decimal(e["ts"]) - origin) * 1000) for e in xs)
    tr = nbprof.load(p)
    assert tr.meta.extra["displayTimeUnit"] == "ns"
    assert tr.meta.origin_ns == int(origin * 1000)
    got = sorted(tr.events.loc[tr.events["ph"] == "X", "ts_ns"].tolist())
    assert got == want  # exact to the nanosecond, which float64 µs cannot hold at 1.7e15


def test_rocm_trace_streams_and_launch_geometry():
    tr = nbprof.load(corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert tr.meta.is_rocm and tr.meta.producer.startswith("PyTorch/Kineto (ROCm)")
    rt = tr.events[(tr.events["cat"] == "cuda_runtime") & (tr.events["name"] == "hipLaunchKernel")]
    assert rt["grid"].notna().all() and (rt["correlation"] >= 0).all()


def test_multi_rank_pieces_have_their_ranks():
    a = nbprof.load(corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz"))
    b = nbprof.load(corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz"))
    assert (a.rank, b.rank, a.meta.world_size, b.meta.world_size) == (0, 1, 128, 128)
    assert (a.events["rank"] == 0).all() and (b.events["rank"] == 1).all()
    assert np.array_equal(pd.unique(a.events["rank"]), [0])
