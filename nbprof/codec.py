"""The one codec of a Trace's metadata and side tables, shared by the trace cache (``nbprof.trace_cache``) and
the saved ``.nbprof`` file (``nbprof.export.saved``).

- :func:`to_plain` / :func:`from_plain`: metadata (``TraceMeta``, the load report, side-table cells) as JSON
  values that come back as the same types: None, bool, int (any size), float (NaN/inf too), str, list,
  tuple, dict (any plain keys) and numpy scalars; anything else raises ``SchemaError`` naming where it sits;
- :func:`encode_header` / :func:`decode_header`: a Trace's ``meta`` and ``report`` as that plain data and back;
- :func:`write_side_tables` / :func:`read_side_tables`: ``Trace.tables`` as one Parquet part per table
  (names ``[A-Za-z0-9_.-]``, at most 100 characters); object columns of str/None stay Parquet strings, other
  object columns are JSON text per cell (exact types).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import IO, Any

import numpy as np
import pandas as pd

from .errors import SchemaError, TraceFormatError
from .trace.model import LoadIssue, LoadReport, Trace, TraceMeta

__all__ = ["TABLE_NAME", "to_plain", "from_plain", "encode_header", "decode_header", "write_side_tables",
           "read_side_tables"]

_TAGS = ("__tuple__", "__items__", "__np__")
#: what a side table may be named (a file name part in both containers)
TABLE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


def to_plain(v: Any, where: str) -> Any:
    """``v`` as JSON values that :func:`from_plain` turns back into the same types.

    Kept exactly: None, bool, int (any size), float (NaN/inf too), str, list, tuple, dict (any plain
    keys), numpy scalars. Anything else raises ``SchemaError`` naming where it sits (nothing is str()-ed).
    """
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.generic) and v.dtype.kind in "biufU":
        return {"__np__": v.dtype.str, "v": v.item()}
    if isinstance(v, list):
        return [to_plain(x, f"{where}[{i}]") for i, x in enumerate(v)]
    if isinstance(v, tuple):
        return {"__tuple__": [to_plain(x, f"{where}[{i}]") for i, x in enumerate(v)]}
    if isinstance(v, dict):
        if all(type(k) is str for k in v) and not any(k in _TAGS for k in v):
            return {k: to_plain(x, f"{where}[{k!r}]") for k, x in v.items()}
        return {"__items__": [[to_plain(k, f"{where} key"), to_plain(x, f"{where}[{k!r}]")] for k, x in v.items()]}
    raise SchemaError(f"cannot cache {where}: a {type(v).__module__}.{type(v).__name__} is not plain data "
                      "(metadata may hold None, bool, int, float, str, lists, tuples, dicts and numpy scalars)")


def from_plain(v: Any) -> Any:
    """The values :func:`to_plain` wrote, with their types back."""
    if isinstance(v, list):
        return [from_plain(x) for x in v]
    if isinstance(v, dict):
        if len(v) == 1 and "__tuple__" in v:
            return tuple(from_plain(x) for x in v["__tuple__"])
        if len(v) == 1 and "__items__" in v:
            return {from_plain(k): from_plain(x) for k, x in v["__items__"]}
        if set(v) == {"__np__", "v"}:
            return np.dtype(v["__np__"]).type(v["v"])
        return {k: from_plain(x) for k, x in v.items()}
    return v


def _table_to_parquet(df: pd.DataFrame, path: str | IO[bytes], where: str) -> dict[str, list[str]]:
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
        out[c] = [json.dumps(to_plain(x, f"{where}.{c}")) for x in df[c]]
        json_cols.append(str(c))
    out.to_parquet(path)
    return {"json": json_cols, "object": obj_cols}


def _table_from_parquet(path: str | IO[bytes], cols: dict[str, list[str]]) -> pd.DataFrame:
    df = pd.read_parquet(path)
    for c in cols.get("json", []):
        df[c] = pd.Series([from_plain(json.loads(x)) for x in df[c]], index=df.index, dtype=object)
    for c in cols.get("object", []):
        s = df[c].astype(object)
        df[c] = s.where(df[c].notna(), None)
    return df


def encode_header(trace: Trace) -> dict[str, Any]:
    """``{"meta": ..., "report": {"path", "issues"}}`` of ``trace`` as dicts (pass the whole header, with what
    else the container stores, through :func:`to_plain` before writing it as JSON)."""
    return {"meta": dict(trace.meta.__dict__),
            "report": {"path": trace.report.path, "issues": [dict(i.__dict__) for i in trace.report.issues]}}


def decode_header(head: dict[str, Any]) -> tuple[TraceMeta, LoadReport]:
    """The ``TraceMeta`` and ``LoadReport`` of a header :func:`encode_header` wrote (after :func:`from_plain`);
    metadata keys this nbprof does not know are left out."""
    rep = LoadReport(path=head["report"]["path"], issues=[LoadIssue(**i) for i in head["report"]["issues"]])
    m = head["meta"]
    return TraceMeta(**{k: v for k, v in m.items() if k in TraceMeta.__dataclass_fields__}), rep


def write_side_tables(tables: dict[str, Any] | None, part: Callable[[str], str | IO[bytes]],
                      verb: str) -> dict[str, dict[str, list[str]]]:
    """Write each side table to ``part(name)`` (a path or a binary buffer); returns the per-table column
    spec :func:`read_side_tables` needs.

    Raises
    ------
    SchemaError
        A name that is not ``[A-Za-z0-9_.-]``, a value that is not a DataFrame or a cell that is not plain data
        (``verb`` says what was being done: "cache", "save").
    """
    side: dict[str, dict[str, list[str]]] = {}
    for name, df in (tables or {}).items():
        if not isinstance(name, str) or not TABLE_NAME.match(name) or not isinstance(df, pd.DataFrame):
            raise SchemaError(f"cannot {verb} side table {name!r}: names are [A-Za-z0-9_.-] and values DataFrames")
        side[name] = _table_to_parquet(df, part(name), f"tables[{name!r}]")
    return side


def read_side_tables(spec: dict[str, dict[str, list[str]]] | None, part: Callable[[str], str | IO[bytes]],
                     path: str) -> dict[str, pd.DataFrame]:
    """The side tables :func:`write_side_tables` wrote, each read from ``part(name)``.

    Raises
    ------
    TraceFormatError
        A table name that is not ``[A-Za-z0-9_.-]`` (the container ``path`` is untrusted input).
    """
    out = {}
    for n, cols in (spec or {}).items():
        if not isinstance(n, str) or not TABLE_NAME.match(n):
            raise TraceFormatError(path, None, f"bad side table name {n!r}")
        out[n] = _table_from_parquet(part(n), cols)
    return out
