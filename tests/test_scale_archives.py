"""Issue 24: load_ranks takes a folder, a glob, a list and a tar/zip archive of rank traces (members
streamed into a private temporary folder that is removed); a script without a main guard gets a clear error."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from _support.paths import ROOT, corpus_path

from nbprof.errors import NbprofError
from nbprof.scale import load_ranks

TF = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/"


@pytest.fixture()
def two_ranks():
    return [str(corpus_path(TF + f"sampled_rank-{r}.json.gz")) for r in (0, 1)]


def _overview(mr):
    return mr.table("overview").sort_values("rank").reset_index(drop=True)


@pytest.fixture()
def private_tmp(tmp_path, monkeypatch):
    d = tmp_path / "systmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_archive_of_rank_traces(two_ranks, tmp_path, private_tmp, kind):
    ship = tmp_path / "ship"
    ship.mkdir()
    arc = ship / f"job.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(arc, "w") as z:
            for p in two_ranks:
                z.write(p, f"traces/{os.path.basename(p)}")
            z.writestr("traces/README.txt", "not a trace")
    else:
        with tarfile.open(arc, "w:gz") as t:
            for p in two_ranks:
                t.add(p, f"traces/{os.path.basename(p)}")
    direct = load_ranks(two_ranks, cache=False, progress=False, workers=1)
    mr = load_ranks(arc, cache=False, progress=False, workers=1)
    assert mr.ranks == [0, 1]
    pd.testing.assert_frame_equal(_overview(mr), _overview(direct))
    assert mr.paths[0] == f"{arc}::traces/sampled_rank-0.json.gz"
    assert sorted(os.listdir(ship)) == [arc.name]  # nothing extracted next to the input
    assert os.listdir(private_tmp) == []  # the private temporary folder is gone
    full = mr[1]  # re-read from the member (no cache)
    assert full.meta.rank == 1 and len(full.events) == mr.table("overview").set_index("rank").loc[1, "events"]
    assert os.listdir(private_tmp) == []


def test_folder_glob_and_list(two_ranks, tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for p in two_ranks:
        os.symlink(p, d / os.path.basename(p))
    ref = _overview(load_ranks(two_ranks, cache=False, progress=False, workers=1))
    for spec in (d, str(d / "sampled_rank-*.json.gz"), [Path(p) for p in two_ranks]):
        pd.testing.assert_frame_equal(_overview(load_ranks(spec, cache=False, progress=False, workers=1)), ref)


def test_empty_archive(tmp_path):
    arc = tmp_path / "empty.zip"
    with zipfile.ZipFile(arc, "w") as z:
        z.writestr("notes.txt", "x")
    with pytest.raises(FileNotFoundError, match="no trace files"):
        load_ranks(arc, cache=False, progress=False)


SCRIPT = """
from nbprof.scale import load_ranks
{guard}load_ranks({paths!r}, workers=2, cache=False, progress=False)
{indent}print("LOADED")
"""


def _run_script(tmp_path, two_ranks, guarded: bool):
    src = SCRIPT.format(guard='if __name__ == "__main__":\n    ' if guarded else "", paths=two_ranks,
                        indent="    " if guarded else "")
    script = tmp_path / ("guarded.py" if guarded else "unguarded.py")
    script.write_text(src)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env,
                          cwd=str(tmp_path))


def test_script_without_main_guard_gets_a_clear_error(two_ranks, tmp_path):
    p = _run_script(tmp_path, two_ranks, guarded=False)
    assert p.returncode != 0 and "LOADED" not in p.stdout
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("nbprof.errors.NbprofError") or NbprofError.__name__ in last, p.stderr[-2000:]
    assert 'if __name__ == "__main__":' in last and "unguarded.py" in last and "workers=1" in last
    ok = _run_script(tmp_path, two_ranks, guarded=True)
    assert ok.returncode == 0 and "LOADED" in ok.stdout, ok.stderr[-2000:]
