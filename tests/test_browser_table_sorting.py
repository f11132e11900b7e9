"""The GPU Kernel and module views' tables sort by the number, not by its text (issue 20), in Debian's Chromium.

Static HTML (``viz.to_html``, offline): a click on the "Total duration" header of the kernel table orders the
rows by ``total_ns`` (ascending, then descending on a second click) while the cells keep showing human units;
a click on "host total" of the module tree orders its open rows by ``host_total_ns``. The rows' order is read
from the DataTable's view (``view.data``, what SlickGrid draws) and the first drawn cells from the page.
"""

from __future__ import annotations

import time

import pytest
from _support.chromium import open_page
from _support.paths import DATA

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GPU = DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"
LM_MODULES = DATA / "cpu" / "lm_modules.pt.trace.json.gz"

#: a sorted field -> the twin column its cells show
_TEXT = {"total_ns": "total_ns_text", "calls": "calls_text", "host_total_ns": "host_total_text"}

# the rows (in drawn order) of the DataTable named ``name``: [number, the text its cell shows]
_ROWS = """([name, field, text]) => { const v = Bokeh.index.query_one((v) => v.model.name === name);
  if (!v) { return null; } const d = v.data; const out = [];
  for (let i = 0; i < d.getLength(); i++) { const r = d.getItem(i); out.push([r[field], r[text]]); }
  return out; }"""




def _rows_after(page, name: str, field: str, pred, seconds: float = 10.0):
    rows = None
    for _ in range(int(seconds * 10)):
        rows = page.evaluate(_ROWS, [name, field, _TEXT[field]])
        if rows and pred([r[0] for r in rows]):
            return rows
        time.sleep(0.1)
    pytest.fail(f"{name}: rows never ordered by {field}: {rows and rows[:10]}")


def test_kernel_table_sorts_by_total_duration_numerically(browser, tmp_path):
    import nbprof
    from nbprof import viz
    from nbprof.analysis import kernels
    from nbprof.units import fmt_ns

    tr = nbprof.load(GPU)
    kt = kernels.kernel_table(tr)
    texts = [fmt_ns(x) for x in kt["total_ns"]]
    assert sorted(texts) != [fmt_ns(x) for x in sorted(kt["total_ns"])]  # a text sort would order them otherwise
    path = viz.to_html(tr, tmp_path / "kernels.html", views=["kernels"])
    ctx, page, errors, blocked = open_page(browser, path.as_uri(), height=1400)
    header = page.locator(".slick-header-column", has_text="Total duration").first
    header.wait_for(timeout=30_000)
    first = page.evaluate(_ROWS, ["nbprof_kernel_table", "total_ns", "total_ns_text"])
    assert [r[0] for r in first] == kt["total_ns"].tolist()  # by total duration, largest first, before any click
    header.click()
    asc = _rows_after(page, "nbprof_kernel_table", "total_ns", lambda v: v == sorted(v))
    assert [r[0] for r in asc] == sorted(kt["total_ns"].tolist())
    assert [r[1] for r in asc] == [fmt_ns(x) for x in sorted(kt["total_ns"])]
    # the drawn cells show human units, right-aligned, in the new order
    smallest = fmt_ns(int(kt["total_ns"].min()))
    cell = page.locator(".slick-row .slick-cell", has_text=smallest).first
    cell.wait_for(timeout=10_000)
    assert cell.inner_text().strip() == smallest
    assert cell.locator("div").first.evaluate("(e) => getComputedStyle(e).textAlign") == "right"
    header.click()
    desc = _rows_after(page, "nbprof_kernel_table", "total_ns", lambda v: v == sorted(v, reverse=True))
    assert [r[0] for r in desc] == sorted(kt["total_ns"].tolist(), reverse=True)
    # the kernel + operator table sorts its calls numerically too
    page.locator(".slick-header-column", has_text="Calls").nth(1).click()
    calls = _rows_after(page, "nbprof_kernel_op_table", "calls", lambda v: v == sorted(v))
    assert len(calls) == len(kernels.kernel_table(tr, by="kernel_operator"))
    assert not blocked, blocked[:5]
    assert not errors, errors
    ctx.close()


def test_module_tree_sorts_its_open_rows_by_host_total(browser, tmp_path):
    import nbprof
    from nbprof import viz
    from nbprof.analysis import modules

    tr = nbprof.load(LM_MODULES)
    tree = modules.module_tree(tr)
    path = viz.to_html(tr, tmp_path / "modules.html", views=["modules"])
    ctx, page, errors, blocked = open_page(browser, path.as_uri(), height=1400)
    page.get_by_text("TinyLM_0").first.wait_for(timeout=30_000)
    page.locator(".slick-row").first.wait_for(timeout=30_000)
    header = page.locator(".slick-header-column", has_text="host total").first
    header.click()
    page.wait_for_function("(h) => h.classList.contains('slick-header-column-sorted')", arg=header.element_handle())
    one = _rows_after(page, "nbprof_modules_table", "host_total_ns",
                      lambda v: len(v) == 22 and v in (sorted(v), sorted(v, reverse=True)))
    assert sorted(r[0] for r in one) == sorted(float(x) for x in tree["host_total_ns"])
    up = [r[0] for r in one] == sorted(r[0] for r in one)
    header.click()  # the other direction
    two = _rows_after(page, "nbprof_modules_table", "host_total_ns",
                      lambda v: v == sorted(v, reverse=up) and v != [r[0] for r in one])
    desc = two if up else one
    assert desc[0][0] == float(tree["host_total_ns"].max()) and desc[0][1] == "30.112 ms"  # the root, TinyLM_0
    assert [r[1] for r in desc[:3]] == ["30.112 ms", "25.478 ms", "12.562 ms"]  # by the number, not the text
    # closing the root (a click on its row) keeps the order rule: one row left
    page.get_by_text("\u25be TinyLM_0").first.click()
    _rows_after(page, "nbprof_modules_table", "host_total_ns", lambda v: len(v) == 1)
    assert not blocked, blocked[:5]
    assert not errors, errors
    ctx.close()
