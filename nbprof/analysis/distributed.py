"""Multi-rank analysis: collectives, bus bandwidth, compute/communication overlap, skew, ZeRO patterns.

Pure functions over one or several :class:`~nbprof.trace.model.Trace` (one per rank).

Where communication lives in a Kineto trace:

- **GPU (NCCL/RCCL)**: the collective executes as a device kernel named ``nccl*Kernel*`` /
  ``ncclDevKernel_*`` (``rccl`` on ROCm); recent PyTorch adds ``Collective name``, ``In/Out msg
  nelems``, ``Group size``, ``dtype`` args (the ``collective``/``msg_*`` columns). The host side is a
  ``c10d::<op>`` cpu_op enclosing ``record_param_comms`` and a ``nccl:<op>`` user_annotation whose
  ``Input Dims``/``Input type`` give the message; the kernel is linked to it through the launch's
  correlation id.
- **CPU (gloo)**: ``c10d::<op>`` cpu_ops on the calling thread enqueue the work; gloo's worker threads
  run it inside ``gloo:<op>`` user_annotations (with ``Input Dims``/``Input type``). Gloo has no
  native reduce-scatter: ``c10d::_reduce_scatter_base_`` runs as ``gloo:all_reduce`` of the full tensor.

Each executed collective (kernel or gloo annotation) is one row of :func:`collectives`; its
``collective`` is the API name of the ``c10d::`` call it belongs to (DeepSpeed comms-logger spelling:
``all_reduce``, ``all_gather_into_tensor``, ``reduce_scatter_tensor``, ``broadcast``, ``barrier``,
``all_to_all_single``...), else the backend's name.

Bandwidth (NCCL tests, ``doc/PERFORMANCE.md``, https://github.com/NVIDIA/nccl-tests): with ``S`` the
operation size in bytes and ``t`` its time, ``algbw = S / t``, and ``busbw = algbw * factor``:
all_reduce ``2(n-1)/n``; all_gather and reduce_scatter ``(n-1)/n`` (``S`` = the full gathered
output / the full input, i.e. n times the per-rank shard); all_to_all ``(n-1)/n`` (``alltoall.cu``);
broadcast, reduce, send/recv, gather, scatter ``1``. ``n`` is the group size (``Group size`` arg, else
the process group's size from ``distributedInfo.pg_config``, else the world size). Units: bytes/s;
nccl-tests print GB/s = 1e9 bytes/s; DeepSpeed's comms logger prints Gbps = 1e9 *bits*/s
(8x larger numbers) and its "algbw" for all_reduce is ``2S/t``.

Overlap follows HTA (``hta/analyzers/communication_analysis.py`` ``get_comm_comp_overlap``): per rank,
the union of communication intervals intersected with the union of computation intervals, over the
communication time. Computation on GPU = kernels that are not communication and not
Memcpy/Memset/Sync (HTA's ``NCCL_COMPUTE_KERNEL_RE``); on CPU traces (no device rows) = host cpu_ops
outside the communication threads that neither are nor contain a ``c10d::``/``record_param_comms`` op
(an approximation: host time inside a wrapper that blocks on a collective cannot be told apart).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace.model import Trace
from . import _intervals as iv

__all__ = [
    "BUSBW_FACTOR_SOURCE",
    "busbw_factor",
    "collectives",
    "collective_summary",
    "overlap",
    "skew",
    "collective_skew",
    "zero_stage_pattern",
    "memory_per_rank",
    "wait_transfer",
    "wait_transfer_summary",
    "stragglers",
    "busbw_vs_link",
    "pipeline_bubbles",
    "FsdpPattern",
    "fsdp_pattern",
    "ranks_timeline",
    "DistributedReport",
    "distributed_report",
]

BUSBW_FACTOR_SOURCE = "NVIDIA nccl-tests doc/PERFORMANCE.md (busbw = algbw * factor)"

#: c10d op name (without ``c10d::`` and trailing ``_``) -> DeepSpeed/torch.distributed API name
_C10D_TO_API = {
    "allreduce": "all_reduce",
    "allreduce_coalesced": "all_reduce_coalesced",
    "_allgather_base": "all_gather_into_tensor",
    "allgather": "all_gather",
    "allgather_coalesced": "all_gather_coalesced",
    "allgather_into_tensor_coalesced": "all_gather_into_tensor_coalesced",
    "_reduce_scatter_base": "reduce_scatter_tensor",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter_tensor_coalesced",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "barrier": "barrier",
    "alltoall_base": "all_to_all_single",
    "alltoall": "all_to_all",
    "send": "send",
    "recv": "recv",
    "recv_any_source": "recv",
    "gather": "gather",
    "scatter": "scatter",
}

#: NCCL kernel name fragment -> API name (kernels named ncclKernel_AllReduce_RING_LL_Sum_float,
#: ncclDevKernel_AllGather_RING_LL...)
_NCCL_KERNEL = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.I)
_NCCL_KIND = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "send_recv",
    "alltoall": "all_to_all",
}

_DTYPE_BYTES = {
    "float": 4, "float32": 4, "c10::float": 4, "double": 8, "float64": 8, "half": 2, "c10::half": 2,
    "float16": 2, "c10::bfloat16": 2, "bfloat16": 2, "long": 8, "int64": 8, "long int": 8, "int": 4,
    "int32": 4, "short": 2, "int16": 2, "unsigned char": 1, "uint8": 1, "byte": 1, "signed char": 1,
    "char": 1, "int8": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1,
}


def _family(api: str) -> str:
    a = api.lower()
    if "barrier" in a:
        return "barrier"
    if "all_reduce" in a or a == "allreduce":
        return "all_reduce"
    if "all_gather" in a or "allgather" in a:
        return "all_gather"
    if "reduce_scatter" in a or "reducescatter" in a:
        return "reduce_scatter"
    if "all_to_all" in a or "alltoall" in a:
        return "all_to_all"
    return "one_to_one"  # broadcast, reduce, send/recv, gather, scatter


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor for ``collective`` on ``n`` ranks.

    all_reduce ``2(n-1)/n``; all_gather, reduce_scatter, all_to_all ``(n-1)/n``; broadcast, reduce,
    send/recv, gather, scatter ``1``; barrier NaN (no payload). Source: :data:`BUSBW_FACTOR_SOURCE`.

    >>> busbw_factor("all_reduce", 8), busbw_factor("all_gather", 4), busbw_factor("broadcast", 8)
    (1.75, 0.75, 1.0)
    """
    fam = _family(collective)
    if fam == "barrier" or n < 1:
        return float("nan")
    if fam == "all_reduce":
        return 2.0 * (n - 1) / n
    if fam in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def _tensor_bytes(dims_text: object, types_text: object) -> list[float]:
    """Per-tensor bytes from record_shapes text: '[[85002]]' + '["float"]' -> [340008]."""
    if not isinstance(dims_text, str) or not isinstance(types_text, str):
        return []
    try:
        dims = json.loads(dims_text)
        types = json.loads(types_text)
    except ValueError:
        return []
    out = []
    for d, t in zip(dims, types):
        size = _DTYPE_BYTES.get(str(t).lower())
        if size is None or not isinstance(d, list):
            continue
        if d and isinstance(d[0], list):  # TensorList: sum its tensors
            ne = sum(int(np.prod(x)) if x else 1 for x in d if isinstance(x, list))
        else:
            ne = int(np.prod(d)) if d else 1
        out.append(float(ne * size))
    return out


def _group_size(trace: Trace, pg_name: object) -> int:
    di = trace.meta.distributed_info or {}
    if isinstance(pg_name, str):
        for pg in di.get("pg_config") or []:
            if isinstance(pg, dict) and str(pg.get("pg_name")) == pg_name and pg.get("pg_size"):
                return int(pg["pg_size"])
    return max(int(trace.meta.world_size or 1), 1)


def _op_bytes(fam: str, tensors: list[float], n: int, backend_fam: str | None = None) -> float:
    """nccl-tests size S of one operation from its tensors' bytes.

    With input and output tensors, S is the larger (the gathered output / the full input). With one
    tensor (the ``gloo:``/``nccl:`` annotation's input): all_gather's is the per-rank shard (S = n x
    it); a reduce-scatter that the backend ran as an all-reduce (gloo) or whose one tensor is its input
    has S = it.
    """
    if not tensors:
        return float("nan")
    if backend_fam == "all_reduce" and fam != "barrier":
        return float(sum(tensors))
    if fam in ("all_gather", "reduce_scatter"):
        if len(tensors) == 1:
            return n * tensors[0] if fam == "all_gather" else tensors[0]
        return max(max(tensors), n * min(tensors))
    if fam == "all_to_all":
        return max(tensors)
    if fam == "barrier":
        return 0.0
    return float(sum(tensors))


_COLL_COLUMNS = [
    "rank", "seq", "collective", "backend_name", "family", "api_name", "ts_ns", "dur_ns", "start_abs_ns",
    "api_ts_ns", "api_start_abs_ns", "step", "pid", "tid", "device", "stream", "correlation", "group_size", "msg_bytes",
    "algbw_bytes_per_s", "busbw_bytes_per_s", "pg_name",
]


def _is_gloo(name: str) -> bool:
    return name.startswith("gloo:")


def _comm_exec_mask(ev: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(is_gpu_comm_kernel, is_gloo_annotation)."""
    gpu = pred.is_kernel(ev) & pred.is_communication(ev, where="device")
    gloo = pred.is_communication(ev, where="host") & pred.name_mask(ev["name"], _is_gloo)
    return gpu, gloo


def _api_ops(ev: pd.DataFrame) -> pd.DataFrame:
    names = ev["name"].astype(str)
    m = names.str.startswith("c10d::").to_numpy() & (ev["device"].to_numpy() < 0)
    api = ev.loc[m, ["ts_ns", "dur_ns", "name", "pid", "tid", "input_dims", "input_types"]].copy()
    key = api["name"].astype(str).str.slice(6).str.rstrip("_")
    api["api"] = key.map(lambda k: _C10D_TO_API.get(k, _C10D_TO_API.get(k.lstrip("_"), k)))
    api = api[api["api"].astype(str) != "wait"]
    return api.sort_values("ts_ns", kind="stable")


def collectives(trace: Trace) -> pd.DataFrame:
    """One row per executed collective of one rank.

    Parameters
    ----------
    trace : Trace

    Returns
    -------
    pandas.DataFrame
        ``rank, seq`` (order of execution on this rank), ``collective`` (API name, see module doc),
        ``backend_name`` (kernel or ``gloo:`` name), ``family`` (all_reduce, all_gather,
        reduce_scatter, all_to_all, one_to_one, barrier), ``api_name`` (the ``c10d::`` op, NaN if not
        found), ``ts_ns, dur_ns`` (execution), ``start_abs_ns`` (``meta.origin_ns + ts_ns``, -1 without
        an origin), ``api_ts_ns``/``api_start_abs_ns`` (when the rank called it; -1 if unknown),
        ``step``, ``pid, tid, device, stream, correlation``, ``group_size``, ``msg_bytes`` (nccl-tests size S,
        NaN when the trace has no shapes), ``algbw_bytes_per_s = S/t``, ``busbw_bytes_per_s``
        (:func:`busbw_factor`), ``pg_name`` (the process group's name from the kernel's ``Process Group
        Name`` arg, NaN when the trace does not say). Empty (with these columns) when the trace has no
        collectives.
    """
    ev = trace.events
    if ev.empty:
        return pd.DataFrame(columns=_COLL_COLUMNS)
    gpu, gloo = _comm_exec_mask(ev)
    sel = gpu | gloo
    if not sel.any():
        return pd.DataFrame(columns=_COLL_COLUMNS)
    ex = ev.loc[sel].copy()
    ex["is_gpu"] = gpu[sel]
    ex = ex.sort_values("ts_ns", kind="stable")
    api = _api_ops(ev)
    origin = trace.meta.origin_ns
    api_name = np.full(len(ex), None, dtype=object)
    api_ts = np.full(len(ex), -1, dtype=np.int64)
    api_dims = np.full(len(ex), None, dtype=object)
    api_types = np.full(len(ex), None, dtype=object)
    if len(api):
        if ex["is_gpu"].any():
            # kernel -> launching runtime call (correlation) -> enclosing c10d op / nccl:<op> annotation
            host = ev[(ev["device"] < 0) & (ev["correlation"] >= 0)]
            launch = host.drop_duplicates("correlation").set_index("correlation")[["ts_ns", "tid"]]
            ann = ev[pred.is_communication(ev, where="host") & ~pred.name_mask(ev["name"], _is_gloo)]
            gi = np.flatnonzero(ex["is_gpu"].to_numpy())
            corr = ex["correlation"].to_numpy()[gi]
            lk = launch.reindex(corr)
            ok = lk["ts_ns"].notna().to_numpy()
            gi, lts, ltid = gi[ok], lk["ts_ns"].to_numpy()[ok].astype(np.int64), lk["tid"].to_numpy()[ok].astype(np.int64)
            for tid in np.unique(ltid):
                sel_k = gi[ltid == tid]
                t_k = lts[ltid == tid]
                for frame, is_api in ((api, True), (ann, False)):
                    f = frame[frame["tid"] == tid].sort_values("ts_ns", kind="stable")
                    if f.empty:
                        continue
                    fs = f["ts_ns"].to_numpy()
                    fe = fs + f["dur_ns"].to_numpy()
                    j = np.searchsorted(fs, t_k, side="right") - 1
                    hit = (j >= 0) & (fe[np.clip(j, 0, None)] >= t_k)
                    for i, jj in zip(sel_k[hit], j[hit]):
                        row = f.iloc[jj]
                        if is_api:
                            api_name[i], api_ts[i] = row["api"], int(row["ts_ns"])
                            if api_dims[i] is None:
                                api_dims[i], api_types[i] = row["input_dims"], row["input_types"]
                        elif isinstance(row["input_dims"], str):
                            api_dims[i], api_types[i] = row["input_dims"], row["input_types"]
        # gloo: FIFO matching of annotations to the c10d calls that enqueued them
        gl_idx = np.flatnonzero(~ex["is_gpu"].to_numpy())
        if gl_idx.size:
            a_ts = api["ts_ns"].to_numpy()
            a_names = api["api"].to_numpy()
            j = 0
            queue: list[int] = []
            for i in gl_idx:
                t = int(ex["ts_ns"].iloc[i])
                while j < len(a_ts) and a_ts[j] <= t:
                    queue.append(j)
                    j += 1
                if queue:
                    k = queue.pop(0)
                    api_name[i], api_ts[i] = a_names[k], int(a_ts[k])
    backend = ex["name"].astype(str).to_numpy()
    coll = []
    for i, b in enumerate(backend):
        if api_name[i] is not None:
            coll.append(api_name[i])
        elif isinstance(ex["collective"].iloc[i], str):
            coll.append(str(ex["collective"].iloc[i]).lower().replace("allreduce", "all_reduce")
                        .replace("allgather", "all_gather").replace("reducescatter", "reduce_scatter"))
        elif b.startswith("gloo:"):
            coll.append(b[5:])
        else:
            m = _NCCL_KERNEL.match(b)
            coll.append(_NCCL_KIND.get(m.group(1).lower(), m.group(1).lower()) if m else b)
    fam = [_family(c) for c in coll]
    n_arr = []
    size = []
    for i in range(len(ex)):
        r = ex.iloc[i]
        gs = int(r["group_size"]) if r["group_size"] > 0 else _group_size(trace, r["pg_name"])
        n_arr.append(gs)
        s = float("nan")
        if r["is_gpu"] and (r["msg_in_nelems"] >= 0 or r["msg_out_nelems"] >= 0) and isinstance(r["dtype"], str):
            # Kineto's NCCL args: In/Out msg nelems per rank -> S (gathered output / full input / message)
            item = _DTYPE_BYTES.get(r["dtype"].lower(), float("nan"))
            nin, nout = float(r["msg_in_nelems"]), float(r["msg_out_nelems"])
            if fam[i] == "all_gather":
                s = (nout if nout >= 0 else gs * nin) * item
            elif fam[i] == "reduce_scatter":
                s = (nin if nin >= 0 else gs * nout) * item
            else:
                s = max(nin, nout) * item
        else:
            dims, types = (r["input_dims"], r["input_types"]) if not r["is_gpu"] else (api_dims[i], api_types[i])
            bfam = _family(backend[i][5:]) if backend[i].startswith("gloo:") else None
            s = _op_bytes(fam[i], _tensor_bytes(dims, types), gs, bfam)
        size.append(s)
    dur = ex["dur_ns"].to_numpy().astype(float)
    size_a = np.array(size, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(dur > 0, size_a / (dur * 1e-9), np.nan)
    factor = np.array([busbw_factor(c, n) for c, n in zip(coll, n_arr)])
    out = pd.DataFrame({
        "rank": np.int32(trace.meta.rank),
        "seq": np.arange(len(ex), dtype=np.int64),
        "collective": coll,
        "backend_name": backend,
        "family": fam,
        "api_name": api_name,
        "ts_ns": ex["ts_ns"].to_numpy(),
        "dur_ns": ex["dur_ns"].to_numpy(),
        "start_abs_ns": ex["ts_ns"].to_numpy() + origin if origin is not None else np.full(len(ex), -1, np.int64),
        "api_ts_ns": api_ts,
        "api_start_abs_ns": np.where(api_ts >= 0, api_ts + (origin or 0), -1) if origin is not None else np.full(len(ex), -1, np.int64),
        "step": ex["step"].to_numpy(),
        "pid": ex["pid"].to_numpy(),
        "tid": ex["tid"].to_numpy(),
        "device": ex["device"].to_numpy(),
        "stream": ex["stream"].to_numpy(),
        "correlation": ex["correlation"].to_numpy(),
        "group_size": np.array(n_arr, dtype=np.int32),
        "msg_bytes": size_a,
        "algbw_bytes_per_s": algbw,
        "busbw_bytes_per_s": algbw * factor,
        "pg_name": ex["pg_name"].astype(object).to_numpy(),
    })
    return out.reset_index(drop=True)


def _as_list(traces: Trace | Iterable[Trace]) -> list[Trace]:
    if isinstance(traces, Trace):
        return [traces]
    return list(traces)


def collective_summary(traces: Trace | Iterable[Trace]) -> pd.DataFrame:
    """Per rank and collective: ``rank, collective, family, count, total_ns, mean_ns, total_bytes,
    algbw_bytes_per_s, busbw_bytes_per_s, group_size``.

    Bandwidths are time-weighted (total bytes over total time of the calls that have a size); see the
    module docstring for the formula and units.
    """
    frames = [collectives(t) for t in _as_list(traces)]
    frames = [f for f in frames if len(f)]
    cols = ["rank", "collective", "family", "count", "total_ns", "mean_ns", "total_bytes", "algbw_bytes_per_s",
            "busbw_bytes_per_s", "group_size"]
    if not frames:
        return pd.DataFrame(columns=cols)
    c = pd.concat(frames, ignore_index=True)
    rows = []
    for (rank, coll), g in c.groupby(["rank", "collective"], sort=True):
        sized = g[g["msg_bytes"].notna() & (g["dur_ns"] > 0)]
        tb = float(sized["msg_bytes"].sum()) if len(sized) else float("nan")
        tt = float(sized["dur_ns"].sum()) * 1e-9 if len(sized) else float("nan")
        n = int(g["group_size"].iloc[0])
        alg = tb / tt if len(sized) and tt > 0 else float("nan")
        rows.append(dict(rank=int(rank), collective=coll, family=g["family"].iloc[0], count=len(g),
                         total_ns=int(g["dur_ns"].sum()), mean_ns=float(g["dur_ns"].mean()),
                         total_bytes=tb, algbw_bytes_per_s=alg, busbw_bytes_per_s=alg * busbw_factor(coll, n),
                         group_size=n))
    return pd.DataFrame(rows, columns=cols)


def _before_last_step(trace: Trace) -> tuple[int | None, set[int] | None]:
    """HTA's default window: (last ProfilerStep start, correlations launched before it).

    HTA (``hta/common/trace.py`` ``_filter_irrelevant_gpu_kernels``, ``include_last_profiler_step=False``)
    keeps GPU kernels whose launching host event starts before the last ``ProfilerStep``; with fewer
    than two steps it keeps everything.
    """
    ev = trace.events
    st = ev[pred.is_step_row(ev)]
    if len(st) < 2:
        return None, None
    last = int(st["ts_ns"].max())
    host = ev[(ev["device"] < 0) & (ev["correlation"] >= 0) & (ev["ts_ns"] < last)]
    return last, set(host["correlation"].tolist())


def _compute_intervals(trace: Trace, comm_tids: set[int], keep_corr: set[int] | None = None,
                       before_ns: int | None = None) -> iv.Intervals:
    ev = trace.events
    if trace.has_device:
        is_kernel = pred.is_kernel(ev)
        k = ev[is_kernel & ~pred.is_communication(ev, where="device")]
        # HTA's NCCL_COMPUTE_KERNEL_RE exclusion, kept verbatim for parity with get_comm_comp_overlap
        memlike = k["name"].astype(str).str.match(r"^(nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
        k = k[~memlike]
        if keep_corr is not None:
            k = k[k["correlation"].isin(keep_corr)]
        return iv.merge(k["ts_ns"].to_numpy(), (k["ts_ns"] + k["dur_ns"]).to_numpy())
    host = ev[pred.is_host_op(ev, annotations=False)]
    host = host[~host["tid"].isin(comm_tids)]
    if before_ns is not None:
        host = host[host["ts_ns"] < before_ns]
    hn = host["name"].astype(str)
    is_comm = hn.str.startswith("c10d::") | (hn == "record_param_comms")
    comm_ops = host[is_comm]
    cand = host[~is_comm]
    if len(comm_ops) and len(cand):
        cs = np.sort(comm_ops["ts_ns"].to_numpy())
        st = cand["ts_ns"].to_numpy()
        en = st + cand["dur_ns"].to_numpy()
        contains = np.searchsorted(cs, en, side="left") - np.searchsorted(cs, st, side="left") > 0
        cand = cand[~contains]
    comp = iv.merge(cand["ts_ns"].to_numpy(), (cand["ts_ns"] + cand["dur_ns"]).to_numpy())
    if len(comm_ops):
        comp = iv.subtract(comp, iv.merge(comm_ops["ts_ns"].to_numpy(),
                                          (comm_ops["ts_ns"] + comm_ops["dur_ns"]).to_numpy()))
    return comp


def overlap(traces: Trace | Iterable[Trace], *, until_last_step: bool = False) -> pd.DataFrame:
    """Compute/communication overlap and exposed communication per rank.

    Parameters
    ----------
    traces : Trace or iterable of Trace
    until_last_step : bool, default False
        Keep only what was launched before the last ``ProfilerStep`` starts -- HTA's default
        (``TraceAnalysis(include_last_profiler_step=False)``), for like-for-like comparisons with
        HTA's ``get_comm_comp_overlap``. No effect with fewer than two steps.

    Returns
    -------
    pandas.DataFrame
        ``rank, comm_ns`` (union of collective execution intervals), ``compute_ns`` (union of computation,
        see module docstring), ``overlap_ns`` (their intersection), ``exposed_comm_ns = comm_ns -
        overlap_ns``, ``comm_comp_overlap_ratio = overlap_ns / comm_ns`` (HTA's
        ``comp_comm_overlap_ratio``; NaN without communication), ``exposed_comm_ratio`` (exposed over
        the trace span), ``span_ns``, ``basis`` ("gpu_kernels" or "cpu_ops").
    """
    rows = []
    for t in _as_list(traces):
        c = collectives(t)
        last, keep = _before_last_step(t) if until_last_step else (None, None)
        if len(c) and last is not None:
            gpu_rows = c["device"] >= 0
            c = c[(gpu_rows & c["correlation"].isin(keep)) | (~gpu_rows & (c["ts_ns"] < last))]
        comm = iv.merge(c["ts_ns"].to_numpy(np.int64), (c["ts_ns"] + c["dur_ns"]).to_numpy(np.int64)) if len(c) else iv.empty()
        comm_tids = set(int(x) for x in c.loc[c["device"] < 0, "tid"]) if len(c) else set()
        comp = _compute_intervals(t, comm_tids, keep, last)
        ov = iv.total_ns(iv.intersect(comm, comp))
        cn = iv.total_ns(comm)
        span = t.duration_ns
        rows.append(dict(rank=t.meta.rank, comm_ns=cn, compute_ns=iv.total_ns(comp), overlap_ns=ov,
                         exposed_comm_ns=cn - ov, comm_comp_overlap_ratio=ov / cn if cn else float("nan"),
                         exposed_comm_ratio=(cn - ov) / span if span else float("nan"), span_ns=span,
                         basis="gpu_kernels" if t.has_device else "cpu_ops"))
    return pd.DataFrame(rows, columns=["rank", "comm_ns", "compute_ns", "overlap_ns", "exposed_comm_ns",
                                       "comm_comp_overlap_ratio", "exposed_comm_ratio", "span_ns", "basis"])


def collective_skew(traces: Sequence[Trace]) -> pd.DataFrame:
    """Arrival skew of matched collectives across ranks.

    The k-th call of a collective on one rank is matched with the k-th call of the same collective on
    the others (collectives are issued in the same order on every rank of a group). Arrival is when
    the rank *called* it (``api_start_abs_ns``; the execution start when the call is unknown), on the
    absolute clock (``meta.origin_ns``, Kineto ``baseTimeNanoseconds``; clocks of different hosts are
    assumed synchronised).

    Returns
    -------
    pandas.DataFrame
        ``collective, k, ranks, first_rank, last_rank, spread_ns`` (last minus first arrival) and one
        ``lag_ns_r{R}`` column per rank (arrival minus the first arrival). Empty when fewer than two
        ranks have an absolute origin.
    """
    frames = []
    for t in traces:
        if t.meta.origin_ns is None:
            continue
        c = collectives(t)
        if c.empty:
            continue
        arr = np.where(c["api_start_abs_ns"] >= 0, c["api_start_abs_ns"], c["start_abs_ns"])
        c = c.assign(arrival_ns=arr)
        c["k"] = c.groupby("collective").cumcount()
        frames.append(c[["rank", "collective", "k", "arrival_ns"]])
    if len(frames) < 2:
        return pd.DataFrame(columns=["collective", "k", "ranks", "first_rank", "last_rank", "spread_ns"])
    a = pd.concat(frames, ignore_index=True)
    piv = a.pivot_table(index=["collective", "k"], columns="rank", values="arrival_ns", aggfunc="first")
    piv = piv.dropna()
    if piv.empty:
        return pd.DataFrame(columns=["collective", "k", "ranks", "first_rank", "last_rank", "spread_ns"])
    vals = piv.to_numpy(dtype=np.float64)
    first = vals.min(axis=1)
    out = pd.DataFrame({
        "collective": piv.index.get_level_values(0),
        "k": piv.index.get_level_values(1).astype(int),
        "ranks": vals.shape[1],
        "first_rank": piv.columns.to_numpy()[vals.argmin(axis=1)],
        "last_rank": piv.columns.to_numpy()[vals.argmax(axis=1)],
        "spread_ns": (vals.max(axis=1) - first).astype(np.int64),
    })
    for j, r in enumerate(piv.columns):
        out[f"lag_ns_r{int(r)}"] = (vals[:, j] - first).astype(np.int64)
    return out.sort_values(["collective", "k"]).reset_index(drop=True)


def skew(traces: Sequence[Trace], *, straggler_ratio: float = 0.5) -> pd.DataFrame:
    """Per-rank skew and straggler ranks.

    Parameters
    ----------
    traces : sequence of Trace
        One per rank.
    straggler_ratio : float
        A rank is a straggler when it arrives last at more than this fraction of the matched collectives
        and more than one rank is compared.

    Returns
    -------
    pandas.DataFrame
        ``rank, steps, step_mean_ns`` (ProfilerStep durations), ``step_mean_skew_ns`` (its mean step
        minus the fastest rank's), ``comm_ns, exposed_comm_ns`` (from :func:`overlap`),
        ``matched_collectives``, ``last_arrival_count``, ``last_arrival_ratio``, ``mean_lag_ns``
        (mean arrival lag behind the first rank, see :func:`collective_skew`), ``straggler`` (bool).
    """
    traces = list(traces)
    ov = overlap(traces).set_index("rank")
    cs = collective_skew(traces)
    rows = []
    for t in traces:
        ev = t.events
        st = ev[pred.is_step_row(ev)]
        r = t.meta.rank
        lagcol = f"lag_ns_r{r}"
        nmatch = len(cs) if lagcol in cs else 0
        last = int((cs["last_rank"] == r).sum()) if nmatch else 0
        rows.append(dict(
            rank=r, steps=len(st), step_mean_ns=float(st["dur_ns"].mean()) if len(st) else float("nan"),
            comm_ns=int(ov.loc[r, "comm_ns"]) if r in ov.index else 0,
            exposed_comm_ns=int(ov.loc[r, "exposed_comm_ns"]) if r in ov.index else 0,
            matched_collectives=nmatch, last_arrival_count=last,
            last_arrival_ratio=last / nmatch if nmatch else float("nan"),
            mean_lag_ns=float(cs[lagcol].mean()) if nmatch else float("nan"),
        ))
    df = pd.DataFrame(rows, columns=["rank", "steps", "step_mean_ns", "comm_ns", "exposed_comm_ns",
                                     "matched_collectives", "last_arrival_count", "last_arrival_ratio",
                                     "mean_lag_ns"])
    df.insert(3, "step_mean_skew_ns", df["step_mean_ns"] - df["step_mean_ns"].min())
    df["straggler"] = (len(df) > 1) & (df["last_arrival_ratio"] > straggler_ratio)
    return df


@dataclass
class ZeroPattern:
    """Result of :func:`zero_stage_pattern`.

    Attributes
    ----------
    stage : str
        ``"zero3"`` (parameters all-gathered per module every step + gradients reduce-scattered),
        ``"zero1_or_2"`` (gradients all-reduced or reduce-scattered, then the updated partitions
        all-gathered once per step), ``"ddp_or_zero0"`` (only all-reduce), ``"unknown"``.
    per_step : pandas.DataFrame
        Calls per step of each collective (``step`` index, one column per collective).
    evidence : dict
        Mean calls per step of all_gather / reduce_scatter / all_reduce families.
    """

    stage: str
    per_step: pd.DataFrame
    evidence: dict[str, Any] = field(default_factory=dict)


def zero_stage_pattern(trace: Trace) -> ZeroPattern:
    """Guess the ZeRO stage from the collectives issued per ProfilerStep.

    DeepSpeed's patterns (DeepSpeed 0.19.8 on 2 ranks, the comms-logger samples in
    ../shared/notes/samples): stages 1 and 2 issue per step one gradient ``all_reduce`` (bucketed), a
    scalar ``all_reduce`` (grad norm) and one ``all_gather_into_tensor`` of the updated partitions;
    stage 3 gathers parameters per module (several ``all_gather_into_tensor`` per step, forward and
    backward) and ``reduce_scatter_tensor``\\ s the gradients. Stages 1 and 2 differ in when gradients
    are reduced, not in which collectives, so they are reported together.
    """
    c = collectives(trace)
    c = c[c["step"] >= 0] if len(c) else c
    if c.empty:
        return ZeroPattern("unknown", pd.DataFrame(), {})
    per = c.groupby(["step", "collective"]).size().unstack(fill_value=0)
    fam = c.groupby(["step", "family"]).size().unstack(fill_value=0)
    mean = {f: float(fam[f].mean()) if f in fam else 0.0 for f in ("all_gather", "reduce_scatter", "all_reduce")}
    rs_api = any("reduce_scatter" in str(x) for x in per.columns)
    ag = mean["all_gather"]
    if ag >= 2 and (rs_api or mean["reduce_scatter"] > 0):
        stage = "zero3"
    elif ag >= 1 and (mean["all_reduce"] > 0 or mean["reduce_scatter"] > 0):
        stage = "zero1_or_2"
    elif mean["all_reduce"] > 0 and ag == 0:
        stage = "ddp_or_zero0"
    else:
        stage = "unknown"
    return ZeroPattern(stage, per, dict(mean_calls_per_step=mean, reduce_scatter_called=rs_api))


def memory_per_rank(traces: Trace | Iterable[Trace]) -> pd.DataFrame:
    """Peak memory per rank and device from each trace's ``[memory]`` events (``profile_memory=True``).

    Returns
    -------
    pandas.DataFrame
        ``rank, device_type, device, peak_allocated_bytes, peak_reserved_bytes`` (from
        :func:`nbprof.analysis.memory.memory_peak`); ranks without memory events are absent.
    """
    from .memory import memory_peak

    rows = []
    for t in _as_list(traces):
        mp = memory_peak(t)
        for _, r in mp.iterrows():
            rows.append(dict(rank=t.meta.rank, device_type=int(r["device_type"]), device=int(r["device"]),
                             peak_allocated_bytes=int(r["peak_allocated_bytes"]),
                             peak_reserved_bytes=int(r["peak_reserved_bytes"])))
    return pd.DataFrame(rows, columns=["rank", "device_type", "device", "peak_allocated_bytes", "peak_reserved_bytes"])


@dataclass
class DistributedReport:
    """Everything :func:`distributed_report` computes (each a DataFrame, see the functions)."""

    collectives: pd.DataFrame
    summary: pd.DataFrame
    overlap: pd.DataFrame
    skew: pd.DataFrame
    collective_skew: pd.DataFrame
    memory: pd.DataFrame
    zero: dict[int, Any]
    #: :func:`wait_transfer`, :func:`wait_transfer_summary`, :func:`stragglers` (issue 24)
    wait_transfer: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_WT_COLUMNS))
    wait_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    stragglers: pd.DataFrame = field(default_factory=pd.DataFrame)

    def __repr__(self) -> str:
        return (f"DistributedReport(ranks={sorted(self.overlap['rank'].tolist())}, "
                f"collectives={len(self.collectives)}, zero={self.zero})")


def distributed_report(traces: Sequence[Trace]) -> DistributedReport:
    """Run every analysis of this module over the traces of one job (one per rank)."""
    traces = list(traces)
    coll = [collectives(t) for t in traces]
    coll = [c for c in coll if len(c)]
    wt = wait_transfer(traces)
    return DistributedReport(
        collectives=pd.concat(coll, ignore_index=True) if coll else pd.DataFrame(columns=_COLL_COLUMNS),
        summary=collective_summary(traces),
        overlap=overlap(traces),
        skew=skew(traces),
        collective_skew=collective_skew(traces),
        memory=memory_per_rank(traces),
        zero={t.meta.rank: zero_stage_pattern(t).stage for t in traces},
        wait_transfer=wt,
        wait_summary=wait_transfer_summary(wt),
        stragglers=stragglers(wt),
    )


_WT_COLUMNS: list[str] = ["collective", "k", "rank", "step", "ranks", "arrival_abs_ns", "last_arrival_abs_ns", "last_rank",
               "dur_ns", "wait_ns", "transfer_ns", "clock_offset_ns", "consistent", "pg_name"]


def _end_offsets(a: pd.DataFrame) -> dict[int, int]:
    """Per-rank clock offset from matched collectives: the median over instances of (own end - the lowest
    rank's end). A collective completes at about the same moment on every rank, whatever the arrivals."""
    end = a.assign(end=a["start_abs_ns"] + a["dur_ns"]).pivot_table(
        index=["collective", "pg", "k"], columns="rank", values="end", aggfunc="first")
    ref = end.columns.min()
    out = {}
    for r in end.columns:
        d = (end[r] - end[ref]).dropna()
        out[int(r)] = int(np.median(d.to_numpy())) if len(d) else 0
    return out


def wait_transfer(traces: Sequence[Trace], *, align: str = "none") -> pd.DataFrame:
    """Split each collective instance, per rank, into **waiting** for the last rank and **transfer**.

    The k-th executed call of a collective on one rank is matched with the k-th of the same collective
    on the others (as in :func:`collective_skew`). A rank *arrives* when its collective starts executing
    (the NCCL kernel's start, or the start of the ``gloo:<op>`` annotation on gloo's worker thread --
    :func:`collectives`' ``start_abs_ns``) on the absolute clock (``meta.origin_ns``, Kineto
    ``baseTimeNanoseconds``). No rank can finish before the last one has arrived, so

    - ``wait_ns = min(max(last_arrival - own_arrival, 0), dur_ns)`` -- time spent waiting for the
      slowest rank (tb-plugin's "Synchronizing");
    - ``transfer_ns = dur_ns - wait_ns`` -- the rest ("Data Transfer"); ``wait_ns + transfer_ns ==
      dur_ns`` always.

    Clocks of different hosts are assumed synchronised (NTP/PTP) unless ``align="end"``. A rank whose
    collective ended before the last rank even arrived is impossible on one clock: such rows have
    ``consistent`` False (host clocks apart, or instances mismatched) and their ``wait_ns`` is capped at
    ``dur_ns``.

    Parameters
    ----------
    traces : sequence of Trace
        One per rank; ranks without an absolute origin or without collectives are left out.
    align : {"none", "end"}
        ``"end"``: shift each rank's clock by the median, over matched instances, of its collective end
        minus the lowest rank's (collectives complete together on all ranks); the shift is
        ``clock_offset_ns``. Its error is the spread of completions (about a millisecond between gloo
        worker threads on a loaded CPU): for hosts whose clocks are apart by more than that.
        ``"none"`` (default): the Kineto clocks as they are.

    Returns
    -------
    pandas.DataFrame
        One row per collective instance and rank: ``collective, k`` (instance), ``rank``, ``step``
        (the rank's ProfilerStep, -1 outside), ``ranks`` (ranks matched), ``arrival_abs_ns``,
        ``last_arrival_abs_ns``, ``last_rank`` (the rank that arrived last), ``dur_ns, wait_ns,
        transfer_ns`` (int64 ns), ``clock_offset_ns`` (subtracted from the rank's clock; 0 unless
        ``align="end"``), ``consistent`` (bool, see above), ``pg_name`` (the process group, "" when the
        trace does not name it: the k-th call is counted per collective *and* process group, so data- and
        tensor-parallel groups are not mixed). Only instances seen on at least two ranks; empty (with these
        columns) otherwise.

    Raises
    ------
    ValueError
        Unknown ``align``.

    Sources: the "Synchronizing vs Data Transfer" split of the PyTorch TensorBoard profiler plugin
    (``tb_plugin/torch_tb_profiler/profiler/communication.py``); HTA issue #360.
    """
    frames = []
    for t in traces:
        if t.meta.origin_ns is None:
            continue
        c = collectives(t)
        if c.empty:
            continue
        c = c.assign(pg=c["pg_name"].fillna("").astype(str))
        c = c.assign(k=c.groupby(["collective", "pg"]).cumcount())
        frames.append(c[["rank", "collective", "pg", "k", "step", "start_abs_ns", "dur_ns"]])
    if align not in ("none", "end"):
        msg = f"align must be 'none' or 'end', got {align!r}"
        raise ValueError(msg)
    if len(frames) < 2:
        return pd.DataFrame(columns=_WT_COLUMNS)
    a = pd.concat(frames, ignore_index=True)
    a = a.drop_duplicates(["collective", "pg", "k", "rank"])
    offsets = _end_offsets(a) if align == "end" else {}
    a["clock_offset_ns"] = a["rank"].map(lambda r: offsets.get(int(r), 0)).astype(np.int64)
    a["start_abs_ns"] = a["start_abs_ns"].astype(np.int64) - a["clock_offset_ns"]
    g = a.groupby(["collective", "pg", "k"], sort=False)
    a["ranks"] = g["rank"].transform("size").astype(np.int64)
    a = a[a["ranks"] >= 2].copy()
    if a.empty:
        return pd.DataFrame(columns=_WT_COLUMNS)
    g = a.groupby(["collective", "pg", "k"], sort=False)
    a["last_arrival_abs_ns"] = g["start_abs_ns"].transform("max").astype(np.int64)
    idx = g["start_abs_ns"].idxmax()
    last_rank = a.loc[idx, ["collective", "pg", "k", "rank"]].rename(columns={"rank": "last_rank"})
    a = a.merge(last_rank, on=["collective", "pg", "k"], how="left")
    dur = a["dur_ns"].to_numpy(np.int64)
    raw = np.clip(a["last_arrival_abs_ns"].to_numpy(np.int64) - a["start_abs_ns"].to_numpy(np.int64), 0, None)
    wait = np.minimum(raw, dur)
    out = pd.DataFrame({
        "collective": a["collective"].astype(str).to_numpy(),
        "k": a["k"].to_numpy(np.int64),
        "rank": a["rank"].to_numpy(np.int64),
        "step": a["step"].to_numpy(np.int64),
        "ranks": a["ranks"].to_numpy(np.int64),
        "arrival_abs_ns": a["start_abs_ns"].to_numpy(np.int64),
        "last_arrival_abs_ns": a["last_arrival_abs_ns"].to_numpy(np.int64),
        "last_rank": a["last_rank"].to_numpy(np.int64),
        "dur_ns": dur,
        "wait_ns": wait.astype(np.int64),
        "transfer_ns": (dur - wait).astype(np.int64),
        "clock_offset_ns": a["clock_offset_ns"].to_numpy(np.int64),
        "consistent": raw <= dur,
        "pg_name": a["pg"].to_numpy(),
    })
    return out.sort_values(["collective", "pg_name", "k", "rank"], kind="stable").reset_index(drop=True)


def wait_transfer_summary(wt: pd.DataFrame) -> pd.DataFrame:
    """Per rank and collective kind, from :func:`wait_transfer`'s frame.

    Returns
    -------
    pandas.DataFrame
        ``rank, collective, count, dur_ns, wait_ns, transfer_ns`` (int64 ns totals), ``wait_ratio``
        (wait over duration; NaN for zero duration), ``mean_wait_ns``.
    """
    cols = ["rank", "collective", "count", "dur_ns", "wait_ns", "transfer_ns", "wait_ratio", "mean_wait_ns"]
    if wt.empty:
        return pd.DataFrame(columns=cols)
    s = wt.groupby(["rank", "collective"], sort=True).agg(
        count=("k", "size"), dur_ns=("dur_ns", "sum"), wait_ns=("wait_ns", "sum"),
        transfer_ns=("transfer_ns", "sum"), mean_wait_ns=("wait_ns", "mean")).reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        s["wait_ratio"] = np.where(s["dur_ns"] > 0, s["wait_ns"] / s["dur_ns"].where(s["dur_ns"] > 0, 1), np.nan)
    return s[cols]


def stragglers(traces: Sequence[Trace] | pd.DataFrame, *, recurrence: float = 0.5) -> pd.DataFrame:
    """The rank the others wait for, step after step.

    In each step (the ``step`` of the instance on its last-arriving rank; instances outside a step form
    step -1), the wait each rank *causes* is the others' :func:`wait_transfer` ``wait_ns`` summed over the
    instances at which it arrived last; the step's straggler is the rank causing the most wait (none when
    nobody waited).

    Parameters
    ----------
    traces : sequence of Trace, or the frame of :func:`wait_transfer`
    recurrence : float
        A rank is a ``straggler`` when it is the step's straggler in more than this fraction of steps.

    Returns
    -------
    pandas.DataFrame
        One row per rank: ``rank, steps`` (steps with matched collectives), ``straggler_steps`` (steps it
        was the straggler), ``recurrence`` (their fraction), ``longest_run`` (most consecutive steps as
        straggler), ``caused_wait_ns`` (others' wait it caused, int64 ns), ``own_wait_ns`` (its own wait),
        ``last_arrivals`` (instances it arrived last at), ``straggler`` (bool).
    """
    wt = traces if isinstance(traces, pd.DataFrame) else wait_transfer(list(traces))
    cols = ["rank", "steps", "straggler_steps", "recurrence", "longest_run", "caused_wait_ns", "own_wait_ns",
            "last_arrivals", "straggler"]
    if wt.empty:
        return pd.DataFrame(columns=cols)
    ranks = sorted(int(r) for r in wt["rank"].unique())
    keys = ["collective", "pg_name", "k"] if "pg_name" in wt.columns else ["collective", "k"]
    inst_step = wt[wt["rank"] == wt["last_rank"]].set_index(keys)["step"]
    w = wt.join(inst_step.rename("inst_step"), on=keys)
    others = w[w["rank"] != w["last_rank"]]
    caused = others.groupby(["inst_step", "last_rank"])["wait_ns"].sum().unstack(fill_value=0)
    steps = sorted(int(s) for s in w["inst_step"].unique())
    per_step: list[int | None] = []
    for s in steps:
        if s in caused.index and caused.loc[s].max() > 0:
            per_step.append(int(caused.loc[s].idxmax()))
        else:
            per_step.append(None)
    rows = []
    for r in ranks:
        flags = [p == r for p in per_step]
        run = best = 0
        for f in flags:
            run = run + 1 if f else 0
            best = max(best, run)
        n = sum(flags)
        rows.append(dict(
            rank=r, steps=len(steps), straggler_steps=n, recurrence=n / len(steps) if steps else float("nan"),
            longest_run=best,
            caused_wait_ns=int(caused[r].sum()) if r in caused.columns else 0,
            own_wait_ns=int(w.loc[w["rank"] == r, "wait_ns"].sum()),
            last_arrivals=int(((w["rank"] == r) & (w["last_rank"] == r)).sum()),
        ))
    df = pd.DataFrame(rows, columns=cols[:-1])
    df["straggler"] = (len(ranks) > 1) & (df["recurrence"] > recurrence)
    return df


def busbw_vs_link(frame: pd.DataFrame | Trace | Sequence[Trace], link: str | None = None, *,
                  peak_bytes_per_s: float | None = None,
                  override: Any = None) -> pd.DataFrame:
    """Bus bandwidth as a fraction of the link's peak (see :mod:`nbprof.analysis.links`).

    Parameters
    ----------
    frame : DataFrame or Trace or sequence of Trace
        A frame with ``busbw_bytes_per_s`` (:func:`collectives` or :func:`collective_summary`), or traces
        (their :func:`collective_summary`).
    link : str, optional
        A row of the link table (``nvlink4``, ``pcie5``, ``ib_ndr``, ``roce400``, ``xgmi_mi300x``...);
        default :func:`~nbprof.analysis.links.guess_link` of the first trace (traces only).
    peak_bytes_per_s : float, optional
        Your own per-direction peak; wins over ``link``'s (``link`` is then only a label).
    override : mapping or path, optional
        Passed to :func:`~nbprof.analysis.links.link_peaks`.

    Returns
    -------
    pandas.DataFrame
        ``frame`` (for traces, :func:`collective_summary`: ``rank, collective, family, count, total_ns,
        mean_ns, total_bytes, algbw_bytes_per_s, busbw_bytes_per_s, group_size``) plus ``link``,
        ``link_peak_bytes_per_s``, ``busbw_link_fraction`` (busbw / peak),
        ``achievable_bytes_per_s`` (peak x NCCL's achievable fraction, NaN for a user peak of an unknown
        link) and ``busbw_achievable_fraction``. Without a link or peak the fractions are NaN.

    Raises
    ------
    ValueError
        Unknown link.
    """
    from . import links as L

    if isinstance(frame, pd.DataFrame):
        out = frame.copy()
    else:
        ts = _as_list(frame)
        if link is None and peak_bytes_per_s is None and ts:
            link = L.guess_link(ts[0])
        out = collective_summary(ts)
    peak = ach = float("nan")
    if link is not None:
        t = L.link_peaks(override)
        row = t[t["link"] == link]
        if row.empty and peak_bytes_per_s is None:
            msg = f"unknown link {link!r}; choose from {t['link'].tolist()} or pass peak_bytes_per_s"
            raise ValueError(msg)
        if len(row):
            peak = float(row["peak_bytes_per_s"].iloc[0])
            ach = float(row["achievable_bytes_per_s"].iloc[0])
    if peak_bytes_per_s is not None:
        frac = ach / peak if peak == peak and peak > 0 else float("nan")
        peak = float(peak_bytes_per_s)
        ach = peak * frac
    bus = out["busbw_bytes_per_s"].astype(float) if "busbw_bytes_per_s" in out else pd.Series(float("nan"), index=out.index)
    out["link"] = link
    out["link_peak_bytes_per_s"] = peak
    out["busbw_link_fraction"] = bus / peak if peak == peak else float("nan")
    out["achievable_bytes_per_s"] = ach
    out["busbw_achievable_fraction"] = bus / ach if ach == ach else float("nan")
    return out


_PP_COLUMNS = ["rank", "step", "window_ns", "compute_ns", "bubble_ns", "p2p_wait_ns", "idle_ns", "bubble_ratio",
               "microbatches", "stages", "theory_ratio"]
#: microbatch computation annotations: ``Forward 3``/``Backward 3`` (torch.distributed.pipelining's single-stage
#: schedules, GPipe and 1F1B) and ``PP:<stage><F|B|I|W><mb>`` (its multi-stage action schedules)
_MB_COMPUTE = re.compile(r"^(?:(Forward|Backward) (\d+)|PP:\d+(F|B|I|W)(\d+))$")


def _microbatch_compute(trace: Trace) -> tuple[pd.DataFrame, iv.Intervals]:
    """(microbatch annotations with ``fwd`` and ``mb`` columns, blocking P2P inside them to subtract).

    The blocking part of P2P on the calling thread: ``c10d::send``/``recv_`` calls and the ``gloo:recv``
    (NCCL: none on the host; recv waits are device kernels, not computation) -- not ``gloo:send``, which
    spans the asynchronous send while computation goes on."""
    ev = trace.events
    names = ev["name"].astype(str)
    m = names.str.extract(_MB_COMPUTE)
    hit = m.notna().any(axis=1).to_numpy() & (ev["device"].to_numpy() < 0)
    ann = ev.loc[hit, ["ts_ns", "dur_ns", "name", "step"]].copy()
    mm = m[hit]
    ann["fwd"] = (mm[0] == "Forward").to_numpy() | (mm[2] == "F").to_numpy()
    ann["mb"] = mm[1].fillna(mm[3]).astype(int).to_numpy()
    block = ((names.str.match(r"^c10d::(?:send|recv|recv_any_source)_?$") | (names == "gloo:recv")).to_numpy()
             & (ev["device"].to_numpy() < 0))
    b = ev.loc[block]
    return ann, iv.merge(b["ts_ns"].to_numpy(np.int64), (b["ts_ns"] + b["dur_ns"]).to_numpy(np.int64))


def _p2p_intervals(trace: Trace) -> iv.Intervals:
    """Point-to-point communication of one rank: ``c10d::send``/``recv_`` calls, ``gloo:send``/``gloo:recv``
    annotations, NCCL ``SendRecv`` kernels (from :func:`collectives`)."""
    ev = trace.events
    names = ev["name"].astype(str)
    host = names.str.match(r"^c10d::(?:send|recv|recv_any_source)_?$").to_numpy() & (ev["device"].to_numpy() < 0)
    c = collectives(trace)
    p2p = c[c["collective"].isin(["send", "recv", "send_recv"]) | c["backend_name"].isin(["gloo:send", "gloo:recv"])]
    s = np.concatenate([ev.loc[host, "ts_ns"].to_numpy(np.int64), p2p["ts_ns"].to_numpy(np.int64)])
    e = np.concatenate([(ev.loc[host, "ts_ns"] + ev.loc[host, "dur_ns"]).to_numpy(np.int64),
                        (p2p["ts_ns"] + p2p["dur_ns"]).to_numpy(np.int64)])
    return iv.merge(s, e)


def pipeline_bubbles(traces: Sequence[Trace], *, microbatches: int | None = None) -> pd.DataFrame:
    """Pipeline-parallel bubbles per stage (rank) and step, against the schedule's theory.

    One trace per pipeline stage (one stage per rank). In each ``ProfilerStep`` the pipeline's window is
    the same for every stage: from the first computation start to the last computation end over all
    stages, on the absolute clock (``meta.origin_ns``). A stage's **bubble** is the window minus its own
    computation: the schedule's microbatch annotations (``Forward <i>``/``Backward <i>``, ``PP:<s>F<i>``...
    from ``torch.distributed.pipelining``) less the blocking P2P inside them (``c10d::send``/``recv_``,
    ``gloo:recv``); without them, device kernels that are not communication on GPU traces and host ops
    that neither are nor contain ``c10d::`` calls on CPU traces (:func:`overlap`'s basis). The bubble splits into
    ``p2p_wait_ns`` (covered by its point-to-point send/recv: ``c10d::send``/``recv_``, ``gloo:send``/
    ``gloo:recv``, NCCL ``SendRecv`` kernels, which mix transfer and waiting) and ``idle_ns`` (nothing ran).

    Theory for GPipe and 1F1B with ``p`` stages and ``m`` microbatches: bubble fraction
    ``(p - 1) / (m + p - 1)`` (Huang et al., GPipe, 2019; Narayanan et al., PipeDream-Flush/1F1B, 2021;
    Megatron-LM ``docs``), with equal-cost stages.

    Parameters
    ----------
    traces : sequence of Trace
        One per stage, ordered by rank (= stage).
    microbatches : int, optional
        ``m``; default the number of distinct forward microbatch indices annotated per step (what
        ``torch.distributed.pipelining`` schedules record); -1 and a NaN theory if neither.

    Returns
    -------
    pandas.DataFrame
        One row per rank and step: ``rank, step, window_ns, compute_ns, bubble_ns, p2p_wait_ns, idle_ns``
        (int64 ns; ``bubble_ns == p2p_wait_ns + idle_ns``), ``bubble_ratio = bubble_ns / window_ns``,
        ``microbatches, stages, theory_ratio``. Steps present on every stage only; empty (with these
        columns) with fewer than two stages with an absolute origin.
    """
    ts = [t for t in traces if t.meta.origin_ns is not None]
    if len(ts) < 2:
        return pd.DataFrame(columns=_PP_COLUMNS)
    p = len(ts)
    per: dict[int, dict[int, tuple[iv.Intervals, iv.Intervals, int]]] = {}
    for t in ts:
        o = int(t.meta.origin_ns or 0)
        ev = t.events
        steps = ev[pred.is_step_row(ev)]
        ann, blocking = _microbatch_compute(t)
        if len(ann):  # the schedule's own microbatch annotations, less their blocking P2P
            comp = iv.subtract(iv.merge(ann["ts_ns"].to_numpy(np.int64),
                                        (ann["ts_ns"] + ann["dur_ns"]).to_numpy(np.int64)), blocking)
        else:
            comp = _compute_intervals(t, set())
        p2p = _p2p_intervals(t)
        fwd = ann[ann["fwd"]]
        d: dict[int, tuple[iv.Intervals, iv.Intervals, int]] = {}
        for _, st in steps.iterrows():
            s, e = int(st["ts_ns"]), int(st["ts_ns"] + st["dur_ns"])
            win = iv.merge(np.array([s]), np.array([e]))
            c = iv.intersect(comp, win)
            q = iv.intersect(p2p, win)
            nmb = int(fwd.loc[(fwd["ts_ns"] >= s) & (fwd["ts_ns"] < e), "mb"].nunique())
            d[int(st["step"])] = ((c[0] + o, c[1] + o), (q[0] + o, q[1] + o), nmb)
        per[int(t.meta.rank)] = d
    common = sorted(set.intersection(*(set(d) for d in per.values())))
    rows = []
    for step in common:
        starts = [per[r][step][0][0] for r in per if len(per[r][step][0][0])]
        ends = [per[r][step][0][1] for r in per if len(per[r][step][0][1])]
        if not starts:
            continue
        w0, w1 = int(min(x.min() for x in starts)), int(max(x.max() for x in ends))
        win = iv.merge(np.array([w0]), np.array([w1]))
        for r in sorted(per):
            comp, p2p, nmb = per[r][step]
            cn = iv.total_ns(comp)
            gaps = iv.subtract(win, comp)
            wait = iv.total_ns(iv.intersect(gaps, p2p))
            bubble = (w1 - w0) - cn
            m = microbatches if microbatches is not None else (nmb or None)
            rows.append(dict(rank=r, step=step, window_ns=w1 - w0, compute_ns=cn, bubble_ns=bubble,
                             p2p_wait_ns=wait, idle_ns=bubble - wait,
                             bubble_ratio=bubble / (w1 - w0) if w1 > w0 else float("nan"),
                             microbatches=m if m is not None else -1, stages=p,
                             theory_ratio=(p - 1) / (m + p - 1) if m else float("nan")))
    return pd.DataFrame(rows, columns=_PP_COLUMNS)


_FSDP_ANN = re.compile(r"^FSDP::(?:(pre_forward|pre_backward|all_gather|post_backward_reduce) \((.*)\)"
                       r"|(backward_prefetch for) (.*))$")


@dataclass
class FsdpPattern:
    """Result of :func:`fsdp_pattern`.

    Attributes
    ----------
    detected : bool
        FSDP2's ``FSDP::`` annotations are in the trace.
    units : pandas.DataFrame
        One row per step and FSDP unit (the module label FSDP2 writes, ``"0"``, ``"layers.3"``...):
        ``step, unit, forward_all_gathers`` (parameter all-gathers issued in its pre-forward),
        ``backward_all_gathers`` (re-gathers for backward, in its pre-backward or prefetched),
        ``prefetched`` (of those, issued by the previous unit's ``backward_prefetch``),
        ``reduce_scatters`` (its ``post_backward_reduce``).
    overlap : pandas.DataFrame
        One row per step: ``step, all_gather_ns, all_gather_overlap_ns, reduce_scatter_ns,
        reduce_scatter_overlap_ns`` (execution of the ``all_gather*``/``reduce_scatter*`` collectives and
        its intersection with computation, :func:`overlap`'s basis; int64 ns), ``all_gather_overlap_ratio``,
        ``reduce_scatter_overlap_ratio`` (NaN without such collectives).
    """

    detected: bool
    units: pd.DataFrame
    overlap: pd.DataFrame


def fsdp_pattern(trace: Trace) -> FsdpPattern:
    """FSDP2 (``fully_shard``) pattern of one rank: per-unit all-gathers / reduce-scatters and prefetch overlap.

    FSDP2 (``torch/distributed/fsdp/_fully_shard``) annotates ``FSDP::pre_forward (<unit>)``,
    ``FSDP::all_gather (<unit>)``, ``FSDP::pre_backward (<unit>)``, ``FSDP::backward_prefetch for <unit>``
    and ``FSDP::post_backward_reduce (<unit>)``; each ``all_gather`` is attributed to the unit it names
    and to the phase of the annotation that encloses it. The expected pattern per step: one forward
    all-gather and one reduce-scatter per unit, backward all-gathers for units resharded after forward
    (all but the last by default), most of them prefetched. Overlap is how much of the collectives'
    execution ran under computation (prefetch working: high ``all_gather_overlap_ratio``).
    """
    ev = trace.events
    host = ev[ev["device"] < 0]
    names = host["name"].astype(str)
    m = names.str.extract(_FSDP_ANN)
    m[0] = m[0].fillna(m[2])
    m[1] = m[1].fillna(m[3])
    hit = m[0].notna().to_numpy()
    unit_cols = ["step", "unit", "forward_all_gathers", "backward_all_gathers", "prefetched", "reduce_scatters"]
    ov_cols = ["step", "all_gather_ns", "all_gather_overlap_ns", "all_gather_overlap_ratio", "reduce_scatter_ns",
               "reduce_scatter_overlap_ns", "reduce_scatter_overlap_ratio"]
    a = host.loc[hit, ["ts_ns", "dur_ns", "step"]].assign(kind=m.loc[hit, 0].to_numpy(), unit=m.loc[hit, 1].str.strip().to_numpy())
    a = a.sort_values("ts_ns", kind="stable")
    rows: dict[tuple[int, str], dict[str, Any]] = {}

    def row(step: int, unit: str) -> dict[str, Any]:
        return rows.setdefault((step, unit), dict(step=step, unit=unit, forward_all_gathers=0, backward_all_gathers=0,
                                                  prefetched=0, reduce_scatters=0))

    phases = a[a["kind"] != "all_gather"]
    ps, pe = phases["ts_ns"].to_numpy(), (phases["ts_ns"] + phases["dur_ns"]).to_numpy()
    pk = phases["kind"].to_numpy()
    for r in a.itertuples(index=False):
        if r.kind == "post_backward_reduce":
            row(int(r.step), r.unit)["reduce_scatters"] += 1
        if r.kind != "all_gather":
            continue
        inside = np.flatnonzero((ps <= r.ts_ns) & (pe >= r.ts_ns + r.dur_ns))
        kind = pk[inside[-1]] if inside.size else "pre_forward"
        u = row(int(r.step), r.unit)
        if kind == "pre_forward":
            u["forward_all_gathers"] += 1
        else:
            u["backward_all_gathers"] += 1
            u["prefetched"] += int(kind == "backward_prefetch for")
    units = pd.DataFrame(list(rows.values()), columns=unit_cols)
    c = collectives(trace)
    comm_tids = set(int(x) for x in c.loc[c["device"] < 0, "tid"]) if len(c) else set()
    comp = _compute_intervals(trace, comm_tids)
    ov_rows = []
    for step in sorted(set(int(s) for s in c["step"]) if len(c) else []):
        cs = c[c["step"] == step]
        d: dict[str, Any] = dict(step=step)
        for fam, key in (("all_gather", "all_gather"), ("reduce_scatter", "reduce_scatter")):
            f = cs[cs["collective"].astype(str).str.contains(fam)]
            ints = iv.merge(f["ts_ns"].to_numpy(np.int64), (f["ts_ns"] + f["dur_ns"]).to_numpy(np.int64)) if len(f) else iv.empty()
            tot, ovl = iv.total_ns(ints), iv.total_ns(iv.intersect(ints, comp))
            d[f"{key}_ns"], d[f"{key}_overlap_ns"] = tot, ovl
            d[f"{key}_overlap_ratio"] = ovl / tot if tot else float("nan")
        ov_rows.append(d)
    return FsdpPattern(bool(hit.any()), units, pd.DataFrame(ov_rows, columns=ov_cols))


_RT_COLUMNS = ["rank", "ts_ns", "dur_ns", "name", "cat", "tid", "device", "stream", "step"]
_LINK_COLUMNS = ["collective", "k", "rank", "ts_ns", "dur_ns", "wait_ns", "last_rank"]


def ranks_timeline(traces: Sequence[Trace], *, align: str = "end") -> tuple[pd.DataFrame, pd.DataFrame]:
    """All ranks on one clock: the data of a stacked multi-rank timeline.

    Each rank's events are moved onto one time axis: absolute Kineto clock (``meta.origin_ns +
    ts_ns``), refined by :func:`wait_transfer`'s ``clock_offset_ns`` when ``align="end"`` (collectives
    complete together on all ranks), then made relative to the earliest event of the job.

    Parameters
    ----------
    traces : sequence of Trace
        One per rank, each with an absolute origin (others are left out).
    align : {"end", "none"}

    Returns
    -------
    (events, links) : tuple of pandas.DataFrame
        ``events``: ``rank, ts_ns, dur_ns, name, cat, tid, device, stream, step`` (int64 ns on the common
        axis, every event of every rank -- a view aggregates them for its level of detail);
        ``links``: one row per collective instance and rank, ``collective, k, rank, ts_ns, dur_ns``
        (execution on the common axis), ``wait_ns, last_rank`` -- the rows of one ``(collective, k)``
        are the same collective on each rank, to be linked across ranks.

    Raises
    ------
    ValueError
        Unknown ``align``.
    """
    if align not in ("none", "end"):
        msg = f"align must be 'none' or 'end', got {align!r}"
        raise ValueError(msg)
    ts = [t for t in traces if t.meta.origin_ns is not None]
    wt = wait_transfer(ts, align=align)
    offsets = (wt.groupby("rank")["clock_offset_ns"].first().to_dict() if len(wt) else {})
    parts = []
    for t in ts:
        r = int(t.meta.rank)
        ev = t.events[["ts_ns", "dur_ns", "name", "cat", "tid", "device", "stream", "step"]].copy()
        ev["ts_ns"] = ev["ts_ns"].astype(np.int64) + int(t.meta.origin_ns or 0) - int(offsets.get(r, 0))
        ev.insert(0, "rank", r)
        parts.append(ev)
    if not parts:
        return pd.DataFrame(columns=_RT_COLUMNS), pd.DataFrame(columns=_LINK_COLUMNS)
    events = pd.concat(parts, ignore_index=True)
    zero = int(events["ts_ns"].min())
    events["ts_ns"] = (events["ts_ns"] - zero).astype(np.int64)
    events = events.sort_values(["ts_ns", "rank"], kind="stable").reset_index(drop=True)
    links = wt.assign(ts_ns=(wt["arrival_abs_ns"] - zero).astype(np.int64))[_LINK_COLUMNS] if len(wt) else \
        pd.DataFrame(columns=_LINK_COLUMNS)
    return events[_RT_COLUMNS], links.reset_index(drop=True)
