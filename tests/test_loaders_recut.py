"""Issue 17/18 (loaders): the nsys/cache/snapshot re-cut and the non-Kineto bad inputs.

Real inputs only: the nsys 2022.2 GPU export of pipit's saxpy run (corpus, copied to tmp before
anything is changed), the repo's own memory snapshot/timeline captures, and files derived from them.
"""

from __future__ import annotations

import ast
import os
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from _support.paths import DATA, corpus_path

import nbprof
from nbprof.errors import TraceFormatError

ROOT = Path(__file__).resolve().parents[1]
SAXPY = "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"


@pytest.fixture()
def saxpy(tmp_path):
    dst = tmp_path / "saxpy.sqlite"
    shutil.copyfile(corpus_path(SAXPY), dst)
    return dst


def _assert_traces_equal(a, b):
    for name in ("events", "flows", "memory", "counters", "threads"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_categorical=False, obj=name)
    assert sorted(a.tables) == sorted(b.tables)
    for name in a.tables:
        pd.testing.assert_frame_equal(a.tables[name], b.tables[name], obj=f"tables[{name}]")
    assert a.meta == b.meta
    assert a.report.path == b.report.path and a.report.issues == b.report.issues


# ------------------------------------------------------------------------------ layers (issue 17)


def _imports(path: Path) -> set[str]:
    mods = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mods.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            mods |= {a.name for a in node.names}
    return mods


def test_sources_never_run_nsys_and_nsys_capture_never_loads():
    for p in (ROOT / "nbprof" / "sources").rglob("*.py"):
        bad = {m for m in _imports(p) if "capture" in m}
        assert not bad, f"{p} imports {bad}"
    for p in (ROOT / "nbprof" / "capture").glob("nsys*.py"):
        bad = {m for m in _imports(p) if "sources" in m}
        assert not bad, f"{p} imports {bad}"
    for p in (ROOT / "nbprof" / "analysis").rglob("*.py"):
        bad = {m for m in _imports(p) if "sources" in m}
        assert not bad, f"{p} imports {bad}"
    from nbprof.capture.nsys import NsysRun

    assert not hasattr(NsysRun, "load")
    from nbprof.sources import registry

    assert registry.resolve("x.nsys-rep").__module__ == "nbprof.api"
    assert registry.resolve("x.sqlite").__module__ == "nbprof.sources.nsys"


def test_memory_snapshot_classes_live_in_the_trace_model():
    from nbprof.sources import memory_snapshot as src
    from nbprof.trace import memory_snapshot as model

    assert src.MemorySnapshot is model.MemorySnapshot and src.MemoryTimeline is model.MemoryTimeline
    assert model.MemorySnapshot.__module__ == "nbprof.trace.memory_snapshot"
    snap = src.load_memory_snapshot(DATA / "gpu" / "lm_leak_snapshot.pickle")
    assert isinstance(snap, model.MemorySnapshot) and len(snap.events) == 2941


def test_nsys_side_tables_are_declared_trace_tables(saxpy):
    t = nbprof.load(saxpy)
    from nbprof.trace import schema

    assert "nsys_tables" not in t.meta.extra
    assert set(t.tables) <= set(schema.SIDE_TABLES)
    assert len(t.tables["cpu_samples"]) == 5451 and t.tables["kernels"]["short_name"].iloc[0] == "saxpy"
    from nbprof.analysis import nsys_stats

    assert nsys_stats.cuda_gpu_kern_sum(t)["instances"].sum() == 5


def test_cache_round_trip_of_a_real_nsys_trace_is_lossless(saxpy, tmp_path):
    direct = nbprof.load(saxpy)
    cdir = tmp_path / "cache"
    first = nbprof.load_ranks([str(saxpy)], cache_dir=str(cdir), progress=False)
    again = nbprof.load_ranks([str(saxpy)], cache_dir=str(cdir), progress=False)
    assert first.from_cache == {0: False} and again.from_cache == {0: True}
    cached = again[0]
    _assert_traces_equal(cached, direct)
    # types kept: an int stays an int (not "42297524224"), None stays None, nested dicts stay dicts
    assert cached.meta.device_properties[0]["totalGlobalMem"] == 42297524224
    assert type(cached.meta.origin_ns) is int and cached.meta.schema_version == direct.meta.schema_version
    assert isinstance(cached.meta.extra["export_meta"], dict)
    # the nvtx payload column (None and floats/ints mixed) comes back value for value
    assert list(cached.tables["nvtx"]["payload"]) == list(direct.tables["nvtx"]["payload"])


def test_cache_refuses_metadata_that_is_not_plain_data(saxpy, tmp_path):
    from nbprof.errors import SchemaError
    from nbprof.scale import TraceCache

    t = nbprof.load(saxpy)
    t.meta.extra["oops"] = {"frame": pd.DataFrame({"a": [1]})}
    c = TraceCache(str(tmp_path / "c"))
    with pytest.raises(SchemaError, match=r"cannot cache trace\['meta'\]\['extra'\]\['oops'\]\['frame'\]: a pandas"):
        c.put("abc", t)
    assert not c.has("abc") and os.listdir(c.dir) == []


# ------------------------------------------------------------------------------ nsys bad inputs (issue 18)


def _sql(path, *stmts):
    con = sqlite3.connect(path)
    for st in stmts:
        con.execute(st)
    con.commit()
    con.close()


def test_nsys_steps_come_from_nvtx_ranges_through_trace_steps(saxpy):
    # nsys's step assignment is nbprof.trace.steps.assign_steps with its NVTX ranges (per pid, the
    # NVTX end inclusive); kernels take their launching runtime call's step
    tid = 302119224788637  # the host thread of every runtime call
    ins = "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES "
    _sql(saxpy, ins + f"(900000000, 1000000000, 59, 'step 1', {tid}, 0)", ins + f"(1100000000, 1196025543, 59, 'step 2', {tid}, 0)")
    ev = nbprof.load(saxpy).events
    k = ev[ev["cat"] == "kernel"].sort_values("ts_ns")
    assert k["step"].tolist() == [1, 2, -1, -1, -1]
    rt = ev[(ev["correlation"] == 156) & (ev["device"] < 0)].sort_values("ts_ns")
    assert rt["ts_ns"].diff().iloc[1] == 521 and rt["step"].tolist() == [2, 2]  # the second starts at the end
    nv = ev[ev["cat"] == "nvtx"]
    assert nv.loc[nv["name"].isin(["step 1", "step 2"]), "step"].tolist() == [1, 2]
    assert (nv.loc[~nv["name"].isin(["step 1", "step 2"]), "step"] == -1).all()
    assert sorted(set(ev["step"])) == [-1, 1, 2]


def test_nsys_wal_mode_export_writes_nothing_next_to_it(saxpy):
    _sql(saxpy, "PRAGMA journal_mode=WAL")
    assert saxpy.read_bytes()[18:20] == b"\x02\x02"  # WAL mode in the file header
    before = sorted(os.listdir(saxpy.parent))
    t = nbprof.load(saxpy)
    assert len(t.tables["kernels"]) == 5 and sorted(os.listdir(saxpy.parent)) == before == ["saxpy.sqlite"]


def test_nsys_wal_with_pending_pages_is_read_from_a_private_copy(saxpy):
    _sql(saxpy, "PRAGMA journal_mode=WAL")
    writer = sqlite3.connect(saxpy)  # a writer still alive: its pages sit in the -wal file
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE StringIds SET value='saxpy_wal' WHERE value='saxpy'")
    writer.commit()
    try:
        listing = {f: os.stat(saxpy.parent / f).st_mtime_ns for f in os.listdir(saxpy.parent)}
        t = nbprof.load(saxpy)
        assert t.tables["kernels"]["short_name"].iloc[0] == "saxpy_wal"
        assert t.report.get("wal_copy").action == "assumed"
        assert {f: os.stat(saxpy.parent / f).st_mtime_ns for f in os.listdir(saxpy.parent)} == listing
    finally:
        writer.close()


def test_nsys_path_with_uri_characters(tmp_path):
    d = tmp_path / "a b?c#d%20"
    d.mkdir()
    p = d / "x.sqlite"
    shutil.copyfile(corpus_path(SAXPY), p)
    assert len(nbprof.load(p).tables["kernels"]) == 5


def test_nsys_bad_values_are_reported_repairs_and_strict_raises(saxpy):
    _sql(saxpy,
         """UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end"='abc' WHERE rowid=2""",
         """UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "start"=1e30 WHERE rowid=3""",
         "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs='noon'",
         "UPDATE ANALYSIS_DETAILS SET duration=1e300",
         "UPDATE EXPORT_META_DATA SET value='two.nine' WHERE name='EXPORT_SCHEMA_VERSION'",
         "CREATE TABLE MPI_RANKS (globalTid INTEGER, rank INTEGER)",
         "INSERT INTO MPI_RANKS VALUES (1, 'zero')")
    t = nbprof.load(saxpy)
    k = t.tables["kernels"]
    assert len(k) == 5 and k["dur_ns"].tolist()[1] == 0 and k["ts_ns"].tolist()[2] == -1
    it = t.report.get("bad_value:CUPTI_ACTIVITY_KIND_KERNEL.end")
    assert it.action == "repaired" and it.count == 1 and "rowid 2: 'abc'" in it.message
    assert t.report.get("bad_value:CUPTI_ACTIVITY_KIND_KERNEL.start").count == 1
    assert t.report.get("negative_dur:CUPTI_ACTIVITY_KIND_KERNEL").count == 1
    assert t.meta.origin_ns is None and t.report.get("bad_value:TARGET_INFO_SESSION_START_TIME.utcEpochNs").count == 1
    assert "duration" not in t.meta.extra["analysis_details"]
    assert t.meta.schema_version is None and t.report.get("bad_schema_version") is not None
    assert t.meta.rank == 0 and t.meta.rank_source == "assumed" and t.report.get("rank_assumed") is not None
    with pytest.raises(TraceFormatError) as ei:
        nbprof.load(saxpy, strict=True)
    assert ei.value.path == str(saxpy) and ei.value.table == "CUPTI_ACTIVITY_KIND_KERNEL"
    assert "start: 1e+30 is not an integer in int64 range (rowid 3)" in str(ei.value)


def test_nsys_invalid_utf8_in_string_ids_is_replaced_and_reported(saxpy):
    _sql(saxpy, "UPDATE StringIds SET value=CAST(X'73617870FF79' AS TEXT) WHERE value='saxpy'")
    t = nbprof.load(saxpy)
    assert t.tables["kernels"]["short_name"].iloc[0] == "saxp\ufffdy"
    it = t.report.get("bad_utf8")
    assert it.count == 1 and "table StringIds" in it.message and "saxp\\xffy" in it.message
    with pytest.raises(TraceFormatError) as ei:
        nbprof.load(saxpy, strict=True)
    assert ei.value.table == "StringIds" and "not valid UTF-8" in str(ei.value)


def test_nsys_missing_column_and_absent_table(saxpy):
    _sql(saxpy, 'ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN "end"', "DROP TABLE NVTX_EVENTS")
    t = nbprof.load(saxpy)
    it = t.report.get("missing_column:CUPTI_ACTIVITY_KIND_KERNEL")
    assert it.action == "dropped" and it.count == 5 and "no column end" in it.message
    assert "kernels" not in t.tables and (t.events["cat"] == "kernel").sum() == 0
    assert "NVTX_EVENTS" in t.report.get("absent_tables").message and t.report.get("absent_tables").action == "assumed"
    assert len(t.tables["memcpy"]) == 15  # the rest still loads
    with pytest.raises(TraceFormatError, match="has no column end") as ei:
        nbprof.load(saxpy, strict=True)
    assert ei.value.table == "CUPTI_ACTIVITY_KIND_KERNEL"


# ------------------------------------------------------------------------------ path checks, strict everywhere


def test_load_refuses_fifo_directory_and_device_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.pt.trace.json"
    os.mkfifo(fifo)
    with pytest.raises(TraceFormatError, match=r"pipe\.pt\.trace\.json: is a FIFO \(named pipe\), not a trace file"):
        nbprof.load(fifo)  # returns at once: nothing opens the FIFO
    d = tmp_path / "run.sqlite"
    d.mkdir()
    with pytest.raises(TraceFormatError, match="is a directory, not a trace file"):
        nbprof.load(d)
    link = tmp_path / "null.pickle"
    link.symlink_to("/dev/null")
    with pytest.raises(TraceFormatError, match="is a character device, not a trace file"):
        nbprof.load(link)


def test_cli_summary_of_a_fifo_is_one_line_exit_2(tmp_path, capsys):
    from nbprof.cli import main

    fifo = tmp_path / "x.sqlite"
    os.mkfifo(fifo)
    rc = main(["summary", str(fifo)])
    err = capsys.readouterr().err
    assert rc == 2 and err == f"nbprof summary: error: cannot read the trace: {fifo}: is a FIFO (named pipe), not a trace file\n"


@pytest.mark.parametrize("name", ["saxpy.sqlite", "lm_leak_snapshot.pickle", "lm_memory_timeline.raw.json.gz"])
def test_every_format_takes_strict(name, tmp_path):
    src = corpus_path(SAXPY) if name.endswith(".sqlite") else DATA / "gpu" / name
    p = tmp_path / name
    shutil.copyfile(src, p)
    a, b = nbprof.load(p, strict=False), nbprof.load(p, strict=True)
    assert len(a.events) == len(b.events) > 0


def _timeline_rows():
    import gzip
    import json

    return json.loads(gzip.decompress((DATA / "gpu" / "lm_memory_timeline.raw.json.gz").read_bytes()))


def test_memory_timeline_ragged_null_huge_rows_are_dropped_and_reported(tmp_path):
    import json

    rows = _timeline_rows()[:6]
    good = nbprof.load(_write(tmp_path / "ok.raw.json", json.dumps(rows)))
    bad_rows = rows[:2] + [[5, 2, 64], None, [5, 2, 2**70, 3], [5, 2, "64", 3], [5.5, 2, 64, 3]] + rows[2:]
    t = nbprof.load(_write(tmp_path / "bad.raw.json", json.dumps(bad_rows)))
    pd.testing.assert_frame_equal(t.events, good.events)
    it = t.report.get("bad_row")
    assert it.action == "dropped" and it.count == 5 and "first: row 2: [5, 2, 64]" in it.message
    with pytest.raises(TraceFormatError, match="5 rows are not"):
        nbprof.load(tmp_path / "bad.raw.json", strict=True)


def test_memory_timeline_with_a_utf8_bom(tmp_path):
    import json

    rows = _timeline_rows()[:6]
    t = nbprof.load(_write(tmp_path / "bom.raw.json", b"\xef\xbb\xbf" + json.dumps(rows).encode()))
    assert len(t.events) == 6 and t.report.get("utf8_bom").action == "assumed"


def _write(p, data):
    Path(p).write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


def _snapshot_obj():
    import pickle

    return pickle.loads((DATA / "gpu" / "lm_leak_snapshot.pickle").read_bytes())


def test_snapshot_containers_of_the_wrong_type_and_bad_frame_lines(tmp_path):
    import pickle

    obj = _snapshot_obj()
    obj["segments"][0]["blocks"] = 7  # TypeError before: len(7)
    import copy

    e = next(e for e in obj["device_traces"][0] if e.get("frames"))
    e["frames"] = copy.deepcopy(e["frames"])  # frames are shared by pickle's memo: change this entry's only
    e["frames"][0]["line"] = "twelve"  # ValueError before: int("twelve")
    t = nbprof.load(_write(tmp_path / "s.pickle", pickle.dumps(obj, protocol=4)))
    assert t.report.get("bad_container:segment blocks").count == 1 and len(t.segments) == 16
    assert t.report.get("bad_frame").count == 1 and "'twelve'" in t.report.get("bad_frame").message
    obj["device_traces"] = 3
    t2 = nbprof.load(_write(tmp_path / "s2.pickle", pickle.dumps(obj, protocol=4)))
    assert len(t2.events) == 0 and t2.report.get("bad_container:device_traces").action == "dropped"
    with pytest.raises(TraceFormatError, match=r"segment blocks is a int, expected a list: ignored \(strict mode"):
        nbprof.load(tmp_path / "s2.pickle", strict=True)


def test_snapshot_history_that_starts_mid_run_is_noted():
    t = nbprof.load(DATA / "gpu" / "lm_leak_snapshot.pickle")
    it = t.report.get("history_starts_mid_run:blocks")
    assert it.action == "assumed" and it.count == 15 and "trace entry 29 of device 0" in it.message
    assert t.report.clean


# ------------------------------------------------------------------------------ advisor, static HTML


@pytest.mark.parametrize("dev_id", ["cuda:0", "0", "GPU 0"])
def test_advisor_takes_device_ids_written_as_text(dev_id):
    from nbprof.analysis import advisor

    t = nbprof.load(corpus_path("pytorch__kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"))
    t.meta.device_properties[0]["id"] = dev_id  # ValueError: invalid literal for int() before
    (f,) = advisor.advise(t, rules=["tensor_cores"])
    assert f.evidence["device"] == 0 and f.evidence["compute_capability"] == "7.0"


def test_to_html_never_writes_through_a_planted_tmp_name(tmp_path):
    pytest.importorskip("bokeh")
    from nbprof import viz

    t = nbprof.load(DATA / "cpu" / "cnn_nw0.pt.trace.json.gz")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "report.html"
    (tmp_path / "report.html.tmp").symlink_to(victim)  # the old fixed temp name, planted
    (tmp_path / "other.html.tmp").write_text("someone's file")
    viz.to_html(t, out, views=["overview"])
    assert victim.read_text() == "keep me" and (tmp_path / "other.html.tmp").read_text() == "someone's file"
    assert out.read_text().startswith("<!DOCTYPE html>") and not out.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.html.tmp", "report.html", "report.html.tmp", "victim.txt"]
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~0o022) or out.stat().st_mode & 0o044  # readable like open()
    with pytest.raises(FileExistsError):
        viz.to_html(t, out, views=["overview"])
    viz.to_html(t, out, views=["overview"], overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.html.tmp", "report.html", "report.html.tmp", "victim.txt"]


def test_nsys_text_in_an_integer_column_with_nulls(saxpy):
    # NVTX_EVENTS.color is NULL in most rows of this export: text in two others made the nulls +inf before
    _sql(saxpy, "UPDATE NVTX_EVENTS SET color='abc' WHERE rowid IN (3, 4)")
    t = nbprof.load(saxpy)
    assert t.report.get("bad_value:NVTX_EVENTS.color").count == 2
    assert set(t.tables["nvtx"]["color"]) == {-1} | set(nbprof.load(corpus_path(SAXPY)).tables["nvtx"]["color"])


# ------------------------------------------------------------------------------ fuzz findings, round 1


def test_missing_files_are_nbprof_errors_and_file_not_found(tmp_path):
    from nbprof.deepspeed import parsers as P
    from nbprof.errors import NbprofError, TraceFileNotFoundError

    dangling = tmp_path / "gone.sqlite"
    dangling.symlink_to(tmp_path / "nowhere")
    for call in (lambda: nbprof.load(tmp_path / "x.pt.trace.json"), lambda: nbprof.load(dangling),
                 lambda: P.parse_log(str(tmp_path / "run.log")), lambda: P.parse_flops_profile(tmp_path / "f.txt")):
        with pytest.raises(TraceFileNotFoundError) as ei:
            call()
        assert isinstance(ei.value, FileNotFoundError) and isinstance(ei.value, NbprofError) and ei.value.filename
    fifo = tmp_path / "ds.log"
    os.mkfifo(fifo)
    with pytest.raises(TraceFormatError, match="is a FIFO"):
        P.parse_log(fifo)
    with pytest.raises(TraceFormatError, match="is a character device"):
        P.parse_log("/dev/zero")
    with pytest.raises(TraceFormatError, match="is a directory, not a DeepSpeed log"):
        P.parse_log(tmp_path)
    with pytest.raises(TraceFormatError, match="no DeepSpeed flops-profiler report"):
        P.parse_flops_profile("no report here\n")


def test_nsys_corrupt_pages_blobs_in_text_and_a_stringids_without_value(saxpy, tmp_path):
    _sql(saxpy, "UPDATE StringIds SET value=X'00FF61' WHERE value='saxpy'",
         "UPDATE PROCESSES SET name=X'FF' ", "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId=X'FF' WHERE rowid=1",
         "UPDATE NVTX_EVENTS SET text=42 WHERE rowid=1")
    t = nbprof.load(saxpy)  # TypeError (regex / join on bytes) before
    assert t.tables["kernels"]["short_name"].iloc[0] == "\x00\ufffda"
    assert set(t.tables["processes"]["name"]) == {"\ufffd"}
    assert t.tables["runtime"]["api_name"].iloc[0] == "[unknown]"  # a blob as a StringIds id: missing, reported
    assert "b'\\xff'" in t.report.get("bad_value:CUPTI_ACTIVITY_KIND_RUNTIME.nameId").message
    assert t.tables["nvtx"]["text"].iloc[0] == "42"
    bad = tmp_path / "corrupt.sqlite"
    con = sqlite3.connect(corpus_path(SAXPY))
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name='StringIds'").fetchone()[0]
    page = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    data = bytearray(corpus_path(SAXPY).read_bytes())
    data[(root - 1) * page:root * page] = b"\xa5" * page  # the StringIds b-tree page
    bad.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match="malformed") as ei:
        nbprof.load(bad)
    assert ei.value.table == "StringIds"
    _sql(saxpy, "ALTER TABLE StringIds RENAME COLUMN value TO v")
    with pytest.raises(TraceFormatError, match="expected id and value") as ei:
        nbprof.load(saxpy)
    assert ei.value.table == "StringIds"


def test_snapshot_huge_numbers_and_deeply_nested_frame_text(tmp_path):
    import pickle
    import sys

    obj = _snapshot_obj()
    ent = obj["device_traces"][0]
    ent[0]["size"], ent[1]["addr"], ent[2]["time_us"] = 2**70, 1.5e19, float("inf")
    ent[5]["addr"], obj["segments"][0]["device"] = -(2**70), 2**40  # OverflowError before
    deep = []
    for _ in range(sys.getrecursionlimit() + 100):
        deep = [deep]
    ent[3]["frames"] = [{"name": deep, "filename": "x.py", "line": 1}]
    ent[4]["action"] = {"nested": deep}
    lim = sys.getrecursionlimit()
    sys.setrecursionlimit(lim * 4)  # only to write the test file
    try:
        data = pickle.dumps(obj, protocol=4)
    finally:
        sys.setrecursionlimit(lim)
    t = nbprof.load(_write(tmp_path / "s.pickle", data))
    ev = t.events
    assert ev["size_bytes"].iloc[0] == 0 and ev["addr"].iloc[1] == -1 and ev["ts_ns"].iloc[2] == -1 and ev["action"].iloc[4] == "unknown"
    assert t.report.get("bad_frame").count == 1 and len(ev) == 2941
    assert ev["addr"].iloc[5] == -1 and t.segments["device"].iloc[0] == 0


def test_snapshot_deeply_nested_frames_are_described_not_repred(tmp_path):
    # fuzz seed 18 snapshot:23: 'frames' nested past the recursion limit -> RecursionError in the
    # bad_frame message (the first bad frame was repr'd whole)
    import pickle
    import sys

    obj = _snapshot_obj()
    ent = obj["device_traces"][0]
    deep: list = []
    for _ in range(sys.getrecursionlimit() + 100):
        deep = [deep]
    ent[3]["frames"] = deep  # frames[0] is a (deep) list, not a frame dict
    ent[4]["frames"] = [{"name": "f", "filename": "x.py", "line": deep}]
    lim = sys.getrecursionlimit()
    sys.setrecursionlimit(lim * 4)  # only to write the test file
    try:
        data = pickle.dumps(obj, protocol=4)
    finally:
        sys.setrecursionlimit(lim)
    t = nbprof.load(_write(tmp_path / "s.pickle", data))
    it = t.report.get("bad_frame")
    assert it.count == 2 and "(first: a list of 1 item)" in it.message
    assert len(t.events) == 2941 and t.events["frames_id"].iloc[3] == -1


def test_memory_timeline_deep_nesting_is_a_format_error(tmp_path):
    p = _write(tmp_path / "deep.raw.json", "[" * 100000 + "]" * 100000)
    with pytest.raises(TraceFormatError, match="not JSON"):
        nbprof.load(p)


def test_snapshot_peak_on_an_empty_snapshot_is_an_empty_profile_error(tmp_path):
    import pickle

    from nbprof.analysis.memory_snapshot import snapshot_peak
    from nbprof.errors import EmptyProfileError

    snap = nbprof.load(_write(tmp_path / "e.pickle", pickle.dumps({"segments": [], "device_traces": [[]]})))
    with pytest.raises(EmptyProfileError, match="device 0 has no allocator history and no live blocks"):
        snapshot_peak(snap)


def test_nsys_schema_names_that_are_not_utf8_and_a_null_session_start(saxpy):
    _sql(saxpy, "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs=NULL")
    t = nbprof.load(saxpy)  # TypeError int(None) before
    assert t.meta.origin_ns is None and len(t.tables["kernels"]) == 5
    _sql(saxpy, "PRAGMA writable_schema=ON",
         "UPDATE sqlite_master SET name=CAST(X'5468726561644E616D6573FF' AS TEXT) WHERE name='ThreadNames'")
    with pytest.raises(TraceFormatError, match="not a readable SQLite database") as ei:
        nbprof.load(saxpy)  # UnicodeDecodeError before
    assert ei.value.path == str(saxpy)


def test_snapshot_byte_counts_out_of_range_are_repaired_and_analyses_run(tmp_path):
    import pickle

    from nbprof.analysis.memory_snapshot import snapshot_peak, snapshot_timeline

    obj = _snapshot_obj()
    obj["segments"][0]["total_size"] = -(2**63)  # OverflowError in snapshot_timeline before
    obj["segments"][1]["blocks"][0]["size"] = -1e308  # OverflowError in the loader before
    t = nbprof.load(_write(tmp_path / "s.pickle", pickle.dumps(obj, protocol=4)))
    assert t.report.get("bad_size").count == 2 and t.segments["total_size_bytes"].iloc[0] == 0
    assert len(snapshot_timeline(t, 0)) == 2941 and snapshot_peak(t).allocated_bytes > 0


def test_nsys_processes_without_name_and_a_blob_schema_version(saxpy):
    _sql(saxpy, "ALTER TABLE PROCESSES DROP COLUMN name",
         "UPDATE EXPORT_META_DATA SET value=X'FF00' WHERE name='EXPORT_SCHEMA_VERSION'")
    t = nbprof.load(saxpy)  # KeyError 'name' / ValueError int() before (fuzz round 3, 32-33)
    assert t.report.get("missing_column:PROCESSES").action == "dropped" and "processes" not in t.tables
    assert t.meta.schema_version is None and t.report.get("bad_schema_version").action == "assumed"
    assert len(t.tables["kernels"]) == 5 and "MPI Rank 0" in set(t.threads["name"])
