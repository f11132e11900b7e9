"""`nbprof report` and the workflow notebooks run with papermill, end to end (real kernels, real runs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from _support.paths import DATA, ROOT

from nbprof.report import Artefacts, ReportError, build_report

EXTERNAL = re.compile(r"<script[^>]+src=[\"']https?:|<link[^>]+href=[\"']https?:|<iframe[^>]+src=[\"']https?:", re.I)


def _code_outputs(nb) -> str:
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            out.append(o.get("text", ""))
            out.append(f"{o.get('ename', '')}: {o.get('evalue', '')}")
            out.extend(str(v) for v in o.get("data", {}).values())
    return "\n".join(out)


#: what must never reach a reader: raw ns headers, object reprs, pandas Series footers, evidence dicts, warnings,
#: raw ns numbers of 13+ digits (a Unix time in ns or a 2.7-hour duration in ns: formatted, they read as a date/time)
LEAKS = re.compile(r"\b[a-z]\w*_(?:ns|bytes|ratio)\b|<nbprof\.|\bdtype: |\bName: \w+, |\{'\w+': |WARNING|W-1000|"
                   r"MISSING_RENDERERS|running over TCP|Traceback|\w+ ns [ab]\b|(?<![\w.,])\d{13,}(?![\w.,])")


def visible_text(html: str) -> str:
    """The text a reader sees: no scripts, styles or tags."""
    import html as _html

    body = re.sub(r"<script.*?</script>|<style.*?</style>", "", html, flags=re.S)
    return _html.unescape(re.sub(r"<[^>]+>", "\n", body))


def bokeh_div_texts(nb_path: Path) -> str:
    """The text of the Bokeh Divs (findings, captions) in an executed notebook's static views."""
    import html as _html
    import json

    out = []
    for c in nbformat.read(nb_path, 4).cells:
        for o in c.get("outputs", []):
            # the document JSON sits in a JS string literal: one level of backslash escapes more
            h = o.get("data", {}).get("text/html", "").replace("\\\\", "\\")
            for m in re.finditer(r'"text":("(?:[^"\\]|\\.)*")', h):
                t = _html.unescape(json.loads(m.group(1)))
                out.append(_html.unescape(re.sub(r"<[^>]+>", "\n", t)))
    return "\n".join(out)


def assert_clean(html: str, where: str) -> None:
    hits = sorted({m.group(0) for m in LEAKS.finditer(visible_text(html))})
    assert not hits, f"{where}: {hits[:20]}"


def nbprof_load(p):
    import nbprof

    return nbprof.load(p)


def test_report_on_existing_artefacts(tmp_path):
    art = Artefacts(trace=str(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"),
                    compare_trace=str(DATA / "gpu" / "cnn_nw4_prep.pt.trace.json.gz"))
    html_path = build_report(art, tmp_path, progress=False)
    html = html_path.read_text(encoding="utf-8")
    assert html_path.parent.parent == tmp_path and html_path.parent.name.startswith("report-")
    # one page, offline: BokehJS inline, no script/style from a CDN; no collectives here, so no step 4
    for title in ("Step 1 - System view", "Step 2 - Operators", "Step 3 - Visualise", "Step 1 — The system view"):
        assert title in html
    assert "Step 4 - Distributed" not in html and "step 4 (distributed) left out" in html
    assert "Bokeh" in html and not EXTERNAL.search(html)
    assert len(html) < 12 * 2**20  # BokehJS once (~4 MB) + the views' data
    text = visible_text(html)
    # the first screen: the verdict, then what to fix first, before the table of contents
    v = text.index("DataLoader-bound")
    assert v < text.index("What to fix first") < text.index("Step 1 - System view")
    assert "87% of each step (21.1 of 24.2 ms" in text and "num_workers" in text[v:text.index("Step 1 - System view")]
    # ... and where its steps came from, their spread (issue 31)
    assert "Steps: 6 ProfilerStep ranges (the profiler's own)." in text[v:text.index("Step 1 - System view")]
    # the first screen states the before/after result (median step, bootstrap interval); step 3 repeats it
    ba = ("'after' vs 'before': 7.75x faster (median step 3.127 ms instead of 24.247 ms; "
          "95 % interval 2.10x-11.39x faster, 6 and 6 steps).")
    flat = re.sub(r"\s+", " ", text)  # the sentence's bold head is its own element
    assert flat.index(ba) < flat.index("Step 1 - System view") and flat.count(ba) == 2
    # ... and the before run's prediction for the fix made against the measured change (issue 30)
    pred = ("The dataloader part shrank the most (21.097 ms -> 3.250 ms per step). 'before' predicted for its fix "
            "(finding 1, dataloader:")
    assert flat.index(pred) < flat.index("Step 1 - System view")
    assert "Measured: 18.627 ms per step saved, within the predicted range." in flat
    assert "Negative deltas are improvements" not in text
    # human units everywhere a person reads
    assert_clean(html, "report.html")
    # the numbers in it are the analyses' numbers: the DataLoader stall of the H200 num_workers=0 run
    nb2 = nbformat.read(html_path.parent / "02_operators_pytorch.ipynb", 4)
    out2 = _code_outputs(nb2)
    assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in out2
    assert "ProfilerStep" not in out2.split("Host operators by device time")[1].split("</table>")[0]
    # views are static components: BokehJS is in the page once, never in a notebook's outputs; no stderr
    for nb_path in html_path.parent.glob("*.ipynb"):
        raw = nb_path.read_text(encoding="utf-8")
        assert "bokehjs_load" not in raw, nb_path.name
        assert '"name": "stderr"' not in raw, nb_path.name
        divs = bokeh_div_texts(nb_path)
        assert_clean(f"<p>{divs}</p>".replace("<", "&lt;").replace("&lt;p>", "<p>"), nb_path.name + " (Bokeh Divs)")
        if nb_path.name.startswith("01_"):
            assert "Findings" in divs and "dataloader (%)" in divs
    # no Device memory plot without memory events (the CNN run has none)
    assert not len(nbprof_load(art.trace).memory) and "Device memory" not in text
    # a second report never overwrites the first
    again = build_report(art, tmp_path, progress=False, notebooks=["02_operators_pytorch.ipynb"])
    assert again.parent != html_path.parent and html_path.exists()


def test_report_to_a_file_and_step_4_on_one_ddp_rank(tmp_path, capfd):
    import tempfile

    before = set(Path(tempfile.gettempdir()).glob("nbprof_report_cache_*"))
    art = Artefacts(trace=str(DATA / "gpu" / "ddp_nccl_rank0.pt.trace.json.gz"))
    out = build_report(art, progress=False, output=tmp_path / "sub" / "ddp.html")
    assert out == tmp_path / "sub" / "ddp.html" and out.is_file()
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["ddp.html"]  # executed notebooks removed
    assert set(Path(tempfile.gettempdir()).glob("nbprof_report_cache_*")) == before  # the trace cache too
    html = out.read_text(encoding="utf-8")
    assert "Step 4 - Distributed" in html and "One rank of a distributed job" in html
    assert "Host-bound" in visible_text(html)
    assert "nothing to compare yet" in html  # one run: step 3 says what to give
    assert_clean(html, "ddp.html")
    err = capfd.readouterr().err
    assert "running over TCP" not in err and "Passed unknown parameter" not in err  # a quiet console


@pytest.mark.parametrize("kind", ["dir", "txt", "json"])
def test_bad_trace_is_rejected_before_any_notebook(tmp_path, kind):
    import time

    bad = {"dir": tmp_path / "d", "txt": tmp_path / "t.txt", "json": tmp_path / "x.json"}[kind]
    if kind == "dir":
        bad.mkdir()
    else:
        bad.write_text("hello" if kind == "txt" else '{"not": "a trace"}')
    out = tmp_path / "out"
    t0 = time.perf_counter()
    with pytest.raises(ReportError, match="--trace") as ei:
        build_report(Artefacts(trace=str(bad)), out, progress=False)
    assert time.perf_counter() - t0 < 2.0
    assert ei.value.notebook is None and not out.exists()  # no half-made folder


def test_failing_notebook_is_kept_and_reported(tmp_path):
    # a notebook that fails (here: a cache entry that is not one) is kept with its traceback
    (tmp_path / "bogus").mkdir()
    art = Artefacts(trace=str(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"))
    with pytest.raises(ReportError, match=r"02_operators_pytorch.ipynb failed at cell \d+: ") as ei:
        build_report(art, tmp_path, progress=False, notebooks=["02_operators_pytorch.ipynb"],
                     extra_parameters={"trace_cache": str(tmp_path / "bogus")})
    kept = Path(ei.value.notebook)
    assert kept.exists() and "Error" in _code_outputs(nbformat.read(kept, 4))


def test_cli_report_from_a_real_run(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "nbprof.cli", "report", "--script", str(ROOT / "examples" / "train_cnn.py"),
         "--steps", "6", "--no-nsys", "--no-progress", "--out", str(tmp_path), "--script-args", "--num-workers", "0"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    html = Path(re.search(r"report: (.+report\.html)", r.stdout).group(1))
    text = html.read_text(encoding="utf-8")
    assert "aten::conv2d" in text and not EXTERNAL.search(text)
    runs = list(tmp_path.glob("run-*/workload.pt.trace.json.gz"))
    assert len(runs) == 1
    assert list(tmp_path.glob("run-*/tb/train_cnn/*.pt.trace.json.gz"))  # the TensorBoard run was written


def test_cli_report_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "nbprof.cli", "report", "--trace", str(tmp_path / "nope.json")],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = subprocess.run([sys.executable, "-m", "nbprof.cli", "report"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "give --script" in r.stderr
    r = subprocess.run([sys.executable, "-m", "nbprof.cli", "report", "--trace", str(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"),
                        "-o", str(tmp_path / "r.txt")], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and ".html file" in r.stderr  # bad usage (exit 2): a .html file or a folder
