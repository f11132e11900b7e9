"""``nbprof report --script S --watch`` on a real watched script (issue 32): the report is built from the first
window that captured a slow step, and says which step was flagged, where the window is, and that step's verdict."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("papermill")

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "tests" / "workloads" / "watch_stalls.py"
sys.path.insert(0, str(ROOT / "tests" / "workloads"))
import watch_stalls  # noqa: E402


def _text(page: str) -> str:
    body = re.sub(r"<script.*?</script>|<style.*?</style>", "", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


@pytest.mark.slow
def test_report_watch_on_a_real_watched_script(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "nbprof.cli", "report", "--script", str(WORKLOAD), "--watch", "--steps", "130",
         "--no-nsys", "--no-progress", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    page = Path(re.search(r"report: (.+report\.html)", r.stdout).group(1)).read_text(encoding="utf-8")
    text = _text(page)
    (run,) = tmp_path.glob("run-*/watch")
    cap = json.loads((run / "summary.json").read_text())["captures"][0]
    # the window and its flagged steps
    assert (f"step watch run folder: {run} (flagged steps {cap['flagged_steps']} are in this trace, watch steps "
            f"{cap['first_step']}..{cap['last_step']})") in text
    import nbprof

    rows = nbprof.watch.captured(run)
    rows = rows[rows["trace"] == str(run / cap["path"])].set_index("step")
    assert sorted(rows.index) == sorted(cap["flagged_steps"])
    # each flagged step: its ProfilerStep in the trace, the watch's phase, the verdict of that step alone
    stall = set(watch_stalls.stall_plan(130, 40, 0))
    io_step = 130 // 2 + 40 // 2
    for s, row in rows.iterrows():
        line = re.search(rf"captured step {s} \(ProfilerStep#(\d+) in [^)]*\): .*?; trace verdict (\w+) ", text)
        assert line, text[-3000:]
        assert int(line.group(1)) == row["profiler_step"] and line.group(2) == row["bound"]
        # the report's own verdict averages the window's steady steps: a flagged step it leaves out (a slow first
        # step is taken for warm-up) is said to be left out
        note = re.search(rf"captured step {s} \(.*?(?=captured step \d|step 4 \(distributed\)|$)", text).group(0)
        assert ("left out of the window's verdict" in note) == (not row["in_window_verdict"]), note
        if s == io_step:
            assert row["grew"] == "io" and row["first_rule"] == "step_io" and "first fix: step_io" in text
        elif s in stall:
            assert row["grew"] == "data_wait" and row["bound"] == "dataloader"
    # the report itself is the window's: its verdict and findings, on ProfilerStep ranges of that trace
    assert "What to fix first" in text and re.search(r"ProfilerStep#\d+\.\.#\d+", text)
    assert "CPU-only profile" in text
