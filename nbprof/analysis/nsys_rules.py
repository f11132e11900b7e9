"""Nsight Systems expert-system rules (``nsys analyze``) as pure functions and advisor findings.

Rule definitions follow the rule scripts of Nsight Systems 2022.4 (``target-linux-x64/rules/*.py``;
modern names in ../shared/notes/formats.md §4.5):

===========================  =======================  ===========================================
function                     nsys 2022 / modern rule  what it flags
===========================  =======================  ===========================================
``gpu_gaps``                 gpu-starv / gpu_gaps     GPU idle longer than ``min_gap_ns`` (500 ms)
                                                      between its operations, per process and device
``gpu_low_utilization``      gpu-low-util /           the device's active span cut in ``chunks`` (30)
                             gpu_time_util            equal chunks; chunks whose summed op time is below
                                                      ``threshold_ratio`` (50 %) of the chunk, adjacent
                                                      ones merged (time-weighted average)
``sync_apis``                cuda-sync-api /          ``cudaDeviceSynchronize*``/``cudaStreamSynchronize*``
                             cuda_api_sync            calls
``sync_memcpy``              cuda-sync-memcpy /       memcpys launched by ``cudaMemcpy*`` without
                             cuda_memcpy_sync         ``Async``, except HtoD <= 64000 B and same-device
``sync_memset``              cuda-sync-memset /       memsets launched by ``cudaMemset*`` without
                             cuda_memset_sync         ``async`` on pinned or managed memory
``async_memcpy_pageable``    cuda-async-memcpy /      ``cudaMemcpy*Async*`` with a pageable source or
                             cuda_memcpy_async        destination (runs synchronously)
===========================  =======================  ===========================================

GPU operations are kernels, memcpys and memsets. Each function returns a DataFrame (empty when the
rule finds nothing or the trace lacks the data); :func:`nsys_findings` turns them into the advisor's
:class:`nbprof.analysis.findings.Finding` objects -- evidence rows, a next step, and a what-if saving where one
is quantifiable (sync API calls: the calls taking no time), ranked by :func:`nbprof.analysis.findings.rank`. Works on nsys traces and,
where the data allows, on Kineto traces (memory kinds come from the Kineto memcpy names
``Memcpy HtoD (Pageable -> Device)``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.model import Trace
from ..units import fmt_ms_text as _ms
from ..units import fmt_pct_text as _pct
from . import evidence as evi
from . import whatif
from ._rule_util import exact
from .findings import Finding, Scenario, quantify, rank

__all__ = ["gpu_gaps", "gpu_low_utilization", "sync_apis", "sync_memcpy", "sync_memset", "async_memcpy_pageable",
           "nsys_findings", "DEFAULT_GAP_NS", "DEFAULT_UTIL_THRESHOLD_RATIO", "DEFAULT_CHUNKS"]

DEFAULT_GAP_NS = 500_000_000
DEFAULT_UTIL_THRESHOLD_RATIO = 0.5
DEFAULT_CHUNKS = 30
_KINETO_KINDS = re.compile(r"\((\w+) -> (\w+)\)")


def _tables(trace: Trace) -> dict[str, pd.DataFrame]:
    return trace.tables


def _gpu_ops(trace: Trace) -> pd.DataFrame:
    """``ts_ns, end_ns, device, pid, correlation, cat`` of kernels/memcpy/memset; pid = owning process (-1 unknown)."""
    ev = trace.events
    ops = ev[pred.is_device_op(ev)]
    out = pd.DataFrame({"ts_ns": ops["ts_ns"].to_numpy(), "end_ns": (ops["ts_ns"] + ops["dur_ns"]).to_numpy(),
                        "device": ops["device"].astype("int64").to_numpy(),
                        "correlation": ops["correlation"].to_numpy(), "cat": ops["cat"].astype(str).to_numpy()})
    t = _tables(trace)
    owners = [t[k][["ts_ns", "correlation", "device", "pid"]] for k in ("kernels", "memcpy", "memset") if k in t]
    if owners:
        o = pd.concat(owners, ignore_index=True).drop_duplicates(["ts_ns", "correlation", "device"])
        out = out.merge(o, on=["ts_ns", "correlation", "device"], how="left")
        out["pid"] = out["pid"].fillna(-1).astype("int64")
    else:
        out["pid"] = -1
    return out


def gpu_gaps(trace: Trace, *, min_gap_ns: int = DEFAULT_GAP_NS) -> pd.DataFrame:
    """Time where a GPU runs nothing for longer than ``min_gap_ns`` (nsys ``gpu-starv``).

    Operations are merged per (process, device); a gap is the time between the end of a merged busy
    interval and the next start, kept when ``> min_gap_ns``.

    Returns
    -------
    DataFrame
        ``pid, device, gap_start_ns, duration_ns`` sorted by duration descending, then start.
    """
    ops = _gpu_ops(trace)
    rows = []
    for (pid, dev), g in ops.groupby(["pid", "device"]):
        g = g.sort_values(["ts_ns", "end_ns"])
        run_end = np.maximum.accumulate(g["end_ns"].to_numpy())
        starts = g["ts_ns"].to_numpy()
        gap = starts[1:] - run_end[:-1]
        for i in np.flatnonzero(gap > min_gap_ns):
            rows.append((int(pid), int(dev), int(run_end[i]), int(gap[i])))
    df = pd.DataFrame(rows, columns=["pid", "device", "gap_start_ns", "duration_ns"])
    return df.sort_values(["duration_ns", "gap_start_ns"], ascending=[False, True]).reset_index(drop=True)


def gpu_low_utilization(trace: Trace, *, threshold_ratio: float = DEFAULT_UTIL_THRESHOLD_RATIO,
                        chunks: int = DEFAULT_CHUNKS) -> pd.DataFrame:
    """Regions of low GPU use (nsys ``gpu-low-util``).

    The span from the first to the last GPU operation of each (process, device) is cut into ``chunks``
    chunks of ``ceil(span / chunks)`` ns (the last one shorter); a chunk's use is the summed overlap
    of the operations with it divided by its length (overlapping operations count twice, as in nsys).
    Chunks under ``threshold_ratio`` are kept and adjacent ones merged, their use averaged weighted by
    length.

    Returns
    -------
    DataFrame
        ``in_use_ratio, duration_ns, start_ns, pid, device`` sorted by ``in_use_ratio`` then duration.
    """
    ops = _gpu_ops(trace)
    rows = []
    for (pid, dev), g in ops.groupby(["pid", "device"]):
        s, e = g["ts_ns"].to_numpy(), g["end_ns"].to_numpy()
        start, end = int(s.min()), int(e.max())
        size = int(np.ceil((end - start) / chunks))
        if size <= 0:
            continue
        low = []
        for c in range(chunks):
            cs, ce = start + c * size, min(start + (c + 1) * size, end)
            if cs >= ce:
                continue
            ov = np.clip(np.minimum(e, ce) - np.maximum(s, cs), 0, None)
            ratio = float(ov[(s < ce) & (e > cs)].sum()) / (ce - cs)
            if ratio < threshold_ratio:
                low.append((c, cs, ce, ratio))
        groups: list[list[tuple[Any, ...]]] = []
        for item in low:
            if groups and groups[-1][-1][0] == item[0] - 1:
                groups[-1].append(item)
            else:
                groups.append([item])
        for grp in groups:
            sizes = np.array([x[2] - x[1] for x in grp], dtype=float)
            avg = float((sizes * np.array([x[3] for x in grp])).sum() / sizes.sum())
            rows.append((avg, grp[-1][2] - grp[0][1], grp[0][1], int(pid), int(dev)))
    df = pd.DataFrame(rows, columns=["in_use_ratio", "duration_ns", "start_ns", "pid", "device"])
    return df.sort_values(["in_use_ratio", "duration_ns"]).reset_index(drop=True)


def _runtime(trace: Trace) -> pd.DataFrame:
    rt = _tables(trace).get("runtime")
    if rt is not None:
        return rt[["ts_ns", "dur_ns", "pid", "tid", "correlation", "api_name"]]
    ev = trace.events
    r = ev[pred.is_runtime(ev)]
    return pd.DataFrame({"ts_ns": r["ts_ns"].to_numpy(), "dur_ns": r["dur_ns"].to_numpy(), "pid": r["pid"].to_numpy(),
                         "tid": r["tid"].to_numpy(), "correlation": r["correlation"].to_numpy(),
                         "api_name": r["name"].astype(str).to_numpy()})


def sync_apis(trace: Trace) -> pd.DataFrame:
    """``cudaDeviceSynchronize``/``cudaStreamSynchronize`` calls (nsys ``cuda-sync-api``).

    Returns
    -------
    DataFrame
        ``duration_ns, start_ns, pid, tid, api_name`` sorted by duration descending.
    """
    rt = _runtime(trace)
    m = rt[rt["api_name"].str.match(r"(?i)cuda(Device|Stream)Synchronize")]
    return pd.DataFrame({"duration_ns": m["dur_ns"].to_numpy(), "start_ns": m["ts_ns"].to_numpy(),
                         "pid": m["pid"].to_numpy(), "tid": m["tid"].to_numpy(), "api_name": m["api_name"].to_numpy()}
                        ).sort_values(["duration_ns", "start_ns"], ascending=[False, True]).reset_index(drop=True)


def _memcpys(trace: Trace) -> pd.DataFrame:
    mt = _tables(trace).get("memcpy")
    if mt is not None:
        return mt[["ts_ns", "dur_ns", "correlation", "device", "bytes", "copy_kind", "src_kind", "dst_kind",
                   "src_device", "dst_device"]]
    ev = trace.events
    m = ev[pred.is_memcpy(ev)]
    kinds = m["name"].astype(str).str.extract(_KINETO_KINDS)
    htod = m["name"].astype(str).str.contains("HtoD")
    return pd.DataFrame({"ts_ns": m["ts_ns"].to_numpy(), "dur_ns": m["dur_ns"].to_numpy(),
                         "correlation": m["correlation"].to_numpy(), "device": m["device"].to_numpy(),
                         "bytes": m["bytes"].to_numpy(), "copy_kind": np.where(htod, 1, -1),
                         "src_kind": kinds[0].fillna("Unknown").to_numpy(), "dst_kind": kinds[1].fillna("Unknown").to_numpy(),
                         "src_device": -1, "dst_device": -1})


def _with_api(ops: pd.DataFrame, rt: pd.DataFrame, pattern: str, exclude: str) -> pd.DataFrame:
    api = rt[rt["api_name"].str.match(pattern) & ~rt["api_name"].str.contains(exclude, case=False)]
    j = ops.merge(api[["correlation", "api_name", "pid"]], on="correlation")
    return j


def sync_memcpy(trace: Trace) -> pd.DataFrame:
    """Synchronous memcpys (nsys ``cuda-sync-memcpy``): launched by ``cudaMemcpy*`` without ``Async``.

    Skipped as nsys skips them: host-to-device copies of at most 64000 bytes, and copies within one device.

    Returns
    -------
    DataFrame
        ``duration_ns, start_ns, src_kind, dst_kind, bytes, pid, device, api_name`` (one row per copy and
        launching API record) sorted by duration descending.
    """
    m = _memcpys(trace)
    m = m[~((m["bytes"] <= 64000) & (m["copy_kind"] == 1)) & ~((m["src_device"] >= 0) & (m["src_device"] == m["dst_device"]))]
    j = _with_api(m, _runtime(trace), r"cudaMemcpy", "Async")
    out = pd.DataFrame({"duration_ns": j["dur_ns"], "start_ns": j["ts_ns"], "src_kind": j["src_kind"],
                        "dst_kind": j["dst_kind"], "bytes": j["bytes"], "pid": j["pid"], "device": j["device"],
                        "api_name": j["api_name"]})
    return out.sort_values(["duration_ns", "start_ns", "api_name"], ascending=[False, True, True]).reset_index(drop=True)


def sync_memset(trace: Trace) -> pd.DataFrame:
    """Synchronous memsets (nsys ``cuda-sync-memset``): ``cudaMemset*`` without ``async`` on pinned/managed memory.

    Returns
    -------
    DataFrame
        ``duration_ns, start_ns, mem_kind, bytes, pid, device, api_name`` sorted by duration descending.
    """
    ms = _tables(trace).get("memset")
    if ms is None:
        return pd.DataFrame(columns=["duration_ns", "start_ns", "mem_kind", "bytes", "pid", "device", "api_name"])
    ms = ms[ms["mem_kind"].isin(["Pinned", "Managed"])].drop(columns=["pid"])
    j = _with_api(ms, _runtime(trace), r"cudaMemset", "async")
    out = pd.DataFrame({"duration_ns": j["dur_ns"], "start_ns": j["ts_ns"], "mem_kind": j["mem_kind"],
                        "bytes": j["bytes"], "pid": j["pid"], "device": j["device"], "api_name": j["api_name"]})
    return out.sort_values(["duration_ns", "start_ns"], ascending=[False, True]).reset_index(drop=True)


def async_memcpy_pageable(trace: Trace) -> pd.DataFrame:
    """Async memcpys touching pageable host memory (nsys ``cuda-async-memcpy``); they run synchronously.

    Returns
    -------
    DataFrame
        ``duration_ns, start_ns, src_kind, dst_kind, bytes, pid, device, api_name`` sorted by duration descending.
    """
    m = _memcpys(trace)
    m = m[(m["src_kind"] == "Pageable") | (m["dst_kind"] == "Pageable")]
    rt = _runtime(trace)
    api = rt[rt["api_name"].str.contains("Async", case=True) & rt["api_name"].str.startswith("cu")]
    j = m.merge(api[["correlation", "api_name", "pid"]], on="correlation")
    out = pd.DataFrame({"duration_ns": j["dur_ns"], "start_ns": j["ts_ns"], "src_kind": j["src_kind"],
                        "dst_kind": j["dst_kind"], "bytes": j["bytes"], "pid": j["pid"], "device": j["device"],
                        "api_name": j["api_name"]})
    return out.sort_values(["duration_ns", "start_ns"], ascending=[False, True]).reset_index(drop=True)


#: Why an nsys rule's findings carry no predicted saving.
UNQUANTIFIED = {
    "nsys_gpu_gaps": "a symptom: the saving is that of the finding naming what the CPU does in the gap",
    "nsys_gpu_low_util": "a symptom: the saving is that of the finding naming its cause",
    "nsys_sync_memcpy": "the replay has no model of making a copy asynchronous",
    "nsys_sync_memset": "the replay has no model of making a memset asynchronous",
    "nsys_async_memcpy_pageable": "the replay has no model of pinned memory for these copies",
}
_PARTS = {"nsys_gpu_gaps": "host", "nsys_gpu_low_util": "host", "nsys_sync_api": "sync_wait",
          "nsys_sync_memcpy": "memcpy", "nsys_sync_memset": "memcpy", "nsys_async_memcpy_pageable": "memcpy"}


def _rows_at(trace: Trace, df: pd.DataFrame, host: bool) -> list[int]:
    """Evidence rows: the events (host runtime calls or device ops) starting at ``df["start_ns"]``."""
    ev = trace.events
    m = (pred.is_runtime(ev) if host else pred.is_device_op(ev)) & np.isin(ev["ts_ns"].to_numpy(np.int64),
                                                                         df["start_ns"].to_numpy(np.int64))
    return evi.longest(trace, m)


def nsys_findings(trace: Trace, *, min_gap_ns: int = DEFAULT_GAP_NS, threshold_ratio: float = DEFAULT_UTIL_THRESHOLD_RATIO,
                  chunks: int = DEFAULT_CHUNKS, quantify_savings: bool = True) -> list[Finding]:
    """Run every rule and return :class:`nbprof.analysis.findings.Finding` objects (empty list: nothing found),
    ranked by :func:`nbprof.analysis.findings.rank`.

    Rule keys: ``nsys_gpu_gaps``, ``nsys_gpu_low_util``, ``nsys_sync_api``, ``nsys_sync_memcpy``,
    ``nsys_sync_memset``, ``nsys_async_memcpy_pageable``. Evidence holds counts, total ns and the
    worst instances (start/duration ns, relative to the trace origin); ``evidence_rows`` the events.
    ``quantify_savings``: predict the saving of the quantifiable ones (:func:`nbprof.analysis.whatif.predict`:
    the sync API calls taking no time); a trace without steps leaves them unquantified with the reason.
    """
    out = []
    gaps = gpu_gaps(trace, min_gap_ns=min_gap_ns)
    if len(gaps):
        w = gaps.iloc[0]
        out.append(Finding(
            "nsys_gpu_gaps", "high" if gaps["duration_ns"].sum() > 2 * min_gap_ns else "medium",
            f"GPU idle {len(gaps)} times for more than {_ms(min_gap_ns)} (longest {_ms(w['duration_ns'])})",
            {"gaps": int(len(gaps)), "total_gap_ns": int(gaps["duration_ns"].sum()), "min_gap_ns": int(min_gap_ns),
             "worst": gaps.head(5).to_dict("records")},
            f"device {int(w['device'])}, from {_ms(w['gap_start_ns'])}",
            "Look at the CPU threads in the gap (NVTX ranges, OS runtime calls): data loading, host-side "
            "preprocessing or synchronisation starve the GPU; overlap them with GPU work (DataLoader workers, "
            "prefetching, CUDA streams).",
            evidence_rows=evi.idle_gap_rows(trace, int(w["device"])),
        ))
    low = gpu_low_utilization(trace, threshold_ratio=threshold_ratio, chunks=chunks)
    if len(low):
        w = low.iloc[0]
        out.append(Finding(
            "nsys_gpu_low_util", "medium",
            f"{len(low)} regions with GPU use below {_pct(threshold_ratio)} (lowest {_pct(w['in_use_ratio'], 1)} over "
            f"{_ms(w['duration_ns'])})",
            {"regions": low.head(10).to_dict("records"), "threshold_ratio": threshold_ratio, "chunks": chunks},
            f"device {int(w['device'])}, from {_ms(w['start_ns'])}",
            "Find what the CPU does in these regions (NVTX step marks help); batch small kernels, use CUDA "
            "graphs or larger batches if launches dominate.",
            evidence_rows=evi.idle_gap_rows(trace, int(w["device"])),
        ))
    for key, df, what, advice in (
        ("nsys_sync_api", sync_apis(trace), "synchronisation API calls",
         "Each blocks the CPU until the GPU is idle; remove the ones not needed (e.g. .item(), .cpu(), "
         "torch.cuda.synchronize() in the loop) or move them out of the hot path."),
        ("nsys_sync_memcpy", sync_memcpy(trace), "synchronous memcpys",
         "Use cudaMemcpyAsync with pinned host memory (torch: pin_memory=True, .to(device, non_blocking=True)) "
         "so copies overlap compute."),
        ("nsys_sync_memset", sync_memset(trace), "synchronous memsets on pinned/managed memory",
         "Use cudaMemsetAsync on a stream."),
        ("nsys_async_memcpy_pageable", async_memcpy_pageable(trace), "async memcpys with pageable memory",
         "Pageable memory makes async copies synchronous: pin the host buffers (DataLoader pin_memory=True, "
         "tensor.pin_memory())."),
    ):
        if len(df):
            if "device" in df:  # one copy can be listed under two API records (runtime + its _vNNNN twin)
                df = df.drop_duplicates(["start_ns", "device"])
            w = df.iloc[0]
            dur_col = "duration_ns"
            sc: Scenario | None = None
            if key == "nsys_sync_api":
                sc = whatif.scale(exact(sorted({str(n) for n in df["api_name"]})), 0.0, label=f"{len(df)} sync calls")
            out.append(Finding(
                key, "medium" if len(df) > 1 else "low",
                f"{len(df)} {what} taking {_ms(df[dur_col].sum())} in total",
                {"count": int(len(df)), "total_ns": int(df[dur_col].sum()), "worst": df.head(5).to_dict("records")},
                f"{w['api_name']} at {_ms(w['start_ns'])}", advice,
                evidence_rows=_rows_at(trace, df, host=key == "nsys_sync_api"), scenario=sc,
            ))
    for f in out:
        f.part = _PARTS.get(f.rule, "")
    if quantify_savings:
        quantify(trace, out, {}, UNQUANTIFIED)
    else:
        for f in out:
            f.saving_reason = "not quantified: nsys_findings(quantify_savings=False)"
    return rank(out, list(_PARTS))
