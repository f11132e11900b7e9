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

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, corpus_path

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
