"""data/README.md's step times are the ones nbprof measures on the traces it describes (issue 38: it said
142.5 ms/step, the capture script's mean over every step with CUDA start-up, where nbprof measures 24.2)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _support.paths import DATA

import nbprof
from nbprof.analysis.steps import step_times


@pytest.mark.parametrize("name", ["cnn_nw0_prep", "cnn_nw4_prep"])
def test_data_readme_step_times_are_nbprofs(name):
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith(f"| `gpu/{name}.pt.trace.json.gz`"))
    m = re.search(r"([\d.]+) ms/step over its (\d+) profiled steps, median ([\d.]+) ms", row)
    assert m, row
    v = step_times(nbprof.load(DATA / "gpu" / f"{name}.pt.trace.json.gz")) / 1e6
    assert (float(m.group(1)), int(m.group(2)), float(m.group(3))) == (
        round(float(np.mean(v)), 1), len(v), round(float(np.median(v)), 1))
