"""Work models: FLOPs and minimum bytes moved per operator call and per kernel.

The formulas and their sources are listed in :mod:`nbprof.analysis.efficiency`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...trace import predicates as pred
from ...trace.graph_replay import replay_launches, replay_positions
from ...trace.ids import present as id_present
from ...trace.model import Trace
from .._memo import per_trace
from ..kernel_counters import measured_dram_bytes
from ..operators import _torch_shapes_key, host_call_tree
from .inductor import inductor_work

#: Element size in bytes per ``Input type`` spelling (torch's ``c10::ScalarType`` names).
DTYPE_BYTES: dict[str, int] = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "short int": 2,
    "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
    "c10::complex<c10::Half>": 4, "unsigned short": 2, "unsigned int": 4,
}


#: ``Input type`` -> the peak-table column of its compute.
_DTYPE_PEAK = {
    "double": "fp64", "float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
}


@dataclass(frozen=True)
class Work:
    """Work of one call: ``flops`` (FLOP executed: the roofline's numerator), ``bytes`` (bytes moved),
    ``kind`` (gemm, conv, attention, elementwise, reduction, norm, softmax, embedding, optimizer),
    ``dtype`` (peak-table column) and ``torch_flops`` (torch profiler's own count where its rule differs
    from ``flops``: the broadcast ``aten::mul``/``add`` and causal attention; None where equal)."""

    flops: float
    bytes: float
    kind: str
    dtype: str
    torch_flops: float | None = field(default=None, repr=False, compare=False)


def _prod(xs: Sequence[int]) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p


def _is_shape(d: Any) -> bool:
    return isinstance(d, list) and all(isinstance(x, int) for x in d)


def _tensors(dims: Sequence[Any], types: Sequence[Any]) -> list[tuple[list[int], str]]:
    """(shape, dtype) of the Tensor arguments (a 0-d scalar tensor has shape [])."""
    out = []
    for i, d in enumerate(dims):
        t = str(types[i]) if i < len(types) else ""
        if _is_shape(d) and t in DTYPE_BYTES and (d or t not in ("Scalar", "")):
            out.append((list(d), t))
    return out


def _nbytes(shape: Sequence[int], dtype: str) -> int:
    return _prod(shape) * DTYPE_BYTES.get(dtype, 4)


def _broadcast(shapes: Sequence[Sequence[int]]) -> list[int]:
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, x in enumerate(s):
            j = nd - len(s) + i
            out[j] = max(out[j], int(x))
    return out


_ELEMENTWISE = frozenset([
    "add", "sub", "mul", "div", "rsub", "pow", "neg", "abs", "exp", "exp2", "log", "log2", "log1p", "sqrt",
    "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "silu", "threshold_backward", "gelu_backward",
    "silu_backward", "sigmoid_backward", "tanh_backward", "where", "clamp", "clamp_min", "clamp_max", "maximum",
    "minimum", "reciprocal", "erf", "hardtanh", "leaky_relu", "elu", "masked_fill", "addcmul", "addcdiv", "lerp",
    "mish", "sign", "floor", "ceil", "round", "fill", "copy", "dropout", "native_dropout", "native_dropout_backward",
])


#: tensor inputs of elementwise ops (their ``native_functions.yaml`` schemas); a further recorded tensor is the
#: ``out=`` result (``clamp_min(self, min, *, out)`` records three shapes), written once, not also read
_EW_INPUTS = {
    **dict.fromkeys(("neg", "abs", "exp", "exp2", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh",
                     "sigmoid", "relu", "gelu", "silu", "clamp_min", "clamp_max", "reciprocal", "erf", "hardtanh",
                     "leaky_relu", "elu", "mish", "sign", "floor", "ceil", "round"), 1),
    **dict.fromkeys(("threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
                     "maximum", "minimum"), 2),
    **dict.fromkeys(("where", "addcmul", "addcdiv"), 3),
}


_REDUCTIONS = frozenset(["sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "var", "std", "argmax", "argmin", "logsumexp"])


_SDPA_FWD = ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
             "_flash_attention_forward", "_efficient_attention_forward",
             "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_attention_math")


_SDPA_BWD = ("_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention_backward",
             "_scaled_dot_product_cudnn_attention_backward", "_flash_attention_backward",
             "_efficient_attention_backward", "_scaled_dot_product_flash_attention_for_cpu_backward")


#: kernels-level entry points whose q/k/v are laid out [B, L, H, E] (``aten/src/ATen/native/transformers``)
_BLHE = frozenset({"_flash_attention_forward", "_flash_attention_backward", "_efficient_attention_forward",
                   "_efficient_attention_backward"})


def _bhle(shape: Sequence[int]) -> list[int]:
    return [shape[0], shape[2], shape[1], shape[3]] if len(shape) == 4 else list(shape)


def _base(name: str) -> str:
    n = name.split("::", 1)[1] if "::" in name else name
    n = n.rstrip("_") if not n.startswith("_fused") and not n.startswith("_foreach") else n
    return n


def gemm_flops(m: int, k: int, n: int, batch: int = 1) -> int:
    """2·batch·m·k·n: one multiply and one add per MAC (torch profiler ``computeFlops``, ``flop_counter.mm_flop``).

    >>> gemm_flops(8, 16, 32)
    8192
    """
    return 2 * batch * m * k * n


def conv_flops(x_shape: Sequence[int], w_shape: Sequence[int], out_spatial: Sequence[int]) -> int:
    """Forward convolution FLOPs: 2·N·C_out·prod(out_spatial)·(C_in/groups)·prod(kernel)
    (``torch.utils.flop_counter.conv_flop_count``; ``w_shape[1]`` is C_in/groups).

    >>> conv_flops([2, 3, 10, 10], [4, 3, 3, 3], [5, 5])  # stride 2, padding 1
    10800
    """
    return 2 * int(x_shape[0]) * int(w_shape[0]) * _prod(out_spatial) * int(w_shape[1]) * _prod(w_shape[2:])


def conv_out_spatial(in_spatial: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                     padding: Sequence[int], dilation: Sequence[int]) -> list[int]:
    """Output size per spatial dim: ``(i + 2p - d·(k-1) - 1) // s + 1`` (``torch.nn.Conv2d`` docs).

    >>> conv_out_spatial([10, 10], [3, 3], [2, 2], [1, 1], [1, 1])
    [5, 5]
    """
    return [(int(i) + 2 * p - d * (int(k) - 1) - 1) // s + 1
            for i, k, s, p, d in zip(in_spatial, kernel, stride, padding, dilation, strict=True)]


def sdpa_flops(q: Sequence[int], k: Sequence[int], v: Sequence[int], *, causal: bool = False,
               backward: bool = False) -> int:
    """Attention FLOPs for q [B,H,L,E], k [B,H,S,E], v [B,H,S,Ev]: 2·B·H·L·S·E (QKᵀ) + 2·B·H·L·S·Ev (PV)
    (``flop_counter.sdpa_flop_count``); backward 2 × forward (``sdpa_backward_flop_count``); causal
    halves both (only the lower triangle is computed: FlashAttention, Dao et al. 2022).

    >>> sdpa_flops([1, 2, 4, 8], [1, 2, 4, 8], [1, 2, 4, 8])
    1024
    """
    b, h, L, e = (int(x) for x in q[-4:]) if len(q) >= 4 else (1, *(int(x) for x in q[-3:]))
    s = int(k[-2])
    ev = int(v[-1])
    f = 2 * b * h * L * s * e + 2 * b * h * L * s * ev
    if backward:
        f *= 2
    return f // 2 if causal else f


#: position of ``is_causal`` (``custom_mask_type`` for the ``_efficient_attention_*`` kernels: non-zero is a
#: causal mask) among the recorded arguments of each attention op (their ``native_functions.yaml`` schemas)
_CAUSAL_ARG = {
    "scaled_dot_product_attention": 5, "_scaled_dot_product_flash_attention": 4,
    "_scaled_dot_product_efficient_attention": 6, "_scaled_dot_product_cudnn_attention": 6,
    "_flash_attention_forward": 8, "_efficient_attention_forward": 9,
    "_scaled_dot_product_flash_attention_for_cpu": 4, "_scaled_dot_product_attention_math": 5,
    "_scaled_dot_product_flash_attention_backward": 11, "_scaled_dot_product_efficient_attention_backward": 11,
    "_scaled_dot_product_cudnn_attention_backward": 14, "_flash_attention_backward": 11,
    "_efficient_attention_backward": 14, "_scaled_dot_product_flash_attention_for_cpu_backward": 7,
}


def _is_causal(base: str, concrete: Sequence[Any]) -> bool:
    """The recorded ``is_causal`` (``True``) or ``custom_mask_type`` (non-zero) of an attention call."""
    i = _CAUSAL_ARG.get(base, -1)
    if not 0 <= i < len(concrete):
        return False
    v = str(concrete[i]).strip()
    return v == "True" or (v.isdigit() and int(v) != 0)


#: GEMMs: number of leading tensor arguments that are operands (a further tensor is the ``out=`` result)
_GEMM_OPERANDS = {"mm": 2, "addmm": 3, "bmm": 2, "baddbmm": 3}


def work(name: str, dims: Sequence[Any], types: Sequence[Any], *,
         out_shape: Sequence[int] | None = None, concrete: Sequence[Any] = ()) -> Work | None:
    """The work of one call of operator ``name`` with argument shapes ``dims``, types ``types`` and
    concrete (scalar) inputs ``concrete`` (``Input Dims`` / ``Input type`` / ``Concrete Inputs`` as
    recorded), or None when no model applies.

    ``out_shape`` is the output shape where the recorded arguments do not determine it (forward
    convolution: ``[N, C_out, *spatial]``). Formulas and sources: module docstring.

    >>> work("aten::addmm", [[32], [8, 16], [16, 32], [], []], ["float"] * 3 + ["Scalar"] * 2)
    Work(flops=8448.0, bytes=3712.0, kind='gemm', dtype='fp32')
    """
    ts = _tensors(dims, types)
    if not ts:
        return None
    iw = inductor_work(name, [(_prod(s), _nbytes(s, t)) for s, t in ts])
    if iw is not None:  # a torch.compile kernel: its fused ops (efficiency.inductor)
        return Work(iw.flops, iw.bytes, iw.kind, _DTYPE_PEAK.get(ts[0][1], "fp32"))
    b = _base(name)
    dt0 = ts[0][1]
    peak_dt = _DTYPE_PEAK.get(dt0, "fp32")
    in_bytes = float(sum(_nbytes(s, t) for s, t in ts))

    def gemm(f: int, out: Sequence[int], dt: str) -> Work:
        # operands read once, the result written once: an ``out=`` tensor is the result, not an operand;
        # addmm / baddbmm also add the bias (one FLOP per output element; torch counts only 2·m·k·n)
        ops = ts[:_GEMM_OPERANDS.get(b, len(ts))]
        rd = float(sum(_nbytes(s, t) for s, t in ops))
        bias = _prod(out) if b in ("addmm", "baddbmm") or (b == "linear" and len(ts) >= 3) else 0
        return Work(float(f + bias), rd + _nbytes(out, dt), "gemm", _DTYPE_PEAK.get(dt, "fp32"),
                    torch_flops=float(f) if bias else None)

    shapes = [s for s, _ in ts]
    try:
        if b == "mm" and len(ts) >= 2 and len(shapes[0]) == 2 and len(shapes[1]) == 2:
            (n, m), (_, p) = shapes[0], shapes[1]
            return gemm(gemm_flops(n, m, p), [n, p], ts[0][1])
        if b == "addmm" and len(ts) >= 3:
            (n, m), (_, p) = shapes[1], shapes[2]
            return gemm(gemm_flops(n, m, p), [n, p], ts[1][1])
        if b == "bmm" and len(ts) >= 2:
            (bb, n, m), (_, _, p) = shapes[0], shapes[1]
            return gemm(gemm_flops(n, m, p, bb), [bb, n, p], ts[0][1])
        if b == "baddbmm" and len(ts) >= 3:
            (bb, n, m), (_, _, p) = shapes[1], shapes[2]
            return gemm(gemm_flops(n, m, p, bb), [bb, n, p], ts[1][1])
        if b == "linear" and len(ts) >= 2:
            x, w = shapes[0], shapes[1]
            rows = _prod(x[:-1])
            o = w[0] if len(w) == 2 else 1
            return gemm(gemm_flops(rows, x[-1], o), [*x[:-1], o], ts[0][1])
        if b == "matmul" and len(ts) >= 2:
            x, y = shapes[0], shapes[1]
            if len(x) == 1 and len(y) == 1:
                return gemm(2 * x[0], [], ts[0][1])
            xm = [1, *x] if len(x) == 1 else x
            ym = [*y, 1] if len(y) == 1 else y
            batch = _broadcast([xm[:-2], ym[:-2]])
            nn, kk, pp = xm[-2], xm[-1], ym[-1]
            out = [*batch, nn, pp]
            return gemm(gemm_flops(nn, kk, pp, _prod(batch)), out, ts[0][1])
        if b in ("conv1d", "conv2d", "conv3d", "convolution", "_convolution", "cudnn_convolution",
                 "mkldnn_convolution", "miopen_convolution", "conv_transpose2d", "_conv_depthwise2d"):
            if out_shape is None or len(ts) < 2:
                return None
            x, w = shapes[0], shapes[1]
            if b == "conv_transpose2d":  # weight [C_in, C_out/groups, k...]: as the backward-data conv
                f = 2 * x[0] * _prod(x[1:2]) * _prod(x[2:]) * w[1] * _prod(w[2:])
            else:
                f = conv_flops(x, w, list(out_shape)[2:])
            return Work(float(f), in_bytes + _nbytes(out_shape, dt0), "conv", peak_dt)
        if b in ("convolution_backward", "cudnn_convolution_backward", "miopen_convolution_backward") \
                and len(ts) >= 3:
            # convolution_backward(grad_output, input, weight, ...); torch 1.x cudnn/miopen_convolution_backward
            # (input, grad_output, weight, ...)
            go, x, w = (shapes[0], shapes[1], shapes[2]) if b == "convolution_backward" else \
                (shapes[1], shapes[0], shapes[2])
            f = 2 * conv_flops(x, w, go[2:])
            # reads grad_out, input, weight; writes grad_input, grad_weight
            byts = in_bytes + _nbytes(x, ts[1][1]) + _nbytes(w, ts[2][1])
            return Work(float(f), float(byts), "conv", peak_dt)
        if b in _BLHE:
            shapes = [_bhle(x) if len(x) == 4 else x for x in shapes]
        causal = _is_causal(b, concrete)
        if b in _SDPA_FWD and len(ts) >= 3:
            q, k, v = shapes[0], shapes[1], shapes[2]
            out = [*q[:-1], v[-1]]
            f = sdpa_flops(q, k, v, causal=causal)
            return Work(float(f), in_bytes + _nbytes(out, dt0), "attention", peak_dt,
                        torch_flops=float(sdpa_flops(q, k, v)) if causal else None)
        if b in _SDPA_BWD and len(ts) >= 4:
            # grad_out, q, k, v, (out, logsumexp, ...): grads of q, k, v written
            q, k, v = shapes[1], shapes[2], shapes[3]
            byts = in_bytes + _nbytes(q, dt0) + _nbytes(k, dt0) + _nbytes(v, dt0)
            f = sdpa_flops(q, k, v, causal=causal, backward=True)
            return Work(float(f), float(byts), "attention", peak_dt,
                        torch_flops=float(sdpa_flops(q, k, v, backward=True)) if causal else None)
        if b == "copy" and len(ts) >= 2:
            # copy_(self, src): src read, self (the destination) written, each in its own dtype
            return Work(0.0, float(_nbytes(*ts[1]) + _nbytes(*ts[0])), "elementwise", "fp32")
        if b == "fill":
            # fill_(self, value): self written only
            return Work(0.0, float(_nbytes(*ts[0])), "elementwise", "fp32")
        if b in _ELEMENTWISE:
            n_in = _EW_INPUTS.get(b, len(ts))
            if len(ts) > n_in and shapes[n_in] == _broadcast(shapes[:n_in]):  # an out= result
                ts, shapes = ts[:n_in], shapes[:n_in]
                in_bytes = float(sum(_nbytes(s, t) for s, t in ts))
            out = _broadcast(shapes)
            f = 0 if b == "dropout" else _prod(out)
            # torch profiler computeFlops for aten::mul / aten::add: numel of the first argument (a
            # broadcast first argument is undercounted); kept as ``torch_flops`` for parity
            tf = float(_prod(shapes[0])) if b in ("mul", "add") and name.startswith("aten::") else None
            return Work(float(f), in_bytes + _nbytes(out, dt0), "elementwise", "fp32",
                        torch_flops=tf if tf is not None and tf != f else None)
        if b in _REDUCTIONS:
            # input read, result written: its numel from the recorded ``dim`` (a concrete input) where present
            x = shapes[0]
            red = _parse(str(concrete[1])) if len(concrete) > 1 and str(concrete[1]).startswith("[") else None
            if red and all(isinstance(d, int) and -len(x) <= d < len(x) for d in red):
                gone = {d % len(x) for d in red}
                out_n = _prod([n for i, n in enumerate(x) if i not in gone])
            else:
                out_n = 1
            return Work(float(_prod(x)), float((_prod(x) + out_n) * DTYPE_BYTES.get(dt0, 4)), "reduction", "fp32")
        if b in ("softmax", "_softmax", "log_softmax", "_log_softmax", "_softmax_backward_data",
                 "_log_softmax_backward_data"):
            ne = _prod(shapes[0])
            return Work(5.0 * ne, in_bytes + _nbytes(shapes[0], dt0), "softmax", "fp32")
        if b in ("layer_norm", "native_layer_norm", "batch_norm", "native_batch_norm", "_batch_norm_impl_index",
                 "cudnn_batch_norm", "miopen_batch_norm", "group_norm", "native_group_norm", "_native_batch_norm_legit",
                 "_native_batch_norm_legit_no_training", "instance_norm"):
            ne = _prod(shapes[0])
            return Work(5.0 * ne, in_bytes + _nbytes(shapes[0], dt0), "norm", "fp32")
        if b in ("native_layer_norm_backward", "native_batch_norm_backward", "cudnn_batch_norm_backward",
                 "miopen_batch_norm_backward", "native_group_norm_backward", "batch_norm_backward",
                 "_fused_rms_norm_backward"):
            ne = _prod(shapes[0])
            return Work(8.0 * ne, in_bytes + _nbytes(shapes[0], dt0), "norm", "fp32")
        if b in ("rms_norm", "_fused_rms_norm"):
            ne = _prod(shapes[0])
            return Work(4.0 * ne, in_bytes + _nbytes(shapes[0], dt0), "norm", "fp32")
        if b in ("embedding", "embedding_dense_backward", "embedding_backward"):
            w, idx = (shapes[0], shapes[1]) if b == "embedding" else (shapes[1], shapes[0])
            out_n = _prod(idx) * (w[-1] if w else 1)
            return Work(0.0, float(_nbytes(idx, "long int") + 2 * out_n * DTYPE_BYTES.get(dt0, 4)),
                        "embedding", "fp32")
    except (ValueError, IndexError, TypeError):
        return None
    return None


def _optimizer_work(name: str, dims: Sequence[Any], types: Sequence[Any]) -> Work | None:
    """Fused / foreach optimizer steps: TensorList arguments (lists of shapes)."""
    b = _base(name)
    lists = [d for d in dims if isinstance(d, list) and d and all(_is_shape(x) for x in d)]
    if not lists:
        return None
    n = sum(_prod(s) for s in lists[0])
    dt = "float"
    if types and isinstance(types[0], str) and types[0] in DTYPE_BYTES:
        dt = types[0]
    e = DTYPE_BYTES.get(dt, 4)
    if b in ("_fused_adam_", "_fused_adamw_", "_fused_adam", "_fused_adamw"):
        return Work(14.0 * n, float(7 * n * e), "optimizer", "fp32")  # reads w, g, m, v; writes w, m, v
    if b in ("_fused_sgd_", "_fused_sgd"):
        return Work(2.0 * n, float(3 * n * e), "optimizer", "fp32")
    if b.startswith("_foreach_"):
        total = sum(sum(_prod(s) for s in lst) for lst in lists)
        op = b[len("_foreach_"):].rstrip("_")
        f = 0 if op in ("copy", "zero") else n
        return Work(float(f), float(total * e + n * e), "optimizer", "fp32")
    return None


def _parse(text: Any) -> list[Any]:
    if not isinstance(text, str) or not text:
        return []
    try:
        v = json.loads(text)
    except ValueError:
        return []
    return v if isinstance(v, list) else []


#: host ops after a forward convolution's subtree searched for its output shape
_CONV_LOOKAHEAD = 8


@per_trace
def op_work(trace: Trace) -> pd.DataFrame:
    """Work of every host operator event that has a model.

    Returns
    -------
    pandas.DataFrame
        One row per modelled ``cpu_op`` event of the host call tree: ``event`` (row position in
        ``trace.events``), ``tree`` (row position in :func:`nbprof.analysis.operators.host_call_tree`),
        ``name``, ``input_dims`` (torch's ``key_averages`` shape key), ``flops`` (FLOP, float64),
        ``bytes`` (bytes moved, float64), ``kind``, ``dtype`` (peak-table column),
        ``recorded_flops`` (torch's ``flops`` argument where the trace has it, else NaN),
        ``torch_flops`` (torch profiler's rule for this call: equal to ``flops`` except a broadcast
        ``aten::mul``/``add``, where torch counts the first argument's numel, and causal attention, which
        torch counts in full),
        ``counted`` (True when no ancestor already has a model: sum only these for totals),
        ``step``, ``merged`` (folded into a same-name parent by torch's ``key_averages``).
        Empty (same columns) without ``record_shapes``.
    """
    ev = trace.events
    cols = ["event", "tree", "name", "input_dims", "flops", "bytes", "kind", "dtype", "recorded_flops",
            "torch_flops", "counted", "step", "merged"]
    if "input_dims" not in ev:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    tree = host_call_tree(trace)
    evi = tree["event"].to_numpy()
    names = ev["name"].astype(object).to_numpy()[evi]
    dims_c = ev["input_dims"].cat
    types_c = ev["input_types"].cat if "input_types" in ev else None
    conc_c = ev["concrete_inputs"].cat if "concrete_inputs" in ev else None
    dcode = dims_c.codes.to_numpy()[evi]
    tcode = types_c.codes.to_numpy()[evi] if types_c is not None else np.full(len(evi), -1)
    ccode = conc_c.codes.to_numpy()[evi] if conc_c is not None else np.full(len(evi), -1)
    dcats = [str(c) for c in dims_c.categories]
    tcats = [str(c) for c in types_c.categories] if types_c is not None else []
    ccats = [str(c) for c in conc_c.categories] if conc_c is not None else []
    parent = tree["parent"].to_numpy()
    cats = tree["cat"].astype(object).to_numpy()
    found: dict[int, Work] = {}
    pending_conv: list[int] = []
    # one model evaluation per distinct (name, dims, types), broadcast to the rows (vectorised key)
    rows = np.flatnonzero((cats == "cpu_op") & (dcode >= 0))
    ncode = pd.factorize(names[rows])[0].astype(np.int64)
    key = np.stack([ncode, dcode[rows], tcode[rows], ccode[rows]], axis=1) if len(rows) else \
        np.zeros((0, 4), dtype=np.int64)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    per_key: list[Work | None] = []
    for f in first:
        i = int(rows[f])
        dims = _parse(dcats[dcode[i]])
        types = _parse(tcats[tcode[i]]) if tcode[i] >= 0 else []
        wk = work(names[i], dims, types, concrete=_parse(ccats[ccode[i]]) if ccode[i] >= 0 else [])
        per_key.append(wk if wk is not None else _optimizer_work(names[i], dims, types))
    conv_key = [wk is None and _base(str(names[rows[f]])) in ("conv1d", "conv2d", "conv3d", "convolution",
                                                               "_convolution") for f, wk in zip(first, per_key,
                                                                                                 strict=True)]
    for r, k in zip(rows.tolist(), inverse.ravel().tolist(), strict=True):
        wk = per_key[k]
        if wk is not None:
            found[r] = wk
        elif conv_key[k]:
            pending_conv.append(r)
    # forward convolutions: output shape from the first descendant whose first input is [N, C_out, ...]
    last = tree["last"].to_numpy()
    tid = tree["tid"].to_numpy()
    pid = tree["pid"].to_numpy()
    for i in pending_conv:
        dims = _parse(dcats[dcode[i]])
        types = _parse(tcats[tcode[i]]) if tcode[i] >= 0 else []
        ts = _tensors(dims, types)
        if len(ts) < 2:
            continue
        x, wsh = ts[0][0], ts[1][0]
        # inside the subtree first (the output's resize_/add_), then the next ops of the thread (the
        # consumer: batch_norm, relu, add), which is where 2021 traces (no output op inside) have it
        for j in range(i + 1, min(int(last[i]) + 1 + _CONV_LOOKAHEAD, len(evi))):
            if tid[j] != tid[i] or pid[j] != pid[i]:
                break
            if dcode[j] < 0:
                continue
            d = _parse(dcats[dcode[j]])
            if d and _is_shape(d[0]) and len(d[0]) == len(x) and d[0][0] == x[0] and len(wsh) > 1 \
                    and d[0][1] == wsh[0] and d[0] != x and _base(names[j]) not in ("convolution", "_convolution"):
                w = work(names[i], dims, types, out_shape=d[0])
                if w is not None:
                    found[i] = w
                break
    idx = np.array(sorted(found), dtype=np.int64)
    has = np.zeros(len(evi), dtype=bool)
    has[idx] = True
    # counted: no modelled ancestor (walk up the parents)
    counted = has.copy()
    anc = parent.copy()
    while True:
        live = anc >= 0
        if not live.any():
            break
        hit = live & has[np.clip(anc, 0, None)]
        counted &= ~hit
        anc = np.where(live, parent[np.clip(anc, 0, None)], -1)
    rec = ev["flops"].to_numpy()[evi] if "flops" in ev else np.full(len(evi), np.nan)
    steps = ev["step"].to_numpy()[evi] if "step" in ev else np.full(len(evi), -1)
    shape_key = np.array([_torch_shapes_key(c) for c in dcats] + ["[]"], dtype=object)
    ws = [found[int(i)] for i in idx]
    # text columns as categoricals built from codes (a 1 M-event trace has 160 k modelled ops and ~100 names:
    # no per-row string conversion)
    name_cat = ev["name"].array.take(evi[idx])
    skey_codes, skey_uniq = pd.factorize(shape_key)
    dims_cat = pd.Categorical.from_codes(skey_codes[dcode[idx]], categories=pd.Index(skey_uniq, dtype=object))
    return pd.DataFrame({
        "event": evi[idx],
        "tree": idx,
        "name": name_cat,
        "input_dims": dims_cat,
        "flops": np.array([w.flops for w in ws], dtype=np.float64),
        "bytes": np.array([w.bytes for w in ws], dtype=np.float64),
        "kind": pd.Categorical([w.kind for w in ws]),
        "dtype": pd.Categorical([w.dtype for w in ws]),
        "recorded_flops": rec[idx].astype(np.float64),
        "torch_flops": np.array([w.flops if w.torch_flops is None else w.torch_flops for w in ws], dtype=np.float64),
        "counted": counted[idx],
        "step": steps[idx],
        "merged": tree["merged"].to_numpy()[idx],
    })


_GEMM_KERNEL = r"gemm|cutlass|xmma|Cijk|matmul|nvjet|wgmma"
_KIND_KERNEL_RE = {
    "gemm": re.compile(_GEMM_KERNEL, re.IGNORECASE),
    "conv": re.compile(r"conv|cudnn|winograd|implicit|dgrad|wgrad|fprop|miopen", re.IGNORECASE),
    "attention": re.compile(r"flash|fmha|attention|attn", re.IGNORECASE),
}
#: a convolution that launches GEMM kernels computes in them (im2col, non-fused Winograd's batched GEMMs);
#: its other kernels (``winogradForwardData4x4``, ``im2col``) only transform data
_CONV_GEMM_RE = re.compile(_GEMM_KERNEL, re.IGNORECASE)
#: cuDNN's Winograd kernels name their output tile: F(m x m, 3 x 3) multiplies (m+2)^2 per m^2 outputs where
#: the direct convolution multiplies 9·m^2 (Lavin & Gray, "Fast Algorithms for Convolutional Neural
#: Networks", CVPR 2016): the executed FLOPs are (m+2)^2 / (9·m^2) of the model's
_WINOGRAD_TILE_RE = re.compile(r"winograd\w*?(\d)x\1", re.IGNORECASE)


@per_trace
def kernel_work(trace: Trace) -> pd.DataFrame:
    """Work of every kernel: its launching op's work shared out by duration (module docstring).

    Returns
    -------
    pandas.DataFrame
        One row per kernel event with a modelled launching op: ``event`` (row in ``trace.events``),
        ``name``, ``dur_ns``, ``op_event`` (the modelled op's row), ``op_name``, ``input_dims``,
        ``flops``, ``bytes`` (shares; they sum to the op's work, FLOPs times the executed fraction for a
        Winograd convolution; ``bytes`` is CUPTI's counted DRAM traffic where the trace has it,
        :func:`nbprof.analysis.kernel_counters.measured_dram_bytes`), ``kind``, ``dtype``, ``step``,
        ``bytes_source`` (``counted`` or ``model``).
    """
    ev = trace.events
    cols = ["event", "name", "dur_ns", "op_event", "op_name", "input_dims", "flops", "bytes", "kind", "dtype",
            "step", "bytes_source"]
    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    w = op_work(trace)
    kmask = pred.is_kernel(ev)
    kidx = np.flatnonzero(kmask & pred.is_device(ev))
    if not len(w) or not len(kidx):
        return empty
    tree = host_call_tree(trace)
    tev = tree["event"].to_numpy()
    parent = tree["parent"].to_numpy()
    n = len(tev)
    # nearest modelled op (self or ancestor) of every tree row
    wrow = np.full(n, -1, dtype=np.int64)
    wrow[w["tree"].to_numpy()] = np.arange(len(w))
    owner = wrow.copy()
    anc = parent.copy()
    while True:
        need = (owner < 0) & (anc >= 0)
        if not need.any():
            break
        owner[need] = wrow[anc[need]]
        anc = np.where(need, parent[np.clip(anc, 0, None)], -1)
    ext = ev["external_id"].to_numpy()
    host_ext = ext[tev]
    # innermost tree row carrying each External id (cpu_op rows): the last one in tree order wins
    ok = id_present(host_ext)
    ext_to_row = pd.Series(np.flatnonzero(ok), index=host_ext[ok])
    ext_to_row = ext_to_row[~ext_to_row.index.duplicated(keep="last")]
    kext = ext[kidx]
    row = ext_to_row.reindex(kext).to_numpy()
    # a CUDA-graph replay's kernels: the operator that captured them (nbprof.trace.graph_replay)
    rpos = replay_positions(trace, kidx, tev)
    row = np.where(rpos >= 0, rpos, row)
    have = ~np.isnan(row)
    kidx, row = kidx[have], row[have].astype(np.int64)
    own = owner[row]
    keep = own >= 0
    kidx, own = kidx[keep], own[keep]
    if not len(kidx):
        return empty
    kname = ev["name"].astype(object).to_numpy()[kidx]
    dur = ev["dur_ns"].to_numpy()[kidx].astype(np.float64)
    wk = w["kind"].astype(object).to_numpy()[own]
    match = np.array([bool(_KIND_KERNEL_RE[k].search(str(nm))) if k in _KIND_KERNEL_RE else True
                      for k, nm in zip(wk, kname, strict=True)])
    conv_gemm = np.array([k == "conv" and bool(_CONV_GEMM_RE.search(str(nm))) for k, nm in zip(wk, kname, strict=True)])
    tile = [_WINOGRAD_TILE_RE.search(str(nm)) if k == "conv" else None for k, nm in zip(wk, kname, strict=True)]
    wino = np.array([(int(m.group(1)) + 2) ** 2 / (9 * int(m.group(1)) ** 2) if m else np.nan for m in tile])
    # one execution of an op = its kernels, or one CUDA-graph replay of the kernels it captured: each gets the op's work
    execution = pd.factorize(pd.MultiIndex.from_arrays([own, replay_launches(trace, kidx)]))[0]
    frame = pd.DataFrame({"own": execution, "dur": np.maximum(dur, 1.0), "match": match, "cg": conv_gemm,
                          "wino": wino})
    has_cg = frame.groupby("own")["cg"].transform("any").to_numpy()
    match = np.where(has_cg, conv_gemm, match)  # a conv with GEMM kernels: FLOPs to those only
    frame["match"] = match
    # executed FLOPs of an op whose kernels are Winograd (the smallest tile's factor; 1 otherwise)
    factor = frame.groupby("own")["wino"].transform("min").fillna(1.0).to_numpy()
    any_match = frame.groupby("own")["match"].transform("any").to_numpy()
    fl_share_w = np.where(any_match, np.where(match, frame["dur"], 0.0), frame["dur"])
    frame["fw"] = fl_share_w
    tot_d = frame.groupby("own")["dur"].transform("sum").to_numpy()
    tot_f = frame.groupby("own")["fw"].transform("sum").to_numpy()
    op_fl = w["flops"].to_numpy()[own]
    op_by = w["bytes"].to_numpy()[own]
    steps = ev["step"].to_numpy()[kidx] if "step" in ev else np.full(len(kidx), -1)
    nbytes = op_by * frame["dur"].to_numpy() / tot_d
    # CUPTI's counted DRAM traffic replaces the modelled bytes where the trace has it (analysis.kernel_counters)
    counted = measured_dram_bytes(trace).reindex(kidx).to_numpy(np.float64)
    has = np.isfinite(counted)
    return pd.DataFrame({  # text columns as categoricals taken by code (no per-row strings)
        "event": kidx, "name": ev["name"].array.take(kidx), "dur_ns": ev["dur_ns"].to_numpy()[kidx],
        "op_event": w["event"].to_numpy()[own], "op_name": w["name"].array.take(own),
        "input_dims": w["input_dims"].array.take(own),
        "flops": op_fl * factor * fl_share_w / tot_f, "bytes": np.where(has, counted, nbytes),
        "kind": w["kind"].array.take(own), "dtype": w["dtype"].array.take(own), "step": steps,
        "bytes_source": np.where(has, "counted", "model").astype(object),
    })
