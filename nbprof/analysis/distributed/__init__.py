"""Multi-rank analysis: collectives, bus bandwidth, compute/communication overlap, skew, ZeRO patterns.

Pure functions over one or several :class:`~nbprof.trace.model.Trace` (one per rank). The cross-rank
analyses (:func:`wait_transfer`, :func:`stragglers`, :func:`collective_skew`, :func:`skew`, :func:`overlap`,
:func:`step_breakdown`, :func:`collective_summary`, :func:`busbw_vs_link`, :func:`memory_per_rank`,
:func:`ranks_clock`, :func:`distributed_report`) compute from the per-rank reductions of
:mod:`~nbprof.analysis.distributed.reductions` (:func:`reduce_rank`): give them the traces, or the job's
concatenated reduction tables (a dataset read) when the full traces do not fit in one process.

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

from .bandwidth import (
    busbw_vs_link,
    collective_summary,
)
from .comms import (
    BUSBW_FACTOR_SOURCE,
    busbw_factor,
    collectives,
)
from .overlap_skew import (
    ZeroPattern as ZeroPattern,
)
from .overlap_skew import (
    collective_skew,
    memory_per_rank,
    overlap,
    skew,
    step_breakdown,
    zero_stage_pattern,
)
from .pipeline import (
    FsdpPattern,
    fsdp_pattern,
    pipeline_bubbles,
    ranks_clock,
    ranks_timeline,
)
from .reductions import (
    REDUCTION_SCHEMA,
    REDUCTION_VERSION,
    concat_reductions,
    reduce_rank,
)
from .report import (
    DistributedReport,
    distributed_report,
)
from .waits import (
    stragglers,
    wait_transfer,
    wait_transfer_summary,
)

__all__ = [
    "REDUCTION_SCHEMA",
    "REDUCTION_VERSION",
    "reduce_rank",
    "concat_reductions",
    "BUSBW_FACTOR_SOURCE",
    "busbw_factor",
    "collectives",
    "collective_summary",
    "overlap",
    "step_breakdown",
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
    "ranks_clock",
    "ranks_timeline",
    "DistributedReport",
    "distributed_report",
]
