"""SQLite access for the Nsight Systems reader: the immutable / WAL-safe read-only connection, table and
column resolution at load time, and the coercion of bad cells (non-integers in INTEGER columns, text that
is not UTF-8) into report entries (or ``TraceFormatError`` in strict mode)."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
import time
import urllib.parse
from typing import Any

import numpy as np
import pandas as pd

from ...errors import TraceFormatError
from ...trace.model import LoadReport


def decode_global_id(gid: Any) -> tuple[Any, Any]:
    """Split an nsys ``globalTid``/``globalPid`` into ``(pid, tid)``.

    Formula from NVIDIA's SQLite examples: ``pid = gid // 0x1000000 % 0x1000000``,
    ``tid = gid % 0x1000000``. Works on ints and integer numpy arrays/Series.
    """
    return (gid // 0x1000000) % 0x1000000, gid % 0x1000000



_INT64_MAX = float(2**63)
# CPU-time bound of one load's SQL (sqlite3 progress handler); an nsys export reads at well over 10 MB/s
_CPU_S_MIN = 60.0
_CPU_S_PER_MB = 1.0


class _Db:
    """Read-only access with table/column resolution at run time; bad values become report entries."""

    def __init__(self, path: str, report: LoadReport, strict: bool) -> None:
        self.path = path
        self.report = report
        self.strict = strict
        self._tmp: str | None = None
        self._table = "sqlite_master"
        self._bad_text: dict[str, list[Any]] = {}
        src = os.path.abspath(path)
        wal = src + "-wal"
        if os.path.isfile(wal) and os.path.getsize(wal) > 0:
            # a WAL with content: reading it in place would write -shm next to the file; read a private copy
            self._tmp = tempfile.mkdtemp(prefix="nbprof-nsys-wal-")
            dst = os.path.join(self._tmp, "export.sqlite")
            shutil.copyfile(src, dst)
            shutil.copyfile(wal, dst + "-wal")
            uri = "file:" + urllib.parse.quote(dst)  # our private copy: SQLite may write its -shm there
            report.add("wal_copy", "assumed", 1, f"{os.path.basename(wal)} holds uncommitted pages: database and WAL "
                       "were read from a private copy (nothing written next to the file)")
        else:
            uri = "file:" + urllib.parse.quote(src) + "?mode=ro&immutable=1"
        try:
            self.con = sqlite3.connect(uri, uri=True)
            self.con.text_factory = self._text
            # an untrusted file (sqlite.org "Defense Against The Dark Arts"): no functions from the schema,
            # corrupt cells checked, and a CPU-time bound on every statement (the progress handler)
            self.con.execute("PRAGMA trusted_schema = OFF")
            self.con.execute("PRAGMA cell_size_check = ON")
            self._limit_s = _CPU_S_MIN + _CPU_S_PER_MB * os.path.getsize(src) / 1e6
            self._t0 = time.process_time()
            self.con.set_progress_handler(self._too_long, 100_000)
            # only real tables: a VIEW (even a recursive one that never ends) is not an nsys export table
            rows = self.con.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise TraceFormatError(path, None, f"not a readable SQLite database ({exc})") from exc
        except UnicodeDecodeError as exc:  # SQLite's own text (schema, messages) is not UTF-8: a damaged file
            self.close()
            raise TraceFormatError(path, None, f"not a readable SQLite database (schema text is not UTF-8: {exc})",
                                   table="sqlite_master") from exc
        self.names = {r[0] for r in rows if r[1] == "table"}
        views = sorted(r[0] for r in rows if r[1] != "table")
        if views:
            report.add("views_ignored", "assumed", len(views), f"{len(views)} views in the database (e.g. "
                       f"{views[0]!r}) were not read: nsys exports tables only")
        self._cols: dict[str, list[tuple[str, str]]] = {}

    def _too_long(self) -> int:
        """SQLite's progress handler: non-zero (interrupt the statement) past the CPU-time bound."""
        return int(time.process_time() - self._t0 > self._limit_s)

    def close(self) -> None:
        con = getattr(self, "con", None)
        if con is not None:
            con.close()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _text(self, b: bytes) -> str:
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError as exc:
            if self.strict:
                raise TraceFormatError(self.path, None, f"text that is not valid UTF-8 ({exc}): {b[:40]!r}",
                                       table=self._table) from None
            self._bad_text.setdefault(self._table, [0, b[:40]])[0] += 1
            return b.decode("utf-8", "replace")

    def flush_text_issues(self) -> None:
        for t, (n, sample) in self._bad_text.items():
            self.report.add("bad_utf8", "repaired", n, f"{n} text value(s) in table {t} are not valid UTF-8 (first: "
                            f"{sample!r}); decoded with U+FFFD replacement characters")
        self._bad_text.clear()

    def table(self, base: str) -> str | None:
        """``base`` or its highest suffixed variant (``NVTX_EVENTS_V3``) when present."""
        if base in self.names:
            return base
        pat = re.compile(rf"^{re.escape(base)}(?:_V(\d+))?$", re.IGNORECASE)
        cands = sorted((int(m.group(1) or 0), n) for n in self.names if (m := pat.match(n)))
        return cands[-1][1] if cands else None

    def _info(self, table: str) -> list[tuple[str, str]]:
        if table not in self._cols:
            self._table = table
            self._cols[table] = [(r[1], str(r[2] or "").upper()) for r in self.con.execute(f'PRAGMA table_info("{table}")')]
        return self._cols[table]

    def columns(self, table: str) -> list[str]:
        return [c for c, _t in self._info(table)]

    def fail(self, reason: str, table: str | None, row: int | None = None) -> None:
        """Raise the strict-mode error for ``table`` (and ``row``)."""
        where = f" (rowid {row})" if row is not None else ""
        raise TraceFormatError(self.path, None, reason + where, table=table)

    def read(self, base: str, wanted: list[str], where: str = "", required: tuple[str, ...] = ()) -> pd.DataFrame | None:
        """Columns of ``wanted`` that exist (missing ones absent from the frame); None when no table.

        INTEGER columns come back numeric: a value that is not an integer in int64 range becomes missing
        (reported). A table lacking a ``required`` column is skipped (reported) and None returned.
        """
        t = self.table(base)
        if t is None:
            return None
        info = dict(self._info(t))
        have = list(info)
        miss = [c for c in required if c not in info]
        if miss:
            n = self.con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
            msg = f"table {t} has no column {', '.join(miss)}: its {n} rows were skipped"
            if self.strict:
                self.fail(msg, t)
            self.report.add(f"missing_column:{t}", "dropped", int(n), msg)
            return None
        cols = [c for c in wanted if c in have]
        if not cols:
            return None
        sel = ", ".join(chr(34) + c + chr(34) for c in cols)
        if "rowid" in wanted and "rowid" not in have:
            sel = "rowid AS rowid, " + sel
        sql = f'SELECT {sel} FROM "{t}" {where}'
        self._table = t
        try:
            df = pd.read_sql_query(sql, self.con)
        except TraceFormatError:
            raise
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:
            why = str(exc)
            if "interrupt" in why:
                why = (f"reading took over {self._limit_s:.0f} s of CPU, the bound for a file of this size "
                       f"({_CPU_S_MIN:.0f} s + {_CPU_S_PER_MB:.0f} s per MB): interrupted")
            raise TraceFormatError(self.path, None, f"cannot read ({why})", table=t) from exc
        finally:
            self.flush_text_issues()
        for c in cols:
            if "INT" in info.get(c, "") and df[c].dtype != np.int64:
                df[c] = self._clean_int(df, c, t, where)
            elif "TEXT" in info.get(c, "") and df[c].dtype == object:  # blobs or numbers among the text
                df[c] = pd.Series([_text_value(v) for v in df[c]], index=df.index, dtype=object)
        return df

    def _rowid(self, t: str, where: str, i: int) -> int | None:
        """SQLite rowid of the ``i``-th row the query read (scan order), or None for a rowid-less table."""
        try:
            r = self.con.execute(f'SELECT rowid FROM "{t}" {where} LIMIT 1 OFFSET {int(i)}').fetchone()
        except sqlite3.DatabaseError:
            return None
        return int(r[0]) if r else None

    def _clean_int(self, df: pd.DataFrame, c: str, t: str, where: str = "") -> pd.Series:
        s = df[c]
        if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
            f = s.astype("float64")
        else:  # text (or blobs) in an INTEGER column
            f = pd.Series([_num(x) for x in s.astype(object)], index=s.index, dtype="float64")
        bad = s.notna().to_numpy() & ~(np.isfinite(f) & (f == np.floor(f)) & (f >= -_INT64_MAX) & (f < _INT64_MAX)).to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            row = self._rowid(t, where, i)
            val = s.iloc[i].item() if hasattr(s.iloc[i], "item") else s.iloc[i]
            msg = (f"{int(bad.sum())} value(s) in {t}.{c} are not integers in int64 range (first at rowid {row}: "
                   f"{val!r}); read as missing")
            if self.strict:
                self.fail(f"{t}.{c}: {val!r} is not an integer in int64 range", t, row)
            self.report.add(f"bad_value:{t}.{c}", "repaired", int(bad.sum()), msg)
            f = f.where(~bad)
        return f

    def kv(self, base: str) -> dict[str, Any]:
        t = self.table(base)
        if t is None or not {"name", "value"} <= set(self.columns(t)):
            return {}
        self._table = t
        try:
            return {str(_text_value(k)): (v if isinstance(v, (int, float)) else _text_value(v))
                    for k, v in self.con.execute(f'SELECT name, value FROM "{t}"')}
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, None, f"cannot read ({exc})", table=t) from exc
        finally:
            self.flush_text_issues()


def _num(x: Any) -> float:
    """A cell of an INTEGER column as a float (NaN when it is not a number)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x) if x != x or abs(x) < 2**64 else float("inf")  # NaN (a null) stays NaN
    try:
        return float(x) if isinstance(x, str) else float("nan")
    except ValueError:
        return float("nan")


def _int_col(df: pd.DataFrame, col: str, default: int = -1) -> np.ndarray:
    if df is None or col not in df:
        return np.full(0 if df is None else len(df), default, dtype="int64")
    return np.asarray(pd.to_numeric(df[col], errors="coerce").fillna(default).astype("int64").to_numpy())


def _text_value(v: Any) -> str | None:
    """A TEXT cell as str: a BLOB decoded (U+FFFD for invalid UTF-8), a number written out, NULL -> None."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, float) and v != v:
        return None
    return str(v)


def _names(df: pd.DataFrame, col: str, strings: dict[int, str | None]) -> pd.Series:
    """A name column that is either a StringIds id or text (mixed cells: ints are ids, blobs decoded)."""
    if col not in df:
        return pd.Series([None] * len(df), index=df.index, dtype=object)
    s = df[col]
    if pd.api.types.is_numeric_dtype(s):
        return s.map(lambda v: strings.get(int(v)) if pd.notna(v) else None)

    def one(v: Any) -> str | None:
        if isinstance(v, int) and not isinstance(v, bool):
            return strings.get(v)
        return _text_value(v)

    return pd.Series([one(v) for v in s.astype(object)], index=df.index, dtype=object)

