"""The short seeded fuzz run (issue 18): >= 3,000 cases over every format (~2 minutes on a quiet machine), zero
FOREIGN / HANG / WROTE-NEXT-TO-INPUT / ACCOUNTING. The counts are printed (``pytest -s``); failing
cases are written to fuzz-failures/test-seed<N>/ with their replay command. The long run is
``make fuzz``; the engine and its invariants are described in tests/fuzz/engine.py."""

from __future__ import annotations

import os

import pytest
from fuzz.engine import FAILURES, format_summary, read_json, run_fuzz
from fuzz.seeds import ROOT

SEED = 18
CASES = 3000

# bounded by its case count, not by wall time (issue 38 item 3: the suite's 900 s limit failed it on a busy
# machine): every case is bounded by the engine (CPU time, time blocked, a hard kill; a case over its limit
# runs again with 5x the limit before it counts as a hang), so the run ends after CASES cases however slow
pytestmark = [pytest.mark.fuzz, pytest.mark.slow, pytest.mark.timeout(0)]


def test_fuzz_short_seeded_run():
    # per-case cost kept small: seeds of a few dozen events, two worker processes, 1 s of CPU per case
    # (or blocked for 2 s; the parent kills a worker stuck in C code), the analyses on half of the
    # loaded cases and the static page on a few (``make fuzz`` runs them on every case / on more)
    res = run_fuzz(seed=SEED, cases=CASES, timeout=1.0, analyses_rate=0.5, html_rate=0.003,
                   out_dir=ROOT / "fuzz-failures" / f"test-seed{SEED}", keep_per_signature=2,
                   jobs=min(2, os.cpu_count() or 1))
    summary = format_summary(res)
    print(summary)
    assert res["cases"] >= CASES - 5, summary
    bad = {f: {o: c.get(o, 0) for o in FAILURES if c.get(o, 0)} for f, c in res["counts"].items()}
    bad = {f: v for f, v in bad.items() if v}
    assert not bad, f"fuzz failures {bad} (cases under fuzz-failures/test-seed{SEED}/)\n{summary}"


def test_fuzz_stopped_run_resumes_to_the_uninterrupted_counts(tmp_path):
    # a run stopped early (after 7 cases, 2 of them the seed cases) and resumed from its checkpoint JSON counts
    # exactly what the uninterrupted run counts: no case twice, none lost
    kw = {"seed": 5, "cases": 40, "formats": ["timeline", "special"], "timeout": 1.0, "out_dir": None, "jobs": 1}
    full = run_fuzz(**kw)
    part = run_fuzz(**kw, stop_after=7, checkpoint=tmp_path / "s.json")
    saved = read_json(tmp_path / "s.json")
    assert saved["cases"] == part["cases"] == 7 and part["stopped"]
    res = run_fuzz(**kw, resume=saved, checkpoint=tmp_path / "s.json")
    assert res["cases"] == full["cases"] == 40
    assert res["counts"] == full["counts"] and res["kinds"] == full["kinds"]
    assert sorted(j for v in res["done"].values() for j in v) == sorted(j for v in full["done"].values() for j in v)
