"""The trace schema, declared once: every column, its dtype and its unit.

Times are int64 nanoseconds relative to the trace origin (``Trace.meta.origin_ns``
holds the absolute origin in Unix-epoch ns when the source knows it). Sizes are
bytes. Missing integers are ``-1``; missing floats are NaN; missing strings are
NaN in a categorical column.

Category vocabulary (``cat`` column) is Kineto's (``libkineto/include/ActivityType.h``);
other sources map onto it (e.g. nsys ``CUPTI_ACTIVITY_KIND_KERNEL`` -> ``kernel``,
old 2021 Kineto ``Kernel``/``Runtime``/``Operator`` -> ``kernel``/``cuda_runtime``/``cpu_op``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SCHEMA_VERSION = 1

# Canonical categories.
CPU_OP = "cpu_op"
USER_ANNOTATION = "user_annotation"
GPU_USER_ANNOTATION = "gpu_user_annotation"
KERNEL = "kernel"
GPU_MEMCPY = "gpu_memcpy"
GPU_MEMSET = "gpu_memset"
CUDA_RUNTIME = "cuda_runtime"
CUDA_DRIVER = "cuda_driver"
CUDA_SYNC = "cuda_sync"
PYTHON_FUNCTION = "python_function"
CPU_INSTANT_EVENT = "cpu_instant_event"
OVERHEAD = "overhead"
COLLECTIVE_COMM = "collective_comm"
NVTX = "nvtx"
OSRT = "osrt"
TRACE_SPAN = "Trace"

#: Categories whose events run on a device (pid = device, tid = stream).
DEVICE_CATEGORIES = frozenset({KERNEL, GPU_MEMCPY, GPU_MEMSET, GPU_USER_ANNOTATION, "cuda_profiler_range",
                               "mtia_insight"})
#: Host-side runtime/driver API categories (launch kernels; carry a correlation id).
RUNTIME_CATEGORIES = frozenset({CUDA_RUNTIME, CUDA_DRIVER, "xpu_runtime", "xpu_driver", "mtia_runtime",
                                "privateuse1_runtime", "privateuse1_driver"})

#: Source category spellings mapped to the canonical vocabulary.
CATEGORY_ALIASES = {
    "Operator": CPU_OP,
    "operator": CPU_OP,
    "Kernel": KERNEL,
    "Runtime": CUDA_RUNTIME,
    "Driver": CUDA_DRIVER,
    "Memcpy": GPU_MEMCPY,
    "Memset": GPU_MEMSET,
    "Python": PYTHON_FUNCTION,
    "python function": PYTHON_FUNCTION,
    "user annotation": USER_ANNOTATION,
    "gpu user annotation": GPU_USER_ANNOTATION,
    "cuda_runtime_api": CUDA_RUNTIME,
    "CUPTI_ACTIVITY_KIND_KERNEL": KERNEL,
    "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL": KERNEL,
    "CUPTI_ACTIVITY_KIND_MEMCPY": GPU_MEMCPY,
    "CUPTI_ACTIVITY_KIND_MEMSET": GPU_MEMSET,
    "CUPTI_ACTIVITY_KIND_RUNTIME": CUDA_RUNTIME,
    "CUPTI_ACTIVITY_KIND_DRIVER": CUDA_DRIVER,
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": CUDA_SYNC,
    # MTIA's on-device kernels: Kineto now aliases MTIA_CCP_EVENTS = CONCURRENT_KERNEL (ActivityType.h)
    "mtia_ccp_events": KERNEL,
    "NVTX_EVENTS": NVTX,
    "OSRT_API": OSRT,
}


#: ``TraceMeta.extra`` key of the categories a loader renamed: canonical name -> the file's own spelling
#: (2021 Kineto's ``Runtime``, ``Kernel``...); exports write the file's spelling back (peers read it).
CATEGORY_NAMES_KEY = "nbprof_category_names"


def canonical_category(cat: str | None) -> str | None:
    """Map a source's category spelling to nbprof's vocabulary (unknown ones pass through).

    >>> canonical_category("Kernel"), canonical_category("CUPTI_ACTIVITY_KIND_MEMCPY"), canonical_category("fwdbwd")
    ('kernel', 'gpu_memcpy', 'fwdbwd')
    """
    if cat is None:
        return None
    return CATEGORY_ALIASES.get(cat, cat)


# name -> (dtype, unit, description). dtype "category" = pandas categorical of str.
EVENT_COLUMNS: dict[str, tuple[str, str, str]] = {
    "ts_ns": ("int64", "ns", "start, relative to the trace origin"),
    "dur_ns": ("int64", "ns", "duration; 0 for instant events; never negative (repaired at load)"),
    "name": ("category", "", "event name (operator, kernel, API call, range)"),
    "cat": ("category", "", "canonical category (see module docstring)"),
    "ph": ("category", "", "Chrome-trace phase: X complete, i instant"),
    "pid": ("int64", "", "host process id; for device rows the device index"),
    "tid": ("int64", "", "host thread id; for device rows the stream id"),
    "device": ("int16", "", "device index for device rows (kernel, memcpy, memset, gpu annotation), else -1"),
    "stream": ("int64", "", "stream id for device rows, else -1"),
    "correlation": ("int64", "", "CUPTI/roctracer correlation id linking a runtime call to its device op, -1 if none"),
    "external_id": ("int64", "", "Kineto External id linking a device op / runtime call to its CPU op, -1 if none"),
    "step": ("int32", "", "ProfilerStep number the event belongs to, -1 if outside any step"),
    "rank": ("int32", "", "distributed rank of the trace"),
    "seq": ("int64", "", "autograd Sequence number (cpu_op), -1 if none"),
    "fwd_tid": ("int64", "", "Fwd thread id (cpu_op of backward), -1 if none"),
    "input_dims": ("category", "", "record_shapes 'Input Dims' as compact text, e.g. [[32, 64], [64]]"),
    "input_types": ("category", "", "record_shapes 'Input type' as text"),
    "concrete_inputs": ("category", "", "record_shapes 'Concrete Inputs' as text: scalar arguments (is_causal, stride), '' for tensors"),
    "call_stack": ("category", "", "with_stack 'Call stack' (frames separated by ';')"),
    "module": ("category", "", "with_modules 'Module Hierarchy'"),
    "flops": ("float64", "FLOP", "with_flops 'flops' of the op, NaN if not recorded"),
    "bytes": ("int64", "bytes", "memcpy/memset size, -1 if n/a"),
    "grid": ("category", "", "kernel grid dims 'x,y,z'"),
    "block": ("category", "", "kernel block dims 'x,y,z'"),
    "registers": ("int32", "", "registers per thread (kernel), -1 if n/a"),
    "shared_mem_bytes": ("int64", "bytes", "shared memory per block (kernel), -1 if n/a"),
    "occupancy_ratio": ("float32", "", "est. achieved occupancy as a fraction 0..1 (kernel), NaN if n/a"),
    "blocks_per_sm": ("float64", "", "CUPTI 'blocks per SM' of a kernel (grid blocks / SM count), NaN if n/a"),
    "collective": ("category", "", "collective name of a communication kernel/annotation (NCCL 'Collective name')"),
    "msg_in_nelems": ("int64", "elements", "'In msg nelems' of a collective, -1 if n/a"),
    "msg_out_nelems": ("int64", "elements", "'Out msg nelems' of a collective, -1 if n/a"),
    "group_size": ("int32", "", "'Group size' of a collective, -1 if n/a"),
    "dtype": ("category", "", "collective element dtype"),
    "pg_name": ("category", "", "process group name of a collective"),
}

FLOW_COLUMNS: dict[str, tuple[str, str, str]] = {
    "id": ("int64", "", "flow id (the correlation id for ac2g)"),
    "cat": ("category", "", "flow category: ac2g (CPU launch -> GPU op) or fwdbwd (forward op -> backward op)"),
    "src_ts_ns": ("int64", "ns", "start of the flow (ph s)"),
    "src_pid": ("int64", "", ""),
    "src_tid": ("int64", "", ""),
    "dst_ts_ns": ("int64", "ns", "end of the flow (ph f), -1 if missing"),
    "dst_pid": ("int64", "", ""),
    "dst_tid": ("int64", "", ""),
}

MEMORY_COLUMNS: dict[str, tuple[str, str, str]] = {
    "ts_ns": ("int64", "ns", "time of the allocation/free"),
    "pid": ("int64", "", ""),
    "tid": ("int64", "", ""),
    "device_type": ("int8", "", "0 CPU, 1 CUDA (torch-tb-profiler's enum; Kineto 'Device Type')"),
    "device": ("int16", "", "device index, -1 for CPU"),
    "addr": ("int64", "", "address (bit pattern; may be negative after int64 wrap)"),
    "bytes": ("int64", "bytes", "allocation size, negative on free"),
    "total_allocated": ("int64", "bytes", "allocated bytes on the device after the event, -1 if n/a"),
    "total_reserved": ("int64", "bytes", "reserved (cached) bytes on the device after the event, -1 if n/a"),
    "step": ("int32", "", "ProfilerStep the event belongs to, -1 if none"),
}

COUNTER_COLUMNS: dict[str, tuple[str, str, str]] = {
    "ts_ns": ("int64", "ns", ""),
    "name": ("category", "", "counter name"),
    "series": ("category", "", "series key inside the counter"),
    "value": ("float64", "", ""),
    "pid": ("int64", "", ""),
}

INT_MISSING = -1

#: Side tables a source may keep in ``Trace.tables`` (name -> what it holds). They have no home in the
#: common tables; each is a plain DataFrame (times int64 ns on the trace's clock where present).
SIDE_TABLES: dict[str, str] = {
    "nvtx": "nsys NVTX_EVENTS as written: style, domain, payloads, range ids, end thread",
    "kernels": "nsys kernel rows: short and mangled names, launch geometry",
    "runtime": "nsys CUDA runtime/driver rows: names as written, eventClass, nameId",
    "memcpy": "nsys memcpy rows: copy/src/dst kinds",
    "memset": "nsys memset rows",
    "osrt": "nsys OS runtime calls",
    "cpu_samples": "nsys CPU IP samples with call stacks",
    "sched": "nsys thread scheduling records",
    "processes": "nsys processes",
    "gpus": "nsys GPU list",
    "device_args": "Kineto device rows' numeric args with no events column (queued, context, warps per SM, "
                   "hardware counters): event (row of the events table), key (as written), value",
    "graph_replay": "CUDA-graph replays' device ops attributed to the operators that captured them "
                    "(nbprof.trace.graph_replay): event, launch, graph, node, op_event (rows of the events table), "
                    "method (capture / sequence / graph_order)",
    "id_values": "ids stored as something other than their value (unsigned 64-bit ids above 2**63-1, texts): "
                 "column, id (as stored), value (as written), is_text (nbprof.trace.ids)",
    "merge": "a merged nsys + Kineto trace (nbprof.trace.merge): per event row its source (kineto/nsys/both), "
             "its rows in the two traces and the nsys row's time and duration",
}


def empty_frame(columns: dict[str, tuple[str, str, str]]) -> pd.DataFrame:
    """An empty DataFrame with the schema's columns and dtypes."""
    data = {}
    for col, (dtype, _unit, _doc) in columns.items():
        if dtype == "category":
            data[col] = pd.Categorical([])
        else:
            data[col] = np.array([], dtype=dtype)
    return pd.DataFrame(data)


def validate(df: pd.DataFrame, columns: dict[str, tuple[str, str, str]], what: str) -> None:
    """Check ``df`` has exactly the schema's columns with the schema's dtypes.

    Raises
    ------
    SchemaError
        Naming the first column that is missing, extra or of the wrong dtype.
    """
    from ..errors import SchemaError

    missing = [c for c in columns if c not in df.columns]
    extra = [c for c in df.columns if c not in columns]
    if missing or extra:
        msg = f"{what} table: missing columns {missing}, unexpected columns {extra}"
        raise SchemaError(msg)
    for col, (dtype, _u, _d) in columns.items():
        actual = str(df[col].dtype)
        if actual != dtype:
            msg = f"{what} table: column {col!r} has dtype {actual}, schema says {dtype}"
            raise SchemaError(msg)


def coerce(df: pd.DataFrame, columns: dict[str, tuple[str, str, str]]) -> pd.DataFrame:
    """Return ``df`` with the schema's dtypes (e.g. after a Parquet round trip turned an all-missing
    categorical into float). Missing columns are added empty (-1 / NaN)."""
    out = {}
    n = len(df)
    for col, (dtype, _u, _d) in columns.items():
        if col not in df.columns:
            if dtype == "category":
                out[col] = pd.Categorical([None] * n)
            elif dtype.startswith("float"):
                out[col] = np.full(n, np.nan, dtype=dtype)
            else:
                out[col] = np.full(n, INT_MISSING, dtype=dtype)
            continue
        s = df[col]
        if str(s.dtype) == dtype:
            out[col] = s
        elif dtype == "category":
            # str() of each distinct value (missing -> None), not of each row: a 1 M-row column has few values
            codes, uniq = pd.factorize(s)
            if len(uniq) == 0:  # all missing: what pd.Categorical([None] * n) gives (float64 categories, none)
                out[col] = pd.Categorical(np.full(n, np.nan))
            else:
                labels = np.array([str(v) for v in uniq] + [None], dtype=object)
                out[col] = pd.Categorical(labels[codes])  # code -1 (missing) takes the trailing None
        else:
            out[col] = s.astype(dtype)
    return pd.DataFrame(out, index=df.index)
