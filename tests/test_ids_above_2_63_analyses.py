"""Ids above 2**63-1 are stored as their int64 bit pattern, i.e. negative (``nbprof.trace.ids``): the
analyses treat only ``-1`` as a missing id (``ids.present``), so a trace whose every id is moved above
2**63-1 gives the analyses' results of the original, link for link.

The trace is the real H100 BERT trace of the corpus (the one of the ids export test in
test_kineto_byte_exact_repairs.py), every ``correlation``, ``External id`` and flow id moved by 2**63
(External id 0, the root, left as it is)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from _support.traces import ids_above_2_63

import nbprof
from nbprof.trace import ids

BERT = "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.fixture(scope="module")
def pair(tmp_path_factory, corpus):
    src = corpus(BERT)
    with gzip.open(src) as f:
        doc = ids_above_2_63(json.load(f))
    moved = tmp_path_factory.mktemp("u64") / "u64.pt.trace.json"
    moved.write_text(json.dumps(doc))
    a, b = nbprof.load(src), nbprof.load(moved)
    k = b.events[b.events["cat"] == "kernel"]
    assert len(k) == 60 and (k["correlation"] < 0).all()  # every kernel's id is stored negative
    return a, b


def _same(fa: pd.DataFrame, fb: pd.DataFrame) -> None:
    """Equal but for the id columns (their stored values differ by design)."""
    drop = [c for c in fa.columns if "correlation" in c or "external_id" in c]
    pd.testing.assert_frame_equal(fa.drop(columns=drop).reset_index(drop=True),
                                  fb.drop(columns=drop).reset_index(drop=True))


def test_present_is_everything_but_the_missing_id():
    stored = np.array([-1, 0, 5, -(2**63), -2, 2**63 - 1], dtype=np.int64)
    assert ids.present(stored).tolist() == [False, True, True, True, True, True]
    assert ids.MISSING == -1


def test_kernel_launch_and_operator_links_survive_ids_above_2_63(pair):
    from nbprof.analysis import kernels, launch, launch_ops, operators

    a, b = pair
    ka, kb = kernels.kernel_operators(a), kernels.kernel_operators(b)
    _same(ka, kb)
    assert int(kb["launched"].sum()) == 60  # every kernel finds its launch (was 0)
    la, lb = launch.launch_stats(a), launch.launch_stats(b)
    _same(la, lb)
    assert len(lb) == 61  # 60 kernels + 1 memcpy, each with its runtime call (was 0)
    _same(launch_ops.aten_op_kernels(a), launch_ops.aten_op_kernels(b))
    assert len(launch_ops.aten_op_kernels(b)) == 13  # was empty
    oa, ob = operators.operator_summary(a), operators.operator_summary(b)
    _same(oa, ob)
    assert int(ob["self_device_ns"].sum()) == int(oa["self_device_ns"].sum()) > 0
    _same(kernels.kernel_summary(a), kernels.kernel_summary(b))


def test_steps_utilization_modules_and_work_survive_ids_above_2_63(pair):
    from nbprof.analysis import modules, steps, utilization
    from nbprof.analysis.efficiency import work_models

    a, b = pair
    wa, wb = steps.step_windows(a), steps.step_windows(b)
    _same(wa, wb)
    assert int(wb["device_ops"].sum()) == 61  # was 0: no device op joined its step
    _same(steps.step_breakdown(a), steps.step_breakdown(b))
    da, db = utilization.device_ops(a), utilization.device_ops(b)
    _same(da, db)
    assert (db["runtime_ts_ns"] >= 0).sum() == 61  # each device op with its runtime call (was none)
    _same(utilization.gpu_utilization(a), utilization.gpu_utilization(b))
    ma, mb = modules.module_tree(a), modules.module_tree(b)
    _same(ma, mb)
    assert int(mb["device_total_ns"].max()) > 0  # was 0 for 75 of the 84 modules
    _same(work_models.kernel_work(a), work_models.kernel_work(b))
    assert len(work_models.kernel_work(b)) == 58  # was empty


def test_sql_launch_latency_example_keeps_ids_above_2_63(pair):
    pytest.importorskip("duckdb")
    a, b = pair
    q = ("SELECT k.name, k.ts_ns - r.ts_ns AS launch_ns FROM kernels k JOIN runtime r USING (correlation) "
         "WHERE k.correlation <> -1 ORDER BY k.ts_ns")
    ra, rb = a.sql(q), b.sql(q)
    assert len(ra) == 60
    pd.testing.assert_frame_equal(ra, rb)


def test_critical_path_links_survive_ids_above_2_63(pair):
    from nbprof.analysis.critical_path import whole_graph

    a, b = pair
    ea, eb = whole_graph(a).edges_frame(), whole_graph(b).edges_frame()
    kinds_a = ea.groupby("kind").size().to_dict()
    assert kinds_a == {"device": 61, "host": 1223, "launch": 61, "stream": 60, "sync": 2}
    assert eb.groupby("kind").size().to_dict() == kinds_a
