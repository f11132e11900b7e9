"""Device-side advisor rules: pageable/synchronous copies, launch-bound steps, memory peak, Tensor Cores, one
dominant kernel, roofline efficiency (each documented in :mod:`nbprof.analysis.advisor`'s table).

Each rule takes :class:`nbprof.analysis.findings.RuleInputs` and returns a list of
:class:`nbprof.analysis.findings.Finding`; registered in ``advisor.RULES``.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.iterations import step_label
from ..units import fmt_ms_text as ms
from ..units import fmt_pct_text as pct
from . import evidence as evi
from . import whatif
from ._rule_util import exact, py
from .findings import Finding, RuleInputs, Scenario

__all__ = ["TC_PATTERNS", "SYNC_MEMCPY"]


SYNC_MEMCPY = re.compile(r"^(cudaMemcpy|cudaMemcpy2D|cudaMemcpy3D|cudaMemcpyToSymbol|cudaMemcpyFromSymbol|"
                          r"cudaMemcpyPeer|cuMemcpyHtoD|cuMemcpyDtoH|cuMemcpyDtoD|hipMemcpy)(_v\d+)?$")


def _rule_memcpy(inp: RuleInputs) -> list[Finding]:
    trace = inp.trace
    ev = trace.events
    # per category of the name column (name_mask), never a string copy of every event's name
    pageable = ev[pred.is_memcpy(ev) & pred.name_mask(ev["name"], lambda n: "Pageable" in n)]
    sync = ev[pred.is_runtime(ev) & pred.name_mask(ev["name"], SYNC_MEMCPY.match)]
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
    scenario: Scenario | None = (whatif.scale(exact(pageable_names), 0.5, label="pageable memcpys")
                                 if pageable_names else None)
    parts = []
    if len(pageable):
        parts.append(f"{len(pageable)} memcpys use pageable host memory")
    if len(sync):
        parts.append(f"{len(sync)} synchronous cudaMemcpy calls")
    return [Finding(
        "memcpy", "medium" if total > 0.01 * span else "low",
        " and ".join(parts) + f" ({ms(total)} in total)",
        {"pageable_count": int(len(pageable)), "pageable_ns": int(pageable["dur_ns"].sum()),
         "pageable_bytes": int(pageable["bytes"].clip(lower=0).sum()) if "bytes" in pageable else -1,
         "pageable_kinds": kinds, "sync_call_count": int(len(sync)), "sync_call_ns": int(sync["dur_ns"].sum()),
         "sync_calls": sync_kinds},
        f"first at {ms(first)}",
        "Copies from pageable memory are staged and block the host; use pinned memory (DataLoader("
        "pin_memory=True) or tensor.pin_memory()) with .to(device, non_blocking=True), and avoid "
        ".cpu()/.item()/torch.cuda.synchronize() inside the step.",
        evidence_rows=evi.longest(trace, mask), scenario=scenario,
    )]


def _rule_launch_bound(inp: RuleInputs) -> list[Finding]:
    trace = inp.trace
    from .launch import launch_bound_phases

    ph = launch_bound_phases(trace)
    if len(inp.steps) and ph["step"].isin(inp.steps["step"]).any():  # the steady steps the verdict averages
        ph = ph[ph["step"].isin(inp.steps["step"])]
    if ph.empty or not ph["launch_bound"].any():
        return []
    lb = ph[ph["launch_bound"]]
    graphs = bool(pred.name_mask(trace.events["name"], lambda n: n.startswith(("cudaGraphLaunch", "hipGraphLaunch")))
                  .any())
    return [Finding(
        "launch_bound", "high" if len(lb) == len(ph) else "medium",
        f"{len(lb)} of {len(ph)} steps are launch-bound: {pct(lb['short_ratio'].mean())} of ops run shorter than "
        f"their launch call and the GPU is busy {pct(lb['busy_ratio'].mean())} of the time",
        {"steps": [int(s) for s in lb["step"]], "ops": int(lb["ops"].sum()), "short_ops": int(lb["short_ops"].sum()),
         "short_ratio": float(lb["short_ratio"].mean()), "busy_ratio": float(lb["busy_ratio"].mean()),
         "median_device_ns": float(lb["median_device_ns"].median()),
         "median_runtime_ns": float(lb["median_runtime_ns"].median())},
        step_label(trace, lb["step"]),
        ("Too many tiny kernels and the step already replays CUDA graphs: fuse the kernels (torch.compile), "
         "give each more work (larger batch), and cut the host work between graph replays."
         if graphs else
         "Too many tiny kernels: fuse them (torch.compile), capture the step with CUDA Graphs "
         "(torch.compile(mode='reduce-overhead')), or give each kernel more work (larger batch)."),
        evidence_rows=evi.step_rows(trace, lb["step"]),
    )]


def _rule_memory_peak(inp: RuleInputs) -> list[Finding]:
    trace, th = inp.trace, inp.thresholds
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
            f"device {int(r['device'])} peaks at {pct(ratio, 1)} of its memory",
            {"device": int(r["device"]), "peak_allocated_bytes": int(r["peak_allocated_bytes"]),
             "device_total_bytes": float(r["device_total_bytes"]), "peak_ratio": float(ratio),
             "peak_reserved_bytes": int(r["peak_reserved_bytes"]), "op": py(r["op"]),
             "step": int(r["step"])},
            f"{ms(r['ts_ns'])}, in {r['op']}" + (f" (step {int(r['step'])})" if r["step"] >= 0 else ""),
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


def _rule_tensor_cores(inp: RuleInputs) -> list[Finding]:
    trace, th = inp.trace, inp.thresholds
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
            f"GEMM/convolution kernels take {pct(gemm_ns / total)} of GPU {int(dev)} kernel time but only "
            f"{pct(ratio)} of it runs on Tensor Cores",
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
            scenario=(whatif.scale(exact(non_tc_names), 0.5, label=f"{len(non_tc_names)} non-Tensor-Core GEMM kernels")
                      if non_tc_names else None),
        ))
    return out


def _rule_dominant_kernel(inp: RuleInputs) -> list[Finding]:
    trace, th = inp.trace, inp.thresholds
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
            f"one kernel takes {pct(ratio)} of GPU {int(dev)} kernel time: {short}",
            {"device": int(dev), "kernel": name[:500], "kernel_ns": ns, "calls": cnt, "device_kernel_ns": total,
             "kernel_ratio": float(ratio)},
            f"device {int(dev)}",
            "Look at this kernel's shapes and efficiency (operator view, record_shapes=True): a fused or "
            "Tensor-Core implementation (autocast, torch.compile, a cuDNN/cuBLAS-friendly layout) pays here first.",
            evidence_rows=evi.longest(trace, rows), scenario=whatif.scale(exact([name]), 0.5, label=repr(short)),
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


def _rule_efficiency(inp: RuleInputs) -> list[Finding]:
    """Ops far below their roof, and fp32 matrix work where Tensor Cores would run it faster."""
    trace, th = inp.trace, inp.thresholds
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
        return whatif.scale(exact(names), max(0.0, min(1.0, factor)), label=f"{len(names)} kernels of {label}")

    low = oe[(oe["time_ns"] >= th["efficiency_time_ratio"] * total) & (oe["peak_ratio"] < th["efficiency_peak_ratio"])]
    if len(low):
        top = low.head(5)
        # the time they would take at the threshold share of their roof
        at_th = float(sum(t * r / th["efficiency_peak_ratio"] for t, r in zip(top["time_ns"], top["peak_ratio"],
                                                                            strict=True)))
        factor = at_th / float(top["time_ns"].sum())
        out.append(Finding(
            "efficiency", "high" if top["time_ns"].sum() > 0.3 * total else "medium",
            f"{len(low)} op group(s) with {pct(low['time_ns'].sum() / total)} of device time run below "
            f"{pct(th['efficiency_peak_ratio'])} of their roofline on {pk.device}",
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
            f"fp32 matrix ops take {pct(fp32_ns / total)} of device time on {pk.device}, whose "
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
            f"memory-bound elementwise / norm / softmax ops take {pct(small_ns / total)} of device time in "
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

