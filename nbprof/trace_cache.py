"""On-disk columnar cache of loaded traces (Parquet via pyarrow), keyed by file content, and the cache of
per-rank summaries (reducer outputs) that :func:`nbprof.scale.load_ranks` reopens without reading a trace.

Re-exported by :mod:`nbprof.scale` (``from nbprof.scale import TraceCache`` keeps working).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import pandas as pd

from .atomic import atomic_dir, atomic_write
from .errors import SchemaError, TraceFormatError
from .trace import schema
from .trace.model import LoadReport, Trace, TraceMeta

__all__ = ["TraceCache", "default_cache_dir", "CACHE_FORMAT_VERSION", "reducer_key"]

CACHE_FORMAT_VERSION = 5  # 2: side tables (Trace.tables) as Parquet, metadata JSON with types kept; 3: blocks_per_sm;
# 4: the Kineto device_args side table and the category spellings (meta.extra); 5: the id_values side table
# (ids above 2**63-1 as written) -- older entries are rebuilt


def default_cache_dir() -> str:
    """``$NBPROF_CACHE_DIR``, else ``$XDG_CACHE_HOME/nbprof/traces``, else ``~/.cache/nbprof/traces``."""
    env = os.environ.get("NBPROF_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nbprof", "traces")


# --------------------------------------------------------------------------- cache


_TAGS = ("__tuple__", "__items__", "__np__")
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


def _plain(v: Any, where: str) -> Any:
    """``v`` as JSON values that :func:`_unplain` turns back into the same types.

    Kept exactly: None, bool, int (any size), float (NaN/inf too), str, list, tuple, dict (any plain
    keys), numpy scalars. Anything else raises ``SchemaError`` naming where it sits (nothing is str()-ed).
    """
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.generic) and v.dtype.kind in "biufU":
        return {"__np__": v.dtype.str, "v": v.item()}
    if isinstance(v, list):
        return [_plain(x, f"{where}[{i}]") for i, x in enumerate(v)]
    if isinstance(v, tuple):
        return {"__tuple__": [_plain(x, f"{where}[{i}]") for i, x in enumerate(v)]}
    if isinstance(v, dict):
        if all(type(k) is str for k in v) and not any(k in _TAGS for k in v):
            return {k: _plain(x, f"{where}[{k!r}]") for k, x in v.items()}
        return {"__items__": [[_plain(k, f"{where} key"), _plain(x, f"{where}[{k!r}]")] for k, x in v.items()]}
    raise SchemaError(f"cannot cache {where}: a {type(v).__module__}.{type(v).__name__} is not plain data "
                      "(metadata may hold None, bool, int, float, str, lists, tuples, dicts and numpy scalars)")


def _unplain(v: Any) -> Any:
    if isinstance(v, list):
        return [_unplain(x) for x in v]
    if isinstance(v, dict):
        if len(v) == 1 and "__tuple__" in v:
            return tuple(_unplain(x) for x in v["__tuple__"])
        if len(v) == 1 and "__items__" in v:
            return {_unplain(k): _unplain(x) for k, x in v["__items__"]}
        if set(v) == {"__np__", "v"}:
            return np.dtype(v["__np__"]).type(v["v"])
        return {k: _unplain(x) for k, x in v.items()}
    return v


def _dump_json(obj: Any, path: str, where: str) -> None:
    with open(path, "w") as f:
        json.dump(_plain(obj, where), f)


def _side_table_to_parquet(df: pd.DataFrame, path: str | IO[bytes], where: str) -> dict[str, list[str]]:
    """Write a side table. Object columns: all str/None -> Parquet strings, read back as object with
    None; anything else -> JSON text per cell (exact types). Returns ``{"json": [...], "object": [...]}``."""
    out, json_cols, obj_cols = df, [], []
    for c in df.columns:
        if df[c].dtype != object:
            continue
        if all(x is None or isinstance(x, str) for x in df[c]):
            obj_cols.append(str(c))
            continue
        if out is df:
            out = df.copy()
        out[c] = [json.dumps(_plain(x, f"{where}.{c}")) for x in df[c]]
        json_cols.append(str(c))
    out.to_parquet(path)
    return {"json": json_cols, "object": obj_cols}


def _side_table_from_parquet(path: str | IO[bytes], cols: dict[str, list[str]]) -> pd.DataFrame:
    df = pd.read_parquet(path)
    for c in cols.get("json", []):
        df[c] = pd.Series([_unplain(json.loads(x)) for x in df[c]], index=df.index, dtype=object)
    for c in cols.get("object", []):
        s = df[c].astype(object)
        df[c] = s.where(df[c].notna(), None)
    return df


class TraceCache:
    """Parquet cache of parsed ``Trace`` tables, keyed by the BLAKE2b digest of the file's bytes.

    Layout: ``<dir>/<digest>/{events,flows,memory,counters,threads}.parquet``, the side tables
    ``tables/<name>.parquet`` and ``meta.json`` (with ``nbprof_cache_format``): metadata and load
    report round-trip with their types (ints, None, nested dicts/lists/tuples), and something that is not
    plain data raises ``SchemaError`` instead of being stored as its ``str()``. A small index maps
    (path, size, mtime_ns) to the digest so an unchanged file is not re-hashed. A cache entry written by
    a newer nbprof (higher format) is rejected, naming both versions; an older one is rebuilt.
    """

    def __init__(self, directory: str | None = None) -> None:
        self.dir = os.path.abspath(directory or default_cache_dir())

    # -- keys
    def _index_path(self) -> str:
        return os.path.join(self.dir, "index.json")

    def _read_index(self) -> dict[str, str]:
        try:
            with open(self._index_path()) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def digest(self, path: str) -> str:
        """Content digest of ``path`` (memoised by path, size and mtime)."""
        st = os.stat(path)
        key = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"
        idx = self._read_index()
        if key in idx:
            return idx[key]
        h = hashlib.blake2b(digest_size=20)
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        d = h.hexdigest()
        self._remember(key, d)
        return d

    def _remember(self, key: str, digest: str) -> None:
        """Add ``key -> digest`` to the index (a memo: when the folder cannot be written, nothing is kept)."""
        try:
            os.makedirs(self.dir, exist_ok=True)
            idx = self._read_index()
            idx[key] = digest
            atomic_write(self._index_path(), json.dumps(idx))
        except OSError:
            pass

    # -- entries
    def entry(self, digest: str) -> str:
        """Directory of the cache entry for the content digest ``digest`` (it may not exist yet)."""
        return os.path.join(self.dir, digest)

    def _format(self, digest: str) -> Any:
        return self._format_at(self.entry(digest))

    def has(self, digest: str) -> bool:
        """True when a current-format entry for ``digest`` exists (``put`` renames a finished folder).

        An entry of a newer format also answers True, so that ``get`` names the versions.
        """
        fmt = self._format(digest)
        return isinstance(fmt, int) and fmt >= CACHE_FORMAT_VERSION

    def put(self, digest: str, trace: Trace) -> None:
        """Write ``trace``'s tables, side tables, metadata and report (atomically: a private folder
        renamed into place, ``nbprof.atomic.atomic_dir``; an entry of an older format is replaced; an
        entry another process finished first is kept).

        Raises
        ------
        SchemaError
            When metadata, report or a side table holds something that is not plain data (nothing is
            written then).
        OSError
            When the cache folder cannot be written (read-only, full); nothing is left behind.
        """
        final = self.entry(digest)
        if self.has(digest):
            return
        self._drop_stale(final)
        with atomic_dir(final) as tmp:
            os.makedirs(os.path.join(tmp, "tables"))
            for name in ("events", "flows", "memory", "counters", "threads"):
                getattr(trace, name).to_parquet(os.path.join(tmp, f"{name}.parquet"), index=False)
            side: dict[str, dict[str, list[str]]] = {}
            for name, df in (trace.tables or {}).items():
                if not isinstance(name, str) or not _TABLE_NAME.match(name) or not isinstance(df, pd.DataFrame):
                    raise SchemaError(f"cannot cache side table {name!r}: names are [A-Za-z0-9_.-] and values DataFrames")
                side[name] = _side_table_to_parquet(df, os.path.join(tmp, "tables", f"{name}.parquet"), f"tables[{name!r}]")
            meta = {
                "nbprof_cache_format": CACHE_FORMAT_VERSION,
                "meta": dict(trace.meta.__dict__),
                "report": {"path": trace.report.path, "issues": [dict(i.__dict__) for i in trace.report.issues]},
                "tables": side,
            }
            _dump_json(meta, os.path.join(tmp, "meta.json"), "trace")

    def _drop_stale(self, final: str) -> None:
        """Remove the entry folder ``final`` when it is not a current-format entry (an older format, or
        a folder without ``meta.json``): moved aside under a private name first, and put back if it
        turns out to be current (another process finished it meanwhile). A current entry is never removed."""
        import shutil
        import tempfile

        if not os.path.isdir(final) or self._format_at(final) == CACHE_FORMAT_VERSION:
            return
        aside = tempfile.mkdtemp(prefix="." + os.path.basename(final) + ".", suffix=".old", dir=self.dir)
        try:
            os.rename(final, aside)  # replaces the empty private folder
        except OSError:  # gone, or replaced meanwhile
            shutil.rmtree(aside, ignore_errors=True)
            return
        if self._format_at(aside) == CACHE_FORMAT_VERSION:
            try:
                os.rename(aside, final)
                return
            except OSError:  # a third writer put one there: theirs stays
                pass
        shutil.rmtree(aside, ignore_errors=True)

    def _format_at(self, folder: str) -> Any:
        try:
            with open(os.path.join(folder, "meta.json")) as f:
                return json.load(f).get("nbprof_cache_format")
        except (OSError, ValueError, AttributeError):
            return None

    def get(self, digest: str) -> Trace:
        """Read a cached Trace (tables, side tables, metadata and report as they were put).

        Raises
        ------
        TraceFormatError
            When the entry was written by a newer cache format.
        """
        d = self.entry(digest)
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        fmt = meta.get("nbprof_cache_format")
        if not isinstance(fmt, int) or fmt > CACHE_FORMAT_VERSION:
            msg = f"cache entry has format {fmt}, this nbprof reads up to {CACHE_FORMAT_VERSION}; clear the cache or upgrade nbprof"
            raise TraceFormatError(d, None, msg)
        meta = _unplain(meta)
        tabs = {n: pd.read_parquet(os.path.join(d, f"{n}.parquet")) for n in ("events", "flows", "memory", "counters", "threads")}
        for n, cols in (("events", schema.EVENT_COLUMNS), ("flows", schema.FLOW_COLUMNS), ("memory", schema.MEMORY_COLUMNS),
                        ("counters", schema.COUNTER_COLUMNS)):
            tabs[n] = schema.coerce(tabs[n], cols)
        side = {n: _side_table_from_parquet(os.path.join(d, "tables", f"{n}.parquet"), jc)
                for n, jc in (meta.get("tables") or {}).items()}
        from .trace.model import LoadIssue

        rep = LoadReport(path=meta["report"]["path"], issues=[LoadIssue(**i) for i in meta["report"]["issues"]])
        m = meta["meta"]
        tm = TraceMeta(**{k: v for k, v in m.items() if k in TraceMeta.__dataclass_fields__})
        return Trace(meta=tm, report=rep, tables=side, **tabs)


# --------------------------------------------------------------------------- summary cache


@dataclass
class _RankResult:
    path: str
    rank: int
    rank_source: str
    world_size: int
    distributed_info: dict[str, Any]
    digest: str | None
    tables: dict[str, pd.DataFrame]
    issues: list[dict[str, Any]]
    from_cache: bool
    seconds: float
    error: str | None = None  # the trace could not be loaded: the exception's type and message


def reducer_key(reducer: Callable[..., Any]) -> str:
    """Cache key of a reducer: its ``cache_key`` attribute if it has one, else ``module.qualname``.

    Give a reducer a new ``cache_key`` when its output changes, so cached summaries are recomputed.
    """
    key = getattr(reducer, "cache_key", None) or f"{reducer.__module__}.{reducer.__qualname__}"
    return hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


def _summary_dir(cache: TraceCache, digest: str, reducer: Callable[..., Any]) -> str:
    return os.path.join(cache.entry(digest), f"summary-{reducer_key(reducer)}")


def _put_summary(cache: TraceCache, digest: str, reducer: Callable[..., Any], res: _RankResult) -> None:
    """Write the reducer's tables next to the cached trace (a private folder renamed into place);
    nothing when the trace's entry is absent (never creates a half entry) or the summary exists.

    Raises ``OSError`` when the folder cannot be written (nothing is left behind)."""
    final = _summary_dir(cache, digest, reducer)
    if not cache.has(digest) or os.path.exists(os.path.join(final, "result.json")):
        return
    with atomic_dir(final) as tmp:
        for name, df in res.tables.items():
            df.to_parquet(os.path.join(tmp, f"{name}.parquet"), index=False)
        meta = {"nbprof_cache_format": CACHE_FORMAT_VERSION, "rank": res.rank, "rank_source": res.rank_source,
                "world_size": res.world_size, "distributed_info": res.distributed_info, "issues": res.issues,
                "tables": sorted(res.tables)}
        _dump_json(meta, os.path.join(tmp, "result.json"), "rank summary")


def _get_summary(cache: TraceCache, path: str, reducer: Callable[..., Any]) -> _RankResult | None:
    """The cached reducer output for ``path`` (no trace is read), or None."""
    t0 = time.perf_counter()
    try:
        digest = cache.digest(path)
        d = _summary_dir(cache, digest, reducer)
        with open(os.path.join(d, "result.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    if meta.get("nbprof_cache_format") != CACHE_FORMAT_VERSION:
        return None
    meta = _unplain(meta)
    try:
        tables = {n: pd.read_parquet(os.path.join(d, f"{n}.parquet")) for n in meta["tables"]}
    except (OSError, ValueError):  # removed meanwhile: parse the trace instead
        return None
    return _RankResult(path=path, rank=meta["rank"], rank_source=meta["rank_source"], world_size=meta["world_size"],
                       distributed_info=meta["distributed_info"], digest=digest, tables=tables, issues=meta["issues"],
                       from_cache=True, seconds=time.perf_counter() - t0)

