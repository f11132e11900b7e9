"""Read a TensorBoard profiler logdir: discover runs/workers/spans, load them as Traces, compare runs.

Naming rules are those of the PyTorch profiler plugin (torch-tb-profiler 0.4.3,
``torch_tb_profiler/consts.py``, ``plugin.py``, ``profiler/loader.py``):

- a **run** is every directory under the logdir (recursively) that holds at least one file
  matching ``WORKER_PATTERN``; its name is the path relative to the logdir (the logdir's own
  base name when the files sit directly in it);
- a file name ``<worker>[.<digits>].pt.trace.json[.gz]`` gives the **worker** (lazy group 1)
  and the optional span timestamp (group 2);
- a worker's **spans** are numbered ``1..n`` in the *string* order of their timestamps
  (``bisect.insort`` on strings); a file with no timestamp has no span (the plugin shows
  ``"default"``).
"""

from __future__ import annotations

import os
import re
from typing import Any

import pandas as pd

from ..trace.model import Trace

__all__ = [
    "TRACE_FILE_PATTERN",
    "discover",
    "load_run",
    "load_run_traces",
    "load_logdir",
    "compare_runs",
    "breakdown_side_by_side",
]

#: torch_tb_profiler.consts.WORKER_PATTERN, verbatim
TRACE_FILE_PATTERN = re.compile(
    r"""^(.*?) # worker name
        (\.\d+)? # optional timestamp like 1619499959628 used as span name
        \.pt\.trace\.json # the ending suffix
        (?:\.gz)?$""",
    re.X,
)

DISCOVER_COLUMNS = ["run", "worker", "span", "span_ts", "path", "file_bytes"]


def discover(logdir: str | os.PathLike[str]) -> pd.DataFrame:
    """List every profiler trace in ``logdir`` with the plugin's run/worker/span naming.

    Parameters
    ----------
    logdir : path

    Returns
    -------
    pandas.DataFrame
        Columns ``run`` (str), ``worker`` (str), ``span`` (str ``"1".."n"`` per run and worker,
        ``"default"`` when the file name has no timestamp, as the plugin reports it),
        ``span_ts`` (the timestamp digits or ``""``), ``path`` (absolute), ``file_bytes``;
        sorted by run, worker, span number.

    Raises
    ------
    FileNotFoundError
        When ``logdir`` is not a directory.
    """
    root = os.path.abspath(os.fspath(logdir))
    if not os.path.isdir(root):
        msg = f"no such TensorBoard logdir: {root!r}"
        raise FileNotFoundError(msg)
    rows: list[dict[str, Any]] = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames.sort()
        found = [(f, TRACE_FILE_PATTERN.match(f)) for f in sorted(files)]
        matches = [(f, m) for f, m in found if m is not None and os.path.isfile(os.path.join(dirpath, f))]
        if not matches:
            continue
        run = os.path.basename(root) if dirpath == root else os.path.relpath(dirpath, root)
        spans_by_worker: dict[str, list[str]] = {}
        for _, m in matches:
            if m.group(2) is not None:
                spans_by_worker.setdefault(m.group(1), []).append(m.group(2)[1:])
        index = {(w, s): i for w, lst in spans_by_worker.items() for i, s in enumerate(sorted(lst), 1)}
        for f, m in matches:
            worker, ts = m.group(1), (m.group(2) or "")[1:]
            p = os.path.join(dirpath, f)
            rows.append(
                {
                    "run": run,
                    "worker": worker,
                    "span": str(index[(worker, ts)]) if ts else "default",
                    "span_ts": ts,
                    "path": p,
                    "file_bytes": os.path.getsize(p),
                }
            )
    df = pd.DataFrame(rows, columns=DISCOVER_COLUMNS)
    if not df.empty:
        key = df["span"].map(lambda s: int(s) if s.isdigit() else 0)
        df = df.assign(_k=key).sort_values(["run", "worker", "_k"], kind="stable").drop(columns="_k")
        df = df.reset_index(drop=True)
    return df


def _pick(df: pd.DataFrame, logdir: str, run: str, worker: str | None, span: str | int | None) -> pd.DataFrame:
    sel = df[df["run"] == run]
    if sel.empty:
        runs = sorted(df["run"].unique())
        msg = f"no run {run!r} in TensorBoard logdir {logdir!r}; runs: {runs}"
        raise KeyError(msg)
    if worker is not None:
        w = sel[sel["worker"] == worker]
        if w.empty:
            msg = f"run {run!r} has no worker {worker!r}; workers: {sorted(sel['worker'].unique())}"
            raise KeyError(msg)
        sel = w
    if span is not None:
        s = sel[sel["span"] == str(span)]
        if s.empty:
            msg = f"run {run!r} has no span {span!r}; spans: {sorted(sel['span'].unique())}"
            raise KeyError(msg)
        sel = s
    return sel


def _load_row(row: pd.Series, logdir: str, **kwargs) -> Trace:
    from ..sources import load

    t = load(row["path"], **kwargs)
    t.meta.extra["tensorboard"] = {
        "logdir": logdir,
        "run": row["run"],
        "worker": row["worker"],
        "span": row["span"],
        "span_ts": row["span_ts"],
    }
    return t


def load_run_traces(
    logdir: str | os.PathLike[str],
    run: str,
    worker: str | None = None,
    span: str | int | None = None,
    **load_kwargs,
) -> list[Trace]:
    """Load every trace of one run (all workers and spans, or the ones asked for).

    Each ``Trace`` keeps where it came from in ``trace.meta.extra["tensorboard"]``
    (``logdir, run, worker, span, span_ts``); its rank is the loader's (``distributedInfo``,
    else the file name, else 0).

    Parameters
    ----------
    logdir : path
    run : str
    worker : str, optional
    span : str or int, optional
        Span number as the plugin shows it (``"1"``...) or ``"default"``.
    **load_kwargs
        Passed to ``nbprof.load`` (e.g. ``strict=True``).

    Returns
    -------
    list of Trace
        In ``discover`` order (worker, then span).

    Raises
    ------
    KeyError
        Unknown run, worker or span (the message lists the ones that exist).
    FileNotFoundError, TraceFormatError
        From discovery and loading.
    """
    root = os.path.abspath(os.fspath(logdir))
    sel = _pick(discover(root), root, run, worker, span)
    return [_load_row(r, root, **load_kwargs) for _, r in sel.iterrows()]


def load_run(
    logdir: str | os.PathLike[str],
    run: str,
    worker: str | None = None,
    span: str | int | None = None,
    **load_kwargs,
) -> Trace:
    """Load one trace of a run: the given worker (default: the run's only worker) and span (default: the latest).

    See ``load_run_traces`` for all workers/spans at once; ``trace.meta.extra["tensorboard"]`` holds
    ``logdir, run, worker, span, span_ts``.

    Raises
    ------
    KeyError
        Unknown run, worker or span.
    ValueError
        The run has several workers (ranks) and ``worker`` is not given.
    """
    root = os.path.abspath(os.fspath(logdir))
    return _one(root, discover(root), run, worker, span, **load_kwargs)


def load_logdir(logdir: str | os.PathLike[str], **load_kwargs) -> dict[str, list[Trace]]:
    """Load every run of a logdir: ``{run: [Trace, ...]}`` (see ``load_run``)."""
    root = os.path.abspath(os.fspath(logdir))
    df = discover(root)
    out: dict[str, list[Trace]] = {}
    for _, r in df.iterrows():
        out.setdefault(r["run"], []).append(_load_row(r, root, **load_kwargs))
    return out


def _one(
    logdir: str, df: pd.DataFrame, run: str, worker: str | None, span: str | int | None, **load_kwargs
) -> Trace:
    sel = _pick(df, logdir, run, worker, span)
    workers = sorted(sel["worker"].unique())
    if len(workers) > 1:
        msg = f"run {run!r} has several workers {workers}: pass worker= to pick one (or use load_run_traces)"
        raise ValueError(msg)
    # the latest span by default (the plugin's span order)
    return _load_row(sel.iloc[-1], logdir, **load_kwargs)


def compare_runs(
    logdir: str | os.PathLike[str],
    baseline: str,
    candidate: str,
    *,
    worker: str | None = None,
    span: str | int | None = None,
    candidate_worker: str | None = None,
    candidate_span: str | int | None = None,
):
    """Compare two runs of a logdir: ``nbprof.analysis.compare.compare(baseline_trace, candidate_trace)``.

    The "before/after" workflow: one trace per run (the given worker/span; by default the only worker
    and its latest span), loaded with ``load_run``.

    Parameters
    ----------
    logdir : path
    baseline, candidate : str
        Run names (``a`` and ``b`` of ``compare``).
    worker, span : optional
        Which trace of ``baseline`` (and of ``candidate`` unless ``candidate_worker``/``candidate_span``).

    Returns
    -------
    nbprof.analysis.compare.Comparison
        ``.operators .kernels .steps .breakdown`` delta frames.

    Raises
    ------
    KeyError
        Unknown run/worker/span.
    ValueError
        A run with several workers and no ``worker`` given.
    """
    root = os.path.abspath(os.fspath(logdir))
    df = discover(root)
    a = _one(root, df, baseline, worker, span)
    b = _one(
        root,
        df,
        candidate,
        candidate_worker if candidate_worker is not None else worker,
        candidate_span if candidate_span is not None else span,
    )
    from ..analysis.compare import compare

    return compare(a, b)


def breakdown_side_by_side(traces: dict[str, Trace]) -> pd.DataFrame:
    """Average step breakdown of several runs side by side.

    Parameters
    ----------
    traces : dict
        Run name -> Trace.

    Returns
    -------
    pandas.DataFrame
        Index: the ``breakdown_average`` entries of ``nbprof.analysis.steps`` (``step_ns, kernel_ns, ...,
        dataloader_ns, cpu_exec_ns, other_ns``, ns per step averaged over steps); one column per run.

    Raises
    ------
    EmptyProfileError
        From ``step_breakdown`` when a trace has nothing to break down.
    """
    from ..analysis.steps import breakdown_average, step_breakdown

    cols = {name: breakdown_average(step_breakdown(t)) for name, t in traces.items()}
    return pd.DataFrame(cols)
