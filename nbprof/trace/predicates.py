"""What a step, a kernel, a collective, a host op is: one vectorised rule each, over the events table.

Every predicate takes the events frame (``Trace.events``, see :mod:`nbprof.trace.schema`) and returns a
boolean numpy array aligned with its rows. String tests run once per *category* of the categorical
``name``/``cat`` columns and are broadcast through the codes, so they cost O(rows) integer work.

Steps
    A step range is a host row named ``ProfilerStep#N`` (what ``torch.profiler.profile.step()`` records,
    a ``user_annotation`` in today's Kineto, a ``cpu_op``/``Operator`` in 2021's). The name rule is
    :data:`nbprof.trace.steps.STEP_NAME_RE` (``ProfilerStep`` ``#`` ``N``, spaces tolerated around ``#``;
    :func:`is_step_row` matches it at the start of the name, :func:`step_number` finds it anywhere, as
    ``trace.steps`` does when it assigns steps). The ``step`` column of the events table says which step
    an event *belongs to*; :func:`is_step_row` says which rows *are* the step ranges.

Communication
    One rule (:func:`is_communication`), the union of what the peers count:

    * device kernels of a collective library: names starting ``nccl``/``rccl`` (case-insensitive:
      ``ncclKernel_AllReduce_...``, ``ncclDevKernel_...``, ``rccl...``), as HTA
      (``hta/utils/utils.py`` ``get_kernel_type``: COMMUNICATION when the name has ``nccl``) and
      torch-tb-profiler (``profiler/trace.py``: kernels named ``nccl*``) classify them, or kernels that
      carry a ``collective`` (Kineto's ``Collective name`` argument, PyTorch >= 2.1);
    * Kineto's ``collective_comm`` category (``libkineto/include/ActivityType.h`` COLLECTIVE_COMM);
    * host ranges named ``nccl:<op>``, ``rccl:<op>`` or ``gloo:<op>`` (the ``record_function`` ranges
      c10d opens around a collective; gloo *executes* inside them on its worker threads).

    ``where="device"`` / ``where="host"`` select one side.

Device and host
    Device rows have ``device >= 0``; device *ops* are kernels, memcpys and memsets on a device (the
    rows that occupy a stream). Host ops are the host rows of category ``cpu_op`` or
    ``user_annotation`` (operators and ``record_function`` ranges).

>>> import pandas as pd
>>> ev = pd.DataFrame({
...     "name": pd.Categorical(["ProfilerStep#3", "aten::mm", "ncclDevKernel_AllReduce", "gemm", "gloo:all_reduce"]),
...     "cat": pd.Categorical(["user_annotation", "cpu_op", "kernel", "kernel", "user_annotation"]),
...     "device": [-1, -1, 0, 0, -1],
... })
>>> is_step_row(ev).tolist()
[True, False, False, False, False]
>>> is_communication(ev).tolist()
[False, False, True, False, True]
>>> is_communication(ev, where="device").tolist()
[False, False, True, False, False]
>>> (is_kernel(ev) & ~is_communication(ev)).tolist()
[False, False, False, True, False]
>>> is_host_op(ev).tolist()
[True, True, False, False, True]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from . import schema
from .steps import STEP_NAME_RE, step_number

__all__ = [
    "ALLOC_CALL_RE",
    "COMM_HOST_PREFIXES",
    "COMM_KERNEL_PREFIXES",
    "DEVICE_OP_CATEGORIES",
    "GRAPH_LAUNCH_RE",
    "KERNEL_LAUNCH_RE",
    "HOST_OP_CATEGORIES",
    "STEP_NAME_RE",
    "TENSOR_CORE_ELIGIBLE_OPS",
    "TENSOR_CORE_KERNEL_PATTERNS",
    "category_in",
    "is_alloc_call",
    "is_communication",
    "is_device",
    "is_device_op",
    "is_graph_launch",
    "is_kernel_launch",
    "is_host",
    "is_host_op",
    "is_kernel",
    "is_memcpy",
    "is_memset",
    "is_runtime",
    "is_step_name",
    "is_step_row",
    "is_tensor_core_eligible_op",
    "name_mask",
    "step_number",
    "uses_tensor_cores",
]

Mask = npt.NDArray[np.bool_]

#: Kernel-name prefixes of collective libraries (lower case; the test is case-insensitive).
COMM_KERNEL_PREFIXES = ("nccl", "rccl")
#: Host range prefixes c10d uses around a collective (``record_function("nccl:all_reduce")``).
COMM_HOST_PREFIXES = ("nccl:", "rccl:", "gloo:")
#: Categories of the ops that occupy a device stream.
DEVICE_OP_CATEGORIES = (schema.KERNEL, schema.GPU_MEMCPY, schema.GPU_MEMSET)
#: Categories of host operators and ``record_function`` ranges.
HOST_OP_CATEGORIES = (schema.CPU_OP, schema.USER_ANNOTATION)


def name_mask(values: pd.Series, fn: Callable[[str], object]) -> Mask:
    """``bool(fn(str))`` per row, evaluated once per category of a categorical column.

    Missing values (and non-strings in an object column) give False.

    >>> name_mask(pd.Series(pd.Categorical(["ab", "b", None, "ab"])), lambda s: s.startswith("a")).tolist()
    [True, False, False, True]
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        cats = values.cat.categories
        hit = np.fromiter((isinstance(c, str) and bool(fn(c)) for c in cats), dtype=bool, count=len(cats))
        codes = values.cat.codes.to_numpy()
        return np.where(codes >= 0, hit[np.clip(codes, 0, None)], False) if len(hit) else np.zeros(len(codes), bool)
    return np.fromiter((isinstance(x, str) and bool(fn(x)) for x in values), dtype=bool, count=len(values))


def category_in(ev: pd.DataFrame, categories: Iterable[str]) -> Mask:
    """Rows whose ``cat`` is one of ``categories``."""
    wanted = frozenset(categories)
    return name_mask(ev["cat"], wanted.__contains__)


def is_device(ev: pd.DataFrame) -> Mask:
    """Rows on a device (``device >= 0``: kernels, memcpys, memsets, GPU annotations)."""
    return np.asarray(ev["device"].to_numpy() >= 0, dtype=bool)


def is_host(ev: pd.DataFrame) -> Mask:
    """Rows on the host (``device < 0``)."""
    return ~is_device(ev)


def is_kernel(ev: pd.DataFrame) -> Mask:
    """Device kernels (``cat == "kernel"`` on a device)."""
    return category_in(ev, (schema.KERNEL,)) & is_device(ev)


def is_memcpy(ev: pd.DataFrame) -> Mask:
    """Device memory copies (``cat == "gpu_memcpy"`` on a device)."""
    return category_in(ev, (schema.GPU_MEMCPY,)) & is_device(ev)


def is_memset(ev: pd.DataFrame) -> Mask:
    """Device memsets (``cat == "gpu_memset"`` on a device)."""
    return category_in(ev, (schema.GPU_MEMSET,)) & is_device(ev)


def is_device_op(ev: pd.DataFrame) -> Mask:
    """Kernels, memcpys and memsets on a device: the rows that occupy a stream."""
    return category_in(ev, DEVICE_OP_CATEGORIES) & is_device(ev)


#: The runtime/driver calls that replay a CUDA (HIP) graph; nsys spells them with a version suffix.
GRAPH_LAUNCH_RE = re.compile(r"^(cudaGraphLaunch|hipGraphLaunch|cuGraphLaunch)(_v\d+)?$")


def is_graph_launch(ev: pd.DataFrame) -> Mask:
    """Rows that launch a CUDA/HIP graph replay (:data:`GRAPH_LAUNCH_RE`); every device op of the replay carries the
    launch's correlation id."""
    return name_mask(ev["name"], GRAPH_LAUNCH_RE.match)


#: The runtime/driver calls that launch one kernel (not a graph, not a copy).
KERNEL_LAUNCH_RE = re.compile(r"^(cuda|cu|hip)(LaunchKernel|LaunchKernelExC|LaunchKernelEx|LaunchCooperativeKernel|"
                              r"ModuleLaunchKernel|ExtLaunchKernel|ExtModuleLaunchKernel)(_v\d+|_ptsz)?$")


def is_kernel_launch(ev: pd.DataFrame) -> Mask:
    """Host runtime/driver calls that launch one kernel (:data:`KERNEL_LAUNCH_RE`)."""
    return is_runtime(ev) & is_host(ev) & name_mask(ev["name"], KERNEL_LAUNCH_RE.match)


def is_runtime(ev: pd.DataFrame) -> Mask:
    """Runtime/driver API calls (``cuda_runtime``, ``cuda_driver``, ...; they launch device ops)."""
    return category_in(ev, schema.RUNTIME_CATEGORIES)


#: Device and pinned-host memory allocation / release calls of the CUDA and HIP runtime and driver APIs (nsys spells
#: them with a version suffix, ``cudaMalloc_v3020``). Each one blocks the host (``cudaFree`` also waits for the
#: device); PyTorch's caching allocator makes them rare once the first iterations have filled its pools.
ALLOC_CALL_RE = re.compile(
    r"^(cudaMalloc|cudaFree|cudaMallocHost|cudaFreeHost|cudaHostAlloc|cudaMallocManaged|cudaMallocPitch|"
    r"cuMemAlloc|cuMemFree|cuMemAllocHost|cuMemFreeHost|cuMemHostAlloc|cuMemAllocManaged|cuMemAllocPitch|"
    r"hipMalloc|hipFree|hipHostMalloc|hipHostFree|hipMallocManaged|hipExtMallocWithFlags)(_v\d+)?$")


def is_alloc_call(ev: pd.DataFrame) -> Mask:
    """Runtime/driver calls that allocate or free device or pinned host memory (:data:`ALLOC_CALL_RE`)."""
    return is_runtime(ev) & name_mask(ev["name"], ALLOC_CALL_RE.match)


def is_host_op(ev: pd.DataFrame, *, annotations: bool = True) -> Mask:
    """Host operators (``cpu_op``) and, unless ``annotations=False``, ``user_annotation`` ranges."""
    cats = HOST_OP_CATEGORIES if annotations else (schema.CPU_OP,)
    return category_in(ev, cats) & is_host(ev)


def _is_step_name(name: str) -> bool:
    return STEP_NAME_RE.match(name) is not None


def is_step_name(ev: pd.DataFrame) -> Mask:
    """Rows named ``ProfilerStep#N`` (host ranges and their ``gpu_user_annotation`` copies on a device)."""
    return name_mask(ev["name"], _is_step_name)


def is_step_row(ev: pd.DataFrame) -> Mask:
    """The ``ProfilerStep#N`` ranges themselves: host rows whose name matches :data:`STEP_NAME_RE`."""
    return is_step_name(ev) & is_host(ev)


def _is_comm_kernel_name(name: str) -> bool:
    return name[:4].lower() in COMM_KERNEL_PREFIXES


def _is_comm_host_name(name: str) -> bool:
    return name.startswith(COMM_HOST_PREFIXES)


def is_communication(ev: pd.DataFrame, *, where: Literal["any", "device", "host"] = "any") -> Mask:
    """Collective communication rows (the rule is in the module docstring).

    Parameters
    ----------
    ev : pandas.DataFrame
        The events table.
    where : {"any", "device", "host"}
        ``"device"``: communication kernels and ``collective_comm`` device rows; ``"host"``: the
        ``nccl:``/``rccl:``/``gloo:`` host ranges and ``collective_comm`` host rows; ``"any"``: both.
    """
    dev = is_device(ev)
    out = np.zeros(len(ev), dtype=bool)
    coll_cat = category_in(ev, (schema.COLLECTIVE_COMM,))
    if where in ("any", "device"):
        kern = is_kernel(ev)
        comm_kernel = name_mask(ev["name"], _is_comm_kernel_name)
        if "collective" in ev.columns:
            comm_kernel |= ev["collective"].notna().to_numpy()
        out |= kern & comm_kernel
        out |= coll_cat & dev
    if where in ("any", "host"):
        out |= name_mask(ev["name"], _is_comm_host_name) & ~dev
        out |= coll_cat & ~dev
    return out


#: Substrings of kernel names that use Tensor Cores: torch-tb-profiler 0.4.3's ``TC_Allowlist``
#: (``profiler/tensor_core.py``), itself from NVIDIA PyProf ``pyprof/prof/tc.py``. Heuristic: a name
#: list, not a hardware counter; kernels of newer libraries (e.g. ``sm90_xmma``, cutlass ``*_tensorop_*``)
#: match only when they carry one of these substrings.
TENSOR_CORE_KERNEL_PATTERNS = (
    "h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2", "first_layer_wgrad_kernel",
    "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm", "xmma_sparse_conv",
    "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm", "c1688",
)
#: Operators that can run on Tensor Cores: torch-tb-profiler 0.4.3's ``TC_OP_Allowlist``
#: (``profiler/tensor_core.py``: the lower-precision ops of ATen's ``autocast_mode.cpp`` and their backward ops).
TENSOR_CORE_ELIGIBLE_OPS = frozenset({
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc", "aten::conv_transpose1d",
    "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::convolution", "aten::cudnn_convolution",
    "aten::cudnn_convolution_transpose", "aten::prelu", "aten::addmm", "aten::addmv", "aten::addr", "aten::matmul",
    "aten::mm", "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm", "aten::chain_matmul",
    "aten::linalg_multi_dot", "aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_gru_cell", "aten::lstm_cell",
    "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward", "MmBackward",
    "aten::cudnn_convolution_backward_weight", "aten::addmm_", "AddmvBackward", "MvBackward",
    "aten::cudnn_convolution_transpose_backward_weight", "aten::cudnn_convolution_transpose_backward_input",
    "AddmmBackward", "aten::cudnn_convolution_backward_input", "AddbmmBackward", "aten::cudnn_convolution_backward",
})


def _uses_tensor_cores(name: str) -> bool:
    return any(p in name for p in TENSOR_CORE_KERNEL_PATTERNS)


def uses_tensor_cores(ev: pd.DataFrame) -> Mask:
    """Kernels whose name says they use Tensor Cores (:data:`TENSOR_CORE_KERNEL_PATTERNS`, a substring match)."""
    return is_kernel(ev) & name_mask(ev["name"], _uses_tensor_cores)


def is_tensor_core_eligible_op(ev: pd.DataFrame) -> Mask:
    """Host rows named as an operator that can use Tensor Cores (:data:`TENSOR_CORE_ELIGIBLE_OPS`, exact names)."""
    return is_host(ev) & name_mask(ev["name"], TENSOR_CORE_ELIGIBLE_OPS.__contains__)
