"""The GPU Kernel and module / call-stack tables sort by numbers (issue 20), at the Bokeh model level.

Each numeric column's field is the raw number (ns, bytes, count) and its cell shows the ``<field>_text`` twin
(``nbprof.units``) through an escaping template; the tables are sortable, the tree's name column is not. The
browser side (a header click orders the rows numerically) is tests/test_browser_table_sorting.py.
"""

from __future__ import annotations

import numpy as np
from _support.paths import DATA

import nbprof
from nbprof.analysis import kernels, modules
from nbprof.units import fmt_ns
from nbprof.viz import registry


def _model(lay, name):
    return next(m for m in lay.references() if getattr(m, "name", None) == name)


def _columns(table):
    return {c.title: c for c in table.columns}


def test_kernel_tables_carry_numbers_and_show_their_text():
    from bokeh.models import HTMLTemplateFormatter

    tr = nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz")
    kt = kernels.kernel_table(tr)
    lay = registry.static("kernels", tr)
    table = _model(lay, "nbprof_kernel_table")
    assert table.sortable
    cols = _columns(table)
    total = cols["Total duration"]
    assert total.field == "total_ns" and total.sortable
    assert isinstance(total.formatter, HTMLTemplateFormatter) and "<%- total_ns_text %>" in total.formatter.template
    data = table.source.data
    assert np.asarray(data["total_ns"]).dtype == np.int64
    assert list(data["total_ns"]) == kt["total_ns"].tolist()  # int64 ns, largest first
    assert data["total_ns_text"] == [fmt_ns(x) for x in kt["total_ns"]]
    # sorting by the field orders by the number; by the text it would not
    by_num = [data["total_ns_text"][i] for i in np.argsort(data["total_ns"], kind="stable")]
    assert by_num != sorted(data["total_ns_text"])
    for title, field in (("Calls", "calls"), ("Mean duration", "mean_ns"), ("Max duration", "max_ns"),
                         ("Min duration", "min_ns"), ("Mean blocks per SM", "mean_blocks_per_sm"),
                         ("Mean est. achieved occupancy", "mean_est_achieved_occupancy_ratio")):
        assert cols[title].field == field and f"{field}_text" in data
        assert np.issubdtype(np.asarray(data[field]).dtype, np.number), field
        assert not np.isnan(np.asarray(data[field], dtype=np.float64)).any(), field  # blanks sort as -1
    op = _model(lay, "nbprof_kernel_op_table")
    ocols = _columns(op)
    assert op.sortable and ocols["Shared memory"].field == "shared_mem_bytes"
    assert ocols["Registers / thread"].field == "registers"
    assert np.asarray(op.source.data["shared_mem_bytes"]).dtype == np.float64


def test_module_and_call_stack_tables_sort_numeric_columns_only():
    from bokeh.models import HTMLTemplateFormatter

    tr = nbprof.load(DATA / "cpu" / "lm_modules.pt.trace.json.gz")
    tree = modules.module_tree(tr)
    for view, kind in (("modules", "modules"), ("call_stack", "call_stack")):
        lay = registry.static(view, tr)
        table = _model(lay, f"nbprof_{kind}_table")
        assert table.sortable
        cols = _columns(table)
        assert not cols["name"].sortable  # the tree's labels keep the tree's order
        host = cols["host total"]
        assert host.field == "host_total_ns" and host.sortable
        assert isinstance(host.formatter, HTMLTemplateFormatter) and "<%- host_total_text %>" in host.formatter.template
        assert cols["calls"].sortable and cols["host self"].field == "host_self_ns"
    full = _model(registry.static("modules", tr), "nbprof_modules_full").data
    assert list(full["host_total_ns"]) == [float(x) for x in tree["host_total_ns"]]
    assert full["host_total_text"][0] == "30.112 ms"
    cols = _columns(_model(registry.static("modules", tr), "nbprof_modules_table"))
    assert not cols["module"].sortable and cols["operators"].sortable
