"""Step-time breakdown: the old TensorBoard PyTorch profiler plugin's *Overview* page.

Each ``ProfilerStep#N`` is split into Kernel, Memcpy, Memset, Communication, Runtime, DataLoader,
CPU Exec and Other with *priority counting*: an instant of the step is charged to the first role,
in that order, that is active at that instant (a kernel running while the host sits in the
DataLoader is Kernel time), and the rest is Other. Each role is the union of its events' intervals,
so overlapping events are never counted twice.

The algorithm follows torch-tb-profiler 0.4.3 (``torch_tb_profiler/profiler/event_parser.py``
``StepParser`` and ``overall_parser.py`` ``OverallParser``), which the tests use as an oracle:

* Steps are the host ``ProfilerStep#N`` ranges. When device ops were launched from inside steps,
  each step is extended to the end of the last device op launched by a runtime call lying wholly
  inside it, and starts no earlier than the previous step's (extended) end; the first step starts no
  earlier than the end of device ops launched before it. Trailing steps that launched no device op,
  or launched fewer than 80 % of the ops of the step before them, are dropped (the profiler may have
  missed their kernels).
* Without any ``ProfilerStep`` the steps are the iterations :func:`nbprof.trace.iterations.detect_iterations`
  finds from what repeats (optimizer steps, repeated ranges, DataLoader batches, module forwards, graph
  launches: host windows, extended like ProfilerSteps; a repeating kernel sequence: device windows, taken
  as they are), numbered 0, 1, ...; when nothing repeats the whole host window (first to last host op) is
  one step, numbered 0. :func:`nbprof.trace.iterations.step_source` says which source it was.
* DataLoader is a host range named ``enumerate(DataLoader)#...__next__`` or ``enumerate(DataPipe)#...``.
* Communication is a kernel whose External id is that of a host op named ``nccl:<collective>`` or
  ``gloo:<collective>`` (broadcast, reduce, all_reduce, all_gather, reduce_scatter), plus those host ops.

Differences from 0.4.3, which predates today's Kineto vocabulary (``legacy_tb_plugin=True`` undoes
the first one, so that 0.4.3's numbers are reproduced on any trace it can read):

* ``user_annotation`` host ranges (``record_function``) count as CPU Exec and, when so named, as
  DataLoader; 0.4.3 drops them, so it shows DataLoader 0 on every trace from torch >= 1.10.
* ``cuda_runtime``/``cuda_driver`` count as Runtime and delimit device steps; 0.4.3 only knows the
  2021 category ``Runtime`` (nbprof's loader maps both spellings to ``cuda_runtime``).
* Kernels named ``nccl*``/``rccl*`` (or with a ``collective``) also count as Communication.
* ``gpu_user_annotation`` rows named ``ProfilerStep#N`` are not steps (0.4.3 would add them as extra
  steps); the legacy ``Python`` category (mapped to ``python_function`` at load) is not CPU Exec.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.ids import present as id_present
from ..trace.iterations import detect_iterations
from ..trace.model import Trace
from . import _intervals as iv
from ._memo import per_trace

#: Host op names torch-tb-profiler 0.4.3 treats as communication (``profiler/trace.py``). The Overview keeps
#: this exact list for host ops (``nccl:all_to_all``, ``nccl:_all_gather_base`` stay CPU Exec, as in 0.4.3);
#: communication *kernels* follow the general rule, :func:`nbprof.trace.predicates.is_communication`.
NCCL_OP_NAMES = ("nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter")
GLOO_OP_NAMES = ("gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter")

#: Breakdown columns in priority order (the first active role owns an instant), then ``other_ns``.
ROLE_COLUMNS = ("kernel_ns", "memcpy_ns", "memset_ns", "communication_ns", "runtime_ns", "dataloader_ns",
                "cpu_exec_ns")
BREAKDOWN_COLUMNS = ROLE_COLUMNS + ("other_ns",)
COLUMNS = ("step", "start_ns", "end_ns", "step_ns") + BREAKDOWN_COLUMNS


def _is_dataloader(name: str) -> bool:
    return (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")) or name.startswith(
        "enumerate(DataPipe)#"
    )


@per_trace
def _row_roles(trace: Trace, *, legacy_tb_plugin: bool = False) -> dict[str, Any]:
    """The time-independent half of :func:`role_intervals`: a bool mask (aligned with ``trace.events`` rows)
    per role, plus ``"is_step"``, ``"window"`` (host ops and steps), ``"is_runtime"``, ``"is_dev"`` and
    ``"step_numbers"`` (N per step row, -1 when unnumbered). Masks depend on names and categories only,
    so a what-if replay (new times, same rows) reuses them."""
    ev = trace.events
    names = ev["name"]
    ext = ev["external_id"].to_numpy(np.int64)

    is_cpu_op = pred.is_host_op(ev, annotations=False)
    is_anno = pred.is_host_op(ev) & ~is_cpu_op
    is_step = (is_cpu_op | is_anno) & pred.is_step_row(ev)
    comm_names = set(NCCL_OP_NAMES + GLOO_OP_NAMES)
    is_comm_op = (is_cpu_op | is_anno) & pred.name_mask(names, comm_names.__contains__)
    is_dl = (is_cpu_op if legacy_tb_plugin else (is_cpu_op | is_anno)) & pred.name_mask(names, _is_dataloader)
    host_ops = is_cpu_op if legacy_tb_plugin else (is_cpu_op | is_anno)
    is_cpu_exec = host_ops & ~is_step & ~is_dl & ~is_comm_op

    is_kernel = pred.is_kernel(ev)
    comm_ext = np.unique(ext[is_comm_op & id_present(ext)])
    is_comm_kernel = is_kernel & np.isin(ext, comm_ext) & id_present(ext)
    if not legacy_tb_plugin:
        is_comm_kernel |= is_kernel & pred.is_communication(ev, where="device")
    is_memcpy = pred.is_memcpy(ev)
    is_memset = pred.is_memset(ev)
    is_runtime = pred.is_runtime(ev)
    step_nums = [pred.step_number(n) for n in names[is_step]]
    return {
        "kernel_ns": is_kernel & ~is_comm_kernel,
        "memcpy_ns": is_memcpy,
        "memset_ns": is_memset,
        "communication_ns": is_comm_kernel | is_comm_op,
        "runtime_ns": is_runtime,
        "dataloader_ns": is_dl,
        "cpu_exec_ns": is_cpu_exec,
        "is_step": is_step,
        "window": host_ops | is_step,
        "is_runtime": is_runtime,
        "is_dev": is_kernel | is_memcpy | is_memset,
        "step_numbers": np.array([-1 if n is None else n for n in step_nums], dtype=np.int64),
    }


def _roles_at(trace: Trace, ts: np.ndarray, end: np.ndarray, legacy_tb_plugin: bool,
              intervals: bool) -> dict[str, Any]:
    """:func:`role_intervals` of ``trace`` with event times ``ts``/``end`` (int64 ns per row); without
    ``intervals`` the ``"roles"`` entry (the interval unions, which :func:`step_windows` does not use) is empty."""
    k = _row_roles(trace, legacy_tb_plugin=legacy_tb_plugin)
    roles = {c: iv.merge(ts[k[c]], end[k[c]]) for c in ROLE_COLUMNS} if intervals else {}
    is_step, window_mask, is_runtime, is_dev = k["is_step"], k["window"], k["is_runtime"], k["is_dev"]
    steps = pd.DataFrame({"step": k["step_numbers"], "ts_ns": ts[is_step], "end_ns": end[is_step]})
    side = "host"
    if steps.empty and not legacy_tb_plugin:  # no ProfilerStep: the iterations found from what repeats
        b, src = detect_iterations(trace)
        if len(b):
            sr, er = b["start_row"].to_numpy(np.int64), b["end_row"].to_numpy(np.int64)
            steps = pd.DataFrame({
                "step": b["step"].to_numpy(np.int64),
                "ts_ns": np.where(b["start_at_end"].to_numpy(bool), end[sr], ts[sr]),
                "end_ns": np.where(b["end_at_end"].to_numpy(bool), end[er], ts[er]),
            })
            side = src.side
    host_window = (int(ts[window_mask].min()), int(end[window_mask].max())) if window_mask.any() else None
    corr = trace.events["correlation"].to_numpy(np.int64)
    return {
        "roles": roles,
        "steps": steps,
        "steps_side": side,
        "host_window": host_window,
        "runtime": pd.DataFrame({"ts_ns": ts[is_runtime], "end_ns": end[is_runtime], "correlation": corr[is_runtime]}),
        "device": pd.DataFrame({"ts_ns": ts[is_dev], "end_ns": end[is_dev], "correlation": corr[is_dev]}),
    }


@per_trace
def role_intervals(trace: Trace, *, legacy_tb_plugin: bool = False) -> dict[str, Any]:
    """Classify a trace's events into the Overview roles.

    Parameters
    ----------
    trace : nbprof.Trace
    legacy_tb_plugin : bool
        Reproduce torch-tb-profiler 0.4.3's treatment of ``user_annotation`` ranges (dropped unless
        they are ``ProfilerStep#N`` or a communication op) and of a trace without ``ProfilerStep`` (its
        whole host window is one step: no iteration detection).

    Returns
    -------
    dict
        ``"roles"``: dict role column -> normalised interval set (int64 ns);
        ``"steps"``: DataFrame ``step, ts_ns, end_ns`` of host ProfilerStep ranges (time order);
        ``"host_window"``: (start, end) ns of host ops, or None;
        ``"runtime"``: DataFrame of runtime calls ``ts_ns, end_ns, correlation``;
        ``"device"``: DataFrame of device ops ``ts_ns, end_ns, correlation``.
    """
    ev = trace.events
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    return _roles_at(trace, ts, end, legacy_tb_plugin, intervals=True)


def step_windows_at(trace: Trace, ts_ns: np.ndarray, dur_ns: np.ndarray) -> pd.DataFrame:
    """:func:`step_windows` of ``trace`` with its events at other times: ``ts_ns``/``dur_ns`` (int64 ns, one
    per ``trace.events`` row, e.g. a what-if replay's). The same result as ``step_windows`` of a copy of the
    trace with those columns, without classifying the rows again (names and categories are unchanged).

    Returns
    -------
    pandas.DataFrame
        As :func:`step_windows`: ``step``, ``start_ns``, ``end_ns``, ``host_start_ns``, ``host_end_ns`` (int64
        ns), ``device_ops``.
    """
    ts = np.asarray(ts_ns, dtype=np.int64)
    end = ts + np.asarray(dur_ns, dtype=np.int64)
    return step_windows(trace, _roles=_roles_at(trace, ts, end, False, intervals=False))


@per_trace
def step_windows(trace: Trace, *, legacy_tb_plugin: bool = False, _roles: dict[str, Any] | None = None) -> pd.DataFrame:
    """Step boundaries as the Overview uses them, host steps extended to their device work.

    Parameters
    ----------
    trace : nbprof.Trace
    legacy_tb_plugin : bool
        See :func:`step_breakdown`.

    Returns
    -------
    pandas.DataFrame
        ``step`` (N of ``ProfilerStep#N``; 0, 1, ... for detected iterations; 0 for the whole window of a
        trace in which nothing repeats),
        ``start_ns``, ``end_ns`` (int64 ns), ``host_start_ns``, ``host_end_ns``, ``device_ops``
        (device ops launched from inside the step). Empty when the trace has no host events.

    Notes
    -----
    ``StepParser._find_device_steps`` / ``_update_steps_duration`` of torch-tb-profiler 0.4.3.
    """
    r = _roles if _roles is not None else role_intervals(trace, legacy_tb_plugin=legacy_tb_plugin)
    st = r["steps"]
    if st.empty:
        w = r["host_window"]
        if w is None:
            return pd.DataFrame({c: pd.Series(dtype="int64") for c in
                                 ("step", "start_ns", "end_ns", "host_start_ns", "host_end_ns", "device_ops")})
        # no ProfilerStep: the host window is one step, extended to its device work like any step
        st = pd.DataFrame({"step": [0], "ts_ns": [w[0]], "end_ns": [w[1]]}).astype("int64")
    elif r.get("steps_side") == "device":
        # iterations found on the device (a repeating kernel sequence): the windows are device times already
        s_, e_ = st["ts_ns"].to_numpy(np.int64), st["end_ns"].to_numpy(np.int64)
        d_ts = np.sort(r["device"]["ts_ns"].to_numpy(np.int64))
        ops = np.searchsorted(d_ts, e_, side="left") - np.searchsorted(d_ts, s_, side="left")
        return pd.DataFrame({"step": st["step"].to_numpy(np.int64), "start_ns": s_, "end_ns": e_,
                             "host_start_ns": s_, "host_end_ns": e_, "device_ops": ops.astype(np.int64)})
    h_s = st["ts_ns"].to_numpy(np.int64)
    h_e = st["end_ns"].to_numpy(np.int64)
    n = len(st)

    # runtime calls and the device ops they launched (join on correlation id)
    rt = r["runtime"]
    rt = rt[id_present(rt["correlation"])]
    dev = r["device"]
    dev = dev[id_present(dev["correlation"])]
    joined = rt.merge(dev, on="correlation", suffixes=("_rt", "_dev"))
    dev_min = np.full(n, np.iinfo(np.int64).max)
    dev_max = np.full(n, np.iinfo(np.int64).min)
    matched = np.zeros(n, dtype=np.int64)
    any_matched = False
    first_dev_min = None
    if len(joined):
        rs = joined["ts_ns_rt"].to_numpy(np.int64)
        re_ = joined["end_ns_rt"].to_numpy(np.int64)
        k = np.searchsorted(h_s, rs, side="right") - 1
        inside = (k >= 0) & (re_ <= h_e[np.clip(k, 0, None)])
        if inside.any():
            any_matched = True
            kk = k[inside]
            np.minimum.at(dev_min, kk, joined["ts_ns_dev"].to_numpy(np.int64)[inside])
            np.maximum.at(dev_max, kk, joined["end_ns_dev"].to_numpy(np.int64)[inside])
            np.add.at(matched, kk, 1)
            # device ops not launched inside any step that end before step 0's first device op
            if matched[0] > 0:
                first_dev_min = int(dev_min[0])
        matched_dev = joined.loc[inside, ["ts_ns_dev", "end_ns_dev", "correlation"]]
    else:
        matched_dev = joined.iloc[0:0]

    starts, ends = h_s.copy(), h_e.copy()
    keep = n
    if any_matched:
        prev_end = int(h_s[0])
        if first_dev_min is not None:
            alld = r["device"]
            unmatched = ~alld["correlation"].isin(matched_dev["correlation"]) | ~id_present(alld["correlation"])
            e = alld.loc[unmatched, "end_ns"].to_numpy(np.int64)
            e = e[e < first_dev_min]
            if e.size:
                prev_end = max(prev_end, int(e.max()))
        for i in range(n):
            s_i = max(prev_end, int(h_s[i]))
            e_i = int(h_e[i])
            if matched[i] == 0:
                e_i = max(e_i, s_i)
            else:
                e_i = max(e_i, int(dev_max[i]))
                if e_i < s_i:
                    e_i = s_i
            starts[i], ends[i] = s_i, e_i
            prev_end = e_i
        if n > 1:
            last = np.flatnonzero(matched > 0)
            if last.size:
                i = int(last[-1])
                keep = i + 1
                if i > 0 and matched[i - 1] * 0.8 > matched[i]:
                    keep = i
    out = pd.DataFrame({
        "step": st["step"].to_numpy(np.int64), "start_ns": starts, "end_ns": ends,
        "host_start_ns": h_s, "host_end_ns": h_e, "device_ops": matched,
    })
    return out.iloc[:keep].reset_index(drop=True)


def step_times(trace: Trace, *, steady: bool = False) -> np.ndarray:
    """THE step time: the duration of each :func:`step_windows` window (``end_ns - start_ns``, int64 ns, time
    order). Every comparison, gate, view and verdict takes step durations from here.

    Parameters
    ----------
    trace : nbprof.Trace
    steady : bool, default False
        Only the steady-state steps (:func:`steady_state`: warm-up steps left out).

    Returns
    -------
    numpy.ndarray
        int64 ns, one per step; empty when the trace has no host events.
    """
    if steady:
        s = steady_state(trace)
        return np.asarray(s.loc[~s["skipped"], "step_ns"].to_numpy(np.int64), dtype=np.int64)
    w = step_windows(trace)
    return np.asarray((w["end_ns"] - w["start_ns"]).to_numpy(np.int64), dtype=np.int64)


@per_trace
def step_breakdown(trace: Trace, *, legacy_tb_plugin: bool = False) -> pd.DataFrame:
    """Per-step time breakdown with priority counting (TensorBoard plugin Overview semantics).

    Parameters
    ----------
    trace : nbprof.Trace
    legacy_tb_plugin : bool, default False
        Drop ``user_annotation`` ranges other than steps and communication ops, as
        torch-tb-profiler 0.4.3 does (its DataLoader row is then 0 on torch >= 1.10 traces). Use it
        to reproduce that tool's numbers; the default counts them (see the module docstring). A trace
        without ``ProfilerStep`` is then one whole-window step, as in 0.4.3 (no iteration detection).

    Returns
    -------
    pandas.DataFrame
        One row per step, in time order. Columns: ``step`` (int, the N of ``ProfilerStep#N``; 0 for
        a trace without steps, which is one whole-window step), ``start_ns``/``end_ns`` (step
        bounds after extension to device work), ``step_ns`` (= end - start), then ``kernel_ns``,
        ``memcpy_ns``, ``memset_ns``, ``communication_ns``, ``runtime_ns``, ``dataloader_ns``,
        ``cpu_exec_ns``, ``other_ns`` (int64 ns). The eight parts sum exactly to ``step_ns``.
        Empty (with these columns) when the trace has no host events.

    Notes
    -----
    Priority order and step bounds: torch-tb-profiler 0.4.3 ``OverallParser.Statistics
    .create_from_range`` and ``StepParser`` (including its quirk that a role found after the steps
    are fully covered is counted against the whole step set again). Cross-checked in
    ``tests/test_analysis_steps.py`` against ``torch_tb_profiler.profiler.data.RunProfileData``.
    """
    r = role_intervals(trace, legacy_tb_plugin=legacy_tb_plugin)
    win = step_windows(trace, _roles=r)
    if win.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in COLUMNS})
    ws = win["start_ns"].to_numpy(np.int64)
    we = win["end_ns"].to_numpy(np.int64)
    all_steps = iv.merge(ws, we)
    slots = iv.empty()
    costs = {}
    for col in ROLE_COLUMNS:
        role = r["roles"][col]
        if slots[0].size:
            rng = iv.intersect(slots, role)
        else:  # first role, or every step instant already taken (0.4.3 restarts from the steps)
            rng = role
            slots = all_steps
        costs[col] = rng
        slots = iv.subtract(slots, rng)
    costs["other_ns"] = slots
    out = pd.DataFrame({"step": win["step"].to_numpy(np.int64), "start_ns": ws, "end_ns": we,
                        "step_ns": we - ws})
    for col in BREAKDOWN_COLUMNS:
        out[col] = iv.overlap_with_windows(costs[col], ws, we).astype(np.int64)
    return out


def breakdown_average(df: pd.DataFrame) -> pd.Series:
    """Average of a :func:`step_breakdown` frame over its steps.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`step_breakdown`.

    Returns
    -------
    pandas.Series
        Index ``step_ns`` then the eight breakdown columns; float ns (mean over steps, as the
        Overview's "Average" row). All NaN when ``df`` is empty.
    """
    cols = ["step_ns", *BREAKDOWN_COLUMNS]
    return df[cols].astype("float64").mean().rename("average")


def breakdown_ratios(df: pd.DataFrame) -> pd.Series:
    """Share of the average step spent in each role (the Overview pie).

    Returns
    -------
    pandas.Series
        Index ``kernel_ratio ... other_ratio``: average role time / average step time (sums to 1).
    """
    avg = breakdown_average(df)
    total = avg["step_ns"]
    vals = {c[:-3] + "_ratio": (avg[c] / total if total and total > 0 else np.nan) for c in BREAKDOWN_COLUMNS}
    return pd.Series(vals, name="ratio")


#: A leading step this many times the median of the later steps is warm-up.
WARMUP_RATIO = 1.5
#: Top-level key of a Kineto trace written by the step watch (``nbprof.capture.watch``): the loader keeps it in
#: ``trace.meta.extra``; its ``"flagged_profiler_steps"`` lists the ``ProfilerStep#N`` numbers the watch flagged.
WATCH_KEY = "nbprof_watch"
#: Host rows that only the first iterations run: graph compilation (TorchDynamo/Inductor) and cuDNN autotuning.
_COMPILE_RE = re.compile(r"(torch/_dynamo/convert_frame\.py|compile_fx|TorchDynamo Compile|cudnnFind|"
                         r"torch/_inductor/codecache\.py)")


def _per_step_ns(trace: Trace, mask: np.ndarray, win: pd.DataFrame) -> np.ndarray:
    """Union time (ns) of the rows ``mask`` inside each window of ``win`` (``start_ns``/``end_ns``)."""
    ev = trace.events
    ts = ev["ts_ns"].to_numpy(np.int64)[mask]
    end = ts + ev["dur_ns"].to_numpy(np.int64)[mask]
    return iv.overlap_with_windows(iv.merge(ts, end), win["start_ns"].to_numpy(np.int64),
                                   win["end_ns"].to_numpy(np.int64)).astype(np.int64)


def _per_step_count(trace: Trace, mask: np.ndarray, win: pd.DataFrame) -> np.ndarray:
    ts = np.sort(trace.events["ts_ns"].to_numpy(np.int64)[mask])
    return np.asarray(np.searchsorted(ts, win["end_ns"].to_numpy(np.int64), side="left")
                      - np.searchsorted(ts, win["start_ns"].to_numpy(np.int64), side="left"), dtype=np.int64)


def flagged_steps(trace: Trace) -> frozenset[int]:
    """The steps of ``trace`` that a step watch flagged as stalls (``ProfilerStep#N`` numbers, as ``step``).

    Read from the trace's own metadata: the watch writes the top-level object :data:`WATCH_KEY` into each window it
    exports (``"flagged_profiler_steps"``: list of int; the keys are documented in ``nbprof.capture.watch_log``),
    which the Kineto loader keeps in ``trace.meta.extra`` (a merged trace: under
    ``meta.extra["kineto"]``). Empty for any other trace, and for a value that is not a list of ints.
    """
    extra = getattr(getattr(trace, "meta", None), "extra", None) or {}
    for d in (extra, extra.get("kineto") if isinstance(extra.get("kineto"), dict) else None):
        w = d.get(WATCH_KEY) if isinstance(d, dict) else None
        if isinstance(w, dict) and isinstance(w.get("flagged_profiler_steps"), list):
            return frozenset(int(n) for n in w["flagged_profiler_steps"]
                             if isinstance(n, int) and not isinstance(n, bool))
    return frozenset()


@per_trace
def steady_state(trace: Trace) -> pd.DataFrame:
    """:func:`step_breakdown` with the warm-up steps marked: what the verdict averages and what it leaves out.

    A run of *leading* steps is skipped while each one shows a first-iteration cost: it ran graph compilation
    or cuDNN autotuning (:data:`_COMPILE_RE` host rows), or it made more than twice as many device-memory
    allocator calls (:func:`nbprof.trace.predicates.is_alloc_call`) as the median later step (and at least
    one more), or it took more than :data:`WARMUP_RATIO` times the median later step and longer than every step of
    the second half, flagged stalls aside (a length that recurs later is the run's own pattern, not a first-iteration
    cost: 2 DataLoader workers too slow for the step alternate 278, 13, 310, 13, 312, 12 ms) -- unless the trace
    says the step is a stall a step watch flagged (:func:`flagged_steps`): its length is then the stall being diagnosed, not
    warm-up, and only the compile/allocator evidence skips it. With fewer than three steps nothing is skipped, and at
    least half of the steps are always kept.

    These are *the steps a page averages*: the verdict (:func:`nbprof.analysis.verdict.verdict`), the findings'
    savings and their share of the step (:func:`nbprof.analysis.findings.quantify`) and the report's step-time
    sentence all take their steps and their step time from here.

    Returns
    -------
    pandas.DataFrame
        The :func:`step_breakdown` columns (``step``, ``start_ns``, ``end_ns``, ``step_ns``, ``kernel_ns``,
        ``memcpy_ns``, ``memset_ns``, ``communication_ns``, ``runtime_ns``, ``dataloader_ns``, ``cpu_exec_ns``,
        ``other_ns``; int64 ns) plus ``skipped`` (bool) and ``skip_reason`` (str, "" when kept).
    """
    bd = step_breakdown(trace)
    out = bd.assign(skipped=False, skip_reason="")
    n = len(bd)
    if n < 3:
        return out
    ev = trace.events
    win = bd[["start_ns", "end_ns"]]
    compile_ops = _per_step_count(trace, pred.is_host(ev) & pred.name_mask(ev["name"], _COMPILE_RE.search), win)
    allocs = _per_step_count(trace, np.asarray(pred.is_alloc_call(ev), dtype=bool), win)
    dur = bd["step_ns"].to_numpy(np.int64)
    flagged = flagged_steps(trace)
    step_no = bd["step"].to_numpy(np.int64)
    skipped = np.zeros(n, dtype=bool)
    reasons = [""] * n
    # the longest step of the second half that is not a flagged stall: a leading step no longer is the run's pattern
    back = [int(d) for d, no in zip(dur[n // 2:], step_no[n // 2:], strict=True) if int(no) not in flagged]
    pattern_max = max(back) if back else 0
    for i in range(n // 2):
        later_dur = float(np.median(dur[i + 1:]))
        later_alloc = float(np.median(allocs[i + 1:]))
        if compile_ops[i] > 0 and compile_ops[i + 1:].sum() == 0:
            reasons[i] = f"warm-up: graph compilation / autotuning ({int(compile_ops[i])} compile events)"
        elif allocs[i] > max(2 * later_alloc, later_alloc + 1):
            reasons[i] = (f"warm-up: first-iteration allocator ({int(allocs[i])} device-memory allocator calls, "
                          f"later steps {later_alloc:g})")
        elif (later_dur > 0 and dur[i] > WARMUP_RATIO * later_dur and dur[i] > pattern_max
              and int(step_no[i]) not in flagged):
            reasons[i] = f"warm-up: {dur[i] / later_dur:.1f}x the median later step"
        else:
            break
        skipped[i] = True
    out["skipped"] = skipped
    out["skip_reason"] = reasons
    return out


def steady_breakdown(trace: Trace) -> pd.DataFrame:
    """The :func:`step_breakdown` rows of the steady-state steps (:func:`steady_state` not skipped): what a
    verdict averages.

    Returns
    -------
    pandas.DataFrame
        The :func:`step_breakdown` columns: ``step``, ``start_ns``, ``end_ns``, ``step_ns``, ``kernel_ns``,
        ``memcpy_ns``, ``memset_ns``, ``communication_ns``, ``runtime_ns``, ``dataloader_ns``, ``cpu_exec_ns``,
        ``other_ns`` (int64 ns).
    """
    s = steady_state(trace)
    return s.loc[~s["skipped"], list(COLUMNS)].reset_index(drop=True)


#: What can grow in a slow step: label -> the per-step time it is measured by (see :func:`step_outliers`).
GROWTH_PARTS = {"data wait": "dataloader_ns", "host sync": "sync_ns", "GC": "gc_ns", "I/O": "io_ns",
                "collective": "communication_ns", "GPU compute": "kernel_ns", "host work": "host_ns",
                "idle": "other_ns"}
_SYNC_RE = re.compile(r"(Synchronize|^cudaMemcpy(_v\d+)?$|^cudaMemcpy2D|^hipMemcpy(_v\d+)?$|^cudaEventQuery|"
                      r"^aten::item$|^aten::_local_scalar_dense$)")
_GC_RE = re.compile(r"(^gc\b|garbage.collect|<built-in function collect>|gc\.collect)", re.IGNORECASE)
_IO_RE = re.compile(r"^(read|pread|pread64|readv|write|pwrite|pwrite64|writev|open|open64|openat|fread|fwrite|"
                    r"fsync|fdatasync|recv|recvfrom|recvmsg|send|sendto|sendmsg|mmap|munmap|stat|fstat|lstat)$")


@per_trace
def step_outliers(trace: Trace, k: float = 1.5) -> pd.DataFrame:
    """Steps that took more than ``k`` times the median step, each named with what grew.

    The median is over the steady-state steps (:func:`steady_state`); warm-up steps are not outliers (they are
    skipped, with their reason). For each step the per-step time of every :data:`GROWTH_PARTS` entry is
    measured inside its window: ``dataloader_ns``, ``communication_ns``, ``kernel_ns``, ``other_ns`` from
    :func:`step_breakdown`; ``host_ns`` = ``runtime_ns + cpu_exec_ns``; ``sync_ns`` the union of host rows that
    wait for the device (``*Synchronize*``, blocking ``cudaMemcpy``, ``aten::item``); ``gc_ns`` of Python
    garbage-collection rows; ``io_ns`` of OS runtime file/socket calls (nsys ``osrt``). What grew is the part
    with the largest excess over its median across the steady steps.

    Returns
    -------
    pandas.DataFrame
        One row per outlier step (time order): ``step``, ``step_ns``, ``median_step_ns`` (int64 ns), ``ratio``
        (float, step / median), ``grew`` (a :data:`GROWTH_PARTS` label), ``grew_ns`` (int64 ns: its excess over
        its median), then each part's excess over its median (int64 ns, may be negative):
        ``dataloader_ns_excess_ns``, ``sync_ns_excess_ns``, ``gc_ns_excess_ns``, ``io_ns_excess_ns``,
        ``communication_ns_excess_ns``, ``kernel_ns_excess_ns``, ``host_ns_excess_ns``, ``other_ns_excess_ns``.
        Empty (these columns) with fewer than three steady steps.
    """
    cols = ["step", "step_ns", "median_step_ns", "ratio", "grew", "grew_ns"] + [
        f"{c}_excess_ns" for c in GROWTH_PARTS.values()]
    s = steady_state(trace)
    steady = s[~s["skipped"]].reset_index(drop=True)
    if len(steady) < 3:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "grew" else "float64" if c == "ratio" else "int64")
                             for c in cols})
    ev = trace.events
    host = pred.is_host(ev)
    names = ev["name"]
    win = steady[["start_ns", "end_ns"]]
    parts = pd.DataFrame({
        "dataloader_ns": steady["dataloader_ns"], "communication_ns": steady["communication_ns"],
        "kernel_ns": steady["kernel_ns"], "other_ns": steady["other_ns"],
        "host_ns": steady["runtime_ns"] + steady["cpu_exec_ns"],
        "sync_ns": _per_step_ns(trace, host & pred.name_mask(names, _SYNC_RE.search), win),
        "gc_ns": _per_step_ns(trace, host & pred.name_mask(names, _GC_RE.search), win),
        "io_ns": _per_step_ns(trace, host & pred.category_in(ev, ("osrt",)) & pred.name_mask(names, _IO_RE.match),
                              win),
    }).astype(np.int64)
    med = float(np.median(steady["step_ns"]))
    slow = np.flatnonzero(steady["step_ns"].to_numpy(np.float64) > k * med)
    excess = parts - parts.median().round().astype(np.int64)
    labels = list(GROWTH_PARTS)
    rows = []
    for i in slow:
        ex = [int(excess.loc[i, GROWTH_PARTS[lab]]) for lab in labels]
        j = int(np.argmax(ex))
        rows.append([int(steady.loc[i, "step"]), int(steady.loc[i, "step_ns"]), int(round(med)),
                     float(steady.loc[i, "step_ns"]) / med, labels[j], ex[j], *ex])
    out = pd.DataFrame(rows, columns=cols)
    return out.astype({c: ("float64" if c == "ratio" else object if c == "grew" else "int64") for c in cols})
