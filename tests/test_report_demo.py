"""`make demo`'s pieces (issue 20): `python -m nbprof.report_demo` profiles the DataLoader fix's before/after pair
and the 2-rank CPU DeepSpeed example, and the report answers all four questions (real torch, DeepSpeed, kernels)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT
from test_report import assert_clean, visible_text

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow]


def test_demo_loop_answers_all_four_questions(tmp_path):
    has_ds = __import__("importlib").util.find_spec("deepspeed") is not None
    argv = [sys.executable, "-m", "nbprof.report_demo", "--out", str(tmp_path), "--steps", "4", "--preprocess-ms", "5",
            "--no-nsys"] + ([] if has_ds else ["--no-deepspeed"])
    r = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=900,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    html_path = re.search(r"report: (.+report\.html)", r.stdout).group(1)
    with open(html_path, encoding="utf-8") as fh:
        html = fh.read()
    text = visible_text(html)
    demo = next(tmp_path.glob("demo-*"))
    assert (demo / "before" / "workload.pt.trace.json.gz").is_file() and (demo / "after" / "workload.pt.trace.json.gz").is_file()
    # step 1/2: the verdict of the before run, first
    assert re.search(r"(DataLoader|Host|GPU compute)-bound\s*: ", text) and "What to fix first" in text
    # step 3 compares the pair (after - before) and lists both TensorBoard runs
    m = re.search(r"'after' vs 'before': the average step takes ([\d.,]+) ms instead of ([\d.,]+) ms", text)
    assert m and "nothing to compare yet" not in text
    assert {"before", "after"} <= {p.name for p in (demo / "tb").iterdir()}
    if has_ds:
        # step 4: the two DeepSpeed ranks and DeepSpeed's own log
        assert "Step 4 - Distributed" in text and "2 ranks loaded" in text and "Skew across ranks" in text
        assert "No distributed traces" not in text and "No DeepSpeed log" not in text
    else:
        assert "DeepSpeed" in text
    assert_clean(html, "demo report")
