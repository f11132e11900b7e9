"""The one table renderer (results.table), the default operator table, lazy subpackages, the dashboard verdict."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from _support.paths import DATA, ROOT, corpus_path

import nbprof
from nbprof.analysis import operators, utilization
from nbprof.results.compare_render import before_after_sentence, order_runs
from nbprof.results.operators_table import host_operators, operator_table
from nbprof.results.table import findings_table, table


def test_table_units_alignment_no_index_escaped():
    df = pd.DataFrame({"name": ["<b>x</b>"], "span_ns": [86567708], "utilization_ratio": [0.970362],
                       "bytes": [3 * 2**20], "ops": [1234]}, index=[7])
    t = table(df)
    assert ">span (ms)</th>" in t.html and "86.568" in t.html and "97.0%" in t.html and "3.00 MiB" in t.html
    assert "&lt;b&gt;x" in t.html and "<b>x" not in t.html
    assert ">7<" not in t.html  # no index column
    assert 'text-align:right">86.568' in t.html
    assert "1,234" in t.text and "_ns" not in t.text


def test_table_empty_has_no_header_and_placeholders_are_blank():
    t = table(pd.DataFrame({"a_ns": pd.Series(dtype="int64")}), caption="nsys rules")
    assert "<th" not in t.html and "nsys rules" in t.html
    t = table(pd.DataFrame({"addr": [-1], "free_ts_ns": [-1], "lifetime_ns": [np.nan]}), blank={"addr": -1})
    assert "-1" not in t.html and "nan" not in t.html.lower()


def test_never_freed_allocations_show_blanks():
    tr = nbprof.load(DATA / "gpu" / "lm_mem.pt.trace.json.gz")
    from nbprof.analysis import memory

    big = memory.largest_allocations(tr, 50)
    never = ~big["freed"].astype(bool)
    shown = big.assign(free_ts_ns=big["free_ts_ns"].where(~never), lifetime_ns=big["lifetime_ns"].where(~never))
    html = table(shown).html
    assert "-0.000" not in html and "-1" not in html


def test_findings_table_as_given_without_evidence_dicts():
    # the advisor's list as given (one ranking, issue 35: the table used to re-rank and drop a rule's second finding)
    tr = nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")
    from nbprof.analysis import advisor

    fs = advisor.advise(tr)
    t = findings_table(fs)
    assert t.rows == len(fs) and [r[1] for r in t.cells] == [f.title for f in fs]
    # the DataLoader fix: 21.1 of a 24.2 ms step, its range capped at the step (findings.Finding.saving_range_ns)
    assert "{" not in t.html and "next step" in t.html and "saves ~16\u201322 ms per step" in t.html


def test_utilization_table_has_no_raw_numbers():
    tr = nbprof.load(DATA / "gpu" / "lm_h200.pt.trace.json.gz")
    html = table(utilization.gpu_utilization(tr)).html
    assert "_ns" not in html and "utilization (%)" in html and "4.1%" in html


def test_operator_table_default_host_ops_by_device_time_python_frames_out():
    # the MI300X DDP trace was recorded with_stack: Python frames lead the raw summary by host time
    tr = nbprof.load(corpus_path("AMD-AGI__TraceLens/tests/traces/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz"))
    ops = operators.operator_summary(tr)
    assert (ops["cat"].astype(str) == "python_function").any()
    host, clamped = host_operators(ops)
    assert set(host["cat"].astype(str)) <= {"cpu_op", "user_annotation"}
    assert not host["name"].astype(str).str.startswith("ProfilerStep").any()
    assert (host["self_host_ns"] >= 0).all() and (host["self_device_ns"] >= 0).all()
    dev = host["total_device_ns"].to_numpy()
    assert (np.diff(dev) <= 0).all()  # by device total first
    # the analysis keeps key_averages' numbers; the clamp is reported where it applies
    neg = int((ops.loc[ops["cat"].astype(str).isin(["cpu_op", "user_annotation"]), "self_host_ns"] < 0).sum())
    assert clamped.rows >= neg
    t = operator_table(ops)
    assert "Host operators by device time" in t.html and "python_function" not in t.html


def test_operator_table_clamps_negative_self_and_says_so():
    ops = pd.DataFrame({"name": ["a", "b", "ProfilerStep#1", "f.py(1): g"], "cat": ["cpu_op", "cpu_op", "user_annotation",
                                                                                 "python_function"],
                        "count": [1, 1, 1, 1], "self_host_ns": [-73400, 10, 5, 99], "total_host_ns": [100, 10, 500, 999],
                        "self_device_ns": [0, 0, 0, 0], "total_device_ns": [5, 10, 50, 0]})
    host, clamped = host_operators(ops)
    assert list(host["name"]) == ["b", "a"] and clamped.rows == 1 and clamped.overrun_ns == 73400
    assert "1 self time below zero" in operator_table(ops).html and "73.40 µs" in str(clamped)


def test_cpu_profile_says_there_is_no_device_time():
    ops = pd.DataFrame({"name": ["a", "b"], "cat": ["cpu_op", "cpu_op"], "count": [1, 1], "self_host_ns": [5, 10],
                        "total_host_ns": [5, 10], "self_device_ns": [0, 0], "total_device_ns": [0, 0]})
    t = operator_table(ops)
    assert "no device time in this profile" in t.html and "device (ms)" not in t.html
    assert t.html.index(">b<") < t.html.index(">a<")


def test_compare_sign_on_the_real_before_after_pair():
    from nbprof.analysis import compare

    a = nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")
    b = nbprof.load(DATA / "gpu" / "cnn_nw4_prep.pt.trace.json.gz")
    c = compare.compare(a, b)
    assert c.steps.loc["mean_step_ns", "delta"] < 0  # b - a: the faster "after" gives a negative change
    # one claim of "faster": the median step's ratio with its bootstrap interval (analysis.before_after)
    from nbprof.analysis.before_after import before_after

    s = before_after_sentence(before_after(a, b))
    assert s == ("'after' vs 'before': 7.75x faster (median step 3.127 ms instead of 24.247 ms; "
                 "95 % interval 2.10x-11.39x faster, 6 and 6 steps).")
    assert order_runs(["after", "before"]) == ["before", "after"]


def test_lazy_subpackages():
    code = ("import sys, nbprof; assert 'nbprof.viz' not in sys.modules; "
            "print(nbprof.viz.timeline.__name__, nbprof.tensorboard.start.__name__, nbprof.deepspeed.attach.__name__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["timeline", "start", "attach"]
    with pytest.raises(AttributeError):
        nbprof.no_such_thing


def test_dashboard_opens_with_the_verdict():
    pytest.importorskip("ipywidgets")
    from nbprof.viz.dashboard import dashboard

    d = dashboard(nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"), views=("overview",))
    assert d.children[1] is d.verdict and "DataLoader-bound" in d.verdict.value and "Next step:" in d.verdict.value


def test_cpu_profile_sorted_by_device_time_says_there_is_none():
    from nbprof.capture.options import ProfileOptions
    from nbprof.results.profile import ProfileResult
    from nbprof.results.render import render

    r = ProfileResult(ProfileOptions(sort_by="cuda_time_total"))
    r.traces.append(nbprof.load(corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/cpu_only/"
                                            "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")))
    assert "no device time in this profile" in render(r, "text")
    assert "no device time in this profile" in render(r, "html")
    r = ProfileResult(ProfileOptions(sort_by="cuda_time_total"))
    r.traces.append(nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"))
    assert "no device time" not in render(r, "text")
