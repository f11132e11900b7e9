"""Writing a job dataset (``load_ranks(..., dataset=PATH)``; layout and reader: :mod:`nbprof.sources.dataset`,
``docs/dataset.md``).

Two steps, so that the heavy part runs where the rank is parsed (a pool process or a Dask worker) and
the rank number (known only once every file is read: metadata, file name or order) is applied last:

1. :func:`stage_rank` (worker): the rank's trace tables, reductions, metadata and side tables go to
   ``PATH/.staging/<sha256>/`` (a private folder renamed into place, ``nbprof.atomic.atomic_dir``).
2. :func:`commit` (the calling process): staged files move to ``PATH/<table>/rank=<r>/part-0.parquet``
   (``os.replace``), ranks no longer in the job are removed, and ``manifest.json`` is written last
   (``nbprof.atomic.atomic_write``): the manifest is the commit point. One writer at a time per folder.

Every Parquet file is plain Arrow (no pandas metadata): strings are ``string`` (categoricals decoded),
integers and floats keep their width, and the same table has the same schema in every rank, so engines
that unify a hive dataset (Dask, Spark, pyarrow) accept it. The ``rank`` column is the partition, never
a column of the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from typing import Any

import numpy as np
import pandas as pd

from ..atomic import atomic_dir, atomic_write
from ..sources.dataset import (
    DATASET_VERSION,
    FORMAT_NAME,
    MANIFEST,
    RANK_TABLES,
    TRACE_TABLES,
    rank_dir,
    table_file,
)

__all__ = ["file_sha256", "stage_rank", "commit", "trace_table_columns", "STAGING"]

STAGING = ".staging"
_ARROW_TYPES = ("int64", "int32", "int16", "int8", "float64", "float32", "bool", "string")


def file_sha256(path: str) -> tuple[str, int]:
    """(sha256 hex digest, size in bytes) of the file at ``path`` (read in 4 MiB chunks)."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


def _type_name(dtype: Any) -> str:
    """The dataset's type name of a pandas dtype or a ``nbprof.trace.schema`` dtype string."""
    t = str(dtype)
    if t in ("category", "object", "str", "string"):
        return "string"
    if t == "boolean":
        return "bool"
    if t in ("Int64", "Int32", "Int16", "Int8"):  # pandas' nullable integers: Parquet nulls
        return t.lower()
    if t not in _ARROW_TYPES:
        raise TypeError(f"dtype {t!r} has no dataset type (one of {', '.join(_ARROW_TYPES)})")
    return t


def _declared(columns: dict[str, Any]) -> dict[str, dict[str, str]]:
    """``{col: (dtype, unit, description)}`` (the ``nbprof.trace.schema`` shape) or ``{col: {"dtype"|"type",
    "unit", "description"}}`` -> the manifest's ``{col: {"type", "unit", "description"}}``."""
    out = {}
    for c, v in columns.items():
        if c == "rank":
            continue
        if isinstance(v, dict):
            dt, unit, desc = v.get("type", v.get("dtype")), v.get("unit", ""), v.get("description", "")
        elif isinstance(v, str):  # {col: dtype} (REDUCTION_SCHEMA): the unit from the name
            dt, unit, desc = v, _unit(c), ""
        else:
            dt, unit, desc = (tuple(v) + ("", ""))[:3]
        out[c] = {"type": _type_name(dt), "dtype": _pandas_dtype(dt), "unit": str(unit), "description": str(desc)}
    return out


def _pandas_dtype(dtype: Any) -> str:
    """The pandas dtype a reader gives the column (``object`` for strings; nullable ``Int64`` kept)."""
    t = str(dtype)
    return "object" if _type_name(t) == "string" else "bool" if t == "boolean" else t


def trace_table_columns(name: str, df: pd.DataFrame | None = None) -> dict[str, dict[str, str]]:
    """The declared columns of trace table ``name`` (``nbprof.trace.schema``; ``threads`` from ``df``), without ``rank``."""
    from ..trace import schema

    decl = {"events": schema.EVENT_COLUMNS, "flows": schema.FLOW_COLUMNS, "memory": schema.MEMORY_COLUMNS,
            "counters": schema.COUNTER_COLUMNS}.get(name)
    if decl is not None:
        return _declared(decl)
    return _inferred(df if df is not None else pd.DataFrame())


def _unit(col: str) -> str:
    """The unit a column's name says (house naming: ``*_ns`` ns, ``*_bytes`` bytes, ``*_bytes_per_s`` bytes/s)."""
    if col.endswith("_ns"):
        return "ns"
    if col.endswith("_bytes_per_s"):
        return "bytes/s"
    return "bytes" if col == "bytes" or col.endswith("_bytes") else ""


def _inferred(df: pd.DataFrame) -> dict[str, dict[str, str]]:
    return {str(c): {"type": _type_name(df[c].dtype), "dtype": _pandas_dtype(df[c].dtype), "unit": _unit(str(c)),
                     "description": ""} for c in df.columns if c != "rank"}


def _arrow(df: pd.DataFrame, columns: dict[str, dict[str, str]]) -> Any:
    """``df`` as an Arrow table of exactly ``columns`` (in that order, declared types, no pandas metadata)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    types = {"int64": pa.int64(), "int32": pa.int32(), "int16": pa.int16(), "int8": pa.int8(), "float64": pa.float64(),
             "float32": pa.float32(), "bool": pa.bool_(), "string": pa.string()}
    arrays, fields = [], []
    for c, info in columns.items():
        typ = types[info["type"]]
        if c not in df.columns:
            arr = pa.nulls(len(df), typ)
        else:
            s = df[c]
            if isinstance(s.dtype, pd.CategoricalDtype):
                arr = pa.array(s)
                arr = arr.dictionary_decode() if pa.types.is_dictionary(arr.type) else arr
                arr = arr.cast(typ) if arr.type != typ else arr
            elif info["type"] == "string":
                arr = pa.array(s.astype(object).where(s.notna(), None).tolist(), pa.string())
            else:
                arr = pa.array(s.to_numpy(), typ) if s.notna().all() else pa.array(s, typ, from_pandas=True)
        arrays.append(arr)
        fields.append(pa.field(c, typ))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _write_parquet(df: pd.DataFrame, columns: dict[str, dict[str, str]], path: str) -> None:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    pq.write_table(_arrow(df, columns), path, compression="zstd")


def stage_rank(dataset: str, sha256: str, trace: Any, reductions: dict[str, pd.DataFrame],
               reduction_columns: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write one rank's tables to ``dataset/.staging/<sha256>/`` (runs where the rank was parsed).

    ``reductions``: table name -> per-rank frame (a ``rank`` column, if any, is dropped: it is the
    partition); ``reduction_columns``: declared columns per reduction table (``{col: (dtype, unit,
    description)}``), else inferred from the frame.

    Returns
    -------
    dict
        ``{"rows": {table: n}, "columns": {table: {col: {"type", "unit", "description"}}}}`` (small: it
        travels back to the calling process).

    Raises
    ------
    ValueError
        A reduction is named like a trace table or is not a plain name.
    OSError
        The folder cannot be written (nothing is left behind).
    """
    from ..codec import TABLE_NAME, encode_header, to_plain, write_side_tables

    clash = sorted(set(reductions) & set(TRACE_TABLES))
    if clash:
        raise ValueError(f"reduction tables {clash} are named like trace tables {TRACE_TABLES}")
    rows: dict[str, int] = {}
    cols: dict[str, dict[str, dict[str, str]]] = {}
    stage = os.path.join(dataset, STAGING)
    os.makedirs(stage, exist_ok=True)
    final = os.path.join(stage, sha256)
    if os.path.isdir(final):  # staged by an earlier run that did not commit: staged again
        shutil.rmtree(final, ignore_errors=True)
    ev = trace.events
    ev_rank = pd.unique(ev["rank"]) if "rank" in ev.columns else []
    with atomic_dir(final) as tmp:
        os.makedirs(os.path.join(tmp, "rank", "side"))
        for name in TRACE_TABLES + RANK_TABLES:
            df = getattr(trace, name)
            c = trace_table_columns(name, df)
            if name == "events" and len(ev_rank) > 1:  # keep the trace's own ranks apart from the partition
                df = df.rename(columns={"rank": "source_rank"})
                c = {**c, "source_rank": {"type": "int32", "dtype": "int32", "unit": "",
                                          "description": "the trace's own rank column"}}
            where = tmp if name in TRACE_TABLES else os.path.join(tmp, "rank")
            _write_parquet(df, c, os.path.join(where, f"{name}.parquet"))
            if name in TRACE_TABLES:
                rows[name], cols[name] = len(df), c
        for name, df in reductions.items():
            if not TABLE_NAME.match(name) or name.startswith(("_", ".")):
                raise ValueError(f"reduction table name {name!r}: use [A-Za-z0-9_.-], not starting with _ or .")
            decl = (reduction_columns or {}).get(name)
            c = _declared(decl) if decl else _inferred(df)
            _write_parquet(df, c, os.path.join(tmp, f"{name}.parquet"))
            rows[name], cols[name] = len(df), c
        side = write_side_tables(trace.tables, lambda n: os.path.join(tmp, "rank", "side", f"{n}.parquet"), "write")
        info = {**encode_header(trace), "side": side,
                "events_rank": int(ev_rank[0]) if len(ev_rank) == 1 else trace.meta.rank}
        with open(os.path.join(tmp, "rank", "trace.json"), "w") as f:
            json.dump(to_plain(info, "trace"), f)
    return {"rows": rows, "columns": cols}


def _move_rank_out(dataset: str, rank: int, tables: list[str], dest: str) -> None:
    """Move rank ``rank``'s files (every table, its ``_ranks`` folder) into the staging folder ``dest``."""
    os.makedirs(dest, exist_ok=True)
    for t in tables:
        f = table_file(dataset, t, rank)
        if os.path.exists(f):
            os.replace(f, os.path.join(dest, f"{t}.parquet"))
    if os.path.isdir(rank_dir(dataset, rank)):
        os.replace(rank_dir(dataset, rank), os.path.join(dest, "rank"))


def _remove_rank(dataset: str, rank: int, tables: list[str]) -> None:
    for t in tables:
        shutil.rmtree(os.path.dirname(table_file(dataset, t, rank)), ignore_errors=True)
    shutil.rmtree(rank_dir(dataset, rank), ignore_errors=True)


def _move_rank_in(dataset: str, rank: int, src: str) -> None:
    for f in sorted(os.listdir(src)):
        if f.endswith(".parquet"):
            dst = table_file(dataset, f[: -len(".parquet")], rank)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(os.path.join(src, f), dst)
    os.makedirs(os.path.dirname(rank_dir(dataset, rank)), exist_ok=True)
    os.replace(os.path.join(src, "rank"), rank_dir(dataset, rank))


def commit(dataset: str, sources: list[dict[str, Any]], previous: dict[str, Any] | None,
           reductions: dict[str, Any], tables: dict[str, dict[str, Any]],
           combined: dict[str, Any] | None = None) -> dict[str, Any]:
    """Put staged ranks in place and write the manifest (the calling process, after ranks are numbered).

    ``sources``: one dict per source file, in order: ``{"source", "path", "size", "mtime_ns", "sha256",
    "status": "ok"|"failed", "rank", "previous_rank" (an unchanged rank already in the dataset, else None),
    "rows", "world_size", "error", "seconds"}``. ``previous``: the manifest before this run (None: a new
    dataset, or one of another version, rewritten whole). ``reductions``: ``{"name", "version"}`` of
    the reducer; ``tables``: table -> ``{"kind", "columns"}``; ``combined``: ``{"id", "tables"}`` of the
    reductions written in one file per table (removed: every other ``_combined`` folder).

    Returns the manifest written. Ranks of ``previous`` not in ``sources`` are removed (the dataset holds
    the job of the last call).
    """
    stage = os.path.join(dataset, STAGING)
    old_tables = sorted(set((previous or {}).get("tables", {})) | set(tables))
    kept = {s["rank"] for s in sources if s["status"] == "ok" and s.get("previous_rank") == s["rank"]}
    old_ranks = {int(s["rank"]) for s in (previous or {}).get("sources", []) if s.get("status") == "ok"}
    if previous is None:  # a folder of another version (or none): everything is rewritten
        old_ranks = {int(d.split("=", 1)[1]) for d in _rank_dirs(dataset)}
    # 1. unchanged ranks that got another number: out to staging first (two may swap numbers)
    for s in sources:
        pr = s.get("previous_rank")
        if s["status"] == "ok" and pr is not None and pr != s["rank"]:
            _move_rank_out(dataset, pr, old_tables, os.path.join(stage, s["sha256"]))
    # 2. every other old rank goes
    for r in sorted(old_ranks - kept):
        _remove_rank(dataset, r, old_tables)
    # 3. staged ranks move in
    for s in sources:
        if s["status"] == "ok" and s["rank"] not in kept:
            _move_rank_in(dataset, s["rank"], os.path.join(stage, s["sha256"]))
    man = {
        "format": FORMAT_NAME,
        "version": DATASET_VERSION,
        "nbprof_version": getattr(sys.modules.get("nbprof"), "__version__", "unknown"),
        "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "reductions": reductions,
        "partitioning": "hive: <table>/rank=<rank>/part-0.parquet",
        "tables": tables,
        "combined": combined,
        "sources": [{k: s.get(k) for k in ("source", "size", "mtime_ns", "sha256", "status", "rank",
                                           "world_size", "rows", "error", "seconds")} for s in sources],
    }
    atomic_write(os.path.join(dataset, MANIFEST), json.dumps(man, indent=1))
    shutil.rmtree(stage, ignore_errors=True)
    cdir = os.path.join(dataset, "_combined")
    for old in os.listdir(cdir) if os.path.isdir(cdir) else []:
        if old != (combined or {}).get("id"):
            shutil.rmtree(os.path.join(cdir, old), ignore_errors=True)
    for t in old_tables:  # a table no rank has any more
        d = os.path.join(dataset, t)
        if t not in tables and os.path.isdir(d) and not os.listdir(d):
            os.rmdir(d)
    return man


def _rank_dirs(dataset: str) -> set[str]:
    """``rank=<r>`` folder names under every table and ``_ranks`` of a folder (for a rewrite)."""
    out: set[str] = set()
    if not os.path.isdir(dataset):
        return out
    for t in os.listdir(dataset):
        d = os.path.join(dataset, t)
        if os.path.isdir(d) and t != STAGING:
            out |= {x for x in os.listdir(d) if x.startswith("rank=") and x[5:].lstrip("-").isdigit()}
    return out


# --------------------------------------------------------------------------- orchestration (load_ranks)


def source_key(name: str, size: int, mtime_ns: int) -> str:
    """The memo key of a source: a file whose shown name, size and mtime are unchanged is not re-hashed
    (the trace cache's rule, ``TraceCache.digest``)."""
    return f"{name}|{size}|{mtime_ns}"


def shown_name(file: str, names: dict[str, str]) -> str:
    """The name a source is listed under: ``archive::member`` for an archive member, else the absolute path."""
    return names.get(file) or os.path.abspath(file)


def plan(dataset: str, files: list[str], names: dict[str, str], reductions: dict[str, Any]) -> dict[str, Any]:
    """What an incremental run can skip: the previous manifest, the files whose (name, size, mtime)
    match one of its ``ok`` sources written with the same reducer (``unchanged``: file -> that source),
    and the sha256 -> rank of the other ``ok`` sources (``known``: a worker that hashes a file to one of
    them does not parse it).

    Raises
    ------
    NbprofError
        ``dataset`` exists, is not empty and is not a dataset (nothing there is touched).
    TraceFormatError
        Its manifest is of a newer version.
    """
    from ..errors import NbprofError
    from ..sources.dataset import read_manifest

    prev = read_manifest(dataset, missing_ok=True)
    if prev is None and os.path.isdir(dataset) and set(os.listdir(dataset)) - {STAGING}:
        raise NbprofError(f"dataset={dataset!r} is a folder with other files and no {MANIFEST}: give a new or "
                          "empty folder, or an nbprof job dataset")
    same = prev is not None and prev.get("version") == DATASET_VERSION and prev.get("reductions") == reductions
    ok = [s for s in (prev or {}).get("sources", []) if s.get("status") == "ok"] if same else []
    by_key = {source_key(s["source"], s["size"], s["mtime_ns"]): s for s in ok}
    unchanged = {}
    for f in files:
        st = os.stat(f)
        s = by_key.get(source_key(shown_name(f, names), st.st_size, st.st_mtime_ns))
        if s is not None:
            unchanged[f] = s
    matched = {id(s) for s in unchanged.values()}
    known = {s["sha256"]: {"rank": int(s["rank"]), "rows": s.get("rows")} for s in ok if id(s) not in matched}
    reduction_tables = {t: v["columns"] for t, v in sorted((prev or {}).get("tables", {}).items())
                        if v.get("kind") == "reduction"}
    return {"previous": prev if prev is not None and prev.get("version") == DATASET_VERSION else None,
            "unchanged": unchanged, "known": known, "reduction_tables": reduction_tables if same else {}}


def unchanged_result(dataset: str, path: str, sha256: str, size: int, rank: int,
                     reduction_tables: dict[str, dict[str, Any]],
                     t0: float, rows: dict[str, int] | None = None) -> Any:
    """The ``load_ranks`` result of a source the dataset already holds as ``rank``: its reductions and
    metadata read from the dataset (small; no trace is parsed)."""
    from ..codec import from_plain
    from ..sources.dataset import read_files
    from ..trace_cache import _RankResult

    with open(os.path.join(rank_dir(dataset, rank), "trace.json")) as f:
        info = from_plain(json.load(f))
    tables = {t: read_files(dataset, t, [rank], cols, rank_column=False) for t, cols in reduction_tables.items()}
    m = info["meta"]
    return _RankResult(path=path, rank=m.get("rank", 0), rank_source=m.get("rank_source", "assumed"),
                       world_size=m.get("world_size", 1), distributed_info=m.get("distributed_info", {}),
                       digest=None, tables=tables, issues=info["report"]["issues"], from_cache=True,
                       seconds=time.perf_counter() - t0,
                       dataset={"sha256": sha256, "size": size, "previous_rank": rank, "rows": rows})


def unchanged_results(dataset: str, the_plan: dict[str, Any]) -> list[Any]:
    """:func:`unchanged_result` of every file of ``the_plan["unchanged"]``, with each reduction table read once
    for all of them (the previous manifest's one-file copy, ``_combined``) when it has one."""
    from ..sources.dataset import read_table

    t0 = time.perf_counter()
    todo = the_plan["unchanged"]
    prev = the_plan["previous"]
    if not todo:
        return []
    if not (prev or {}).get("combined"):
        return [unchanged_result(dataset, p, s["sha256"], s["size"], int(s["rank"]), the_plan["reduction_tables"],
                                 t0, s.get("rows")) for p, s in todo.items()]
    by_rank: dict[int, dict[str, pd.DataFrame]] = {int(s["rank"]): {} for s in todo.values()}
    ranks = np.array(sorted(by_rank), dtype=np.int64)
    for t in the_plan["reduction_tables"]:
        df = read_table(dataset, prev, t)  # sorted by rank: each rank's rows are one slice
        lo = np.searchsorted(df["rank"].to_numpy(), ranks, "left")
        hi = np.searchsorted(df["rank"].to_numpy(), ranks, "right")
        body = df.drop(columns="rank")
        for r, a, b in zip(ranks.tolist(), lo.tolist(), hi.tolist()):
            by_rank[r][t] = body.iloc[a:b].reset_index(drop=True)
    out = []
    for p, s in todo.items():
        res = unchanged_result(dataset, p, s["sha256"], s["size"], int(s["rank"]), {}, t0, s.get("rows"))
        res.tables = by_rank[int(s["rank"])]
        out.append(res)
    return out


def finish(dataset: str, the_plan: dict[str, Any], results: list[Any], rank_of: dict[str, int],
           names: dict[str, str], reductions: dict[str, Any]) -> dict[str, Any]:
    """Commit a ``load_ranks`` run: ``results`` (``_RankResult`` with ``dataset`` info) numbered by
    ``rank_of`` (file -> final rank; failed files absent). Returns the manifest written."""
    sources = []
    tables: dict[str, dict[str, Any]] = {}
    prev_tables = (the_plan["previous"] or {}).get("tables", {})
    for r in results:
        d = r.dataset or {}
        st = os.stat(r.path) if os.path.exists(r.path) else None
        s = {"source": shown_name(r.path, names), "size": d.get("size"),
             "mtime_ns": st.st_mtime_ns if st else None, "sha256": d.get("sha256"), "world_size": r.world_size,
             "seconds": round(r.seconds, 3), "previous_rank": d.get("previous_rank"), "rows": None, "error": r.error}
        if r.error is not None or r.path not in rank_of:
            s.update(status="failed", rank=None, world_size=None, previous_rank=None)
        else:
            s.update(status="ok", rank=rank_of[r.path])
            if "staged" in d:
                s["rows"] = d["staged"]["rows"]
                for t, c in d["staged"]["columns"].items():
                    tables.setdefault(t, {"kind": "trace" if t in TRACE_TABLES else "reduction", "columns": c})
            else:
                s["rows"] = d.get("rows")
                for t in list(prev_tables):
                    tables.setdefault(t, prev_tables[t])
        sources.append(s)
    sources.sort(key=lambda s: (s["rank"] is None, s["rank"] if s["rank"] is not None else 0))  # failed last, in file order
    combined = _write_combined(dataset, tables, sorted((rank_of[r.path], r) for r in results
                                                       if r.error is None and r.path in rank_of))
    return commit(dataset, sources, the_plan["previous"], reductions, tables, combined)


def _write_combined(dataset: str, tables: dict[str, dict[str, Any]], ranked: list[tuple[int, Any]]) -> dict[str, Any]:
    """Every reduction table of every rank in one file (``_combined/<id>/<table>.parquet``, a leading ``rank``
    column), from the reductions this process holds already: one read for a reader instead of one per rank
    (a thousand small files cost seconds). The manifest names the id; a private copy, not part of the layout."""
    cid = f"{time.time_ns():x}"
    out = os.path.join(dataset, "_combined", cid)
    os.makedirs(out)
    rows = {}
    rank_col = {"rank": {"type": "int64", "dtype": "int64", "unit": "", "description": ""}}
    for t, spec in tables.items():
        if spec["kind"] != "reduction":
            continue
        have = [(rk, r.tables[t]) for rk, r in ranked if t in r.tables and len(r.tables[t])]
        if have:
            df = pd.concat([f for _, f in have], ignore_index=True)
            df["rank"] = np.repeat(np.array([rk for rk, _ in have], dtype=np.int64), [len(f) for _, f in have])
        else:
            df = pd.DataFrame({"rank": pd.Series([], dtype="int64")})
        _write_parquet(df, {**rank_col, **spec["columns"]}, os.path.join(out, f"{t}.parquet"))
        rows[t] = len(df)
    return {"id": cid, "tables": rows}
