"""Collectives of a rank's trace (matched to their ``c10d::`` API call) and their bus bandwidth.

See :mod:`nbprof.analysis.distributed` for where communication lives in a trace and the bandwidth formulas.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ...trace import predicates as pred
from ...trace.dtypes import DTYPE_BYTES
from ...trace.ids import present as id_present
from ...trace.model import Trace
from .._memo import per_trace

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


_DTYPE_BYTES = DTYPE_BYTES  # the one table (nbprof.trace.dtypes)


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
    m = pred.name_mask(ev["name"], lambda n: n.startswith("c10d::")) & (ev["device"].to_numpy() < 0)
    api = ev.loc[m, ["ts_ns", "dur_ns", "name", "pid", "tid", "input_dims", "input_types"]].copy()
    key = api["name"].astype(str).str.slice(6).str.rstrip("_")
    api["api"] = key.map(lambda k: _C10D_TO_API.get(k, _C10D_TO_API.get(k.lstrip("_"), k)))
    api = api[api["api"].astype(str) != "wait"]
    return api.sort_values("ts_ns", kind="stable")


@per_trace
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
        Name`` arg, None when the trace does not say). Empty (with these columns) when the trace has no
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
            host = ev[(ev["device"] < 0) & id_present(ev["correlation"])]
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
    if ex["is_gpu"].any():
        # kernels still without shapes: the ``nccl:<op>`` host annotation carrying the kernel's External id
        # (Kineto links a kernel to its enclosing op so; traces without runtime calls have only this link)
        ann = ev[pred.is_communication(ev, where="host") & ~pred.name_mask(ev["name"], _is_gloo)
                 & id_present(ev["external_id"]) & ev["input_dims"].notna()]
        if len(ann):
            by_ext = ann.drop_duplicates("external_id").set_index("external_id")
            kext = ex["external_id"].to_numpy()
            for i in np.flatnonzero(ex["is_gpu"].to_numpy()):
                if api_dims[i] is None and id_present(kext[i]) and kext[i] in by_ext.index:
                    row = by_ext.loc[kext[i]]
                    api_dims[i], api_types[i] = row["input_dims"], row["input_types"]
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
        "pg_name": ex["pg_name"].astype(object).where(ex["pg_name"].notna(), None).to_numpy(),
    })
    return out.reset_index(drop=True)

