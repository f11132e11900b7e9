"""Operator summary: what ``torch.profiler``'s ``key_averages()`` reports, computed from a ``Trace``.

The numbers follow PyTorch's own definitions (``torch/autograd/profiler.py``
``_parse_kineto_results`` and ``torch/autograd/profiler_util.py`` ``EventList`` /
``FunctionEvent``, torch 2.13), so a summary of an exported Chrome trace agrees with
``prof.key_averages()`` on the same profile:

- **Which events**: every host event torch turns into a ``FunctionEvent``: ``cpu_op``,
  ``user_annotation`` (``record_function`` ranges, ``ProfilerStep#N``), ``python_function``
  (``with_stack``) and runtime/driver API calls (``cudaLaunchKernel`` ...). torch's utility
  ops (``aten::is_leaf``, ``aten::output_nr``, ``aten::_version``,
  ``profiler::_record_function_enter/_exit``) are left out, as torch does, and
  ``ProfilerStep#N`` is reported as ``ProfilerStep*``. torch 2.11 left ``python_function``
  events out of ``key_averages()``; ``python_functions=False`` reproduces that. torch's rows
  for device activities (one per kernel name) are ``kernels.kernel_summary``.
- **Call tree**: per thread, intervals sorted by (start, -end); an event is a child of the
  innermost open event that fully contains it (``EventList._populate_cpu_children``), with
  1 ns of slack at the end because the exported ``ts`` and ``dur`` are each rounded to the
  ns, so a child that ends with its parent can end 1 ns after it in the file. A
  parent whose only child has the same name is merged with it (``_remove_dup_nodes``), so
  the wrapper pair counts once.
- **Self host time** = total host time (the event's duration) minus the total host time of
  its direct children.
- **Device time**: kernels, memcpys and memsets are attributed to the host event whose
  ``External id`` they carry (the innermost op active at the launch); without one, via the
  correlation id to the runtime call and from it to its enclosing op. Total device time of
  an op includes its children's; self device time is its own.
- **Memory**: a ``[memory]`` record counts towards every host event whose interval
  ``[start, end]`` holds its timestamp (total); self memory is the total minus the
  children's totals, i.e. the allocation lands on the innermost op. CPU memory is
  ``Device Type`` 0/2/5 (CPU, MKLDNN, IDEEP), device memory 1/6/12/20 (CUDA, HIP, XPU,
  PrivateUse1). Records inside no event form a ``[memory]`` row, as in torch.

A vectorised stack sweep builds the tree, so a summary of 10^6 events takes about a second
where ``key_averages()`` takes minutes (``benchmarks/bench_operators.py``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace import schema
from ..trace.graph_replay import replay_positions
from ..trace.ids import present as id_present
from ..trace.model import Trace
from ._call_tree import _pair_rank, _thread_time_order, _tree_links
from ._memo import per_trace

__all__ = ["operator_summary", "operator_memory", "host_call_tree", "event_self_ns", "SORT_KEYS",
           "HOST_TREE_CATEGORIES", "OPERATOR_MEMORY_COLUMNS"]

#: Host categories that become torch ``FunctionEvent`` objects (and so rows of ``key_averages``).
HOST_TREE_CATEGORIES = frozenset(
    {schema.CPU_OP, schema.USER_ANNOTATION, schema.PYTHON_FUNCTION} | set(schema.RUNTIME_CATEGORIES)
)
#: Device activities counted as device time of the launching op.
DEVICE_TIME_CATEGORIES = pred.DEVICE_OP_CATEGORIES

# torch/autograd/profiler_util.py _filter_name (minus the [memory]/[OutOfMemory] records)
_FILTERED_NAMES = frozenset(
    {
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)
# torch/autograd/profiler_util.py _filter_stack_entry
_FILTERED_FRAMES = (
    ("autograd/__init__", "_make_grads"),
    ("autograd/__init__", "backward"),
    ("torch/tensor", "backward"),
    ("_internal/common_utils", "prof_callable"),
    ("_internal/common_utils", "prof_func_call"),
    ("_internal/common_utils", "prof_meth_call"),
)
_CPU_MEM_TYPES = (0, 2, 5)  # c10::DeviceType CPU, MKLDNN, IDEEP
_DEVICE_MEM_TYPES = (1, 6, 12, 20)  # CUDA, HIP, XPU, PrivateUse1

#: torch ``key_averages().table(sort_by=...)`` keys -> ``operator_summary`` columns.
SORT_KEYS: dict[str, str] = {
    "cpu_time": "avg_host_ns",
    "cpu_time_total": "total_host_ns",
    "self_cpu_time_total": "self_host_ns",
    "cuda_time": "avg_device_ns",
    "cuda_time_total": "total_device_ns",
    "self_cuda_time_total": "self_device_ns",
    "device_time": "avg_device_ns",
    "device_time_total": "total_device_ns",
    "self_device_time_total": "self_device_ns",
    "xpu_time": "avg_device_ns",
    "xpu_time_total": "total_device_ns",
    "self_xpu_time_total": "self_device_ns",
    "privateuse1_time_total": "total_device_ns",
    "self_privateuse1_time_total": "self_device_ns",
    "cpu_memory_usage": "host_mem_bytes",
    "self_cpu_memory_usage": "self_host_mem_bytes",
    "cuda_memory_usage": "device_mem_bytes",
    "self_cuda_memory_usage": "self_device_mem_bytes",
    "device_memory_usage": "device_mem_bytes",
    "self_device_memory_usage": "self_device_mem_bytes",
    "xpu_memory_usage": "device_mem_bytes",
    "self_xpu_memory_usage": "self_device_mem_bytes",
    "count": "count",
    "flops": "flops",
}

#: The aggregated columns of ``operator_summary`` (all additive across profiles).
SUMMARY_COLUMNS = [
    "count",
    "self_host_ns",
    "total_host_ns",
    "self_device_ns",
    "total_device_ns",
    "host_mem_bytes",
    "self_host_mem_bytes",
    "device_mem_bytes",
    "self_device_mem_bytes",
    "flops",
]


def _display_names(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Category codes -> names as torch aggregates them (``ProfilerStep#N`` -> ``ProfilerStep*``)."""
    cats = names.cat.categories
    disp = np.array(
        ["ProfilerStep*" if str(c).startswith("ProfilerStep#") else str(c) for c in cats], dtype=object
    )
    codes = names.cat.codes.to_numpy()
    return disp, codes


@per_trace
def host_call_tree(trace: Trace, *, python_functions: bool = True) -> pd.DataFrame:
    """The host call tree torch's profiler builds, one row per host event.

    Parameters
    ----------
    trace : Trace
    python_functions : bool, default True
        Whether ``python_function`` events (``with_stack``) are nodes of the tree; see
        ``operator_summary``.

    Returns
    -------
    pandas.DataFrame
        Sorted by (pid, tid, ts_ns, -end). Columns: ``event`` (row position in
        ``trace.events``), ``name`` (display name, ``ProfilerStep*`` for steps), ``cat``,
        ``pid``, ``tid``, ``ts_ns``, ``dur_ns``, ``parent`` (position of the parent row in
        this frame, -1 for roots), ``effective_parent`` (the parent after torch's merge of
        same-name single-child wrappers), ``merged`` (True for a row torch folds into its
        parent), ``last`` (position of the last row of the subtree), ``depth``.

    Notes
    -----
    Tree rules from ``torch.autograd.profiler_util.EventList._populate_cpu_children`` and
    ``_remove_dup_nodes`` (torch 2.13).
    """
    return _tree_frame(_host_tree(trace, python_functions))


@per_trace
def event_self_ns(trace: Trace, *, python_functions: bool = True) -> np.ndarray:
    """Each event's self time: :func:`operator_summary`'s ``self_host_ns`` (torch's "Self CPU") per event, not summed
    by name.

    Parameters
    ----------
    trace : Trace
    python_functions : bool, default True
        As :func:`operator_summary`: ``python_function`` frames are nodes of the tree (torch 2.13), so an op's
        self time leaves out the Python frames under it; ``False`` (torch 2.11) looks through them to the ops.

    Returns
    -------
    numpy.ndarray
        int64 ns, one per ``trace.events`` row (positional, read-only): a host call-tree row (:func:`host_call_tree`)
        its duration minus the durations of its direct children on its thread (after torch's merge of a same-name
        single-child wrapper, whose folded row gets 0: its time is its parent's); any other row (a kernel, a copy,
        an instant event, a row torch leaves out of the tree) its own duration.
    """
    t = _host_tree(trace, python_functions)
    out: np.ndarray = np.array(trace.events["dur_ns"].to_numpy(np.int64), dtype=np.int64)
    kept = ~t["merged"]
    effp = t["effective_parent"]
    ch = np.flatnonzero(kept & (effp >= 0))
    own = _minus_children(np.asarray(t["dur_ns"], dtype=np.int64), ch, effp[ch])
    out[t["event"]] = np.where(kept, own, 0)
    out.setflags(write=False)
    return out


def _tree_frame(t: dict[str, Any]) -> pd.DataFrame:
    """``_host_tree``'s arrays as ``host_call_tree``'s frame."""
    return pd.DataFrame(
        {
            "event": t["event"],
            # categoricals built from codes (sorted categories, only those used: what
            # pd.Categorical(values) gives, without hashing a million strings)
            "name": _used_categorical(t["name_codes"], t["name_labels"]),
            "cat": _used_categorical(t["cat_codes"], t["cat_labels"]),
            **{k: t[k] for k in ("pid", "tid", "ts_ns", "dur_ns", "parent", "effective_parent", "merged", "last",
                                 "depth")},
        }
    )


def _host_tree(trace: Trace, python_functions: bool) -> dict[str, Any]:
    """``host_call_tree``'s columns as arrays; name and category as codes into sorted labels
    (``name_codes``/``name_labels``, ``cat_codes``/``cat_labels``; labels may include unused values)."""
    ev = trace.events
    cat_cats = np.array([str(c) for c in ev["cat"].cat.categories] + [""], dtype=object)
    cat_codes = ev["cat"].cat.codes.to_numpy()
    wanted = HOST_TREE_CATEGORIES if python_functions else HOST_TREE_CATEGORIES - {schema.PYTHON_FUNCTION}
    cat_ok = np.array([c in wanted for c in cat_cats], dtype=bool)
    is_tree = cat_ok[cat_codes] & (ev["device"].to_numpy() < 0)  # code -1 (no cat) -> "" -> False
    if "ph" in ev:
        ph_x = np.array([str(c) == "X" for c in ev["ph"].cat.categories] + [False], dtype=bool)
        is_tree &= ph_x[ev["ph"].cat.codes.to_numpy()]
    disp, codes = _display_names(ev["name"])
    keep_code = np.array([d not in _FILTERED_NAMES for d in disp] + [False], dtype=bool)
    is_tree &= keep_code[codes]  # code -1 (missing name) -> last entry, False
    idx = np.flatnonzero(is_tree)
    pid = ev["pid"].to_numpy()[idx]
    tid = ev["tid"].to_numpy()[idx]
    ts = ev["ts_ns"].to_numpy()[idx]
    dur = ev["dur_ns"].to_numpy()[idx]
    end = ts + dur
    order = _thread_time_order(pid, tid, ts, end)
    idx, pid, tid, ts, dur, end = idx[order], pid[order], tid[order], ts[order], dur[order], end[order]
    c = codes[idx]
    thread = np.concatenate([[0], np.cumsum((pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1]))]) if len(idx) else pid
    parent, last = _tree_links(thread, ts, end)
    n = len(idx)
    has_p = parent >= 0
    nchild = np.bincount(parent[has_p], minlength=n)
    merged = np.zeros(n, dtype=bool)
    pp = parent[has_p]
    disp_u, disp_id = np.unique(disp, return_inverse=True) if len(disp) else (disp, np.zeros(0, np.int64))
    disp_id = disp_id.ravel()
    merged[has_p] = (disp_id[c[has_p]] == disp_id[c[pp]]) & (nchild[pp] == 1)
    eff = parent.copy()
    while True:
        m = (eff >= 0) & merged[np.clip(eff, 0, None)]
        if not m.any():
            break
        eff[m] = parent[eff[m]]
    # depth: number of ancestors = subtrees [j, last[j]] holding row i, less its own: i + 1 rows
    # open at or before i, less those whose subtree closed before i
    closed = np.cumsum(np.bincount(last + 1, minlength=n + 1)[:n])
    depth = np.arange(n, dtype=np.int64) - closed
    cat_u, cat_id = np.unique(cat_cats, return_inverse=True)
    return {
        "event": idx, "name_codes": disp_id[c], "name_labels": np.asarray(disp_u, dtype=object),
        "cat_codes": cat_id.ravel()[cat_codes[idx]], "cat_labels": np.asarray(cat_u, dtype=object),
        "pid": pid, "tid": tid, "ts_ns": ts, "dur_ns": dur, "parent": parent, "effective_parent": eff,
        "merged": merged, "last": last, "depth": depth,
    }


def _used_categorical(codes: np.ndarray, labels: np.ndarray) -> pd.Categorical:
    """``pd.Categorical.from_codes(codes, labels).remove_unused_categories()`` in O(n) (codes >= 0)."""
    used = np.bincount(codes, minlength=len(labels)) > 0
    remap = np.cumsum(used) - 1
    return pd.Categorical.from_codes(remap[codes].astype(np.int32), labels[used])


def _memory_arrays(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mem = trace.memory
    if mem is None or mem.empty:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    m = mem.sort_values("ts_ns", kind="stable")
    dt = m["device_type"].to_numpy()
    b = m["bytes"].to_numpy().astype(np.int64)
    return (
        m["ts_ns"].to_numpy(),
        np.where(np.isin(dt, _CPU_MEM_TYPES), b, 0),
        np.where(np.isin(dt, _DEVICE_MEM_TYPES), b, 0),
    )


def _device_own_ns(trace: Trace, t: dict[str, Any]) -> np.ndarray:
    """Device ns each tree row (``_host_tree``) launched itself (kernels/memcpy/memset via External id
    or correlation)."""
    own = np.zeros(len(t["event"]), dtype=np.int64)
    dev, target = _device_owner(trace, t)
    # kernels of a merged wrapper row go to the row it is merged into (torch lifts them)
    ok = target >= 0
    rows = target[ok]
    rows = np.where(t["merged"][rows], t["effective_parent"][rows], rows)
    own += np.rint(np.bincount(rows, weights=dev["dur_ns"].to_numpy()[ok], minlength=len(own))).astype(np.int64)
    return own


def _device_owner(trace: Trace, t: dict[str, Any]) -> tuple[pd.DataFrame, np.ndarray]:
    """The device ops (kernels/memcpy/memset) and, for each, the ``_host_tree`` row that launched it (the op
    of its External id, else the op around the runtime call of its correlation id; -1 for none)."""
    ev = trace.events
    dev = ev[pred.is_device_op(ev)]
    target = np.full(len(dev), -1, dtype=np.int64)
    if len(t["event"]) == 0 or dev.empty:
        return dev, target
    dev_ext = dev["external_id"].to_numpy()
    dev_corr = dev["correlation"].to_numpy()
    ev_ext = ev["external_id"].to_numpy()[t["event"]]
    labels = t["cat_labels"]

    def cat_in(cats: Any) -> np.ndarray:
        return np.asarray(np.array([c in cats for c in labels], dtype=bool)[t["cat_codes"]], dtype=bool)

    is_op = cat_in((schema.CPU_OP, schema.USER_ANNOTATION))
    # External id -> op row (the innermost op active at the launch); first occurrence wins
    op_rows = np.flatnonzero(is_op & id_present(ev_ext))
    if len(op_rows) and id_present(dev_ext).any():
        lut = pd.Series(op_rows, index=ev_ext[op_rows])
        lut = lut[~lut.index.duplicated()]
        hit = lut.reindex(dev_ext).to_numpy()
        ok = ~np.isnan(hit) & id_present(dev_ext)
        target[ok] = hit[ok].astype(np.int64)
    # fallback: correlation -> runtime call -> its enclosing op
    miss = target < 0
    if miss.any():
        rt_rows = np.flatnonzero(cat_in(schema.RUNTIME_CATEGORIES))
        rt_corr = ev["correlation"].to_numpy()[t["event"][rt_rows]]
        ok_rt = id_present(rt_corr)
        if ok_rt.any():
            lut = pd.Series(rt_rows[ok_rt], index=rt_corr[ok_rt])
            lut = lut[~lut.index.duplicated()]
            hit = lut.reindex(dev_corr[miss]).to_numpy()
            rows = np.where(np.isnan(hit), -1, hit).astype(np.int64)
            par = t["parent"]
            owner = np.where(rows >= 0, par[np.clip(rows, 0, None)], -1)
            target[miss] = owner
    # a CUDA-graph replay's device ops: the operator that captured them (nbprof.trace.graph_replay)
    pos = replay_positions(trace, np.flatnonzero(pred.is_device_op(ev)), t["event"])
    target = np.where(pos >= 0, pos, target)
    return dev, target


def _python_parents(tree: pd.DataFrame) -> np.ndarray:
    """Per tree row, the innermost enclosing ``python_function`` row (-1 if none).

    Python frames nest among themselves even where a ``record_function`` range opened inside
    one frame outlives it, so the python-only tree is built on its own; any other row gets
    the innermost python frame open at its start on its thread.
    """
    n = len(tree)
    out = np.full(n, -1, dtype=np.int64)
    is_py = (tree["cat"].astype(object) == schema.PYTHON_FUNCTION).to_numpy()
    py = np.flatnonzero(is_py)  # already in (thread, start, -end) order
    if not len(py):
        return out
    pid = tree["pid"].to_numpy()
    tid = tree["tid"].to_numpy()
    ts = tree["ts_ns"].to_numpy()
    end = ts + tree["dur_ns"].to_numpy()
    tkey = _pair_rank(pid, tid)
    ppar, _ = _tree_links(tkey[py], ts[py], end[py])
    out[py] = np.where(ppar >= 0, py[np.clip(ppar, 0, None)], -1)
    rest = np.flatnonzero(~is_py)
    if len(rest):
        # python rows sorted by (thread, start): the last one starting at or before the row
        order_key = tkey[py].astype(np.float64) * 4e18 + ts[py]
        q = tkey[rest].astype(np.float64) * 4e18 + ts[rest]
        k = np.searchsorted(order_key, q, side="right") - 1
        cand = np.where((k >= 0) & (tkey[py][np.clip(k, 0, None)] == tkey[rest]), k, -1)
        ppos = np.where(ppar >= 0, ppar, -1)  # parent as a position in ``py``
        while True:
            live = cand >= 0
            bad = live & (end[py][np.clip(cand, 0, None)] < ts[rest])
            if not bad.any():
                break
            cand[bad] = ppos[cand[bad]]
        out[rest] = np.where(cand >= 0, py[np.clip(cand, 0, None)], -1)
    return out


_BW_PREFIX = "autograd::engine::evaluate_function: "


def _stack_keys(trace: Trace, tree: pd.DataFrame, depth: int) -> np.ndarray:
    """Top ``depth`` frames (innermost first, ``;``-joined) per tree row.

    Frames come from the ``Call stack`` args (``with_stack`` + verbose experimental config),
    else from the enclosing ``python_function`` events. As in torch
    (``EventList._set_backward_stacktraces``), an op inside a backward function (the autograd
    node run by ``autograd::engine::evaluate_function: <node>``) gets the stack of the
    forward op with the node's sequence number on its forward thread.
    """
    n = len(tree)
    ev = trace.events
    rows = tree["event"].to_numpy()
    cs = ev["call_stack"].astype(object).to_numpy()[rows] if "call_stack" in ev else np.full(n, np.nan)
    full = np.empty(n, dtype=object)
    have = pd.notna(cs)
    if have.any():
        cache: dict[str, str] = {}
        for i in np.flatnonzero(have).tolist():
            st = cs[i]
            k = cache.get(st)
            if k is None:
                frames = [f for f in st.split(";") if f and all(not (a in f and b in f) for a, b in _FILTERED_FRAMES)]
                k = ";".join(frames)
                cache[st] = k
            full[i] = k
    rest = np.flatnonzero(~have)
    names = tree["name"].astype(object).to_numpy()
    # name tests once per distinct name (a 1 M-event trace has ~100 of them)
    ncodes, nuniq = pd.factorize(pd.Series(names, dtype=object))
    if len(rest):
        pyp = _python_parents(tree)
        codes, uniq = ncodes, nuniq
        # skip the frames torch filters out (_filter_stack_entry)
        skip_u = np.array([any(a in nm and b in nm for a, b in _FILTERED_FRAMES) for nm in uniq], dtype=bool)
        skip = np.where(codes >= 0, skip_u[np.clip(codes, 0, None)], False) if len(uniq) else np.zeros(n, bool)
        if skip.any():
            while True:
                m = (pyp >= 0) & skip[np.clip(pyp, 0, None)]
                if not m.any():
                    break
                pyp[m] = pyp[pyp[m]]
        # the enclosing frames' name codes, innermost first (-1: none); strings joined once per distinct chain
        frames = []
        cur = pyp[rest]
        for _ in range(max(depth, 1)):
            frames.append(np.where(cur >= 0, codes[np.clip(cur, 0, None)], -1))
            cur = np.where(cur >= 0, pyp[np.clip(cur, 0, None)], -1)
        key = frames[0] + 1
        for f in frames[1:]:  # one int64 id per distinct chain (hash factorize, no sort)
            key = pd.factorize(key.astype(np.int64) * (len(uniq) + 1) + (f + 1))[0]
        key = pd.factorize(key)[0]
        first = np.empty(int(key.max()) + 1 if len(key) else 0, dtype=np.int64)
        first[key] = np.arange(len(key))  # any row of a chain stands for it
        word = [str(u) if isinstance(u, str) else "" for u in uniq]
        joined_u = np.empty(len(first), dtype=object)
        for j, r in enumerate(first.tolist()):
            parts = [word[f[r]] if f[r] >= 0 else "" for f in frames]
            txt = parts[0]
            for w in parts[1:]:
                if w != "":
                    txt = txt + ";" + w
            joined_u[j] = txt
        full[rest] = joined_u[key]
    # backward ops take their forward op's stack
    parent = tree["parent"].to_numpy()
    has_p = parent >= 0
    # a row whose parent is "<_BW_PREFIX><its own name>": tested once per distinct name
    code_of = {nm: i for i, nm in enumerate(nuniq)}
    stripped = np.array([code_of.get(nm[len(_BW_PREFIX):], -2) if isinstance(nm, str) and nm.startswith(_BW_PREFIX)
                         else -2 for nm in nuniq], dtype=np.int64)
    pcode = np.where(has_p, ncodes[np.clip(parent, 0, None)], -1)
    bw_root = has_p & (pcode >= 0) & (ncodes >= 0)
    if len(stripped):
        bw_root &= stripped[np.clip(pcode, 0, None)] == ncodes
    else:
        bw_root[:] = False
    if bw_root.any():
        bwp = np.where(bw_root, np.arange(n), -1)
        dep = tree["depth"].to_numpy()
        for d in range(1, int(dep.max()) + 1):
            lvl = np.flatnonzero((dep == d) & (bwp < 0))
            bwp[lvl] = bwp[parent[lvl]]
        seq = ev["seq"].to_numpy()[rows]
        # torch keys forward stacks by (sequence number, thread) with its internal thread ids,
        # which the trace's 'Fwd thread id' uses too but OS tids do not: key by sequence number
        fwd = pd.DataFrame({"seq": seq, "stack": full})[bwp < 0]
        fwd = fwd.drop_duplicates("seq", keep="first").set_index("seq")["stack"]
        under = np.flatnonzero(bwp >= 0)
        got = fwd.reindex(seq[bwp[under]]).to_numpy()
        full[under] = np.where(pd.isna(got), "", got)
    # the top ``depth`` frames, once per distinct stack (missing values -> "")
    scodes, suniq = pd.factorize(pd.Series(full, dtype=object))
    cut = np.array([";".join(st.split(";")[:depth]) if isinstance(st, str) and st else "" for st in suniq],
                   dtype=object)
    if not len(cut):
        return np.full(n, "", dtype=object)
    return np.where(scodes >= 0, cut[np.clip(scodes, 0, None)], "").astype(object)


@per_trace
def operator_summary(
    trace: Trace, *, group_by: str = "name", stack_depth: int = 5, python_functions: bool = True
) -> pd.DataFrame:
    """Per-operator statistics, as ``torch.profiler`` ``key_averages()`` computes them.

    Parameters
    ----------
    trace : Trace
        A loaded trace (``nbprof.load``).
    group_by : {"name", "shapes", "stack"}, default "name"
        ``"shapes"`` adds the ``input_dims`` key (``key_averages(group_by_input_shape=True)``;
        needs ``record_shapes``; JSON text of the argument shapes with TensorList arguments
        as ``[]``, as torch keys them); ``"stack"`` adds a ``stack`` key of the top ``stack_depth``
        frames, innermost first, ``;``-joined (``key_averages(group_by_stack_n=N)``; needs
        ``with_stack``; taken from the ``Call stack`` args, else from the enclosing
        ``python_function`` events).
    stack_depth : int, default 5
    python_functions : bool, default True
        Treat ``python_function`` events (recorded with ``with_stack``) as operators, with
        their own rows and as parents of the ops they call, as torch 2.13's
        ``key_averages()`` does. ``False`` reproduces torch 2.11, whose ``key_averages()``
        leaves them out (measured on the same workload: ``tests/test_analysis_operators.py``).

    Returns
    -------
    pandas.DataFrame
        One row per key, sorted by ``total_host_ns`` descending. Columns: ``name`` (plus
        ``input_dims`` / ``stack`` when grouped so), ``cat`` (cpu_op, user_annotation,
        python_function, cuda_runtime ...; ``memory`` for the ``[memory]`` row),
        ``count``, ``self_host_ns``, ``total_host_ns``, ``self_device_ns``,
        ``total_device_ns`` (int64 ns), ``host_mem_bytes``, ``self_host_mem_bytes``,
        ``device_mem_bytes``, ``self_device_mem_bytes`` (int64 bytes, net of frees),
        ``flops`` (float, NaN when never recorded), ``avg_host_ns``, ``avg_device_ns``
        (float ns per call).

    Raises
    ------
    ValueError
        For an unknown ``group_by``.

    Notes
    -----
    Definitions: module docstring (torch 2.13 ``_parse_kineto_results``, ``EventList``,
    ``FunctionEvent``). One documented difference: where torch merges a same-name wrapper
    with its only child it replaces the wrapper's own kernels by the child's; nbprof adds
    them (no device time is lost).
    """
    if group_by not in ("name", "shapes", "stack"):
        msg = f"group_by must be 'name', 'shapes' or 'stack', not {group_by!r}"
        raise ValueError(msg)
    t = _host_tree(trace, python_functions)
    n = len(t["event"])
    kept = ~t["merged"]
    effp = t["effective_parent"]
    ts = t["ts_ns"]
    dur = t["dur_ns"]
    end = ts + dur
    last = t["last"]
    ch = np.flatnonzero(kept & (effp >= 0))
    ch_parent = effp[ch]

    def minus_children(total: np.ndarray) -> np.ndarray:
        return _minus_children(total, ch, ch_parent)

    self_host = minus_children(dur)
    # device time: own (plus lifted from merged wrappers), totals over the subtree range
    own_dev = _device_own_ns(trace, t)
    cs = np.concatenate([[0], np.cumsum(own_dev)])
    total_dev = cs[last + 1] - cs[np.arange(n)]
    self_dev = minus_children(total_dev)
    m_ts, m_cpu, m_dev = _memory_arrays(trace)
    host_mem, self_host_mem = _record_sums(m_ts, m_cpu, ts, end, ch, ch_parent)
    dev_mem, self_dev_mem = _record_sums(m_ts, m_dev, ts, end, ch, ch_parent)
    ev = trace.events
    flops = ev["flops"].to_numpy()[t["event"]] if "flops" in ev else np.full(n, np.nan)
    values = {
        "count": np.ones(n, dtype=np.int64),
        "self_host_ns": self_host,
        "total_host_ns": dur,
        "self_device_ns": self_dev,
        "total_device_ns": total_dev,
        "host_mem_bytes": host_mem,
        "self_host_mem_bytes": self_host_mem,
        "device_mem_bytes": dev_mem,
        "self_device_mem_bytes": self_dev_mem,
        "flops": flops,
    }
    # group keys as (codes, labels): name and category codes of the tree
    key_cols = {
        "name": (t["name_codes"], t["name_labels"]),
        "cat": (t["cat_codes"], t["cat_labels"]),
    }
    if group_by == "shapes":
        if "input_dims" in ev:
            codes = ev["input_dims"].cat.codes.to_numpy()[t["event"]]
            keys_text = np.array([_torch_shapes_key(c) for c in ev["input_dims"].cat.categories] + ["[]"], dtype=object)
            key_cols["input_dims"] = pd.factorize(keys_text[codes])  # code -1 (no Input Dims) -> "[]"
        else:
            key_cols["input_dims"] = (np.zeros(n, dtype=np.int64), np.array(["[]"], dtype=object))
    elif group_by == "stack":
        if python_functions:
            stack = _stack_keys(trace, _tree_frame(t), stack_depth)
        else:  # frames still come from the python_function events
            full = host_call_tree(trace)
            by_event = pd.Series(_stack_keys(trace, full, stack_depth), index=full["event"].to_numpy())
            stack = by_event.reindex(t["event"]).fillna("").to_numpy()
        key_cols["stack"] = pd.factorize(np.asarray(stack, dtype=object))
    keys = list(key_cols)
    frame = _group_sums(key_cols, values, kept)

    # [memory] records inside no host event (torch: top-level memory events)
    if len(m_ts):
        covered = _covered(m_ts, ts, end)
        loose = ~covered
        if loose.any():
            row = {
                "name": "[memory]",
                "cat": "memory",
                "count": int(loose.sum()),
                "self_host_ns": 0,
                "total_host_ns": 0,
                "self_device_ns": 0,
                "total_device_ns": 0,
                "host_mem_bytes": int(m_cpu[loose].sum()),
                "self_host_mem_bytes": int(m_cpu[loose].sum()),
                "device_mem_bytes": int(m_dev[loose].sum()),
                "self_device_mem_bytes": int(m_dev[loose].sum()),
                "flops": np.nan,
            }
            if group_by == "shapes":
                row["input_dims"] = "[]"
            elif group_by == "stack":
                row["stack"] = ""
            frame = pd.concat([frame, pd.DataFrame([row])], ignore_index=True)

    if frame.empty:
        out = pd.DataFrame({k: pd.Series(dtype=object) for k in keys})
        for c in SUMMARY_COLUMNS:
            out[c] = pd.Series(dtype="float64" if c == "flops" else "int64")
    else:
        out = frame
    for c in SUMMARY_COLUMNS:
        if c != "flops":
            out[c] = out[c].astype(np.int64)
    out["avg_host_ns"] = out["total_host_ns"] / out["count"].clip(lower=1)
    out["avg_device_ns"] = out["total_device_ns"] / out["count"].clip(lower=1)
    out = out.sort_values(["total_host_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return out[[*keys[:1], *keys[2:], "cat", *SUMMARY_COLUMNS, "avg_host_ns", "avg_device_ns"]]


def _minus_children(total: np.ndarray, ch: np.ndarray, ch_parent: np.ndarray) -> np.ndarray:
    """Self value: each tree row's ``total`` minus its kept children's (``ch`` rows, parents ``ch_parent``)."""
    # bincount sums in float64: exact for |sums| < 2**53 (104 days in ns, 8 PiB)
    sub = np.bincount(ch_parent, weights=total[ch], minlength=len(total))
    return np.asarray(total - np.rint(sub).astype(total.dtype))


def _record_sums(m_ts: np.ndarray, values: np.ndarray, ts: np.ndarray, end: np.ndarray, ch: np.ndarray,
                 ch_parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(total, self) per host-tree row of one value per ``[memory]`` record (``m_ts`` sorted): total sums the
    records with ts in the row's [start, end], any thread (torch ``MemRecordsAcc.in_interval``); self is
    the total minus the children's totals, so a record lands on the innermost op."""
    lo = np.searchsorted(m_ts, ts, side="left")
    hi = np.searchsorted(m_ts, end, side="right")
    cs = np.concatenate([[0], np.cumsum(values)])
    total = cs[hi] - cs[lo]
    return total, _minus_children(total, ch, ch_parent)


#: Columns of :func:`operator_memory`, after its keys
OPERATOR_MEMORY_COLUMNS = ("calls", "self_increase_bytes", "self_alloc_bytes", "self_allocs", "increase_bytes",
                           "alloc_bytes", "allocs")


def operator_memory(trace: Trace) -> pd.DataFrame:
    """The memory view's operator table: per device and operator, what its calls allocated and freed.

    Returns
    -------
    pandas.DataFrame
        One row per (``device_type``, ``device``, ``name``) with at least one ``[memory]`` record of that
        device inside a call (c10 ``DeviceType``: 0 CPU, 1 CUDA, ...; ``device`` -1 for CPU): ``calls``
        (all calls of the operator), ``increase_bytes`` (allocated minus freed inside the calls, bytes;
        summed over the devices of one kind it is ``operator_summary``'s ``host_mem_bytes`` /
        ``device_mem_bytes``), ``alloc_bytes`` (bytes allocated, frees not subtracted), ``allocs``
        (number of allocations), and their self versions ``self_increase_bytes``, ``self_alloc_bytes``,
        ``self_allocs`` (the children's records left out).
        Sorted by device then ``increase_bytes`` descending. Empty without ``[memory]`` records.

    Notes
    -----
    torch-tb-profiler 0.4.3's Memory view (``profiler/memory_parser.py`` ``get_memory_statistics``: self
    increase size, self allocation size / count, increase size, allocation size / count, calls), per
    ``CPU``/``GPU<n>``; the records are attributed as in :func:`operator_summary` (torch's rule: a record
    inside calls on two threads counts for both). Checked
    against its ``test_memory_view`` in ``tests/peers/test_peer_tb_plugin_views.py``.
    """
    keys = ["device_type", "device", "name"]
    mem = trace.memory
    if mem is None or mem.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else "int64")
                             for c in (*keys, *OPERATOR_MEMORY_COLUMNS)})
    t = _host_tree(trace, True)
    kept = ~t["merged"]
    ts, end = t["ts_ns"], t["ts_ns"] + t["dur_ns"]
    ch = np.flatnonzero(kept & (t["effective_parent"] >= 0))
    ch_parent = t["effective_parent"][ch]
    m = mem.sort_values("ts_ns", kind="stable")
    m_ts = m["ts_ns"].to_numpy()
    b = m["bytes"].to_numpy().astype(np.int64)
    codes, labels = t["name_codes"], t["name_labels"]
    calls = np.bincount(codes[kept], minlength=len(labels))
    frames = []
    for (dt, dev), idx in m.groupby(["device_type", "device"], sort=True).indices.items():
        on = np.zeros(len(m), dtype=np.int64)
        on[idx] = 1
        cols = {}
        for col, v in (("increase_bytes", b * on), ("alloc_bytes", np.where(b > 0, b, 0) * on),
                       ("allocs", (b > 0) * on), ("records", on)):
            total, own = _record_sums(m_ts, v, ts, end, ch, ch_parent)
            cols[col] = np.bincount(codes[kept], weights=total[kept], minlength=len(labels))
            cols["self_" + col] = np.bincount(codes[kept], weights=own[kept], minlength=len(labels))
        has = np.flatnonzero(cols["records"] > 0)
        f = pd.DataFrame({"device_type": int(dt), "device": int(dev), "name": labels[has], "calls": calls[has]})
        for c in OPERATOR_MEMORY_COLUMNS[1:]:
            f[c] = np.rint(cols[c][has]).astype(np.int64)
        frames.append(f.sort_values(["increase_bytes", "name"], ascending=[False, True], kind="stable"))
    out = pd.concat(frames, ignore_index=True)
    out["calls"] = out["calls"].astype(np.int64)
    return out[[*keys, *OPERATOR_MEMORY_COLUMNS]]


def _group_sums(key_cols: dict[str, tuple[np.ndarray, np.ndarray]], values: dict[str, np.ndarray],
                rows: np.ndarray) -> pd.DataFrame:
    """Sum ``values`` over the ``rows`` (mask) grouped by the keys, groups in order of first appearance.

    ``key_cols``: column -> (per-row codes, labels). Integer columns are summed exactly
    (``np.bincount`` in float64 when the sum of magnitudes is below 2**53, else ``np.add.at`` in
    int64); ``flops`` (float) is NaN for a group where it was never recorded (``sum(min_count=1)``).
    """
    key = np.zeros(int(rows.sum()), dtype=np.int64)
    space = 1
    for codes, labels in key_cols.values():
        key = key * (len(labels) + 1) + (codes[rows].astype(np.int64) + 1)  # +1: code -1 (missing) stays distinct
        space *= len(labels) + 1
    cols: dict[str, Any] = {}
    if not len(key):
        return pd.DataFrame({**{k: pd.Series(dtype=object) for k in key_cols},
                             **{c: pd.Series(dtype=v.dtype) for c, v in values.items()}})
    if space > 4 * len(key) + (1 << 20):  # sparse keys: number them by sorting
        key = np.unique(key, return_inverse=True)[1].ravel()
        space = int(key.max()) + 1
    nrow = len(key)
    first = np.full(space, nrow, dtype=np.int64)
    np.minimum.at(first, key, np.arange(nrow))
    present = np.flatnonzero(first < nrow)
    present = present[np.argsort(first[present], kind="stable")]  # groups in order of first appearance
    lead = np.flatnonzero(rows)[first[present]]  # the first row of each group, for its key labels
    for k, (codes, labels) in key_cols.items():
        kc = codes[lead]
        cols[k] = np.where(kc >= 0, labels[np.clip(kc, 0, None)], None)
    # every row's group, the rows left out in an extra one (space): the values are summed as they are
    key_all = np.full(len(rows), space, dtype=np.int64)
    key_all[rows] = key
    for c, v in values.items():
        if v.dtype.kind == "f":
            ok = ~np.isnan(v)
            total = np.bincount(key_all, weights=np.where(ok, v, 0.0), minlength=space + 1)[present]
            cols[c] = np.where(np.bincount(key_all, weights=ok, minlength=space + 1)[present] > 0, total, np.nan)
        elif np.abs(v).sum() < 2**53:  # float64 sums of integers are exact below 2**53
            cols[c] = np.rint(np.bincount(key_all, weights=v, minlength=space + 1)[present]).astype(v.dtype)
        else:  # exact int64 sums for huge totals
            out = np.zeros(space + 1, dtype=v.dtype)
            np.add.at(out, key_all, v)
            cols[c] = out[present]
    return pd.DataFrame(cols)


def _torch_shapes_key(text: str) -> str:
    """'Input Dims' text -> torch's ``input_shapes`` as ``key_averages`` groups them.

    torch records shapes of Tensor arguments only: a TensorList argument (a list of shapes
    in the trace) is ``[]`` in ``FunctionEvent.input_shapes``.
    """
    try:
        dims = json.loads(text)
    except (TypeError, ValueError):
        return str(text)
    if not isinstance(dims, list):
        return str(text)
    out = [[] if isinstance(d, list) and any(isinstance(x, list) for x in d) else d for d in dims]
    return json.dumps(out)


def _covered(points: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """True for each point lying in some closed interval [start, end]."""
    if len(start) == 0:
        return np.zeros(len(points), dtype=bool)
    o = np.argsort(start, kind="stable")
    s = start[o]
    e = np.maximum.accumulate(end[o])
    i = np.searchsorted(s, points, side="right") - 1
    return (i >= 0) & (points <= e[np.clip(i, 0, None)])
