"""No raw ``_ns`` header, object repr or warning in any HTML (or text/plain) nbprof writes (issue 20).

Writes every HTML output the project produces on real traces and scans what a reader sees:

- ``nbprof report -o FILE`` through the CLI (a subprocess, as a user runs it) on ``data/gpu/lm_mem`` (a GPU
  trace with memory events): the page's visible text, the text of every Bokeh model in its documents,
  and the CLI's own stdout/stderr;
- ``nbprof.viz.to_html`` of all views and the static page of every registered view
  (``nbprof.viz.registry.names()``, so views added later are covered), light and dark;
- ``_repr_html_`` / ``_repr_mimebundle_`` of the result objects (``ProfileResult``, ``NsysResult``,
  ``results.table.Table``) and the ``text/plain`` of the live views and the dashboard.

What counts as a leak is ``test_report.LEAKS``: ``x_ns``/``x_bytes``/``x_ratio`` names, ``<nbprof.`` reprs,
pandas ``dtype:``/``Name: x,`` footers, dict reprs, ``WARNING``/``W-1000``/``Traceback``; plus ``object at 0x``.
"""

from __future__ import annotations

import html as _html
import json
import re
import subprocess
import sys

import pytest
from _support.paths import DATA, ROOT, corpus_path
from test_report import LEAKS, visible_text

import nbprof
from nbprof.viz import registry

LEAK = re.compile(LEAKS.pattern + r"|object at 0x[0-9a-f]+|Warning: ")
GPU = DATA / "gpu" / "lm_mem.pt.trace.json.gz"
CPU = DATA / "cpu" / "cnn_nw0.pt.trace.json.gz"

#: Bokeh model attributes a reader sees (titles, labels, texts, options), by attribute name
_SEEN = ("title", "text", "axis_label", "label", "placeholder", "options", "labels", "tooltips", "value")
_HIDDEN_MODELS = {"ColumnDataSource", "CustomJS", "CDSView", "GlyphRenderer", "InlineStyleSheet", "ImportedStyleSheet",
                  "BasicTickFormatter", "CustomJSHover"}


def _strings(obj, out: list[str], seen: bool = False) -> None:
    if isinstance(obj, str):
        if seen:
            out.append(obj)
    elif isinstance(obj, list):
        for x in obj:
            _strings(x, out, seen)
    elif isinstance(obj, dict):
        if obj.get("type") == "object" and obj.get("name") in _HIDDEN_MODELS:
            return
        if obj.get("type") == "value":  # a literal spec value ({"type": "value", "value": ...})
            _strings(obj.get("value"), out, seen)
            return
        for k, v in obj.items():
            if k == "tooltips" and isinstance(v, list):  # [[label, "@field"], ...]: the label is shown
                out.extend(t[0] for t in v if isinstance(t, list) and t and isinstance(t[0], str))
                continue
            _strings(v, out, seen or k in _SEEN)


def bokeh_visible(html: str) -> str:
    """The reader-visible strings of every Bokeh document embedded in ``html`` (file_html or components)."""
    out: list[str] = []
    for m in re.finditer(r'<script type="application/json"[^>]*>(.*?)</script>', html, re.S):
        _strings(json.loads(m.group(1)), out)
    # components(): the docs JSON sits in a JS string literal (JSON.parse('...'))
    for m in re.finditer(r"const docs_json = '(.*?)';", html, re.S):
        raw = m.group(1).encode().decode("unicode_escape")
        _strings(json.loads(raw), out)
    return "\n".join(_html.unescape(re.sub(r"<[^>]+>", "\n", s)) for s in out)


#: torch's Python-frame names carry a repr of their own (``<built-in method run_backward of torch._C._EngineBase
#: object at 0x...>``, ``<built-in function perf_counter_ns>``): trace text, not nbprof's
_TRACE_REPR = re.compile(r"<built-in method [^>]*>|built-in method \S+ of \S+ object at 0x[0-9a-f]+"
                         r"|<built-in function \w+>?")


def leaks(text: str) -> list[str]:
    return sorted({m.group(0) for m in LEAK.finditer(_TRACE_REPR.sub("", text))})


def _model_strings(layout) -> str:
    from bokeh.document import Document
    from bokeh.embed import file_html
    from bokeh.resources import CDN

    if layout.document is None:
        Document().add_root(layout)
    return bokeh_visible(file_html(layout, CDN))


@pytest.fixture(scope="module")
def gpu():
    return nbprof.load(GPU)


def test_static_page_of_every_registered_view_is_clean(gpu, tmp_path):
    from nbprof import viz

    names = registry.names()
    assert {"overview", "operators", "timeline", "memory"} <= set(names)
    for theme in ("light", "dark"):
        page = viz.to_html(gpu, tmp_path / f"all_{theme}.html", theme=theme).read_text(encoding="utf-8")
        assert not leaks(visible_text(page)), (theme, leaks(visible_text(page)))
        seen = bokeh_visible(page)
        assert "Top 15 operators" in seen or "operators" in seen.lower()
        assert not leaks(seen), (theme, leaks(seen))
    cpu = nbprof.load(CPU)
    for name in names:
        for tr in (gpu, cpu):
            if registry.get(name).pair:  # a two-trace view: the trace against itself
                seen = _model_strings(registry.static(name, (tr, tr)))
            else:
                seen = _model_strings(registry.static(name, tr) if _available(name, tr) else _unavailable(name, tr))
            assert not leaks(seen), (name, tr.meta.source_path, leaks(seen))


def _available(name, tr) -> bool:
    try:
        registry.static(name, tr)
    except (ValueError, KeyError):
        return False
    return True


def _unavailable(name, tr):
    from nbprof.viz.static import static_layout

    return static_layout(tr, [name])


def test_live_views_text_plain_and_dashboard_repr_are_clean(gpu):
    from nbprof.viz.dashboard import dashboard

    for name in registry.names():
        try:
            w = registry.live(name, (gpu, gpu) if registry.get(name).pair else gpu)
        except (ValueError, KeyError):
            continue
        data, _meta = w._repr_mimebundle_()
        assert not leaks(data["text/plain"]), (name, data["text/plain"])
    d = dashboard(gpu, views=("overview", "operators"))
    data, _ = d._repr_mimebundle_()
    assert data["text/plain"].startswith("nbprof dashboard (overview, operators) of lm_mem.pt.trace.json.gz: ")
    assert not leaks(data["text/plain"]) and "<nbprof." not in data["text/plain"]
    assert not leaks(visible_text(d.verdict.value))


def test_result_objects_html_and_text_are_clean(gpu):
    from nbprof.capture.options import ProfileOptions
    from nbprof.results.profile import ProfileResult
    from nbprof.results.table import table

    for sort_by in (None, "cuda_time_total", "self_cpu_time_total"):
        r = ProfileResult(ProfileOptions(sort_by=sort_by) if sort_by else ProfileOptions())
        r.traces.append(gpu)
        bundle = r._repr_mimebundle_()
        assert not leaks(visible_text(bundle["text/html"])), (sort_by, leaks(visible_text(bundle["text/html"])))
        assert not leaks(bundle["text/plain"]), (sort_by, leaks(bundle["text/plain"]))
        assert not leaks(visible_text(r._repr_html_()))
        assert not leaks(repr(r))
    import pandas as pd

    t = table(pd.DataFrame({"name": ["a", "b"], "dur_ns": [1500, 2_000_000], "size_bytes": [2048, 3 * 2**20]}),
              units={"dur_ns": "ns", "size_bytes": "bytes"})
    assert not leaks(visible_text(t._repr_html_())), visible_text(t._repr_html_())
    assert not leaks(t.text), t.text


def test_nsys_result_html_and_text_are_clean(tmp_path):
    import shutil

    from nbprof.results.nsys import NsysResult

    src = corpus_path("hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    dst = tmp_path / "saxpy.sqlite"  # a private copy: the corpus is read in place, never written
    shutil.copyfile(src, dst)
    res = NsysResult(nbprof.load(dst))
    bundle = res._repr_mimebundle_()
    assert not leaks(visible_text(bundle["text/html"])), leaks(visible_text(bundle["text/html"]))
    assert not leaks(bundle["text/plain"]), leaks(bundle["text/plain"])


def test_cli_report_html_is_clean(tmp_path):
    out = tmp_path / "lm.html"
    r = subprocess.run([sys.executable, "-m", "nbprof.cli", "report", "--trace", str(GPU), "--no-progress",
                        "-o", str(out)], capture_output=True, text=True, cwd=tmp_path, timeout=900,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert str(out) in r.stdout  # the report says where it wrote
    assert not leaks(r.stdout + r.stderr), leaks(r.stdout + r.stderr)
    page = out.read_text(encoding="utf-8")
    text = visible_text(page)
    assert not leaks(text), leaks(text)
    seen = bokeh_visible(page)
    assert seen.strip(), "no Bokeh document found in the report"
    assert not leaks(seen), leaks(seen)
    # the first section: the bound of this trace, as the verdict states it
    from nbprof.analysis import advisor
    from nbprof.analysis.verdict import verdict
    from nbprof.results.verdict import verdict_sentence

    tr = nbprof.load(GPU)
    fs = advisor.advise(tr)
    first = verdict_sentence(verdict(tr, findings=fs), fs)
    assert _html.unescape(first) in text.replace("\n", "")
    assert [p.name for p in tmp_path.iterdir()] == ["lm.html"]  # nothing else left next to it
