"""Summaries equivalent to the ``nsys stats`` reports, computed from a ``Trace``.

Each function reproduces the rows and numbers of one ``nsys stats`` report (definitions read from the
report scripts of Nsight Systems 2022.4, ``target-linux-x64/reports/*.py``; the modern name is given
first, the 2022 name second). Differences in presentation only: times stay integer/float ns
(``nsys`` rounds averages to 0.1 ns and prints percentages), the time share is a fraction
(``time_ratio`` = nsys ``Time (%)`` / 100), kernel grid/block are ``"x,y,z"``.

Common statistics (``_summary``): ``total`` = sum, ``avg`` = mean, ``med`` = median (mean of the two
middle values for an even count), ``min``, ``max``, ``std`` = sample standard deviation (n-1;
0 for one instance), as SQLite's ``median``/``stdev`` extension functions in nsys compute them.
The time share is relative to the sum over the rows of the same report, not to wall time.

Works on traces from :func:`nbprof.sources.nsys.load_nsys` (uses the nsys-only tables in
``trace.tables`` for names/kinds the common schema does not keep) and, where the data
allows, on Kineto traces (kernel, CUDA API and GPU memory summaries from the events table).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..trace import predicates as pred
from ..trace import schema
from ..trace.model import Trace

__all__ = [
    "cuda_gpu_kern_sum", "cuda_api_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "nvtx_sum",
    "osrt_sum", "nvtx_pushpop_trace", "nvtx_gpu_proj_trace", "REPORT_NAMES", "summaries",
]

#: modern ``nsys stats`` report name -> (2022 name, function name here)
REPORT_NAMES = {
    "cuda_gpu_kern_sum": ("gpukernsum", "cuda_gpu_kern_sum"),
    "cuda_api_sum": ("cudaapisum", "cuda_api_sum"),
    "cuda_gpu_mem_time_sum": ("gpumemtimesum", "cuda_gpu_mem_time_sum"),
    "cuda_gpu_mem_size_sum": ("gpumemsizesum", "cuda_gpu_mem_size_sum"),
    "nvtx_sum": ("nvtxsum", "nvtx_sum"),
    "osrt_sum": ("osrtsum", "osrt_sum"),
    "nvtx_pushpop_trace": ("nvtxpptrace", "nvtx_pushpop_trace"),
    "nvtx_gpu_proj_trace": ("nvtxgpuproj", "nvtx_gpu_proj_trace"),
}

_STAT_COLS = ["total", "count", "avg", "med", "min", "max", "std"]


def _tables(trace: Trace) -> dict[str, pd.DataFrame]:
    return trace.tables


def _summary(df: pd.DataFrame, keys: list[str], value: str, *, unit: str = "ns", count_name: str = "instances",
             share: bool = True) -> pd.DataFrame:
    """Group ``df`` by ``keys`` and summarise ``value``; sorted by total descending."""
    suffix = f"_{unit}"
    out_cols = (["time_ratio"] if share else []) + [f"total{suffix}", count_name, f"avg{suffix}", f"med{suffix}",
                                                    f"min{suffix}", f"max{suffix}", f"std{suffix}"] + keys
    if df is None or not len(df):
        return pd.DataFrame({c: pd.Series(dtype="float64" if c.startswith(("avg", "med", "std", "time")) else
                                          ("int64" if c not in keys else object)) for c in out_cols})
    g = df.groupby(keys, sort=False, dropna=False, observed=True)[value]
    v = g.agg(["sum", "count", "mean", "median", "min", "max", "std"]).reset_index()
    v["std"] = v["std"].fillna(0.0)
    res = pd.DataFrame({
        f"total{suffix}": v["sum"].astype("int64"), count_name: v["count"].astype("int64"),
        f"avg{suffix}": v["mean"].astype("float64"), f"med{suffix}": v["median"].astype("float64"),
        f"min{suffix}": v["min"].astype("int64"), f"max{suffix}": v["max"].astype("int64"),
        f"std{suffix}": v["std"].astype("float64"),
    })
    for k in keys:
        res[k] = v[k].to_numpy()
    if share:
        tot = res[f"total{suffix}"].sum()
        res.insert(0, "time_ratio", res[f"total{suffix}"] / tot if tot else 0.0)
    return res.sort_values(f"total{suffix}", ascending=False, kind="stable").reset_index(drop=True)[out_cols]


def _events(trace: Trace, cats: Iterable[str]) -> pd.DataFrame:
    ev = trace.events
    return ev[pred.category_in(ev, cats)]


def cuda_gpu_kern_sum(trace: Trace, *, name: str = "demangled") -> pd.DataFrame:
    """``nsys stats -r cuda_gpu_kern_sum`` (2022: ``gpukernsum``): kernels by name, grid and block.

    Parameters
    ----------
    trace : Trace
    name : {"demangled", "short", "mangled"}
        Which kernel name to group by (nsys: default, ``:base``, ``:mangled``); falls back to the
        demangled name where the other is missing. Kineto traces only have ``"demangled"``.

    Returns
    -------
    DataFrame
        ``time_ratio, total_ns, instances, avg_ns, med_ns, min_ns, max_ns, std_ns, grid, block, name``
        sorted by ``total_ns`` descending. ``grid``/``block`` are ``"x,y,z"``.
    """
    k = _events(trace, [schema.KERNEL])[["ts_ns", "dur_ns", "name", "grid", "block", "correlation", "device"]].copy()
    k["name"] = k["name"].astype(object)
    kt = _tables(trace).get("kernels")
    if name != "demangled" and kt is not None and len(kt):
        col = {"short": "short_name", "mangled": "mangled_name"}[name]
        alt = kt.set_index(["ts_ns", "device", "correlation"])[col]
        alt = alt[~alt.index.duplicated()]
        idx = pd.MultiIndex.from_arrays([k["ts_ns"], k["device"].astype("int64"), k["correlation"]])
        other = pd.Series(alt.reindex(idx).to_numpy(), index=k.index)
        k["name"] = other.where(other.notna(), k["name"])
    k["grid"] = k["grid"].astype(object)
    k["block"] = k["block"].astype(object)
    return _summary(k, ["grid", "block", "name"], "dur_ns", count_name="instances")[
        ["time_ratio", "total_ns", "instances", "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns", "grid", "block",
         "name"]]


def cuda_api_sum(trace: Trace) -> pd.DataFrame:
    """``nsys stats -r cuda_api_sum`` (2022: ``cudaapisum``): CUDA runtime and driver API calls.

    Grouped as nsys groups them: by the API name as recorded (``cudaMemcpy_v3020`` and ``cudaMemcpy``
    are two rows), shown without the ``_vNNNN`` suffix.

    Returns
    -------
    DataFrame
        ``time_ratio, total_ns, num_calls, avg_ns, med_ns, min_ns, max_ns, std_ns, name``.
    """
    rt = _tables(trace).get("runtime")
    if rt is not None:
        df = rt[["dur_ns", "name", "name_id"]]
        res = _summary(df, ["name_id", "name"], "dur_ns", count_name="num_calls")
        return res.drop(columns=["name_id"])
    df = _events(trace, schema.RUNTIME_CATEGORIES)[["dur_ns", "name"]].copy()
    df["name"] = df["name"].astype(object)
    return _summary(df, ["name"], "dur_ns", count_name="num_calls")


def _memops(trace: Trace) -> pd.DataFrame:
    ev = _events(trace, [schema.GPU_MEMCPY, schema.GPU_MEMSET])[["dur_ns", "name", "bytes", "cat"]].copy()
    ev["operation"] = ev["name"].astype(object)
    return ev


def cuda_gpu_mem_time_sum(trace: Trace) -> pd.DataFrame:
    """``nsys stats -r cuda_gpu_mem_time_sum`` (2022: ``gpumemtimesum``): GPU memory operations by time.

    Returns
    -------
    DataFrame
        ``time_ratio, total_ns, count, avg_ns, med_ns, min_ns, max_ns, std_ns, operation``
        (operation ``[CUDA memcpy HtoD]``..., ``[CUDA memset]``).
    """
    return _summary(_memops(trace), ["operation"], "dur_ns", count_name="count")


def cuda_gpu_mem_size_sum(trace: Trace) -> pd.DataFrame:
    """``nsys stats -r cuda_gpu_mem_size_sum`` (2022: ``gpumemsizesum``): GPU memory operations by size.

    Returns
    -------
    DataFrame
        ``total_bytes, count, avg_bytes, med_bytes, min_bytes, max_bytes, std_bytes, operation``
        (nsys 2022.4 prints MB = 1e6 bytes).
    """
    return _summary(_memops(trace), ["operation"], "bytes", unit="bytes", count_name="count", share=False)


def _nvtx(trace: Trace) -> pd.DataFrame | None:
    nv = _tables(trace).get("nvtx")
    if nv is None or not len(nv):
        return None
    return nv


def _nvtx_ranges(nv: pd.DataFrame, styles: tuple[str, ...] = ("PushPop", "StartEnd")) -> pd.DataFrame:
    maxts = int(max(nv["ts_ns"].max(), nv["end_ns"].max()))
    r = nv[nv["style"].isin(list(styles))].copy()
    r["end_eff"] = r["end_ns"].where(r["end_ns"] >= 0, maxts)
    r["dur_ns"] = r["end_eff"] - r["ts_ns"]
    return r


def nvtx_sum(trace: Trace) -> pd.DataFrame:
    """``nsys stats -r nvtx_sum`` (2022: ``nvtxsum``): NVTX push/pop and start/end ranges.

    A range without an end lasts until the last NVTX timestamp (as nsys computes it). Names carry the
    domain (``domain:text``).

    Returns
    -------
    DataFrame
        ``time_ratio, total_ns, instances, avg_ns, med_ns, min_ns, max_ns, std_ns, style, range``.
    """
    nv = _nvtx(trace)
    if nv is None:
        return _summary(None, ["style", "range"], "dur_ns")
    r = _nvtx_ranges(nv)
    r["range"] = r["name"]
    return _summary(r, ["range", "style"], "dur_ns")[
        ["time_ratio", "total_ns", "instances", "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns", "style", "range"]]


def osrt_sum(trace: Trace) -> pd.DataFrame:
    """``nsys stats -r osrt_sum`` (2022: ``osrtsum``): OS runtime library calls (``OSRT_API`` eventClass 27).

    Returns
    -------
    DataFrame
        ``time_ratio, total_ns, num_calls, avg_ns, med_ns, min_ns, max_ns, std_ns, name``.
    """
    o = _tables(trace).get("osrt")
    if o is not None:
        return _summary(o[["dur_ns", "name_id", "name"]], ["name_id", "name"], "dur_ns",
                        count_name="num_calls").drop(columns=["name_id"])
    df = _events(trace, [schema.OSRT])[["dur_ns", "name"]].copy()
    df["name"] = df["name"].astype(object)
    return _summary(df, ["name"], "dur_ns", count_name="num_calls")


def _parents(r: pd.DataFrame) -> np.ndarray:
    """Tightest enclosing range on the same thread (``globalTid``) for each row of ``r`` (-1: root).

    Enclosing: ``start_p <= start_c`` and ``end_p >= end_c`` (nsys' R-tree join); ties in tightness go to
    the first candidate in row order.
    """
    parent = np.full(len(r), -1, dtype="int64")
    pos = {rid: i for i, rid in enumerate(r["row_id"].to_numpy())}
    for _, g in r.groupby("global_tid", sort=False):
        s, e, ids = g["ts_ns"].to_numpy(), g["end_eff"].to_numpy(), g["row_id"].to_numpy()
        for ci in range(len(g)):
            best, best_t = -1, None
            cand = np.flatnonzero((s <= s[ci]) & (e >= e[ci]) & (ids != ids[ci]))
            for pi in cand:
                t = (s[ci] - s[pi]) + (e[pi] - e[ci])
                if best_t is None or t < best_t:
                    best, best_t = int(ids[pi]), t
            parent[pos[ids[ci]]] = best
    return parent


def _tree(r: pd.DataFrame, parent: np.ndarray) -> tuple[list[int], list[str]]:
    pmap = dict(zip(r["row_id"].to_numpy().tolist(), parent.tolist()))
    levels, stacks = [], []
    for rid in r["row_id"].to_numpy().tolist():
        chain, cur, seen = [rid], pmap.get(rid, -1), {rid}
        while cur != -1 and cur not in seen:
            chain.append(cur)
            seen.add(cur)
            cur = pmap.get(cur, -1)
        chain.reverse()
        levels.append(len(chain) - 1)
        stacks.append("".join(f":{c}" for c in chain))
    return levels, stacks


def nvtx_pushpop_trace(trace: Trace) -> pd.DataFrame:
    """``nsys stats -r nvtx_pushpop_trace`` (2022: ``nvtxpptrace``): every push/pop range with its tree.

    Returns
    -------
    DataFrame
        ``start_ns, end_ns, dur_ns, dur_child_ns, dur_nonchild_ns, name, pid, tid, lvl, num_child, range_id,
        parent_id (-1 for roots), range_stack (":1:2"), name_tree ("--" per level + name)``, in the
        export's row order. ``range_id`` is the ``NVTX_EVENTS`` rowid, as in nsys.
    """
    cols = ["start_ns", "end_ns", "dur_ns", "dur_child_ns", "dur_nonchild_ns", "name", "pid", "tid", "lvl",
            "num_child", "range_id", "parent_id", "range_stack", "name_tree"]
    nv = _nvtx(trace)
    if nv is None:
        return pd.DataFrame(columns=cols)
    r = _nvtx_ranges(nv, ("PushPop",)).reset_index(drop=True)
    if not len(r):
        return pd.DataFrame(columns=cols)
    parent = _parents(r)
    lvl, stack = _tree(r, parent)
    dur = pd.Series(r["dur_ns"].to_numpy(), index=r["row_id"].to_numpy())
    child_dur = pd.Series(dur.to_numpy(), index=parent).groupby(level=0).sum()
    child_n = pd.Series(1, index=parent).groupby(level=0).sum()
    rid = r["row_id"].to_numpy()
    dchild = child_dur.reindex(rid).fillna(0).astype("int64").to_numpy()
    return pd.DataFrame({
        "start_ns": r["ts_ns"].to_numpy(), "end_ns": r["ts_ns"].to_numpy() + r["dur_ns"].to_numpy(),
        "dur_ns": r["dur_ns"].to_numpy(), "dur_child_ns": dchild, "dur_nonchild_ns": r["dur_ns"].to_numpy() - dchild,
        "name": r["name"].to_numpy(), "pid": r["pid"].to_numpy(), "tid": r["tid"].to_numpy(), "lvl": lvl,
        "num_child": child_n.reindex(rid).fillna(0).astype("int64").to_numpy(), "range_id": rid,
        "parent_id": parent, "range_stack": stack,
        "name_tree": ["--" * lv + str(n) for lv, n in zip(lvl, r["name"])],
    })[cols]


def nvtx_gpu_proj_trace(trace: Trace) -> pd.DataFrame:
    """``nsys stats -r nvtx_gpu_proj_trace`` (2022: ``nvtxgpuproj``): NVTX ranges projected onto the GPU.

    A GPU operation (kernel, memcpy, memset) belongs to a range when the CUDA API call that launched it
    (same correlation id and process) lies inside the range on the range's thread. Only ranges that
    start and end on the same thread are considered. The projected range spans the first enclosed GPU
    operation's start to the last one's end.

    Returns
    -------
    DataFrame
        ``name, projected_start_ns, projected_dur_ns, orig_start_ns, orig_dur_ns, style, pid, tid,
        num_gpu_ops, lvl, num_child, range_id, parent_id, range_stack`` ordered by projected start,
        then projected duration descending.
    """
    cols = ["name", "projected_start_ns", "projected_dur_ns", "orig_start_ns", "orig_dur_ns", "style", "pid", "tid",
            "num_gpu_ops", "lvl", "num_child", "range_id", "parent_id", "range_stack"]
    nv = _nvtx(trace)
    t = _tables(trace)
    rt = t.get("runtime")
    if nv is None or rt is None:
        return pd.DataFrame(columns=cols)
    r = _nvtx_ranges(nv)
    r = r[r["end_tid"] < 0].reset_index(drop=True)
    ops = [t[k][["ts_ns", "dur_ns", "correlation", "pid"]] for k in ("kernels", "memcpy", "memset") if k in t]
    if not len(r) or not ops:
        return pd.DataFrame(columns=cols)
    op = pd.concat(ops, ignore_index=True)
    op["end"] = op["ts_ns"] + op["dur_ns"]
    j = op.merge(rt[["correlation", "pid", "tid", "ts_ns", "dur_ns"]], on=["correlation", "pid"], suffixes=("", "_api"))
    j["api_end"] = j["ts_ns_api"] + j["dur_ns_api"]
    parent = _parents(r)
    lvl, stack = _tree(r, parent)
    meta = {rid: (lv, p, st) for rid, lv, p, st in zip(r["row_id"], lvl, parent, stack)}
    rows = []
    for _, rg in r.iterrows():
        m = j[(j["tid"] == rg["tid"]) & (j["pid"] == rg["pid"]) & (j["ts_ns_api"] >= rg["ts_ns"])
              & (j["api_end"] <= rg["end_eff"])]
        if not len(m):
            continue
        ps = int(m["ts_ns"].min())
        lv, p, st = meta[rg["row_id"]]
        rows.append((rg["name"], ps, int(m["end"].max()) - ps, int(rg["ts_ns"]), int(rg["dur_ns"]), rg["style"],
                     int(rg["pid"]), int(rg["tid"]), int(m["correlation"].nunique()), lv, int(rg["row_id"]), int(p), st))
    res = pd.DataFrame(rows, columns=[c for c in cols if c != "num_child"])
    nchild = res.groupby("parent_id").size()
    res.insert(cols.index("num_child"), "num_child", res["range_id"].map(nchild).fillna(0).astype("int64"))
    return res.sort_values(["projected_start_ns", "projected_dur_ns"], ascending=[True, False],
                           kind="stable").reset_index(drop=True)[cols]


def summaries(trace: Trace) -> dict[str, pd.DataFrame]:
    """Every report that has data in ``trace``: ``{modern report name: DataFrame}``."""
    out = {}
    for key, (_old, fn) in REPORT_NAMES.items():
        df = globals()[fn](trace)
        if len(df):
            out[key] = df
    return out
