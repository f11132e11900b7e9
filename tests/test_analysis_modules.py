"""Module tree vs torch-tb-profiler 0.4.3's Module view (the plugin parses the same files), and the Python call tree."""

from __future__ import annotations

import gzip
import json
import logging

import numpy as np
import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis import modules
from nbprof.results.operators_table import host_operators

tbp = pytest.importorskip("torch_tb_profiler.profiler.data", reason="torch-tb-profiler (test oracle) not installed")
from torch_tb_profiler.profiler.module_op import aggegate_module_view  # noqa: E402

#: CPU, torch 2.13, recorded with with_modules=True, with_stack=True, record_shapes=True (data/cpu/make_lm_modules.py)
LM_MODULES = DATA / "cpu" / "lm_modules.pt.trace.json.gz"
#: H200, torch 2.11, with_modules + with_stack (data/README.md): device time per module
LM_GPU = DATA / "gpu" / "lm_mem.pt.trace.json.gz"
#: CPU CNN with stacks (verbose config): module frames without with_modules
CNN_STACK = DATA / "cpu" / "cnn_stack_torch211.pt.trace.json.gz"


def _modernised(path):
    """The trace in 0.4.3's vocabulary: it parses ``Runtime`` (today ``cuda_runtime``/``cuda_driver``) and reads a
    runtime call without an ``External id`` as id ``None``, which its ``externalid_to_runtime.pop(op.external_id)``
    then hands to the first module frame (ModuleNode drops its id): 0 is the plugin's own "no operator" id
    (``event_parser.py``: runtimes with id 0 go to the root)."""
    with gzip.open(path, "rb") as f:
        raw = json.loads(f.read())
    for e in raw["traceEvents"]:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            e["cat"] = "Runtime"
            args = e.setdefault("args", {})
            if args.get("External id") is None and args.get("external id") is None:
                args["External id"] = 0
    return raw


def _oracle(path):
    """The plugin's hierarchy as [(parent instance, instance)] and its statistics per instance:
    {instance: (calls, operators, host, self host, device, self device)} in µs."""
    logging.disable(logging.WARNING)
    try:
        prof = tbp.RunProfileData.from_json("worker0", "span", _modernised(path))
        prof.process()
        stats = aggegate_module_view(prof.tid2tree, prof.events)
    finally:
        logging.disable(logging.NOTSET)
    places, per_instance = [], {}

    def walk(ss, parent):
        for s in ss:
            places.append((parent, s.name))
            per_instance[s.name] = (s.occurences, s.operators, s.host_duration, s.self_host_duration,
                                    s.device_duration, s.self_device_duration)
            walk(s.children, s.name)

    walk(stats or [], None)
    return places, per_instance


_cache: dict = {}


def _load(path):
    if str(path) not in _cache:
        _cache[str(path)] = nbprof.load(path)
    return _cache[str(path)]


def _compare(path):
    """nbprof's module tree against the plugin's: the same places (parent, instance), and per instance the same
    calls and times (places compared as sets). The plugin keys statistics by instance and repeats them at every
    place of a shared instance (one rotary embedding under 36 attention layers); nbprof has one node per place,
    whose sum is the plugin's."""
    ours = modules.module_tree(_load(path))
    places, oracle = _oracle(path)
    by_id = dict(zip(ours["node_id"], ours["name"], strict=True))
    ours_places = [(by_id.get(p), n) for p, n in zip(ours["parent_id"], ours["name"], strict=True)]
    # the plugin lists a child once per call inside one parent call (ResNet's ReLU, called twice per block):
    # nbprof merges them into one node, so the places compare as sets
    assert len(set(ours_places)) == len(ours_places) > 0
    assert set(ours_places) == set(places)
    cols = ["calls", "operators", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns"]
    per = ours.groupby("name", sort=False)[cols].sum()
    assert set(per.index) == set(oracle)
    for name, r in per.iterrows():
        calls, ops, host, self_host, dev, self_dev = oracle[name]
        assert (r["calls"], r["operators"]) == (calls, ops), name
        # the plugin works in float µs of absolute timestamps (~5e12 µs: 1 ulp ~ 1 ns); nbprof in int ns
        tol = 2.0 * calls * (ops + 4)
        for c, theirs_us in zip(cols[2:], (host, self_host, dev, self_dev), strict=True):
            assert r[c] == pytest.approx(theirs_us * 1000, abs=tol), (name, c)
    return ours


def test_cpu_with_modules_trace_equals_tb_plugin():
    df = _compare(LM_MODULES)
    assert df.loc[0, "name"] == "TinyLM_0" and df.loc[0, "depth"] == 0 and df.loc[0, "calls"] == 3
    assert df["module"].tolist().count("TransformerEncoderLayer") == 2
    mha = df[df["module"] == "MultiheadAttention"]
    assert (mha["depth"] == 3).all() and (mha["operators"] == 75).all()
    # a parent's total holds its children's; self is what is left
    for r in df.itertuples(index=False):
        kids = df[df["parent_id"] == r.node_id]
        assert r.host_total_ns >= kids["host_total_ns"].sum() + r.host_self_ns - 2 * r.calls * (r.operators + 4)
    assert (df["device_total_ns"] == 0).all()  # CPU-only profile


def test_gpu_trace_device_times_equal_tb_plugin():
    df = _compare(LM_GPU)
    root = df.iloc[0]
    assert root["name"] == "TinyLM_0"
    # the plugin's numbers for this file: device 359.0557 µs, self device 8.2236 µs (sums of float µs durations
    # of absolute timestamps); nbprof's int ns sums
    assert root["device_total_ns"] == 359_064 and root["device_total_ns"] == pytest.approx(359_055.7, abs=20)
    assert root["device_self_ns"] == 8_224
    # device total = own + children's
    kids = df[df["parent_id"] == root["node_id"]]
    assert root["device_total_ns"] == root["device_self_ns"] + kids["device_total_ns"].sum()


def test_module_frames_without_with_modules():
    """with_stack alone records module frames too (the Python tracer): the CNN's tree."""
    df = _compare(CNN_STACK)
    assert set(df.loc[df["depth"] == 0, "name"]) == {"SmallCNN_0", "CrossEntropyLoss_0"}
    assert df.set_index("name").loc["Conv2d_1", "path"] == "SmallCNN_0/Sequential_0/Conv2d_1"


#: public traces with nn.Module frames (AMD-AGI/TraceLens tests): H100 BERT and Qwen inference, B200 GPT-OSS
#: (one rotary embedding shared by 36 layers), MI300 DDP ResNet-18 training, a normalization-layer test
CORPUS_MODULES = [
    "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz",
    "AMD-AGI__TraceLens/tests/traces/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz",
    "AMD-AGI__TraceLens/tests/traces/perf_model/normalization/normalization_layer_test.json.gz",
]


@pytest.mark.parametrize("rel", CORPUS_MODULES, ids=lambda r: r.split("/")[-1].split("__")[0][:24])
def test_corpus_traces_equal_tb_plugin(rel):
    df = _compare(corpus_path(rel))
    assert (df["host_self_ns"] >= 0).all() and (df["device_total_ns"] >= df["device_self_ns"]).all()
    # a node's device total = its own operators' + its children's (the tree adds up)
    kids = df[df["parent_id"] >= 0].groupby("parent_id")["device_total_ns"].sum()
    tot = df.set_index("node_id")
    assert (tot.loc[kids.index, "device_total_ns"] == tot.loc[kids.index, "device_self_ns"] + kids).all()


def test_shared_instance_is_one_node_per_place():
    df = _compare(corpus_path(CORPUS_MODULES[2]))
    rope = df[df["name"] == "YaRNScalingRotaryEmbedding_0"]
    assert len(rope) == 36 and (rope["calls"] == 1).all()
    assert rope["path"].str.contains("/OAIAttention_").all()


def test_no_module_frames_is_empty_with_the_same_columns():
    t = _load(DATA / "cpu" / "lm.pt.trace.json.gz")
    assert not modules.has_module_frames(t)
    df = modules.module_tree(t)
    assert df.empty and list(df.columns) == modules.MODULE_COLUMNS
    cs = modules.call_stack(t)
    assert cs.empty and list(cs.columns) == modules.CALL_STACK_COLUMNS
    assert "with_modules=True" in modules.RECORD_HINT and "--with-modules" in modules.RECORD_HINT


def test_call_stack_tree_sums():
    t = _load(LM_MODULES)
    cs = modules.call_stack(t)
    py = t.events[t.events["cat"] == "python_function"]
    # every frame is a call of exactly one node; host totals add up to the frames' durations
    assert cs["calls"].sum() == len(py)
    assert cs["host_total_ns"].sum() == py["dur_ns"].sum()
    assert (cs["host_self_ns"] >= 0).all()
    # roots: self + children's totals == total, less what the clamp removed
    kids_total = cs.groupby("parent_id")["host_total_ns"].sum()
    clamped = cs.attrs["clamped_ns"]
    lhs = (cs["host_total_ns"] - cs["host_self_ns"]).sum() - kids_total.drop(-1, errors="ignore").sum()
    assert lhs == -clamped
    # the module frames are nodes of the call tree, with the module view's calls
    mods = modules.module_tree(t)
    frames = cs[cs["name"].str.startswith("nn.Module: ")]
    for name, calls in mods.groupby("name")["calls"].sum().items():
        assert frames.loc[frames["name"] == f"nn.Module: {name}", "calls"].sum() == calls
    # children of a node come right after it, deeper by one
    par = cs.set_index("node_id")["depth"]
    has_p = cs["parent_id"] >= 0
    assert (cs.loc[has_p, "depth"].to_numpy() == par.loc[cs.loc[has_p, "parent_id"]].to_numpy() + 1).all()
    assert (cs.loc[has_p, "parent_id"] < cs.loc[has_p, "node_id"]).all()


def test_call_stack_device_time_on_gpu_trace():
    t = _load(LM_GPU)
    cs = modules.call_stack(t)
    mods = modules.module_tree(t)
    root = cs[cs["name"] == "nn.Module: TinyLM_0"]
    assert root["device_total_ns"].sum() == mods.iloc[0]["device_total_ns"]
    # a root frame holds every kernel launched under Python frames, at most all device time
    dev = t.events[np.isin(t.events["cat"].astype(str), ["kernel", "gpu_memcpy", "gpu_memset"])]["dur_ns"].sum()
    assert 0 < cs.loc[cs["depth"] == 0, "device_total_ns"].sum() <= dev


def test_call_stack_max_nodes_keeps_parents():
    cs = modules.call_stack(_load(LM_MODULES), max_nodes=50)
    assert len(cs) == 50 and cs.attrs["total_nodes"] > 50
    assert set(cs.loc[cs["parent_id"] >= 0, "parent_id"]) <= set(cs["node_id"])


def test_operator_table_does_not_open_on_python_frames():
    """Issue 20: the default operator table is host operators, never Python frames."""
    from nbprof.analysis.operators import operator_summary
    from nbprof.viz.operators import operator_tables

    t = _load(LM_MODULES)
    host, _ = host_operators(operator_summary(t))
    assert not host["cat"].astype(str).eq("python_function").any()
    for df, _n in operator_tables(t).values():
        assert not df["cat"].astype(str).eq("python_function").any()


def _overrun_trace(tmp_path):
    """data/cpu/lm_modules with one Python frame's second child moved earlier so that the children overrun their
    parent by 3 µs (as a clock glitch between frames does): the parent's self time would be -3 µs."""
    with gzip.open(LM_MODULES, "rb") as f:
        raw = json.loads(f.read())
    py = [e for e in raw["traceEvents"] if e.get("cat") == "python_function"]
    kids: dict = {}
    for e in py:
        kids.setdefault(e["args"].get("Python parent id"), []).append(e)
    for p in py:
        ch = sorted(kids.get(p["args"]["Python id"], []), key=lambda e: e["ts"])
        if len(ch) < 2:
            continue
        self_us = p["dur"] - sum(c["dur"] for c in ch)
        c1, c2 = ch[0], ch[1]
        shift = self_us + 3.0
        if self_us > 0 and c2["ts"] - shift > c1["ts"] + 1 and c2["ts"] - shift < c1["ts"] + c1["dur"]:
            c2["ts"] = round(c2["ts"] - shift, 3)
            c2["dur"] = round(c2["dur"] + shift, 3)
            break
    else:
        raise AssertionError("no frame to perturb")
    out = tmp_path / "overrun.pt.trace.json"
    out.write_text(json.dumps(raw))
    return out, p["name"]


def test_call_stack_clamps_and_counts_an_overrun(tmp_path):
    path, parent_name = _overrun_trace(tmp_path)
    cs = modules.call_stack(nbprof.load(path))
    assert cs.attrs["clamped_calls"] == 1
    assert cs.attrs["clamped_ns"] == pytest.approx(3000, abs=3)  # µs with 3 decimals -> ns, each end rounds
    assert (cs["host_self_ns"] >= 0).all()
    row = cs[cs["self_clamped_calls"] > 0]
    assert len(row) == 1 and row["name"].iloc[0] == parent_name and row["host_self_ns"].iloc[0] == 0
    # the identity of the tree holds once the clamp is counted back
    kids_total = cs.groupby("parent_id")["host_total_ns"].sum().drop(-1, errors="ignore").sum()
    assert (cs["host_total_ns"] - cs["host_self_ns"]).sum() - kids_total == -cs.attrs["clamped_ns"]
