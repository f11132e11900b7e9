"""Which device ops an operator launches: its kernel sequences and the delay from the op to its first launch.

Both analyses stand on the two links nbprof already has, so that there is one definition of each:

* *launched by*: a device op (kernel, memcpy, memset) belongs to the host event that launched it, through its
  ``External id`` or else the op around the runtime call of its correlation id
  (:mod:`nbprof.analysis.operators`, torch's own attribution), and to every op above that one in the host
  call tree (:func:`~nbprof.analysis.operators.host_call_tree`);
* *runtime delay*: device-op start - runtime-call start, :func:`nbprof.analysis.launch.launch_stats`'s
  ``launch_delay_ns``.

Peer: HTA (facebookresearch/HolisticTraceAnalysis) 0.5.0, ``hta/analyzers/cuda_kernel_analysis.py``
``get_frequent_cuda_kernel_sequences`` and ``get_aten_op_kernels_and_delay``; checked against its
``tests/test_trace_analysis.py`` in ``tests/peers/test_peer_hta_analyses.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..trace import schema
from ..trace.ids import present as id_present
from ..trace.model import Trace
from .launch import launch_stats
from .operators import _device_owner, _host_tree

__all__ = ["frequent_kernel_sequences", "aten_op_kernels"]

_SEQ_COLUMNS = ("pattern", "operator", "kernels", "count", "device_ns", "host_ns")
_ATEN_COLUMNS = ("aten_op_name", "kernel_sequence", "occurrence_count", "avg_aten_op_launch_delay_ns",
                 "avg_runtime_delay_ns")


def _names(t: dict[str, Any]) -> np.ndarray:
    names: np.ndarray = np.asarray(t["name_labels"], dtype=object)[t["name_codes"]]
    return names


def frequent_kernel_sequences(trace: Trace, operator: str, *, min_pattern_len: int = 3) -> pd.DataFrame:
    """The device-op sequences launched under the operators whose name contains ``operator``, by frequency.

    The roots are the host events whose name contains ``operator`` (a substring, as HTA matches it) at the
    smallest call-tree depth any of them has (so a nested match is not counted twice) that launched at least
    ``min_pattern_len`` device ops in their subtree. Each root's pattern is its name followed by the names of
    those device ops in device start order.

    Parameters
    ----------
    trace : nbprof.Trace
    operator : str
        Part of the operator name, e.g. ``"aten::linear"``.
    min_pattern_len : int, default 3
        Fewest device ops a root must launch (HTA's ``min_pattern_len``, compared with its ``num_kernels``).

    Returns
    -------
    pandas.DataFrame
        One row per distinct pattern: ``pattern`` (the names joined with ``|``, HTA's form), ``operator`` (the
        root's name), ``kernels`` (tuple of device-op names), ``count`` (roots with this pattern),
        ``device_ns`` (sum of those device ops' durations over the roots, ns: HTA's "GPU kernel duration"),
        ``host_ns`` (sum of the roots' durations, ns: HTA's "CPU op duration"). Sorted by ``count``
        descending, then ``pattern``. Empty (these columns) when no root qualifies (HTA: an empty frame).

    Notes
    -----
    HTA's histogram and the trace it writes with the top patterns overlaid are not produced (viewers read
    this frame). HTA rounds each event to whole µs before summing; nbprof sums the file's ns. Names are the
    call tree's (torch's display names: every ``ProfilerStep#N`` is ``ProfilerStep*``, so the steps share
    one pattern where HTA has one per step).
    """
    t = _host_tree(trace, python_functions=True)
    names = _names(t)
    cand = np.flatnonzero(np.array([operator in str(n) for n in names], dtype=bool)) if operator else np.zeros(0, int)
    if not len(cand):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in _SEQ_COLUMNS})
    roots = cand[t["depth"][cand] == t["depth"][cand].min()]
    dev, owner = _device_owner(trace, t)
    ok = owner >= 0
    owner, dts, ddur = owner[ok], dev["ts_ns"].to_numpy(np.int64)[ok], dev["dur_ns"].to_numpy(np.int64)[ok]
    dname = dev["name"].astype(object).to_numpy()[ok]
    # roots at one depth do not nest: each device op's root is the last root at or before its owner row
    # whose subtree [root, last] holds that row
    i = np.searchsorted(roots, owner, side="right") - 1
    hit = (i >= 0) & (owner <= t["last"][roots[np.clip(i, 0, None)]])
    frame = pd.DataFrame({"root": roots[i[hit]], "ts": dts[hit], "dur": ddur[hit], "name": dname[hit]})
    frame = frame.sort_values(["root", "ts"], kind="stable")
    rows: dict[tuple[str, ...], list[int]] = {}
    for root, g in frame.groupby("root", sort=False):
        if len(g) < min_pattern_len:
            continue
        key = (str(names[root]), *map(str, g["name"]))
        acc = rows.setdefault(key, [0, 0, 0])
        acc[0] += 1
        acc[1] += int(g["dur"].sum())
        acc[2] += int(t["dur_ns"][root])
    out = pd.DataFrame({
        "pattern": ["|".join(k) for k in rows], "operator": [k[0] for k in rows], "kernels": [k[1:] for k in rows],
        "count": np.array([v[0] for v in rows.values()], dtype=np.int64),
        "device_ns": np.array([v[1] for v in rows.values()], dtype=np.int64),
        "host_ns": np.array([v[2] for v in rows.values()], dtype=np.int64),
    }, columns=list(_SEQ_COLUMNS))
    return out.sort_values(["count", "pattern"], ascending=[False, True], kind="stable").reset_index(drop=True)


def aten_op_kernels(trace: Trace) -> pd.DataFrame:
    """Per ATen operator and the device ops it launches: how often, and how long after the op the launch came.

    Each runtime launch call (``cudaLaunchKernel``, MTIA's runtime calls ...) with a device op belongs to the
    innermost ``aten::`` operator around it in the host call tree. For each such operator instance: its
    ``kernel_sequence`` (its device ops' names in launch order, joined by ``" -> "``), its ATen launch delay
    (first launch call start - op start) and its runtime delay (the first device op's start - that call's
    start: ``launch_stats``' ``launch_delay_ns``).

    Parameters
    ----------
    trace : nbprof.Trace

    Returns
    -------
    pandas.DataFrame
        One row per (``aten_op_name``, ``kernel_sequence``): ``occurrence_count`` (operator instances),
        ``avg_aten_op_launch_delay_ns`` and ``avg_runtime_delay_ns`` (means over the instances, ns, float64).
        Sorted by ``occurrence_count`` then ``avg_aten_op_launch_delay_ns``, both descending. Empty (these
        columns) without launches under an ATen op.

    Notes
    -----
    HTA 0.5.0 ``get_aten_op_kernels_and_delay`` takes the latest-starting ``aten::`` event on *any* thread
    whose interval holds the runtime call; nbprof takes the innermost one on the call's own thread (the
    host call tree), as only that one can have launched it (on HTA's MTIA test trace the row HTA's test
    asserts is equal). HTA's ``runtime_delay`` is this ``launch_stats`` quantity on µs-rounded times; HTA
    requires exactly one device op per launch call, nbprof lists each device op of the call.
    """
    t = _host_tree(trace, python_functions=False)
    names = _names(t)
    ev = trace.events
    corr = ev["correlation"].to_numpy()[t["event"]]
    cats = np.asarray(t["cat_labels"], dtype=object)[t["cat_codes"]]
    rt_rows = np.flatnonzero(np.isin(cats, list(schema.RUNTIME_CATEGORIES)) & id_present(corr))
    ls = launch_stats(trace)
    lut = pd.Series(rt_rows, index=corr[rt_rows])
    lut = lut[~lut.index.duplicated(keep="last")]
    row = lut.reindex(ls["correlation"].to_numpy()).to_numpy()
    has = ~np.isnan(row)
    ls = ls[has].assign(row=row[has].astype(np.int64))
    is_aten = np.array([str(n).startswith("aten::") for n in names], dtype=bool)
    op = t["parent"][ls["row"].to_numpy()]
    while True:
        up = (op >= 0) & ~is_aten[np.clip(op, 0, None)]
        if not up.any():
            break
        op[up] = t["parent"][op[up]]
    ls = ls.assign(op=op)[op >= 0].sort_values(["op", "runtime_ts_ns", "ts_ns"], kind="stable")
    if ls.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in _ATEN_COLUMNS[:2] else "float64")
                             for c in _ATEN_COLUMNS})
    g = ls.groupby("op", sort=False)
    first = g.first()
    inst = pd.DataFrame({
        "aten_op_name": names[first.index.to_numpy()].astype(object),
        "kernel_sequence": g["name"].agg(lambda s: " -> ".join(map(str, s))).to_numpy(),
        "op_delay": first["runtime_ts_ns"].to_numpy() - t["ts_ns"][first.index.to_numpy()],
        "runtime_delay": first["launch_delay_ns"].to_numpy(),
    })
    out = inst.groupby(["aten_op_name", "kernel_sequence"], sort=False).agg(
        occurrence_count=("op_delay", "size"), avg_aten_op_launch_delay_ns=("op_delay", "mean"),
        avg_runtime_delay_ns=("runtime_delay", "mean")).reset_index()
    out["occurrence_count"] = out["occurrence_count"].astype(np.int64)
    out = out.astype({"avg_aten_op_launch_delay_ns": "float64", "avg_runtime_delay_ns": "float64"})
    return out.sort_values(["occurrence_count", "avg_aten_op_launch_delay_ns"], ascending=False,
                           kind="stable").reset_index(drop=True)[list(_ATEN_COLUMNS)]
