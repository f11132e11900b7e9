"""The nn.Module tree and the Python call tree of a trace recorded with Python frames.

Both read the ``python_function`` events the Python tracer writes (``with_stack=True`` or
``with_modules=True``; nbprof's ``with_modules`` option turns the tracer on). A module call is a frame named
``nn.Module: <Class>_<k>`` (``k``: the k-th instance of that class, torch's ``python_tracer.cpp``).

**Module tree** (:func:`module_tree`), the definitions of torch-tb-profiler 0.4.3's Module view
(``torch_tb_profiler/profiler/module_op.py`` ``_aggregate_modules``; ``node.py`` ``OperatorNode.fill_stats``,
``ModuleNode.fill_stats``, ``get_chilren_self_device_time``; ``op_tree.py`` ``_build_tree_internal``):

- the plugin's host tree holds ``cpu_op`` events, ``ProfilerStep#N`` and ``nccl:``/``gloo:`` annotations and
  the module frames (other Python frames and ``record_function`` ranges are not nodes); per thread an event is
  the child of the innermost node that contains it (nbprof's sweep, ``_call_tree._tree_links``, with 1 ns of
  slack for the separately rounded ``ts``/``dur`` of the file);
- ``host_total_ns`` = sum of the calls' durations; ``host_self_ns`` = that minus the durations of the calls'
  direct children in that tree (outermost operators and child modules);
- device time: kernels, memcpys and memsets go to the operator whose ``External id`` they carry (else the id of
  their runtime call, found by correlation id; the plugin links device op -> runtime by correlation and
  runtime -> operator by External id); ``device_total_ns`` = all device time launched inside the module,
  ``device_self_ns`` = that launched by the module's own operators (not by child modules);
- ``calls`` = the plugin's ``occurences``; ``operators`` = direct ``cpu_op`` children (the plugin's
  ``operators``; ``Optimizer.*``, ``enumerate(DataLoader)#...``, ``DataParallel.forward`` and
  ``DistributedDataParallel.forward`` are not counted, ``node.py`` ``is_operator_node``).

The plugin keys its statistics by module instance (name, ``Python module id``) and draws them at every place of
its hierarchy; nbprof keys a node by its path of instances from the root, so an instance called from two parents
gives two nodes, each with its own calls, whose sum is the plugin's (B200 GPT-OSS trace: one rotary embedding
under 36 attention layers); a child called twice in one parent call (ResNet's ``ReLU``) is one node with both calls
where the plugin lists it twice. Cross-checked against the plugin on ``data/`` and five public corpus traces
(``tests/test_analysis_modules.py``). Backward passes are not module calls (the plugin's view shows the
forward calls only).

**Call tree** (:func:`call_stack`): one node per path of Python frames (parent = innermost enclosing
``python_function`` frame on the same thread; the object address in a built-in's name, ``<built-in method
append of list object at 0x7f..>``, is dropped so that one method is one node), with calls, total host time
and self host time = total minus the direct child frames' totals, clamped at 0 (a child frame that overruns
its parent after rounding); the clamped calls and ns are counted in ``self_clamped_calls`` and in the frame's
``attrs``. ``device_total_ns`` is the device time launched by operators inside the frame.

All times int64 ns.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace import schema
from ..trace.graph_replay import replay_positions
from ..trace.ids import present as id_present
from ..trace.model import Trace
from ._call_tree import _thread_time_order, _tree_links
from ._memo import per_trace

__all__ = ["MODULE_PREFIX", "RECORD_HINT", "has_module_frames", "module_tree", "call_stack", "MODULE_COLUMNS",
           "CALL_STACK_COLUMNS"]

#: the Python tracer's name of a module call (torch ``profiler/python_tracer.cpp``)
MODULE_PREFIX = "nn.Module: "
#: what to do when a trace has no module / Python frames (the option is ``capture.options.ProfileOptions.with_modules``)
RECORD_HINT = ("record Python frames to see them: torch.profiler.profile(with_modules=True, with_stack=True), "
               "nbprof.profile(with_modules=True) or %%torchprof --with-modules")

MODULE_COLUMNS = ["node_id", "parent_id", "depth", "module", "name", "path", "calls", "operators", "host_total_ns",
                  "host_self_ns", "device_total_ns", "device_self_ns"]
CALL_STACK_COLUMNS = ["node_id", "parent_id", "depth", "name", "calls", "host_total_ns", "host_self_ns",
                      "self_clamped_calls", "device_total_ns"]

# CPython's repr of a bound built-in: "<built-in method append of list object at 0x7f..>": one node per method
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>$")

# torch_tb_profiler/profiler/node.py ExcludeOpName and is_operator_node / create_operator_node
_NOT_OPERATORS = ("DataParallel.forward", "DistributedDataParallel.forward")
_COMM_ANNOTATIONS = ("nccl:", "gloo:")


def _names(ev: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    cats = np.array([str(c) for c in ev["name"].cat.categories] + [""], dtype=object)
    return np.asarray(cats[ev["name"].cat.codes.to_numpy()[rows]], dtype=object)


def _python_mask(ev: pd.DataFrame) -> np.ndarray:
    m = (ev["cat"] == schema.PYTHON_FUNCTION).to_numpy() & (ev["device"].to_numpy() < 0)
    if "ph" in ev:
        m &= (ev["ph"] == "X").to_numpy()
    return np.asarray(m, dtype=bool)


def has_module_frames(trace: Trace) -> bool:
    """Whether ``trace`` has ``nn.Module:`` Python frames (what :func:`module_tree` reads)."""
    ev = trace.events
    py = _python_mask(ev)
    if not py.any():
        return False
    return bool(pred.name_mask(ev["name"], lambda s: s.startswith(MODULE_PREFIX))[py].any())


def _nearest(parent: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Per row, the nearest strict ancestor with ``ok`` (-1 if none), by pointer jumping: a candidate that fails
    is replaced by its own candidate (everything skipped on the way failed too)."""
    a: np.ndarray = parent.copy()
    while True:
        bad = np.flatnonzero((a >= 0) & ~ok[np.clip(a, 0, None)])
        if not len(bad):
            return a
        a[bad] = a[a[bad]]


def _sweep(trace: Trace, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The rows in (thread, start, -end) order with their parent and subtree end."""
    ev = trace.events
    pid = ev["pid"].to_numpy()[rows]
    tid = ev["tid"].to_numpy()[rows]
    ts = ev["ts_ns"].to_numpy()[rows]
    dur = ev["dur_ns"].to_numpy()[rows].astype(np.int64)
    end = ts + dur
    order = _thread_time_order(pid, tid, ts, end)
    rows, pid, tid, ts, dur, end = rows[order], pid[order], tid[order], ts[order], dur[order], end[order]
    n = len(rows)
    thread = (np.concatenate([[0], np.cumsum((pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1]))])
              if n else np.zeros(0, np.int64))
    parent, last = _tree_links(thread, ts, end)
    return {"event": rows, "dur": dur, "parent": parent, "last": last}


def _device_own(trace: Trace, event: np.ndarray, is_op: np.ndarray) -> np.ndarray:
    """Device ns launched by each swept row (only operator rows receive any)."""
    ev = trace.events
    own = np.zeros(len(event), dtype=np.int64)
    dev = pred.is_device_op(ev)
    if not dev.any() or not is_op.any():
        return own
    ext_all = ev["external_id"].to_numpy()
    corr_all = ev["correlation"].to_numpy()
    ext = ext_all[dev].copy()
    dur = ev["dur_ns"].to_numpy()[dev].astype(np.int64)
    miss = ~id_present(ext)
    if miss.any():  # the runtime call's External id, by correlation id
        rt = np.flatnonzero(pred.is_runtime(ev) & id_present(corr_all))
        lut = pd.Series(ext_all[rt], index=corr_all[rt])
        lut = lut[~lut.index.duplicated()]
        hit = lut.reindex(corr_all[dev][miss]).to_numpy()
        ext[miss] = np.where(np.isnan(hit), -1, hit).astype(np.int64)
    op_pos = np.flatnonzero(is_op)
    op_ext = ext_all[event[op_pos]]
    keep = id_present(op_ext) & (op_ext != 0)  # the plugin attaches External id 0 to the root, never to an operator
    lut = pd.Series(op_pos[keep], index=op_ext[keep])
    lut = lut[~lut.index.duplicated()]  # first operator with the id (the plugin's first in its list)
    hit = lut.reindex(ext).to_numpy()
    ok = ~np.isnan(hit) & id_present(ext) & (ext != 0)
    target = np.where(ok, np.nan_to_num(hit, nan=-1), -1).astype(np.int64)
    # a CUDA-graph replay's device ops: the operator that captured them (nbprof.trace.graph_replay)
    tpos = replay_positions(trace, np.flatnonzero(dev), event[op_pos])
    target = np.where(tpos >= 0, op_pos[np.clip(tpos, 0, None)], target)
    ok = target >= 0
    np.add.at(own, target[ok], dur[ok])
    return own


def _subtree_sum(values: np.ndarray, last: np.ndarray) -> np.ndarray:
    cs = np.concatenate([[0], np.cumsum(values)]).astype(np.int64)
    out: np.ndarray = cs[last + 1] - cs[np.arange(len(values))]
    return out


def _paths(rows: np.ndarray, parent_of: np.ndarray, names: np.ndarray) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """Node id per row of ``rows`` (in preorder: parents first); nodes as (parent node, name), in first-call order.

    A node is a (parent node, name) pair. Built one nesting level at a time (a hash factorize per level, no loop
    over rows), then numbered by the position of each node's first row in ``rows``: what a loop over ``rows``
    creating nodes as it meets them gives."""
    node_of = np.full(len(parent_of), -1, dtype=np.int64)
    if not len(rows):
        return node_of, []
    ncode, nuniq = pd.factorize(pd.Series(names[rows], dtype=object))
    k_names = len(nuniq) + 1
    pos = np.zeros(len(parent_of), dtype=np.int64)
    pos[rows] = np.arange(len(rows))
    # nesting level of each row among ``rows`` (parents come first, so one pass per level)
    in_rows = np.zeros(len(parent_of), dtype=bool)
    in_rows[rows] = True
    par = parent_of[rows]
    par = np.where((par >= 0) & in_rows[np.clip(par, 0, None)], par, -1)  # a parent outside ``rows``: a root
    level = np.full(len(rows), -1, dtype=np.int64)
    level[par < 0] = 0
    todo = np.flatnonzero(level < 0)
    while len(todo):
        pl = level[pos[par[todo]]]
        ok = pl >= 0
        if not ok.any():
            raise ValueError("module rows nest in a cycle")
        level[todo[ok]] = pl[ok] + 1
        todo = todo[~ok]
    tmp = np.full(len(rows), -1, dtype=np.int64)  # level-wise node id per row
    t_parent: list[np.ndarray] = []
    t_name: list[np.ndarray] = []
    t_first: list[np.ndarray] = []
    n_tmp = 0
    by_level = np.argsort(level, kind="stable")  # rows of each level, in ``rows`` order
    cuts = np.searchsorted(level[by_level], np.arange(int(level.max()) + 2))
    for lv in range(int(level.max()) + 1):
        at = by_level[cuts[lv]:cuts[lv + 1]]
        pnode = np.where(par[at] >= 0, tmp[pos[np.clip(par[at], 0, None)]], -1)
        codes, uniq = pd.factorize((pnode + 1) * k_names + ncode[at])
        first = np.full(len(uniq), len(rows), dtype=np.int64)
        np.minimum.at(first, codes, at)
        tmp[at] = n_tmp + codes
        t_parent.append(_node_parents(pnode, codes, len(uniq)))
        t_name.append(ncode[first])
        t_first.append(first)
        n_tmp += len(uniq)
    parent_tmp = np.concatenate(t_parent)
    name_tmp = np.concatenate(t_name)
    first_tmp = np.concatenate(t_first)
    order = np.argsort(first_tmp, kind="stable")  # first-call order
    final = np.empty(n_tmp, dtype=np.int64)
    final[order] = np.arange(n_tmp)
    node_of[rows] = final[tmp]
    words = [str(u) for u in nuniq]
    nodes = [(int(final[parent_tmp[t]]) if parent_tmp[t] >= 0 else -1, words[name_tmp[t]]) for t in order.tolist()]
    return node_of, nodes


def _node_parents(pnode: np.ndarray, codes: np.ndarray, n: int) -> np.ndarray:
    """The parent node of each of ``n`` nodes from its rows (all rows of a node share it)."""
    out = np.full(n, -1, dtype=np.int64)
    out[codes] = pnode
    return out


def _preorder(nodes: list[tuple[int, str]]) -> np.ndarray:
    """Node ids in depth-first order, children in first-call order."""
    kids: dict[int, list[int]] = {}
    for i, (p, _n) in enumerate(nodes):
        kids.setdefault(p, []).append(i)
    out: list[int] = []
    stack = list(reversed(kids.get(-1, [])))
    while stack:
        i = stack.pop()
        out.append(i)
        stack.extend(reversed(kids.get(i, [])))
    return np.array(out, dtype=np.int64)


def _frame(nodes: list[tuple[int, str]], cols: dict[str, np.ndarray]) -> pd.DataFrame:
    order = _preorder(nodes)
    new_id = np.empty(len(nodes), dtype=np.int64)
    new_id[order] = np.arange(len(order))
    par = np.array([p for p, _n in nodes], dtype=np.int64)
    depth = np.zeros(len(nodes), dtype=np.int64)
    for i in order.tolist():  # parents come first
        if par[i] >= 0:
            depth[i] = depth[par[i]] + 1
    out = {"node_id": np.arange(len(order), dtype=np.int64),
           "parent_id": np.where(par[order] >= 0, new_id[np.clip(par[order], 0, None)], -1).astype(np.int64),
           "depth": depth[order]}
    for k, v in cols.items():
        out[k] = v[order]
    return pd.DataFrame(out)


@per_trace
def module_tree(trace: Trace) -> pd.DataFrame:
    """The nn.Module tree of ``trace`` with torch-tb-profiler 0.4.3's Module-view numbers (module docstring).

    Returns
    -------
    pandas.DataFrame
        One row per module node, depth-first (children in first-call order): ``node_id``, ``parent_id`` (-1 for
        a root), ``depth`` (0 for a root), ``module`` (class, ``Linear``), ``name`` (instance, ``Linear_0``),
        ``path`` (instances from the root joined by ``/``), ``calls``, ``operators``, ``host_total_ns``,
        ``host_self_ns``, ``device_total_ns``, ``device_self_ns`` (int64 ns). Empty (same columns) when the
        trace has no ``nn.Module:`` frames (:data:`RECORD_HINT` says how to record them).
    """
    ev = trace.events
    py = _python_mask(ev)
    is_mod_ev = py & pred.name_mask(ev["name"], lambda s: s.startswith(MODULE_PREFIX))
    if not is_mod_ev.any():
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("module", "name", "path") else np.int64)
                             for c in MODULE_COLUMNS})
    host = (ev["device"].to_numpy() < 0)
    if "ph" in ev:
        host &= (ev["ph"] == "X").to_numpy()
    cat = ev["cat"]
    is_cpu_op = host & (cat == schema.CPU_OP).to_numpy()
    step_or_comm = host & (cat == schema.USER_ANNOTATION).to_numpy() & (
        pred.is_step_row(ev) | pred.name_mask(ev["name"], lambda s: s.startswith(_COMM_ANNOTATIONS)))
    rows = np.flatnonzero(is_mod_ev | is_cpu_op | step_or_comm)
    s = _sweep(trace, rows)
    event, dur, parent, last = s["event"], s["dur"], s["parent"], s["last"]
    n = len(event)
    names = _names(ev, event)
    is_mod = is_mod_ev[event]
    is_op = is_cpu_op[event] | step_or_comm[event]
    counted = is_cpu_op[event] & ~np.isin(names, _NOT_OPERATORS) & ~pd.Series(names, dtype=object).str.startswith(
        ("Optimizer.", "enumerate(DataLoader)#", "enumerate(DataPipe)#")).to_numpy(bool)
    has_p = parent >= 0
    child_dur = np.zeros(n, dtype=np.int64)
    np.add.at(child_dur, parent[has_p], dur[has_p])
    n_ops = np.bincount(parent[has_p & counted], minlength=n)
    own_dev = _device_own(trace, event, is_op)
    total_dev = _subtree_sum(own_dev, last)
    mod_anc = _nearest(parent, is_mod)
    # self device: what the module's operators launched (ops whose nearest module is this one)
    self_dev = np.zeros(n, dtype=np.int64)
    op_in = is_op & (mod_anc >= 0)
    np.add.at(self_dev, mod_anc[op_in], own_dev[op_in])
    mrows = np.flatnonzero(is_mod)  # preorder within each thread: parents first
    short = np.array([str(x)[len(MODULE_PREFIX):] for x in names], dtype=object)
    node_of, nodes = _paths(mrows, mod_anc, short)
    k = len(nodes)
    nid = node_of[mrows]

    def agg(v: np.ndarray) -> np.ndarray:
        out = np.zeros(k, dtype=np.int64)
        np.add.at(out, nid, v[mrows].astype(np.int64))
        return out

    inst = np.array([nm for _p, nm in nodes], dtype=object)
    path = [""] * k
    for i, (p, nm) in enumerate(nodes):  # parents are created before their children
        path[i] = nm if p < 0 else f"{path[p]}/{nm}"
    cols = {
        "module": np.array([nm.rsplit("_", 1)[0] if nm.rsplit("_", 1)[-1].isdigit() else nm for nm in inst],
                           dtype=object),
        "name": inst,
        "path": np.array(path, dtype=object),
        "calls": np.bincount(nid, minlength=k).astype(np.int64),
        "operators": agg(n_ops),
        "host_total_ns": agg(dur),
        "host_self_ns": agg(dur - child_dur),
        "device_total_ns": agg(total_dev),
        "device_self_ns": agg(self_dev),
    }
    return _frame(nodes, cols)[MODULE_COLUMNS]


@per_trace
def call_stack(trace: Trace, *, max_nodes: int | None = None) -> pd.DataFrame:
    """The Python call tree of ``trace`` (module docstring): one row per path of ``python_function`` frames.

    Parameters
    ----------
    max_nodes : int, optional
        Keep the first nodes in depth-first order (whole subtrees are never cut in the middle of a parent:
        a kept node's parent is kept); ``attrs["total_nodes"]`` has the count before the cut.

    Returns
    -------
    pandas.DataFrame
        Depth-first (children in first-call order): ``node_id``, ``parent_id`` (-1 for a root), ``depth``,
        ``name`` (the frame, e.g. ``train.py(12): step`` or ``nn.Module: Linear_0``), ``calls``,
        ``host_total_ns``, ``host_self_ns`` (clamped at 0), ``self_clamped_calls`` (calls whose self time was
        negative), ``device_total_ns`` (int64 ns). ``attrs``: ``clamped_calls``, ``clamped_ns`` (overrun removed
        by the clamp), ``total_nodes``. Empty (same columns) without Python frames (:data:`RECORD_HINT`).
    """
    ev = trace.events
    py = _python_mask(ev)
    if not py.any():
        out = pd.DataFrame({c: pd.Series(dtype=object if c == "name" else np.int64) for c in CALL_STACK_COLUMNS})
        out.attrs.update(clamped_calls=0, clamped_ns=0, total_nodes=0)
        return out
    host = ev["device"].to_numpy() < 0
    if "ph" in ev:
        host &= (ev["ph"] == "X").to_numpy()
    is_op_ev = host & ev["cat"].isin(pred.HOST_OP_CATEGORIES).to_numpy()
    # the Python-only sweep gives the frame tree; a second sweep with the operators gives device time per frame
    s = _sweep(trace, np.flatnonzero(py))
    event, dur, parent = s["event"], s["dur"], s["parent"]
    n = len(event)
    names = np.array([_ADDRESS.sub(">", x) for x in _names(ev, event)], dtype=object)
    has_p = parent >= 0
    child_dur = np.zeros(n, dtype=np.int64)
    np.add.at(child_dur, parent[has_p], dur[has_p])
    raw_self = dur - child_dur
    over = raw_self < 0
    dev_total = np.zeros(n, dtype=np.int64)
    if trace.has_device:
        s2 = _sweep(trace, np.flatnonzero(py | is_op_ev))
        own = _device_own(trace, s2["event"], is_op_ev[s2["event"]])
        tot2 = _subtree_sum(own, s2["last"])
        pos = pd.Series(np.arange(len(s2["event"])), index=s2["event"])
        dev_total = tot2[pos.reindex(event).to_numpy().astype(np.int64)]
    node_of, nodes = _paths(np.arange(n), parent, names)
    k = len(nodes)

    def agg(v: np.ndarray) -> np.ndarray:
        out = np.zeros(k, dtype=np.int64)
        np.add.at(out, node_of, v.astype(np.int64))
        return out

    cols = {
        "name": np.array([nm for _p, nm in nodes], dtype=object),
        "calls": np.bincount(node_of, minlength=k).astype(np.int64),
        "host_total_ns": agg(dur),
        "host_self_ns": agg(np.maximum(raw_self, 0)),
        "self_clamped_calls": agg(over.astype(np.int64)),
        "device_total_ns": agg(dev_total),
    }
    out = _frame(nodes, cols)[CALL_STACK_COLUMNS]
    total = len(out)
    if max_nodes is not None and total > max_nodes:
        out = out.head(max_nodes).reset_index(drop=True)  # depth-first: every kept node's parent comes before it
    out.attrs.update(clamped_calls=int(over.sum()), clamped_ns=int(-raw_self[over].sum()), total_nodes=total)
    return out
