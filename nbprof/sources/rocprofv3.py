"""AMD rocprofv3 JSON (``rocprofv3 --output-format json``: ``<pid>_results.json``) -> ``Trace``.

Format facts, from the producer (ROCm/rocprofiler-sdk at 8ab1ed7: ``source/lib/rocprofiler-sdk-tool/
generateJSON.cpp`` writes the document, ``source/include/rocprofiler-sdk/cxx/serialization.hpp`` each record;
``source/docs/rocprofv3-schema.json`` describes it):

- ``{"rocprofiler-sdk-tool": [process, ...]}``, one element per profiled process, each with ``metadata``
  (``pid``, ``init_time``, ``fini_time``: ns), ``agents`` (``id.handle``, ``type`` 1 CPU / 2 GPU, ``name``,
  ``product_name``, ``logical_node_type_id``: the GPU's index), ``strings``, ``kernel_symbols`` and
  ``buffer_records``;
- ``buffer_records.{hip_api, hsa_api, marker_api, rccl_api, kernel_dispatch, memory_copy}``: records with
  ``kind``, ``operation``, ``thread_id``, ``correlation_id.{internal, external}``, ``start_timestamp`` and
  ``end_timestamp`` (ns); ``kernel_dispatch`` adds ``dispatch_info`` (``agent_id.handle``, ``queue_id.handle``,
  ``kernel_id``, ``workgroup_size``, ``grid_size``, ``group_segment_size``); ``memory_copy`` adds
  ``src_agent_id``, ``dst_agent_id`` and ``bytes``;
- ``strings.buffer_records[kind] = {"kind": name, "operations": [name, ...]}`` names a record's operation
  (``operations[operation]``); ``strings.marker_api`` maps a marker's internal correlation id to its ROCTx
  message; ``kernel_symbols`` name each ``kernel_id`` (``formatted_kernel_name``).

Mapping onto the model (Kineto's vocabulary, as torch.profiler's ROCm traces use it): HIP/HSA/RCCL API calls
are ``cuda_runtime`` rows on the calling thread, kernel dispatches ``kernel`` rows and copies ``gpu_memcpy``
rows on (device = the GPU's index, stream = the queue handle), ROCTx ranges ``user_annotation``; the internal
correlation id links a call to its dispatch (``correlation``), as roctracer's does in Kineto. Times stay ns,
relative to the first record (``meta.origin_ns`` holds that absolute time). Repairs (an end before its start,
an unknown kernel id) are listed in the load report.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ..trace import schema
from ..trace.model import LoadReport, Trace, TraceMeta
from .kineto.reading import read_bytes

__all__ = ["load_rocprofv3", "sniff", "TOP_KEY"]

#: the key every rocprofv3 JSON document starts with (generateJSON.cpp)
TOP_KEY = b'"rocprofiler-sdk-tool"'
_API_KINDS = ("hip_api", "hsa_api", "rccl_api")
_CPU_AGENT, _GPU_AGENT = 1, 2


def sniff(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) is a rocprofv3 JSON document: an object whose first key is
    ``"rocprofiler-sdk-tool"``.

    >>> sniff(b'{\\n    "rocprofiler-sdk-tool": [\\n'), sniff(b'{"traceEvents": []}')
    (True, False)
    """
    t = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return t[:1] == b"{" and t[1:].lstrip(b" \t\r\n").startswith(TOP_KEY)


def _get(d: Any, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def _op_names(strings: dict[str, Any]) -> dict[str, list[str]]:
    """``strings.buffer_records`` -> kind name -> operation names (indexed by ``operation``)."""
    out: dict[str, list[str]] = {}
    for i, e in enumerate(strings.get("buffer_records") or []):
        if isinstance(e, dict):
            out[str(i)] = [str(x) for x in e.get("operations") or []]
            out[str(e.get("kind"))] = out[str(i)]
    return out


def _markers(strings: dict[str, Any]) -> dict[int, str]:
    m = strings.get("marker_api") or []
    if isinstance(m, dict):
        return {_int(k): str(v) for k, v in m.items()}
    return {_int(e.get("key")): str(e.get("value")) for e in m if isinstance(e, dict)}


def _op_name(ops: dict[str, list[str]], r: dict[str, Any]) -> str:
    """A record's operation name: ``strings.buffer_records[kind].operations[operation]``."""
    names = ops.get(str(r.get("kind")), [])
    o = _int(r.get("operation"))
    return names[o] if 0 <= o < len(names) else f"operation {o}"


def _xyz(d: Any) -> str | None:
    return f"{_int(_get(d, 'x'))},{_int(_get(d, 'y'))},{_int(_get(d, 'z'))}" if isinstance(d, dict) else None


def load_rocprofv3(path: str | os.PathLike[str], *, strict: bool = False) -> Trace:
    """Load a rocprofv3 JSON file (plain or gzip) into a ``Trace`` (mapping in the module docstring).

    Returns
    -------
    Trace
        ``events`` with ``cuda_runtime`` (HIP/HSA/RCCL API calls), ``kernel``, ``gpu_memcpy`` and
        ``user_annotation`` (ROCTx) rows, int64 ns; ``meta.producer`` ``"rocprofv3"``, ``meta.device_properties``
        from the GPU agents (``name``, ``product_name``).

    Raises
    ------
    TraceFormatError
        Not JSON, or no ``rocprofiler-sdk-tool`` list; in strict mode, a record that needs repair.
    """
    from ..errors import TraceFormatError

    spath = os.fspath(path)
    report = LoadReport(path=spath)
    try:
        doc = msgspec.json.decode(read_bytes(spath, report))
    except (msgspec.DecodeError, RecursionError) as exc:
        raise TraceFormatError(spath, None, f"not JSON: {exc}") from exc
    procs = doc.get("rocprofiler-sdk-tool") if isinstance(doc, dict) else None
    if isinstance(procs, dict):  # rocprofv3 0.4 wrote one process as an object
        procs = [procs]
    if not isinstance(procs, list) or not all(isinstance(p, dict) for p in procs):
        raise TraceFormatError(spath, None, "not a rocprofv3 JSON file: no 'rocprofiler-sdk-tool' list of processes")
    rows: list[tuple[Any, ...]] = []
    devprops: list[dict[str, Any]] = []
    bad_time = unknown_kernel = 0
    for proc in procs:
        pid = _int(_get(proc, "metadata", "pid"))
        ops = _op_names(proc.get("strings") or {})
        markers = _markers(proc.get("strings") or {})
        gpus = [a for a in proc.get("agents") or [] if isinstance(a, dict) and a.get("type") == _GPU_AGENT]
        gpu_index: dict[int, int] = {}
        for i, a in enumerate(gpus):
            idx = _int(a.get("logical_node_type_id"))
            gpu_index[_int(_get(a, "id", "handle"))] = idx if idx >= 0 else i
            devprops.append({"id": gpu_index[_int(_get(a, "id", "handle"))], "name": str(a.get("product_name") or
                             a.get("name") or ""), "gfx": str(a.get("name") or "")})
        symbols = {_int(k.get("kernel_id")): str(k.get("formatted_kernel_name") or k.get("kernel_name") or "")
                   for k in proc.get("kernel_symbols") or [] if isinstance(k, dict)}
        buf = proc.get("buffer_records") or {}

        def add(r: dict[str, Any], name: str, cat: str, p: int, t: int, dev: int, stream: int,
                nbytes: int = -1, grid: str | None = None, block: str | None = None, smem: int = -1) -> None:
            nonlocal bad_time
            t0, t1 = _int(r.get("start_timestamp")), _int(r.get("end_timestamp"))
            if t1 < t0:
                bad_time += 1
                t1 = t0
            rows.append((t0, t1 - t0, name, cat, p, t, dev, stream, _int(_get(r, "correlation_id", "internal")),
                         nbytes, grid, block, smem))

        for kind in _API_KINDS:
            for r in buf.get(kind) or []:
                add(r, _op_name(ops, r), schema.CUDA_RUNTIME, pid, _int(r.get("thread_id")), -1, -1)
        for r in buf.get("marker_api") or []:
            corr = _int(_get(r, "correlation_id", "internal"))
            add(r, markers.get(corr, _op_name(ops, r)), schema.USER_ANNOTATION, pid, _int(r.get("thread_id")), -1, -1)
        for r in buf.get("kernel_dispatch") or []:
            di = r.get("dispatch_info") or {}
            kid = _int(di.get("kernel_id"))
            if kid not in symbols:
                unknown_kernel += 1
            dev = gpu_index.get(_int(_get(di, "agent_id", "handle")), -1)
            q = _int(_get(di, "queue_id", "handle"))
            add(r, symbols.get(kid, f"kernel_id {kid}"), schema.KERNEL, dev, q, dev, q,
                grid=_xyz(di.get("grid_size")), block=_xyz(di.get("workgroup_size")),
                smem=_int(di.get("group_segment_size")))
        for r in buf.get("memory_copy") or []:
            dst = gpu_index.get(_int(_get(r, "dst_agent_id", "handle")), -1)
            dev = dst if dst >= 0 else gpu_index.get(_int(_get(r, "src_agent_id", "handle")), -1)
            add(r, _op_name(ops, r), schema.GPU_MEMCPY, dev, -1, dev, -1, nbytes=_int(r.get("bytes")))
    if bad_time:
        report.add("negative_duration", "repaired", bad_time, f"{bad_time} records end before they start: "
                   "duration set to 0")
    if unknown_kernel:
        report.add("unknown_kernel_id", "assumed", unknown_kernel, f"{unknown_kernel} kernel dispatches name a "
                   "kernel_id missing from kernel_symbols: named 'kernel_id N'")
    if strict and report.issues:
        raise TraceFormatError(spath, None, f"needs repair (strict): {report.issues[0].message}")
    cols = ["ts_ns", "dur_ns", "name", "cat", "pid", "tid", "device", "stream", "correlation", "bytes", "grid",
            "block", "shared_mem_bytes"]
    ev = pd.DataFrame(rows, columns=cols)
    origin = int(ev["ts_ns"].min()) if len(ev) else 0
    ev["ts_ns"] = (ev["ts_ns"].astype("int64") - origin).astype("int64")
    ev["ph"] = "X"
    ev = schema.coerce(ev.sort_values(["ts_ns", "pid", "tid"], kind="stable").reset_index(drop=True),
                       schema.EVENT_COLUMNS)
    ev["step"] = np.int32(-1)
    ev["rank"] = np.int32(0)
    threads = ev.loc[ev["device"] < 0, ["pid", "tid"]].drop_duplicates().reset_index(drop=True)
    threads["name"], threads["kind"] = "", "thread"
    meta = TraceMeta(source_path=spath, source_format="rocprofv3", producer="rocprofv3", origin_ns=origin or None,
                     device_properties=devprops, extra={"processes": len(procs)})
    report.add("no_flows", "assumed", 0, "rocprofv3 JSON has no flow events: the internal correlation id "
               "links each API call to its kernel dispatch (events.correlation)")
    return Trace(events=ev, flows=schema.empty_frame(schema.FLOW_COLUMNS),
                 memory=schema.empty_frame(schema.MEMORY_COLUMNS), counters=schema.empty_frame(schema.COUNTER_COLUMNS),
                 threads=threads, meta=meta, report=report)
