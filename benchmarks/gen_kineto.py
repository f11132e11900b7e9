"""Generate a synthetic Kineto-shaped trace (``*.pt.trace.json[.gz]``) with a chosen event count.

Shape (one "op" = what one eager ``aten::`` call on a GPU looks like in a current Kineto trace,
``libkineto/src/output_json.cpp``; ../shared/notes/formats.md §4.1-4.2):

- 2 ``python_function`` events (with ``Python id``/``Python parent id``/``Ev Idx``),
- 1 ``cpu_op`` with ``record_shapes`` args (``Input Dims``, ``Input type``, ``Input Strides``,
  ``Concrete Inputs``, ``External id``, ``Sequence number``, ``Fwd thread id``, ``Record function id``),
- 1 ``cuda_runtime`` ``cudaLaunchKernel`` (``External id``, ``cbid``, ``correlation``),
- 1 ``kernel`` with the full CUPTI args (``queued``, ``device``, ``context``, ``stream``,
  ``correlation``, ``registers per thread``, ``shared memory``, ``blocks per SM``, ``warps per SM``,
  ``grid``, ``block``, ``est. achieved occupancy %``),
- 2 ``ac2g`` flow events (``s`` on the runtime call, ``f`` with ``bp: "e"`` on the kernel),
- a ``[memory]`` instant every 4th op,

plus one ``ProfilerStep#N`` ``user_annotation`` per step, ``M`` process/thread names, and the
top-level metadata (``schemaVersion``, ``deviceProperties``, ``distributedInfo``,
``baseTimeNanoseconds``, ``traceName`` after the events as Kineto writes it).

That is 7.25 events per op; ``--events 1160000`` gives the ~288 MB / 1.16 M-event "medium" case of
../shared/notes/user-complaints.md ("Measured load costs").

Usage::

    python benchmarks/gen_kineto.py OUT.pt.trace.json --events 1160000 [--steps 20] [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
from typing import IO

PID = 4242
TID_MAIN = 4242
TID_BWD = 4300
OPS = [
    ("aten::linear", "[[32, 1024], [4096, 1024], [4096]]", '["float", "float", "float"]',
     "ampere_sgemm_128x64_tn", 132, 16384, 25.0),
    ("aten::add_", "[[32, 4096], [32, 4096], []]", '["float", "float", "Scalar"]',
     "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     20, 0, 100.0),
    ("aten::relu", "[[32, 4096]]", '["float"]',
     "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
     "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::"
     "operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >"
     "(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, "
     "c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::"
     "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)", 16, 0, 100.0),
    ("aten::native_layer_norm", "[[32, 4096], [], [4096], [4096], []]",
     '["float", "ScalarList", "float", "float", "Scalar"]',
     "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
     "float const*, float const*, float*, float*, float*)", 32, 64, 50.0),
]
PY_FRAMES = [
    "nn.Module: Linear_0", "torch/nn/modules/linear.py(124): forward",
    "nn.Module: LayerNorm_1", "torch/nn/modules/normalization.py(216): forward",
    "torch/nn/functional.py(1704): relu", "train.py(88): train_step",
]


def _fmt(x: float) -> str:
    return f"{x:.3f}"


def generate(path: str, n_events: int, steps: int = 20, use_gzip: bool | None = None) -> dict[str, int]:
    """Write a Kineto-shaped trace with about ``n_events`` events to ``path``.

    Parameters
    ----------
    path : str
        Output file; ``.gz`` suffix (or ``use_gzip``) writes gzip (level 1).
    n_events : int
        Target number of ``traceEvents`` (the result is within one op, 7.25 events, of it).
    steps : int
        Number of ``ProfilerStep#N`` ranges the ops are spread over.

    Returns
    -------
    dict
        Exact counts written per kind: ``python_function``, ``cpu_op``, ``cuda_runtime``, ``kernel``,
        ``ac2g`` (flow events, 2 per op), ``memory``, ``steps``, ``metadata``, ``total``, ``bytes``.
    """
    n_ops = max(1, int(n_events / 7.25))
    steps = max(1, min(steps, n_ops))
    per_step = -(-n_ops // steps)
    use_gzip = path.endswith(".gz") if use_gzip is None else use_gzip
    def opener(p: str) -> IO[str]:
        if use_gzip:
            return gzip.open(p, "wt", compresslevel=1, encoding="utf-8")
        return open(p, "w", encoding="utf-8")  # the caller's `with` closes it

    base_ns = 1_700_000_000_000_000_000
    counts = dict(python_function=0, cpu_op=0, cuda_runtime=0, kernel=0, ac2g=0, memory=0, steps=0, metadata=0)
    devprops = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912, "computeMajor": 9,
                 "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
                 "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
                 "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472, "numSms": 132,
                 "sharedMemPerBlockOptin": 232448}]
    with opener(path) as f:
        w = f.write
        w('{\n  "schemaVersion": 1,\n  "deviceProperties": ' + json.dumps(devprops) + ",\n")
        w('  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8, "pg_count": 1},\n')
        w('  "record_shapes": 1,\n  "displayTimeUnit": "ms",\n')
        w(f'  "baseTimeNanoseconds": {base_ns},\n  "traceEvents": [\n')
        meta = [
            f'{{"name": "process_name", "ph": "M", "ts": 0.000, "pid": {PID}, "tid": 0, "args": {{"name": "python3"}}}}',
            f'{{"name": "thread_name", "ph": "M", "ts": 0.000, "pid": {PID}, "tid": {TID_MAIN}, '
            f'"args": {{"name": "thread {TID_MAIN} (python3)"}}}}',
            '{"name": "process_name", "ph": "M", "ts": 0.000, "pid": 0, "tid": 0, "args": {"name": "python3"}}',
            '{"name": "process_labels", "ph": "M", "ts": 0.000, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}',
            '{"name": "thread_name", "ph": "M", "ts": 0.000, "pid": 0, "tid": 7, "args": {"name": "stream 7 "}}',
        ]
        counts["metadata"] = len(meta)
        w(",\n".join(meta))
        t = 1000.0  # µs since base
        gpu_t = 1000.0
        op = 0
        ext = 1
        corr = 1
        pyid = 1
        for s in range(steps):
            n_here = min(per_step, n_ops - op)
            if n_here <= 0:
                break
            step_start = t
            buf = []
            for _ in range(n_here):
                name, dims, types, kname, regs, smem, occ = OPS[op % len(OPS)]
                f1 = PY_FRAMES[op % len(PY_FRAMES)]
                f2 = PY_FRAMES[(op + 1) % len(PY_FRAMES)]
                buf.append(
                    f'{{"ph": "X", "cat": "python_function", "name": "{f1}", "pid": {PID}, "tid": {TID_MAIN}, '
                    f'"ts": {_fmt(t)}, "dur": 14.250, "args": {{"Python parent id": {pyid - 1}, '
                    f'"Python id": {pyid}, "Ev Idx": {pyid}}}}}'
                )
                buf.append(
                    f'{{"ph": "X", "cat": "python_function", "name": "{f2}", "pid": {PID}, "tid": {TID_MAIN}, '
                    f'"ts": {_fmt(t + 0.5)}, "dur": 13.000, "args": {{"Python parent id": {pyid}, '
                    f'"Python id": {pyid + 1}, "Ev Idx": {pyid + 1}}}}}'
                )
                pyid += 2
                buf.append(
                    f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": {PID}, "tid": {TID_MAIN}, '
                    f'"ts": {_fmt(t + 1.0)}, "dur": 11.500, "args": {{"External id": {ext}, '
                    f'"Record function id": 0, "Sequence number": {op}, "Fwd thread id": 0, "Ev Idx": {pyid}, '
                    f'"Input Dims": {dims}, "Input type": {types}, "Input Strides": {dims}, '
                    f'"Concrete Inputs": ["", "", ""]}}}}'
                )
                rt_ts = t + 4.0
                buf.append(
                    f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {PID}, '
                    f'"tid": {TID_MAIN}, "ts": {_fmt(rt_ts)}, "dur": 5.125, "args": {{"External id": {ext}, '
                    f'"cbid": 211, "correlation": {corr}}}}}'
                )
                buf.append(
                    f'{{"ph": "s", "id": {corr}, "pid": {PID}, "tid": {TID_MAIN}, "ts": {_fmt(rt_ts)}, '
                    f'"cat": "ac2g", "name": "ac2g"}}'
                )
                k_ts = max(gpu_t, rt_ts + 6.0)
                k_dur = 3.0 + (op % 7)
                buf.append(
                    f'{{"ph": "X", "cat": "kernel", "name": "{kname}", "pid": 0, "tid": 7, '
                    f'"ts": {_fmt(k_ts)}, "dur": {_fmt(k_dur)}, "args": {{"External id": {ext}, "queued": 0, '
                    f'"device": 0, "context": 1, "stream": 7, "correlation": {corr}, '
                    f'"registers per thread": {regs}, "shared memory": {smem}, "blocks per SM": 0.969697, '
                    f'"warps per SM": 3.878788, "grid": [128, 1, 1], "block": [128, 1, 1], '
                    f'"est. achieved occupancy %": {occ}}}}}'
                )
                buf.append(
                    f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {_fmt(k_ts)}, '
                    f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}'
                )
                gpu_t = k_ts + k_dur + 0.5
                if op % 4 == 0:
                    buf.append(
                        f'{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": {PID}, '
                        f'"tid": {TID_MAIN}, "ts": {_fmt(t + 2.0)}, "args": {{"Total Reserved": 2097152, '
                        f'"Total Allocated": {1048576 + (op % 1000) * 512}, "Bytes": 512, '
                        f'"Addr": {140000000000000 + op * 512}, "Device Id": 0, "Device Type": 1, "Ev Idx": {pyid}}}}}'
                    )
                    counts["memory"] += 1
                counts["python_function"] += 2
                counts["cpu_op"] += 1
                counts["cuda_runtime"] += 1
                counts["kernel"] += 1
                counts["ac2g"] += 2
                t += 15.0
                op += 1
                ext += 1
                corr += 1
            buf.append(
                f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{s}", "pid": {PID}, '
                f'"tid": {TID_MAIN}, "ts": {_fmt(step_start - 0.5)}, "dur": {_fmt(t - step_start + 0.25)}, '
                f'"args": {{"External id": {ext}, "Record function id": 0, "Ev Idx": {pyid}}}}}'
            )
            ext += 1
            counts["steps"] += 1
            w(",\n" + ",\n".join(buf))
            t += 20.0
        w('\n  ],\n  "traceName": ' + json.dumps(os.path.abspath(path)) + "\n}\n")
    counts["total"] = sum(v for k, v in counts.items())
    counts["bytes"] = os.path.getsize(path)
    return counts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--events", type=int, default=145_000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--gzip", action="store_true")
    a = ap.parse_args(argv)
    counts = generate(a.out, a.events, a.steps, use_gzip=True if a.gzip else None)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
