"""``tr.sql(...)`` (issue 23): DuckDB over the trace's tables, checked against nbprof's own analyses on real
traces (pipit's saxpy Nsight Systems export; TraceLens' B200 trace with 768 kernels)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

import nbprof
from nbprof.analysis.nsys_stats import cuda_gpu_kern_sum, nvtx_sum
from nbprof.errors import MissingDependencyError

pytest.importorskip("duckdb")

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
SAXPY = CORPUS / "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
B200 = CORPUS / "AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz"

#: ``nsys stats -r cuda_gpu_kern_sum`` in SQL (the example of nbprof.export.sql's docstring)
KERN_SUM = """
SELECT CAST(sum(dur_ns) AS DOUBLE) / (SELECT sum(dur_ns) FROM kernels) AS time_ratio,
       CAST(sum(dur_ns) AS BIGINT) AS total_ns, count(*) AS instances, avg(dur_ns) AS avg_ns,
       CAST(median(dur_ns) AS DOUBLE) AS med_ns, min(dur_ns) AS min_ns, max(dur_ns) AS max_ns,
       coalesce(stddev_samp(dur_ns), 0) AS std_ns, grid, block, name
FROM kernels GROUP BY grid, block, name
ORDER BY total_ns DESC, name, grid, block
"""


def _trace(p: Path) -> nbprof.Trace:
    if not p.exists():
        pytest.skip(f"{p.name} not present (../shared/corpus is absent in a fresh clone)")
    return nbprof.load(str(p))


def _canon(df: pd.DataFrame) -> pd.DataFrame:
    d = df.copy()
    for c in ("grid", "block", "name"):
        d[c] = d[c].astype(object).where(d[c].notna(), "").astype(str)
    return d.sort_values(["total_ns", "name", "grid", "block"], ascending=[False, True, True, True]).reset_index(drop=True)


@pytest.mark.parametrize("path", [SAXPY, B200], ids=["saxpy-nsys", "b200-kineto"])
def test_sql_kernel_summary_equals_cuda_gpu_kern_sum(path):
    tr = _trace(path)
    ref = _canon(cuda_gpu_kern_sum(tr))
    got = _canon(tr.sql(KERN_SUM))
    assert len(got) == len(ref) > 0
    pd.testing.assert_frame_equal(got[ref.columns], ref, check_dtype=False, rtol=1e-12)
    if path == SAXPY:
        assert got["instances"].tolist() == [5] and got["total_ns"].tolist() == [88573480]


def test_sql_registered_frames_and_side_tables():
    tr = _trace(SAXPY)
    ranges = nvtx_sum(tr)
    got = tr.sql("SELECT count(*) AS n, sum(instances) AS k FROM ranges", tables={"ranges": ranges})
    assert int(got["n"][0]) == len(ranges) and int(got["k"][0]) == int(ranges["instances"].sum())
    n = tr.sql("SELECT count(*) AS n FROM side_nvtx")["n"][0]
    assert int(n) == len(tr.tables["nvtx"])
    # a launch-latency join between the runtime calls and their kernels, by correlation id
    lat = tr.sql("SELECT k.ts_ns - r.ts_ns AS launch_ns FROM kernels k JOIN runtime r USING (correlation)")
    ev = tr.events
    k = ev.loc[ev["cat"] == "kernel", ["correlation", "ts_ns"]]
    r = ev.loc[ev["cat"].isin(["cuda_runtime", "cuda_driver"]), ["correlation", "ts_ns"]]
    m = k.merge(r, on="correlation", suffixes=("_k", "_r"))
    assert len(lat) == len(m) >= 5
    assert sorted(lat["launch_ns"].tolist()) == sorted((m["ts_ns_k"] - m["ts_ns_r"]).tolist())
    mem = tr.sql("SELECT count(*) AS n FROM events WHERE cat = 'gpu_memcpy'")
    assert int(mem["n"][0]) == 15


def test_sql_table_name_must_be_an_identifier():
    tr = _trace(SAXPY)
    with pytest.raises(ValueError, match="not an SQL identifier"):
        tr.sql("SELECT 1", tables={"bad name; DROP": pd.DataFrame({"a": [1]})})


def test_sql_without_duckdb_names_the_extra(monkeypatch):
    tr = _trace(SAXPY)
    for name in [m for m in sys.modules if m == "duckdb" or m.startswith("duckdb.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'nbprof\[sql\]'") as err:
        tr.sql("SELECT count(*) FROM events")
    assert isinstance(err.value, ImportError) and err.value.name == "duckdb"


def test_readme_peak_per_device_query_matches_memory_peak():
    """The README's "peak allocated bytes per device" query, read from the README, gives memory_peak's numbers on
    the H200 trace (a CUDA row for GPU 0 and the host's row, each named by its device_type)."""
    import re

    from nbprof.analysis.memory import memory_peak

    pytest.importorskip("duckdb")
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    sql = re.search(r"-- peak allocated bytes per device.*?\n(SELECT .*?;)", readme, re.S).group(1)
    tr = nbprof.load(Path(__file__).resolve().parents[1] / "data" / "gpu" / "cnn_h200.pt.trace.json.gz")
    got = tr.sql(sql.rstrip(";"))
    want = memory_peak(tr).sort_values(["device_type", "device"], ascending=[False, True])
    assert got[["device_type", "device"]].values.tolist() == [[1, 0], [0, -1]]
    assert got["peak_bytes"].tolist() == want["peak_allocated_bytes"].tolist() == [71945728, 105984]
