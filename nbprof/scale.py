"""Multi-rank loading: a local process pool by default, Dask distributed when given a client.

Each rank's trace is parsed *where it is read* (a pool process or a Dask worker) and reduced there to
compact per-rank tables (``rank_summary`` by default: step times, kernel and collective totals); only
those summaries travel back. Full per-rank ``Trace`` objects are reloaded on demand from an on-disk
columnar cache (Parquet via pyarrow) keyed by file content, so reopening a 64-rank job is near-instant
and memory stays bounded by one rank at a time.

No scheduler code lives here: ``concurrent.futures.ProcessPoolExecutor`` or ``dask.distributed`` do
the scheduling.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .errors import NbprofError
from .rank_inputs import _archive_members, _expand, _extract_members, _is_archive
from .trace.model import LoadReport, Trace
from .trace_cache import (
    CACHE_FORMAT_VERSION,
    TraceCache,
    _get_summary,
    _put_summary,
    _RankResult,
    default_cache_dir,
    reducer_key,
)

__all__ = ["load_ranks", "MultiRankTrace", "rank_summary", "dataset_reducer", "reducer_key", "TraceCache",
           "default_cache_dir", "CACHE_FORMAT_VERSION"]


# --------------------------------------------------------------------------- per-rank work


_COMM_KERNEL = re.compile(r"nccl|rccl|AllReduce|AllGather|ReduceScatter|SendRecv|Broadcast", re.I)
_COMM_HOST = re.compile(r"^(?:gloo|nccl|c10d)[:_]|record_param_comms|allreduce|all_reduce|all_gather|reduce_scatter|broadcast", re.I)


def rank_summary(trace: Trace) -> dict[str, pd.DataFrame]:
    """The default per-rank reduction: small tables that are enough for cross-rank comparison.

    Returns
    -------
    dict of DataFrame
        ``overview`` (one row: ``rank, events, duration_ns, steps, kernel_ns, comm_ns, origin_ns``),
        ``steps`` (``step, start_ns, dur_ns``, int64 ns; ``start_ns`` absolute when the trace knows its origin):
        the step windows of :func:`nbprof.analysis.steps.step_windows` -- THE step definition, the one the
        report and the job dataset's ``steps`` table use (ProfilerStep#N, NVTX or detected iterations, each
        extended to its device work); ``dur_ns`` = ``end_ns - start_ns`` (the dataset's ``step_ns``),
        ``kernels`` (``name, instances, total_ns``), ``collectives`` (``name, where, count, total_ns``:
        NCCL/RCCL kernels on the device, gloo/c10d ranges on the host).
    """
    from .analysis.steps import step_windows

    ev = trace.events
    origin = trace.meta.origin_ns or 0
    w = step_windows(trace)
    steps = pd.DataFrame(
        {
            "step": w["step"].to_numpy("int64"),
            "start_ns": (w["start_ns"] + origin).to_numpy("int64"),
            "dur_ns": (w["end_ns"] - w["start_ns"]).to_numpy("int64"),
        }
    )
    k = ev[ev["cat"] == "kernel"]
    kernels = (
        k.groupby("name", observed=True)["dur_ns"].agg(instances="size", total_ns="sum").reset_index()
        if len(k)
        else pd.DataFrame({"name": [], "instances": [], "total_ns": []})
    )
    kernels["name"] = kernels["name"].astype(str)
    names = ev["name"].astype(str)
    dev_comm = ev[(ev["cat"] == "kernel") & names.str.contains(_COMM_KERNEL)]
    host_comm = ev[(ev["device"] < 0) & ev["cat"].isin(["user_annotation", "cpu_op"]) & names.str.contains(_COMM_HOST)]
    parts = []
    for where, df in (("device", dev_comm), ("host", host_comm)):
        if len(df):
            g = df.groupby(df["name"].astype(str))["dur_ns"].agg(count="size", total_ns="sum").reset_index()
            g["where"] = where
            parts.append(g)
    collectives = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["name", "count", "total_ns", "where"])
    overview = pd.DataFrame(
        [
            {
                "rank": trace.meta.rank,
                "events": len(ev),
                "duration_ns": trace.duration_ns,
                "steps": len(steps),
                "kernel_ns": int(k["dur_ns"].sum()),
                "comm_ns": int(dev_comm["dur_ns"].sum()) if len(dev_comm) else int(host_comm["dur_ns"].sum()),
                "origin_ns": trace.meta.origin_ns if trace.meta.origin_ns is not None else -1,
            }
        ]
    )
    return {"overview": overview, "steps": steps, "kernels": kernels, "collectives": collectives}


#: the summaries cached before the one step definition (ProfilerStep rows only) are recomputed
rank_summary.cache_key = "nbprof.scale.rank_summary/2: steps from analysis.steps.step_windows"  # type: ignore[attr-defined]



def dataset_reducer() -> tuple[Callable[[Trace], dict[str, pd.DataFrame]], dict[str, Any], dict[str, Any] | None]:
    """The reducer whose tables a job dataset stores: ``(function, {"name", "version", "schema"}, declared
    columns per table)`` -- ``nbprof.analysis.distributed.reductions.reduce_rank``, its ``REDUCTION_VERSION``,
    a digest of its ``REDUCTION_SCHEMA`` and that schema."""
    import hashlib
    import json

    from .analysis.distributed import reductions as red

    fn = red.reduce_rank
    # the schema's digest too: a column added without a new REDUCTION_VERSION still means recomputing
    digest = hashlib.blake2b(json.dumps(red.REDUCTION_SCHEMA, sort_keys=True).encode(), digest_size=8).hexdigest()
    info = {"name": f"{fn.__module__}.{fn.__qualname__}", "version": red.REDUCTION_VERSION, "schema": digest}
    return fn, info, red.REDUCTION_SCHEMA


def _work(path: str, cache_dir: str | None, use_cache: bool, reducer: Callable[[Trace], dict[str, pd.DataFrame]],
          strict: bool, dataset: dict[str, Any] | None = None) -> _RankResult:
    """Runs in a pool process or Dask worker: load (or read cache), reduce, return the small result.

    With ``dataset`` (``load_ranks(dataset=)``): the file is hashed first (sha256); a hash the dataset
    already holds is not parsed (its reductions are read back), otherwise the rank's tables and
    reductions are staged into the dataset here (``nbprof.export.dataset.stage_rank``).

    A trace that cannot be loaded (an ``NbprofError`` or ``OSError`` from the loader) gives a result
    with ``error`` set and no tables; the reducer's own exceptions propagate. A cache that cannot be
    read or written (read-only or full folder, an entry removed meanwhile) means loading without it,
    noted in the result's issues (kind ``cache_unavailable``).
    """
    from .sources import load

    t0 = time.perf_counter()
    ds_info: dict[str, Any] | None = None
    if dataset is not None:
        from .export import dataset as dsw

        try:
            sha, size = dsw.file_sha256(path)
        except OSError as exc:
            return _failed(path, exc, t0)
        ds_info = {"sha256": sha, "size": size}
        prev = dataset["known"].get(sha)
        if prev is not None:  # the same bytes under another name or mtime: already in the dataset
            return dsw.unchanged_result(dataset["path"], path, sha, size, prev["rank"], dataset["reduction_tables"],
                                        t0, prev["rows"])
    cache = TraceCache(cache_dir) if use_cache else None
    cache_notes: list[str] = []
    try:
        digest = cache.digest(path) if cache else None
    except OSError as exc:
        return _failed(path, exc, t0)
    tr = None
    hit = False
    if cache is not None and digest is not None and cache.has(digest):
        try:
            tr, hit = cache.get(digest), True
        except (OSError, ValueError, KeyError) as exc:
            cache_notes.append(f"cached entry unreadable ({type(exc).__name__}: {exc})")
    if tr is None:
        try:
            tr = load(path, strict=strict)
        except (NbprofError, OSError) as exc:
            return _failed(path, exc, t0, ds_info)
        if cache is not None and digest is not None:
            try:
                cache.put(digest, tr)
            except OSError as exc:
                cache_notes.append(f"cache not written ({type(exc).__name__}: {exc})")
    tables = reducer(tr)
    if dataset is not None and ds_info is not None:
        ds_info["staged"] = dsw.stage_rank(dataset["path"], ds_info["sha256"], tr, tables, dataset["columns"])
    issues = [i.__dict__ for i in tr.report.issues]
    res = _RankResult(
        path=path,
        rank=tr.meta.rank,
        rank_source=tr.meta.rank_source,
        world_size=tr.meta.world_size,
        distributed_info=tr.meta.distributed_info,
        digest=digest,
        tables=tables,
        issues=issues,
        from_cache=hit,
        seconds=time.perf_counter() - t0,
        dataset=ds_info,
    )
    if cache is not None and digest is not None and not cache_notes:
        try:
            _put_summary(cache, digest, reducer, res)
        except OSError as exc:
            cache_notes.append(f"summary not cached ({type(exc).__name__}: {exc})")
    if cache_notes:
        issues.append({"kind": "cache_unavailable", "action": "assumed", "count": 1, "offset": None,
                       "message": f"loaded without the cache at {cache.dir if cache else ''}: {'; '.join(cache_notes)}"})
    return res


def _failed(path: str, exc: BaseException, t0: float, ds_info: dict[str, Any] | None = None) -> _RankResult:
    """The result of a rank whose trace could not be loaded: its error, no tables."""
    return _RankResult(path=path, rank=-1, rank_source="failed", world_size=-1, distributed_info={}, digest=None,
                       tables={}, issues=[], from_cache=False, seconds=time.perf_counter() - t0,
                       error=f"{type(exc).__name__}: {exc}", dataset=ds_info)


# --------------------------------------------------------------------------- public object


@dataclass
class MultiRankTrace:
    """Per-rank summaries of one distributed job, with full ranks loadable on demand.

    Attributes
    ----------
    paths : dict[int, str]
        Rank -> trace file.
    summaries : dict[int, dict[str, DataFrame]]
        Rank -> the reducer's tables.
    report : LoadReport
        Combined report: per-file repairs (prefixed with the file name) and rank assumptions.
    seconds : float
        Wall time of the load.
    """

    paths: dict[int, str]
    summaries: dict[int, dict[str, pd.DataFrame]]
    report: LoadReport
    digests: dict[int, str | None] = field(default_factory=dict)
    cache_dir: str | None = None
    seconds: float = 0.0
    from_cache: dict[int, bool] = field(default_factory=dict)
    #: rank -> (archive, member, position among the archive's trace members) when loaded from a tar/zip
    #: archive (``paths`` then reads ``archive::member``)
    members: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    #: the traces that could not be loaded (``on_error="skip"``): file (``archive::member``) -> error
    failed: dict[str, str] = field(default_factory=dict)
    #: the job dataset written (``load_ranks(dataset=)``; open it with ``nbprof.open_job``), else None
    dataset: str | None = None

    @property
    def ranks(self) -> list[int]:
        """Ranks, ascending."""
        return sorted(self.paths)

    def table(self, name: str) -> pd.DataFrame:
        """One reducer table concatenated over ranks, with a leading ``rank`` column."""
        parts = []
        for r in self.ranks:
            df = self.summaries[r].get(name)
            if df is None:
                continue
            df = df.copy()
            if "rank" in df.columns:
                df = df.drop(columns="rank")
            df.insert(0, "rank", r)
            parts.append(df)
        if not parts:
            msg = f"no table {name!r}; tables: {sorted({k for s in self.summaries.values() for k in s})}"
            raise KeyError(msg)
        return pd.concat(parts, ignore_index=True)

    def __getitem__(self, rank: int) -> Trace:
        """The full ``Trace`` of ``rank`` (from the dataset or the cache when there, else parsed again)."""
        if rank not in self.paths:
            msg = f"no rank {rank}: ranks are {self.ranks}"
            raise KeyError(msg)
        if self.dataset:  # load_ranks(dataset=): the dataset holds the whole rank
            from .sources import dataset as ds

            man = ds.read_manifest(self.dataset)
            if man is not None and rank in ds.ok_ranks(man):
                tr: Trace = ds.read_rank_trace(self.dataset, man, rank)
                return tr
        d = self.digests.get(rank)
        if d and self.cache_dir:
            c = TraceCache(self.cache_dir)
            if c.has(d):
                return c.get(d)
        from .sources import load

        if rank in self.members:
            import shutil
            import tempfile

            archive, _member, pos = self.members[rank]
            tmp = tempfile.mkdtemp(prefix="nbprof_ranks_")
            try:
                return load(_extract_members(archive, [pos], tmp)[0])
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return load(self.paths[rank])

    def traces(self) -> Iterator[Trace]:
        """Full traces one rank at a time (memory stays bounded by one rank)."""
        for r in self.ranks:
            yield self[r]

    def __len__(self) -> int:
        return len(self.paths)

    def __repr__(self) -> str:
        bad = f", {len(self.failed)} traces failed to load (see .failed)" if self.failed else ""
        return (f"<nbprof.MultiRankTrace {len(self)} ranks {self.ranks[:8]}{'...' if len(self) > 8 else ''}{bad}, "
                f"loaded in {self.seconds:.2f} s>")


def _default_workers(paths: list[str]) -> int:
    cores = os.cpu_count() or 1
    try:
        import psutil

        avail = psutil.virtual_memory().available
    except Exception:  # psutil is optional
        avail = 8 << 30
    sizes = [os.path.getsize(p) for p in paths]
    if sum(sizes) < (64 << 20):  # small jobs: starting processes costs more than parsing
        return 1
    biggest = max(sizes, default=1)
    # a parse holds ~6x the file (gzip expansion aside); leave half the memory free
    per_worker = max(biggest * 6, 256 << 20)
    return max(1, min(cores, len(paths), int(avail // 2 // per_worker)))


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc="loading ranks", unit="rank")
    except ImportError:
        return None


def load_ranks(
    spec: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    client: Any = None,
    workers: int | None = None,
    cache: bool | None = None,
    cache_dir: str | None = None,
    reducer: Callable[[Trace], dict[str, pd.DataFrame]] | None = None,
    progress: bool = True,
    strict: bool = False,
    allow_mixed: bool = False,
    on_error: str = "skip",
    dataset: str | os.PathLike[str] | None = None,
) -> MultiRankTrace:
    """Load the per-rank traces of one distributed job.

    Parameters
    ----------
    spec : path, glob, folder, archive or iterable of paths
        A folder is searched recursively for ``*.json[.gz]`` traces (e.g. a TensorBoard logdir run). A
        ``.tar.gz``/``.tgz``/``.tar[.bz2|.xz]``/``.zip`` archive: its ``*.json[.gz]`` members are streamed
        into a private temporary folder (never next to the archive) that is removed before returning;
        ``paths`` then read ``archive::member`` and ``mr[rank]`` re-reads the member (or the cache). With a
        Dask ``client``, workers must see this machine's temporary folder (pass extracted files otherwise).
    client : dask.distributed.Client or str, optional
        Run per-rank parsing on a Dask cluster (a Client, or a scheduler address). Default: a local
        process pool.
    workers : int, optional
        Local pool size; default from cores and free memory (``psutil``) vs. file sizes.
    cache : bool, default True (False with ``dataset``: the dataset holds every rank already)
        Keep parsed tables and the reducer's tables in a Parquet cache keyed by file content (see
        ``TraceCache``; the reducer's part also by ``reducer_key``): reopening reads only the summaries.
    cache_dir : str, optional
        Cache location; default ``default_cache_dir()`` — never the traces' folder unless you pass it.
    reducer : callable, default ``rank_summary`` (with ``dataset``: the dataset's reductions, see below)
        ``Trace -> dict[str, DataFrame]``, run where the rank is parsed; must be picklable (a module-level
        function). With ``dataset`` its tables are the dataset's reductions.
    dataset : path, optional
        Write (or update) the job's Parquet dataset there (``docs/dataset.md``; open it with
        ``nbprof.open_job``): per rank, hive-partitioned (``<table>/rank=<r>/part-0.parquet``), the trace
        tables and the reductions, written where the rank is parsed (pool process or Dask worker: with
        Dask the folder must be on storage the workers share), then ``manifest.json`` (version, nbprof
        version, every source with size, sha256 and status: a file that failed is listed ``failed`` with
        its error and has no partition). A source whose name, size and mtime, or whose sha256, match an
        ``ok`` source of the existing manifest (same version and reductions) is not parsed again; ranks
        no longer given are removed. One writer at a time per folder.
    progress : bool, default True
        tqdm progress bar (notebook widget or terminal).
    strict : bool, default False
        Passed to the loaders.
    allow_mixed : bool, default False
        Accept files whose ranks collide or whose ``world_size`` / process-group config differ (traces of
        several runs); otherwise that raises.
    on_error : {"skip", "raise"}, default "skip"
        A trace that cannot be loaded (corrupt, unreadable): ``"skip"`` loads every other rank and names
        each bad one (file, or ``archive::member``, and its error) in ``MultiRankTrace.failed``, in the
        report (kind ``<file>:load_failed``) and in a ``UserWarning``; ``"raise"`` raises ``NbprofError``
        naming them all once every rank was tried. A cache folder that cannot be written (read-only,
        full) means loading without the cache, noted per file (kind ``<file>:cache_unavailable``).

    Returns
    -------
    MultiRankTrace

    Raises
    ------
    FileNotFoundError
        When ``spec`` matches no file.
    NbprofError
        When ranks from several runs would be mixed (duplicate ranks, different world sizes) and
        ``allow_mixed`` is False.
    NbprofError
        When no trace could be loaded, or ``on_error="raise"`` and one could not (each one named).
    ValueError
        ``on_error`` is not "skip" or "raise".
    NbprofError
        ``dataset`` is a folder with other files and no manifest.
    TraceFormatError
        ``dataset`` holds a dataset of a newer version.
    NbprofError
        When the local process pool breaks; in a script without an ``if __name__ == "__main__":``
        guard the message says so and names the fix (the guard, or ``workers=1``).
    KeyboardInterrupt
        Re-raised after cancelling pending work and stopping the pool's processes.
    """
    if on_error not in ("skip", "raise"):
        msg = f"on_error must be 'skip' or 'raise', not {on_error!r}"
        raise ValueError(msg)
    ds: dict[str, Any] | None = None
    if dataset is not None:
        fn, info, columns = dataset_reducer()
        if reducer is not None and reducer is not fn:
            msg = "load_ranks(dataset=...): the dataset's reductions are the summaries; leave reducer unset"
            raise ValueError(msg)
        reducer = fn
        ds = {"path": os.path.abspath(os.fspath(dataset)), "reductions": info, "columns": columns}
    kw = {"client": client, "workers": workers, "cache": (dataset is None) if cache is None else cache,
          "cache_dir": cache_dir, "reducer": reducer or rank_summary, "progress": progress, "strict": strict,
          "allow_mixed": allow_mixed, "on_error": on_error, "dataset": ds}
    if isinstance(spec, (str, os.PathLike)) and _is_archive(spec):
        return _load_archive(os.fspath(spec), **kw)
    return _load_paths(_expand(spec), spec, {}, **kw)


def _load_paths(paths: list[str], spec: Any, names: dict[str, str], *, client: Any, workers: int | None, cache: bool,
                cache_dir: str | None, reducer: Callable[[Trace], dict[str, pd.DataFrame]], progress: bool,
                strict: bool, allow_mixed: bool, on_error: str, dataset: dict[str, Any] | None = None) -> MultiRankTrace:
    """:func:`load_ranks` over trace files; ``names``: file -> the name to show for it (archive members)."""
    t0 = time.perf_counter()
    if not paths:  # an nbprof error that is also a FileNotFoundError (a folder named like an archive, an empty glob)
        import errno

        from .errors import TraceFileNotFoundError

        raise TraceFileNotFoundError(errno.ENOENT, "no trace files match", str(spec))
    for p in paths:
        if not os.path.exists(p):  # a dangling link too
            import errno

            from .errors import TraceFileNotFoundError

            raise TraceFileNotFoundError(errno.ENOENT, "no such trace file", p)
    cdir = os.path.abspath(cache_dir or default_cache_dir()) if cache else None
    results: list[_RankResult] = []
    # ranks whose reduced tables are cached need no parsing (and no worker): a reopen reads summaries only
    todo = paths
    plan = None
    if dataset is not None:  # sources the dataset holds unchanged: read back, not parsed
        from .export import dataset as dsw

        plan = dsw.plan(dataset["path"], paths, names, dataset["reductions"])
        dataset = {**dataset, "known": plan["known"], "reduction_tables": plan["reduction_tables"]}
        results += dsw.unchanged_results(dataset["path"], plan)
        todo = [p for p in paths if p not in plan["unchanged"]]
    elif cache:
        tc = TraceCache(cdir)
        cached: list[_RankResult | None] = [_get_summary(tc, p, reducer) for p in paths]
        results = [r for r in cached if r is not None]
        todo = [p for p, r in zip(paths, cached) if r is None]
    bar = _progress(len(todo), progress) if todo else None
    try:
        if not todo:
            pass
        elif client is not None:
            results += _run_dask(client, todo, cdir, cache, reducer, strict, bar, dataset)
        else:
            n = workers or _default_workers(todo)
            if n <= 1 or len(todo) == 1:
                for p in todo:
                    results.append(_work(p, cdir, cache, reducer, strict, dataset))
                    if bar:
                        bar.update(1)
            else:
                results += _run_pool(n, todo, cdir, cache, reducer, strict, bar, dataset)
        mr = _assemble(results, paths, cdir, allow_mixed, time.perf_counter() - t0, on_error, names)
        if dataset is not None and plan is not None:
            rank_of = {p: rk for rk, p in mr.paths.items()}
            dsw.finish(dataset["path"], plan, results, rank_of, names, dataset["reductions"])
            mr.dataset = dataset["path"]
    finally:
        if bar:
            bar.close()
        if dataset is not None:  # staged ranks of a run that did not commit (an error, Ctrl-C)
            import shutil

            shutil.rmtree(os.path.join(dataset["path"], dsw.STAGING), ignore_errors=True)
    return mr


def _load_archive(archive: str, **kw: Any) -> MultiRankTrace:
    """:func:`load_ranks` over the trace members of a tar/zip archive, via a private temporary folder
    (``tempfile.mkdtemp``, never next to the archive) that is removed before returning. Two members of
    one name are two traces (noted, kind ``duplicate_member``)."""
    import shutil
    import tempfile
    from collections import Counter

    members = _archive_members(archive)
    if not members:
        import errno

        from .errors import TraceFileNotFoundError

        raise TraceFileNotFoundError(errno.ENOENT, "no trace files (*.json, *.json.gz) in the archive", archive)
    tmp = tempfile.mkdtemp(prefix="nbprof_ranks_")
    seen: Counter[str] = Counter()
    shown = []
    for m in members:
        seen[m] += 1
        shown.append(m if seen[m] == 1 else f"{m} (entry {seen[m]} of that name)")
    errors: dict[int, BaseException] = {}  # members that cannot be read (bad CRC, cut short): like a bad rank
    try:
        files = _extract_members(archive, list(range(len(members))), tmp, errors)
        pos = {f: int(os.path.basename(os.path.dirname(f))) for f in files}  # into/<position>/<name>
        bad = {f"{archive}::{shown[k]}": str(e) for k, e in sorted(errors.items())}
        if bad and (kw.get("on_error") == "raise" or not files):
            what = "no trace could be read" if not files else f"{len(bad)} of {len(members)} members could not be read"
            raise NbprofError(f"load_ranks: {what}: " + "; ".join(f"{n}: {e}" for n, e in bad.items()))
        names = {f: f"{archive}::{shown[pos[f]]}" for f in files}
        mr = _load_paths(files, archive, names, **kw)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for n, e in bad.items():
        mr.failed[n] = e
        mr.report.add(f"{os.path.basename(n)}:load_failed", "dropped", 1, f"{n}: not read: {e}")
    if bad:
        import warnings

        warnings.warn(f"load_ranks: {len(bad)} archive members could not be read and were skipped "
                      f"(MultiRankTrace.failed): " + "; ".join(f"{n}: {e}" for n, e in list(bad.items())[:5]),
                      UserWarning, stacklevel=3)
    mr.members = {rk: (archive, members[pos[p]], pos[p]) for rk, p in mr.paths.items()}
    mr.paths = {rk: names[p] for rk, p in mr.paths.items()}
    dups = sorted(m for m, c in seen.items() if c > 1)
    if dups:
        k = sum(seen[m] for m in dups)
        mr.report.add("duplicate_member", "assumed", k,
                      f"the archive holds {k} members under {len(dups)} repeated names (e.g. {dups[0]!r} "
                      f"{seen[dups[0]]} times): each entry loaded as its own trace")
    return mr


def _missing_main_guard() -> bool | None:
    """True when ``__main__`` is a script file without an ``if __name__ == "__main__":`` guard, None if unknown."""
    import re
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return re.search(r"""^\s*if\s+__name__\s*==\s*['"]__main__['"]\s*:""", text, re.M) is None


def _broken_pool_error(exc: BaseException) -> NbprofError:
    guard = _missing_main_guard()
    fix = ("put the call under `if __name__ == \"__main__\":` in your script (the pool starts its workers with "
           "forkserver/spawn, which re-run the main module's top level in each worker; without the guard the "
           "workers try to load ranks themselves and die), or pass workers=1")
    if guard:
        import sys

        where = getattr(sys.modules.get("__main__"), "__file__", "the main script")
        msg = f"load_ranks: the local process pool broke: {where} has no `if __name__ == \"__main__\":` guard; fix: {fix}"
    else:
        msg = (f"load_ranks: the local process pool broke ({exc}): a worker died. If this runs from a script, "
               f"{fix}; otherwise a worker ran out of memory (pass fewer workers)")
    return NbprofError(msg)


def _run_pool(n, paths, cdir, cache, reducer, strict, bar, dataset=None) -> list[_RankResult]:
    import multiprocessing as mp

    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    ex = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_worker_init)
    out: list[_RankResult] = []
    try:
        futs = [ex.submit(_work, p, cdir, cache, reducer, strict, dataset) for p in paths]
        for f in as_completed(futs):
            out.append(f.result())
            if bar:
                bar.update(1)
    except BrokenProcessPool as exc:
        ex.shutdown(wait=False, cancel_futures=True)
        raise _broken_pool_error(exc) from exc
    except BaseException:
        # Ctrl-C or a failing rank: cancel what has not started and stop the workers now
        procs = list(getattr(ex, "_processes", {}).values())
        ex.shutdown(wait=False, cancel_futures=True)
        for pr in procs:
            if pr.is_alive():
                pr.terminate()
        for pr in procs:
            pr.join(timeout=5)
        raise
    ex.shutdown(wait=True)
    return out


def _worker_init() -> None:
    # workers leave Ctrl-C to the parent, which cancels and terminates them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the pool already loads one rank per core: no second process per load (sources/kineto.py)
    os.environ["NBPROF_LOAD_PROCESSES"] = "1"


def _run_dask(client, paths, cdir, cache, reducer, strict, bar, dataset=None) -> list[_RankResult]:
    try:
        from dask.distributed import Client
        from dask.distributed import as_completed as d_as_completed
    except ImportError as exc:
        from ._deps import missing

        raise missing("distributed", "dask", "loading ranks on Dask (dask.distributed)", exc) from exc
    own = False
    if isinstance(client, str):
        client = Client(client)
        own = True
    try:
        futs = client.map(_work, paths, cache_dir=cdir, use_cache=cache, reducer=reducer, strict=strict,
                          dataset=dataset, pure=False)
        out = []
        try:
            for f in d_as_completed(futs):
                out.append(f.result())
                if bar:
                    bar.update(1)
        except BaseException:
            client.cancel(futs)
            raise
        return out
    finally:
        if own:
            client.close()


def _assemble(results: list[_RankResult], paths: list[str], cdir: str | None, allow_mixed: bool, seconds: float,
              on_error: str = "skip", names: dict[str, str] | None = None) -> MultiRankTrace:
    names = names or {}
    report = LoadReport(path=os.path.commonpath(paths) if len(paths) > 1 else paths[0])
    by_path = {r.path: r for r in results}
    failed = {}
    for p in paths:
        err = by_path[p].error
        if err is not None:  # the error names the file it read: show the name the caller knows
            failed[names.get(p, p)] = err.replace(p, names.get(p, p))
    if failed and (on_error == "raise" or len(failed) == len(paths)):
        what = "no trace could be loaded" if len(failed) == len(paths) else f"{len(failed)} of {len(paths)} traces could not be loaded"
        msg = f"load_ranks: {what}: " + "; ".join(f"{n}: {e}" for n, e in failed.items())
        raise NbprofError(msg)
    if failed:
        import warnings

        for n, e in failed.items():
            report.add(f"{os.path.basename(n)}:load_failed", "dropped", 1, f"{n}: not loaded: {e}")
        warnings.warn(f"load_ranks: {len(failed)} of {len(paths)} traces could not be loaded and were skipped "
                      f"(MultiRankTrace.failed): " + "; ".join(f"{n}: {e}" for n, e in list(failed.items())[:5]),
                      UserWarning, stacklevel=4)
        paths = [p for p in paths if by_path[p].error is None]
    ordered = [by_path[p] for p in paths]
    # ranks: metadata, else file name, else order
    ranks: dict[str, int] = {}
    assumed = [r for r in ordered if r.rank_source == "assumed"]
    if assumed and len(ordered) > 1:
        taken = {r.rank for r in ordered if r.rank_source != "assumed"}
        free = (i for i in range(len(ordered) * 2) if i not in taken)
        for r in ordered:
            ranks[r.path] = next(free) if r.rank_source == "assumed" else r.rank
        report.add(
            "rank_from_order", "assumed", len(assumed),
            f"{len(assumed)} files had no rank in metadata or file name: ranks assigned in file order",
        )
    else:
        ranks = {r.path: r.rank for r in ordered}
    dup = pd.Series(list(ranks.values())).duplicated(keep=False)
    worlds = {r.world_size for r in ordered if r.rank_source == "distributedInfo"}
    problems = []
    if dup.any():
        clash = sorted({ranks[p] for p, d in zip(ranks, dup) if d})
        problems.append(f"duplicate ranks {clash}: " + ", ".join(os.path.basename(p) for p, d in zip(ranks, dup) if d))
    if len(worlds) > 1:
        problems.append(f"different world sizes {sorted(worlds)}")
    if problems:
        msg = "these traces look like several runs: " + "; ".join(problems)
        if not allow_mixed:
            raise NbprofError(msg + "; hint: pass one run's files, or allow_mixed=True")
        report.add("mixed_runs", "assumed", 1, msg)
        # keep them apart: renumber duplicates after the largest rank
        seen: set[int] = set()
        nxt = max(ranks.values()) + 1
        for p in paths:
            if ranks[p] in seen:
                ranks[p] = nxt
                nxt += 1
            seen.add(ranks[p])
    for r in ordered:
        for i in r.issues:
            if i["kind"] in ("rank_assumed", "rank_from_filename"):
                continue
            base = os.path.basename(names.get(r.path, r.path))
            report.add(f"{base}:{i['kind']}", i["action"], i["count"], f"{base}: {i['message']}", i.get("offset"))
    mr = MultiRankTrace(
        paths={ranks[r.path]: r.path for r in ordered},
        summaries={ranks[r.path]: r.tables for r in ordered},
        report=report,
        digests={ranks[r.path]: r.digest for r in ordered},
        cache_dir=cdir,
        seconds=seconds,
        from_cache={ranks[r.path]: r.from_cache for r in ordered},
        failed=failed,
    )
    # the per-rank tables carry the reduced rank; align them with the final rank numbers
    for rk, tabs in mr.summaries.items():
        if "overview" in tabs:
            tabs["overview"] = tabs["overview"].assign(rank=rk)
    return mr
