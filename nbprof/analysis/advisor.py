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
``data_stall_chain``  ``"no_dataloader"``, as ``dataloader`` (the chain explains the same wait)
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

A finding that cannot be quantified (no scenario, a trace without steps) has ``predicted_saving_ns``
None and says why in ``saving_reason``. Findings are ranked by predicted saving (largest first), the
unquantified after them (by severity, then rule order). A new rule either sets ``Finding.scenario``
or adds its rule key to :data:`RULE_SCENARIOS` / :data:`UNQUANTIFIED`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.model import Trace
from . import evidence as evi
from . import whatif
from ._memo import per_trace
from .steps import _is_dataloader

#: A what-if scenario as :func:`nbprof.analysis.whatif.predict` takes it.
Scenario = str | whatif.Change | list[str | whatif.Change]

SEVERITIES = ("high", "medium", "low")

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
}


@dataclass
class Finding:
    """One advisor finding.

    Attributes
    ----------
    rule : str
        Rule key (see the module docstring).
    severity : str
        ``"high"``, ``"medium"`` or ``"low"``.
    title : str
        One sentence with the key number.
    evidence : dict
        The numbers the rule used (ns, bytes, ratios, counts, names), JSON-serialisable.
    where : str
        Where in the trace: steps, device/stream, time in ms from the trace origin.
    next_step : str
        What to change or look at next.
    predicted_saving_ns : int or None
        Mean step time the fix is predicted to save, ns (:func:`nbprof.analysis.whatif.predict` with
        the rule's scenario; negative: slower); None when it cannot be quantified.
    saving_reason : str
        How the saving was predicted (scenario, mean step before -> after, steps), or why not.
    evidence_rows : list of int
        Positional row ids into ``trace.events`` of the events that prove the finding, most telling
        first (at most :data:`nbprof.analysis.evidence.MAX_ROWS`).
    scenario : str, Change, list of them, or None
        The what-if scenario that quantifies this finding when it differs from the rule's
        :data:`RULE_SCENARIOS` entry.
    """

    rule: str
    severity: str
    title: str
    evidence: dict[str, Any] = field(default_factory=dict)
    where: str = ""
    next_step: str = ""
    predicted_saving_ns: int | None = None
    saving_reason: str = ""
    evidence_rows: list[int] = field(default_factory=list)
    scenario: Scenario | None = None

    def to_dict(self) -> dict[str, Any]:
        """The finding as a plain dict (JSON-serialisable; ``scenario`` as its text)."""
        d = asdict(self)
        d["scenario"] = _describe(self.scenario) if self.scenario is not None else None
        return d


def _describe(sc: Scenario) -> str:
    """A scenario as text (``no_dataloader``, ``scale('gemm', 0.5)``, ``[a, b]``)."""
    if isinstance(sc, list):
        return "[" + ", ".join(str(c) for c in sc) + "]"
    return str(sc)


def _ms(ns: float) -> str:
    return f"{float(ns) / 1e6:.3f} ms"


def _py(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


def _steps_where(df: pd.DataFrame) -> str:
    st = list(df["step"])
    if not st:
        return "whole trace"
    if len(st) == 1:
        return f"ProfilerStep#{st[0]}"
    return f"ProfilerStep#{st[0]}..#{st[-1]} ({len(st)} steps)"


# ------------------------------------------------------------------ rules
def _rule_dataloader(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    df = cache["steps"]
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
        f"{ratio:.1%} of the average step is spent waiting for the DataLoader",
        {"dataloader_ratio": float(ratio), "avg_dataloader_ns": float(avg["dataloader_ns"]),
         "avg_step_ns": float(avg["step_ns"]), "steps": int(len(df)),
         "worst_step": int(worst["step"]), "worst_step_dataloader_ns": int(worst["dataloader_ns"])},
        _steps_where(df),
        "Load data in parallel and ahead of the model: DataLoader(num_workers=N>0, prefetch_factor=2..4, "
        "persistent_workers=True), pin_memory=True with .to(device, non_blocking=True); move heavy "
        "preprocessing out of __getitem__ or cache it.",
        evidence_rows=evi.by_name(trace, _is_dataloader, where="host"),
    )]


def _rule_host_wait(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    ib = cache["idle"]
    ut = cache["util"]
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
                f"GPU {dev} is idle {idle_ratio:.1%} of its active span, {share:.0%} of it waiting on the host",
                {"device": int(dev), "idle_ratio": float(idle_ratio), "host_wait_share": float(share),
                 "host_wait_ns": int(r["host_wait_ns"]), "kernel_wait_ns": int(r["kernel_wait_ns"]),
                 "other_ns": int(r["other_ns"]), "span_ns": int(u["span_ns"]),
                 "worst_stream": int(worst["stream"])},
                f"device {dev}, stream {int(worst['stream'])}, {_ms(u['first_ns'])}..{_ms(u['last_ns'])}",
                "The CPU does not enqueue work fast enough (CPU-bound or data stall): check the DataLoader and "
                "host-side Python in the step, remove .item()/.cpu()/print syncs, overlap data transfer "
                "(pin_memory, non_blocking), and consider CUDA Graphs or torch.compile for many small ops.",
                evidence_rows=evi.idle_gap_rows(trace, int(dev), host_wait=True),
            ))
    return out


def _rule_low_utilization(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    out = []
    for _, u in cache["util"].iterrows():
        if u["span_ns"] > 0 and u["utilization_ratio"] < th["utilization_ratio"]:
            out.append(Finding(
                "low_utilization", "high" if u["utilization_ratio"] < 0.25 else "medium",
                f"GPU {int(u['device'])} is busy only {u['utilization_ratio']:.1%} of its active span",
                {"device": int(u["device"]), "utilization_ratio": float(u["utilization_ratio"]),
                 "busy_ns": int(u["busy_ns"]), "idle_ns": int(u["idle_ns"]), "span_ns": int(u["span_ns"]),
                 "ops": int(u["ops"])},
                f"device {int(u['device'])}, {_ms(u['first_ns'])}..{_ms(u['last_ns'])}",
                "Find what the GPU waits for in the idle breakdown (host wait vs kernel wait) and the step "
                "breakdown; raise the batch size, remove host syncs, overlap input with compute.",
                evidence_rows=evi.idle_gap_rows(trace, int(u["device"])),
            ))
    return out


_SYNC_MEMCPY = re.compile(r"^(cudaMemcpy|cudaMemcpy2D|cudaMemcpy3D|cudaMemcpyToSymbol|cudaMemcpyFromSymbol|"
                          r"cudaMemcpyPeer|cuMemcpyHtoD|cuMemcpyDtoH|cuMemcpyDtoD|hipMemcpy)(_v\d+)?$")


def _rule_memcpy(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    ev = trace.events
    # per category of the name column (name_mask), never a string copy of every event's name
    pageable = ev[pred.is_memcpy(ev) & pred.name_mask(ev["name"], lambda n: "Pageable" in n)]
    sync = ev[pred.is_runtime(ev) & pred.name_mask(ev["name"], _SYNC_MEMCPY.match)]
    if pageable.empty and sync.empty:
        return []
    span = max(trace.duration_ns, 1)
    total = int(pageable["dur_ns"].sum()) + int(sync["dur_ns"].sum())
    kinds = {str(k): int(v) for k, v in pageable["name"].astype(str).value_counts().items()}
    sync_kinds = {str(k): int(v) for k, v in sync["name"].astype(str).value_counts().items()}
    first = pd.concat([pageable["ts_ns"], sync["ts_ns"]]).min()
    rows = evi.label_rows(trace, list(pageable.index) + list(sync.index))
    mask = np.zeros(len(ev), bool)
    mask[rows] = True
    pageable_names = sorted(kinds)
    scenario: Scenario | None = (whatif.scale(_exact(pageable_names), 0.5, label="pageable memcpys")
                                 if pageable_names else None)
    parts = []
    if len(pageable):
        parts.append(f"{len(pageable)} memcpys use pageable host memory")
    if len(sync):
        parts.append(f"{len(sync)} synchronous cudaMemcpy calls")
    return [Finding(
        "memcpy", "medium" if total > 0.01 * span else "low",
        " and ".join(parts) + f" ({_ms(total)} in total)",
        {"pageable_count": int(len(pageable)), "pageable_ns": int(pageable["dur_ns"].sum()),
         "pageable_bytes": int(pageable["bytes"].clip(lower=0).sum()) if "bytes" in pageable else -1,
         "pageable_kinds": kinds, "sync_call_count": int(len(sync)), "sync_call_ns": int(sync["dur_ns"].sum()),
         "sync_calls": sync_kinds},
        f"first at {_ms(first)}",
        "Copies from pageable memory are staged and block the host; use pinned memory (DataLoader("
        "pin_memory=True) or tensor.pin_memory()) with .to(device, non_blocking=True), and avoid "
        ".cpu()/.item()/torch.cuda.synchronize() inside the step.",
        evidence_rows=evi.longest(trace, mask), scenario=scenario,
    )]


def _rule_launch_bound(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    from .launch import launch_bound_phases

    ph = launch_bound_phases(trace)
    if ph.empty or not ph["launch_bound"].any():
        return []
    lb = ph[ph["launch_bound"]]
    return [Finding(
        "launch_bound", "high" if len(lb) == len(ph) else "medium",
        f"{len(lb)} of {len(ph)} steps are launch-bound: {lb['short_ratio'].mean():.0%} of ops run shorter than "
        f"their launch call and the GPU is busy {lb['busy_ratio'].mean():.0%} of the time",
        {"steps": [int(s) for s in lb["step"]], "ops": int(lb["ops"].sum()), "short_ops": int(lb["short_ops"].sum()),
         "short_ratio": float(lb["short_ratio"].mean()), "busy_ratio": float(lb["busy_ratio"].mean()),
         "median_device_ns": float(lb["median_device_ns"].median()),
         "median_runtime_ns": float(lb["median_runtime_ns"].median())},
        _steps_where(lb),
        "Too many tiny kernels: fuse them (torch.compile), capture the step with CUDA Graphs "
        "(torch.compile(mode='reduce-overhead')), or give each kernel more work (larger batch).",
        evidence_rows=evi.step_rows(trace, lb["step"]),
    )]


def _rule_communication(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    df = cache["steps"]
    if df.empty:
        return []
    from .steps import breakdown_average

    avg = breakdown_average(df)
    ratio = avg["communication_ns"] / avg["step_ns"] if avg["step_ns"] > 0 else 0.0
    if not ratio > th["communication_ratio"]:
        return []
    return [Finding(
        "communication", "high" if ratio > 0.3 else "medium",
        f"{ratio:.1%} of the average step is exposed communication",
        {"communication_ratio": float(ratio), "avg_communication_ns": float(avg["communication_ns"]),
         "avg_step_ns": float(avg["step_ns"]), "rank": int(trace.meta.rank),
         "world_size": int(trace.meta.world_size)},
        _steps_where(df) + f", rank {trace.meta.rank}",
        "Overlap communication with compute (DDP bucket_cap_mb, gradient accumulation with no_sync, "
        "FSDP prefetch), check bus bandwidth and stragglers across ranks (nbprof.analysis.distributed).",
        evidence_rows=evi.longest(trace, pred.is_communication(trace.events, where="device")),
    )]


def _rule_memory_peak(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    from . import memory

    pk = memory.memory_peak(trace)
    out: list[Finding] = []
    if pk.empty:
        return out
    for _, r in pk.iterrows():
        ratio = r.get("peak_ratio")
        if ratio is None or not np.isfinite(ratio) or not ratio > th["memory_peak_ratio"]:
            continue
        out.append(Finding(
            "memory_peak", "high",
            f"device {int(r['device'])} peaks at {ratio:.1%} of its memory",
            {"device": int(r["device"]), "peak_allocated_bytes": int(r["peak_allocated_bytes"]),
             "device_total_bytes": float(r["device_total_bytes"]), "peak_ratio": float(ratio),
             "peak_reserved_bytes": int(r["peak_reserved_bytes"]), "op": _py(r["op"]),
             "step": int(r["step"])},
            f"{_ms(r['ts_ns'])}, in {r['op']}" + (f" (step {int(r['step'])})" if r["step"] >= 0 else ""),
            "Close to out-of-memory: use activation checkpointing, a smaller micro-batch with gradient "
            "accumulation, mixed precision, or shard states (FSDP / ZeRO); check memory growth by step.",
            evidence_rows=evi.covering_host_op(trace, str(r["op"]), int(r["ts_ns"])),
        ))
    return out


#: torch-tb-profiler 0.4.3 ``TC_Allowlist`` (from NVIDIA PyProf) plus newer Tensor Core kernel spellings.
TC_PATTERNS = ("h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2",
               "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
               "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm", "c1688",
               "tensorop", "wgmma", "gmma", "imma", "nvjet", "_xmma_", "bf16", "fp16", "_f16", "tf32", "e4m3",
               "e5m2")
_GEMM_RE = re.compile(r"(?i)(gemm|conv|cudnn|cutlass|xmma|wgmma|hmma|nvjet|dgrad|wgrad|fprop|winograd|"
                      r"implicit|bmm_|matmul)")


def _is_tc(name: str) -> bool:
    low = name.lower()
    return any(p in low for p in TC_PATTERNS)


def _device_index(v: object, default: int) -> int:
    """A device id as written by producers (``0``, ``"0"``, ``"cuda:0"``, ``"GPU 0"``) -> int; else ``default``."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) < 2**31:
        return int(v)
    m = re.fullmatch(r"\s*(?:[A-Za-z]+\s*:?\s*)?(\d{1,9})(?:\.0+)?\s*", str(v)) if v is not None else None
    return int(m.group(1)) if m else default


def _rule_tensor_cores(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    if trace.meta.is_rocm:
        return []
    ev = trace.events
    k = ev[pred.is_kernel(ev)]
    if k.empty:
        return []
    props = {_device_index(p.get("id"), i): p for i, p in enumerate(trace.meta.device_properties)}
    out = []
    for dev, g in k.groupby("device", sort=True):
        p = props.get(int(dev), {})
        major = _device_index(p.get("computeMajor"), -1)
        if major < 7:
            continue  # unknown, or no Tensor Cores before Volta
        names = g["name"].astype(object).fillna("").astype(str)
        # the name tests once per distinct kernel name (a 1 M-event trace has ~100 names, 160 k kernels)
        codes, uniq = pd.factorize(names)
        is_gemm = pd.Series(np.array([bool(_GEMM_RE.search(n)) for n in uniq], dtype=bool)[codes], index=names.index)
        total = int(g["dur_ns"].sum())
        gemm_ns = int(g.loc[is_gemm.to_numpy(), "dur_ns"].sum())
        if total <= 0 or gemm_ns / total < th["gemm_time_ratio"]:
            continue
        tc = np.array([_is_tc(n) for n in uniq], dtype=bool)[codes] & is_gemm.to_numpy()
        tc_ns = int(g.loc[tc, "dur_ns"].sum())
        ratio = tc_ns / gemm_ns
        if ratio >= th["tensor_core_ratio"]:
            continue
        non_tc = g.loc[is_gemm.to_numpy() & ~tc].assign(n=names[is_gemm.to_numpy() & ~tc])
        non_tc_rows = evi.label_rows(trace, non_tc.index)
        non_tc_mask = np.zeros(len(ev), bool)
        non_tc_mask[non_tc_rows] = True
        non_tc_names = sorted(set(non_tc["n"]))
        top = non_tc.groupby("n")["dur_ns"].sum().sort_values(ascending=False).head(5)
        cc = f"{major}.{p.get('computeMinor', 0)}"
        tf32 = int(major) >= 8
        out.append(Finding(
            "tensor_cores", "high" if gemm_ns / total > 0.3 else "medium",
            f"GEMM/convolution kernels take {gemm_ns / total:.0%} of GPU {int(dev)} kernel time but only "
            f"{ratio:.0%} of it runs on Tensor Cores",
            {"device": int(dev), "device_name": str(p.get("name", "")), "compute_capability": cc,
             "gemm_ns": gemm_ns, "kernel_ns": total, "gemm_time_ratio": gemm_ns / total,
             "tensor_core_ns": tc_ns, "tensor_core_ratio": ratio,
             "top_non_tensor_core_kernels": {str(n)[:200]: int(v) for n, v in top.items()}},
            f"device {int(dev)} ({p.get('name', '')}, sm {cc})",
            ("Run matmuls/convolutions in reduced precision on Tensor Cores: torch.autocast('cuda', "
             "dtype=torch.float16 or bfloat16) with a GradScaler for fp16"
             + ("; for fp32 models enable TF32: torch.set_float32_matmul_precision('high') and "
                "torch.backends.cudnn.allow_tf32 = True" if tf32 else "")
             + "; keep channel counts multiples of 8 and prefer channels_last for convolutions."),
            evidence_rows=evi.longest(trace, non_tc_mask),
            scenario=(whatif.scale(_exact(non_tc_names), 0.5, label=f"{len(non_tc_names)} non-Tensor-Core GEMM kernels")
                      if non_tc_names else None),
        ))
    return out


def _exact(names: list[str]) -> str:
    """A regex matching exactly these names."""
    return "^(?:" + "|".join(re.escape(n) for n in names) + ")$"


def _rule_dominant_kernel(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    ev = trace.events
    km = pred.is_kernel(ev)
    if not km.any():
        return []
    k = pd.DataFrame({"device": ev["device"].to_numpy(np.int64)[km],
                      "name": ev["name"].astype(object).to_numpy()[km], "dur_ns": ev["dur_ns"].to_numpy(np.int64)[km]})
    out = []
    for dev, g in k.groupby("device", sort=True):
        total = int(g["dur_ns"].sum())
        per = g.groupby("name")["dur_ns"].agg(["sum", "count"]).sort_values("sum", ascending=False)
        if total <= 0 or per.empty:
            continue
        name, ns, cnt = str(per.index[0]), int(per["sum"].iloc[0]), int(per["count"].iloc[0])
        ratio = ns / total
        if ratio < th["dominant_kernel_ratio"]:
            continue
        rows = (ev["device"].to_numpy(np.int64) == dev) & km & (ev["name"].astype(object).to_numpy() == name)
        short = name if len(name) <= 80 else name[:77] + "..."
        out.append(Finding(
            "dominant_kernel", "medium" if ratio >= 0.5 else "low",
            f"one kernel takes {ratio:.0%} of GPU {int(dev)} kernel time: {short}",
            {"device": int(dev), "kernel": name[:500], "kernel_ns": ns, "calls": cnt, "device_kernel_ns": total,
             "kernel_ratio": float(ratio)},
            f"device {int(dev)}",
            "Look at this kernel's shapes and efficiency (operator view, record_shapes=True): a fused or "
            "Tensor-Core implementation (autocast, torch.compile, a cuDNN/cuBLAS-friendly layout) pays here first.",
            evidence_rows=evi.longest(trace, rows), scenario=whatif.scale(_exact([name]), 0.5, label=repr(short)),
        ))
    return out


class _PairIndex:
    """(``name``, ``input_dims``) pairs of :func:`nbprof.analysis.efficiency.op_work`'s rows as int64 keys (its
    categorical codes), so that "the ops of these op groups" is an integer ``np.isin``, not a string per row."""

    def __init__(self, w: pd.DataFrame) -> None:
        name = w["name"].astype("category")
        dims = w["input_dims"].astype("category")
        self._names, self._dims = name.cat.categories, dims.cat.categories
        nc, dc = name.cat.codes.to_numpy(np.int64), dims.cat.codes.to_numpy(np.int64)
        self.keys = np.where((nc >= 0) & (dc >= 0), nc * (len(self._dims) + 1) + dc, -1)

    def of(self, df: pd.DataFrame) -> np.ndarray:
        """The key of each row of ``df`` (-2 for a pair no op_work row has)."""
        nc = self._names.get_indexer(df["name"].astype(object))
        dc = self._dims.get_indexer(df["input_dims"].astype(object))
        return np.where((nc >= 0) & (dc >= 0), nc.astype(np.int64) * (len(self._dims) + 1) + dc, -2)


def _rule_efficiency(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    """Ops far below their roof, and fp32 matrix work where Tensor Cores would run it faster."""
    from . import efficiency as eff

    if not trace.has_device or "input_dims" not in trace.events:
        return []
    pk = eff.peaks(trace)
    if not pk.known:
        return []
    oe = eff.operator_efficiency(trace, peaks_=pk)
    w = eff.op_work(trace)
    pairs = _PairIndex(w)
    oe = oe[np.isin(pairs.of(oe), pairs.keys[w["counted"].to_numpy(bool)])]
    ev = trace.events
    total = int(ev.loc[pred.is_kernel(ev), "dur_ns"].sum())
    if oe.empty or total <= 0:
        return []
    out = []

    kw = eff.kernel_work(trace)

    def rows_of(rows: pd.DataFrame) -> pd.DataFrame:
        return w[np.isin(pairs.keys, pairs.of(rows))]

    def events_of(rows: pd.DataFrame) -> list[int]:
        return [int(x) for x in rows_of(rows)["event"].head(evi.MAX_ROWS)]

    def scenario_of(rows: pd.DataFrame, factor: float, label: str) -> Scenario | None:
        """Scale the kernels these op groups launched by ``factor`` (None when they launched none)."""
        ops = set(events_of(rows)) if len(rows) else set()
        evs = set(rows_of(rows)["event"]) | ops
        names = sorted({str(n) for n in pd.unique(kw.loc[kw["op_event"].isin(evs), "name"])}) if len(kw) else []
        if not names:
            return None
        return whatif.scale(_exact(names), max(0.0, min(1.0, factor)), label=f"{len(names)} kernels of {label}")

    low = oe[(oe["time_ns"] >= th["efficiency_time_ratio"] * total) & (oe["peak_ratio"] < th["efficiency_peak_ratio"])]
    if len(low):
        top = low.head(5)
        # the time they would take at the threshold share of their roof
        at_th = float(sum(t * r / th["efficiency_peak_ratio"] for t, r in zip(top["time_ns"], top["peak_ratio"],
                                                                            strict=True)))
        factor = at_th / float(top["time_ns"].sum())
        out.append(Finding(
            "efficiency", "high" if top["time_ns"].sum() > 0.3 * total else "medium",
            f"{len(low)} op group(s) with {low['time_ns'].sum() / total:.0%} of device time run below "
            f"{th['efficiency_peak_ratio']:.0%} of their roofline on {pk.device}",
            {"device": pk.device, "peak_key": pk.key, "kernel_ns": total, "time_at_threshold_ns": int(at_th),
             "ops": [{"name": str(r.name)[:200], "input_dims": str(r.input_dims)[:200], "time_ns": int(r.time_ns),
                      "peak_ratio": float(r.peak_ratio), "bound": str(r.bound),
                      "achieved_tflops_per_s": float(r.achieved_tflops_per_s),
                      "achieved_gb_per_s": float(r.achieved_gb_per_s)} for r in top.itertuples()]},
            f"device {pk.device}",
            ("Memory-bound ops far below the bandwidth roof are usually small or unfused: fuse the chain "
             "(torch.compile), batch small launches, or use fused kernels (fused optimizers, "
             "scaled_dot_product_attention); compute-bound ones: larger tiles/batch, aligned shapes "
             "(multiples of 8/16), reduced precision."),
            evidence_rows=events_of(top), scenario=scenario_of(top, factor, "the below-roof ops"),
        ))
    fast_dt = next((d for d in ("bf16", "fp16", "tf32") if d in pk.flops_per_s), None)
    fp32 = oe[oe["kind"].isin(["gemm", "conv", "attention"]) & (oe["dtype"] == "fp32")]
    fp32_ns = int(fp32["time_ns"].sum())
    if fast_dt is not None and fp32_ns >= th["gemm_time_ratio"] * total:
        fast = pk.flops_per_s[fast_dt]
        speed = fast / pk.flops_per_s["fp32"] if "fp32" in pk.flops_per_s else math.nan
        out.append(Finding(
            "efficiency", "high" if fp32_ns > 0.3 * total else "medium",
            f"fp32 matrix ops take {fp32_ns / total:.0%} of device time on {pk.device}, whose "
            f"{fast_dt.upper()} Tensor Cores peak {speed:.0f}x higher",
            {"device": pk.device, "peak_key": pk.key, "fp32_matrix_ns": fp32_ns, "kernel_ns": total,
             "peak_speedup": speed,
             "ops": [{"name": str(r.name)[:200], "input_dims": str(r.input_dims)[:200], "time_ns": int(r.time_ns),
                      "peak_ratio": float(r.peak_ratio)} for r in fp32.head(5).itertuples()]},
            f"device {pk.device}",
            (f"Mixed precision: torch.autocast('cuda', dtype=torch.{'bfloat16' if fast_dt == 'bf16' else 'float16'}) "
             "around the forward pass (fp16 with torch.amp.GradScaler)"
             + ("; or keep fp32 weights and allow TF32: torch.set_float32_matmul_precision('high'), "
                "torch.backends.cudnn.allow_tf32 = True." if "tf32" in pk.flops_per_s else ".")),
            evidence_rows=events_of(fp32), scenario=scenario_of(fp32, 0.5, "fp32 matrix ops"),
        ))
    small = oe[oe["kind"].isin(["elementwise", "norm", "softmax", "reduction"]) & (oe["bound"] == "memory")]
    small_ns = int(small["time_ns"].sum())
    if small_ns >= th["efficiency_fusion_ratio"] * total:
        # at the bandwidth roof the same bytes would take bytes / bandwidth; fusion also removes the
        # intermediate tensors' traffic, which this bound does not count (a lower bound on the saving)
        at_roof = float(small["bytes"].sum()) / pk.bytes_per_s * 1e9
        out.append(Finding(
            "efficiency", "medium",
            f"memory-bound elementwise / norm / softmax ops take {small_ns / total:.0%} of device time in "
            f"{int(small['count'].sum())} calls on {pk.device}",
            {"device": pk.device, "kernel_ns": total, "memory_bound_ns": small_ns,
             "time_at_bandwidth_roof_ns": int(at_roof),
             "ops": [{"name": str(r.name)[:200], "input_dims": str(r.input_dims)[:200], "time_ns": int(r.time_ns),
                      "achieved_gb_per_s": float(r.achieved_gb_per_s)} for r in small.head(5).itertuples()]},
            f"device {pk.device}",
            ("Fuse chains of elementwise ops into their producers: torch.compile(model) (Inductor fuses "
             "pointwise and reduction chains), or fused modules (fused LayerNorm/RMSNorm, fused optimizers)."),
            evidence_rows=events_of(small), scenario=scenario_of(small, at_roof / small_ns, "memory-bound ops"),
        ))
    return out


def _rule_data_stall_chain(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
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


def _rule_allocator(trace: Trace, th: dict[str, float], cache: dict[str, Any]) -> list[Finding]:
    """Memory allocation / free runtime calls holding the host inside the steps."""
    ev = trace.events
    m = pred.is_alloc_call(ev)
    if not m.any():
        return []
    steps = cache["steps"]
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
    top = ", ".join(f"{n} {int(r['count'])}x {_ms(r['sum'])}" for n, r in per.head(2).iterrows())
    return [Finding(
        "allocator", "high" if ratio > 0.2 else "medium",
        f"{len(calls)} memory allocation/free calls take {ratio:.0%} of the step time ({top})",
        {"alloc_ratio": float(ratio), "alloc_ns": alloc_ns, "calls": int(len(calls)), "steps": int(n_steps),
         "step_ns": step_total, "per_call": {str(n): {"calls": int(r["count"]), "ns": int(r["sum"])}
                                            for n, r in per.iterrows()}},
        _steps_where(steps) if len(steps) else "whole trace",
        "Allocation calls inside the step mean PyTorch's caching allocator is not reusing memory: profile steady "
        "state (torch.profiler.schedule(wait=1, warmup=1, active=3): the first iterations fill the pools); check "
        "that caching is on (PYTORCH_NO_CUDA_MEMORY_CACHING / PYTORCH_NO_HIP_MEMORY_CACHING unset), that "
        "torch.cuda.empty_cache() is not called in the loop, and that shapes do not change every step (pad or "
        "bucket them). cudaFree/hipFree also wait for the device.",
        evidence_rows=evi.longest(trace, m),
        scenario=whatif.scale(_exact(names), 0.0, label=f"{len(calls)} allocation calls"),
    )]


RULES = {
    "dataloader": _rule_dataloader,
    "host_wait": _rule_host_wait,
    "low_utilization": _rule_low_utilization,
    "memcpy": _rule_memcpy,
    "launch_bound": _rule_launch_bound,
    "communication": _rule_communication,
    "memory_peak": _rule_memory_peak,
    "tensor_cores": _rule_tensor_cores,
    "dominant_kernel": _rule_dominant_kernel,
    "allocator": _rule_allocator,
    "efficiency": _rule_efficiency,
    "data_stall_chain": _rule_data_stall_chain,
}

#: The what-if scenario of each rule's findings (a finding's own ``scenario`` wins); see the module docstring.
RULE_SCENARIOS: dict[str, Scenario] = {
    "dataloader": "no_dataloader",
    "data_stall_chain": "no_dataloader",
    "host_wait": "no_host_gaps",
    "launch_bound": "cuda_graphs",
    "communication": "overlap_communication",
}

#: Why a rule's findings carry no predicted saving.
UNQUANTIFIED: dict[str, str] = {
    "low_utilization": "a symptom, not a fix: the saving is that of the finding naming its cause "
                       "(dataloader, host_wait, launch_bound, communication)",
    "memory_peak": "memory headroom, not time: no step time to predict",
    "memcpy": "synchronous cudaMemcpy calls only: whatif has no model of making a copy asynchronous",
    "tensor_cores": "no GEMM kernel to scale",
}


def _quantify(trace: Trace, found: list[Finding]) -> None:
    """Set ``predicted_saving_ns`` / ``saving_reason`` of each finding (one prediction per scenario)."""
    done: dict[str, tuple[int | None, str]] = {}
    for f in found:
        sc = f.scenario if f.scenario is not None else RULE_SCENARIOS.get(f.rule)
        if sc is None:
            f.predicted_saving_ns = None
            f.saving_reason = "not quantified: " + UNQUANTIFIED.get(f.rule, f"no what-if scenario for rule {f.rule!r}")
            continue
        key = _describe(sc)
        if key not in done:
            try:
                p = whatif.predict(trace, sc)
            except ValueError as e:
                done[key] = (None, f"not quantified: whatif.predict({key}) failed: {e}")
            else:
                done[key] = (int(round(p.saving_ns)),
                             f"whatif.predict({key}): mean step {_ms(p.baseline_step_ns)} -> "
                             f"{_ms(p.predicted_step_ns)} over {len(p.per_step)} steps")
        f.predicted_saving_ns, f.saving_reason = done[key]


def _rank_key(f: Finding) -> tuple[int, int, int, int]:
    sev = {s: i for i, s in enumerate(SEVERITIES)}.get(f.severity, 9)
    rule = {r: i for i, r in enumerate(RULES)}.get(f.rule, 99)
    if f.predicted_saving_ns is None:
        return (1, 0, sev, rule)
    return (0, -int(f.predicted_saving_ns), sev, rule)


@per_trace
def advise(trace: Trace, *, rules: Iterable[str] | None = None, thresholds: dict[str, float] | None = None,
           quantify: bool = True) -> list[Finding]:
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
        scenario). False: every ``predicted_saving_ns`` stays None and findings sort by severity.

    Returns
    -------
    list of Finding
        Ranked by ``predicted_saving_ns`` (largest first); findings without one after them; ties
        by severity (high first), then rule order.

    Raises
    ------
    ValueError
        For an unknown rule or threshold name.
    """
    from .steps import step_breakdown
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
    cache = {"steps": step_breakdown(trace), "util": gpu_utilization(trace), "idle": idle_breakdown(trace)}
    found: list[Finding] = []
    for r in names:
        found.extend(RULES[r](trace, th, cache))
    if quantify:
        _quantify(trace, found)
    else:
        for f in found:
            f.saving_reason = "not quantified: advise(quantify=False)"
    found.sort(key=_rank_key)
    return found


def findings_frame(findings: list[Finding]) -> pd.DataFrame:
    """Findings as a DataFrame, in their order, with columns ``rule, severity, title, where, next_step,
    evidence, predicted_saving_ns`` (ns, None when not quantified), ``saving_reason, evidence_rows``."""
    cols = ["rule", "severity", "title", "where", "next_step", "evidence", "predicted_saving_ns", "saving_reason",
            "evidence_rows"]
    return pd.DataFrame([{c: getattr(f, c) for c in cols} for f in findings], columns=cols)
