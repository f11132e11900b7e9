"""Issue 33 B8 (nsys): an export whose kernel table is a recursive VIEW loads (only real tables are read,
the view is reported) instead of never finishing."""

from __future__ import annotations

import shutil
import sqlite3

import nbprof

SAXPY = "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"


def test_recursive_view_instead_of_kernel_table(tmp_path, corpus):
    src = corpus(SAXPY)
    good = nbprof.load(src)
    p = tmp_path / "view.sqlite"
    shutil.copyfile(src, p)
    con = sqlite3.connect(p)
    con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL "
                "SELECT x + 1 FROM r) SELECT x AS start, x + 1 AS end, 0 AS deviceId, 7 AS streamId, x AS correlationId, "
                "0 AS shortName, 0 AS demangledName, 0 AS globalPid FROM r")
    con.commit()
    con.close()
    tr = nbprof.load(p)
    it = tr.report.get("views_ignored")
    assert it is not None and it.count == 1 and "CUPTI_ACTIVITY_KIND_KERNEL" in it.message
    n_kernels = int((good.events["cat"] == "kernel").sum())
    assert n_kernels > 0 and int((tr.events["cat"] == "kernel").sum()) == 0
    assert len(tr.events) == len(good.events) - n_kernels  # everything else as before


def test_kernels_without_launch_record_are_noted(tmp_path, corpus):
    src = corpus(SAXPY)
    assert nbprof.load(src).report.get("no_launch") is None  # every kernel and copy has its launch
    p = tmp_path / "noapi.sqlite"
    shutil.copyfile(src, p)
    con = sqlite3.connect(p)
    n_rt = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME")  # as with CUDA API tracing off
    con.commit()
    con.close()
    tr = nbprof.load(p)
    dev = int(tr.events["cat"].isin(["kernel", "gpu_memcpy", "gpu_memset"]).sum())
    it = tr.report.get("no_launch")
    assert n_rt > 0 and dev > 0 and it is not None and it.count == dev
