"""The DeepSpeed flops-profiler report (``print_model_profile`` / ``flops_profiler.output_file``) ->
:class:`FlopsProfile` (summary, aggregated and detailed tables, quirks). Format facts in
:mod:`nbprof.deepspeed.parsers`.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..units import fmt_ms_text
from ._text import TRACEBACK, _clean_lines, _Quirks, _read, parse_quantity, to_float, traceback_error, zero_stage_of

__all__ = ["FlopsProfile", "parse_flops_profile", "parse_flops_profiles"]

# --------------------------------------------------------------------------- flops profiler

#: canonical keys of the flops-profiler summary (lower-cased label before " = " -> key, kind)
_SUMMARY_KEYS = {
    "world size": ("world_size", ""),
    "data parallel size": ("data_parallel_size", ""),
    "model parallel size": ("model_parallel_size", ""),
    "batch size per gpu": ("batch_size_per_gpu", ""),
    "expert tensor parallelism enabled": ("expert_tensor_parallel", ""),
    "params per gpu": ("params_per_gpu", "params"),
    "params of model": ("params_of_model", "params"),
    "fwd macs per gpu": ("fwd_macs_per_gpu", "macs"),
    "fwd flops per gpu": ("fwd_flops_per_gpu", "flops"),
    "fwd flops of model": ("fwd_flops_of_model", "flops"),
    "fwd latency": ("fwd_latency", "time"),
    "fwd flops per gpu ": ("fwd_flops_per_s", ""),
    "bwd latency": ("bwd_latency", "time"),
    "bwd flops per gpu": ("bwd_flops_per_s", ""),
    "fwd+bwd flops per gpu": ("fwd_bwd_flops_per_s", ""),
    "step latency": ("step_latency", "time"),
    "iter latency": ("iter_latency", "time"),
    "flops per gpu": ("flops_per_s", ""),
    "samples/second": ("samples_per_s", ""),
}

_BANNER_TEXT = "DeepSpeed Flops Profiler"
#: anchored (one start position) and only tried on lines holding the text: linear in the line length
_BANNER = re.compile(r"-+\s*DeepSpeed Flops Profiler\s*-+$")
_AT_STEP = re.compile(r"Profile Summary at step\s+(\d{1,18})(?!\d)")  # bounded: int() of 4300+ digits raises


def _is_banner(s: str) -> bool:
    """``----- DeepSpeed Flops Profiler -----`` (``s`` stripped)."""
    return _BANNER_TEXT in s and s.startswith("-") and _BANNER.match(s) is not None


def _kv(s: str) -> tuple[str, str] | None:
    """``label: value`` of a summary line (``s`` stripped), or None.

    The label starts with a letter and ends at the first ``:`` outside parentheses, which must be
    followed by white space and a value. One pass over the line (the regex this replaces backtracked
    quadratically on long lines without a colon).
    """
    if not s or not ("A" <= s[0] <= "Z" or "a" <= s[0] <= "z"):
        return None
    depth = 0
    for i, ch in enumerate(s):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif ch == ":" and depth == 0:
            value = s[i + 1:]
            if not value[:1].isspace() or not value.strip():
                return None
            return s[:i], value.strip()
    return None


#: a number with an optional prefix, matched one way only (``\d+\.?\d*`` split digit runs every way:
#: quadratic); the prefix group takes its spaces only when a prefix follows
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:\s*[TGMKkBmuµn])?"
_STATS = re.compile(
    rf"^(?P<params>{_NUM})\s*(?P<sep>[=,])\s*(?P<params_pct>[\d.]+)% Params,\s*"
    rf"(?P<macs>{_NUM}\s*MACs)\s*[=,]\s*(?P<macs_pct>[\d.]+)% MACs,\s*"
    rf"(?P<lat>{_NUM}\s*s)\s*[=,]\s*(?P<lat_pct>[\d.]+)% latency,\s*"
    rf"(?P<flops>{_NUM}\s*FLOPS)\s*(?:,(?P<extra>.*))?$"
)
_MODLINE = re.compile(r"^(?P<indent>\s*)(?:\((?P<name>[^)]*)\):\s*)?(?P<type>[A-Za-z_][\w.]*)\((?P<rest>.*)$")
_EPOCH_NS = 1e6 * 1e9  # latencies above 1e6 s are the epoch bug


@dataclass
class FlopsProfile:
    """One flops-profiler report.

    Attributes
    ----------
    step : int
        The profiled step, 0-based (``Profile Summary at step N`` prints N = this + 1).
    reported_step : int
        The N printed in the report (-1 when missing).
    summary : pandas.DataFrame
        ``key, label, text, value, unit, flag``: one row per summary line; ``value`` in base units
        (counts, MAC, FLOP, FLOP/s, ns for latencies), NaN when flagged unusable.
    aggregated : pandas.DataFrame
        ``depth, metric (params|macs|fwd_latency), module_type, text, value, unit``.
    modules : pandas.DataFrame
        The detailed tree in print order: ``path`` (dotted, root ``""``), ``name``, ``type``, ``depth``,
        ``params``, ``params_ratio``, ``macs``, ``macs_ratio``, ``fwd_latency_ns``, ``fwd_latency_ratio``,
        ``fwd_flops_per_s``, ``extra_repr``, ``flag``. Ratios are fractions 0..1.
    quirks : pandas.DataFrame
        ``kind, line, message`` (see :data:`QUIRKS`).
    zero_stage : int or None
        The ZeRO stage used to interpret the numbers, when known.
    end_line : int
        The line of the report's closing dashed line (DeepSpeed ``profiler.py`` ``print_model_profile`` ends
        with a line of 78 ``-``); -1 when the report has none (cut short or truncated). Nothing after it is
        part of the report (a launcher log goes on with other output).
    """

    step: int = -1
    reported_step: int = -1
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    aggregated: pd.DataFrame = field(default_factory=pd.DataFrame)
    modules: pd.DataFrame = field(default_factory=pd.DataFrame)
    quirks: pd.DataFrame = field(default_factory=pd.DataFrame)
    zero_stage: int | None = None
    end_line: int = -1

    def get(self, key: str, default: float = float("nan")) -> float:
        """Summary ``value`` for a canonical key (e.g. ``"fwd_macs_per_gpu"``), ``default`` if absent."""
        s = self.summary
        if s.empty:
            return default
        hit = s.loc[s["key"] == key, "value"]
        return float(hit.iloc[0]) if len(hit) else default

    @property
    def flags(self) -> set[str]:
        """Quirk kinds flagged."""
        return set(self.quirks["kind"]) if len(self.quirks) else set()


def _summary_key(label: str) -> tuple[str, str]:
    low = label.strip().lower()
    if " = " in low:
        head = low.split(" = ", 1)[0].strip()
        # "fwd FLOPS per GPU = ..." (a rate) vs "fwd flops per GPU" (a count): the rate carries a formula
        if head == "fwd flops per gpu":
            return "fwd_flops_per_s", ""
        low = head
    if low in _SUMMARY_KEYS:
        return _SUMMARY_KEYS[low]
    return re.sub(r"[^a-z0-9]+", "_", low).strip("_"), ""


def parse_flops_profiles(source: str | os.PathLike[str], *, zero_stage: int | None = None,
                         config: dict | str | os.PathLike[str] | None = None) -> list[FlopsProfile]:
    """Every flops-profiler report in a file or log text (stdout logs may hold several).

    Parameters
    ----------
    source : str or PathLike
        A path (``flops_profiler.output_file`` or a captured stdout log) or the text itself.
    zero_stage : int, optional
        ZeRO stage of the run (or give ``config``, the run's DeepSpeed config); stage 3 adds the
        ``zero3_doubled_macs`` flag. Without either the stage is unknown and that flag is never set.
    config : dict, str or PathLike, optional
        The run's DeepSpeed config, used for the ZeRO stage.

    Returns
    -------
    list of FlopsProfile
        Empty when the text holds no report.
    """
    text = _read(source)
    if zero_stage is None:
        zero_stage = zero_stage_of(config)
    q0 = _Quirks()
    lines = _clean_lines(text, q0)
    starts = [k for k, (_i, _r, s) in enumerate(lines) if _is_banner(s.strip())]
    out = []
    for j, st in enumerate(starts):
        end = starts[j + 1] if j + 1 < len(starts) else len(lines)
        q = _Quirks()
        q.rows.extend(q0.rows)
        out.append(_parse_one_flops(lines[st:end], q, zero_stage))
    return out


def parse_flops_profile(source: str | os.PathLike[str], *, zero_stage: int | None = None,
                        config: dict | str | os.PathLike[str] | None = None) -> FlopsProfile:
    """The last flops-profiler report in ``source`` (see :func:`parse_flops_profiles`).

    Raises
    ------
    nbprof.errors.TraceFormatError
        When ``source`` holds no report (no "DeepSpeed Flops Profiler" banner); names it. Also a
        ``ValueError``.
    """
    from ..errors import TraceFormatError

    profs = parse_flops_profiles(source, zero_stage=zero_stage, config=config)
    if not profs:
        where = os.fspath(source) if isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and os.path.exists(source)) else "<the given text>"
        raise TraceFormatError(where, None, "no DeepSpeed flops-profiler report (banner 'DeepSpeed Flops Profiler' not found)")
    return profs[-1]


def _parse_one_flops(lines: list[tuple[int, int, str]], q: _Quirks, zero_stage: int | None) -> FlopsProfile:
    prof = FlopsProfile(zero_stage=zero_stage)
    section = "summary"
    summary_rows: list[dict[str, Any]] = []
    agg_rows: list[dict[str, Any]] = []
    mod_rows: list[dict[str, Any]] = []
    depth = -1
    stack: list[tuple[int, str]] = []  # (indent, path)
    pending: dict[str, Any] | None = None  # module whose stats are on the next line
    closed = False
    cut = False
    for k, (ln, _r, raw) in enumerate(lines):
        s = raw.strip()
        if not s:
            continue
        if s.startswith(TRACEBACK) and not closed:
            err, eln = traceback_error(lines, k)
            q.add("cut_short", ln, f"the flops-profiler report ({section} section) stops at a traceback at line {ln}: "
                                   f"{err} (line {eln}); the rest of the report is missing")
            cut = True
            break
        if _is_banner(s):
            continue
        m = _AT_STEP.search(s)
        if m is None and (mb := re.search(r"Profile Summary at step\s+(\d{19,})", s)):
            q.add("bad_number", ln, f"a step number of {len(mb.group(1))} digits: step not known")
        if m:
            prof.reported_step = int(m.group(1))
            prof.step = prof.reported_step - 1
            q.add("step_off_by_one", ln, f"report says step {prof.reported_step}: the profiled step is "
                                         f"{prof.step} (0-based global step, = config profile_step)")
            continue
        if "Aggregated Profile per GPU" in s:
            section = "aggregated"
            continue
        if "Detailed Profile per GPU" in s:
            section = "detailed"
            continue
        if set(s) == {"-"}:
            # the report's end: DeepSpeed's closing line is 78 dashes (aggregated: printed with detailed=False);
            # a dash line of another length is not it
            if section in ("detailed", "aggregated") and 40 <= len(s) <= 120:
                closed = True
                prof.end_line = ln
                break
            continue
        if section == "summary":
            kv = _kv(s)
            if not kv or s.endswith(":"):
                continue
            label, value = kv
            key, kind = _summary_key(label)
            if key in ("world_size", "data_parallel_size", "model_parallel_size", "batch_size_per_gpu",
                       "samples_per_s"):
                val, unit = to_float(value), ("samples/s" if key == "samples_per_s" else "")
                if val != val:
                    q.add("bad_number", ln, f"{label.strip()}: {value[:40]!r} is not a number")
                    unit = ""
            else:
                val, unit = parse_quantity(value, kind)
            if label.strip() == "params per gpu" and not any(r[0] == "older_layout" for r in q.rows):
                q.add("older_layout", ln, "lower-case 'params per gpu' label (older DeepSpeed)")
            flag = ""
            if unit == "ns" and val > _EPOCH_NS:
                q.add("epoch_as_latency", ln, f"{label.strip()}: {value} is the epoch time, not a latency")
                val, flag = float("nan"), "epoch_as_latency"
            summary_rows.append(dict(key=key, label=label.strip(), text=value, value=val, unit=unit, flag=flag))
        elif section == "aggregated":
            md = re.match(r"^depth (\d+):", s)
            if md:
                if len(md.group(1)) > 9:  # not a module depth (and int() of 4300+ digits raises)
                    q.add("unparsed_line", ln, f"aggregated depth of {len(md.group(1))} digits: {s[:80]!r}")
                else:
                    depth = int(md.group(1))
                continue
            ma = re.match(r"^(params|MACs|fwd latency)\s*-\s*(\{.*\})\s*$", s)
            if not ma and re.match(r"^(params|MACs|fwd latency)\s*-", s):
                q.add("unparsed_line", ln, f"aggregated line not a dict (no {{...}}): {s[:80]!r}")
                continue
            if ma:
                metric = {"params": "params", "MACs": "macs", "fwd latency": "fwd_latency"}[ma.group(1)]
                try:
                    d = ast.literal_eval(ma.group(2)) if len(ma.group(2)) < 1 << 20 else None
                except (ValueError, SyntaxError, TypeError, AttributeError, MemoryError, RecursionError) as exc:
                    d = exc
                if not isinstance(d, dict):
                    why = f"{type(d).__name__}: {d}" if isinstance(d, BaseException) else f"a {type(d).__name__}"
                    q.add("unparsed_line", ln, f"aggregated line not a dict ({why[:80]}): {s[:80]!r}")
                    continue
                for typ, txt in d.items():
                    val, unit = parse_quantity(str(txt), "params" if metric == "params" else "")
                    flag = ""
                    if unit == "ns" and val > _EPOCH_NS:
                        q.add("epoch_as_latency", ln, f"aggregated fwd latency of {typ}: {txt}")
                        val, flag = float("nan"), "epoch_as_latency"
                    agg_rows.append(dict(depth=depth, metric=metric, module_type=str(typ), text=str(txt),
                                         value=val, unit=unit, flag=flag))
        else:  # detailed
            if s.startswith(("Each module profile", "params, percentage", "Note:")) or re.match(r"^\d+\. ", s):
                continue
            indent = len(raw) - len(raw.lstrip(" "))
            if s == ")":
                while stack and stack[-1][0] >= indent:
                    stack.pop()
                continue
            if pending is not None:
                st = _STATS.match(s)
                if st:
                    _fill_stats(pending, st, q, ln)
                    mod_rows.append(pending)
                    pending = None
                    continue
            mm = _MODLINE.match(raw)
            if not mm:
                q.add("unparsed_line", ln, f"detailed-profile line not understood: {s[:80]!r}")
                continue
            while stack and stack[-1][0] >= indent:
                stack.pop()
            name = mm.group("name") or ""
            parent = stack[-1][1] if stack else None
            path = name if parent in (None, "") else f"{parent}.{name}"
            if parent is None:
                path = ""
            row: dict[str, Any] = dict(path=path, name=name, type=mm.group("type"), depth=len(stack))
            rest = mm.group("rest").strip()
            if rest == "":
                pending = row
                stack.append((indent, path))
                continue
            body = rest[:-1] if rest.endswith(")") else rest
            st = _STATS.match(body)
            if st:
                _fill_stats(row, st, q, ln)
            else:
                q.add("unparsed_line", ln, f"module stats not understood: {s[:80]!r}")
            mod_rows.append(row)
    if section == "detailed" and mod_rows and not closed and not cut:
        q.add("truncated", lines[-1][0] if lines else 0, "the detailed profile has no closing dashed line")
    prof.summary = pd.DataFrame(summary_rows, columns=["key", "label", "text", "value", "unit", "flag"])
    prof.aggregated = pd.DataFrame(agg_rows, columns=["depth", "metric", "module_type", "text", "value", "unit", "flag"])
    cols = ["path", "name", "type", "depth", "params", "params_ratio", "macs", "macs_ratio", "fwd_latency_ns",
            "fwd_latency_ratio", "fwd_flops_per_s", "extra_repr", "flag"]
    mods = pd.DataFrame(mod_rows)
    _note_shared(mods, q)
    for c in cols:
        if c not in mods:
            mods[c] = np.nan if c not in ("path", "name", "type", "extra_repr", "flag") else ""
    mods = mods[cols]
    mods["flag"] = mods["flag"].fillna("")
    mods["extra_repr"] = mods["extra_repr"].fillna("")
    prof.modules = mods
    # epoch bug makes every latency % and the root's FLOPS meaningless
    if "epoch_as_latency" in set(r[0] for r in q.rows) and len(mods):
        root_bad = mods["fwd_latency_ns"].isna() | (mods["flag"] == "epoch_as_latency")
        if root_bad.any():
            mods.loc[:, "fwd_latency_ratio"] = np.nan
            mods.loc[root_bad, "fwd_flops_per_s"] = np.nan
            mods.loc[~root_bad & (mods["flag"] == ""), "flag"] = "latency_ratio_invalid"
    if zero_stage == 3:
        q.add("zero3_doubled_macs", 0)
    prof.quirks = q.frame()
    return prof


def _note_shared(mods: pd.DataFrame, q: _Quirks) -> None:
    """Name the modules shared by several parents (one instance registered in several places), flag their
    rows ``shared_module`` and say so in one quirk per module.

    DeepSpeed prints such a module once per parent, each time with the totals of *all* its calls (its
    hooks add up every call; measured with DeepSpeed 0.19: a ``Linear`` shared by two blocks prints
    59.01 ms under each, more than either block's 27.4 / 31.99 ms), and ``module.parameters()`` counts
    its parameters once, the tree once per parent. Evidence, any of: a parent whose children's params
    sum to more than its own; a module with more MACs or latency than its parent. The shared module is
    the set of rows printed identically (type, numbers, extra repr) at several paths, one of which has
    more MACs or latency than its parent, or whose copies under a parent make up that parent's excess
    params exactly; evidence no such set explains is reported for the parent alone.
    """
    if not len(mods) or "params" not in mods or "path" not in mods:
        return
    paths = mods["path"].astype(str).tolist()
    parent = [p.rsplit(".", 1)[0] if "." in p else ("" if p else None) for p in paths]
    kids = pd.DataFrame({"parent": parent, "params": mods["params"]}).dropna()
    sums = kids.groupby("parent")["params"].sum()
    own = dict(zip(paths, mods["params"]))
    lines = dict(zip(paths, mods["line"])) if "line" in mods else {}
    over: dict[str, tuple[float, float]] = {}
    for p, total in sums.items():
        mine = own.get(p)
        if mine is not None and mine == mine and total > mine * 1.05 + 1:
            over[str(p)] = (float(total), float(mine))
    row_of = {p: i for i, p in enumerate(paths)}
    above: dict[str, str] = {}  # path -> what it has more of than its parent
    for col, what in (("fwd_latency_ns", "latency"), ("macs", "MACs")):
        if col not in mods:
            continue
        v = mods[col].tolist()
        for i, par in enumerate(parent):
            j = row_of.get(par) if par is not None else None
            if j is not None and v[i] == v[i] and v[j] == v[j] and v[i] > v[j] * 1.001 and i not in above:
                a, b = ((fmt_ms_text(v[i], 2), fmt_ms_text(v[j], 2)) if col == "fwd_latency_ns"
                        else (f"{v[i]:,.0f} MACs", f"{v[j]:,.0f} MACs"))
                above[paths[i]] = f"more {what} than its parent {par or 'the root module'!r} ({a} vs {b})"
    keys = [c for c in ("type", "params", "macs", "fwd_latency_ns", "fwd_flops_per_s", "extra_repr") if c in mods]
    groups: dict[tuple[Any, ...], list[str]] = {}
    for i, key in enumerate(mods[keys].astype(str).itertuples(index=False, name=None)):
        if paths[i]:
            groups.setdefault(key, []).append(paths[i])
    explained: set[str] = set()
    flag = mods["flag"].tolist() if "flag" in mods else [""] * len(mods)
    for key, ps in groups.items():
        if len(ps) < 2:
            continue
        ev = [above[p] for p in ps if p in above]
        par_v = float(key[keys.index("params")]) if "params" in keys else float("nan")
        # a parent's excess params explained by this module: (copies under it - 1) x its params
        anc = [a for a, (total, mine) in over.items()
               if (k := sum(p.startswith(a + ".") or a == "" for p in ps)) >= 2
               and abs((k - 1) * par_v - (total - mine)) <= 0.05 * (total - mine) + 1]
        if not ev and not anc:
            continue
        explained |= set(anc)
        for p in ps:
            if flag[row_of[p]] in ("", None) or flag[row_of[p]] != flag[row_of[p]]:
                flag[row_of[p]] = "shared_module"
        why = [f"{ps[[p in above for p in ps].index(True)]!r} has {ev[0]}"] if ev else []
        why += [f"the children of {a or 'the root module'!r} sum to {over[a][0]:,.0f} params, more than its own "
                f"{over[a][1]:,.0f}" for a in anc[:1]]
        ln = lines.get(ps[0], 0)
        q.add("shared_module", int(ln) if ln == ln else 0,
              f"one {key[0]} module is printed under several parents ({', '.join(repr(p) for p in ps)}, identical "
              f"numbers): {'; '.join(why)}. It is one module shared by those parents: each place shows the totals "
              "of all its calls, so sums over the tree count it once per parent")
    if "flag" in mods:
        mods["flag"] = flag
    for p, (total, mine) in over.items():
        if p in explained:
            continue
        ln = lines.get(p, 0)
        q.add("shared_module", int(ln) if ln == ln else 0,
              f"the children of {p or 'the root module'!r} sum to {total:,.0f} params, more than its own {mine:,.0f}: "
              "a submodule is shared by several parents and counted once per parent (sums over the tree "
              "double-count it)")


def _pct(text: str, q: _Quirks, ln: int) -> float:
    v = to_float(text)
    if v != v:
        q.add("bad_number", ln, f"percentage {text[:40]!r} is not a number")
    return v / 100


def _fill_stats(row: dict[str, Any], st: re.Match[str], q: _Quirks, ln: int) -> None:
    if st.group("sep") == "," and not any(r[0] == "older_layout" and "Params" in r[2] for r in q.rows):
        q.add("older_layout", ln, "module stats written 'x, y% Params' (older DeepSpeed)")
    row["params"] = parse_quantity(st.group("params"), "params")[0]
    row["params_ratio"] = _pct(st.group("params_pct"), q, ln)
    row["macs"] = parse_quantity(st.group("macs"))[0]
    row["macs_ratio"] = _pct(st.group("macs_pct"), q, ln)
    lat = parse_quantity(st.group("lat"))[0]
    row["fwd_latency_ratio"] = _pct(st.group("lat_pct"), q, ln)
    row["fwd_flops_per_s"] = parse_quantity(st.group("flops"))[0]
    row["extra_repr"] = (st.group("extra") or "").strip().rstrip(",").strip()
    row["line"] = ln
    row["flag"] = ""
    if lat > _EPOCH_NS:
        q.add("epoch_as_latency", ln, f"module {row.get('type')} fwd latency {st.group('lat').strip()} is the epoch time")
        lat = float("nan")
        row["flag"] = "epoch_as_latency"
    row["fwd_latency_ns"] = lat
