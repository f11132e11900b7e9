"""One test per problem listed in issue 20 that had none (the others are named below), on real traces.

Already tested elsewhere (kept there):

- temp trace copies removed, executed notebooks removed with ``-o``: test_report.py
  ``test_report_to_a_file_and_step_4_on_one_ddp_rank``; nothing left next to ``-o FILE``: test_html_clean.py;
- raw integers / index columns / object reprs / warnings in the report: test_report.py ``assert_clean``,
  test_html_clean.py (every HTML nbprof writes);
- the same finding shown once per rule: test_verdict.py ``test_findings_ranked_by_predicted_saving_and_deduplicated``;
- no "Device memory" section in a report without memory events: test_report.py ``test_report_on_existing_artefacts``;
- ``--sort-by cuda_time_total`` on a CPU profile: test_results_tables.py
  ``test_cpu_profile_sorted_by_device_time_says_there_is_none``;
- a bad ``--trace`` rejected before any kernel, no half-made folder: test_report.py
  ``test_bad_trace_is_rejected_before_any_notebook``;
- negative self times clamped: test_results_tables.py ``test_operator_table_clamps_negative_self_and_says_so``;
- page reload: test_browser_reload.py; the compare delta's sign: test_report.py.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.analysis import memory
from nbprof.results.table import findings_table, table
from nbprof.viz import registry

V100_NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"


def test_nsys_summaries_without_rows_are_left_out(tmp_path):
    from nbprof.results.nsys import NsysResult

    dst = tmp_path / "saxpy.sqlite"  # a private copy of the corpus file
    shutil.copyfile(corpus_path("hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"), dst)
    res = NsysResult(nbprof.load(dst))
    empty = [k for k, df in res.summaries.items() if not len(df)]
    full = [k for k, df in res.summaries.items() if len(df)]
    assert full, res.summaries.keys()
    bundle = res._repr_mimebundle_()
    for k in full:  # in human units: "total (ms)", never "total_ns"
        assert f"{k} ({len(res.summaries[k])} rows)" in bundle["text/html"] and f"\n{k}:\n" in bundle["text/plain"]
    assert "total (ms)" in bundle["text/html"] and "_ns<" not in bundle["text/html"]
    for k in empty:
        assert f"{k} (0 rows)" not in bundle["text/html"] and f"\n{k}:\n" not in bundle["text/plain"]


def test_a_findings_table_without_rows_is_a_sentence_not_a_header():
    t = findings_table([], caption="Expert rules")
    assert "<th" not in t.html and "nothing flagged" in t.html and t.rows == 0


@pytest.mark.parametrize("path", [DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz", DATA / "gpu" / "cnn_nw4_prep.pt.trace.json.gz"])
def test_no_blank_device_memory_plot_without_memory_events(path):
    from bokeh.models import Div, Plot

    tr = nbprof.load(path)
    assert len(tr.memory) == 0
    for lay in (registry.static("memory", tr), registry.live("memory", tr).bokeh_layout):
        assert not [m for m in lay.references() if isinstance(m, Plot)], "a blank plot is drawn"
        texts = [m.text for m in lay.references() if isinstance(m, Div)]
        assert any("No memory events in this trace" in t for t in texts), texts


def test_never_freed_allocations_show_blanks_not_placeholders():
    from bokeh.models import DataTable

    tr = nbprof.load(corpus_path(V100_NW0))  # 2021 trace: no addresses, allocations never paired with a free
    big = memory.largest_allocations(tr, 20)  # the view's default rows
    assert (big["addr"] == -1).all() and (big["free_ts_ns"] == -1).all() and not big["freed"].any()
    # the report's table (02_operators_pytorch: table(big, {"addr": "text"}))
    t = table(big.drop(columns=["device_type"]), {"addr": "text"}, caption="Largest allocations")
    rows = t.text.splitlines()[2:]
    assert rows and all(" -1 " not in r and "-0.000" not in r for r in rows), t.text
    assert "<td style=\"text-align:left\"></td>" in t.html  # the address cell is blank
    # the memory view's table: blank address, "never freed" as the free time, no "None"
    lay = registry.static("memory", tr)
    (dt,) = [m for m in lay.references() if isinstance(m, DataTable)]
    cols = {c.field: c for c in dt.columns}
    assert "freed" not in cols and "device_type" not in cols
    assert cols["free_ts_ns"].title == "freed at (ms)" and cols["free_ts_ns"].formatter.nan_format == "never freed"
    assert np.isnan(dt.source.data["free_ts_ns"]).all() and np.isnan(dt.source.data["addr"]).all()
    assert cols["addr"].formatter.nan_format == "" and "None" not in list(dt.source.data["annotation"])
    assert (dt.source.data["bytes"] == big["bytes"].to_numpy() / 2**20).all()


def test_paired_allocations_keep_their_numbers():
    from bokeh.models import DataTable

    tr = nbprof.load(DATA / "gpu" / "lm_mem.pt.trace.json.gz")
    big = memory.largest_allocations(tr, 20)
    (dt,) = [m for m in registry.static("memory", tr).references() if isinstance(m, DataTable)]
    freed = big["freed"].to_numpy(bool)
    assert freed.any()
    got = dt.source.data["free_ts_ns"]
    assert np.allclose(got[freed], big["free_ts_ns"].to_numpy()[freed] / 1e6)
    assert (dt.source.data["addr"][freed] == big["addr"].to_numpy()[freed]).all()


@pytest.mark.parametrize("path", [DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz", DATA / "cpu" / "cnn_nw0.pt.trace.json.gz",
                                  DATA / "gpu" / "lm_h200.pt.trace.json.gz"])
def test_operators_chart_has_no_profiler_step_and_an_axis_unit(path):
    from bokeh.models import FactorRange, Plot

    tr = nbprof.load(path)
    for lay in (registry.static("operators", tr), registry.live("operators", tr).bokeh_layout):
        (chart,) = [m for m in lay.references() if isinstance(m, Plot) and isinstance(m.y_range, FactorRange)]
        factors = list(chart.y_range.factors)
        assert len(factors) >= 5 and not any("ProfilerStep" in str(f) for f in factors), factors
        assert any(u in chart.xaxis[0].axis_label for u in ("(µs)", "(ms)", "(s)", "(%)")), chart.xaxis[0].axis_label


def test_table_headers_have_units_and_no_index():
    df = pd.DataFrame({"name": ["a"], "span_ns": [86567708], "utilization_ratio": [0.970362]}, index=[7])
    t = table(df)
    assert "span (ms)" in t.html and "86.568" in t.html and "97.0%" in t.html
    assert ">7<" not in t.html and "span_ns" not in t.html


def test_every_live_view_carries_the_bokehjs_loader():
    # what makes a view render in a page opened after BokehJS was loaded (test_browser_reload.py runs it)
    import bokeh
    from bokeh.resources import INLINE

    from nbprof.viz._bokehjs import loader_widget

    tr = nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")
    views = [registry.live(n, tr) for n in ("overview", "operators")]
    for v in views:
        assert v.children[0] is loader_widget() and v.children[-1] is v.bokeh_widget
    (out,) = loader_widget().outputs
    js = out["data"]["application/javascript"]
    assert f'const want = "{bokeh.__version__}";' in js and "B.Tables !== undefined" in js
    import json

    assert json.loads(js.split("const sources = ", 1)[1].split(";\n  for (const src", 1)[0]) == list(INLINE.js_raw)
    assert "http://" not in js.split("const sources")[0] and "cdn.bokeh.org" not in js  # offline: inline only
