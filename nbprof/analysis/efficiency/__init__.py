"""Compute efficiency: FLOPs and bytes moved per operator and kernel, against the device's peaks.

Work models (per call, from the recorded ``input_dims`` / ``input_types``; ``M N K`` etc. are the
recorded sizes; ``e(t)`` is the element size of dtype ``t`` in bytes; bytes moved is the *minimum*
traffic of the roofline model (Williams, Waterman, Patterson, "Roofline", CACM 2009): every operand
read once and the result written once):

- ``aten::mm`` [n,m]x[m,p]: 2·n·m·p. Source: torch profiler ``computeFlops``
  (``torch/csrc/profiler/util.cpp``), ``torch.utils.flop_counter.mm_flop``. Bytes: the two operands read,
  the result written once (an ``out=`` tensor recorded as a third argument is that result, not an operand).
- ``aten::addmm`` bias,[n,m],[m,p]: 2·n·m·p + n·p (the bias add, one FLOP per output element, as
  TraceLens's ``GEMM.flops_func``; torch's ``addmm_flop`` leaves it out: ``torch_flops``).
- ``aten::bmm`` [b,n,m]x[b,m,p]: 2·b·n·m·p; ``aten::baddbmm`` c,[b,n,m],[b,m,p]: 2·b·n·m·p + b·n·p
  (same sources, ``bmm_flop`` / ``baddbmm_flop``, the bias add as addmm).
- ``aten::linear`` x[..., k], w[o, k] (, b[o]): 2·prod(x[:-1])·k·o (+ prod(x[:-1])·o with a bias) (= the
  addmm/mm it calls); ``aten::matmul``: mm/bmm after broadcasting the batch dims (``flop_counter``'s
  decomposition of matmul).
- convolution forward: 2·N·C_out·prod(out spatial)·(C_in/groups)·prod(kernel)
  (``flop_counter.conv_flop_count``; torch profiler's conv2d rule).
- ``aten::convolution_backward``: 2 × forward (grad input + grad weight; ``flop_counter.conv_backward_flop``).
- scaled-dot-product / flash attention, q [B,H,L,E], k [B,H,S,E], v [B,H,S,Ev]: forward
  2·B·H·L·S·E + 2·B·H·L·S·Ev (``flop_counter.sdpa_flop_count``), backward 2 × forward
  (``sdpa_backward_flop_count``); causal halves both (FlashAttention, Dao et al. 2022, §4 benchmarks;
  TraceLens's ``SDPA.flops_func``). Causality is the recorded ``is_causal`` (``custom_mask_type`` of the
  ``_efficient_attention_*`` kernels), a ``Concrete Inputs`` value the loader keeps; torch's
  ``flop_counter`` ignores it (``torch_flops``: the full count).
- elementwise ops (``aten::mul``/``add`` included): numel of the broadcast output (1 FLOP per output
  element, the roofline convention); bytes: the inputs read, the output written. torch profiler's
  ``computeFlops`` counts ``aten::mul``/``add`` as the numel of the *first* argument (a broadcast first
  argument is undercounted, by 9,000× on the Qwen trace's RoPE ``mul``): kept as ``torch_flops``.
  ``copy_(dst, src)``/``fill_``/dropout: 0 FLOPs; ``copy_`` reads ``src`` and writes ``dst`` (each in its
  own dtype; the destination is not read), ``fill_`` writes only. Integer dtypes: arithmetic on them
  counts like floating point (one operation per output element; torch's ``computeFlops`` ignores the
  dtype too), and a cast (a ``copy_`` between dtypes, a ``long int`` source included) is a copy, 0 FLOPs
  (``torch.utils.flop_counter`` has no ``copy_`` formula; Nsight Compute's roofline counts only
  ``fadd``/``fmul``/``ffma`` instructions, not the ``I2F``/``F2F`` conversions).
- reductions (sum, mean, amax, ...): numel of the input; bytes: the input read, the result written (its
  size from the recorded ``dim`` concrete input; one element without one).
- softmax / log_softmax (forward and backward): 5·numel (max, sub, exp, sum, div per element:
  Ivanov et al., "Data Movement Is All You Need", MLSys 2021).
- layer / batch / group norm: 5·numel forward (mean, var, sub, mul, affine), 8·numel backward; RMS norm
  4·numel (square, mean, rsqrt-mul, weight-mul) (same paper's operator counts).
- embedding: 0 FLOPs (a gather); bytes = indices + output read and written.
- optimizer steps: ``_fused_adam(w)_`` 14·numel(params) (the ``torch.optim.Adam`` algorithm: two
  moments 7, bias corrections 2, sqrt, eps, div, lr, update), bytes 7·numel (reads w, g, m, v;
  writes w, m, v; TensorList dtypes are not recorded: 4 bytes assumed); ``_fused_sgd_`` 2·numel;
  ``_foreach_*``: numel of the first list.
- ``torch.compile`` kernels (Inductor's ``triton_poi_/red_/per_fused_<ops>_<n>``, ``cpp_fused_...``): numel of the
  largest buffer x the per-element cost of the fused ops the name lists; bytes: every buffer argument once, with
  the stated range ``[flops_low, flops]``, ``[bytes, bytes_high]`` (:mod:`nbprof.analysis.efficiency.inductor`).

Where torch counts FLOPs itself (``with_flops=True``: ``FunctionEvent.flops`` / ``key_averages``,
the Kineto ``flops`` argument of older exporters) ``op_work``'s ``torch_flops`` reproduces its number
exactly (``flops`` differs only where noted above); ``tests/test_analysis_efficiency.py`` checks it on
CPU profiles and on the recorded shapes of real GPU traces, ``tests/peers/test_peer_tracelens.py``
checks ``flops``/``bytes`` against TraceLens's perf-model CSVs. For the conv2d rule nbprof takes the
output's spatial size from the first op whose first input is the output (``[N, C_out, ...]``):
a descendant (the output's ``resize_``/``add_``/...), else one of the next few ops of the thread
(its consumer: batch_norm, relu; 2021 traces have no output op inside the conv). The result is
torch's number (groups included); a conv whose output is not found has no model (and no row).
The backward ``output_mask`` and optimizer flags are not read: conv backward is counted with both
gradients, as ``torch.utils.flop_counter`` does.

Where TraceLens's perf model (AMD-AGI/TraceLens ``TraceLens/PerfModel/perf_model.py``) differs, nbprof
is right and TraceLens is not (``tests/peers/test_peer_tracelens.py``): TraceLens counts one FLOP per element
of a ``copy_`` (a copy does no arithmetic), writes one element for every reduction whatever its ``dim``,
counts a Python scalar argument as 4 bytes of traffic, and adds its conv-backward bias term in elements
where its other terms are bytes. Its normalisation model is another convention (per-channel statistic
terms), not an error.

Totals (steps, MFU) count each event's work once: an event whose ancestor in the host call tree
already has a model (``aten::linear`` over ``aten::addmm``) is not counted again (``counted``).

Per kernel, the work of the *launching* op (the nearest modelled ancestor of the op whose
``External id`` the kernel carries) is shared out across that op's kernels in proportion to their
durations; FLOPs go only to the kernels whose name identifies the op's kind (GEMM: ``gemm``,
``cutlass``, ``xmma``, ``Cijk``; convolution: ``conv``, ``cudnn``, ``winograd``; attention:
``flash``, ``fmha``, ``attention``) when there are such kernels (a split-K reduce or a memset gets
no FLOPs), bytes to all by duration. A CUDA-graph replay's kernels belong to the op that captured them
(:mod:`nbprof.trace.graph_replay`); each replay is one more execution of that op and gets its whole work.

Peaks: ``nbprof/analysis/data/device_peaks.json`` (dense Tensor Core numbers, vendor datasheets
cited per row), matched from ``deviceProperties`` by name and SM count; see :func:`peaks`.
"""

from .device_peaks import (
    Peaks,
    device_table,
    peaks,
)
from .frames import (
    EFFICIENCY_COLUMNS,
    kernel_efficiency,
    operator_efficiency,
    step_mfu,
)
from .work_models import (
    DTYPE_BYTES,
    Work,
    kernel_work,
    op_work,
    work,
)
from .work_models import (
    _optimizer_work as _optimizer_work,
)
from .work_models import (
    conv_flops as conv_flops,
)
from .work_models import (
    conv_out_spatial as conv_out_spatial,
)
from .work_models import (
    gemm_flops as gemm_flops,
)
from .work_models import (
    sdpa_flops as sdpa_flops,
)

__all__ = [
    "DTYPE_BYTES",
    "EFFICIENCY_COLUMNS",
    "Peaks",
    "Work",
    "device_table",
    "kernel_efficiency",
    "kernel_work",
    "op_work",
    "operator_efficiency",
    "peaks",
    "step_mfu",
    "work",
]
