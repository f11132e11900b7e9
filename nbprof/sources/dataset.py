"""Reading a job dataset: the documented, versioned Parquet folder that ``load_ranks(..., dataset=PATH)``
writes (``docs/dataset.md``; writer: :mod:`nbprof.export.dataset`).

Layout (hive-partitioned by rank, so DuckDB, Dask, Spark and pyarrow read it without nbprof)::

    PATH/manifest.json                         version, nbprof version, tables and columns, sources (size, sha256, status)
    PATH/<table>/rank=<r>/part-0.parquet       one file per table and rank; the ``rank`` column is the partition
    PATH/_ranks/rank=<r>/trace.json            that rank's TraceMeta and load report (for ``Job.trace``)
    PATH/_ranks/rank=<r>/<name>.parquet        its other Trace tables: flows, memory, counters, threads
    PATH/_ranks/rank=<r>/side/<name>.parquet   its side tables (``Trace.tables``, e.g. nsys ``nvtx``)

Tables: ``events`` (``nbprof.trace.schema.EVENT_COLUMNS``) and the per-rank reductions
(``nbprof.analysis.distributed.reductions``; names and columns are in the manifest's ``tables``). Names
starting with ``_`` or ``.`` are private (readers of hive datasets skip them).

This module only reads: the manifest, one table over all ranks, one rank's full ``Trace``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pandas as pd

from ..errors import TraceFormatError

__all__ = ["DATASET_VERSION", "MANIFEST", "TRACE_TABLES", "RANK_TABLES", "read_manifest", "table_file", "rank_dir",
           "read_table", "read_files", "read_rank_trace", "ok_ranks"]

#: the layout version this nbprof writes and reads. Migration rule (docs/dataset.md): a reader opens any
#: version up to its own (columns a newer version added are absent from older files and read as missing);
#: a version above its own is refused (``TraceFormatError`` naming both), and ``load_ranks(dataset=)``
#: rewrites every rank of a dataset written at another version.
DATASET_VERSION = 1
MANIFEST = "manifest.json"
FORMAT_NAME = "nbprof-job-dataset"
#: the Trace table each rank stores as a dataset table (``nbprof.trace.schema.EVENT_COLUMNS``)
TRACE_TABLES = ("events",)
#: the other Trace tables, kept per rank under ``_ranks/rank=<r>/`` for ``Job.trace`` (``threads`` has no
#: declared schema)
RANK_TABLES = ("flows", "memory", "counters", "threads")


def table_file(path: str, table: str, rank: int) -> str:
    """``PATH/<table>/rank=<rank>/part-0.parquet``."""
    return os.path.join(path, table, f"rank={int(rank)}", "part-0.parquet")


def rank_dir(path: str, rank: int) -> str:
    """``PATH/_ranks/rank=<rank>``: the rank's metadata, load report and side tables."""
    return os.path.join(path, "_ranks", f"rank={int(rank)}")


def read_manifest(path: str | os.PathLike[str], *, missing_ok: bool = False) -> dict[str, Any] | None:
    """The manifest of the dataset at ``path`` (a dict, see docs/dataset.md), or None when absent and
    ``missing_ok``.

    Raises
    ------
    FileNotFoundError
        No ``manifest.json`` in ``path`` (and not ``missing_ok``).
    TraceFormatError
        The manifest is not JSON, not an nbprof job dataset, or of a version above ``DATASET_VERSION``.
    """
    p = os.path.join(os.fspath(path), MANIFEST)
    try:
        with open(p, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise FileNotFoundError(f"no nbprof job dataset at {os.fspath(path)!r}: {MANIFEST} is missing "
                                "(write one with nbprof.load_ranks(..., dataset=PATH))") from None
    try:
        man = json.loads(raw)
    except ValueError as exc:
        raise TraceFormatError(p, None, f"the manifest is not JSON ({exc})") from exc
    if not isinstance(man, dict) or man.get("format") != FORMAT_NAME:
        raise TraceFormatError(p, None, f"not an nbprof job dataset manifest (no \"format\": \"{FORMAT_NAME}\")")
    v = man.get("version")
    if not isinstance(v, int) or v > DATASET_VERSION:
        raise TraceFormatError(p, None, f"dataset version {v!r}: this nbprof reads versions up to {DATASET_VERSION}; "
                                        "upgrade nbprof (the Parquet files stay readable by DuckDB/Dask/Spark)")
    return man


def ok_ranks(manifest: dict[str, Any]) -> list[int]:
    """Ranks whose source was loaded and written (status ``ok``), ascending."""
    return sorted(int(s["rank"]) for s in manifest.get("sources", []) if s.get("status") == "ok")


def read_table(path: str, manifest: dict[str, Any], table: str, ranks: list[int] | None = None) -> pd.DataFrame:
    """Table ``table`` of the given ranks (default every ``ok`` rank) as one frame with a leading int64
    ``rank`` column, ranks ascending, each rank's rows in their stored order.

    Columns are the manifest's (``tables[table]["columns"]``): strings as object (None when missing),
    integers and floats as declared; a column the file lacks (an older version) is filled missing.

    Raises
    ------
    KeyError
        No such table in the manifest (the message lists them).
    """
    spec = manifest.get("tables", {}).get(table)
    if spec is None:
        raise KeyError(f"no table {table!r} in the dataset; tables: {sorted(manifest.get('tables', {}))}")
    comb = manifest.get("combined") or {}
    if ranks is None and table in comb.get("tables", {}):  # every rank in one file, written with this manifest
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        f = os.path.join(path, "_combined", comb["id"], f"{table}.parquet")
        pf = pq.ParquetFile(f)
        # column by column (a job's compute table is millions of rows), numbers without a nullable intermediate
        have = set(pf.schema_arrow.names)
        cols = {c: pf.read([c]).column(0) if c in have else None for c in ("rank", *spec["columns"])}
        n = pf.metadata.num_rows
        return pd.DataFrame({c: _column(cols.pop(c), n, info) for c, info in
                             (("rank", {"type": "int64", "dtype": "int64"}), *spec["columns"].items())},
                            index=pd.RangeIndex(n))
    return read_files(path, table, ok_ranks(manifest) if ranks is None else ranks, spec["columns"])


def read_files(path: str, table: str, ranks: list[int], columns: dict[str, dict[str, str]], *,
               rank_column: bool = True) -> pd.DataFrame:
    """``table``'s files of ``ranks`` (a rank without the file has no rows) as one frame typed by ``columns``
    (the manifest's ``{col: {"type", "dtype", ...}}``), with a leading int64 ``rank`` column when
    ``rank_column``."""
    import pyarrow as pa
    import pyarrow.dataset as pds  # type: ignore[import-untyped]

    types = {"int64": pa.int64(), "int32": pa.int32(), "int16": pa.int16(), "int8": pa.int8(), "float64": pa.float64(),
             "float32": pa.float32(), "bool": pa.bool_(), "string": pa.string()}
    files = [f for f in (table_file(path, table, r) for r in ranks) if os.path.exists(f)]  # no file: no rows
    part = pa.schema([("rank", pa.int64())])
    schema = pa.schema([(c, types[v["type"]]) for c, v in columns.items()] + [("rank", pa.int64())])
    # one read over every file (threads), a file without a column (an older version) gives nulls
    d = pds.dataset(files, schema=schema, format="parquet", partitioning=pds.partitioning(part, flavor="hive"),
                    partition_base_dir=os.path.join(path, table))
    df = d.to_table().to_pandas(types_mapper=_NULLABLE_INTS.get)
    if not df["rank"].is_monotonic_increasing:
        df = df.sort_values("rank", kind="stable", ignore_index=True)
    return _typed(df, columns, rank_column)


def _nullable_ints() -> dict[Any, Any]:
    import pyarrow as pa

    return {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype(), pa.int16(): pd.Int16Dtype(),
            pa.int8(): pd.Int8Dtype()}


class _LazyInts(dict[Any, Any]):
    """Arrow integer type -> pandas nullable dtype (built on first use: pyarrow is imported lazily)."""

    def get(self, key: Any, default: Any = None) -> Any:
        if not self:
            self.update(_nullable_ints())
        return super().get(key, default)


#: integers are read as nullable first (a null stays NA, values stay exact), then cast to the declared dtype
_NULLABLE_INTS = _LazyInts()


def _column(arr: Any, n: int, info: dict[str, str]) -> Any:
    """One Arrow column of ``n`` rows (None: the file lacks it) as :func:`_typed` types it: a numeric or bool
    column without nulls straight to numpy (no nullable intermediate), the others through :func:`_typed`."""
    import numpy as np
    import pyarrow as pa

    typ, dtype = info["type"], info.get("dtype") or ("object" if info["type"] == "string" else info["type"])
    if arr is not None and typ != "string" and dtype == typ and arr.null_count == 0:
        a = arr.to_numpy()  # a read-only view of Arrow's buffer when in one chunk (as pandas' own views are)
        return a if a.dtype == np.dtype(dtype) else a.astype(dtype)
    if arr is None:
        arr = pa.nulls(n)
    s = pa.table({"c": arr}).to_pandas(types_mapper=_NULLABLE_INTS.get)
    return _typed(s, {"c": info}, False)["c"]


def _typed(df: pd.DataFrame, columns: dict[str, dict[str, str]], rank_column: bool) -> pd.DataFrame:
    """``df`` (read with :data:`_NULLABLE_INTS`) with the manifest's column dtypes, ``rank`` first when asked."""
    out = {"rank": df["rank"].astype("int64")} if rank_column else {}
    for c, info in columns.items():
        typ, dtype = info["type"], info.get("dtype") or ("object" if info["type"] == "string" else info["type"])
        s = df[c]
        if typ == "string":
            out[c] = s.astype(object).where(s.notna(), None)
        elif typ.startswith("int") and dtype == typ:  # a column an older version lacks: -1 (nbprof.trace.schema)
            out[c] = s.fillna(-1).astype(dtype)
        else:
            out[c] = s.astype(dtype)
    return pd.DataFrame(out, index=pd.RangeIndex(len(df)))


def read_rank_trace(path: str, manifest: dict[str, Any], rank: int) -> Any:
    """Rank ``rank``'s full ``Trace`` from the dataset alone (no source file needed): its trace tables,
    metadata, load report and side tables as the loader gave them (categorical columns rebuilt by
    ``schema.coerce``; their category order may differ from a fresh load, the values do not).

    Raises
    ------
    KeyError
        ``rank`` is not an ``ok`` rank of the dataset.
    """
    import pyarrow.parquet as pq

    from ..codec import decode_header, from_plain, read_side_tables
    from ..trace import schema
    from ..trace.model import Trace

    if rank not in ok_ranks(manifest):
        raise KeyError(f"no rank {rank} in the dataset: ranks are {ok_ranks(manifest)}")
    d = rank_dir(path, rank)
    with open(os.path.join(d, "trace.json")) as f:
        info = from_plain(json.load(f))
    tabs = {n: pq.read_table(table_file(path, n, rank)).to_pandas() for n in TRACE_TABLES}  # strings: object, None
    tabs |= {n: pq.read_table(os.path.join(d, f"{n}.parquet")).to_pandas() for n in RANK_TABLES}
    ev = tabs["events"]
    if "source_rank" in ev.columns:  # the trace's own rank column was not one value (docs/dataset.md)
        tabs["events"] = ev.rename(columns={"source_rank": "rank"})
    else:
        ev["rank"] = info.get("events_rank", info["meta"].get("rank", -1))
    for n, cols in (("events", schema.EVENT_COLUMNS), ("flows", schema.FLOW_COLUMNS),
                    ("memory", schema.MEMORY_COLUMNS), ("counters", schema.COUNTER_COLUMNS)):
        tabs[n] = schema.coerce(tabs[n], cols)
    side = read_side_tables(info.get("side"), lambda n: os.path.join(d, "side", f"{n}.parquet"), d)
    tm, rep = decode_header(info)
    return Trace(meta=tm, report=rep, tables=side, **tabs)
