"""Inductor kernel names and their work model: what a ``torch.compile`` kernel fuses, and its FLOPs and bytes.

Inductor names a generated kernel ``<backend>_<kind>_fused_<op>_<op>..._<n>`` (``torch/_inductor/codegen/
triton.py`` / ``simd.py`` ``kernel_name = "_".join(["triton", kernel_category, fused_name, wrapper.next_kernel_suffix()])``,
``fused_name`` from ``torch/_inductor/utils.py`` ``get_fused_kernel_name``: ``"fused_" + "_".join(origins' aten
names)``): backend ``triton`` (GPU) or ``cpp`` (CPU, C++/OpenMP; no kind); kind ``poi`` (pointwise), ``red``
(looped reduction), ``per`` (persistent reduction), ``tem`` (template: a generated GEMM/conv), ``for`` (foreach).
An origin that starts with ``_`` leaves a double underscore (``fused__unsafe_view_add``). With
``torch._inductor.config.cpp.enable_kernel_profile`` the CPU kernels are profiled as ``graph_<g>_cpp_fused_...``.

Work of one launch (:func:`inductor_work`), from the tensors its launch records (Triton's launch ``cpu_op`` carries
the kernel's buffer arguments as ``Input Dims`` / ``Input type``: inputs *and* outputs, then the ``xnumel``/``rnumel``
scalars). The roofline conventions of ``work_models`` (one FLOP per element per arithmetic op, every buffer moved
once; Williams et al., CACM 2009):

- ``flops`` = numel of the largest buffer x the summed per-element cost of the fused ops (arithmetic and
  transcendental ops 1, reductions 1 per input element, softmax 5, layer/batch norm 5 forward and 8 backward,
  views/copies/casts/indexing 0: ``OP_FLOPS``); ``flops_low`` = numel x the costliest single op (an op applied to a
  reduced or broadcast operand costs less than the largest buffer's numel: the truth lies between).
- ``bytes`` = every buffer argument once (loads of inputs, stores of outputs); ``bytes_high``: a looped
  reduction (``red``) reading its inputs twice (the two passes of a mean-then-normalise kernel: 2 x bytes less the
  smallest buffer, the result), else an ``in_out_ptr`` buffer read and written (bytes + the largest buffer).
  The roofline's point is ``flops`` / ``bytes``; the stated uncertainty is the ``[flops_low, flops]`` and ``[bytes, bytes_high]`` range.

Templates (``tem``: a GEMM) and foreach kernels get no model here (their FLOPs are not in their name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["INDUCTOR_KERNEL_RE", "KINDS", "OP_FLOPS", "InductorKernel", "InductorWork", "parse_kernel_name",
           "inductor_work"]

#: ``[graph_<g>_]<backend>_[<kind>_]fused_<ops>_<n>`` (module docstring).
INDUCTOR_KERNEL_RE = re.compile(r"^(?:graph_\d+_)?(triton|cpp)_(?:(poi|red|per|tem|for)_)?fused_?(.*?)_(\d+)$")
#: Inductor's kernel categories.
KINDS = {"poi": "pointwise", "red": "reduction", "per": "persistent_reduction", "tem": "template",
         "for": "foreach", None: "cpp"}

_ZERO = ("view", "_unsafe_view", "reshape", "permute", "clone", "copy", "_to_copy", "convert_element_type", "cat",
         "expand", "squeeze", "unsqueeze", "t", "transpose", "as_strided", "slice", "select", "slice_scatter",
         "select_scatter", "index", "index_select", "gather", "scatter", "full", "full_like", "zeros", "zeros_like",
         "ones", "ones_like", "empty", "empty_like", "new_zeros", "new_ones", "iota", "arange", "lift_fresh",
         "lift_fresh_copy", "embedding", "constant_pad_nd", "alias", "detach", "split", "split_with_sizes",
         "unbind", "stack", "repeat", "scalar_tensor", "fill", "masked_fill", "where", "index_put", "embedding_dense_backward",
         "native_dropout", "native_dropout_backward", "bernoulli", "rand", "randn", "philox_rand", "inductor_seeds",
         "inductor_random", "inductor_lookup_seed", "_native_batch_norm_legit_functional")
#: FLOPs per element of each fused origin op (0 for data movement; unknown names count 1).
OP_FLOPS: dict[str, float] = {**dict.fromkeys(_ZERO, 0.0),
                              "_softmax": 5.0, "softmax": 5.0, "_log_softmax": 5.0, "log_softmax": 5.0,
                              "_softmax_backward_data": 5.0, "_log_softmax_backward_data": 5.0,
                              "native_layer_norm": 5.0, "native_batch_norm": 5.0, "native_group_norm": 5.0,
                              "native_layer_norm_backward": 8.0, "native_batch_norm_backward": 8.0,
                              "native_group_norm_backward": 8.0, "var_mean": 2.0}
#: Multi-word origin names (the others are one ``_``-free word, or ``_`` + one word).
_MULTI = sorted({k for k in OP_FLOPS if "_" in k.strip("_")} | {
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "clamp_min",
    "clamp_max", "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward",
    "convolution_backward", "logical_not", "logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_not",
    "scatter_add", "index_add", "upsample_nearest2d", "upsample_bilinear2d", "reflection_pad2d", "mse_loss",
    "nll_loss_forward", "nll_loss_backward", "binary_cross_entropy", "leaky_relu", "hardtanh", "log1p", "expm1",
    "_adaptive_avg_pool2d", "mean_dim", "sum_dim"}, key=lambda s: -s.count("_"))


@dataclass(frozen=True)
class InductorKernel:
    """A parsed Inductor kernel name: ``backend`` (triton / cpp), ``kind`` (:data:`KINDS` value), ``fused_ops``
    (the origin aten ops, in name order), ``index`` (the kernel's number in its graph)."""

    backend: str
    kind: str
    fused_ops: tuple[str, ...]
    index: int


@dataclass(frozen=True)
class InductorWork:
    """Work of one Inductor kernel launch (module docstring): FLOPs ``flops`` (upper) and ``flops_low``, bytes
    ``bytes`` (each buffer once) and ``bytes_high``, ``kind`` for the roofline (elementwise / reduction)."""

    flops: float
    flops_low: float
    bytes: float
    bytes_high: float
    kind: str


def _split_ops(text: str) -> tuple[str, ...]:
    toks = text.split("_")
    ops: list[str] = []
    i = 0
    while i < len(toks):
        lead = ""
        while i < len(toks) and toks[i] == "":  # a double underscore: the next origin starts with "_"
            lead += "_"
            i += 1
        if i >= len(toks):
            break
        rest = "_".join(toks[i:])
        hit = next((m for m in _MULTI if (lead + rest == m or (lead + rest).startswith(m + "_"))
                    and m.startswith(lead)), None)
        if hit is not None:
            ops.append(hit)
            i += hit[len(lead):].count("_") + 1
        else:
            ops.append(lead + toks[i])
            i += 1
    return tuple(ops)


def parse_kernel_name(name: str) -> InductorKernel | None:
    """Parse an Inductor kernel name (module docstring), or None for any other name.

    >>> parse_kernel_name("triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1")
    InductorKernel(backend='triton', kind='reduction', fused_ops=('_unsafe_view', 'add', 'mean', 'mul', 'pow', 'rsqrt'), index=1)
    >>> parse_kernel_name("graph_0_cpp_fused_add_gelu_0").fused_ops
    ('add', 'gelu')
    >>> parse_kernel_name("ampere_sgemm_128x64_nn") is None
    True
    """
    m = INDUCTOR_KERNEL_RE.match(name)
    if m is None:
        return None
    backend, kind, ops, idx = m.groups()
    return InductorKernel(backend, KINDS[kind], _split_ops(ops), int(idx))


def inductor_work(name: str, buffers: list[tuple[int, int]]) -> InductorWork | None:
    """Work of one launch of Inductor kernel ``name`` whose buffer arguments are ``buffers`` = ``[(numel, nbytes),
    ...]`` (the launch's recorded tensors). None for a name that is not an Inductor kernel, a template or foreach
    kernel, or no buffers. Formulas and their uncertainty: module docstring.

    >>> w = inductor_work("triton_poi_fused_add_cos_sin_0", [(100, 400), (100, 400), (100, 400)])
    >>> (w.flops, w.flops_low, w.bytes, w.bytes_high, w.kind)
    (300.0, 100.0, 1200.0, 1600.0, 'elementwise')
    """
    k = parse_kernel_name(name)
    if k is None or k.kind in ("template", "foreach") or not buffers:
        return None
    numel = max(n for n, _ in buffers)
    per = [OP_FLOPS.get(op, 1.0) for op in k.fused_ops] or [1.0]
    nbytes = float(sum(b for _, b in buffers))
    biggest = float(max(b for _, b in buffers))
    reduction = k.kind in ("reduction", "persistent_reduction")
    # a looped reduction may read its inputs twice (the smallest buffer, its result, is written once); else one
    # in_out buffer (the largest) read and written
    high = 2.0 * nbytes - min(b for _, b in buffers) if k.kind == "reduction" else nbytes + biggest
    return InductorWork(float(numel * sum(per)), float(numel * max(per)), nbytes, max(high, nbytes),
                        "reduction" if reduction else "elementwise")
