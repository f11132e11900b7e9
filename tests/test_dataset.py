"""Issue 37: the job's Parquet dataset (``load_ranks(dataset=)``, ``nbprof.open_job``, ``job.sql``; docs/dataset.md).

Real inputs: HTA's two ranks of a 128-rank NCCL job (corpus), a corrupted copy of one of them, a real 2-rank
gloo DDP run (slow), and 1,024 generated small ranks (slow). The files are also read by plain DuckDB and
``dask.dataframe.read_parquet`` without nbprof.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.analysis.distributed import reductions as R
from nbprof.errors import NbprofError, TraceFormatError
from nbprof.scale import load_ranks

ROOT = Path(__file__).resolve().parents[1]
TF = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/"


@pytest.fixture(scope="module")
def pair_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    for r in (0, 1):
        shutil.copy(corpus_path(TF + f"sampled_rank-{r}.json.gz"), d / f"sampled_rank-{r}.json.gz")
    return d


@pytest.fixture(scope="module")
def pair(pair_dir, tmp_path_factory):
    """(dataset folder, the two full traces)."""
    ds = tmp_path_factory.mktemp("ds") / "job"
    mr = load_ranks(str(pair_dir), dataset=str(ds), progress=False, workers=1)
    assert mr.dataset == str(ds) and mr.ranks == [0, 1]
    return ds, [nbprof.load(pair_dir / f"sampled_rank-{r}.json.gz") for r in (0, 1)]


def test_open_job_reductions_equal_the_full_traces(pair):
    ds, traces = pair
    job = nbprof.open_job(ds)
    assert job.ranks == [0, 1] and not job.failed
    assert {t for t, k in job.tables.items() if k == "reduction"} == set(R.TABLES)
    assert job.tables["events"] == "trace"
    full = R.concat_reductions([(t.meta.rank, R.reduce_rank(t)) for t in traces])
    for name, frame in full.items():
        pd.testing.assert_frame_equal(job.table(name), frame, check_dtype=True)
    # the 128-rank job's ranks each ran 10 collectives (HTA's sampled pair)
    assert job.table("collectives").groupby("rank").size().tolist() == [10, 10]
    # one rank's full Trace, from the dataset alone, equals the loaded one
    for t in traces:
        back = job.trace(t.meta.rank)
        for tab in ("events", "flows", "memory", "counters", "threads"):
            pd.testing.assert_frame_equal(getattr(back, tab), getattr(t, tab), check_categorical=False)
        assert back.meta == t.meta and back.report.issues == t.report.issues
        assert sorted(back.tables) == sorted(t.tables)


def _same_analyses(job, traces):
    """Every cross-rank analysis from the dataset's reductions equals the one from the full traces."""
    from nbprof.analysis import distributed as D

    for name in job.ANALYSES:
        pd.testing.assert_frame_equal(getattr(job, name)(), getattr(D, name)(traces), obj=name)
    shifts, links = job.ranks_clock()
    full_shifts, full_links = D.ranks_clock(traces)
    assert shifts == full_shifts
    pd.testing.assert_frame_equal(links, full_links)
    rep, full = job.distributed_report(), D.distributed_report(traces)
    assert rep.zero == full.zero
    for f in ("collectives", "summary", "overlap", "skew", "wait_summary", "stragglers"):
        pd.testing.assert_frame_equal(getattr(rep, f), getattr(full, f), obj=f)


def test_cross_rank_analyses_from_the_dataset_equal_the_full_traces(pair):
    ds, traces = pair
    job = nbprof.open_job(ds)
    _same_analyses(job, traces)
    st = job.stragglers().set_index("rank")  # HTA's pair: rank 1 arrives last in 8 of the 10 collectives
    assert st.loc[1, "straggler"] and st.loc[1, "last_arrivals"] == 8 and not st.loc[0, "straggler"]


def test_manifest_names_sources_with_size_and_sha256(pair, pair_dir):
    ds, traces = pair
    man = json.loads((ds / "manifest.json").read_text())
    assert man["format"] == "nbprof-job-dataset" and man["version"] == 1
    assert man["nbprof_version"] == nbprof.__version__
    assert man["reductions"] == {"name": "nbprof.analysis.distributed.reductions.reduce_rank",
                                 "version": R.REDUCTION_VERSION, "schema": man["reductions"]["schema"]}
    assert re.fullmatch(r"[0-9a-f]{16}", man["reductions"]["schema"])
    for s, r in zip(man["sources"], (0, 1)):
        f = pair_dir / f"sampled_rank-{r}.json.gz"
        assert s["source"] == str(f) and s["status"] == "ok" and s["rank"] == r
        assert s["size"] == f.stat().st_size
        assert s["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
        assert s["rows"]["events"] == len(traces[r].events)
    cols = man["tables"]["collectives"]["columns"]
    assert cols["dur_ns"] == {"type": "int64", "dtype": "int64", "unit": "ns", "description": ""}
    assert cols["msg_bytes"]["type"] == "int64" and cols["msg_bytes"]["dtype"] == "Int64"
    assert man["tables"]["events"]["columns"]["ts_ns"]["unit"] == "ns"


def test_plain_duckdb_and_dask_read_the_same_rows(pair):
    duckdb = pytest.importorskip("duckdb")
    dd = pytest.importorskip("dask.dataframe")
    ds, _ = pair
    job = nbprof.open_job(ds)
    man = job.manifest
    for t in job.tables:
        rows = sum(s["rows"][t] for s in man["sources"])
        q = f"SELECT rank, count(*) AS n FROM read_parquet('{ds}/{t}/*/*.parquet', hive_partitioning = true) GROUP BY rank"
        plain = dict(duckdb.sql(q).fetchall())
        assert sum(plain.values()) == rows, t
        assert plain == {s["rank"]: s["rows"][t] for s in man["sources"] if s["rows"][t]}, t
        ddf = dd.read_parquet(str(ds / t))
        assert len(ddf) == rows, t
        if rows:
            assert sorted(int(r) for r in ddf["rank"].unique().compute()) == sorted(plain), t
        got = job.sql(f'SELECT count(*) AS n FROM "{t}"')
        assert int(got["n"].iloc[0]) == rows, t
    # a cross-rank query: the slowest rank of each collective instance (same pg and sequence number)
    slow = job.sql("""
        SELECT pg_name, seq, arg_max(rank, start_abs_ns) AS last_rank, max(start_abs_ns) - min(start_abs_ns) AS spread_ns
        FROM collectives GROUP BY pg_name, seq ORDER BY pg_name, seq""")
    assert len(slow) == 10 and set(slow["last_rank"]) <= {0, 1}


def _plain(x):
    """A value as plain Python for comparing frames of different dtypes (None for every kind of missing)."""
    return None if x is None or x is pd.NA or (isinstance(x, float) and x != x) else x


def test_plain_pyarrow_dataset_reads_every_ranks_rows(pair):
    """docs/dataset.md: each table folder is a plain hive-partitioned Parquet dataset -- pyarrow.dataset with
    partitioning="hive" (no nbprof, no schema given) finds every rank and every row, the values nbprof reads,
    and skips the private ``_``/``.`` names; Dask's read_parquet gets every rank's rows too."""
    import pyarrow as pa
    import pyarrow.dataset as pds

    dd = pytest.importorskip("dask.dataframe")
    ds, _ = pair
    job = nbprof.open_job(ds)
    man = job.manifest
    for t, kind in job.tables.items():
        want = {s["rank"]: s["rows"][t] for s in man["sources"] if s["rows"][t]}
        d = pds.dataset(str(ds / t), format="parquet", partitioning="hive")
        assert all("/_" not in f and "/." not in f for f in d.files), t
        tab = d.to_table()
        assert pa.types.is_integer(tab.schema.field("rank").type), t
        got = tab.to_pandas()
        assert got["rank"].value_counts().to_dict() == want, t
        if kind == "reduction":  # the same values, rank by rank, as nbprof reads them
            got = got.sort_values("rank", kind="stable").reset_index(drop=True)
            mine = job.table(t)
            assert set(got.columns) == set(mine.columns), t
            for c in mine.columns:
                assert [_plain(x) for x in got[c].tolist()] == [_plain(x) for x in mine[c].tolist()], (t, c)
        per_rank = dd.read_parquet(str(ds / t))["rank"].compute().astype(int).value_counts().to_dict()
        assert per_rank == want, t


def test_corrupted_rank_is_reported_and_skipped(pair_dir, tmp_path):
    d = tmp_path / "in"
    shutil.copytree(pair_dir, d)
    # a copy of rank 1 cut inside its gzip header: no byte of JSON can be read (a truncated body would be repaired)
    (d / "sampled_rank-2.json.gz").write_bytes((d / "sampled_rank-1.json.gz").read_bytes()[:6])
    ds = tmp_path / "job"
    with pytest.warns(UserWarning, match="1 of 3 traces could not be loaded"):
        mr = load_ranks(str(d), dataset=str(ds), progress=False, workers=1)
    assert mr.ranks == [0, 1]
    job = nbprof.open_job(ds)
    bad = str(d / "sampled_rank-2.json.gz")
    assert job.ranks == [0, 1] and list(job.failed) == [bad]
    assert job.report.get("sampled_rank-2.json.gz:load_failed") is not None
    src = {s["source"]: s for s in job.manifest["sources"]}
    assert src[bad]["status"] == "failed" and src[bad]["rank"] is None and src[bad]["error"]
    assert src[bad]["sha256"] == hashlib.sha256((d / "sampled_rank-2.json.gz").read_bytes()).hexdigest()
    assert sorted(os.listdir(ds / "steps")) == ["rank=0", "rank=1"]
    # on_error="raise": nothing of the dataset changes
    before = (ds / "manifest.json").read_bytes()
    with pytest.raises(NbprofError, match="sampled_rank-2"):
        load_ranks(str(d), dataset=str(ds), progress=False, workers=1, on_error="raise")
    assert (ds / "manifest.json").read_bytes() == before and not (ds / ".staging").exists()


def _part_stamps(ds: Path) -> dict[str, int]:
    return {str(p.relative_to(ds)): p.stat().st_mtime_ns for p in ds.rglob("part-0.parquet")}


def test_rerun_is_incremental(pair_dir, tmp_path):
    d = tmp_path / "in"
    shutil.copytree(pair_dir, d)
    ds = tmp_path / "job"
    first = load_ranks(str(d), dataset=str(ds), progress=False, workers=1)
    assert first.from_cache == {0: False, 1: False}
    stamps = _part_stamps(ds)
    again = load_ranks(str(d), dataset=str(ds), progress=False, workers=1)
    assert again.from_cache == {0: True, 1: True}  # name, size and mtime unchanged: not even hashed
    assert _part_stamps(ds) == stamps
    # mr[rank] reads the rank from the dataset
    pd.testing.assert_frame_equal(again[0].events, nbprof.load(d / "sampled_rank-0.json.gz").events,
                                  check_categorical=False)
    for name, frame in first.summaries[1].items():
        pd.testing.assert_frame_equal(again.summaries[1][name].reset_index(drop=True), frame.reset_index(drop=True),
                                      check_dtype=False)
    # the same bytes under a new mtime: hashed, matched, not parsed
    os.utime(d / "sampled_rank-1.json.gz", ns=(1, 1))
    touched = load_ranks(str(d), dataset=str(ds), progress=False, workers=1)
    assert touched.from_cache == {0: True, 1: True} and _part_stamps(ds) == stamps
    # another trace as rank 1 (HTA's rank 1 of a 2-rank job): only that rank is rewritten
    shutil.copy(corpus_path("facebookresearch__HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz"),
                d / "sampled_rank-1.json.gz")
    changed = load_ranks(str(d), dataset=str(ds), progress=False, workers=1, allow_mixed=True)
    assert changed.from_cache == {0: True, 1: False}
    now = _part_stamps(ds)
    assert all(now[k] == v for k, v in stamps.items() if "rank=0" in k)
    assert all(now[k] != v for k, v in stamps.items() if "rank=1" in k)
    job = nbprof.open_job(ds)
    assert len(job.table("collectives").query("rank == 1")) == 2020  # df_index_resolver's all-reduces
    # one source fewer: its rank leaves the dataset
    os.remove(d / "sampled_rank-1.json.gz")
    load_ranks(str(d), dataset=str(ds), progress=False, workers=1)
    assert nbprof.open_job(ds).ranks == [0] and sorted(os.listdir(ds / "events")) == ["rank=0"]


def test_versions_and_foreign_folders(pair, tmp_path):
    ds, _ = pair
    newer = tmp_path / "newer"
    shutil.copytree(ds, newer)
    man = json.loads((newer / "manifest.json").read_text())
    man["version"] = 2
    (newer / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(TraceFormatError, match="dataset version 2: this nbprof reads versions up to 1"):
        nbprof.open_job(newer)
    # reductions of another version (or schema): the tables read, the analyses ask for a rebuild
    older = tmp_path / "older"
    shutil.copytree(ds, older)
    man = json.loads((older / "manifest.json").read_text())
    man["reductions"]["version"] = 0
    (older / "manifest.json").write_text(json.dumps(man))
    job = nbprof.open_job(older)
    assert len(job.table("steps")) == 4
    with pytest.raises(NbprofError, match=r"holds reductions .* run nbprof\.load_ranks"):
        job.stragglers()
    with pytest.raises(FileNotFoundError, match=r"manifest\.json is missing"):
        nbprof.open_job(tmp_path)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(NbprofError, match=r"other files and no manifest\.json"):
        load_ranks(str(corpus_path(TF + "sampled_rank-0.json.gz")), dataset=str(tmp_path / "other"), progress=False)
    assert os.listdir(tmp_path / "other") == ["notes.txt"]


def test_stats_ranks_cli(pair_dir, tmp_path):
    from nbprof.cli import main

    ds = tmp_path / "job"
    out = tmp_path / "r"
    assert main(["stats", "--ranks", str(pair_dir), "--dataset", str(ds), "-r", "steps,collectives", "-f", "csv",
                 "-o", str(out)]) == 0
    steps = pd.read_csv(f"{out}_steps.csv")
    assert steps["rank"].tolist() == [0, 0, 1, 1] and steps["step"].tolist() == [551, 552, 551, 552]
    assert len(pd.read_csv(f"{out}_collectives.csv")) == 20
    assert main(["stats", "--ranks", str(pair_dir), "--dataset", str(ds), "-r", "nope"]) == 2
    assert main(["stats", "--ranks", str(pair_dir), "--dataset", str(ds), "-f", "json", "-o", str(out)]) == 0
    st = pd.read_json(f"{out}_stragglers.json")
    assert st.set_index("rank").loc[1, "straggler"]
    assert main(["report", "--ranks", str(tmp_path / "nope")]) == 2  # refused before anything runs


def test_readme_cross_rank_sql_runs(pair):
    """The README's cross-rank query (the ```python block after 'Cross-rank SQL') runs on a real dataset."""
    ds, _ = pair
    text = (ROOT / "README.md").read_text()
    block = re.search(r"Cross-rank SQL.*?```python\n(.*?)```", text, re.S)
    assert block, "README has no 'Cross-rank SQL' python block"
    code = block.group(1).replace('"job-dataset/"', repr(str(ds)))
    ns: dict = {}
    exec(compile(code, "README.md", "exec"), ns)  # the README's own example
    res = ns["late"]
    assert list(res.columns[:3]) == ["pg_name", "seq", "last_rank"] and len(res) == 10


def _mini_trace(rank: int, world: int) -> dict:
    """A small gloo-shaped CPU trace: two ProfilerSteps, a matmul, an all-reduce call and its gloo annotation
    (rank r's all-reduce starts r ns later: the last rank arrives last)."""
    ev = []
    for s in range(2):
        t0 = 1000 + s * 1000
        ev += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0, "dur": 900},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0 + 10, "dur": 300 + rank % 7},
            {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": t0 + 400, "dur": 100},
            {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 2,
             "ts": round(t0 + 420 + rank / 1000, 3), "dur": 60, "args": {"Input Dims": [[1024]], "Input type": ["float"]}},
        ]
    return {"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": world},
            "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": ev}


@pytest.mark.slow  # 1,024 parses + reductions + 13 files per rank: minutes on the shared 2-core machine
def test_1024_small_ranks(tmp_path):
    n = 1024
    src = tmp_path / "in"
    src.mkdir()
    for r in range(n):
        (src / f"rank-{r}.json").write_text(json.dumps(_mini_trace(r, n)))
    ds = tmp_path / "job"
    mr = load_ranks(str(src), dataset=str(ds), progress=False, workers=2)
    assert len(mr) == n
    job = nbprof.open_job(ds)
    assert job.ranks == list(range(n))
    c = job.table("collectives")
    assert len(c) == 2 * n and c.groupby("rank").size().eq(2).all()
    late = job.sql("SELECT seq, arg_max(rank, start_abs_ns) AS last_rank FROM collectives GROUP BY seq ORDER BY seq")
    assert late["last_rank"].tolist() == [n - 1, n - 1]
    st = job.stragglers()
    assert st.loc[st["straggler"], "rank"].tolist() == [n - 1]
    assert int(job.sql("SELECT count(*) AS n FROM events")["n"].iloc[0]) == 8 * n
    again = load_ranks(str(src), dataset=str(ds), progress=False, workers=2)
    assert all(again.from_cache.values())


@pytest.mark.slow  # a real 2-rank gloo DDP job under torchrun (~30-90 s here)
def test_gloo_ddp_job_dataset_equals_full_traces(tmp_path):
    pytest.importorskip("torch")
    from test_distributed_depth import torchrun

    out = tmp_path / "run"
    out.mkdir()
    torchrun("ddp_straggler.py", out, "--sleep", "0.05", "--steps", "4")
    files = [out / f"rank{r}.pt.trace.json" for r in (0, 1)]
    ds = tmp_path / "job"
    load_ranks([str(f) for f in files], dataset=str(ds), progress=False, workers=1)
    job = nbprof.open_job(ds)
    traces = [nbprof.load(f) for f in files]
    full = R.concat_reductions([(t.meta.rank, R.reduce_rank(t)) for t in traces])
    for name, frame in full.items():
        pd.testing.assert_frame_equal(job.table(name), frame, check_dtype=True)
    c = job.table("collectives")
    assert set(c["collective"]) >= {"all_reduce"} and (c["device"] == -1).all()
    _same_analyses(job, traces)


def test_spark_free_python_reads_without_nbprof(pair):
    """pyarrow alone (what Spark and Dask use underneath) sees one table with the rank partition."""
    ds, _ = pair
    code = ("import pyarrow.dataset as d, sys; t = d.dataset(sys.argv[1] + '/steps', format='parquet', "
            "partitioning='hive').to_table(); print(t.num_rows, sorted(set(t.column('rank').to_pylist())))")
    p = subprocess.run([sys.executable, "-c", code, str(ds)], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, cwd=str(ds))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["4", "[0,", "1]"]


def test_report_step4_from_a_job_dataset(pair, tmp_path):
    """``nbprof report --ranks DIR`` hands step 4 the dataset: its tables from the reductions, the views on two ranks."""
    from nbprof.report import Artefacts, build_report

    ds, _ = pair
    html = build_report(Artefacts(ds_traces=[str(ds)]), progress=False, notebooks=["04_distributed_deepspeed.ipynb"],
                        output=tmp_path / "job.html").read_text(encoding="utf-8")
    assert "2 ranks from the job dataset" in html and "the views show ranks [0, 1]" in html
    assert "nbprof_dist_breakdown" in html and "nbprof_rank_links" in html
    assert "MISSING_RENDERERS" not in html and "Traceback" not in html


def test_docs_list_every_column():
    """docs/dataset.md documents every column of every table the dataset writes."""
    from nbprof.export.dataset import trace_table_columns

    doc = (ROOT / "docs" / "dataset.md").read_text()
    tables = {t: list(c) for t, c in R.REDUCTION_SCHEMA.items()} | {"events": list(trace_table_columns("events"))}
    for t, cols in tables.items():
        section = doc.split(f"#### `{t}`", 1)
        assert len(section) == 2, f"no section for {t}"
        body = section[1].split("####", 1)[0]
        missing = [c for c in cols if f"| `{c}` |" not in body]
        assert not missing, f"{t}: {missing}"
