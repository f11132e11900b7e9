"""operator_summary against torch's own key_averages() on a real CPU profile, and on real GPU traces."""

from __future__ import annotations

import ast
import gzip
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from _support.paths import ROOT, corpus_path

import nbprof
from nbprof.analysis.operators import SORT_KEYS, host_call_tree, operator_summary

BERT_H100 = "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
RESNET_NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"


@pytest.fixture(scope="module")
def cnn_profile(tmp_path_factory):
    """Profile 3 steps of examples/train_cnn.py with shapes, memory and stacks; keep key_averages."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from train_cnn import train
    finally:
        sys.path.remove(str(ROOT / "examples"))
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("cnn") / "cnn.pt.trace.json"
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True),
        schedule=schedule(wait=1, warmup=1, active=3),
    ) as prof:
        train(5, profiler=prof)
    prof.export_chrome_trace(str(path))

    def frame(avgs, key):
        return pd.DataFrame(
            [
                (e.key, key(e), e.count, e.self_cpu_time_total * 1e3, e.cpu_time_total * 1e3,
                 e.cpu_memory_usage, e.self_cpu_memory_usage)
                for e in avgs
            ],
            columns=["name", "key", "count", "self_ns", "total_ns", "mem", "self_mem"],
        )

    ka = {
        "name": frame(prof.key_averages(), lambda e: ""),
        "shapes": frame(prof.key_averages(group_by_input_shape=True),
                        lambda e: json.dumps(e.input_shapes)),
        "stack": frame(prof.key_averages(group_by_stack_n=5), lambda e: ";".join(e.stack[:5])),
    }
    return nbprof.load(path), ka


def _check_against_torch(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    m = theirs.merge(ours, on=["name", "key"], how="outer", indicator=True, suffixes=("", "_nb"))
    assert (m["_merge"] == "both").all(), m.loc[m["_merge"] != "both", ["name", "key", "_merge"]].head(10)
    # counts exactly
    assert (m["count"] == m["count_nb"]).all(), m.loc[m["count"] != m["count_nb"], ["name", "count", "count_nb"]]
    # times within 1% for operators with non-trivial time (>= 10 us)
    big = m["total_ns"].abs() >= 10_000
    assert big.sum() >= 20
    for theirs_col, ours_col in (("total_ns", "total_host_ns"), ("self_ns", "self_host_ns")):
        rel = (m[theirs_col] - m[ours_col]).abs() / m[theirs_col].abs().clip(lower=1)
        nontrivial = big & (m[theirs_col].abs() >= 10_000)
        assert (rel[nontrivial] <= 0.01).all(), m.loc[nontrivial & (rel > 0.01), ["name", theirs_col, ours_col]]
    # memory columns exactly (the same [memory] records, the same intervals)
    assert (m["mem"] == m["host_mem_bytes"]).all()
    assert (m["self_mem"] == m["self_host_mem_bytes"]).all()


def test_matches_key_averages_by_name(cnn_profile):
    trace, ka = cnn_profile
    s = operator_summary(trace).assign(key="")
    _check_against_torch(s, ka["name"])
    # the operators of a CNN training step are all there, with ProfilerStep#N folded like torch
    names = set(s["name"])
    assert {"aten::conv2d", "aten::convolution_backward", "ProfilerStep*", "Optimizer.step#SGD.step"} <= names
    row = s.set_index("name").loc["ProfilerStep*"]
    assert row["count"] == 3
    # memory was recorded: the forward convolutions allocate their outputs
    assert s.set_index("name").loc["aten::mkldnn_convolution", "host_mem_bytes"] > 0


def test_matches_key_averages_by_input_shapes(cnn_profile):
    trace, ka = cnn_profile
    s = operator_summary(trace, group_by="shapes")
    s["key"] = [json.dumps(ast.literal_eval(x)) for x in s["input_dims"]]
    _check_against_torch(s, ka["shapes"])
    conv = s[s["name"] == "aten::conv2d"]
    # batch 64 of 1x16x16 images through a 16-channel then a 32-channel conv
    assert set(conv["input_dims"].map(lambda x: tuple(ast.literal_eval(x)[0]))) == {(64, 1, 16, 16), (64, 16, 8, 8)}


def test_matches_key_averages_by_stack(cnn_profile):
    trace, ka = cnn_profile
    s = operator_summary(trace, group_by="stack", stack_depth=5).rename(columns={"stack": "key"})
    _check_against_torch(s, ka["stack"])


def test_sort_keys_name_columns():
    s = operator_summary(nbprof.load(corpus_path(BERT_H100)))
    for torch_key, col in SORT_KEYS.items():
        assert col in s.columns, (torch_key, col)
    assert SORT_KEYS["cuda_time_total"] == "total_device_ns"
    assert SORT_KEYS["self_cuda_time_total"] == "self_device_ns"
    assert SORT_KEYS["self_cpu_time_total"] == "self_host_ns"
    assert SORT_KEYS["cpu_memory_usage"] == "host_mem_bytes"


def test_device_time_attribution_on_h100_trace():
    path = corpus_path(BERT_H100)
    s = operator_summary(nbprof.load(path)).set_index("name")
    # independent: plain json, kernels linked to aten::addmm ops by External id
    with gzip.open(path, "rt") as f:
        evs = json.load(f)["traceEvents"]
    addmm_ext = {e["args"]["External id"] for e in evs if e.get("cat") == "cpu_op" and e.get("name") == "aten::addmm"}
    dev = [e for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    want = sum(round(e["dur"] * 1000) for e in dev if e["args"].get("External id") in addmm_ext)
    assert want > 0
    assert s.loc["aten::addmm", "self_device_ns"] == want
    assert s.loc["aten::addmm", "count"] == len(addmm_ext)
    # every device op is attributed to exactly one operator
    assert s["self_device_ns"].sum() == sum(round(e["dur"] * 1000) for e in dev)
    # aten::linear -> aten::addmm: the parent's total device time includes the child's
    assert s.loc["aten::linear", "total_device_ns"] >= s.loc["aten::addmm", "total_device_ns"]
    assert s.loc["aten::linear", "self_device_ns"] == 0
    # the file says with_flops but holds no 'flops' args (torch 2.6 export): NaN, not a made-up 0
    assert np.isnan(s.loc["aten::addmm", "flops"])


def test_old_2021_trace_device_and_memory():
    s = operator_summary(nbprof.load(corpus_path(RESNET_NW0))).set_index("name")
    assert s.loc["ProfilerStep*", "count"] == 6
    assert s.loc["aten::conv2d", "total_device_ns"] > 0
    assert s.loc["cudaLaunchKernel", "cat"] == "cuda_runtime"
    assert s.loc["cudaLaunchKernel", "count"] == 8772  # one per kernel (MANIFEST: kernels=8772)
    assert s["device_mem_bytes"].abs().sum() > 0


def test_bad_group_by():
    trace = nbprof.load(corpus_path(BERT_H100))
    with pytest.raises(ValueError, match="group_by"):
        operator_summary(trace, group_by="module")


def test_analyses_import_no_display_code():
    code = (
        "import sys\n"
        "import nbprof.analysis.operators, nbprof.analysis.kernels, nbprof.analysis.memory, nbprof.analysis.compare\n"
        "bad = [m for m in ('bokeh', 'ipywidgets', 'IPython', 'jupyter_bokeh') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    assert np.__name__ == "numpy"


@pytest.mark.parametrize("tag", ["cnn", "lm"])
def test_matches_key_averages_on_h200_gpu_profiles(tag):
    """Real CUDA profiles (H200, torch 2.11) of the examples with torch's own key_averages() numbers.

    Device time (kernels, memcpy, memset attributed to the launching op) and CUDA memory are
    compared exactly: both sides read the same ns timestamps and the same [memory] records.
    """
    gpu = ROOT / "data" / "gpu"
    with gzip.open(gpu / f"{tag}_h200.key_averages.json.gz", "rt") as f:
        ka = json.load(f)
    trace = nbprof.load(gpu / f"{tag}_h200.pt.trace.json.gz")
    for mode in ("name", "shapes"):
        theirs = pd.DataFrame(ka[mode])
        theirs = theirs[theirs["device_type"] == "DeviceType.CPU"].copy()
        ours = operator_summary(trace, group_by=mode)
        if mode == "shapes":
            theirs["key"] = [json.dumps(json.loads(x)) for x in theirs["shapes"]]
            ours["key"] = [json.dumps(ast.literal_eval(x)) for x in ours["input_dims"]]
        else:
            theirs["key"] = ours["key"] = ""
        m = theirs.merge(ours, on=["name", "key"], how="outer", indicator=True)
        assert (m["_merge"] == "both").all(), m.loc[m["_merge"] != "both", ["name", "key"]]
        assert (m["count_x"] == m["count_y"]).all()
        for us, ns in (("self_cpu_us", "self_host_ns"), ("cpu_us", "total_host_ns"),
                       ("self_device_us", "self_device_ns"), ("device_us", "total_device_ns")):
            assert np.allclose(m[us] * 1000, m[ns], rtol=0.01, atol=1000), (tag, mode, us)
        for theirs_col, ours_col in (("cpu_mem", "host_mem_bytes"), ("self_cpu_mem", "self_host_mem_bytes"),
                                     ("device_mem", "device_mem_bytes"), ("self_device_mem", "self_device_mem_bytes")):
            assert (m[theirs_col] == m[ours_col]).all(), (tag, mode, theirs_col)
    s = operator_summary(trace).set_index("name")
    assert s["self_device_ns"].sum() > 0
    # the GEMMs' device time sits on aten::mm / aten::addmm, as in torch's table
    assert s.loc["aten::addmm", "self_device_ns"] > 0
    # torch's device rows (one per kernel/memcpy/memset name) are nbprof's kernel summary
    from nbprof.analysis.kernels import kernel_summary

    dev = pd.DataFrame(ka["name"])
    dev = dev[dev["device_type"] == "DeviceType.CUDA"].set_index("name")
    ks = kernel_summary(trace, categories=("kernel", "gpu_memcpy", "gpu_memset")).set_index("name")
    common = dev.index.intersection(ks.index)
    assert len(common) == len(ks) >= 10
    assert (dev.loc[common, "count"] == ks.loc[common, "instances"]).all()
    assert np.allclose(dev.loc[common, "device_us"] * 1000, ks.loc[common, "total_ns"], rtol=1e-6, atol=1)


@pytest.mark.parametrize(
    "rel",
    [
        RESNET_NW0,
        "AMD-AGI__TraceLens/tests/traces/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz",
        "facebookresearch__HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz",
    ],
)
def test_vectorised_tree_equals_torch_stack_sweep(rel):
    """The vectorised parent/subtree search gives exactly the tree of torch's stack loop."""
    from nbprof.analysis._call_tree import _sweep_reference, _tree_links

    tree = host_call_tree(nbprof.load(corpus_path(rel)))
    pid, tid = tree["pid"].to_numpy(), tree["tid"].to_numpy()
    ts = tree["ts_ns"].to_numpy()
    end = ts + tree["dur_ns"].to_numpy()
    thread = np.concatenate([[0], np.cumsum((pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1]))])
    p_ref, last_ref = _sweep_reference(thread, ts, end)
    p_vec, last_vec = _tree_links(thread, ts, end)
    assert (p_ref >= 0).sum() > 1000  # a real, deep tree
    assert (p_ref == p_vec).all()
    assert (last_ref == last_vec).all()
    assert (tree["parent"].to_numpy() == p_ref).all()
    depth_ref = np.zeros(len(p_ref), dtype=np.int64)
    for i, p in enumerate(p_ref.tolist()):  # a parent comes before its children
        if p >= 0:
            depth_ref[i] = depth_ref[p] + 1
    assert depth_ref.max() > 3
    assert (tree["depth"].to_numpy() == depth_ref).all()


def test_tree_links_equal_stack_sweep_on_random_intervals():
    """Random overlapping, touching and zero-length intervals on 1-4 threads (sorted as the tree
    sorts them): the vectorised parents and subtree ends are the stack sweep's, including the
    1 ns slack cases and threads of one event."""
    from nbprof.analysis._call_tree import _sweep_reference, _tree_links

    rng = np.random.default_rng(1)
    checked_parents = 0
    for _ in range(300):
        n = int(rng.integers(1, 400))
        thread = np.sort(rng.integers(0, rng.integers(1, 5), n))
        ts, dur = rng.integers(0, 100, n), rng.integers(0, 30, n)
        o = np.lexsort((-(ts + dur), ts, thread))
        thread, ts, end = thread[o], ts[o], (ts + dur)[o]
        p_ref, last_ref = _sweep_reference(thread, ts, end)
        p_vec, last_vec = _tree_links(thread, ts, end)
        assert (p_ref == p_vec).all() and (last_ref == last_vec).all()
        checked_parents += int((p_ref >= 0).sum())
    assert checked_parents > 10_000


@pytest.mark.parametrize("rel", [RESNET_NW0, "AMD-AGI__TraceLens/tests/traces/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz"])
def test_thread_time_order_equals_lexsort(rel):
    """The tree's row order (time-ordered rows: ties by -end, then a radix sort by thread) is lexsort's,
    on real events and on rows with many equal starts, including the unsorted fallback."""
    from nbprof.analysis._call_tree import _thread_time_order

    ev = nbprof.load(corpus_path(rel)).events
    pid, tid, ts = ev["pid"].to_numpy(), ev["tid"].to_numpy(), ev["ts_ns"].to_numpy()
    end = ts + ev["dur_ns"].to_numpy()
    assert (ts[1:] >= ts[:-1]).all() and len(np.unique(tid)) >= 3
    assert (_thread_time_order(pid, tid, ts, end) == np.lexsort((-end, ts, tid, pid))).all()
    rng = np.random.default_rng(0)
    n = 20_000
    ts = np.sort(rng.integers(0, 3_000, n))  # many runs of equal starts
    end = ts + rng.integers(0, 50, n)
    pid, tid = rng.integers(0, 3, n), rng.integers(-1, 7, n) * 1_000_003
    want = np.lexsort((-end, ts, tid, pid))
    assert (np.diff(ts) == 0).sum() > n // 2
    assert (_thread_time_order(pid, tid, ts, end) == want).all()
    shuffled = rng.permutation(n)
    got = _thread_time_order(pid[shuffled], tid[shuffled], ts[shuffled], end[shuffled])
    assert (got == np.lexsort((-end[shuffled], ts[shuffled], tid[shuffled], pid[shuffled]))).all()


def test_torch_211_profile_without_python_functions():
    """torch 2.11's key_averages() leaves python_function events out; python_functions=False matches it.

    The profile (CNN example, with_stack + verbose, shapes, memory) and torch 2.11's own
    key_averages() numbers were recorded together (data/cpu/make_cnn_stack_torch211.py).
    """
    base = ROOT / "data" / "cpu"
    with gzip.open(base / "cnn_stack_torch211.key_averages.json.gz", "rt") as f:
        theirs = pd.DataFrame(json.load(f)["key_averages"])
    trace = nbprof.load(base / "cnn_stack_torch211.pt.trace.json.gz")
    assert (trace.events["cat"] == "python_function").sum() > 3000
    ours = operator_summary(trace, python_functions=False)
    assert not (ours["cat"] == "python_function").any()
    m = theirs.merge(ours, on="name", how="outer", indicator=True)
    assert (m["_merge"] == "both").all(), m.loc[m["_merge"] != "both", "name"].tolist()
    assert (m["count_x"] == m["count_y"]).all()
    for us, ns in (("cpu_us", "total_host_ns"), ("self_cpu_us", "self_host_ns")):
        assert np.allclose(m[us] * 1000, m[ns], rtol=0.01, atol=1000), us
    assert (m["cpu_mem"] == m["host_mem_bytes"]).all()
    assert (m["self_cpu_mem"] == m["self_host_mem_bytes"]).all()
    # with the python frames as operators (torch 2.13's view) ProfilerStep* keeps less self time
    both = operator_summary(trace).set_index("name")
    step_self_211 = theirs.set_index("name").loc["ProfilerStep*", "self_cpu_us"] * 1000
    assert both.loc["ProfilerStep*", "self_host_ns"] < 0.5 * step_self_211
    # stacks still come from the python frames when they are not operators
    st = operator_summary(trace, group_by="stack", python_functions=False)
    conv = st[st["name"] == "aten::conv2d"]
    assert conv["stack"].str.contains("forward").all()
