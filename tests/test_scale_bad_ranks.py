"""Issue 33 B4/B6/B7: one bad rank never costs the others (named per file, ``on_error``), an archive with
two members of one name loses none, and the cache never removes a finished entry nor stops a load."""

from __future__ import annotations

import os
import warnings
import zipfile
from pathlib import Path

import pytest
from _support.paths import corpus_path

from nbprof.errors import NbprofError
from nbprof.scale import TraceCache, load_ranks
from nbprof.sources import load

TF = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/"


@pytest.fixture()
def two_ranks():
    return [str(corpus_path(TF + f"sampled_rank-{r}.json.gz")) for r in (0, 1)]


def _corrupt(tmp_path, good: str) -> str:
    """rank 1's trace cut in the middle of its gzip header: no byte of JSON can be read."""
    bad = tmp_path / "rank-2.json.gz"
    bad.write_bytes(Path(good).read_bytes()[:6])
    return str(bad)


def test_one_corrupt_rank_skipped_and_named(two_ranks, tmp_path):
    bad = _corrupt(tmp_path, two_ranks[1])
    with pytest.warns(UserWarning, match="1 of 3 traces could not be loaded"):
        mr = load_ranks([*two_ranks, bad], cache=False, progress=False, workers=1)
    assert mr.ranks == [0, 1]
    assert list(mr.failed) == [bad] and "TraceFormatError" in mr.failed[bad]
    it = mr.report.get("rank-2.json.gz:load_failed")
    assert it is not None and it.action == "dropped" and bad in it.message
    with pytest.raises(NbprofError, match=r"1 of 3 traces could not be loaded: .*rank-2\.json\.gz"):
        load_ranks([*two_ranks, bad], cache=False, progress=False, workers=1, on_error="raise")
    with pytest.raises(NbprofError, match="no trace could be loaded"):
        load_ranks([bad], cache=False, progress=False, workers=1)


def test_archive_bad_member_named_by_member_not_temp_path(two_ranks, tmp_path):
    arc = tmp_path / "job.zip"
    with zipfile.ZipFile(arc, "w") as z:
        for p in two_ranks:
            z.write(p, f"t/{os.path.basename(p)}")
        z.writestr("t/rank-2.json.gz", Path(two_ranks[1]).read_bytes()[:6])
    with pytest.warns(UserWarning):
        mr = load_ranks(arc, cache=False, progress=False, workers=1)
    assert mr.ranks == [0, 1]
    (name, err), = mr.failed.items()
    assert name == f"{arc}::t/rank-2.json.gz" and "nbprof_ranks_" not in err and name in err


def test_zip_with_two_members_of_one_name_loses_neither(two_ranks, tmp_path):
    arc = tmp_path / "job.zip"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns "Duplicate name"
        with zipfile.ZipFile(arc, "w") as z:
            for p in two_ranks:
                z.write(p, "trace.json.gz")
    mr = load_ranks(arc, cache=False, progress=False, workers=1)
    assert mr.ranks == [0, 1]  # both entries (their distributedInfo ranks differ)
    assert sorted(mr.paths.values()) == [f"{arc}::trace.json.gz", f"{arc}::trace.json.gz (entry 2 of that name)"]
    it = mr.report.get("duplicate_member")
    assert it is not None and it.count == 2
    assert mr[1].meta.rank == 1 and mr[0].meta.rank == 0  # re-read by position, not by name


def test_put_never_removes_a_finished_entry(two_ranks, tmp_path):
    c = TraceCache(str(tmp_path / "cache"))
    tr = load(two_ranks[0])
    d = c.digest(two_ranks[0])
    c.put(d, tr)
    before = sorted(os.listdir(c.entry(d)))
    c.has = lambda _d: False  # another process that looked before this entry was finished
    c.put(d, tr)
    assert sorted(os.listdir(c.entry(d))) == before
    assert len(TraceCache(c.dir).get(d).events) == len(tr.events)
    assert [n for n in os.listdir(c.dir) if n.endswith((".tmp", ".old"))] == []


def test_stale_entry_replaced(two_ranks, tmp_path):
    c = TraceCache(str(tmp_path / "cache"))
    d = c.digest(two_ranks[0])
    os.makedirs(os.path.join(c.entry(d), "summary-x"))  # an entry folder without meta.json
    c.put(d, load(two_ranks[0]))
    assert c.has(d) and "summary-x" not in os.listdir(c.entry(d))


def test_unwritable_cache_folder_loads_without_cache(two_ranks, tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")  # any write under it fails (even as root)
    mr = load_ranks(two_ranks, cache_dir=str(blocker / "traces"), progress=False, workers=1)
    assert mr.ranks == [0, 1] and not mr.failed
    it = mr.report.get("sampled_rank-0.json.gz:cache_unavailable")
    assert it is not None and "loaded without the cache" in it.message
