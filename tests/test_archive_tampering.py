"""Issue 33 (fuzz of archives and saved files): a damaged rank archive or member names itself in an nbprof error,
one member that cannot be read costs that rank only, and a tampered ``.nbprof`` file is refused by name. Each input
is the smallest real-derived one the fuzzer found (the two real NCCL rank traces, a saved real trace)."""

from __future__ import annotations

import struct
import zipfile

import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.errors import NbprofError, TraceFormatError
from nbprof.scale import load_ranks

TF = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/"


def _ranks_zip(path, names=("rank0.json.gz", "rank1.json.gz")):
    with zipfile.ZipFile(path, "w") as z:
        for r, n in enumerate(names):
            z.writestr(zipfile.ZipInfo(n, date_time=(2024, 1, 1, 0, 0, 0)),
                       corpus_path(TF + f"sampled_rank-{r % 2}.json.gz").read_bytes())
    return path


def test_a_damaged_archive_is_an_nbprof_error_naming_it(tmp_path):
    arc = _ranks_zip(tmp_path / "ranks.zip")
    bad = tmp_path / "cut.zip"
    bad.write_bytes(arc.read_bytes()[: arc.stat().st_size // 3])  # fuzz seed 3 archive:4: 'File is not a zip file'
    with pytest.raises(TraceFormatError, match="cannot read the archive: BadZipFile") as ei:
        load_ranks(bad, cache=False, progress=False)
    assert ei.value.path == str(bad)


def test_a_member_that_cannot_be_read_costs_its_rank_only(tmp_path):
    arc = _ranks_zip(tmp_path / "ranks.zip")
    data = bytearray(arc.read_bytes())
    # fuzz seed 3 archive:36: the second member's bytes damaged (its CRC no longer matches)
    second = data.find(b"PK\x03\x04", 4)
    off = second + 30 + struct.unpack_from("<H", data, second + 26)[0] + struct.unpack_from("<H", data, second + 28)[0]
    data[off + 100] ^= 0xFF
    arc.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="1 archive members could not be read"):
        mr = load_ranks(arc, cache=False, progress=False)
    assert sorted(mr.paths) == [0] and list(mr.failed) == [f"{arc}::rank1.json.gz"]
    assert "cannot read member 'rank1.json.gz' of the archive" in mr.failed[f"{arc}::rank1.json.gz"]
    assert mr.report.get("ranks.zip::rank1.json.gz:load_failed").action == "dropped"
    with pytest.raises(NbprofError, match="1 of 2 members could not be read"):
        load_ranks(arc, cache=False, progress=False, on_error="raise")


def test_an_entry_with_an_empty_name_is_not_a_member(tmp_path):
    arc = _ranks_zip(tmp_path / "ranks.zip", names=("rank0.json.gz", ""))  # fuzz seed 3 archive:47: IndexError
    mr = load_ranks(arc, cache=False, progress=False)
    assert sorted(mr.paths) == [0] and not mr.failed


def test_a_saved_file_with_a_side_table_swapped_is_refused(tmp_path):
    tr = nbprof.load(corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/cupti_profiler/"
                                 "benchmark_result_924719_1679055439_trace.json.gz"))
    assert "device_args" in tr.tables
    good = tr.save(tmp_path / "t.nbprof")
    with zipfile.ZipFile(good) as z:
        parts = {i.filename: z.read(i) for i in z.infolist()}
    for table, other in (("tables/device_args.parquet", "events.parquet"), ("threads.parquet", "tables/device_args.parquet")):
        bad = tmp_path / f"bad-{table.replace('/', '_')}.nbprof"
        with zipfile.ZipFile(bad, "w") as z:  # fuzz seed 3 saved:18 and saved:38 (a KeyError in the Chrome export)
            for n, b in parts.items():
                z.writestr(n, parts[other] if n == table else b)
        with pytest.raises(TraceFormatError, match="has no column"):
            nbprof.load(bad)
    assert len(nbprof.load(good).events) == len(tr.events)


def test_a_folder_named_like_an_archive_is_an_nbprof_error(tmp_path):
    d = tmp_path / "ranks.zip"  # fuzz seed 0 special:15: FileNotFoundError, not an nbprof error
    d.mkdir()
    with pytest.raises(nbprof.errors.TraceFileNotFoundError, match="no trace files match"):
        load_ranks(d, cache=False, progress=False)


def test_a_dangling_link_named_like_an_archive_is_an_nbprof_error(tmp_path):
    (tmp_path / "ranks.zip").symlink_to(tmp_path / "gone.zip")  # fuzz seed 0 special:42
    with pytest.raises(nbprof.errors.TraceFileNotFoundError, match="no such trace file"):
        load_ranks(tmp_path / "ranks.zip", cache=False, progress=False)
