"""`nbprof report` and the workflow notebooks run with papermill, end to end (real kernels, real runs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import DATA, ROOT

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


def test_report_on_existing_artefacts(tmp_path):
    art = Artefacts(trace=str(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"),
                    compare_trace=str(DATA / "gpu" / "cnn_nw4_prep.pt.trace.json.gz"))
    html_path = build_report(art, tmp_path, progress=False)
    html = html_path.read_text(encoding="utf-8")
    assert html_path.parent.parent == tmp_path and html_path.parent.name.startswith("report-")
    # one page, four steps, offline: BokehJS inline, no script/style from a CDN
    for title in ("Step 1 - System view", "Step 2 - Operators", "Step 3 - Visualise", "Step 4 - Distributed",
                  "Step 1 — The system view", "Step 4 — Distributed jobs (DeepSpeed)"):
        assert title in html
    assert "Bokeh" in html and not EXTERNAL.search(html)
    assert len(html) < 12 * 2**20  # BokehJS once (~4 MB) + the views' data
    # the numbers in it are the analyses' numbers: the DataLoader stall of the H200 num_workers=0 run
    nb2 = nbformat.read(html_path.parent / "02_operators_pytorch.ipynb", 4)
    assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in _code_outputs(nb2)
    # views are static components: BokehJS is in the page once, never in a notebook's outputs
    for nb_path in html_path.parent.glob("*.ipynb"):
        assert "bokehjs_load" not in nb_path.read_text(encoding="utf-8"), nb_path.name
    nb1 = nbformat.read(html_path.parent / "01_system_nsys.ipynb", 4)
    out1 = _code_outputs(nb1)
    # H200, 0.3 ms of Python preprocessing per sample, num_workers=0: the DataLoader holds 87% of the step
    assert re.search(r"dataloader_ratio\s+87\.0 %", out1)
    assert "dataloader" in out1 and "host_wait_ns" in out1
    nb4 = nbformat.read(html_path.parent / "04_distributed_deepspeed.ipynb", 4)
    assert "this step applies to multi-rank jobs" in _code_outputs(nb4)  # no examples in report mode
    # a second report never overwrites the first
    again = build_report(art, tmp_path, progress=False, notebooks=["02_operators_pytorch.ipynb"])
    assert again.parent != html_path.parent and html_path.exists()


def test_failing_notebook_is_kept_and_reported(tmp_path):
    art = Artefacts(trace=str(tmp_path / "missing.pt.trace.json"))
    with pytest.raises(ReportError, match=r"02_operators_pytorch.ipynb failed at cell \d+: FileNotFoundError") as ei:
        build_report(art, tmp_path, progress=False, notebooks=["02_operators_pytorch.ipynb"])
    kept = Path(ei.value.notebook)
    assert kept.exists() and "FileNotFoundError" in _code_outputs(nbformat.read(kept, 4))


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
