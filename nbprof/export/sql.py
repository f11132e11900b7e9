"""SQL over a ``Trace`` with DuckDB on Arrow (``tr.sql("SELECT ...")``; extra ``sql``).

Tables a query can name (each is registered only when the query mentions it, as a zero-copy Arrow view):

===============  ==========================================================================================
``events``       ``Trace.events`` (``nbprof.trace.schema.EVENT_COLUMNS``: ``ts_ns``/``dur_ns`` int64 ns, ...)
``kernels``      the kernel rows of ``events`` (``nbprof.trace.predicates.is_kernel``), same columns
``device_ops``   kernels, memcpy and memset rows of ``events`` (``predicates.is_device_op``)
``runtime``      CUDA/HIP runtime and driver API rows of ``events`` (``predicates.is_runtime``)
``flows``        ``Trace.flows`` (``src_ts_ns``/``dst_ts_ns`` ns)
``memory``       ``Trace.memory`` (``bytes``, ``total_allocated``, ``total_reserved`` in bytes)
``counters``     ``Trace.counters``
``threads``      ``Trace.threads`` (pid, tid, name, kind)
``side_<name>``  each side table of ``Trace.tables`` (e.g. nsys ``side_nvtx``, ``side_kernels``, ``side_osrt``)
any name         a frame passed in ``tables=`` (analysis results, e.g. ``tables={"ops": op_summary(tr)}``);
                 it hides a built-in of the same name
===============  ==========================================================================================

Times stay int64 ns and sizes bytes; categorical columns arrive as DuckDB strings. The result is a pandas
DataFrame (``duckdb``'s ``.df()``).

Example queries
---------------
Kernel time by name (``nsys stats -r cuda_gpu_kern_sum``'s numbers; DuckDB's ``median`` is the mean of
the two middle values for an even count and ``stddev_samp`` the n-1 standard deviation, as in nsys)::

    SELECT name, sum(dur_ns) AS total_ns, count(*) AS instances, avg(dur_ns) AS avg_ns,
           median(dur_ns) AS med_ns, min(dur_ns) AS min_ns, max(dur_ns) AS max_ns,
           coalesce(stddev_samp(dur_ns), 0) AS std_ns
    FROM kernels GROUP BY name ORDER BY total_ns DESC

Launch latency of each kernel (runtime call start -> kernel start, by correlation id)::

    SELECT k.name, k.ts_ns - r.ts_ns AS launch_ns
    FROM kernels k JOIN runtime r USING (correlation) WHERE k.correlation <> -1

Peak allocated memory per device::

    SELECT device, max(total_allocated) AS peak_bytes FROM memory GROUP BY device

Joining an analysis frame::

    tr.sql("SELECT * FROM ops ORDER BY self_device_ns DESC LIMIT 5", tables={"ops": ops})
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pandas as pd

from .._deps import missing
from ..trace import predicates as pred
from ..trace.model import Trace

__all__ = ["sql", "builtin_tables"]


def _duckdb() -> Any:
    try:
        import duckdb
    except ModuleNotFoundError as exc:
        raise missing("duckdb", "sql", "Trace.sql", exc) from exc
    return duckdb


def builtin_tables(trace: Trace) -> dict[str, Callable[[], pd.DataFrame]]:
    """Name -> function giving the frame, for every built-in table of ``trace`` (see the module docstring)."""
    ev = trace.events
    out: dict[str, Callable[[], pd.DataFrame]] = {
        "events": lambda: ev,
        "kernels": lambda: ev[pred.is_kernel(ev)],
        "device_ops": lambda: ev[pred.is_device_op(ev)],
        "runtime": lambda: ev[pred.is_runtime(ev)],
        "flows": lambda: trace.flows,
        "memory": lambda: trace.memory,
        "counters": lambda: trace.counters,
        "threads": lambda: trace.threads,
    }
    for name, df in (trace.tables or {}).items():
        out[f"side_{name}"] = _const(df)
    return out


def _const(df: pd.DataFrame) -> Callable[[], pd.DataFrame]:
    def get() -> pd.DataFrame:
        return df

    return get


def _arrow(df: pd.DataFrame) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    return pa.Table.from_pandas(df, preserve_index=False)


def sql(trace: Trace, query: str, *, tables: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """Run ``query`` (DuckDB SQL) over ``trace``'s tables and the frames in ``tables``.

    Parameters
    ----------
    trace : Trace
    query : str
        One SQL statement; table names as in the module docstring.
    tables : dict of str to DataFrame, optional
        More tables by name (analysis frames); a name here hides a built-in one.

    Returns
    -------
    pandas.DataFrame
        The query's result.

    Raises
    ------
    nbprof.errors.MissingDependencyError
        Without ``duckdb`` (``pip install 'nbprof[sql]'``).
    ValueError
        A name in ``tables`` that is not an identifier.
    duckdb.Error
        The query's own errors (syntax, unknown column), as DuckDB raises them.
    """
    duckdb = _duckdb()
    avail: dict[str, Callable[[], pd.DataFrame]] = builtin_tables(trace)
    for name, df in (tables or {}).items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"table name {name!r} is not an SQL identifier ([A-Za-z_][A-Za-z0-9_]*)")
        avail[name] = _const(df)
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query)}
    con = duckdb.connect(":memory:")
    try:
        for name, get in avail.items():
            if name.lower() in words:
                con.register(name, _arrow(get()))
        res: pd.DataFrame = con.execute(query).df()
    finally:
        con.close()
    return res
