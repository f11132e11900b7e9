"""The knob scenarios of :mod:`nbprof.analysis.whatif` that need more than a factor on matching events:
the ops a CUDA graph captures, the DataLoader-workers model, and the per-collective wait of each rank.
Each function returns per-edge or per-step quantities for ``whatif._apply`` / ``whatif.predict``; the
models and their validation are documented in :mod:`nbprof.analysis.whatif`."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace import schema
from ..trace.model import Trace
from . import critical_path as cpm
from .steps import _is_dataloader


def _thread_key(ev: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    pid = ev["pid"].to_numpy(np.int64)[rows]
    tid = ev["tid"].to_numpy(np.int64)[rows]
    return np.asarray(pid * (1 << 32) + (tid & 0xFFFFFFFF))


def captured_host_edges(g: cpm.Graph, ev: pd.DataFrame) -> np.ndarray:
    """Host edges (indices into ``g``'s edges) that a CUDA-graph replay of the step removes: every host
    interval inside a ``cpu_op`` that launches device work (a launch call on its thread inside its range:
    the dispatcher and framework work of a captured op), the launch calls themselves, and the Python/glue
    gap between two such ops on the launching thread -- except the intervals of the first launch call of
    each step on each thread, which stand for the one ``cudaGraphLaunch`` that remains."""
    host_e = np.flatnonzero(g.kind == cpm.HOST)
    kh = int((ev["device"].to_numpy()[g.rows] < 0).sum())
    hrows = g.rows[:kh]
    launch_rows = hrows[g.is_launch_call[:kh]]
    if launch_rows.size == 0 or host_e.size == 0:
        return np.zeros(0, np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    cat = ev["cat"].astype(str).to_numpy()
    ops = hrows[cat[hrows] == schema.CPU_OP]
    # does each op's range hold a launch start on its thread? (sorted composite keys thread|time)
    shift = np.int64(1) << np.int64(40)
    tk_l = _thread_key(ev, launch_rows)
    tk_o = _thread_key(ev, ops)
    _u, inv = np.unique(np.concatenate([tk_l, tk_o]), return_inverse=True)
    il, io = inv[: tk_l.size].astype(np.int64), inv[tk_l.size:].astype(np.int64)
    lk = np.sort(il * shift + (ts[launch_rows] - ts.min()))
    lo = np.searchsorted(lk, io * shift + (ts[ops] - ts.min()), side="left")
    hi = np.searchsorted(lk, io * shift + (end[ops] - ts.min()), side="left")
    captured = ops[hi > lo]
    cap_rows = np.concatenate([captured, launch_rows])
    src_row = g.node_row[g.src[host_e]]
    inside = cpm.inside_ranges(ev, cap_rows, src_row, g.t[g.src[host_e]])
    # glue: from the end of a captured op to the start of the next captured op on the thread
    is_cap = np.zeros(len(ev), bool)
    is_cap[cap_rows] = True
    is_end = np.zeros(g.n_nodes, bool)
    is_end[g.end] = True
    dst_row = g.node_row[g.dst[host_e]]
    glue = is_end[g.src[host_e]] & is_cap[src_row] & ~is_end[g.dst[host_e]] & is_cap[dst_row]
    sel = inside | glue
    # keep the first launch call of each step and thread (the graph launch)
    own = g.owner[host_e]
    is_launch_row = np.zeros(len(ev), bool)
    is_launch_row[launch_rows] = True
    le = np.flatnonzero(is_launch_row[np.clip(own, 0, None)] & (own >= 0))
    if le.size:
        key = pd.DataFrame({"step": g.node_step[g.src[host_e[le]]], "th": _thread_key(ev, own[le]),
                            "row": own[le], "t": g.t[g.src[host_e[le]]]})
        first = key.sort_values("t", kind="stable").groupby(["step", "th"], sort=False)["row"].first()
        keep_rows = np.zeros(len(ev), bool)
        keep_rows[first.to_numpy(np.int64)] = True
        sel[le[keep_rows[own[le]]]] = False
    return np.asarray(host_e[sel])


def comm_host_rows(g: cpm.Graph, ev: pd.DataFrame) -> np.ndarray:
    """Host rows of ``g`` where the host runs or waits for a collective: the ``nccl:``/``gloo:`` ranges
    (:func:`nbprof.trace.predicates.is_communication`), the ``c10d::`` ops (``wait`` included) and
    ``record_param_comms``."""
    dev = ev["device"].to_numpy()[g.rows] < 0
    names = ev["name"]

    def is_c10d(n: str) -> bool:
        return n.startswith("c10d::") or n == "record_param_comms"

    m = (g.is_comm | pred.name_mask(names, is_c10d)[g.rows]) & dev
    return np.asarray(g.rows[m])


def _cores_here() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def workers_plan(g: cpm.Graph, ev: pd.DataFrame, n: int, cores: int | None, current: int | None
                 ) -> tuple[pd.DataFrame, list[str]]:
    """Per step of the DataLoader-workers model (see ``whatif.dataloader_workers``).

    Returns
    -------
    plan : pandas.DataFrame
        ``step``, ``dataloader_ns`` (measured DataLoader time D), ``rest_ns`` (the rest of the step R),
        ``fetch_ns`` (one batch's fetch time F), ``fetch_cpu_ns`` (the part of F on a core: F less the
        DataLoader's waiting frames), ``new_dataloader_ns`` (D'), ``floor_ns`` (the CPU bound of the step),
        ``factor`` (D'/D), int64 ns / float.
    notes : list of str
    """
    cores = int(cores) if cores else _cores_here()
    names = ev["name"]
    dev = ev["device"].to_numpy() < 0
    in_g = np.zeros(len(ev), bool)
    in_g[g.rows] = True
    dl = pred.name_mask(names, _is_dataloader) & dev & in_g
    step_col = ev["step"].to_numpy(np.int64)
    dur = ev["dur_ns"].to_numpy(np.int64)
    notes: list[str] = []
    if current is None:
        dl_names = pd.unique(names[dl].astype(str))
        if any("MultiProcessing" in x for x in dl_names):
            raise ValueError("the measured run already used DataLoader worker processes: give current=<its "
                             "num_workers> to dataloader_workers()")
        current = 0
    steps = pred.is_step_row(ev) & dev
    ps = pd.DataFrame({"step": step_col[steps], "len": dur[steps]}).groupby("step")["len"].max()
    d = pd.Series(dur[dl]).groupby(step_col[dl]).sum().reindex(ps.index, fill_value=0)
    blocking = np.zeros(len(ev), bool)
    blocking[g.rows[g.is_blocking]] = True
    wait = pd.Series(dur[blocking]).groupby(step_col[blocking]).sum().reindex(ps.index, fill_value=0)
    rest = (ps - d).clip(lower=0)
    fetch = d if current == 0 else current * (rest + d)
    # the fetch's waits (time.sleep, reads: Python frames that wait off the CPU, with_stack traces) take no core:
    # n workers overlap them however few the cores; only the rest of the fetch competes for cores
    waiting = _dataloader_waits(ev, np.flatnonzero(dl), step_col).reindex(ps.index, fill_value=0)
    wait_share = (waiting / d.where(d > 0)).fillna(0.0).clip(0, 1) if current == 0 else 0.0 * d
    fetch_cpu = fetch * (1 - wait_share)
    n_eff = min(n, max(1, cores - 1)) if n > 0 else 0
    # a worker delivers a batch per F / n (latency) or per F_cpu / n_eff (the cores the workers get), the slower
    new_d = fetch.astype(float) if n_eff == 0 else (np.maximum(fetch / n, fetch_cpu / n_eff) - rest).clip(lower=0)
    # CPU the main process needs per step: its host work less its blocking waits; on a trace without device
    # ops the model's own operators run on torch's intra-op pool, which spans the cores (torch's default)
    has_device = bool((ev["device"].to_numpy()[g.rows] >= 0).any())
    rest_cpu = (rest - wait).clip(lower=0) * (1 if has_device else cores)
    floor = (rest_cpu + fetch_cpu) / min(cores, n + 1 if has_device else cores) if n > 0 else pd.Series(
        0.0, index=ps.index)
    factor = (new_d / d.where(d > 0)).fillna(1.0)
    if n + 1 > cores:
        notes.append(f"{n} workers and the main process exceed the {cores} CPU cores: the workers take CPU time "
                     f"from the main process, so more workers can make the step slower; predicted with "
                     f"{n_eff} effective worker(s) and the step at least (main-process work + fetch) / {cores} "
                     "cores")
    plan = pd.DataFrame({"step": ps.index.to_numpy(np.int64), "dataloader_ns": d.to_numpy(np.int64),
                         "rest_ns": rest.to_numpy(np.int64), "fetch_ns": fetch.to_numpy(np.int64),
                         "fetch_cpu_ns": np.rint(fetch_cpu.to_numpy(float)).astype(np.int64),
                         "new_dataloader_ns": np.rint(new_d.to_numpy(float)).astype(np.int64),
                         "floor_ns": np.rint(floor.to_numpy(float)).astype(np.int64),
                         "factor": factor.to_numpy(float)})
    return plan, notes


def _dataloader_waits(ev: pd.DataFrame, dl_rows: np.ndarray, step_col: np.ndarray) -> pd.Series:
    """Per step: the time (ns) inside the DataLoader ranges ``dl_rows`` that their thread spends in Python frames
    that wait off the CPU (:data:`nbprof.analysis.pyframes.WAIT_FRAME_RE`; nested ones counted once). Empty
    without stacks."""
    from . import _intervals as iv
    from . import pyframes

    fr = np.flatnonzero(np.asarray(ev["cat"] == pyframes.PYTHON_CATEGORY, dtype=bool)
                        & pred.name_mask(ev["name"], lambda x: pyframes.WAIT_FRAME_RE.search(x) is not None))
    if fr.size == 0 or dl_rows.size == 0:
        return pd.Series(dtype=np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    fr = fr[cpm.inside_ranges(ev, dl_rows, fr, ts[fr])]
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    out = {}
    for st in np.unique(step_col[fr]):
        f = fr[step_col[fr] == st]
        a, b = iv.merge(ts[f], end[f])
        out[int(st)] = int((b - a).sum())
    return pd.Series(out, dtype=np.int64)


def balance_factors(trace_events: pd.DataFrame, peers: Sequence[Trace]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``trace_events`` (one of ``peers``' tables) that are collectives, and the factor that leaves
    each with only its transfer: ``(dur - wait) / dur``, the wait being the time it waited for the last
    rank (:func:`nbprof.analysis.distributed.wait_transfer`, the k-th call of a collective matched across
    ranks). Raises ValueError when the table is not one of the peers' or fewer than two ranks are given."""
    from .distributed import wait_transfer

    me = next((t for t in peers if t.events is trace_events), None)
    if me is None:
        raise ValueError("balance_ranks: the trace predicted must be one of the ranks' traces given")
    if len(peers) < 2:
        raise ValueError("balance_ranks needs the traces of at least two ranks")
    wt = wait_transfer(list(peers))
    if wt.empty:
        return np.zeros(0, np.int64), np.zeros(0)
    mine = wt[wt["rank"] == me.meta.rank]
    ts_rel = mine["arrival_abs_ns"].to_numpy(np.int64) - int(me.meta.origin_ns or 0)
    ev = trace_events
    comm = np.flatnonzero(np.asarray(pred.is_communication(ev), dtype=bool))
    key = pd.DataFrame({"ts": ev["ts_ns"].to_numpy(np.int64)[comm], "dur": ev["dur_ns"].to_numpy(np.int64)[comm],
                        "row": comm}).drop_duplicates(["ts", "dur"])
    q = pd.DataFrame({"ts": ts_rel, "dur": mine["dur_ns"].to_numpy(np.int64),
                      "wait": mine["wait_ns"].to_numpy(np.int64)})
    m = q.merge(key, on=["ts", "dur"], how="inner")
    f = (1 - m["wait"] / m["dur"].where(m["dur"] > 0)).fillna(1.0).clip(0, 1)
    return m["row"].to_numpy(np.int64), f.to_numpy(float)
