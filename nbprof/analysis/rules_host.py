"""Host-side advisor rules for the common waste users ask about (issue 30): host syncs in the step, a
per-parameter Python optimizer loop, I/O in the step (checkpoints, printing, logging), host code no op accounts
for, tiny batches (per-op overhead), a straggler rank, and the profiler's own overhead.

Each rule takes :class:`nbprof.analysis.findings.RuleInputs` and returns at most one
:class:`nbprof.analysis.findings.Finding` with evidence rows, the user's code line when the trace has Python frames
(``with_stack=True``), the knob, and a what-if scenario or the reason it has none
(``advisor.UNQUANTIFIED``). Registered in ``advisor.RULES``; thresholds in ``advisor.THRESHOLDS``.

=====================  ======================================================================================
``host_sync``          ``aten::item`` / ``aten::_local_scalar_dense`` / ``cudaStreamSynchronize`` /
                       ``cudaDeviceSynchronize`` / ``cudaEventSynchronize`` (and the ``hip`` twins) inside the
                       steps, with the Python frames reading tensor values (``.item()``, ``.tolist()``...) and the
                       user's comprehensions around them (a per-element read loop), take >= ``host_sync_ratio`` of
                       the step time. Scenario: ``remove_syncs`` when the replay has it, else all of those scaled
                       to 0 (the values read on the device instead).
``optimizer_loop``     an ``Optimizer.step#...`` range runs >= ``optimizer_loop_ops`` per-parameter ops
                       (``aten::add_``, ``mul_``, ``addcmul_``, ``lerp_``, ...) and no ``_foreach_``/``_fused_``
                       op. Scenario: the range scaled to what a foreach implementation keeps: each op's time above
                       the cheapest call of its name (the arithmetic) plus one call per op name and step. On a
                       CPU-only trace not quantified: CPU ``_foreach_`` ops loop over the tensors in C++ (one
                       dispatched op each, no multi-tensor kernel) and foreach adds its own per-parameter work.
``step_io``            Python frames of ``torch.save``, ``print``, ``logging`` or file writes inside the steps take
                       >= ``step_io_ratio`` of the step time. Scenario: those frames scaled to 0 (done every N
                       steps instead: the saving approaches it).
``unattributed_host``  no Python frames and >= ``unattributed_ratio`` of the step outside every op (the
                       verdict's ``idle``). Not quantified: nothing names the code.
``tiny_batch``         CPU-only trace whose ops (not the optimizer's, not syncs) are short (median < ``tiny_op_ns``) and many
                       (>= ``tiny_ops_per_step`` per step): per-op overhead dominates. Not quantified: the replay has no
                       model of a larger batch.
``straggler``          several ranks given: :func:`nbprof.analysis.distributed.stragglers` names a straggler.
                       Scenario: on a rank that waits, :func:`nbprof.analysis.whatif.balance_ranks` (the one
                       model of what balancing saves: each collective keeps its transfer,
                       :func:`~nbprof.analysis.distributed.wait_transfer`); on the straggler itself not
                       quantified (the saving is the others').
``profiler_overhead``  the capture recorded the unprofiled steps' wall times and
                       :func:`nbprof.analysis.overhead.profiler_overhead` says the shares are distorted. Not
                       quantified: the profiler's cost is not the job's.
``cpu_contention``     the capture recorded the scheduler's counters (:mod:`nbprof.analysis.cpu_wait`) and the
                       training thread waited for a CPU (run-queue wait) >= ``cpu_wait_ratio`` of the step:
                       other processes, or more threads than cores. Saving: measured, not replayed -- the
                       run-queue wait per step (the time the step loses waiting for a CPU). A trace without
                       those counters gets no finding (nothing in a Kineto trace shows a wait for a CPU).
=====================  ======================================================================================
"""

from __future__ import annotations

import re

import numpy as np

from ..trace import predicates as pred
from ..trace.iterations import step_label
from ..units import fmt_ms_text as ms
from ..units import fmt_pct_text as pct
from . import evidence as evi
from . import pyframes, whatif
from ._rule_util import exact
from .findings import Finding, RuleInputs, Scenario

__all__ = ["SYNC_NAMES", "IO_FRAME_RE", "OPTIMIZER_OPS"]

#: Host calls that block until the device (or a tensor's value) is ready.
SYNC_NAMES = frozenset({"aten::item", "aten::_local_scalar_dense", "cudaStreamSynchronize", "cudaDeviceSynchronize",
                        "cudaEventSynchronize", "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize",
                        "cuStreamSynchronize", "cuCtxSynchronize"})
#: Python frames of I/O in the step: checkpoints, printing, logging, file writes (not writes into an in-memory
#: ``io.BytesIO``/``io.StringIO``: pickling a batch for a DataLoader worker writes dozens of those per step).
IO_FRAME_RE = re.compile(r"serialization\.py\(\d+\): save$|^<built-in function print>$|"
                         r"logging/__init__\.py\(\d+\): (info|debug|warning|error|log|_log)$|"
                         r"^<built-in method (write|flush) of (?!_io\.(BytesIO|StringIO) )|"
                         r"^<method '(write|flush)' of (?!'_io\.(BytesIO|StringIO)')")
#: Per-parameter optimizer ops (torch.optim's for-loop implementations).
OPTIMIZER_OPS = frozenset({"aten::add_", "aten::mul_", "aten::addcmul_", "aten::addcdiv_", "aten::lerp_",
                           "aten::sqrt", "aten::div_", "aten::add", "aten::mul", "aten::div", "aten::sub_",
                           "aten::maximum", "aten::neg", "aten::clone", "aten::copy_", "aten::sqrt_"})
_OPT_RANGE = re.compile(r"^Optimizer\.step#")
#: Python frames of reading a tensor's value on the host (with_stack=True): the calls the sync ops sit in.
SYNC_FRAME_RE = re.compile(r"^<built-in method (item|tolist|cpu|numpy) of Tensor object")
#: what the ``host_sync`` scenario removes: the sync ops and calls, and the Python frames of reading the value
SYNC_PATTERN = ("^(?:" + "|".join(re.escape(n) for n in sorted(SYNC_NAMES)) + ")$|" + SYNC_FRAME_RE.pattern)


def _step_mask(inp: RuleInputs, m: np.ndarray) -> np.ndarray:
    """``m`` restricted to events starting inside a step window."""
    from .steps import step_windows

    w = step_windows(inp.trace).sort_values("start_ns")
    if w.empty:
        return m
    ts = inp.trace.events["ts_ns"].to_numpy(np.int64)
    st, en = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
    k = np.searchsorted(st, ts, side="right") - 1
    return np.asarray(m & (k >= 0) & (ts < en[np.clip(k, 0, None)]), dtype=bool)


def _step_total(inp: RuleInputs) -> tuple[int, int]:
    """``(steps, total step ns)`` (the whole trace as one step without steps)."""
    if len(inp.steps):
        return len(inp.steps), int(inp.steps["step_ns"].sum())
    return 1, int(inp.trace.duration_ns)


def _outermost(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Positions (into ``ts``) of intervals not inside an earlier one (nested matches counted once)."""
    order = np.lexsort((-end, ts))
    keep, run_end = [], -1
    for i in order:
        if end[i] > run_end:
            keep.append(i)
            run_end = end[i]
    return np.asarray(keep, dtype=np.int64)


def _code_line(inp: RuleInputs, rows: list[int]) -> str:
    return pyframes.enclosing_user_frame(inp.trace, rows[0]) if rows else ""


_LOOP_FRAME = re.compile(r"\): <(genexpr|listcomp|dictcomp|setcomp|lambda)>$")


def _read_loops(inp: RuleInputs, syncs: np.ndarray) -> np.ndarray:
    """User comprehension frames (``<genexpr>``, ``<listcomp>``...) with a sync inside: a per-element loop that
    exists to read values on the host (``sum(p.item() == t.item() for ...)``); reading on the device removes it."""
    ev = inp.trace.events
    cand = np.flatnonzero(pyframes.is_frame(inp.trace) & pred.name_mask(
        ev["name"], lambda n: _LOOP_FRAME.search(n) is not None and pyframes.is_user_frame(n)))
    out = np.zeros(len(ev), bool)
    if cand.size == 0:
        return out
    ts = ev["ts_ns"].to_numpy(np.int64)
    t = np.sort(ts[syncs])
    end = ts[cand] + ev["dur_ns"].to_numpy(np.int64)[cand]
    out[cand[np.searchsorted(t, end) > np.searchsorted(t, ts[cand])]] = True
    return out


#: ``Tensor.__iter__`` (``for v in t``): unbinds the tensor into one ``aten::select`` per element
_TENSOR_ITER = re.compile(r"torch/_tensor\.py\(\d+\): __iter__$")


def _tensor_reads(inp: RuleInputs, syncs: np.ndarray) -> np.ndarray:
    """``Tensor.__iter__`` frames whose elements are then read one by one on the host: a frame holding ``k >= 2``
    ``aten::select`` ops followed, on its thread and in its step, by at least ``k`` ``aten::item`` syncs (``sum(v.item()
    for v in t)``: the iterator is built before the loop's own frame, so the loop frame does not cover its ``aten::unbind``
    -- one select per element, most of such a loop's time on CPU). Reading on the device removes it with the reads."""
    from .steps import step_windows

    ev = inp.trace.events
    cand = np.flatnonzero(pyframes.is_frame(inp.trace) & pred.name_mask(ev["name"], lambda n: _TENSOR_ITER.search(n) is not None))
    out = np.zeros(len(ev), bool)
    w = step_windows(inp.trace).sort_values("start_ns")
    if cand.size == 0 or w.empty:
        return out
    ts, dur, tid = ev["ts_ns"].to_numpy(np.int64), ev["dur_ns"].to_numpy(np.int64), ev["tid"].to_numpy()
    host = ev["device"].to_numpy() < 0
    sel = np.flatnonzero(pred.name_mask(ev["name"], lambda n: n == "aten::select") & host)
    item = np.flatnonzero(syncs & pred.name_mask(ev["name"], lambda n: n == "aten::item"))
    st, en = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
    for c in cand:
        k = int(np.searchsorted(st, ts[c], side="right") - 1)
        if k < 0 or ts[c] >= en[k]:
            continue
        end = ts[c] + dur[c]
        n_sel = int(((ts[sel] >= ts[c]) & (ts[sel] < end) & (tid[sel] == tid[c])).sum())
        n_read = int(((ts[item] >= end) & (ts[item] < en[k]) & (tid[item] == tid[c])).sum())
        out[c] = n_sel >= 2 and n_read >= n_sel
    return out


def _sync_scenario(loop_names: list[str]) -> Scenario:
    if not loop_names:
        return "remove_syncs"
    pattern = SYNC_PATTERN + ("|" + exact(loop_names) if loop_names else "")
    return whatif.scale(pattern, 0.0, label="host syncs, tensor reads" + (" and their loops" if loop_names else ""))


def _outside_optimizer(inp: RuleInputs) -> np.ndarray:
    """Bool mask of events not starting inside an ``Optimizer.step#`` range: the syncs a for-loop optimizer makes
    itself (Adam's per-parameter ``step.item()``) are the ``optimizer_loop`` cause (fused / foreach), not the user's
    host syncs (one finding per cause)."""
    ev = inp.trace.events
    opt = np.flatnonzero(pred.name_mask(ev["name"], lambda n: _OPT_RANGE.match(n) is not None)
                         & (ev["device"].to_numpy() < 0))
    out = np.ones(len(ev), bool)
    if opt.size == 0:
        return out
    st = ev["ts_ns"].to_numpy(np.int64)[opt]
    en = st + ev["dur_ns"].to_numpy(np.int64)[opt]
    order = np.argsort(st, kind="stable")
    st, en = st[order], np.maximum.accumulate(en[order])  # the latest end of any range started so far
    ts = ev["ts_ns"].to_numpy(np.int64)
    k = np.searchsorted(st, ts, side="right") - 1
    out[(k >= 0) & (ts < en[np.clip(k, 0, None)])] = False
    return out


def rule_host_sync(inp: RuleInputs) -> list[Finding]:
    """Host syncs (``.item()``, ``.cpu()``, ``torch.cuda.synchronize()``) inside the steps, outside the optimizer's
    own step (:func:`_outside_optimizer`)."""
    ev = inp.trace.events
    frames = pyframes.is_frame(inp.trace) & pred.name_mask(ev["name"], SYNC_FRAME_RE.match)
    m = _step_mask(inp, (pred.name_mask(ev["name"], SYNC_NAMES.__contains__) | frames) & (ev["device"].to_numpy() < 0)
                   & _outside_optimizer(inp))
    if not m.any():
        return []
    loops = _read_loops(inp, m) | _tensor_reads(inp, m)
    frames |= loops
    m |= loops
    n_steps, total = _step_total(inp)
    ts = ev["ts_ns"].to_numpy(np.int64)[m]
    end = ts + ev["dur_ns"].to_numpy(np.int64)[m]
    top = _outermost(ts, end)
    sync_ns = int((end[top] - ts[top]).sum())
    ratio = sync_ns / total if total > 0 else 0.0
    if ratio < inp.th("host_sync_ratio"):
        return []
    names = sorted({str(n) for n in ev["name"].astype(object).to_numpy()[m & ~frames]})
    calls = int((m & ~frames & ~pred.name_mask(ev["name"], lambda n: n == "aten::_local_scalar_dense")).sum())
    rows = evi.longest(inp.trace, m & ~frames) or evi.longest(inp.trace, m)
    return [Finding(
        "host_sync", "high" if ratio > 0.2 else "medium",
        f"{calls} host syncs ({', '.join(names[:3])}) hold the host {pct(ratio)} of the step time, "
        f"{calls / n_steps:.0f} per step",
        {"sync_ns": sync_ns, "sync_ratio": float(ratio), "calls": calls, "names": names, "steps": n_steps},
        step_label(inp.trace, inp.steps["step"]),
        "Each .item(), .cpu(), print(tensor) or torch.cuda.synchronize() waits until the device is done; keep the "
        "values on the device (accumulate losses as tensors) and read them every N steps.",
        evidence_rows=rows, scenario=_sync_scenario(sorted({str(n) for n in ev["name"].astype(object).to_numpy()[loops]})),
        part="sync_wait" if inp.trace.has_device else "python" if loops.any() else "host", code_line=_code_line(inp, rows),
        knob="read metrics every N steps (loss.detach() accumulated on the device)",
    )]


def rule_optimizer_loop(inp: RuleInputs) -> list[Finding]:
    """A per-parameter Python optimizer loop (``foreach=False``) inside ``Optimizer.step``."""
    ev = inp.trace.events
    names = ev["name"]
    rng = np.flatnonzero(pred.name_mask(names, _OPT_RANGE.match) & pred.is_host_op(ev))
    if rng.size == 0:
        return []
    from .critical_path import inside_ranges

    host = np.flatnonzero(pred.is_host_op(ev, annotations=False))
    inside = host[inside_ranges(ev, rng, host, ev["ts_ns"].to_numpy(np.int64)[host])]
    nm = ev["name"].astype(object).to_numpy()
    in_names = nm[inside]
    if any(str(n).startswith(("aten::_foreach_", "aten::_fused_")) for n in set(in_names)):
        return []
    per = inside[np.array([str(n) in OPTIMIZER_OPS for n in in_names], dtype=bool)]
    ops_per_step = per.size / rng.size
    if ops_per_step < inp.th("optimizer_loop_ops"):
        return []
    dur = ev["dur_ns"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    per = per[_outermost(ts[per], ts[per] + dur[per])]  # an op inside another counts once
    opt_ns = int(dur[rng].sum())
    # a foreach implementation does the same arithmetic in one op per kind: it keeps each op's time above the
    # cheapest call of its name (the arithmetic) plus one call's overhead per kind and step; the rest of the range
    # (the per-op overhead and the Python loop around the ops) goes
    pn = nm[per].astype(str)
    floor = {k: float(dur[per][pn == k].min()) for k in set(pn)}
    arithmetic = float(sum(dur[per][i] - floor[k] for i, k in enumerate(pn)))
    kinds = len(floor)
    kept = arithmetic + rng.size * sum(floor.values())
    saved = max(0.0, opt_ns - kept)
    overhead = float(np.mean(list(floor.values())))
    factor = max(0.0, 1.0 - saved / opt_ns) if opt_ns > 0 else 1.0
    opt_names = sorted({str(n) for n in nm[rng]})
    _n_steps, total = _step_total(inp)
    rows = evi.longest(inp.trace, np.isin(np.arange(len(ev)), rng))
    return [Finding(
        "optimizer_loop", "medium" if opt_ns > 0.1 * total else "low",
        f"{opt_names[0]} runs {ops_per_step:.0f} per-parameter ops per step ({pct(opt_ns / max(total, 1))} of the "
        "step time): a Python loop over the parameters",
        {"optimizer_ns": opt_ns, "ops": int(per.size), "ops_per_step": float(ops_per_step), "op_kinds": kinds,
         "per_op_overhead_ns": overhead, "arithmetic_ns": arithmetic, "estimated_saving_ns": saved,
         "ranges": int(rng.size)},
        step_label(inp.trace, inp.steps["step"]),
        "Use the multi-tensor implementation: torch.optim.<Opt>(..., foreach=True) (or fused=True for Adam/AdamW/SGD "
        "on GPU); one kernel per op kind instead of one per parameter." if inp.trace.has_device else
        "Use the fused implementation: torch.optim.<Opt>(..., fused=True) (Adam/AdamW/SGD on CPU): foreach=True on "
        "CPU still runs one op per parameter, from C++.",
        evidence_rows=rows, part="host", code_line=_code_line(inp, rows),
        knob="foreach=True (or fused=True)" if inp.trace.has_device else "fused=True",
        scenario=whatif.scale(exact(opt_names), factor, label=f"optimizer step x{factor:.2f} (foreach)")
        if inp.trace.has_device else None,
    )]


def rule_step_io(inp: RuleInputs) -> list[Finding]:
    """Checkpoints, printing, logging, file writes inside the steps (Python frames)."""
    ev = inp.trace.events
    m = _step_mask(inp, pyframes.is_frame(inp.trace) & pred.name_mask(ev["name"], IO_FRAME_RE.search))
    if not m.any():
        return []
    rows_all = np.flatnonzero(m)
    ts = ev["ts_ns"].to_numpy(np.int64)[rows_all]
    end = ts + ev["dur_ns"].to_numpy(np.int64)[rows_all]
    top = rows_all[_outermost(ts, end)]
    io_ns = int(ev["dur_ns"].to_numpy(np.int64)[top].sum())
    n_steps, total = _step_total(inp)
    ratio = io_ns / total if total > 0 else 0.0
    if ratio < inp.th("step_io_ratio"):
        return []
    nm = ev["name"].astype(object).to_numpy()
    names = sorted({str(n) for n in nm[top]})
    kind = ("checkpoint (torch.save)" if any("serialization" in n for n in names)
            else "print" if any("print" in n for n in names) else "logging / file writes")
    mask = np.zeros(len(ev), bool)
    mask[top] = True
    rows = evi.longest(inp.trace, mask)
    return [Finding(
        "step_io", "high" if ratio > 0.2 else "medium",
        f"I/O in the step: {kind} takes {pct(ratio)} of the step time ({len(top)} calls in {n_steps} steps)",
        {"io_ns": io_ns, "io_ratio": float(ratio), "calls": int(len(top)), "frames": names[:10]},
        step_label(inp.trace, inp.steps["step"]),
        "Checkpoint every N steps (or asynchronously: torch.distributed.checkpoint.async_save), log every N steps, "
        "and never print a tensor in the loop (it syncs and formats on the host).",
        evidence_rows=rows, part="python", code_line=_code_line(inp, rows),
        knob="checkpoint/log every N steps",
        scenario=whatif.scale(exact(names), 0.0, label=f"{len(top)} I/O calls"),
    )]


def rule_unattributed_host(inp: RuleInputs) -> list[Finding]:
    """Time outside every op on a trace without Python frames: code nothing names."""
    if pyframes.is_frame(inp.trace).any() or inp.steps.empty:
        return []
    other, step = float(inp.steps["other_ns"].sum()), float(inp.steps["step_ns"].sum())
    ratio = other / step if step > 0 else 0.0
    if ratio < inp.th("unattributed_ratio"):
        return []
    return [Finding(
        "unattributed_host", "high" if ratio > 0.3 else "medium",
        f"{pct(ratio)} of the step time runs outside every profiled op: host code the trace does not name",
        {"other_ns": int(other), "step_ns": int(step), "ratio": float(ratio)},
        step_label(inp.trace, inp.steps["step"]),
        "Record Python frames to see which code: torch.profiler.profile(with_stack=True); common causes are "
        "checkpoints, logging, metrics on the host and Python-side data handling.",
        evidence_rows=evi.step_rows(inp.trace, inp.steps["step"]), part="idle", knob="with_stack=True",
    )]


def rule_tiny_batch(inp: RuleInputs) -> list[Finding]:
    """Per-op overhead dominating a CPU step: many short leaf ops."""
    tr = inp.trace
    if tr.has_device or inp.steps.empty:
        return []
    ev = tr.events
    m = _step_mask(inp, pred.is_host_op(ev, annotations=False) & ~pred.is_step_row(ev)
                   & pred.name_mask(ev["name"], lambda n: n.startswith("aten::") and n not in SYNC_NAMES))
    opt = np.flatnonzero(pred.name_mask(ev["name"], _OPT_RANGE.match) & pred.is_host_op(ev))
    if opt.size and m.any():  # the optimizer's ops are the optimizer_loop rule's; the batch sizes the model's ops
        from .critical_path import inside_ranges

        rows = np.flatnonzero(m)
        m[rows[inside_ranges(ev, opt, rows, ev["ts_ns"].to_numpy(np.int64)[rows])]] = False
    if not m.any():
        return []
    dur = ev["dur_ns"].to_numpy(np.int64)[m]
    n_steps = len(inp.steps)
    per_step = m.sum() / n_steps
    med = float(np.median(dur))
    if med >= inp.th("tiny_op_ns") or per_step < inp.th("tiny_ops_per_step"):
        return []
    overhead = float(np.percentile(dur, 10)) * m.sum()
    step = float(inp.steps["step_ns"].sum())
    return [Finding(
        "tiny_batch", "medium",
        f"{per_step:.0f} ops per step with a median of {med / 1e3:.0f} µs each: per-op overhead dominates "
        "(a small batch)",
        {"ops_per_step": float(per_step), "median_op_ns": med, "overhead_estimate_ns": overhead,
         "overhead_ratio": overhead / step if step > 0 else float("nan")},
        step_label(inp.trace, inp.steps["step"]),
        "Give each op more work: a larger batch (gradient accumulation keeps the optimisation the same), or fuse "
        "the small ops (torch.compile).",
        evidence_rows=evi.step_rows(tr, inp.steps["step"]), part="host", knob="batch_size x4 (or torch.compile)",
    )]


def rule_straggler(inp: RuleInputs) -> list[Finding]:
    """The rank the others wait for (several ranks given)."""
    if len(inp.ranks) < 2:
        return []
    from .distributed import stragglers, wait_transfer

    wt = wait_transfer(list(inp.ranks))
    s = stragglers(wt)
    if s.empty or not s["straggler"].any():
        return []
    r = s[s["straggler"]].sort_values("caused_wait_ns", ascending=False).iloc[0]
    n_steps = max(int(r["steps"]), 1)
    rank = int(r["rank"])
    victims = s[s["rank"] != rank]
    me = int(inp.trace.meta.rank)
    # the one model of what balancing saves: whatif.balance_ranks (each collective of this rank keeps only its
    # transfer; the thread that waited resumes when it ends); on the straggler itself there is no wait to lose
    sc: Scenario | None = whatif.balance_ranks(inp.ranks) if me != rank and (wt["rank"] == me).any() else None
    ev = inp.trace.events
    rows = evi.longest(inp.trace, pred.is_communication(ev))
    return [Finding(
        "straggler", "high",
        f"rank {rank} is the straggler in {int(r['straggler_steps'])} of {n_steps} steps: the other ranks wait "
        f"{ms(int(r['caused_wait_ns']) / n_steps)} per step for it",
        {"rank": rank, "straggler_steps": int(r["straggler_steps"]), "steps": n_steps,
         "caused_wait_ns": int(r["caused_wait_ns"]), "victims": [int(v) for v in victims["rank"]],
         "victims_wait_ns": int(victims["own_wait_ns"].sum()), "this_rank": me},
        f"rank {rank}" + (f" (this trace: rank {me}, which waits for it)" if me != rank else " (this trace)"),
        f"Make rank {rank} as fast as the others: look at its own verdict (its DataLoader, host work, input sizes); "
        "balance the data per rank (a DistributedSampler with equal shards, sequence bucketing).",
        evidence_rows=rows, part="communication", knob=f"balance rank {rank}'s work", scenario=sc,
    )]


def rule_profiler_overhead(inp: RuleInputs) -> list[Finding]:
    """The profiler's own cost, where the capture recorded the unprofiled steps' wall times: the one definition is
    :func:`nbprof.analysis.overhead.profiler_overhead` (median profiled / median unprofiled step); a finding when
    it is ``distorted`` (ratio above ``DISTORTION_RATIO``)."""
    from .overhead import profiler_overhead

    ov = profiler_overhead(inp.trace)
    if ov is None or not ov.distorted:
        return []
    return [Finding(
        "profiler_overhead", "high" if ov.ratio >= 2 else "medium",
        f"the profiler made each step {ov.ratio:.2f}x as long ({ms(ov.profiled_median_ns)} profiled vs "
        f"{ms(ov.unprofiled_median_ns)} unprofiled, medians): host shares are inflated",
        {"profiled_step_ns": ov.profiled_median_ns, "unprofiled_step_ns": ov.unprofiled_median_ns,
         "ratio": float(ov.ratio), "profiled_steps": list(ov.profiled_steps),
         "unprofiled_steps": list(ov.unprofiled_steps)},
        step_label(inp.trace, inp.steps["step"]),
        "Read host shares with this in mind; record fewer things (record_shapes/with_stack/profile_memory off) "
        "for a closer picture of the unprofiled run.",
        part="", knob="record_shapes=False, with_stack=False",
    )]



def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _contention_cause(cw: object) -> tuple[str, str, str]:
    """``(who competed, next step, knob)`` of a CPU contention: this process's own intra-op threads and child processes
    beyond the CPUs it may use (``os.sched_getaffinity``), and/or other tasks on an overloaded machine (runnable tasks,
    load average above its CPUs); ``cw``: :class:`nbprof.analysis.cpu_wait.CpuWait`."""
    from .cpu_wait import CpuWait

    assert isinstance(cw, CpuWait)
    cpus, k, workers = cw.cpus, cw.torch_threads, cw.child_processes or 0
    own = (k or 1) + workers  # the intra-op pool (the training thread is one of it) and the child processes
    machine = cw.cpu_count or cpus
    run = f"{cw.runnable:.0f} runnable tasks" if cw.runnable == cw.runnable else ""
    load = f"load average {cw.loadavg:.1f}" if cw.loadavg is not None else ""
    on_machine = (f"the machine: {', '.join(x for x in (run, load) if x)} on {_plural(machine, 'CPU')}"
                  if machine and (run or load) else "")
    parts, knob, who = [], "", []
    if cpus and own > cpus:
        n = max(1, cpus - workers)
        what = (_plural(k, "intra-op thread") if k else "its threads") + (
            f" and {_plural(workers, 'child process')} (DataLoader workers)" if workers else "")
        who.append(f"{what} on {_plural(cpus, 'CPU')}")
        parts.append(f"This process alone runs {what} on {_plural(cpus, 'CPU')}: use fewer intra-op threads "
                     f"(torch.set_num_threads({n}))" + (" and fewer DataLoader workers" if workers else "") + ".")
        knob = f"torch.set_num_threads({n})" + (" / fewer DataLoader workers" if workers else "")
    overloaded = machine and (cw.runnable > machine or (cw.loadavg is not None and cw.loadavg > machine))
    if not parts or overloaded:
        parts.append("Other processes want the same CPUs" + (f" ({on_machine})" if on_machine else "") + ": run where "
                     "the cores are free, give the job cores of its own (taskset, a CPU quota) or lower the others' "
                     "priority (nice).")
        knob = knob or "cores of its own (an idle machine / taskset)"
    if on_machine:
        who.append(on_machine)
    return "; ".join(who), " ".join(parts) + " The op times in this trace include the wait.", knob


def rule_cpu_contention(inp: RuleInputs) -> list[Finding]:
    """The training thread waiting for a CPU (run-queue wait, recorded by the capture: :mod:`nbprof.analysis.cpu_wait`)
    for at least ``cpu_wait_ratio`` of the step. The saving is the measured wait (no replay: the trace has no event
    for it), per step in ``step_savings_ns``."""
    from .cpu_wait import cpu_wait

    cw = cpu_wait(inp.trace, inp.steps if len(inp.steps) else None)
    if cw is None or not cw.ratio >= inp.th("cpu_wait_ratio"):
        return []
    ev = inp.trace.events
    rows = evi.longest(inp.trace, _step_mask(inp, pred.is_host_op(ev, annotations=False) & ~pred.is_step_row(ev)))
    who, nxt, knob = _contention_cause(cw)
    threads = (f"; the process's {_plural(cw.threads, 'thread')} waited {ms(cw.threads_runqueue_ns, 1)} per step in all"
               if cw.threads_runqueue_ns == cw.threads_runqueue_ns and cw.threads > 1 else "")
    return [Finding(
        "cpu_contention", "high" if cw.ratio > 0.3 else "medium",
        f"CPU contention: the training thread waited {ms(cw.runqueue_ns, 1)} for a CPU in each "
        f"{ms(cw.step_ns, 1)} step ({pct(cw.ratio)})" + (f": {who}" if who else ""),
        {"runqueue_ns": int(round(cw.runqueue_ns)), "step_ns": int(round(cw.step_ns)), "ratio": float(cw.ratio),
         "threads_runqueue_ns": cw.threads_runqueue_ns, "threads_cpu_ns": cw.threads_cpu_ns, "threads": cw.threads,
         "runnable": cw.runnable, "cpus": cw.cpus, "cpu_count": cw.cpu_count, "torch_threads": cw.torch_threads,
         "child_processes": cw.child_processes, "loadavg": cw.loadavg, "steps": list(cw.steps),
         "step_runqueue_ns": {str(k): v for k, v in cw.step_runqueue_ns.items()}},
        step_label(inp.trace, list(cw.steps)) + threads,
        nxt, evidence_rows=rows, part="host", knob=knob,
        predicted_saving_ns=int(round(cw.runqueue_ns)), step_savings_ns=dict(cw.step_runqueue_ns), step_ns=cw.step_ns,
        saving_reason="measured, not replayed: the training thread's run-queue wait per step (schedstat, recorded by the "
                      "capture), the time the step lost waiting for a CPU; with a CPU free for it the step loses that "
                      "wait (tests/test_cpu_contention.py: the wait a change removed was its measured saving within "
                      "25%)",
    )]
