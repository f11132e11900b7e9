"""The verdict's "Largest" list (issue 30) names the bound's events by self time: ``operators.event_self_ns``, the
``self_host_ns`` of ``operator_summary(python_functions=False)`` per event, not a second definition. A range that
wraps the bound's other events (``## backward ##`` while the autograd thread runs the backward ops, an
``Optimizer.step#...`` around its ops) and the ``ProfilerStep#N`` annotation never head it.

Before: HTA's ``rank_non_gpu`` trace read "Largest: ## backward ## 34.160 ms (1×), ## forward ## 19.324 ms (1×),
## forward:over_arch ## 10.333 ms (1×)" (inclusive times of three user ranges); data/gpu's lm_h200 read
"Optimizer.step#AdamW.step 4.926 ms (3×), autograd::engine::evaluate_function: AddmmBackward0 4.133 ms (21×), ..." (a
wrapper, then a backward node and, elsewhere, its own child AddmmBackward0 counted twice).
"""

from __future__ import annotations

import re

import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis.operators import operator_summary
from nbprof.analysis.verdict import verdict
from nbprof.results.verdict import verdict_html

HTA = "facebookresearch__HolisticTraceAnalysis/tests/data/"


def _largest(v) -> str:
    m = re.search(r"Largest \(self time\): (.*?)</div>", verdict_html(v, []))
    assert m, verdict_html(v, [])
    return re.sub(r"<[^>]+>", "", m.group(1))


def _self_by_name(tr) -> dict[str, int]:
    s = operator_summary(tr, python_functions=False)
    return dict(zip(s["name"].astype(str), s["self_host_ns"].astype(int), strict=True))


def test_user_ranges_around_the_work_are_not_the_largest_hta_cpu_trace():
    tr = nbprof.load(corpus_path(HTA + "rank_non_gpu/rank_non_gpu.json.gz"))
    v = verdict(tr)
    assert v.bound == "host"
    names = [c.name for c in v.contributors]
    assert names == ["aten::copy_", "aten::_local_scalar_dense", "aten::addmm"], names
    # the one step holds every call: each self time is operator_summary's, to the ns
    own = _self_by_name(tr)
    assert [c.self_ns for c in v.contributors] == [own[n] for n in names] == [5_999_000, 4_819_000, 4_149_000]
    text = _largest(v)
    assert text.startswith("aten::copy_ 5.999 ms (69×)") and "##" not in text, text


def test_a_range_waiting_for_the_autograd_thread_is_not_the_largest():
    """``## backward ##`` on the main thread lasts 235 ms while the autograd thread runs the backward ops: its self
    time (464 ms over two steps, nothing of its own thread under it) is their wait, not a cause."""
    tr = nbprof.load(corpus_path(HTA + "trace_filter/sampled_rank-0.json.gz"))
    v = verdict(tr)
    own = _self_by_name(tr)
    assert own["## backward ##"] > max(c.self_ns for c in v.contributors)  # it would head a list by self time
    assert not any(c.name.startswith("##") or c.name.startswith("Optimizer.step#") for c in v.contributors), \
        v.contributors
    assert v.contributors[0].name == "aten::_foreach_mul_" and v.contributors[0].self_ns == own["aten::_foreach_mul_"]


def test_optimizer_range_and_steps_never_contribute_lm_h200():
    tr = nbprof.load(DATA / "gpu" / "lm_h200.pt.trace.json.gz")
    v = verdict(tr)
    assert v.bound == "host"
    names = [c.name for c in v.contributors]
    assert names[0] == "aten::mm" and v.contributors[0].self_ns == 2_503_658, v.contributors
    assert not any(n.startswith(("Optimizer.step#", "ProfilerStep#", "autograd::engine")) for n in names), names
    assert _largest(v).startswith("aten::mm 2.504 ms (60×)")


@pytest.mark.parametrize("name", ["cnn_nw0_prep.pt.trace.json.gz"])
def test_a_dataloader_wait_is_named_by_its_own_time(name):
    """The DataLoader range wraps no other event of its bound: it stays, with its self time (its collate's ops out)."""
    tr = nbprof.load(DATA / "gpu" / name)
    v = verdict(tr)
    assert v.bound == "dataloader"
    (c,) = v.contributors
    assert c.name.startswith("enumerate(DataLoader)#") and c.count == 6
    assert c.self_ns == _self_by_name(tr)[c.name]  # every call inside the steps: operator_summary's self time
