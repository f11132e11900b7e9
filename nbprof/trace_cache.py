"""On-disk columnar cache of loaded traces (Parquet via pyarrow), keyed by file content, and the cache of
per-rank summaries (reducer outputs) that :func:`nbprof.scale.load_ranks` reopens without reading a trace.

Re-exported by :mod:`nbprof.scale` (``from nbprof.scale import TraceCache`` keeps working).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .atomic import atomic_dir, atomic_write
from .codec import decode_header, encode_header, from_plain, read_side_tables, to_plain, write_side_tables
from .errors import TraceFormatError
from .trace import schema
from .trace.model import Trace

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


def _dump_json(obj: Any, path: str, where: str) -> None:
    with open(path, "w") as f:
        json.dump(to_plain(obj, where), f)


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
            side = write_side_tables(trace.tables, lambda n: os.path.join(tmp, "tables", f"{n}.parquet"), "cache")
            meta = {"nbprof_cache_format": CACHE_FORMAT_VERSION, **encode_header(trace), "tables": side}
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
        meta = from_plain(meta)
        tabs = {n: pd.read_parquet(os.path.join(d, f"{n}.parquet")) for n in ("events", "flows", "memory", "counters", "threads")}
        for n, cols in (("events", schema.EVENT_COLUMNS), ("flows", schema.FLOW_COLUMNS), ("memory", schema.MEMORY_COLUMNS),
                        ("counters", schema.COUNTER_COLUMNS)):
            tabs[n] = schema.coerce(tabs[n], cols)
        side = read_side_tables(meta.get("tables"), lambda n: os.path.join(d, "tables", f"{n}.parquet"), d)
        tm, rep = decode_header(meta)
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
    #: load_ranks(dataset=): the source's sha256 and size, and what was staged (``nbprof.export.dataset``)
    dataset: dict[str, Any] | None = None


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
    meta = from_plain(meta)
    try:
        tables = {n: pd.read_parquet(os.path.join(d, f"{n}.parquet")) for n in meta["tables"]}
    except (OSError, ValueError):  # removed meanwhile: parse the trace instead
        return None
    return _RankResult(path=path, rank=meta["rank"], rank_source=meta["rank_source"], world_size=meta["world_size"],
                       distributed_info=meta["distributed_info"], digest=digest, tables=tables, issues=meta["issues"],
                       from_cache=True, seconds=time.perf_counter() - t0)

