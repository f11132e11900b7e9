"""One step time per page (issue 31): the comparison, its table, the diff view and the regression gate all take
step durations from ``nbprof.analysis.steps.step_times`` (the ``step_windows`` durations)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis import compare, steps
from nbprof.analysis.before_after import before_after
from nbprof.results.compare_render import before_after_sentence, side_by_side_table
from nbprof.trace import predicates as pred

NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NW4 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"

_MS = re.compile(r"(\d[\d,]*\.\d+)\s*ms")


def _page(a, b) -> str:
    """The report's compare section and the diff view below it, as text: step 3's sentence and tables, the diff
    view's summary and its static Bokeh document (the waterfall's bar labels)."""
    from bokeh.embed import json_item

    from nbprof.viz.compare import compare_view, static_view

    cmp = compare.compare(a, b)
    parts = [before_after_sentence(before_after(a, b)),
             side_by_side_table(cmp.steps, "before", "after", caption="Step time").html,
             side_by_side_table(cmp.breakdown, "before", "after", caption="Average step breakdown").html,
             compare_view(a, b).text, json.dumps(json_item(static_view([a, b])))]
    return "\n".join(re.sub(r"<[^>]+>", " ", p) for p in parts)


def _mean_step_values(page: str) -> set[float]:
    """Every number (ms) the page gives as a mean step time: the sentence's "takes X ms instead of Y ms", the
    diff view's "Mean step time before X, after Y", the table's "mean step" row and the waterfall's first and
    last bars (the step bars' labels in the Bokeh document)."""
    vals: set[float] = set()
    for m in re.finditer(r"takes ([\d.,]+) ms instead of ([\d.,]+) ms", page):
        vals |= {float(m.group(1).replace(",", "")), float(m.group(2).replace(",", ""))}
    for m in re.finditer(r"Mean step time before ([\d.,]+) ms, after ([\d.,]+) ms", page):
        vals |= {float(m.group(1).replace(",", "")), float(m.group(2).replace(",", ""))}
    for m in re.finditer(r"mean step\s+([\d.,]+)\s+([\d.,]+)", page):
        vals |= {float(m.group(1).replace(",", "")), float(m.group(2).replace(",", ""))}
    return vals


@pytest.mark.parametrize("pair", ["tb_plugin_resnet50", "cnn_prep"])
def test_the_mean_step_time_of_each_side_appears_with_one_value(pair):
    if pair == "tb_plugin_resnet50":
        a, b = nbprof.load(corpus_path(NW0)), nbprof.load(corpus_path(NW4))
    else:
        a = nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")
        b = nbprof.load(DATA / "gpu" / "cnn_nw4_prep.pt.trace.json.gz")
    page = _page(a, b)
    vals = _mean_step_values(page)
    means = [float(steps.step_times(t).mean()) / 1e6 for t in (a, b)]
    assert vals, page[:2000]
    # the first screen's sentence gives the median step of each side, of the same step times
    med = re.search(r"median step ([\d.,]+) ms instead of ([\d.,]+) ms", page)
    assert med, page[:2000]
    assert [float(med.group(2).replace(",", "")), float(med.group(1).replace(",", ""))] == pytest.approx(
        [float(np.median(steps.step_times(t))) / 1e6 for t in (a, b)], abs=0.0006)
    # each printed mean is one of the two means (to the printed precision): no second definition anywhere
    for v in vals:
        assert min(abs(v - m) for m in means) < 0.006, (v, means)
    for m in means:
        assert any(abs(v - m) < 0.006 for v in vals)
        assert f"{m:.3f} ms" in page  # the diff view's waterfall bar and its summary, to the µs
    # the host ProfilerStep ranges' mean (the old compare.step_times) is not on the page when it differs
    for t, m in zip((a, b), means):
        host = float(t.events.loc[pred.is_step_row(t.events), "dur_ns"].mean()) / 1e6
        if abs(host - m) > 0.01:
            assert f"{host:.3f} ms" not in page and f"{host:.2f} ms" not in page


def test_check_gate_and_memory_growth_use_the_step_windows():
    """``nbprof check``'s samples and memory growth's steps are the step windows too."""
    tr = nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")
    w = steps.step_windows(tr)
    np.testing.assert_array_equal(steps.step_times(tr), (w.end_ns - w.start_ns).to_numpy())
    assert steps.step_times(tr).tolist() == steps.step_breakdown(tr).step_ns.tolist()
    from nbprof.analysis import memory

    g = memory.growth_by_step(tr)
    if len(g):
        assert set(g.step) <= set(w.step)
    import nbprof.analysis.regression as regression

    assert not hasattr(regression, "step_times") and getattr(compare, "step_times", steps.step_times) is steps.step_times
