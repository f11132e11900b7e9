"""What-if replay: predict step times after a change by replaying the dependency graph.

The graph is :func:`nbprof.analysis.critical_path.build_graph`'s over the whole trace. Replay gives
every node the time ``max(t[u] + w)`` over its in-edges, in topological order (sources keep their
measured time), with the *replay weights* ``Graph.wmin``:

* every edge first weighs the least it could: a host interval (between consecutive markers of one
  thread: an op's self time, or a gap between ops) what it measured (one thing at a time per thread,
  gaps kept as they were), except a gap that a ``wake`` edge explains (weighs the wake-up latency) and
  the last interval inside a call that *waited* for the device (``cudaStreamSynchronize``,
  ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, their ``hip*`` twins, a blocking copy such as
  pageable ``cudaMemcpyAsync`` or ``hipMemcpyWithStream``: its latest source op ended after the interval
  began), which weighs only the return latency -- a wait is an edge, not a duration: the call returns
  when the op it waited for ends (by correlation id for a copy, ``cuda_sync`` rows or the last op before
  the return otherwise), plus that latency, so the wait shrinks with the op; a device op its duration;
  a launch edge the median delay of launches of computation/copies onto an empty stream
  (``Graph.launch_delay_ns``; a communication kernel's launch delay is mostly a wait for the peers and
  sets no floor); a stream edge the median gap behind an op launched while its predecessor still ran
  (``Graph.queued_gap_ns``); a sync edge the return latency of a call that waited, 0 into one that did
  not; ``fwdbwd`` 0 (never more than measured). Edges that the measurement's order would run backwards
  are tied to a device op instead of dropped (``Graph.dep_via``): a stream edge between ops that overlap
  on one stream, and a wait edge whose op ends up to ``SKEW_MAX_NS`` (100 µs) after the call returns
  (host/device clock skew); likewise a thread that resumed from a CPU collective before the backend's
  ``gloo:`` range closed waits on an edge from that range's start tied to its length (less the measured tail),
  its gap weighing 0;
* then each node's *binding* in-edge (the one whose source time + weight is latest) is raised to
  what it measured, so a replay without change reproduces every measured time exactly (tested on
  nine real traces: ``predict(trace, [])`` gives ``predicted == baseline`` per step) and a change
  moves a node only through the constraint that really held it.

Step times are then measured on the replayed times with the same rule as
:func:`nbprof.analysis.steps.step_windows` (host ``ProfilerStep#N`` extended to its device work).

Changes (combine them in a list; factors multiply):

``scale(pattern, factor)``
    Events whose name matches the regular expression ``pattern`` (case-insensitive search) take
    ``factor`` × their time: a device op's duration, or every host interval inside a matching host
    range (its children included).
``dataloader(factor)``
    The same for DataLoader ranges (``enumerate(DataLoader)#...__next__``, ``enumerate(DataPipe)#...``:
    the rule of :mod:`nbprof.analysis.steps`).
``faster_host(factor)``
    Every host interval takes ``1 / factor`` × its time.
``"no_dataloader"``
    ``dataloader(0)``.
``"no_host_gaps"``
    CUDA-graph-like: device ops no longer wait for their launch calls (only the first op of each
    stream in each step keeps its launch edge) and launch-bound gaps between ops shrink to the median
    queued gap; host work itself is unchanged.
``"overlap_communication"``
    Communication device ops (NCCL/RCCL kernels, or with a ``collective``) take no time on their
    stream, and the host's time inside collective ops (``nccl:``/``gloo:`` ranges, ``c10d::`` ops,
    ``record_param_comms``: a CPU collective, or the host waiting for one) none either: full overlap,
    an upper bound of the saving. A host sync on an NCCL kernel shrinks with it (a wait is an edge).
``"cuda_graphs"``
    What a graph replay of the step removes: ``"no_host_gaps"``, plus on every thread that launches
    device work the launch calls (:data:`LAUNCH_PATTERN`, HTA's launch names), the dispatcher/framework
    time of the ``cpu_op`` s that launch device work (the captured ops: every host interval inside them)
    and the Python glue between two captured ops; device work stays, and the first launch call of each
    step and thread keeps its time (the one ``cudaGraphLaunch``). Python outside the captured ops
    (the DataLoader, logging, the optimizer's Python) stays. Checked: never below the device busy time
    (tests/test_whatif_invariants.py); lm_h200 13.7 -> 4.9 ms, B200 ``eager_trace`` 87.4 -> 14.4 ms.
``"remove_syncs"``
    The host's syncs in the step removed (``.item()``, ``.cpu()``, ``torch.cuda.synchronize()``,
    blocking copies): every ``sync`` edge goes, so the host no longer waits; a waiting call keeps only
    its return latency; device work stays. An upper bound: the value a sync fetched must not be needed.
:func:`dataloader_workers` ``(n, cores=, current=)``
    ``DataLoader(num_workers=n)``: per-batch fetch time / n against the rest of the step, capped by the
    CPU cores (see the function); ``Prediction.notes`` says when the workers exceed the cores.
:func:`balance_ranks` ``(traces)``
    Several ranks: each rank's wait for the last rank at every collective removed (see the function).

Validation: ``tests/test_whatif_invariants.py`` checks the physics on every trace of ``data/`` and the
corpus (exact without change; never below a stream's device busy time, nor the step thread's own host
work; combined speed-ups never slower); ``tests/test_whatif_knobs.py`` and ``tests/test_analysis_whatif.py``
set predictions against real after-runs.

Cost: the whole-trace graph is built once per trace and cached (:func:`trace_graph`) while the trace
object lives and its ``events`` table is the same object; every :func:`predict` of that trace reuses it,
and the replays that keep every edge share one longest-path plan of it (:func:`_plan_of`; only the
weights differ between them), so a replay is a few vectorised passes (issue 20: 6 replays of a 1.16 M-event
trace in ~0.6 s).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..trace.model import Trace
from ..trace.predicates import name_mask as _name_mask
from . import _whatif_knobs as _knobs
from . import critical_path as cpm
from ._memo import per_trace
from .steps import _is_dataloader, step_windows, step_windows_at

SCENARIOS = ("no_dataloader", "no_host_gaps", "overlap_communication", "cuda_graphs", "remove_syncs")

#: The launch calls of ``"cuda_graphs"`` (HTA's launch names, ``critical_path.LAUNCH_NAMES``), as a regex.
LAUNCH_PATTERN = "^(?:" + "|".join(re.escape(n) for n in sorted(cpm.LAUNCH_NAMES)) + ")$"

def trace_graph(trace: Trace) -> cpm.Graph:
    """The whole-trace dependency graph of ``trace`` (:func:`~nbprof.analysis.critical_path.build_graph`),
    built once and cached while ``trace`` lives and ``trace.events`` is the same table object
    (:func:`~nbprof.analysis.critical_path.whole_graph`, shared with ``critical_path(trace)``).

    Returns
    -------
    Graph
    """
    return cpm.whole_graph(trace)


def clear_graph_cache() -> None:
    """Forget every cached graph (:func:`trace_graph`) and replay plan (:func:`_plan_of`): the memo's clear."""
    cpm.clear_whole_graphs()


@per_trace
def _plan_of(g: cpm.Graph) -> cpm.LongestPlan | None:
    """:func:`~nbprof.analysis.critical_path.longest_plan` of all of ``g``'s edges, made once per graph (memoised
    on the graph): the replays that keep every edge (all changes but ``no_host_gaps``) share it."""
    return cpm.longest_plan(g.n_nodes, g.src, g.dst)


@dataclass(frozen=True)
class Change:
    """One change of a what-if scenario (build with :func:`scale`, :func:`dataloader`, :func:`faster_host`)."""

    kind: str
    factor: float = 1.0
    pattern: str | None = None
    #: Shown instead of the pattern (a long alternation of names) in ``str()``.
    label: str | None = None
    #: :func:`dataloader_workers`: the CPU cores available and the workers of the measured run.
    cores: int | None = None
    current: int | None = None
    #: :func:`balance_ranks`: every rank's trace.
    peers: tuple[Trace, ...] = field(default=(), compare=False, repr=False)

    def __str__(self) -> str:
        if self.kind == "scale":
            return f"scale({self.label or repr(self.pattern)}, {self.factor:g})"
        if self.kind in ("dataloader", "faster_host"):
            return f"{self.kind}({self.factor:g})"
        if self.kind == "dataloader_workers":
            return f"dataloader_workers({self.factor:g}" + (f", cores={self.cores})" if self.cores else ")")
        if self.kind == "balance_ranks":
            return f"balance_ranks({len(self.peers)} ranks)"
        return self.kind


def scale(name_pattern: str, factor: float, *, label: str | None = None) -> Change:
    """Events whose name matches ``name_pattern`` (regex, case-insensitive) take ``factor`` × their time.

    ``label`` names the matched events in ``str(change)`` (e.g. ``"12 GEMM kernels"``).

    Raises
    ------
    ValueError
        For a negative factor or an invalid regular expression.
    """
    if factor < 0:
        raise ValueError(f"factor must be >= 0, not {factor}")
    re.compile(name_pattern)
    return Change("scale", float(factor), name_pattern, label)


def dataloader(factor: float) -> Change:
    """DataLoader ranges (and what runs inside them) take ``factor`` × their time."""
    if factor < 0:
        raise ValueError(f"factor must be >= 0, not {factor}")
    return Change("dataloader", float(factor))


def faster_host(factor: float) -> Change:
    """The host runs ``factor`` × faster: every host interval takes ``1/factor`` × its time."""
    if factor <= 0:
        raise ValueError(f"factor must be > 0, not {factor}")
    return Change("faster_host", float(factor))


def dataloader_workers(n: int, *, cores: int | None = None, current: int | None = None) -> Change:
    """The DataLoader with ``n`` worker processes (``DataLoader(num_workers=n)``).

    Model (per step, from the measured trace): D = the step's DataLoader time, R = the rest of the step,
    F = one batch's fetch time (D when the measured run fetched in the main process, ``current = 0``;
    ``current * (R + D)`` when it had ``current`` workers -- each worker then delivers one batch per
    ``current`` steps). F_cpu is the part of F on a core: F less the time the DataLoader spends in Python frames
    that wait off the CPU (``time.sleep``, reads: :data:`nbprof.analysis.pyframes.WAIT_FRAME_RE`, traces recorded
    ``with_stack``; F_cpu = F without frames). With n workers of which ``n_eff = min(n, cores - 1)`` get a core (the
    main process keeps one), a batch arrives every max(F / n, F_cpu / n_eff) -- the workers overlap their waits
    however few the cores, not their computing -- and the main process waits D' = max(0, that - R) per step (0
    workers: D' = F); the replay scales the DataLoader ranges of each step by D'/D. The step is then at least
    (C + F_cpu) / min(cores, n + 1): the main process's CPU work C and the fetching share the cores, C being
    R less its blocking waits (runtime syncs, copies) on a GPU trace, and ``cores`` x R on a trace without
    device ops, whose operators run on torch's intra-op pool over every core (the bound is then
    R + F / cores). When n + 1 > cores the prediction's ``notes`` say that the workers compete with the main
    process and that more workers can make the step slower (the context switches and the intra-op
    threads that lose their core are not modelled).

    ``cores``: CPU cores available to the run (default: those of this process, ``os.sched_getaffinity``;
    pass the trace machine's for a trace recorded elsewhere). ``current``: the measured run's
    ``num_workers`` (default: 0 when its DataLoader ranges are ``_SingleProcessDataLoaderIter``; a trace of
    worker processes needs it).

    A steady-state model: the worker processes' start and their first ``prefetch_factor`` batches per worker
    (an epoch's start), the IPC of a batch and the slower host work of a process whose cores the workers share
    (memory bandwidth, caches) are not modelled. Validated (``tests/test_whatif_knobs.py``, the knob table of
    ``docs/harness.md``): the H200 pair ``data/gpu/cnn_nw0_prep`` -> ``cnn_nw4_prep`` (16 cores, +2%); the CPU
    ``examples/train_cnn.py --num-workers 0`` -> ``2`` runs (2 cores: 18.1 ms predicted vs 19.4 ms over the after
    run's steady steps; its first step, 43 ms, carries the workers' prefetch); the harness's sleeping-fetch pair
    (4 workers on 2 cores: the old ``F / n_eff`` model predicted ~3 ms of its ~32 ms saving); the corpus V100 ResNet-50
    pair (20 cores: no wait left, as measured; the predicted step is within 7% of the after run's median step, its
    mean carries a first step waiting on device work queued before the profiling window and one step of slower
    host work: +61% on the mean, ``tests/test_harness.py``).

    Raises
    ------
    ValueError
        For ``n < 0``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n}")
    return Change("dataloader_workers", float(n), cores=cores, current=current)


def balance_ranks(traces: Sequence[Trace]) -> Change:
    """Every rank's wait for the last rank to arrive at a collective removed: each collective of the
    predicted rank keeps only its transfer time, ``dur - wait`` (:func:`nbprof.analysis.distributed.wait_transfer`:
    the k-th call of a collective matched across ranks on the absolute clock). Device collectives take
    that factor on their kernel; host (gloo) collectives on the host intervals inside their ``gloo:`` range,
    and the ``c10d::``/``record_param_comms`` ops of the rank's threads that overlap it keep only the
    same share of their time. ``predict(traces[i], balance_ranks(traces))`` predicts rank i's step once the
    straggler is fixed (its extra work gone); the thread that waited for a collective resumes when it ends (a
    ``wake`` edge from the backend range's end, or, when it resumed before the range closed, from the range's
    start tied to its length: :mod:`nbprof.analysis.critical_path`), so its whole wait goes, not a fixed part of
    it. The one model of what balancing saves: the advisor's ``straggler`` finding uses it. Validated on a real
    2-rank gloo DDP run with one rank sleeping 50 ms per step against the same run without the sleep: 50.0 ms
    predicted vs 52.7 ms measured (``tests/test_whatif_knobs.py``), and on the 30 ms pair of ``tests/harness``
    (11 runs: predicted / measured 0.82-1.20, where a step whose waiter resumed before the ``gloo:`` range closed
    had kept its whole wait: 0.45-0.84 in 5 of them); with 3 ranks (rank 1 sleeping) each victim's step saves its
    measured wait, step by step.

    Raises
    ------
    ValueError
        (from :func:`predict`) when the trace predicted is not one of ``traces`` or fewer than 2 are given.
    """
    return Change("balance_ranks", peers=tuple(traces))


def _as_changes(scenario: str | Change | Sequence[str | Change] | None) -> list[Change]:
    if scenario is None:
        return []
    if isinstance(scenario, (str, Change)):
        scenario = [scenario]
    out = []
    for s in scenario:
        if isinstance(s, Change):
            out.append(s)
        elif s == "no_dataloader":
            out.append(Change("dataloader", 0.0))
        elif s in ("no_host_gaps", "overlap_communication", "remove_syncs"):
            out.append(Change(s))
        elif s == "cuda_graphs":
            out.extend([Change("no_host_gaps"), Change("cuda_graphs")])
        else:
            raise ValueError(f"unknown scenario {s!r}; named scenarios: {SCENARIOS}, or scale()/dataloader()/"
                             "faster_host() changes")
    return out


@dataclass
class Prediction:
    """A what-if prediction.

    Attributes
    ----------
    baseline_step_ns, predicted_step_ns : float
        Mean step time over the steps, measured and predicted, ns.
    per_step : pandas.DataFrame
        ``step, baseline_ns, predicted_ns`` (int64 ns), one row per step.
    changes : list of Change
    times : pandas.DataFrame
        Replayed ``ts_ns``/``end_ns`` of the graph's events, indexed like ``trace.events`` rows.
    notes : list of str
        What the model assumed or could not express for this trace (e.g. more DataLoader workers than
        CPU cores), one sentence each.
    """

    baseline_step_ns: float
    predicted_step_ns: float
    per_step: pd.DataFrame
    changes: list[Change]
    times: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def saving_ns(self) -> float:
        """Predicted mean saving per step, ns (negative: slower)."""
        return self.baseline_step_ns - self.predicted_step_ns

    def __repr__(self) -> str:
        ch = ", ".join(str(c) for c in self.changes) or "no change"
        return (f"<Prediction [{ch}]: step {self.baseline_step_ns / 1e6:.3f} ms -> "
                f"{self.predicted_step_ns / 1e6:.3f} ms over {len(self.per_step)} steps>")


def _host_inside(g: cpm.Graph, ev: pd.DataFrame, match_rows: np.ndarray, edge_idx: np.ndarray) -> np.ndarray:
    """Which host edges (``edge_idx``) start inside one of the host events ``match_rows`` (same thread)."""
    return cpm.inside_ranges(ev, match_rows, g.node_row[g.src[edge_idx]], g.t[g.src[edge_idx]])


def _frame_overlap(g: cpm.Graph, ev: pd.DataFrame, frames: np.ndarray, edge_idx: np.ndarray) -> np.ndarray:
    """Time (ns) of each host edge (``edge_idx``: the interval between its two markers on one thread) covered by
    the ranges ``frames`` (rows of ``ev``) of the same ``(pid, tid)``."""
    from . import _intervals as iv

    out = np.zeros(edge_idx.size, np.float64)
    pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    e_row = g.node_row[g.src[edge_idx]]
    e_key = pid[e_row] * (1 << 32) + (tid[e_row] & 0xFFFFFFFF)
    f_key = pid[frames] * (1 << 32) + (tid[frames] & 0xFFFFFFFF)
    a, b = g.t[g.src[edge_idx]], g.t[g.dst[edge_idx]]
    for k in np.unique(f_key):
        on = np.flatnonzero(e_key == k)
        if on.size:
            fr = frames[f_key == k]
            out[on] = iv.overlap_with_windows(iv.merge(ts[fr], end[fr]), a[on], np.maximum(b[on], a[on]))
    return out


def _apply(g: cpm.Graph, ev: pd.DataFrame, changes: list[Change]) -> tuple[np.ndarray, np.ndarray]:
    w = g.wmin.astype(np.float64).copy()
    keep = np.ones(w.size, bool)
    host_e = np.flatnonzero(g.kind == cpm.HOST)
    dev_e = np.flatnonzero(g.kind == cpm.DEVICE)
    names = ev["name"]
    dev_col = ev["device"].to_numpy()
    for c in changes:
        if c.kind in ("scale", "dataloader"):
            if c.kind == "scale":
                rx = re.compile(c.pattern or "", re.IGNORECASE)

                def matches(n: str, rx: re.Pattern[str] = rx) -> bool:
                    return rx.search(n) is not None

                hit = _name_mask(names, matches)
            else:
                hit = _name_mask(names, _is_dataloader)
            gr = np.zeros(len(ev), bool)
            gr[g.rows] = True
            host_match = np.flatnonzero(hit & gr & (dev_col < 0))
            inside = _host_inside(g, ev, host_match, host_e)
            w[host_e[inside]] *= c.factor
            # python_function frames (torch.save, print: with_stack=True traces) are no graph node: the host
            # intervals of their thread lose the part of their time the frames cover
            py = np.flatnonzero(hit & np.asarray(ev["cat"] == "python_function", dtype=bool) & (dev_col < 0))
            if py.size and c.factor != 1:
                rest = host_e[~inside]
                w[rest] -= (1 - c.factor) * _frame_overlap(g, ev, py, rest)
                w[rest] = np.maximum(w[rest], 0)
            if c.kind == "scale":
                dm = hit[g.owner[dev_e]]
                w[dev_e[dm]] *= c.factor
        elif c.kind == "faster_host":
            w[host_e] /= c.factor
        elif c.kind == "overlap_communication":
            dm = np.isin(g.owner[dev_e], g.rows[g.is_comm])
            w[dev_e[dm]] = 0
            w[host_e[_host_inside(g, ev, _knobs.comm_host_rows(g, ev), host_e)]] = 0
        elif c.kind == "cuda_graphs":
            w[_knobs.captured_host_edges(g, ev)] = 0
        elif c.kind == "remove_syncs":
            keep &= g.kind != cpm.SYNC
        elif c.kind == "dataloader_workers":
            plan, _ = _knobs.workers_plan(g, ev, int(c.factor), c.cores, c.current)
            dlr = g.rows[g.is_dataloader]
            inside = _host_inside(g, ev, dlr, host_e)
            fs = pd.Series(plan["factor"].to_numpy(), index=plan["step"].to_numpy())
            st = g.node_step[g.src[host_e[inside]]]
            w[host_e[inside]] *= fs.reindex(st).fillna(1.0).to_numpy()
        elif c.kind == "balance_ranks":
            rows, f = _knobs.balance_factors(ev, c.peers)
            fr = np.ones(len(ev))
            fr[rows] = f
            dm = np.isin(g.owner[dev_e], rows)
            w[dev_e[dm]] *= fr[g.owner[dev_e[dm]]]
            _balance_host(g, ev, w, host_e, rows, fr)
        elif c.kind == "no_host_gaps":
            le = np.flatnonzero(g.kind == cpm.LAUNCH)
            dst_row = g.node_row[g.dst[le]]
            key = pd.DataFrame({
                "step": g.node_step[g.dst[le]], "dev": ev["device"].to_numpy(np.int64)[dst_row],
                "stream": ev["stream"].to_numpy(np.int64)[dst_row], "t": g.t[g.dst[le]], "i": np.arange(le.size)})
            first = key.sort_values("t", kind="stable").groupby(["step", "dev", "stream"], sort=False)["i"].first()
            drop = np.ones(le.size, bool)
            drop[first.to_numpy()] = False
            keep[le[drop]] = False
            se = np.flatnonzero(g.kind == cpm.STREAM)
            gq = getattr(g, "queued_gap_ns", 0)
            w[se] = np.minimum(w[se], max(gq, 0))
        else:
            raise ValueError(f"unknown change {c}")
    return np.rint(cpm.dependent_weights(g, w)).astype(np.int64), keep


def _balance_host(g: cpm.Graph, ev: pd.DataFrame, w: np.ndarray, host_e: np.ndarray, rows: np.ndarray,
                  fr: np.ndarray) -> None:
    """``balance_ranks`` on the host: intervals inside a host collective range (row in ``rows``) and inside
    the ``c10d::`` / ``record_param_comms`` ops that overlap it in time (the thread that waits for it) take
    the range's factor (in place on ``w``)."""
    hrows = rows[ev["device"].to_numpy()[rows] < 0]
    if hrows.size == 0:
        return
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    api = _knobs.comm_host_rows(g, ev)
    api = api[~np.isin(api, hrows)]
    o = np.argsort(ts[hrows])
    hs, he, hf = ts[hrows][o], end[hrows][o], fr[hrows][o]
    # each api op takes the factor of the collective range that overlaps it most recently started
    j = np.searchsorted(hs, end[api], side="left") - 1
    ok = (j >= 0) & (he[np.clip(j, 0, None)] > ts[api])
    fr = fr.copy()
    fr[api[ok]] = hf[j[ok]]
    tgt = np.concatenate([hrows, api[ok]])
    inside = _host_inside(g, ev, tgt, host_e)
    # factor of the innermost target range holding each interval: the owner chain is not kept, so use the
    # interval's own owner when it is a target, else the smallest target factor (a wait is in one of them)
    own = g.owner[host_e[inside]]
    f_in = np.where(np.isin(own, tgt), fr[np.clip(own, 0, None)], np.min(fr[tgt]))
    w[host_e[inside]] *= f_in


def predict(trace: Trace, scenario: str | Change | Sequence[str | Change] | None, *,
            graph: cpm.Graph | None = None) -> Prediction:
    """Predict the mean step time after ``scenario`` by replaying the trace's dependency graph.

    Parameters
    ----------
    trace : nbprof.Trace
    scenario : str, Change, or list of them
        Named scenarios (``"no_dataloader"``, ``"no_host_gaps"``, ``"overlap_communication"``,
        ``"cuda_graphs"``) and
        :func:`scale` / :func:`dataloader` / :func:`faster_host` changes; ``[]`` replays unchanged.
    graph : Graph, optional
        A :func:`~nbprof.analysis.critical_path.build_graph` of the whole trace to reuse. Default:
        :func:`trace_graph` (built once per trace, cached).

    Returns
    -------
    Prediction

    Raises
    ------
    ValueError
        For an unknown scenario, or a trace without steps (no host events).
    """
    changes = _as_changes(scenario)
    g = graph if graph is not None else trace_graph(trace)
    ev = trace.events
    w, keep = _apply(g, ev, changes)
    if keep.all():  # one plan of the edge set for every such replay of this graph
        rep, _ = cpm.longest_path(g.n_nodes, g.src, g.dst, w, g.t, plan=_plan_of(g))
    else:
        rep, _ = cpm.longest_path(g.n_nodes, g.src[keep], g.dst[keep], w[keep], g.t)
    base = step_windows(trace)
    if base.empty:
        raise ValueError("the trace has no host events, so no step to predict")
    ts = ev["ts_ns"].to_numpy(np.int64).copy()
    dur = ev["dur_ns"].to_numpy(np.int64).copy()
    new_ts = rep[g.start]
    new_end = rep[g.end]
    ts[g.rows] = new_ts
    dur[g.rows] = np.maximum(new_end - new_ts, 0)
    pred = step_windows_at(trace, ts, dur)
    per = pd.DataFrame({"step": base["step"].to_numpy(np.int64),
                        "baseline_ns": (base["end_ns"] - base["start_ns"]).to_numpy(np.int64)})
    p2 = pd.DataFrame({"step": pred["step"].to_numpy(np.int64),
                       "predicted_ns": (pred["end_ns"] - pred["start_ns"]).to_numpy(np.int64)})
    per = per.merge(p2, on="step", how="left")
    per["predicted_ns"] = per["predicted_ns"].fillna(-1).astype(np.int64)
    notes: list[str] = []
    for c in changes:
        if c.kind == "dataloader_workers":
            plan, nt = _knobs.workers_plan(g, ev, int(c.factor), c.cores, c.current)
            notes += nt
            fl = pd.Series(plan["floor_ns"].to_numpy(), index=plan["step"].to_numpy()).reindex(per["step"])
            got = per["predicted_ns"] >= 0
            per.loc[got, "predicted_ns"] = np.maximum(per.loc[got, "predicted_ns"].to_numpy(),
                                                      fl.fillna(0).to_numpy(np.int64)[got.to_numpy()])
    times = pd.DataFrame({"ts_ns": new_ts, "end_ns": new_end}, index=ev.index[g.rows])
    return Prediction(baseline_step_ns=float(per["baseline_ns"].mean()),
                      predicted_step_ns=float(per.loc[per["predicted_ns"] >= 0, "predicted_ns"].mean()),
                      per_step=per, changes=changes, times=times, notes=notes)
