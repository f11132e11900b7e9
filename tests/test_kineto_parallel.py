"""The two-process load (large traces) gives exactly the one-process tables and report.

``NBPROF_LOAD_PROCESSES=2`` makes any trace take the two-process path (normally only events arrays
of 64 MB or more do), ``=1`` keeps it in one process. A spy on ``_parallel_extract`` (the real
function runs) tells which path a load took.
"""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
from _support.paths import DATA, ROOT, corpus_path

import nbprof
from nbprof.sources import kineto

sys.path.insert(0, str(ROOT / "benchmarks"))
from gen_kineto import generate


def _load(path, processes: int, monkeypatch) -> tuple[nbprof.Trace, list]:
    taken: list = []
    real = kineto._parallel_extract

    def spy(*a, **k):
        r = real(*a, **k)
        taken.append(r is not None)
        return r

    monkeypatch.setenv("NBPROF_LOAD_PROCESSES", str(processes))
    monkeypatch.setattr(kineto, "_parallel_extract", spy)
    tr = nbprof.load(path)
    monkeypatch.undo()
    return tr, taken


def _same(a: nbprof.Trace, b: nbprof.Trace) -> None:
    for name in ("events", "flows", "memory", "counters", "threads"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True, obj=name)
    assert [(i.kind, i.action, i.count, i.message, i.offset) for i in a.report.issues] == \
           [(i.kind, i.action, i.count, i.message, i.offset) for i in b.report.issues]
    assert (a.meta.origin_ns, a.meta.rank, a.meta.world_size) == (b.meta.origin_ns, b.meta.rank, b.meta.world_size)


def test_generated_trace_two_processes_equal_one(tmp_path, monkeypatch):
    p = tmp_path / "gen.pt.trace.json"
    counts = generate(str(p), 30_000, 4)
    one, t1 = _load(p, 1, monkeypatch)
    two, t2 = _load(p, 2, monkeypatch)
    assert t1 == [] and t2 == [True]  # one process never tried; two processes used
    _same(one, two)
    assert len(two.events) == counts["cpu_op"] + counts["cuda_runtime"] + counts["kernel"] + \
        counts["python_function"] + counts["steps"]
    assert len(two.flows) == counts["ac2g"] // 2 and (two.flows["dst_ts_ns"] >= 0).all()
    assert len(two.memory) == counts["memory"]
    assert sorted(two.events["step"].unique().tolist()) == list(range(4))  # the generator numbers steps from 0
    assert two.report.clean


@pytest.mark.parametrize("rel", [
    "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "AMD-AGI__TraceLens/tests/traces/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz",
    "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz",
    # 16 events: some runs hold no events-table rows, only metadata/instants (whose phases are
    # still categories of the ph column, as in one process)
    "facebookresearch__HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
])
def test_real_traces_two_processes_equal_one(rel, monkeypatch):
    p = corpus_path(rel)
    one, _ = _load(p, 1, monkeypatch)
    two, taken = _load(p, 2, monkeypatch)
    assert taken == [True]
    _same(one, two)


def test_h200_trace_two_processes_equal_one(monkeypatch):
    p = DATA / "gpu" / "lm_h200.pt.trace.json.gz"
    one, _ = _load(p, 1, monkeypatch)
    two, taken = _load(p, 2, monkeypatch)
    assert taken == [True]
    _same(one, two)
    assert (two.events["cat"] == "kernel").sum() == (one.events["cat"] == "kernel").sum() > 0


def _events(n: int, extra: dict | None = None) -> list[dict]:
    evs = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
            "ts": 10.0, "dur": float(n * 10 + 10), "args": {"External id": 1}}]
    for i in range(n):
        e = {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": 1,
             "ts": 11.0 + i * 10, "dur": 5.5, "args": {"External id": i + 2, "Sequence number": i}}
        evs.append(e)
    if extra:
        evs[-10].update(extra)
    return evs


def test_a_defect_in_the_second_half_falls_back_with_whole_file_offsets(tmp_path, monkeypatch):
    p = tmp_path / "neg.pt.trace.json"
    text = json.dumps({"schemaVersion": 1, "traceEvents": _events(2000, {"dur": -1.0})}, indent=1)
    p.write_text(text)
    one, _ = _load(p, 1, monkeypatch)
    two, taken = _load(p, 2, monkeypatch)
    assert taken == [False]  # the child's half needed a repair: the whole file was loaded in one process
    _same(one, two)
    it = two.report.get("negative_dur")
    assert (it.action, it.count) == ("repaired", 1)
    assert text.rfind('"dur": -1.0') > it.offset > len(text) // 2


def test_a_boundary_inside_a_string_is_not_used_as_the_split(tmp_path, monkeypatch):
    # one long name holding "},{" spans the middle of the array: the first "},{" after the middle
    # is inside that string, both halves fail to decode and the file is loaded in one process
    evs = _events(20)
    evs[10]["name"] = "x" * 20000 + '"},{"' + "y" * 200
    p = tmp_path / "str.pt.trace.json"
    text = json.dumps({"traceEvents": evs})
    p.write_text(text)
    start, end, _meta = kineto._split_top(text.encode())
    at = kineto._EVENT_BOUNDARY.search(text.encode(), start + (end - start) // 2).start()
    name_at = text.index("xxx")
    assert name_at < at < name_at + len(json.dumps(evs[10]["name"]))  # the candidate split is in the name
    one, _ = _load(p, 1, monkeypatch)
    two, taken = _load(p, 2, monkeypatch)
    assert taken == [False]
    _same(one, two)
    assert (two.events["name"] == evs[10]["name"]).sum() == 1


def test_small_traces_stay_in_one_process(tmp_path, monkeypatch):
    p = tmp_path / "small.pt.trace.json"
    p.write_text(json.dumps({"traceEvents": _events(50)}))
    monkeypatch.delenv("NBPROF_LOAD_PROCESSES", raising=False)
    taken: list = []
    real = kineto._parallel_extract
    monkeypatch.setattr(kineto, "_parallel_extract", lambda *a, **k: taken.append(1) or real(*a, **k))
    tr = nbprof.load(p)
    assert taken == [] and len(tr.events) == 51


def test_large_files_read_into_populated_memory_load_the_same(tmp_path, monkeypatch):
    """Plain files of _POPULATE_MIN_BYTES or more are read into an anonymous MAP_POPULATE mapping
    (forced here for small files): the same tables, reports and byte offsets as a bytearray read, in
    one and two processes, through the two-process fallback, the tolerant path and strict mode."""
    import mmap

    from nbprof.errors import TraceFormatError

    if not hasattr(mmap, "MAP_POPULATE"):
        pytest.skip("MAP_POPULATE is Linux-only; other systems read into a bytearray")
    gen = tmp_path / "gen.pt.trace.json"
    generate(str(gen), 20_000, 3)
    neg = tmp_path / "neg.pt.trace.json"
    neg.write_text(json.dumps({"schemaVersion": 1, "traceEvents": _events(2000, {"dur": -1.0})}, indent=1))
    nan = tmp_path / "nan.pt.trace.json"
    nan.write_text(json.dumps({"traceEvents": _events(300)}).replace('"dur": 5.5', '"dur": NaN', 1))

    def load(p, processes, populate, **kw):
        with monkeypatch.context() as m:
            m.setenv("NBPROF_LOAD_PROCESSES", str(processes))
            m.setattr(kineto.reading, "_POPULATE_MIN_BYTES", 0 if populate else 1 << 62)
            kinds = []
            real = kineto._read_buffer
            m.setattr(kineto, "_read_buffer", lambda *a: kinds.append(type(b := real(*a))) or b)
            tr = nbprof.load(p, **kw)
        assert kinds == [mmap.mmap if populate else bytearray]
        return tr

    for p in (gen, neg, nan):
        ref = load(p, 1, False)
        for processes in (1, 2):
            _same(ref, load(p, processes, True))
    assert load(nan, 1, True).report.get("nonfinite") is not None
    offsets = []
    for populate in (False, True):
        with pytest.raises(TraceFormatError) as ei:
            load(neg, 1, populate, strict=True)
        offsets.append(ei.value.offset)
    assert offsets[0] == offsets[1] and offsets[0] > 0
