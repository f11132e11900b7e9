"""Saved traces (issue 23): ``Trace.save("x.nbprof")`` and ``nbprof.load("x.nbprof")`` give back equal
tables, side tables, metadata and load report. Real traces: pipit's saxpy Nsight Systems export (side
tables with object columns: NVTX payloads), a truncated copy of TraceLens' H100 Qwen trace (a load report
with a repair), and the project's own H200 LM trace with ``[memory]`` events (data/gpu)."""

from __future__ import annotations

import gzip
import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest

import nbprof
from nbprof.errors import SchemaError, TraceFormatError

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
SAXPY = CORPUS / "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
QWEN = CORPUS / "AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
LM_MEM = ROOT / "data" / "gpu" / "lm_mem.pt.trace.json.gz"


def _need(p: Path) -> Path:
    if not p.exists():
        pytest.skip(f"{p.name} not present (../shared/corpus is absent in a fresh clone)")
    return p


def _assert_same(a: nbprof.Trace, b: nbprof.Trace) -> None:
    for name in ("events", "flows", "memory", "counters", "threads"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), obj=name)
    assert list(a.tables) == list(b.tables)
    for name in a.tables:
        pd.testing.assert_frame_equal(a.tables[name], b.tables[name], obj=f"tables[{name!r}]")
    assert a.meta == b.meta
    assert a.report == b.report


def test_save_nsys_report_with_side_tables(tmp_path):
    tr = nbprof.load(str(_need(SAXPY)))
    assert {"nvtx", "kernels", "cpu_samples"} <= set(tr.tables)
    out = tmp_path / "saxpy.nbprof"
    assert tr.save(out) == str(out)
    back = nbprof.load(str(out))
    _assert_same(tr, back)
    assert back.meta.source_path == str(SAXPY)  # the source it came from, not the saved file
    # object columns of plain values (NVTX payloads) keep their Python types
    assert list(back.tables["nvtx"]["payload"]) == list(tr.tables["nvtx"]["payload"])


def test_save_repaired_kineto_keeps_the_load_report(tmp_path):
    raw = gzip.decompress(_need(QWEN).read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(raw[: len(raw) // 2])
    tr = nbprof.load(str(cut))
    assert not tr.report.clean and tr.report.get("truncated").offset is not None
    out = tmp_path / "cut.nbprof"
    tr.save(out)
    back = nbprof.load(str(out))
    _assert_same(tr, back)
    assert back.report.get("truncated").offset == tr.report.get("truncated").offset


def test_save_memory_trace(tmp_path):
    tr = nbprof.load(str(_need(LM_MEM)))
    assert len(tr.memory) > 0 and tr.steps
    out = tmp_path / "lm.nbprof"
    tr.save(out)
    _assert_same(tr, nbprof.load(str(out)))


def test_file_layout_is_documented(tmp_path):
    tr = nbprof.load(str(_need(SAXPY)))
    out = tmp_path / "s.nbprof"
    tr.save(out)
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        head = json.loads(z.read("nbprof.json"))
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
    assert names[0] == "nbprof.json"
    assert {"events.parquet", "flows.parquet", "memory.parquet", "counters.parquet", "threads.parquet",
            "tables/nvtx.parquet"} <= set(names)
    assert head["format"] == "nbprof-trace" and head["version"] == 1
    assert head["meta"]["source_format"] == "nsys"


def test_newer_format_is_refused(tmp_path):
    tr = nbprof.load(str(_need(SAXPY)))
    src = tmp_path / "s.nbprof"
    tr.save(src)
    newer = tmp_path / "newer.nbprof"
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(newer, "w") as zo:
        for info in zi.infolist():
            data = zi.read(info)
            if info.filename == "nbprof.json":
                head = json.loads(data)
                head["version"] = 99
                data = json.dumps(head).encode()
            zo.writestr(info.filename, data)
    with pytest.raises(TraceFormatError, match="format version 99, this nbprof reads up to 1"):
        nbprof.load(str(newer))


@pytest.mark.parametrize("content", [b"", b"not a zip at all", b"PK\x03\x04broken"])
def test_damaged_file_is_a_trace_format_error(tmp_path, content):
    bad = tmp_path / "bad.nbprof"
    bad.write_bytes(content)
    with pytest.raises(TraceFormatError) as err:
        nbprof.load(str(bad))
    assert err.value.path == str(bad)


def test_zip_without_header_is_refused(tmp_path):
    bad = tmp_path / "other.nbprof"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("events.parquet", b"x")
    with pytest.raises(TraceFormatError, match=r"no nbprof\.json"):
        nbprof.load(str(bad))


def test_unplain_metadata_writes_nothing(tmp_path):
    tr = nbprof.load(str(_need(SAXPY)))
    tr.meta.extra["handle"] = object()
    out = tmp_path / "x.nbprof"
    with pytest.raises(SchemaError, match="not plain data"):
        tr.save(out)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_header_without_meta_is_a_trace_format_error(tmp_path):
    tr = nbprof.load(str(_need(SAXPY)))
    src = tmp_path / "s.nbprof"
    tr.save(src)
    bad = tmp_path / "nometa.nbprof"
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(bad, "w") as zo:
        for info in zi.infolist():
            data = zi.read(info)
            if info.filename == "nbprof.json":
                head = json.loads(data)
                del head["meta"], head["report"]
                data = json.dumps(head).encode()
            zo.writestr(info.filename, data)
    with pytest.raises(TraceFormatError, match="saved trace field meta is a NoneType, not dict"):
        nbprof.load(str(bad))
