"""torch.compile kernels: each Inductor kernel -> its launch, its compiled region and graph -> the source line.

What a ``torch.compile``d call leaves in a Kineto trace (torch 2.x; the same on CPU and GPU):
``Torch-Compiled Region: <frame>/<recompile>`` (Dynamo's frame; absent in a backward) > ``CompiledFunction`` (AOT
Autograd's forward; ``CompiledFunctionBackward`` on the autograd thread) > ``## Call CompiledFxGraph <hash> ##``
(Inductor's compiled graph, keyed by its FX-graph cache hash) > per generated kernel a host op named after it
(Triton: ``triton_poi_fused_add_cos_sin_0``, whose launch carries the buffers as ``Input Dims``; CPU with
``torch._inductor.config.cpp.enable_kernel_profile``: ``graph_0_cpp_fused_..._0``, which *is* the kernel's run) and
extern kernels as ordinary ``aten::`` ops. On a GPU the device kernel has the Inductor name and the launching op's
External id.

:func:`compiled_kernels` maps every Inductor kernel (name parsed by :func:`nbprof.analysis.efficiency.inductor.
parse_kernel_name`: backend, kind, fused aten ops) to its launching op (``kernels.kernel_operators``, graph replays
included), the enclosing compiled region, ``CompiledFunction(Backward)`` and FX graph, the source line where the trace
tells it (the innermost user-code Python frame around the region, from ``with_stack``'s Python events, else the
region's ``Call stack``), and its work model with the stated range (``inductor_work``). Inductor's output-code file
(``kernel_file`` of the launch) is not kept by the loader; the trace's frames are the source it has.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace import schema
from ..trace.ids import present as id_present
from ..trace.model import Trace
from ._memo import per_trace
from .efficiency.inductor import inductor_work, parse_kernel_name
from .efficiency.work_models import DTYPE_BYTES, _parse, _tensors
from .kernels import kernel_operators
from .modules import MODULE_PREFIX
from .operators import host_call_tree

__all__ = ["COMPILED_COLUMNS", "REGION_PREFIX", "compiled_kernels"]

#: Dynamo's name of a compiled frame's host range.
REGION_PREFIX = "Torch-Compiled Region"
_FX_PREFIX = "## Call CompiledFxGraph "
#: A Python tracer frame of a source line: ``path/file.py(41): step``.
_SOURCE_RE = re.compile(r"^.+\.py\(\d+\): ")
_AOT_NAMES = ("CompiledFunction", "CompiledFunctionBackward")
#: Python frames of these packages are not the user's source line.
_LIB_MARKERS = ("/torch/", "/site-packages/", "/dist-packages/", "<built-in", "torch/nn/modules", "/lib/python3")
COMPILED_COLUMNS = ("event", "name", "backend", "kind", "fused_ops", "dur_ns", "launch_event", "region",
                    "compiled_function", "fx_graph", "module", "source", "flops", "flops_low", "bytes", "bytes_high")


def _empty() -> pd.DataFrame:
    ints = ("event", "dur_ns", "launch_event")
    floats = ("flops", "flops_low", "bytes", "bytes_high")
    return pd.DataFrame({c: pd.Series(dtype="int64" if c in ints else "float64" if c in floats else object)
                         for c in COMPILED_COLUMNS})


def _user_frame(name: str) -> bool:
    return not name.startswith(("torch/", "<")) and not any(m in name for m in _LIB_MARKERS)


@per_trace
def compiled_kernels(trace: Trace) -> pd.DataFrame:
    """Every Inductor kernel run of the trace with its compiled region, graph, source line and work.

    Returns
    -------
    pandas.DataFrame
        One row per Inductor kernel run (a device kernel with an Inductor name; on a CPU trace, the host op of a
        ``cpp_fused`` kernel), in events order: ``event`` (row in ``trace.events``), ``name``, ``backend`` (triton /
        cpp), ``kind`` (pointwise, reduction, persistent_reduction, template, foreach, cpp), ``fused_ops`` (the aten
        ops the name lists, comma-separated), ``dur_ns`` (int64 ns), ``launch_event`` (row of the launching host op,
        -1 if none), ``region`` (the enclosing ``Torch-Compiled Region: f/r`` name; a backward kernel's is its
        forward's, the ``CompiledFunction`` with the same autograd Sequence number; '' if none),
        ``compiled_function`` (``CompiledFunction`` / ``CompiledFunctionBackward`` or ''), ``fx_graph`` (the FX
        graph's hash, ''), ``module`` (the innermost ``nn.Module`` frame around the region, e.g. ``Block_3``, ''),
        ``source`` (the innermost user-code Python frame around the region, e.g.
        ``train.py(41): step``, else the region's first ``Call stack`` frame, else ''), ``flops``, ``flops_low``,
        ``bytes``, ``bytes_high`` (float64 FLOP / bytes of the launch's recorded buffers, NaN without shapes; the
        range is the model's stated uncertainty, :mod:`nbprof.analysis.efficiency.inductor`). Empty (with these
        columns) when the trace ran no Inductor kernel.
    """
    ev = trace.events
    names = ev["name"].astype(object).to_numpy()
    is_ind = pred.name_mask(ev["name"], lambda s: parse_kernel_name(s) is not None)
    dev = np.flatnonzero(is_ind & pred.is_kernel(ev))
    if len(dev):
        ko = kernel_operators(trace).set_index("event")["op_event"]
        rows, launch = dev, ko.reindex(dev).fillna(-1).to_numpy(np.int64)
    else:  # CPU: the profiled cpp kernel is a host op, its own launch
        rows = np.flatnonzero(is_ind & pred.is_host_op(ev))
        launch = rows.copy()
    if not len(rows):
        return _empty()
    tree = host_call_tree(trace)
    tev = tree["event"].to_numpy()
    parent = tree["parent"].to_numpy()
    tnames = names[tev]
    tcat = tree["cat"].astype(str).to_numpy()
    pos = pd.Series(np.arange(len(tev)), index=tev)
    pos = pos[~pos.index.duplicated()]
    stacks = ev["call_stack"].astype(object).to_numpy()
    out: dict[str, list[object]] = {c: [] for c in COMPILED_COLUMNS}
    dims, types = ev["input_dims"].astype(object).to_numpy(), ev["input_types"].astype(object).to_numpy()
    def ancestry(p: int) -> dict[str, str | int]:
        """region, compiled_function (+ its tree row), fx_graph, module, source above tree row ``p``."""
        a: dict[str, str | int] = {"region": "", "aot": "", "aot_row": -1, "fx": "", "module": "", "src": ""}
        while p >= 0:
            nm = str(tnames[p])
            if not a["fx"] and nm.startswith(_FX_PREFIX):
                a["fx"] = nm[len(_FX_PREFIX):].strip(" #")
            elif not a["aot"] and nm in _AOT_NAMES:
                a["aot"], a["aot_row"] = nm, int(tev[p])
            elif not a["region"] and nm.startswith(REGION_PREFIX):
                a["region"] = nm
                cs = stacks[tev[p]]
                if isinstance(cs, str) and cs:
                    a["src"] = next((f for f in cs.split(";") if _SOURCE_RE.match(f) and _user_frame(f)), "")
            elif a["region"] and tcat[p] == schema.PYTHON_FUNCTION:
                if not a["module"] and nm.startswith(MODULE_PREFIX):
                    a["module"] = nm[len(MODULE_PREFIX):]
                elif _SOURCE_RE.match(nm) and _user_frame(nm):
                    a["src"] = nm
                    break
            p = int(parent[p])
        return a

    # a backward (CompiledFunctionBackward, autograd thread) has no region of its own: its forward's, found by the
    # autograd Sequence number the two share
    seq = ev["seq"].to_numpy()
    fwd_rows = np.flatnonzero(pred.name_mask(ev["name"], lambda n: n == "CompiledFunction") & id_present(seq))
    fwd_by_seq = pd.Series(fwd_rows, index=seq[fwd_rows])
    fwd_by_seq = fwd_by_seq[~fwd_by_seq.index.duplicated()]
    for r, lr in zip(rows.tolist(), launch.tolist(), strict=True):
        k = parse_kernel_name(str(names[r]))
        assert k is not None
        a = ancestry(int(pos.get(lr, -1)) if lr >= 0 else -1)
        if not a["region"] and a["aot"] == "CompiledFunctionBackward" and int(seq[int(a["aot_row"])]) in fwd_by_seq:
            f = ancestry(int(pos.get(int(fwd_by_seq[int(seq[int(a["aot_row"])])]), -1)))
            a.update(region=f["region"], module=f["module"], src=f["src"])
        region, aot, fx, module, src = (str(a[x]) for x in ("region", "aot", "fx", "module", "src"))
        w = None
        if lr >= 0:
            ts = _tensors(_parse(dims[lr]), _parse(types[lr]))
            w = inductor_work(str(names[r]), [(int(np.prod(s)) if s else 1, int(np.prod(s) if s else 1) *
                                               DTYPE_BYTES.get(t, 4)) for s, t in ts])
        for c, v in (("event", r), ("name", str(names[r])), ("backend", k.backend), ("kind", k.kind),
                     ("fused_ops", ",".join(k.fused_ops)), ("dur_ns", int(ev["dur_ns"].iat[r])), ("launch_event", lr),
                     ("region", region), ("compiled_function", aot), ("fx_graph", fx), ("module", module),
                     ("source", src),
                     ("flops", w.flops if w else np.nan), ("flops_low", w.flops_low if w else np.nan),
                     ("bytes", w.bytes if w else np.nan), ("bytes_high", w.bytes_high if w else np.nan)):
            out[c].append(v)
    df = pd.DataFrame(out)
    for c in ("event", "dur_ns", "launch_event"):
        df[c] = df[c].astype(np.int64)
    return df
