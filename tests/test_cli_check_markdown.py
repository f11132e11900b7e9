"""Issue 33 (also): ``nbprof check --format markdown`` keeps a trace's file name inside its table cell,
whatever the name holds (``|``, backticks)."""

from __future__ import annotations

import shutil

from test_cli import FAST, SLOW, nbprof


def test_file_names_cannot_break_out_of_the_table(tmp_path):
    a = tmp_path / "base | x `y`.pt.trace.json.gz"
    b = tmp_path / "cand``| z.pt.trace.json.gz"
    shutil.copyfile(FAST, a)
    shutil.copyfile(SLOW, b)
    r = nbprof("check", "--baseline", a, "--candidate", b, "--max-regress", "5%")
    assert r.returncode == 1, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith(("| baseline", "| candidate"))]
    assert len(rows) == 2
    for ln in rows:  # 4 cells: the only unescaped pipes are the 5 cell borders
        assert ln.replace("\\|", "").count("|") == 5, ln
    assert rows[0].startswith("| baseline | ``/") and rows[0].endswith("/base \\| x `y`.pt.trace.json.gz`` | 6 | 3.127 ms |")
    assert rows[1].startswith("| candidate | ```/") and "/cand``\\| z.pt.trace.json.gz``` | 6 |" in rows[1]
