"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> ``Trace``.

Format facts (Nsight Systems User Guide, "SQLite schema reference"; ../shared/notes/formats.md §4.6;
checked on exports of nsys 2022.2 and 2022.4):

- every name is an id into ``StringIds(id, value)``; times are ns from the session start, whose
  absolute time is ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` (-> ``meta.origin_ns``; ``ts_ns``
  keeps the export's own values so numbers match ``nsys stats``);
- thread ids are packed: ``pid = globalTid // 0x1000000 % 0x1000000``, ``tid = globalTid % 0x1000000``
  (same for ``globalPid``);
- tables with no rows are not written at all, and names/columns drift between versions (some exports
  suffix ``NVTX_EVENTS``); every table and column is resolved from ``sqlite_master`` /
  ``PRAGMA table_info`` at load time and a missing one is simply an absent kind of event.

Reading is read-only in the strict sense: the database is opened ``immutable`` (a WAL-mode export
would otherwise get ``-shm``/``-wal`` files written next to it); when a non-empty ``-wal`` file
already sits beside it, database and WAL are copied to a private temporary folder and read there.
This module never runs nsys: ``.nsys-rep`` reports are exported by ``nbprof.api.load_nsys_report``.

Bad values are repaired and reported, never raised as bare Python errors: a non-integer, null,
non-finite or out-of-range value in an INTEGER column is read as missing (``bad_value``); text that is
not valid UTF-8 is decoded with U+FFFD (``bad_utf8``); a table without a column the loader needs is
skipped (``missing_column``); ``end < start`` gives duration 0 (``negative_dur``). ``strict=True``
raises ``TraceFormatError`` (file + table, + row where known) at the first of these instead.

Mapping onto the trace model (categories are Kineto's vocabulary):

============================================  ==============================================
``CUPTI_ACTIVITY_KIND_KERNEL``                ``kernel`` (name = demangled name; device/stream,
                                              grid/block ``"x,y,z"``, registers, static+dynamic
                                              shared memory)
``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``MEMSET``   ``gpu_memcpy`` / ``gpu_memset`` named as ``nsys stats``
                                              names them (``[CUDA memcpy HtoD]``, ``[CUDA memset]``),
                                              with ``bytes``
``CUPTI_ACTIVITY_KIND_RUNTIME``               ``cuda_runtime`` (``cuda*``) / ``cuda_driver`` (``cu*``),
                                              version suffix ``_v3020`` dropped; ``correlation`` links
                                              them to device rows, and ac2g flows are built
``NVTX_EVENTS``                               ``nvtx`` (push/pop, start/end ranges; marks as instants);
                                              name ``domain:text`` as ``nsys stats`` writes it
``OSRT_API`` (eventClass 27)                  ``osrt``
============================================  ==============================================

Source-specific tables that have no home in the common schema are kept in the declared side tables
``trace.tables`` (``nbprof.trace.schema.SIDE_TABLES``; :func:`nsys_tables` returns them): ``nvtx`` (style, domain, payloads,
range ids, end thread), ``kernels`` (short/mangled names), ``runtime`` (names as written, eventClass,
nameId), ``memcpy`` (copy/src/dst kind), ``memset``, ``osrt``, ``cpu_samples`` (CPU IP samples with
call stacks), ``sched`` (thread scheduling), ``processes``, ``gpus``.
"""

from __future__ import annotations

import os
import sqlite3

import pandas as pd

from ...errors import TraceFormatError
from ...trace.model import LoadReport, Trace
from .db import _Db, decode_global_id
from .gpu import MEM_KIND_NAMES, MEMCPY_KIND_NAMES, MEMSET_NAME  # noqa: F401  (constants kept importable here)
from .host import OSRT_CALL_CLASS  # noqa: F401
from .nvtx import (  # noqa: F401
    NVTX_DOMAIN_CREATE,
    NVTX_MARK,
    NVTX_PUSHPOP,
    NVTX_STARTEND,
    NVTXT_PUSHPOP,
    NVTXT_STARTEND,
)
from .tables import _load

__all__ = ["load_nsys", "nsys_tables", "decode_global_id", "MEMCPY_KIND_NAMES", "MEM_KIND_NAMES"]


def nsys_tables(trace: Trace) -> dict[str, pd.DataFrame]:
    """The nsys-specific side tables of a trace loaded by :func:`load_nsys` (``trace.tables``)."""
    return getattr(trace, "tables", None) or {}


def load_nsys(path: str | os.PathLike[str], *, strict: bool = False) -> Trace:
    """Load an Nsight Systems ``.sqlite`` export into a ``Trace`` (reads SQLite only; never runs nsys).

    Parameters
    ----------
    path : str or PathLike
        ``.sqlite`` export (``nsys export --type sqlite``). ``.nsys-rep`` reports go through
        ``nbprof.load`` / :func:`nbprof.api.load_nsys_report`, which export them first.
    strict : bool, default False
        Raise ``TraceFormatError`` where tolerant mode would repair or drop (bad values, invalid
        UTF-8, missing columns, negative durations) and report it.

    Returns
    -------
    Trace
        ``meta.source_format == "nsys"``; ``meta.origin_ns`` = session start (Unix epoch ns);
        ``meta.device_properties`` from ``TARGET_INFO_GPU``; nsys-only tables in ``trace.tables``
        (module docstring).

    Raises
    ------
    nbprof.errors.TraceFileNotFoundError
        When ``path`` does not exist (also a ``FileNotFoundError``).
    TraceFormatError
        When the file is not a regular file, not an SQLite database, is corrupt, or holds no Nsight
        Systems tables (names the file and table); in strict mode, at the first value that needs
        repair (names file, table and row).
    """
    from .. import check_file

    spath = os.fspath(path)
    check_file(spath, "Nsight Systems file")
    report = LoadReport(path=spath)
    db = _Db(spath, report, strict)
    try:
        return _load(db, spath, report)
    except sqlite3.DatabaseError as exc:  # a corrupt page ("database disk image is malformed"), ...
        raise TraceFormatError(spath, None, f"cannot read ({exc})", table=db._table) from exc
    except UnicodeDecodeError as exc:  # SQLite's own text (an error message, a name) is not UTF-8
        raise TraceFormatError(spath, None, f"cannot read (text that is not UTF-8: {exc})", table=db._table) from exc
    finally:
        db.close()
