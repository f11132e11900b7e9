"""Issue 33 B10: every writer goes through nbprof.atomic -- a private temp file in the target folder
(O_EXCL, random name), renamed into place; a link planted at the target or at the old predictable temp
names is never written through; a failed write leaves nothing; `report -o FILE` never overwrites without --force."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from _support.paths import ROOT, corpus_path

import nbprof
from nbprof.atomic import atomic_open, atomic_write
from nbprof.scale import TraceCache

TRACE = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz"


@pytest.fixture(scope="module")
def trace():
    return nbprof.load(corpus_path(TRACE))


def _plant(tmp_path, target):
    """A victim file, and links to it at the target name and at the names writers used to use."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    names = [f"{target}.{os.getpid()}.tmp", f"{target}.partial", f"{target}.nbprof-tmp"]
    for n in names:
        os.symlink(victim, n)
    return victim


def test_failed_write_leaves_nothing(tmp_path):
    out = tmp_path / "x.json"
    with pytest.raises(RuntimeError), atomic_open(out) as f:
        f.write(b"half")
        raise RuntimeError("writer died")
    assert os.listdir(tmp_path) == []
    atomic_write(out, "old")
    with pytest.raises(FileExistsError):
        atomic_write(out, "new", overwrite=False)
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["x.json"]


@pytest.mark.parametrize("writer", ["save", "chrome", "chrome_gz", "html"])
def test_writers_never_write_through_planted_links(trace, tmp_path, writer):
    ext = {"save": "t.nbprof", "chrome": "t.json", "chrome_gz": "t.json.gz", "html": "t.html"}[writer]
    target = tmp_path / ext
    victim = _plant(tmp_path, target)
    os.symlink(victim, target)  # a link at the target name itself: replaced, its target untouched
    if writer == "save":
        trace.save(target)
        assert len(nbprof.load(target).events) == len(trace.events)
    elif writer.startswith("chrome"):
        trace.to_chrome_trace(target)
        assert len(nbprof.load(target).events) == len(trace.events)
    else:
        from nbprof.viz.static import to_html

        to_html(trace, target, views=["overview"], overwrite=True)
    assert victim.read_text() == "keep me" and not target.is_symlink()
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp") and not os.path.islink(tmp_path / n)]


def test_cache_put_never_writes_through_links(trace, tmp_path):
    c = TraceCache(str(tmp_path / "cache"))
    os.makedirs(c.dir)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, os.path.join(c.dir, f"index.json.{os.getpid()}.tmp"))
    d = c.digest(corpus_path(TRACE))
    os.symlink(tmp_path, c.entry(d) + f".{os.getpid()}.tmp")  # the old predictable entry folder name
    c.put(d, trace)
    assert victim.read_text() == "keep me" and c.has(d)


def test_report_o_existing_file_needs_force(tmp_path):
    out = tmp_path / "report.html"
    out.write_text("an earlier report")
    r = subprocess.run([sys.executable, "-m", "nbprof", "report", "--trace", str(corpus_path(TRACE)), "-o", str(out)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "exists: pass --force" in r.stderr
    assert out.read_text() == "an earlier report"
