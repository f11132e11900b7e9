"""Advisor v2: rules that turn the analyses into findings with evidence, a next step, and the step time
the fix would save, ranked by that saving.

Each rule reads one or more analyses (never the raw file) and returns at most one
:class:`Finding` per device / trace, with ``evidence_rows`` (positional row ids into ``trace.events``
of the events that prove it, longest first; :mod:`nbprof.analysis.evidence`). Thresholds live in
:data:`THRESHOLDS` and can be overridden per call. Rules and their sources:

``dataloader``          DataLoader share of the average step > 5 % (torch-tb-profiler 0.4.3
                        ``RunProfileData.analyze``, same threshold and formula).
``host_wait``           GPU idle >= 15 % of its busy span and >= 50 % of that idle is host wait
                        (HTA idle-time breakdown).
``low_utilization``     device busy < 50 % of its span.
``memcpy``              pageable host memory in memcpys (``Memcpy HtoD (Pageable -> Device)``:
                        the copy is staged and synchronous) or synchronous ``cudaMemcpy*`` calls.
``launch_bound``        a step where most ops are shorter than their launch call and the GPU is
                        mostly idle (:func:`nbprof.analysis.launch.launch_bound_phases`).
``communication``       communication > 10 % of the average step (step breakdown).
``memory_peak``         peak allocated memory > 90 % of the device's ``totalGlobalMem``.
``tensor_cores``        on an NVIDIA GPU with Tensor Cores (compute capability >= 7.0), GEMM /
                        convolution kernels take >= 10 % of kernel time but < 20 % of that runs in
                        Tensor Core kernels (names per torch-tb-profiler's ``TC_Allowlist`` plus
                        newer cuBLAS/CUTLASS spellings).
``efficiency``          ops with >= 5 % of device time below 30 % of their roofline
                        (:mod:`nbprof.analysis.efficiency`); fp32 GEMMs / convolutions >= 10 % of device
                        time on a device with TF32/BF16 Tensor Cores (next step: mixed precision);
                        memory-bound elementwise/norm/softmax ops >= 15 % of device time (torch.compile).
``dominant_kernel``     one kernel name takes >= 25 % of a device's kernel time.
``allocator``           device / pinned memory allocation and free calls (``cudaMalloc``, ``cudaFree``,
                        ``hipFree``...: :data:`nbprof.trace.predicates.ALLOC_CALL_RE`) take >= 5 % of the step
                        time: the caching allocator is not reusing memory (or the profile is of warm-up steps).
``data_stall_chain``    on a trace with the OS view of nsys (``nbprof.merge``), the worst step waiting for data
                        (> ``dataloader_ratio`` of it) as a causal chain: GPU idle / step wait <- the DataLoader
                        range <- blocked OS calls / descheduled / on CPU (:mod:`nbprof.analysis.causal`).

Predicted savings
-----------------
:func:`advise` gives every finding ``predicted_saving_ns``: the mean step time (ns) that
:func:`nbprof.analysis.whatif.predict` says the fix saves, replaying the trace's dependency graph (built
once per trace, shared by all findings). The scenario of each rule (:data:`RULE_SCENARIOS`, or the
finding's own ``scenario`` when it depends on the evidence):

====================  ===============================================================================
``dataloader``        ``"no_dataloader"``: the DataLoader waits take no time (an upper bound; workers
                      that keep up get close to it)
``data_stall_chain``  ``"no_dataloader"``, as ``dataloader``: the chain explains the same wait, so it is folded into the
                      ``dataloader`` finding (``evidence["same_cause"]``; :func:`~nbprof.analysis.findings.one_per_cause`)
``host_wait``         ``"no_host_gaps"``: device ops stop waiting for their launches, host work as it
                      was (a host-bound step saves little: the host-side findings say what to cut)
``launch_bound``      ``"cuda_graphs"``: ``no_host_gaps`` and the launch calls take no host time
``communication``     ``"overlap_communication"``: communication kernels fully overlapped (upper bound)
``memcpy``            ``scale(<the pageable copies>, 0.5)``: pinned memory, about twice the bandwidth of
                      a staged pageable copy (synchronous ``cudaMemcpy`` calls alone: not quantified)
``tensor_cores``      ``scale(<the non-Tensor-Core GEMM/conv kernels>, 0.5)``: a conservative 2x
``dominant_kernel``   ``scale(<that kernel>, 0.5)``: what making it 2x faster saves
``allocator``         ``scale(<those calls>, 0)``: what a warm caching allocator (no such call in the step) saves
``efficiency``        ``scale(<the ops' kernels>, f)``: below-roof ops brought to 30 % of their roof;
                      fp32 matrix kernels 2x faster (conservative; the Tensor-Core peak ratio is larger);
                      memory-bound chains at the bandwidth roof (a lower bound on what fusion saves)
``low_utilization``   not quantified: a symptom, whose time the finding naming its cause carries
``memory_peak``       not quantified: memory headroom, not time
====================  ===============================================================================

The host-side rules for common waste (``host_sync``, ``optimizer_loop``, ``step_io``, ``unattributed_host``,
``tiny_batch``, ``straggler``, ``profiler_overhead``, ``cpu_contention``) and their scenarios (``cpu_contention``:
a measured saving, the run-queue wait, kept by :func:`~nbprof.analysis.findings.quantify`): :mod:`nbprof.analysis.rules_host`;
the device rules' code: :mod:`nbprof.analysis.rules_device`.

A finding that cannot be quantified (no scenario, a trace without steps) has ``predicted_saving_ns``
None and says why in ``saving_reason``. The ranking is :func:`nbprof.analysis.findings.rank` (the only one):
findings with a saving > 0 first (largest first), the others listed apart. A new rule is one function
``rule(inp: RuleInputs) -> list[Finding]`` plus one line in :data:`RULES`; it either sets ``Finding.scenario``
or adds its rule key to :data:`RULE_SCENARIOS` / :data:`UNQUANTIFIED`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ..trace import predicates as pred
from ..trace.iterations import step_label
from ..trace.model import Trace
from ..units import fmt_ms_text as ms
from ..units import fmt_pct_text as pct
from . import evidence as evi
from . import rules_device as rd
from . import rules_host as rh
from . import whatif
from ._memo import per_trace
from ._rule_util import exact
from .findings import Finding, RuleInputs, Scenario, findings_frame, one_per_cause, quantify, rank
from .steps import _is_dataloader

__all__ = ["Finding", "RULES", "RULE_SCENARIOS", "RULE_PARTS", "RULE_KNOBS", "UNQUANTIFIED", "THRESHOLDS", "advise", "findings_frame"]

THRESHOLDS: dict[str, float] = {
    "dataloader_ratio": 0.05,
    "host_wait_idle_ratio": 0.15,
    "host_wait_share": 0.5,
    "utilization_ratio": 0.5,
    "communication_ratio": 0.10,
    "memory_peak_ratio": 0.90,
    "gemm_time_ratio": 0.10,
    "tensor_core_ratio": 0.20,
    "efficiency_time_ratio": 0.05,
    "efficiency_peak_ratio": 0.30,
    "efficiency_fusion_ratio": 0.15,
    "dominant_kernel_ratio": 0.25,
    "allocator_ratio": 0.05,
    "host_sync_ratio": 0.01,
    "optimizer_loop_ops": 16,
    "step_io_ratio": 0.02,
    "unattributed_ratio": 0.10,
    "tiny_op_ns": 30_000,
    "tiny_ops_per_step": 20,
    "cpu_wait_ratio": 0.10,
}


# ------------------------------------------------------------------ rules
def _rule_dataloader(inp: RuleInputs) -> list[Finding]:
    trace, th = inp.trace, inp.thresholds
    df = inp.steps
    if df.empty:
        return []
    from .steps import breakdown_average

    avg = breakdown_average(df)
    ratio = avg["dataloader_ns"] / avg["step_ns"] if avg["step_ns"] > 0 else 0.0
    if not ratio > th["dataloader_ratio"]:
        return []
    worst = df.loc[df["dataloader_ns"].idxmax()]
    return [Finding(
        "dataloader", "high" if ratio > 0.2 else "medium",
        f"{pct(ratio, 1)} of the average step is spent waiting for the DataLoader",
        {"dataloader_ratio": float(ratio), "avg_dataloader_ns": float(avg["dataloader_ns"]),
         "avg_step_ns": float(avg["step_ns"]), "steps": int(len(df)),
         "worst_step": int(worst["step"]), "worst_step_dataloader_ns": int(worst["dataloader_ns"])},
        step_label(trace, df["step"]),
        "Load data in parallel and ahead of the model: DataLoader(num_workers=N>0, prefetch_factor=2..4, "
        "persistent_workers=True), pin_memory=True with .to(device, non_blocking=True); move heavy "
        "preprocessing out of __getitem__ or cache it.",
        evidence_rows=evi.by_name(trace, _is_dataloader, where="host"),
    )]


def _rule_host_wait(inp: RuleInputs) -> list[Finding]:
    trace, th = inp.trace, inp.thresholds
    ib = inp.idle
    ut = inp.util
    out: list[Finding] = []
    if ib.empty:
        return out
    per = ib.groupby("device")[["idle_ns", "host_wait_ns", "kernel_wait_ns", "other_ns"]].sum()
    for dev, r in per.iterrows():
        u = ut[ut["device"] == dev].iloc[0]
        idle_ratio = u["idle_ns"] / u["span_ns"] if u["span_ns"] > 0 else 0.0
        stream_idle = r["idle_ns"]
        share = r["host_wait_ns"] / stream_idle if stream_idle > 0 else 0.0
        if idle_ratio >= th["host_wait_idle_ratio"] and share >= th["host_wait_share"]:
            worst = ib[ib["device"] == dev].sort_values("host_wait_ns", ascending=False).iloc[0]
            out.append(Finding(
                "host_wait", "high" if idle_ratio >= 0.3 else "medium",
                f"GPU {dev} is idle {pct(idle_ratio, 1)} of its active span, {pct(share)} of it waiting on the host",
                {"device": int(dev), "idle_ratio": float(idle_ratio), "host_wait_share": float(share),
                 "host_wait_ns": int(r["host_wait_ns"]), "kernel_wait_ns": int(r["kernel_wait_ns"]),
                 "other_ns": int(r["other_ns"]), "span_ns": int(u["span_ns"]),
                 "worst_stream": int(worst["stream"])},
                f"device {dev}, stream {int(worst['stream'])}, {ms(u['first_ns'])}..{ms(u['last_ns'])}",
                "The CPU does not enqueue work fast enough (CPU-bound or data stall): check the DataLoader and "
                "host-side Python in the step, remove .item()/.cpu()/print syncs, overlap data transfer "
                "(pin_memory, non_blocking), and consider CUDA Graphs or torch.compile for many small ops.",
                evidence_rows=evi.idle_gap_rows(trace, int(dev), host_wait=True),
            ))
    return out


def _rule_low_utilization(inp: RuleInputs) -> list[Finding]:
    trace, th = inp.trace, inp.thresholds
    out = []
    for _, u in inp.util.iterrows():
        if u["span_ns"] > 0 and u["utilization_ratio"] < th["utilization_ratio"]:
            out.append(Finding(
                "low_utilization", "high" if u["utilization_ratio"] < 0.25 else "medium",
                f"GPU {int(u['device'])} is busy only {pct(u['utilization_ratio'], 1)} of its active span",
                {"device": int(u["device"]), "utilization_ratio": float(u["utilization_ratio"]),
                 "busy_ns": int(u["busy_ns"]), "idle_ns": int(u["idle_ns"]), "span_ns": int(u["span_ns"]),
                 "ops": int(u["ops"])},
                f"device {int(u['device'])}, {ms(u['first_ns'])}..{ms(u['last_ns'])}",
                "Find what the GPU waits for in the idle breakdown (host wait vs kernel wait) and the step "
                "breakdown; raise the batch size, remove host syncs, overlap input with compute.",
                evidence_rows=evi.idle_gap_rows(trace, int(u["device"])),
            ))
    return out


def _rule_communication(inp: RuleInputs) -> list[Finding]:
    trace, th = inp.trace, inp.thresholds
    df = inp.steps
    if df.empty:
        return []
    from .steps import breakdown_average

    avg = breakdown_average(df)
    ratio = avg["communication_ns"] / avg["step_ns"] if avg["step_ns"] > 0 else 0.0
    if not ratio > th["communication_ratio"]:
        return []
    return [Finding(
        "communication", "high" if ratio > 0.3 else "medium",
        f"{pct(ratio, 1)} of the average step is exposed communication",
        {"communication_ratio": float(ratio), "avg_communication_ns": float(avg["communication_ns"]),
         "avg_step_ns": float(avg["step_ns"]), "rank": int(trace.meta.rank),
         "world_size": int(trace.meta.world_size)},
        step_label(trace, df["step"]) + f", rank {trace.meta.rank}",
        "Overlap communication with compute (DDP bucket_cap_mb, gradient accumulation with no_sync, "
        "FSDP prefetch), check bus bandwidth and stragglers across ranks (nbprof.analysis.distributed).",
        evidence_rows=evi.longest(trace, pred.is_communication(trace.events, where="device")),
    )]


def _rule_data_stall_chain(inp: RuleInputs) -> list[Finding]:
    trace, th = inp.trace, inp.thresholds
    from .causal import chain_finding_parts

    parts = chain_finding_parts(trace, th["dataloader_ratio"])
    if parts is None:
        return []
    return [Finding(
        "data_stall_chain", parts["severity"], parts["title"], parts["evidence"], parts["where"],
        "Take the input work off the training thread: DataLoader(num_workers=N>0, prefetch_factor, "
        "persistent_workers=True); when the chain ends in blocking OS calls, make the reads faster (local copy, "
        "larger reads, caching); when it ends on the CPU, move or cache the preprocessing of __getitem__.",
        evidence_rows=parts["rows"][: evi.MAX_ROWS],
    )]


def _rule_allocator(inp: RuleInputs) -> list[Finding]:
    """Memory allocation / free runtime calls holding the host inside the steps."""
    trace, th = inp.trace, inp.thresholds
    ev = trace.events
    m = pred.is_alloc_call(ev)
    if not m.any():
        return []
    steps = inp.steps
    ts = ev["ts_ns"].to_numpy()
    if len(steps):
        from .steps import step_windows

        w = step_windows(trace).sort_values("start_ns")
        st, en = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
        k = np.searchsorted(st, ts, side="right") - 1
        m &= (k >= 0) & (ts < en[np.clip(k, 0, None)])
        n_steps, step_total = len(steps), int(steps["step_ns"].sum())
    else:
        n_steps, step_total = 1, int(trace.duration_ns)
    calls = ev[m]
    alloc_ns = int(calls["dur_ns"].sum())
    ratio = alloc_ns / step_total if step_total > 0 else 0.0
    if calls.empty or ratio < th["allocator_ratio"]:
        return []
    per = calls.groupby(calls["name"].astype(str))["dur_ns"].agg(["count", "sum"]).sort_values("sum", ascending=False)
    names = list(per.index)
    top = ", ".join(f"{n} {int(r['count'])}x {ms(r['sum'])}" for n, r in per.head(2).iterrows())
    return [Finding(
        "allocator", "high" if ratio > 0.2 else "medium",
        f"{len(calls)} memory allocation/free calls take {pct(ratio)} of the step time ({top})",
        {"alloc_ratio": float(ratio), "alloc_ns": alloc_ns, "calls": int(len(calls)), "steps": int(n_steps),
         "step_ns": step_total, "per_call": {str(n): {"calls": int(r["count"]), "ns": int(r["sum"])}
                                            for n, r in per.iterrows()}},
        step_label(trace, steps["step"]),
        "Allocation calls inside the step mean PyTorch's caching allocator is not reusing memory: profile steady "
        "state (torch.profiler.schedule(wait=1, warmup=1, active=3): the first iterations fill the pools); check "
        "that caching is on (PYTORCH_NO_CUDA_MEMORY_CACHING / PYTORCH_NO_HIP_MEMORY_CACHING unset), that "
        "torch.cuda.empty_cache() is not called in the loop, and that shapes do not change every step (pad or "
        "bucket them). cudaFree/hipFree also wait for the device.",
        evidence_rows=evi.longest(trace, m),
        scenario=whatif.scale(exact(names), 0.0, label=f"{len(calls)} allocation calls"),
    )]


RULES: dict[str, Callable[[RuleInputs], list[Finding]]] = {
    "dataloader": _rule_dataloader,
    "host_wait": _rule_host_wait,
    "low_utilization": _rule_low_utilization,
    "memcpy": rd._rule_memcpy,
    "launch_bound": rd._rule_launch_bound,
    "communication": _rule_communication,
    "memory_peak": rd._rule_memory_peak,
    "tensor_cores": rd._rule_tensor_cores,
    "dominant_kernel": rd._rule_dominant_kernel,
    "allocator": _rule_allocator,
    "efficiency": rd._rule_efficiency,
    "data_stall_chain": _rule_data_stall_chain,
    "host_sync": rh.rule_host_sync,
    "optimizer_loop": rh.rule_optimizer_loop,
    "step_io": rh.rule_step_io,
    "unattributed_host": rh.rule_unattributed_host,
    "tiny_batch": rh.rule_tiny_batch,
    "straggler": rh.rule_straggler,
    "profiler_overhead": rh.rule_profiler_overhead,
    "cpu_contention": rh.rule_cpu_contention,
}

#: The what-if scenario of each rule's findings (a finding's own ``scenario`` wins); see the module docstring.
RULE_SCENARIOS: dict[str, Scenario] = {
    "dataloader": "no_dataloader",
    "data_stall_chain": "no_dataloader",
    "host_wait": "no_host_gaps",
    "launch_bound": "cuda_graphs",
    "communication": "overlap_communication",
}

#: The verdict part each rule's fix shrinks (``Finding.part`` when the rule does not set it).
RULE_PARTS: dict[str, str] = {
    "dataloader": "dataloader", "data_stall_chain": "dataloader", "host_wait": "host", "launch_bound": "host",
    "allocator": "host", "communication": "communication", "memcpy": "memcpy", "tensor_cores": "gpu_compute",
    "dominant_kernel": "gpu_compute", "efficiency": "gpu_compute",
}
#: The knob of each rule's fix (``Finding.knob`` when the rule does not set it).
RULE_KNOBS: dict[str, str] = {
    "dataloader": "DataLoader(num_workers=N, pin_memory=True, persistent_workers=True)",
    "data_stall_chain": "DataLoader(num_workers=N)",
    "host_wait": "torch.compile / fewer host syncs",
    "launch_bound": "torch.compile(mode='reduce-overhead') (CUDA graphs)",
    "allocator": "profile steady state (schedule(wait=1, warmup=1, active=3))",
    "communication": "DDP(bucket_cap_mb=...), no_sync() for gradient accumulation",
    "memcpy": "pin_memory=True, .to(device, non_blocking=True)",
    "tensor_cores": "torch.autocast(dtype=torch.bfloat16) / allow TF32",
    "dominant_kernel": "torch.compile / a fused kernel",
    "efficiency": "torch.compile / autocast",
}

#: Why a rule's findings carry no predicted saving.
UNQUANTIFIED: dict[str, str] = {
    "low_utilization": "a symptom, not a fix: the saving is that of the finding naming its cause "
                       "(dataloader, host_wait, launch_bound, communication)",
    "memory_peak": "memory headroom, not time: no step time to predict",
    "memcpy": "synchronous cudaMemcpy calls only: whatif has no model of making a copy asynchronous",
    "tensor_cores": "no GEMM kernel to scale",
    "unattributed_host": "the trace has no Python frames to name the code (record with_stack=True)",
    "tiny_batch": "the replay has no model of a larger batch (the per-op overhead estimate is in the evidence)",
    "optimizer_loop": "a CPU-only trace: CPU _foreach_ ops run the same per-tensor ops from a C++ loop (no multi-tensor "
                      "kernel) and add their own per-parameter work; measured on CPU Adam, foreach saved ~0 of a 3.6 ms "
                      "Python loop (tests/harness)",
    "straggler": "this trace is the straggler: balancing saves the other ranks' wait (in the evidence), not its own",
    "profiler_overhead": "the profiler's cost, not the job's: nothing to save in the unprofiled run",
}


def _quantify(trace: Trace, found: list[Finding]) -> None:
    """Set each finding's saving with this module's scenarios (:func:`nbprof.analysis.findings.quantify`)."""
    quantify(trace, found, RULE_SCENARIOS, UNQUANTIFIED)


@per_trace
def advise(trace: Trace, *, rules: Iterable[str] | None = None, thresholds: dict[str, float] | None = None,
           quantify: bool = True, ranks: Sequence[Trace] | None = None) -> list[Finding]:
    """Run the advisor rules on a trace and rank the findings by the step time they would save.

    Parameters
    ----------
    trace : nbprof.Trace
    rules : iterable of str, optional
        Subset of :data:`RULES` to run (default: all).
    thresholds : dict, optional
        Overrides of :data:`THRESHOLDS` entries.
    quantify : bool, default True
        Predict each finding's saving (``predicted_saving_ns``; one graph build and one replay per
        scenario). False: no replay, every ``predicted_saving_ns`` stays None (but a saving a rule measured:
        ``cpu_contention``) and findings sort by severity.
    ranks : sequence of Trace, optional
        Every rank of the job (``trace`` among them): the ``straggler`` rule needs them.

    Returns
    -------
    list of Finding
        In the one ranking (:func:`nbprof.analysis.findings.rank`): saving > 0 first, largest first; the
        others after them (listed apart by the views); ties by severity (high first), then rule order.
        The verdict, the report and the dashboard show this list as given.

    Raises
    ------
    ValueError
        For an unknown rule or threshold name.
    """
    from .steps import steady_breakdown
    from .utilization import gpu_utilization, idle_breakdown

    th = dict(THRESHOLDS)
    for k, v in (thresholds or {}).items():
        if k not in THRESHOLDS:
            raise ValueError(f"unknown threshold {k!r}; known: {', '.join(THRESHOLDS)}")
        th[k] = float(v)
    names = list(RULES) if rules is None else list(rules)
    for r in names:
        if r not in RULES:
            raise ValueError(f"unknown rule {r!r}; known: {', '.join(RULES)}")
    inp = RuleInputs(trace, th, steady_breakdown(trace), gpu_utilization(trace), idle_breakdown(trace),
                     tuple(ranks) if ranks is not None and len(ranks) > 1 else ())
    found: list[Finding] = []
    for r in names:
        found.extend(RULES[r](inp))
    if any(f.rule == "straggler" for f in found):  # one finding per cause: the exposed wait is the straggler's
        found = [f for f in found if f.rule != "communication"]
    for f in found:
        f.part = f.part or RULE_PARTS.get(f.rule, "")
        f.knob = f.knob or RULE_KNOBS.get(f.rule, "")
    found = one_per_cause(found, RULE_SCENARIOS, list(RULES))
    if quantify:
        _quantify(trace, found)
    else:
        for f in found:
            f.saving_reason = "not quantified: advise(quantify=False)"
    return rank(found, list(RULES))
