"""Issue 33 B11: an untrusted ``.nbprof`` file -- mistyped header fields, duplicate ZIP entries, a part that
inflates far beyond the file -- is refused with a TraceFormatError naming what is wrong."""

from __future__ import annotations

import json
import warnings
import zipfile

import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.errors import TraceFormatError

TRACE = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    p = tmp_path_factory.mktemp("s") / "t.nbprof"
    nbprof.load(corpus_path(TRACE)).save(p)
    return p


def _rewrite(src, dst, head_edit=None, extra=()):
    with zipfile.ZipFile(src) as z:
        parts = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns on a duplicate name
        with zipfile.ZipFile(dst, "w") as z:
            for n, data in parts:
                if n == "nbprof.json" and head_edit:
                    head = json.loads(data)
                    head_edit(head)
                    data = json.dumps(head).encode()
                z.writestr(n, data)
            for n, data, comp in extra:
                z.writestr(n, data, compress_type=comp)
    return dst


def test_round_trip_still_loads(saved):
    assert len(nbprof.load(saved).events) == len(nbprof.load(corpus_path(TRACE)).events)


@pytest.mark.parametrize(("field", "value", "where"), [
    ("rank", "3", "meta.rank"), ("device_properties", {"0": 1}, "meta.device_properties"),
    ("origin_ns", 1.5, "meta.origin_ns"), ("world_size", True, "meta.world_size")])
def test_mistyped_meta_field_refused(saved, tmp_path, field, value, where):
    p = _rewrite(saved, tmp_path / "m.nbprof", lambda h: h["meta"].__setitem__(field, value))
    with pytest.raises(TraceFormatError, match=where):
        nbprof.load(p)


def test_mistyped_issue_refused(saved, tmp_path):
    def edit(h):
        h["report"]["issues"] = [{"kind": "x", "action": "assumed", "count": "many", "message": "m", "offset": None}]
    with pytest.raises(TraceFormatError, match=r"report\.issues\[0\]\.count"):
        nbprof.load(_rewrite(saved, tmp_path / "i.nbprof", edit))


def test_duplicate_entries_refused(saved, tmp_path):
    with zipfile.ZipFile(saved) as z:
        head = z.read("nbprof.json")
    p = _rewrite(saved, tmp_path / "d.nbprof", extra=[("nbprof.json", head, zipfile.ZIP_STORED)])
    with pytest.raises(TraceFormatError, match="duplicate entries"):
        nbprof.load(p)


def test_inflating_part_refused(saved, tmp_path):
    zeros = bytes(300 << 20)  # deflates to ~300 KB
    p = _rewrite(saved, tmp_path / "z.nbprof", extra=[("tables/pad.parquet", zeros, zipfile.ZIP_DEFLATED)])
    with pytest.raises(TraceFormatError, match="inflate"):
        nbprof.load(p)
