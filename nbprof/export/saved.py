"""Saved traces: ``Trace.save("run.nbprof")`` and ``nbprof.load("run.nbprof")``.

The ``.nbprof`` file (format version :data:`SAVE_FORMAT_VERSION`) is one ZIP archive (entries stored, not
deflated: Parquet parts are compressed already) holding:

- ``nbprof.json`` -- first entry: ``{"format": "nbprof-trace", "version": 1, "nbprof": <version>,
  "meta": {...}, "report": {"path", "issues": [...]}, "tables": {name: {"json": [...], "object": [...]}}}``;
  metadata and load report are kept with their types (ints, None, nested dicts/lists/tuples, numpy
  scalars) by the same encoding as the trace cache (:mod:`nbprof.trace_cache`);
- ``events.parquet``, ``flows.parquet``, ``memory.parquet``, ``counters.parquet``, ``threads.parquet`` --
  the common tables (uncompressed Parquet) with their dtypes and categories (pandas' Parquet metadata; categoricals as Arrow
  dictionaries, categories in order) and their index;
- ``tables/<name>.parquet`` -- every side table of ``Trace.tables`` (object columns of plain values are
  stored as JSON text per cell and decoded back, as in the trace cache).

Reloading gives frames equal to the saved ones (``pandas.testing.assert_frame_equal``), the same
``TraceMeta`` and the same ``LoadReport``. A file of a newer format version is refused, naming both
versions. Measured speed (``benchmarks/bench_save.py``): see ``benchmarks/README.md``.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from typing import Any

import numpy as np
import pandas as pd

from ..atomic import atomic_open
from ..codec import decode_header, encode_header, from_plain, read_side_tables, to_plain, write_side_tables
from ..errors import NbprofError, SchemaError, TraceFileNotFoundError, TraceFormatError
from ..trace import schema
from ..trace.model import Trace

__all__ = ["save", "load_saved", "SAVE_FORMAT_VERSION", "SAVE_FORMAT_NAME"]

SAVE_FORMAT_NAME = "nbprof-trace"
SAVE_FORMAT_VERSION = 1
_FRAMES = ("events", "flows", "memory", "counters", "threads")
_COLUMNS = {"events": schema.EVENT_COLUMNS, "flows": schema.FLOW_COLUMNS, "memory": schema.MEMORY_COLUMNS,
            "counters": schema.COUNTER_COLUMNS}


def _parquet(df: pd.DataFrame) -> bytes:
    """Uncompressed Parquet: reads ~4x faster than snappy (measured on the 123k-row events table of HTA's
    df_index_resolver trace: 29 ms vs 111 ms) for ~1.5x the size."""
    buf = io.BytesIO()
    df.to_parquet(buf, compression=None)
    return buf.getvalue()


def _category_dtypes(df: pd.DataFrame) -> dict[str, str]:
    """Categorical column -> dtype of its categories (Parquet reads them back as ``str``)."""
    return {str(c): str(df[c].cat.categories.dtype) for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)}


def _restore_categories(df: pd.DataFrame, dtypes: dict[str, str]) -> pd.DataFrame:
    """Give categorical columns back their categories' dtype; a categorical with no categories (Parquet
    stores it as a null column, read back as float NaN) becomes one again."""
    for c, dt in dtypes.items():
        if c not in df.columns:
            continue
        if not isinstance(df[c].dtype, pd.CategoricalDtype):
            if df[c].isna().all():
                df[c] = pd.Categorical.from_codes(np.full(len(df), -1, dtype=np.int8),
                                                  categories=pd.Index([], dtype=dt))
            continue
        if str(df[c].cat.categories.dtype) != dt:
            s = df[c]
            cats = pd.Index(s.cat.categories.to_numpy(dtype=object), dtype=dt)
            df[c] = pd.Categorical.from_codes(s.cat.codes.to_numpy(), categories=cats, ordered=s.cat.ordered)
    return df


def save(trace: Trace, path: str | os.PathLike[str]) -> str:
    """Write ``trace`` to a ``.nbprof`` file (see the module docstring for the format).

    The file is written next to its final name and renamed into place, so a reader never sees half a file.

    Parameters
    ----------
    trace : Trace
    path : str or PathLike
        Target file; by convention it ends in ``.nbprof`` (``nbprof.load`` picks the reader by that suffix).

    Returns
    -------
    str
        The path written.

    Raises
    ------
    nbprof.errors.SchemaError
        When metadata, the load report or a side table holds something that is not plain data, or a
        side table's name is not ``[A-Za-z0-9_.-]`` (nothing is written then).
    OSError
        When the file cannot be written.
    """
    from .. import __version__

    p = os.fspath(path)
    parts: list[tuple[str, bytes]] = []
    for name in _FRAMES:
        parts.append((f"{name}.parquet", _parquet(getattr(trace, name))))
    bufs: dict[str, io.BytesIO] = {}
    side = write_side_tables(trace.tables, lambda n: bufs.setdefault(n, io.BytesIO()), "save")
    parts += [(f"tables/{n}.parquet", b.getvalue()) for n, b in bufs.items()]
    head = {
        "format": SAVE_FORMAT_NAME,
        "version": SAVE_FORMAT_VERSION,
        "nbprof": __version__,
        **encode_header(trace),
        "tables": side,
        "categories": {n: _category_dtypes(getattr(trace, n)) for n in _FRAMES},
    }
    head_bytes = json.dumps(to_plain(head, "trace")).encode()
    with atomic_open(p, "wb") as f, zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("nbprof.json", head_bytes)
        for name, data in parts:
            z.writestr(name, data)
    return p


def load_saved(path: str | os.PathLike[str], *, strict: bool = False, **_kwargs: Any) -> Trace:
    """Read a ``.nbprof`` file written by :func:`save` (``nbprof.load`` calls this for ``.nbprof`` files).

    Parameters
    ----------
    path : str or PathLike
    strict : bool
        Accepted for the loader interface; a saved trace holds already-loaded tables (its load report is
        the one of the original load), so nothing is repaired here.

    Returns
    -------
    Trace
        Tables, side tables, metadata and load report as saved.

    Raises
    ------
    nbprof.errors.TraceFormatError
        Not a ZIP archive, no ``nbprof.json`` of format ``nbprof-trace``, a newer format version, or a
        part that cannot be read (the reason names it).
    """
    p = os.fspath(path)
    try:
        with zipfile.ZipFile(p) as z:
            _check_entries(z, p)
            try:
                head = json.loads(_read(z, "nbprof.json", p))
            except KeyError:
                raise TraceFormatError(p, None, "not a saved nbprof trace: no nbprof.json entry") from None
            if not isinstance(head, dict) or head.get("format") != SAVE_FORMAT_NAME:
                raise TraceFormatError(p, None, f"not a saved nbprof trace: format is not {SAVE_FORMAT_NAME!r}")
            ver = head.get("version")
            if not isinstance(ver, int) or ver > SAVE_FORMAT_VERSION:
                msg = (f"saved with format version {ver}, this nbprof reads up to {SAVE_FORMAT_VERSION}; "
                       "upgrade nbprof")
                raise TraceFormatError(p, None, msg)
            head = from_plain(head)
            _check_head(head, p)
            tabs = {n: pd.read_parquet(io.BytesIO(_read(z, f"{n}.parquet", p))) for n in _FRAMES}
            for n, dts in (head.get("categories") or {}).items():
                if n in tabs:
                    tabs[n] = _restore_categories(tabs[n], dts)
            for n, cols in _COLUMNS.items():
                try:
                    schema.validate(tabs[n], cols, n)
                except SchemaError:  # a column missing or retyped: coerce (copies the frame, so only then)
                    tabs[n] = schema.coerce(tabs[n], cols)
            side = read_side_tables(head.get("tables"), lambda n: io.BytesIO(_read(z, f"tables/{n}.parquet", p)), p)
            _check_shapes(tabs["threads"], side, p)
        meta, rep = decode_header(head)
    except NbprofError:
        raise
    except FileNotFoundError:
        import errno

        raise TraceFileNotFoundError(errno.ENOENT, "no such saved trace", p) from None
    except Exception as exc:  # zipfile, json, pyarrow errors, a header missing keys: a damaged file
        raise TraceFormatError(p, None, f"cannot read saved trace: {type(exc).__name__}: {exc}") from exc
    return Trace(meta=meta, report=rep, tables=side, **tabs)


#: columns (name -> numpy kind: i integer, f float, b bool, "" any) the readers of each table rely on
_SHAPES = {"threads": {"pid": "i", "tid": "i", "name": "", "kind": ""},
           "device_args": {"event": "i", "key": "", "value": "f"},
           "id_values": {"column": "", "id": "i", "value": "", "is_text": "b"}}


def _check_shapes(threads: pd.DataFrame, side: dict[str, pd.DataFrame], p: str) -> None:
    """The threads table and the side tables nbprof reads by column (``device_args``, ``id_values``) have
    their columns with their kinds; raises ``TraceFormatError`` naming the first one that does not."""
    for name, df in (("threads", threads), *side.items()):
        want = _SHAPES.get(name)
        if want is None:
            continue
        for col, kind in want.items():
            if col not in df.columns:
                raise TraceFormatError(p, None, f"saved table {name!r} has no column {col!r}")
            if kind and df[col].dtype.kind != kind and not (kind == "f" and df[col].dtype.kind == "i"):
                raise TraceFormatError(p, None, f"saved table {name!r} column {col!r} is {df[col].dtype}, "
                                                f"not of kind {kind!r}")


# A saved file is untrusted input: its parts are written uncompressed (ZIP_STORED), so a part that inflates
# far beyond the file's own size is a crafted one (a 1 GiB zero part deflates to 1 MiB).
_MAX_INFLATE = 32  # decompressed bytes per byte of the file, all parts together
_MIN_MAX_BYTES = 256 << 20


def _check_entries(z: zipfile.ZipFile, p: str) -> None:
    """Refuse a ZIP whose entry names repeat (which copy is read would depend on the reader), and one
    whose parts declare more than ``max(_MIN_MAX_BYTES, _MAX_INFLATE * file size)`` bytes in all."""
    names = z.namelist()
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise TraceFormatError(p, None, f"the saved trace has duplicate entries {dup[:5]}: refused (a tampered file)")
    limit = max(_MIN_MAX_BYTES, _MAX_INFLATE * os.path.getsize(p))
    total = sum(i.file_size for i in z.infolist())
    if total > limit:
        raise TraceFormatError(p, None, f"the saved trace's parts inflate to {total:,} bytes, over the {limit:,} "
                               "allowed for a file of this size: refused")


def _read(z: zipfile.ZipFile, name: str, p: str) -> bytes:
    """One part, read up to the size bound (a header that understates the size does not get past it)."""
    limit = max(_MIN_MAX_BYTES, _MAX_INFLATE * os.path.getsize(p))
    with z.open(name) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TraceFormatError(p, None, f"part {name!r} inflates beyond {limit:,} bytes: refused")
    return data


# the header's fields and their types (``TraceMeta``, ``LoadIssue``): anything else is refused by name
_META_TYPES: dict[str, tuple[type, ...]] = {
    "source_path": (str,), "source_format": (str,), "producer": (str,), "origin_ns": (int, type(None)),
    "rank": (int,), "world_size": (int,), "rank_source": (str,), "distributed_info": (dict,),
    "device_properties": (list,), "schema_version": (int, type(None)), "flags": (dict,), "extra": (dict,),
    "nbprof_schema_version": (int,),
}
_ISSUE_TYPES: dict[str, tuple[type, ...]] = {
    "kind": (str,), "action": (str,), "count": (int,), "message": (str,), "offset": (int, type(None)),
}


def _check_head(head: Any, p: str) -> None:
    """Check the types of every field of the header that becomes ``TraceMeta``/``LoadReport``; raise
    ``TraceFormatError`` naming the first wrong one (a mistyped field would crash an analysis later)."""

    def need(v: Any, types: tuple[type, ...], where: str) -> None:
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            want = " or ".join("None" if t is type(None) else t.__name__ for t in types)
            raise TraceFormatError(p, None, f"saved trace field {where} is a {type(v).__name__}, not {want}")

    need(head.get("meta"), (dict,), "meta")
    need(head.get("report"), (dict,), "report")
    for k, v in head["meta"].items():
        if k in _META_TYPES:
            need(v, _META_TYPES[k], f"meta.{k}")
    for i, d in enumerate(head["meta"].get("device_properties", [])):
        need(d, (dict,), f"meta.device_properties[{i}]")
    need(head["report"].get("path"), (str,), "report.path")
    need(head["report"].get("issues"), (list,), "report.issues")
    for i, it in enumerate(head["report"]["issues"]):
        need(it, (dict,), f"report.issues[{i}]")
        for k, types in _ISSUE_TYPES.items():
            need(it.get(k), types, f"report.issues[{i}].{k}")
        extra = set(it) - set(_ISSUE_TYPES)
        if extra:
            raise TraceFormatError(p, None, f"saved trace field report.issues[{i}] has unknown keys {sorted(extra)}")
    for k in ("tables", "categories"):
        if head.get(k) is not None:
            need(head[k], (dict,), k)
