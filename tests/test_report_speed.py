"""Issue 20: each analysis once per Trace, the report in one kernel, sortable offline tables, finding -> timeline links.

Real data: the H200 num_workers=0 CNN trace of data/gpu (DataLoader-bound), real papermill kernels.
"""

from __future__ import annotations

import re

import nbformat
import numpy as np
import pandas as pd
import pytest
from _support.paths import DATA

import nbprof
from nbprof.analysis import advisor, evidence, operators, steps
from nbprof.report import Artefacts, build_report
from nbprof.results import table as table_mod

TRACE = DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"
EXTERNAL_SCRIPT = re.compile(r"<script[^>]*\bsrc=[\"']?https?:", re.I)


@pytest.fixture(scope="module")
def tr():
    return nbprof.load(TRACE)


def test_analyses_run_once_per_trace(tr):
    first = advisor.advise(tr)
    again = advisor.advise(tr)
    assert first and all(a is b for a, b in zip(first, again, strict=True))  # the same findings, not a rerun
    bd = steps.step_breakdown(tr)
    bd["step_ns"] = -1  # the caller's copy: the memo keeps its own frame (copy-on-write)
    assert (steps.step_breakdown(tr)["step_ns"] > 0).all()
    ops = operators.operator_summary(tr)
    assert operators.operator_summary(tr).equals(ops)
    assert "shapes" not in ops.columns and "input_dims" in operators.operator_summary(tr, group_by="shapes").columns
    # a Trace with another events frame starts afresh (its numbers are its own)
    import dataclasses

    half = dataclasses.replace(tr, events=tr.events.iloc[: len(tr.events) // 2].reset_index(drop=True))
    assert int(steps.step_breakdown(half)["step_ns"].sum()) != int(steps.step_breakdown(tr)["step_ns"].sum())


def test_evidence_interval(tr):
    f = next(f for f in advisor.advise(tr) if f.evidence_rows)
    lo, hi = evidence.interval(tr, f.evidence_rows)
    ev = tr.events.iloc[f.evidence_rows]
    assert lo < int(ev["ts_ns"].min()) and hi > int((ev["ts_ns"] + ev["dur_ns"]).max())
    one = evidence.interval(tr, f.evidence_rows, top=1, pad_ratio=0.5)
    r0 = tr.events.iloc[f.evidence_rows[0]]
    d = int(r0["dur_ns"])
    assert one == (int(r0["ts_ns"]) - max(d // 2, 1000), int(r0["ts_ns"]) + d + max(d // 2, 1000))
    assert evidence.interval(tr, []) is None and evidence.interval(tr, [len(tr.events) + 5]) is None


def test_datatable_sorts_by_raw_numbers():
    df = pd.DataFrame({"name": ["a<b", "c", "d"], "dur_ns": [1_500_000, 12_000_000, 300_000],
                       "size_bytes": [2048, 5 * 2**20, 10]})
    t = table_mod.table(df, caption="sizes <x>")
    assert t.heads == ["name", "dur (ms)", "size"] and t.cells[1] == ["c", "12.000", "5.00 MiB"]
    assert t.raw[0] is None and t.raw[2] == [2048.0, 5242880.0, 10.0]
    h = t.datatable_html()
    assert '"orderData": [3]' in h and '"orderData": [4]' in h and "a&lt;b" in h and "a<b" not in h
    assert not EXTERNAL_SCRIPT.search(h) and "sizes &lt;x&gt;" in h
    assert t.html in h and "_sort_1</th>" not in h.split("<script")[0]  # the no-JavaScript form is the plain table
    assert "trusted" not in table_mod.datatables_init_html()
    assert table_mod.datatables_init_html().count("_itables_") >= 1
    try:
        assert table_mod.use_datatables(True)
        assert "new ITable" in t._repr_html_()
    finally:
        table_mod.use_datatables(False)
    assert t._repr_html_() == t.html


def test_report_one_kernel_tables_and_links(tmp_path):
    pytest.importorskip("itables", reason="itables (the report extra) not installed")
    html_path = build_report(Artefacts(trace=str(TRACE)), tmp_path, progress=False,
                             notebooks=["01_system_nsys.ipynb", "02_operators_pytorch.ipynb"])
    html = html_path.read_text(encoding="utf-8")
    # one kernel: step 2's cells continue step 1's execution count
    counts = {}
    for name in ("01_system_nsys.ipynb", "02_operators_pytorch.ipynb"):
        nb = nbformat.read(html_path.parent / name, 4)
        counts[name] = [c.execution_count for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbprof_step") == name]
        assert not any("report_verdict" in c.source for c in nb.cells)  # the report's own cell is not kept
    assert min(counts["02_operators_pytorch.ipynb"]) > max(counts["01_system_nsys.ipynb"])
    # sortable tables, offline: the itables bundle inline once, tables as DataTables, no script from the network
    assert html.count("generate_init_offline") == 0 and "window._itables_" in html
    assert html.count("new ITable(") >= 5 and not EXTERNAL_SCRIPT.search(html)
    assert "Host operators by device time" in html
    # the findings link to the timeline at their evidence
    links = re.findall(r'<a class="nbprof-zoom" href="#nbprof-timeline" data-x0-ms="([-\d.e]+)" '
                       r'data-x1-ms="([-\d.e]+)">show on the timeline', html)
    assert links and all(float(a) < float(b) for a, b in links)
    assert 'id="nbprof-timeline"' in html and "get_model_by_name(\"nbprof_timeline\")" in html
    tr = nbprof.load(TRACE)

    f = next(f for f in [f for f in advisor.advise(tr) if f.quantified][:3] if f.evidence_rows)
    lo, hi = evidence.interval(tr, f.evidence_rows, top=1, pad_ratio=0.5)  # the strongest evidence event
    assert np.isclose(float(links[0][0]), lo / 1e6) and np.isclose(float(links[0][1]), hi / 1e6)
