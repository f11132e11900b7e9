"""CUDA-graph attribution (nbprof.trace.graph_replay): replayed device ops mapped to the operators that captured them,
on the corpus's graph trace and on CPU-built replays made from a real V100 trace."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.analysis import kernels as K
from nbprof.analysis.operators import operator_summary
from nbprof.trace import predicates as pred
from nbprof.trace.graph_replay import graph_replays
from nbprof.trace.model import LoadReport, Trace

HTA_GRAPHS = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_diff/test/test.json.gz"
RESNET = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"


def _row(ev: pd.DataFrame, like: int, **cols: object) -> pd.DataFrame:
    r = ev.iloc[[like]].copy()
    for k, v in cols.items():
        if k == "name":
            r["name"] = pd.Categorical([v])
        else:
            r[k] = v
    return r


def make_replay(tr: Trace, replay_step: int, capture_step: int | None = None) -> tuple[Trace, dict]:
    """A copy of ``tr`` in which ``replay_step`` runs as one CUDA-graph replay: its host ops and launches are gone,
    one ``cudaGraphLaunch`` replaces them and every device op of the step carries the launch's correlation id (as
    CUPTI reports a replay). With ``capture_step``, that step becomes the capture: its launches stay between
    ``cudaStreamBeginCapture``/``cudaStreamEndCapture`` and its device ops are gone (a captured launch runs nothing).
    Returns the trace and, per replayed device op (ts_ns, stream), the operator the original trace gave it."""
    ev = tr.events.copy()
    ko = K.kernel_operators(tr)
    ts, corr = ev["ts_ns"].to_numpy(), ev["correlation"].to_numpy()
    devm = pred.is_device_op(ev)
    step = ev["step"].to_numpy()
    rep = np.flatnonzero(devm & (step == replay_step))
    orig_op = ko.set_index("event")["operator"]
    expect = {(int(ts[r]), int(ev["stream"].iat[r])): orig_op.get(r) for r in rep if r in orig_op.index}
    rt = pred.is_runtime(ev) & pred.is_host(ev)
    launches = np.flatnonzero(rt & np.isin(corr, corr[rep]))
    host_step = np.flatnonzero(pred.is_host(ev) & (step == replay_step) & ~pred.is_step_row(ev))
    c = int(corr.max()) + 1
    new = [_row(ev, int(launches[0]), name="cudaGraphLaunch", correlation=c, external_id=-1, dur_ns=10_000)]
    ev.loc[ev.index[rep], "correlation"] = c
    ev.loc[ev.index[rep], "external_id"] = -1
    drop = set(host_step.tolist())
    if capture_step is not None:
        cap_dev = np.flatnonzero(devm & (step == capture_step))
        cap_l = np.flatnonzero(rt & np.isin(corr, corr[cap_dev]))
        drop |= set(cap_dev.tolist())
        new.append(_row(ev, int(cap_l[0]), name="cudaStreamBeginCapture", correlation=c + 1, external_id=-1,
                        ts_ns=int(ts[cap_l[0]]) - 1000, dur_ns=500))
        new.append(_row(ev, int(cap_l[-1]), name="cudaStreamEndCapture", correlation=c + 2, external_id=-1,
                        ts_ns=int(ts[cap_l[-1]]) + 5000, dur_ns=500))
    ev = ev.drop(index=ev.index[sorted(drop)])
    names = list(ev["name"].cat.categories)
    for r in new:
        ev = pd.concat([ev, r])
    ev["name"] = pd.Categorical(ev["name"].astype(object), categories=names + [
        n for n in ("cudaGraphLaunch", "cudaStreamBeginCapture", "cudaStreamEndCapture") if n not in names])
    for col in ("cat", "ph"):
        ev[col] = pd.Categorical(ev[col].astype(object))
    ev = ev.sort_values("ts_ns", kind="stable").reset_index(drop=True)
    out = Trace(events=ev, flows=tr.flows.iloc[:0], memory=tr.memory.iloc[:0], counters=tr.counters,
                threads=tr.threads, meta=tr.meta, report=LoadReport(path="synthetic replay"), tables={})
    return out, expect


def _agreement(t: Trace, expect: dict) -> tuple[float, pd.DataFrame]:
    ko = K.kernel_operators(t)
    ev = t.events
    keys = list(zip(ev["ts_ns"].to_numpy()[ko["event"]].tolist(), ev["stream"].to_numpy()[ko["event"]].tolist(),
                    strict=True))
    ko = ko.assign(key=keys)
    rep = ko[ko["key"].isin(expect)]
    same = (rep["operator"].to_numpy() == np.array([expect[k] for k in rep["key"]], dtype=object)).mean()
    return float(same), rep


@pytest.fixture(scope="module")
def resnet(corpus):
    return nbprof.load(corpus(RESNET))


def test_sequence_match_on_a_replay_made_from_a_real_trace(resnet):
    t, expect = make_replay(resnet, replay_step=9)
    g = graph_replays(t)
    assert len(g) == 1516 and set(g["method"]) == {"sequence"}  # every device op of the step, aligned with step 5..8
    issue = t.report.get("cuda_graph_attribution")
    assert issue is not None and "match rate 100.0%" in issue.message and "1516 by sequence" in issue.message
    same, rep = _agreement(t, expect)
    assert len(rep) == 1462 and same == 1.0  # kernels: the operator eager profiling gave them
    assert set(rep["attribution"]) == {"sequence"}
    # the operator table puts the replay's device time back on aten ops (before: on nothing, the launch had no op)
    ops = operator_summary(t)
    conv = ops.loc[ops["name"] == "aten::cudnn_convolution", "total_device_ns"].sum()
    conv0 = operator_summary(resnet).loc[lambda d: d["name"] == "aten::cudnn_convolution", "total_device_ns"].sum()
    assert conv == conv0
    # the efficiency tables: each replay is one execution of the ops it captured, with their whole work
    from nbprof.analysis.efficiency import kernel_work

    kw, kw0 = kernel_work(t), kernel_work(resnet)
    assert len(kw) == len(kw0) == 8460 and np.isclose(kw["flops"].sum(), kw0["flops"].sum(), rtol=1e-9)


def test_capture_events_win_over_the_eager_sequence(resnet):
    t, expect = make_replay(resnet, replay_step=9, capture_step=8)
    g = graph_replays(t)
    assert set(g["method"]) == {"capture"} and len(g) == 1516
    ev = t.events
    # the operators are the capture step's (step 8), not an eager step's
    assert set(ev["step"].to_numpy()[g["op_event"].to_numpy()]) == {8}
    same, _ = _agreement(t, expect)
    assert same == 1.0
    assert "1516 by capture; match rate 100.0%" in t.report.get("cuda_graph_attribution").message


def test_hta_compiled_graph_trace_falls_back_to_graph_order(corpus):
    """HTA's trace_diff test trace: 12 replays of 2 graphs (torch.compile's cudagraphs of CompiledFunction forward and
    backward) with no capture in the window and no eager run of their kernels: every replayed op stays on the
    launch's operator, with its graph and node index, and the report says so (match rate 0%)."""
    t = nbprof.load(corpus(HTA_GRAPHS))
    g = graph_replays(t)
    assert len(g) == 5046 and g["launch"].nunique() == 12 and g["graph"].nunique() == 2
    assert set(g["method"]) == {"graph_order"}
    assert sorted(g.groupby("launch")["node"].max().add(1).unique().tolist()) == [339, 502]
    assert "match rate 0.0%" in t.report.get("cuda_graph_attribution").message
    ko = K.kernel_operators(t)
    rep = ko[ko["graph"] >= 0]
    assert len(rep) == 4464 and set(rep["attribution"]) == {"graph_order"}
    assert rep["operator"].value_counts().to_dict() == {"CompiledFunctionBackward": 2574, "CompiledFunction": 1890}


def test_no_graph_launch_no_table(resnet):
    assert "graph_replay" not in resnet.tables and resnet.report.get("cuda_graph_attribution") is None
    assert set(K.kernel_operators(resnet)["attribution"]) <= {"launch", "none"}


def test_module_view_keeps_a_replayed_steps_device_time():
    """nbprof's own H200 LM trace (with_modules): its last step replayed as a graph. The module tree's device time per
    module is the eager trace's (the replay's kernels land on the modules of the ops that ran them eagerly); without
    the attribution the step's 151 device ops would have no operator and every module would lose them."""
    from _support.paths import DATA

    from nbprof.analysis.modules import module_tree

    r = nbprof.load(DATA / "gpu" / "lm_mem.pt.trace.json.gz")
    t, _ = make_replay(r, r.steps[-1])
    assert "151 by sequence; match rate 100.0%" in t.report.get("cuda_graph_attribution").message
    m0 = module_tree(r).set_index("path")["device_total_ns"]
    m1 = module_tree(t).set_index("path")["device_total_ns"]
    assert m0.index.tolist() == m1.index.tolist() and (m0 == m1).all() and m0["TinyLM_0"] == 359064


def test_capture_in_a_separate_trace(resnet):
    """vLLM/SGLang capture their graphs at start-up in a trace of their own: the replay trace (here the replayed step
    without its capture) is attributed from the capture trace (here one holding the capture), by order."""
    from nbprof.analysis.graph_capture import capture_trace_attribution

    replay, expect = make_replay(resnet, replay_step=9)
    capture, _ = make_replay(resnet, replay_step=9, capture_step=8)
    a = capture_trace_attribution(replay, capture)
    assert len(a) == 1516 and (a["capture_launch"] >= 0).all()
    ev = replay.events
    keys = list(zip(ev["ts_ns"].to_numpy()[a["event"]].tolist(), ev["stream"].to_numpy()[a["event"]].tolist(),
                    strict=True))
    kern = [i for i, k in enumerate(keys) if k in expect]
    assert len(kern) == 1516 - 54  # 54 memsets/memcpys have no kernel-view operator to compare with
    assert all(a["operator"].iat[i] == expect[keys[i]] for i in kern)
    assert set(capture.events["step"].to_numpy()[a["capture_op_event"]]) == {8}


def test_a_kept_table_of_other_rows_is_redone(corpus):
    """A trace rebuilt with another trace's side tables (a merge copies Kineto's) recomputes the attribution."""
    t = nbprof.load(corpus(HTA_GRAPHS))
    ev = t.events.iloc[10:].reset_index(drop=True)  # every row moves
    t2 = Trace(events=ev, flows=t.flows, memory=t.memory, counters=t.counters, threads=t.threads, meta=t.meta,
               report=LoadReport(path="shifted"), tables=dict(t.tables))
    g2 = t2.tables["graph_replay"]
    assert len(g2) == 5046 and (g2["event"].to_numpy() == t.tables["graph_replay"]["event"].to_numpy() - 10).all()
    assert t2.report.get("cuda_graph_attribution") is not None
