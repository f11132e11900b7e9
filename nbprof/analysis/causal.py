"""Causal chains of data stalls: *step N waited X ms for data <- the main thread was in the DataLoader <- it was
blocked in an OS call / descheduled / busy on the CPU preprocessing*, with the evidence of both sources.

Needs the system view of Nsight Systems next to the framework view: a merged trace (``nbprof.merge``: OS
runtime rows ``osrt`` and the ``sched`` / ``cpu_samples`` side tables from nsys; DataLoader ranges from
Kineto) or an nsys trace with NVTX ``data`` ranges. Per step, on each host thread:

- **wait**: the union of the thread's DataLoader ranges (``enumerate(DataLoader)#...__next__``, the rule of
  :mod:`nbprof.analysis.steps`) and of ranges named ``data`` (NVTX / ``record_function``, as
  ``examples/train_cnn.py`` marks its input step); the thread with the longest wait is the one that waited;
- **GPU idle** (traces with device ops): the part of the wait windows no kernel/memcpy/memset covers;
- **blocked**: OS runtime calls (``osrt`` rows; ``read``, ``futex``, ``poll``, ``sem_wait``, sleeps, ...) of
  the waiting thread inside the windows, summed per call name; of the other processes (DataLoader
  workers) the thread blocked longest in the windows, with its top call;
- **descheduled**: from the ``sched`` table (nsys ``--cpuctxsw``), the waiting thread's time switched out
  inside the windows; **CPU samples** (``--sample=cpu``): its most sampled leaf symbols there;
- **on CPU**: wait - blocked - descheduled (>= 0): the thread ran its own code, i.e. preprocessing in the
  dataset's ``__getitem__`` / ``collate_fn`` (with ``num_workers=0`` it runs on the main thread).

All times are int64 ns on the trace's clock; a link's rows are positional rows into ``trace.events``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.iterations import step_label
from ..trace.model import Trace
from ..units import fmt_ms_text as _ms
from ..units import fmt_pct_text as _pct
from . import _intervals as iv
from .steps import _is_dataloader

__all__ = ["data_wait_chains", "chain_finding_parts", "thread_activity", "has_system_view", "CHAIN_COLUMNS"]

#: columns of :func:`data_wait_chains`
CHAIN_COLUMNS = ("step", "pid", "tid", "step_ns", "wait_ns", "gpu_idle_ns", "blocked_ns", "descheduled_ns",
                 "on_cpu_ns", "top_calls", "worker_pid", "worker_tid", "worker_blocked_ns", "worker_top_call",
                 "top_symbols", "wait_rows", "os_rows")

_DATA_RANGE_NAMES = frozenset({"data", "dataloader", "data_loading", "load_data"})


def has_system_view(trace: Trace) -> bool:
    """True when the trace holds what nsys sees of the OS: ``osrt`` rows, or a ``sched``/``cpu_samples`` table."""
    tables = trace.tables or {}
    if bool(pred.category_in(trace.events, ("osrt",)).any()):
        return True
    return bool(len(tables.get("sched", ()))) or bool(len(tables.get("cpu_samples", ())))


def _is_wait_name(name: str) -> bool:
    return _is_dataloader(name) or name.lower().rsplit(":", 1)[-1] in _DATA_RANGE_NAMES


def _clip_sum(s: np.ndarray, e: np.ndarray, win: iv.Intervals) -> np.ndarray:
    """Length of each ``[s, e)`` inside the window set ``win`` (int64 ns)."""
    if not len(s):
        return np.zeros(0, np.int64)
    return np.asarray(iv.covered_before(win, e) - iv.covered_before(win, s), dtype=np.int64)


def _descheduled(sched: pd.DataFrame | None, pid: int, tid: int, win: iv.Intervals) -> int:
    """Time thread (pid, tid) was switched out inside ``win``: from each sched-out to the next sched-in."""
    if sched is None or not len(sched):
        return 0
    t = sched[(sched["pid"] == pid) & (sched["tid"] == tid)].sort_values("ts_ns", kind="stable")
    if not len(t):
        return 0
    ts = t["ts_ns"].to_numpy(np.int64)
    inn = t["sched_in"].to_numpy(bool)
    outs = np.flatnonzero(~inn)
    if not len(outs):
        return 0
    nxt = np.searchsorted(ts, ts[outs], side="right")
    ins = np.flatnonzero(inn)
    pos = np.searchsorted(ins, nxt)
    end = np.where(pos < len(ins), ts[ins[np.minimum(pos, len(ins) - 1)]], ts[outs])
    return int(_clip_sum(ts[outs], end, win).sum())


def _top_symbols(samples: pd.DataFrame | None, pid: int, tid: int, win: iv.Intervals, k: int = 3) -> dict[str, int]:
    if samples is None or not len(samples) or "symbol" not in samples:
        return {}
    s = samples[(samples["pid"] == pid) & (samples["tid"] == tid)]
    ts = s["ts_ns"].to_numpy(np.int64)
    inside = _clip_sum(ts, ts + 1, win) > 0
    vc = s.loc[inside, "symbol"].astype(str).value_counts().head(k)
    return {str(a): int(b) for a, b in vc.items()}


def thread_activity(trace: Trace, pid: int, tid: int, start_ns: int, end_ns: int) -> dict[str, Any]:
    """What one host thread did in ``[start_ns, end_ns)`` as nsys saw it (the last links of a chain).

    Returns
    -------
    dict
        ``os_calls`` (dict call name -> ns inside the window, longest first; ``osrt`` rows), ``blocked_ns``
        (union of those calls), ``descheduled_ns`` (``sched`` table: from each switch-out to the thread's next
        switch-in, inside the window), ``samples`` (CPU samples of the thread inside it) and ``stacks``
        (DataFrame ``call_stack`` -> ``samples``, most sampled first: the folded stacks of a flame graph of
        where the thread was; root first, frames joined by ``;`` as the nsys loader writes them). Times int64 ns.
    """
    win = iv.merge(np.array([start_ns], np.int64), np.array([end_ns], np.int64))
    ev = trace.events
    cat = ev["cat"].astype(str).to_numpy()
    sel = np.flatnonzero((cat == "osrt") & (ev["pid"].to_numpy() == pid) & (ev["tid"].to_numpy() == tid))
    ts = ev["ts_ns"].to_numpy(np.int64)[sel]
    end = ts + ev["dur_ns"].to_numpy(np.int64)[sel]
    inside = _clip_sum(ts, end, win)
    calls = pd.Series(inside, index=ev["name"].astype(str).to_numpy()[sel]).groupby(level=0).sum()
    calls = calls[calls > 0].sort_values(ascending=False)
    blocked = iv.total_ns(iv.intersect(iv.merge(ts[inside > 0], end[inside > 0]), win)) if (inside > 0).any() else 0
    tables = trace.tables or {}
    cs = tables.get("cpu_samples")
    stacks = pd.DataFrame({"call_stack": pd.Series(dtype=object), "samples": pd.Series(dtype="int64")})
    n_samples = 0
    if cs is not None and len(cs):
        th = cs[(cs["pid"] == pid) & (cs["tid"] == tid)]
        t = th["ts_ns"].to_numpy(np.int64)
        th = th[(t >= start_ns) & (t < end_ns)]
        n_samples = int(len(th))
        if n_samples and "call_stack" in th:
            vc = th["call_stack"].fillna("[unknown]").astype(str).value_counts()
            stacks = pd.DataFrame({"call_stack": vc.index.to_numpy(dtype=object), "samples": vc.to_numpy(np.int64)})
    return {"os_calls": {str(k): int(v) for k, v in calls.items()}, "blocked_ns": int(blocked),
            "descheduled_ns": _descheduled(tables.get("sched"), pid, tid, win), "samples": n_samples, "stacks": stacks}


def data_wait_chains(trace: Trace) -> pd.DataFrame:
    """Per step, the data wait of the thread that waited longest and what that thread did meanwhile.

    Returns
    -------
    DataFrame
        :data:`CHAIN_COLUMNS`, one row per step with a wait, by step: ``step``, ``pid``/``tid`` (the waiting
        thread), ``step_ns`` (span of the step's host rows), ``wait_ns`` (union of its DataLoader/``data``
        ranges), ``gpu_idle_ns`` (wait not covered by device ops; -1 on a CPU-only trace), ``blocked_ns``
        (its OS runtime calls in the wait), ``descheduled_ns``, ``on_cpu_ns`` (the rest), ``top_calls``
        (dict call -> ns, longest first, at most 3), ``worker_pid``/``worker_tid``/``worker_blocked_ns``/
        ``worker_top_call`` (the thread of another process blocked longest in the wait; -1 / 0 / "" when none),
        ``top_symbols`` (CPU samples: leaf symbol -> count), ``wait_rows``/``os_rows`` (positional rows of
        the wait ranges and of the OS calls, longest first). All times int64 ns. Empty without steps or waits.
    """
    ev = trace.events
    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in CHAIN_COLUMNS})
    if not len(ev):
        return empty
    host = np.asarray(pred.is_host(ev), dtype=bool)
    step = ev["step"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    pid = ev["pid"].to_numpy(np.int64)
    tid = ev["tid"].to_numpy(np.int64)
    cat = ev["cat"].astype(str).to_numpy()
    waitm = host & np.asarray(pred.name_mask(ev["name"], _is_wait_name), dtype=bool) & (cat != "osrt") & (step >= 0)
    if not waitm.any():
        return empty
    osrt = np.flatnonzero(host & (cat == "osrt"))
    dev = np.asarray(pred.is_device_op(ev), dtype=bool)
    busy = iv.merge(ts[dev], end[dev]) if dev.any() else None
    tables = trace.tables or {}
    rows = []
    for s in sorted(set(step[waitm].tolist())):
        in_step = host & (step == s)
        cand = np.flatnonzero(waitm & (step == s))
        best: tuple[int, int, int, iv.Intervals, np.ndarray] | None = None
        for (p, t), g in pd.Series(cand).groupby([pid[cand], tid[cand]]):
            sel = g.to_numpy()
            win = iv.merge(ts[sel], end[sel])
            w = iv.total_ns(win)
            if best is None or w > best[2]:
                best = (int(p), int(t), w, win, sel)
        assert best is not None
        p, t, wait, win, sel = best
        own = osrt[(pid[osrt] == p) & (tid[osrt] == t)]
        own_in = _clip_sum(ts[own], end[own], win)
        keep = own_in > 0
        own, own_in = own[keep], own_in[keep]
        calls = pd.Series(own_in, index=ev["name"].astype(str).to_numpy()[own]).groupby(level=0).sum()
        calls = calls.sort_values(ascending=False)
        blocked = iv.total_ns(iv.intersect(iv.merge(ts[own], end[own]), win)) if len(own) else 0
        other = osrt[pid[osrt] != p]  # DataLoader workers are processes; idle pool threads of p are not causes
        oth_in = _clip_sum(ts[other], end[other], win)
        wk = (-1, -1, 0, "")
        if len(other) and oth_in.max() > 0:
            df = pd.DataFrame({"pid": pid[other], "tid": tid[other], "ns": oth_in,
                               "name": ev["name"].astype(str).to_numpy()[other]})
            df = df[df["ns"] > 0]
            per = df.groupby(["pid", "tid"])["ns"].sum().sort_values(ascending=False)
            (wp, wt), wns = per.index[0], int(per.iloc[0])
            top = df[(df["pid"] == wp) & (df["tid"] == wt)].groupby("name")["ns"].sum().idxmax()
            wk = (int(wp), int(wt), wns, str(top))
        desched = _descheduled(tables.get("sched"), p, t, win)
        gpu_idle = -1
        if busy is not None:
            gpu_idle = int(wait - iv.total_ns(iv.intersect(busy, win)))
        os_rows = np.r_[own, other[oth_in > 0]]
        os_key = np.r_[own_in, oth_in[oth_in > 0]]
        rows.append({
            "step": int(s), "pid": p, "tid": t,
            "step_ns": int(end[in_step].max() - ts[in_step].min()) if in_step.any() else 0,
            "wait_ns": int(wait), "gpu_idle_ns": gpu_idle, "blocked_ns": int(blocked), "descheduled_ns": int(desched),
            "on_cpu_ns": int(max(wait - blocked - desched, 0)),
            "top_calls": {str(k): int(v) for k, v in calls.head(3).items()},
            "worker_pid": wk[0], "worker_tid": wk[1], "worker_blocked_ns": wk[2], "worker_top_call": wk[3],
            "top_symbols": _top_symbols(tables.get("cpu_samples"), p, t, win),
            "wait_rows": [int(r) for r in sel[np.argsort(-(end[sel] - ts[sel]), kind="stable")]],
            "os_rows": [int(r) for r in os_rows[np.argsort(-os_key, kind="stable")]],
        })
    return pd.DataFrame(rows, columns=list(CHAIN_COLUMNS))


def chain_finding_parts(trace: Trace, ratio_threshold: float) -> dict[str, Any] | None:
    """The worst step's chain as the parts of an advisor finding (title, evidence, where, next step, rows),
    or None when the trace has no system view or no step waits more than ``ratio_threshold`` of its time.

    The chain names each link with its source: the wait (Kineto's DataLoader range, the NVTX ``data`` range
    when both profilers saw it), the OS runtime calls / scheduling / CPU samples (nsys), the rest on CPU.
    """
    if not has_system_view(trace):
        return None
    ch = data_wait_chains(trace)
    if ch.empty:
        return None
    ch = ch[ch["step_ns"] > 0]
    ratio = ch["wait_ns"] / ch["step_ns"]
    ch = ch[ratio > ratio_threshold]
    if ch.empty:
        return None
    w = ch.loc[ch["wait_ns"].idxmax()]
    gpu = int(w["gpu_idle_ns"]) >= 0
    label = step_label(trace, int(w["step"]))
    head = (f"GPU idle {_ms(w['gpu_idle_ns'])} at {label}" if gpu
            else f"{label[:1].upper()}{label[1:]} waited {_ms(w['wait_ns'])} for data ({_pct(w['wait_ns'] / w['step_ns'])} of "
                 "the step, CPU-only profile)")
    links = [head, f"the main thread (tid {int(w['tid'])}) waited {_ms(w['wait_ns'])} in the DataLoader (`__next__`, "
                   "`data` range)"]
    calls = ", ".join(f"`{k}` {_ms(v)}" for k, v in w["top_calls"].items())
    if w["blocked_ns"] >= 0.5 * w["wait_ns"]:
        links.append(f"it was blocked {_ms(w['blocked_ns'])} in OS calls ({calls}; OS runtime)")
    elif w["descheduled_ns"] >= 0.5 * w["wait_ns"]:
        links.append(f"it was descheduled {_ms(w['descheduled_ns'])} (thread scheduling)")
    else:
        tail = f" ({_ms(w['blocked_ns'])} in OS calls: {calls})" if calls else " (no blocking OS call)"
        sampled = next(iter(w["top_symbols"]), None)
        where = f", sampled most in `{sampled}`" if sampled else ""
        links.append(f"it ran {_ms(w['on_cpu_ns'])} on the CPU: preprocessing in the dataset's "
                     f"`__getitem__`/collate on the main thread{tail}{where}")
    if int(w["worker_blocked_ns"]) > 0 and int(w["worker_blocked_ns"]) >= 0.5 * w["wait_ns"]:
        links.append(f"pid {int(w['worker_pid'])} tid {int(w['worker_tid'])} was blocked {_ms(w['worker_blocked_ns'])} "
                     f"in `{w['worker_top_call']}` meanwhile")
    mt = (trace.tables or {}).get("merge")
    src = mt["source"].astype(str).to_numpy() if mt is not None and len(mt) == len(trace.events) else None
    wait_rows, os_rows = list(w["wait_rows"]), list(w["os_rows"])

    def origin(rows: list[int]) -> list[dict[str, Any]]:
        if src is None or mt is None:
            return [{"row": r, "source": trace.meta.source_format} for r in rows[:20]]
        krow, nrow = mt["kineto_row"].to_numpy(), mt["nsys_row"].to_numpy()
        return [{"row": r, "source": str(src[r]), "kineto_row": int(krow[r]), "nsys_row": int(nrow[r])}
                for r in rows[:20]]

    evidence = {
        "step": int(w["step"]), "pid": int(w["pid"]), "tid": int(w["tid"]), "step_ns": int(w["step_ns"]),
        "wait_ns": int(w["wait_ns"]), "gpu_idle_ns": int(w["gpu_idle_ns"]), "blocked_ns": int(w["blocked_ns"]),
        "descheduled_ns": int(w["descheduled_ns"]), "on_cpu_ns": int(w["on_cpu_ns"]), "top_calls": dict(w["top_calls"]),
        "worker_pid": int(w["worker_pid"]), "worker_tid": int(w["worker_tid"]),
        "worker_blocked_ns": int(w["worker_blocked_ns"]), "worker_top_call": str(w["worker_top_call"]),
        "top_symbols": dict(w["top_symbols"]), "chain": links, "steps_over_threshold": int(len(ch)),
        "wait_events": origin(wait_rows), "os_events": origin(os_rows),
    }
    if len((trace.tables or {}).get("cpu_samples", ())):  # where the waiting thread was: folded flame-graph stacks
        ev = trace.events
        t0 = int(ev["ts_ns"].to_numpy()[wait_rows].min())
        t1 = int((ev["ts_ns"] + ev["dur_ns"]).to_numpy()[wait_rows].max())
        st = thread_activity(trace, int(w["pid"]), int(w["tid"]), t0, t1)["stacks"].head(5)
        evidence["stacks"] = {str(a): int(b) for a, b in zip(st["call_stack"], st["samples"])}
    return {
        "title": " ← ".join(links), "evidence": evidence, "severity": "high" if w["wait_ns"] > 0.2 * w["step_ns"] else "medium",
        "where": f"{label}, pid {int(w['pid'])} tid {int(w['tid'])}",
        "rows": wait_rows + [r for r in os_rows if r not in set(wait_rows)],
    }
