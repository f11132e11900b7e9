"""``nbprof.open_job(PATH)``: a distributed job from its Parquet dataset, without every trace in memory.

The dataset (``docs/dataset.md``) is written by ``nbprof.load_ranks(..., dataset=PATH)``. Opening reads
only ``manifest.json``; each reduction table is read (all ranks, a ``rank`` column) when first asked for,
the cross-rank analyses run on those reductions, and ``job.trace(rank)`` reads one rank's full ``Trace``
only when a view zooms into it. ``job.sql(...)`` runs DuckDB over the same Parquet files.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from .sources import dataset as ds
from .trace.model import LoadReport, Trace

__all__ = ["open_job", "build_job", "default_dataset_dir", "Job"]


class Job:
    """One distributed job's dataset (see :func:`open_job`).

    Attributes
    ----------
    path : str
        The dataset folder.
    manifest : dict
        ``manifest.json`` as read (version, nbprof version, reductions, tables with columns and units,
        sources with size, sha256, status, rank, rows).
    """

    def __init__(self, path: str, manifest: dict[str, Any]) -> None:
        self.path = path
        self.manifest = manifest
        self._tables: dict[str, pd.DataFrame] = {}
        self._con: Any = None
        self._red: Any = None

    # -- what is there
    @property
    def ranks(self) -> list[int]:
        """Ranks whose source loaded (status ``ok``), ascending."""
        return ds.ok_ranks(self.manifest)

    @property
    def tables(self) -> dict[str, str]:
        """Table name -> kind (``trace``: a Trace table; ``reduction``: a per-rank reduction)."""
        return {t: v["kind"] for t, v in sorted(self.manifest.get("tables", {}).items())}

    @property
    def failed(self) -> dict[str, str]:
        """Sources that could not be loaded: shown name -> error (they have no partition)."""
        return {s["source"]: s["error"] for s in self.manifest.get("sources", []) if s.get("status") != "ok"}

    @property
    def report(self) -> LoadReport:
        """Each failed source as a ``<file>:load_failed`` issue (action ``dropped``), as ``load_ranks`` reports it."""
        rep = LoadReport(path=self.path)
        for n, e in self.failed.items():
            rep.add(f"{os.path.basename(n)}:load_failed", "dropped", 1, f"{n}: not loaded: {e}")
        return rep

    def columns(self, table: str) -> pd.DataFrame:
        """The columns of ``table``: ``column, type, unit, description`` (``rank`` first: the partition)."""
        spec = self.manifest["tables"][table]["columns"]
        rows = [("rank", "int64", "", "the rank (hive partition rank=<r>)")]
        rows += [(c, v["type"], v["unit"], v["description"]) for c, v in spec.items()]
        return pd.DataFrame(rows, columns=["column", "type", "unit", "description"])

    # -- data
    def table(self, name: str) -> pd.DataFrame:
        """Table ``name`` over every ``ok`` rank, with a leading int64 ``rank`` column (read once, then kept;
        the trace tables are not kept: ``events`` of every rank is as large as the traces -- query them with
        :meth:`sql`).

        Raises
        ------
        KeyError
            No such table (the message lists them).
        """
        if name in self._tables:
            return self._tables[name]
        df = ds.read_table(self.path, self.manifest, name)
        if self.tables.get(name) == "reduction":
            self._tables[name] = df
        return df

    __getitem__ = table

    def reductions(self) -> Mapping[str, pd.DataFrame]:
        """The job's reduction tables (``nbprof.analysis.distributed.reductions``: ``rank_info``, ``steps``,
        ``collectives``, ...), each over all ranks with a leading ``rank`` column: what the cross-rank analyses
        of ``nbprof.analysis.distributed`` take in place of the traces. A mapping that reads a table when it
        is first looked up (an analysis reads only the tables it needs) and put in the analyses' form once
        (``reductions.LazyJobReductions``): the same object for every analysis of this job.

        Raises
        ------
        NbprofError
            The dataset's reductions are of another version or schema than this nbprof computes (the
            migration rule, docs/dataset.md: rebuild with ``load_ranks(..., dataset=)``).
        """
        from .scale import dataset_reducer

        now = dataset_reducer()[1]
        if self.manifest.get("reductions") != now:
            from .errors import NbprofError

            msg = (f"the dataset at {self.path!r} holds reductions {self.manifest.get('reductions')}, this nbprof "
                   f"computes {now}: run nbprof.load_ranks(<the traces>, dataset={self.path!r}) again (each rank is "
                   "reduced anew); its tables stay readable with job.table / job.sql")
            raise NbprofError(msg)
        if self._red is None:
            from .analysis.distributed.reductions import LazyJobReductions

            self._red = LazyJobReductions([t for t, k in self.tables.items() if k == "reduction"], self.table)
        return self._red

    # -- cross-rank analyses (nbprof.analysis.distributed) over the reductions: no trace is loaded
    def wait_transfer(self, **kw: Any) -> pd.DataFrame:
        """``distributed.wait_transfer`` of the job (each collective instance: waiting for the last rank vs transfer)."""
        from .analysis import distributed as D

        return D.wait_transfer(self.reductions(), **kw)

    def stragglers(self, **kw: Any) -> pd.DataFrame:
        """``distributed.stragglers`` of the job (the rank the others wait for, step after step)."""
        from .analysis import distributed as D

        return D.stragglers(self.reductions(), **kw)

    def skew(self, **kw: Any) -> pd.DataFrame:
        """``distributed.skew`` of the job (per rank: matched collectives, last arrivals, lag)."""
        from .analysis import distributed as D

        return D.skew(self.reductions(), **kw)

    def collective_skew(self) -> pd.DataFrame:
        """``distributed.collective_skew`` of the job (per collective instance: each rank's lag)."""
        from .analysis import distributed as D

        return D.collective_skew(self.reductions())

    def overlap(self, **kw: Any) -> pd.DataFrame:
        """``distributed.overlap`` of the job (per rank: computation / communication overlap, HTA's definition)."""
        from .analysis import distributed as D

        return D.overlap(self.reductions(), **kw)

    def step_breakdown(self) -> pd.DataFrame:
        """``distributed.step_breakdown`` of the job (per rank and step: computation, overlapped and exposed
        communication, idle)."""
        from .analysis import distributed as D

        return D.step_breakdown(self.reductions())

    def collective_summary(self) -> pd.DataFrame:
        """``distributed.collective_summary`` of the job (per rank and collective: count, bytes, bandwidth)."""
        from .analysis import distributed as D

        return D.collective_summary(self.reductions())

    def busbw_vs_link(self, link: str | None = None, **kw: Any) -> pd.DataFrame:
        """``distributed.busbw_vs_link`` of the job (bus bandwidth as a fraction of the link's peak)."""
        from .analysis import distributed as D

        return D.busbw_vs_link(self.reductions(), link, **kw)

    def memory_per_rank(self) -> pd.DataFrame:
        """``distributed.memory_per_rank`` of the job (peak allocated / reserved bytes per rank and device)."""
        from .analysis import distributed as D

        return D.memory_per_rank(self.reductions())

    def ranks_clock(self, **kw: Any) -> tuple[dict[int, int], pd.DataFrame]:
        """``distributed.ranks_clock`` of the job (per-rank shifts onto one clock; the all-ranks timeline's axis)."""
        from .analysis import distributed as D

        return D.ranks_clock(self.reductions(), **kw)

    def distributed_report(self) -> Any:
        """``distributed.distributed_report`` of the job (every analysis above in one object)."""
        from .analysis import distributed as D

        return D.distributed_report(self.reductions())

    #: what ``nbprof stats --ranks DIR`` prints without ``-r``
    DEFAULT_REPORTS: tuple[str, ...] = ("step_breakdown", "overlap", "skew", "stragglers")
    #: the cross-rank analyses ``nbprof stats --ranks`` offers (methods of this class)
    ANALYSES: tuple[str, ...] = ("step_breakdown", "overlap", "skew", "stragglers", "wait_transfer",
                                 "collective_skew", "collective_summary", "busbw_vs_link", "memory_per_rank")

    def reports(self) -> dict[str, Callable[[], pd.DataFrame]]:
        """Report name -> function giving its frame (``nbprof stats --ranks``): the cross-rank analyses
        (:data:`ANALYSES`) and every reduction table (all ranks, ``rank`` column)."""
        out: dict[str, Callable[[], pd.DataFrame]] = {n: getattr(self, n) for n in self.ANALYSES}
        for t, k in self.tables.items():
            if k == "reduction":
                out.setdefault(t, functools.partial(self.table, t))
        return out

    def trace(self, rank: int) -> Trace:
        """Rank ``rank``'s full ``Trace``, read from the dataset (the source file is not needed).

        Raises
        ------
        KeyError
            ``rank`` is not an ``ok`` rank.
        """
        tr: Trace = ds.read_rank_trace(self.path, self.manifest, rank)
        return tr

    def zoom_ranks(self, n: int = 2) -> list[int]:
        """The ranks whose full traces a view of the job shows, ascending: the straggler (:meth:`stragglers`'
        ``straggler`` rows, the one definition: ``nbprof.analysis.distributed.stragglers``), if any, then the lowest
        ranks, ``n`` at most -- the ranks ``nbprof report --ranks DIR`` and ``nbprof.viz.to_html(job)`` zoom into. A
        job whose stragglers cannot be computed (``ValueError``/``KeyError``: e.g. no collectives) gets its lowest
        ranks."""
        try:
            st = self.stragglers()
            first = [int(r) for r in st.loc[st["straggler"], "rank"]] if len(st) else []
        except (ValueError, KeyError):
            first = []
        return sorted(set((first + [int(r) for r in self.ranks])[:n]))

    def traces(self, ranks: list[int] | None = None) -> list[Trace]:
        """Full traces of ``ranks`` (default all: as much memory as the traces; prefer the reductions)."""
        return [self.trace(r) for r in (self.ranks if ranks is None else ranks)]

    def sql(self, query: str) -> pd.DataFrame:
        """Run a DuckDB ``query`` over the dataset: every table is a view over its hive-partitioned Parquet
        files (``read_parquet('PATH/<table>/*/*.parquet', hive_partitioning = true)``), all ranks in one
        table with an int64 ``rank`` column. Times are int64 ns, sizes bytes. Returns a pandas DataFrame.

        Raises
        ------
        MissingDependencyError
            duckdb is not installed (extra ``sql``).
        duckdb.Error
            The query is not valid for these tables.
        """
        if self._con is None:
            try:
                import duckdb
            except ModuleNotFoundError as exc:
                from ._deps import missing

                raise missing("duckdb", "sql", "Job.sql", exc) from exc
            con = duckdb.connect()
            for t in self.tables:
                glob = os.path.join(self.path, t, "*", "*.parquet").replace("'", "''")
                con.execute(f'CREATE VIEW "{t}" AS SELECT * FROM read_parquet(\'{glob}\', hive_partitioning = true, '
                            "hive_types = {'rank': BIGINT}, union_by_name = true)")
            self._con = con
        df: pd.DataFrame = self._con.execute(query).df()
        return df

    def __repr__(self) -> str:
        bad = f", {len(self.failed)} sources failed (see .failed)" if self.failed else ""
        return (f"<nbprof.Job {len(self.ranks)} ranks {self.ranks[:8]}{'...' if len(self.ranks) > 8 else ''}, "
                f"tables {list(self.tables)}{bad} at {self.path!r}>")


def default_dataset_dir(spec: str | os.PathLike[str]) -> str:
    """Where :func:`build_job` keeps the dataset of a job folder when no path is given: ``jobs/<digest of the
    folder's absolute path>`` beside the trace cache (``nbprof.trace_cache.default_cache_dir``)."""
    import hashlib

    from .trace_cache import default_cache_dir

    key = hashlib.blake2b(os.path.abspath(os.fspath(spec)).encode(), digest_size=10).hexdigest()
    return os.path.join(os.path.dirname(os.path.abspath(default_cache_dir())), "jobs", key)


def build_job(spec: str | os.PathLike[str], dataset: str | os.PathLike[str] | None = None, **load_kw: Any) -> Job:
    """Write (or bring up to date: unchanged sources are skipped) the dataset of the ranks in ``spec`` with
    ``nbprof.load_ranks(spec, dataset=...)`` and open it.

    Parameters
    ----------
    spec : path, glob, folder or archive
        The per-rank traces (what ``load_ranks`` takes).
    dataset : path, optional
        The dataset folder; default :func:`default_dataset_dir` of ``spec``.
    **load_kw
        Passed to ``load_ranks`` (``client=``, ``workers=``, ``progress=``, ``on_error=``...).

    Raises
    ------
    What ``load_ranks`` and :func:`open_job` raise.
    """
    from .scale import load_ranks

    path = os.fspath(dataset) if dataset is not None else default_dataset_dir(spec)
    load_ranks(spec, dataset=path, **load_kw)
    return open_job(path)


def open_job(path: str | os.PathLike[str]) -> Job:
    """Open the job dataset at ``path`` (written by ``nbprof.load_ranks(..., dataset=path)``); reads only
    its manifest.

    Raises
    ------
    FileNotFoundError
        No ``manifest.json`` there.
    TraceFormatError
        Not an nbprof job dataset, or of a newer version than this nbprof reads (``docs/dataset.md``:
        the migration rule).
    """
    p = os.path.abspath(os.fspath(path))
    man = ds.read_manifest(p)
    assert man is not None
    return Job(p, man)
