"""DeepSpeed text outputs -> pandas DataFrames with units.

Reads what DeepSpeed prints (or writes to ``flops_profiler.output_file``):

- the **flops profiler** report (``print_model_profile``): summary ``key: value`` lines, the
  "Aggregated Profile per GPU" block and the "Detailed Profile per GPU" module tree;
- the **comms logger**: the ``log_summary()`` table (and its straggler block) and the per-op
  ``comm op: ...`` lines printed when ``comms_logger.verbose`` is on and DeepSpeed's logger is at INFO;
- the ``wall_clock_breakdown`` timer lines ``[Rank 0] time (ms) | fwd: .. | bwd: ..``;
- ``see_memory_usage`` lines ``MA x GB Max_MA x GB CA x GB Max_CA x GB`` and
  ``CPU Virtual Memory: used = x GB, percent = y%``.

Format facts: DeepSpeed 0.19.8 sources (``profiling/flops_profiler/profiler.py``:
``number_to_string`` decimal prefixes T/G/M/K/m/u, ``params_to_string`` spells 1e9 ``B``;
``utils/comms_logging.py``: ``convert_size`` 1024-based B/KB/MB/GB rounded to 2 decimals,
``calc_bw_log`` Gbps = 1e9 bit/s; ``utils/timer.py``; ``runtime/utils.py:see_memory_usage``) and
../shared/notes/formats.md §4.7.

Real-world quirks are flagged, never fatal (see :data:`QUIRKS`): every parser returns what it
could read and a ``quirks`` DataFrame (``kind, line, message``) saying what it flagged.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "QUIRKS",
    "FlopsProfile",
    "CommsLog",
    "DeepSpeedLog",
    "parse_quantity",
    "parse_msg_size",
    "strip_ansi",
    "parse_flops_profile",
    "parse_flops_profiles",
    "parse_comms_summary",
    "parse_comms_ops",
    "parse_timers",
    "parse_memory_usage",
    "parse_log",
    "zero_stage_of",
]

#: Quirk kinds the parsers flag (``quirks`` frames' ``kind`` column).
QUIRKS = {
    "ansi_colour": "ANSI colour/escape codes were stripped before parsing",
    "epoch_as_latency": (
        "a latency of more than 1e6 s (e.g. '1.8 Gs') is the Unix epoch time in seconds, DeepSpeed's "
        "start-time bug under the engine; the value is set to NaN and the dependent FLOPS/latency %% are "
        "marked invalid"
    ),
    "step_off_by_one": (
        "'Profile Summary at step N' prints the engine's global step after the increment: the profiled "
        "step is N-1 (config flops_profiler.profile_step)"
    ),
    "zero3_doubled_macs": (
        "under ZeRO stage 3 the flops profiler counts MACs/flops twice (its hooks run twice; observed with "
        "DeepSpeed 0.19.8: 1.35 MMACs at stage 3 vs 675.84 KMACs at stages 1/2 for the same model); "
        "divide by 2 to compare"
    ),
    "rank_prefix": "lines carried a launcher rank prefix ('[rank1]:', '[default0]:'), stripped and kept as rank",
    "unparsed_line": "a line looked like DeepSpeed output but could not be parsed",
    "truncated": "the report ends before its closing line",
    "older_layout": "an older DeepSpeed layout was recognised (e.g. 'x, y% Params' instead of 'x = y% Params')",
}

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)?(\d+)\]:\s?")
_LOG_PREFIX = re.compile(
    r"^\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\]\s+\[(?P<level>[A-Z]+)\]\s+\[(?P<where>[^\]]*)\]\s*"
)
_DS_RANK = re.compile(r"\[Rank (\d+)\]\s*")

_SI = {"T": 1e12, "G": 1e9, "M": 1e6, "K": 1e3, "k": 1e3, "B": 1e9, "": 1.0, "m": 1e-3, "u": 1e-6, "µ": 1e-6, "n": 1e-9}
_QTY = re.compile(r"^\s*(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<pre>[TGMKkBmuµn]?)(?P<unit>MACs|FLOPS|s|B)?\s*$")


def strip_ansi(text: str) -> tuple[str, int]:
    """Remove ANSI escape sequences; return the clean text and how many were removed."""
    n = 0

    def sub(_m: re.Match[str]) -> str:
        nonlocal n
        n += 1
        return ""

    return _ANSI.sub(sub, text), n


def parse_quantity(text: str, kind: str = "") -> tuple[float, str]:
    """Parse a DeepSpeed flops-profiler quantity (``"1.35 MMACs"``, ``"85 K"``, ``"4.07 ms"``, ``"7.2 B"``).

    Parameters
    ----------
    text : str
        The printed value.
    kind : str
        Hint for unit-less values: ``"params"``, ``"flops"``, ``"macs"``, ``"time"`` (no effect on the number).

    Returns
    -------
    (value, unit) : tuple of float and str
        ``value`` in base units: a count, MAC, FLOP, FLOP/s or **ns** for durations; ``unit`` is
        ``""``, ``"MAC"``, ``"FLOP"``, ``"FLOP/s"`` or ``"ns"``. ``(nan, "")`` when unreadable.

    Notes
    -----
    Prefixes are DeepSpeed's ``number_to_string`` decimal ones (T, G, M, K, m, u); ``params_to_string``
    writes ``B`` for 1e9 and some versions lower-case ``k``. Case matters: ``M`` is 1e6, ``m`` 1e-3.
    """
    m = _QTY.match(text or "")
    if not m:
        return float("nan"), ""
    num = float(m.group("num"))
    pre, unit = m.group("pre"), m.group("unit") or ""
    if unit == "B" and not pre:  # "7.2 B" params (billions): the regex puts B in unit
        pre, unit = "B", ""
    val = num * _SI.get(pre, 1.0)
    if unit == "MACs":
        return val, "MAC"
    if unit == "FLOPS":
        return val, "FLOP/s"
    if unit == "s":
        return val * 1e9, "ns"
    if kind == "flops":
        return val, "FLOP"
    if kind == "macs":
        return val, "MAC"
    return val, ""


_SIZE = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>B|KB|MB|GB|TB|PB)\s*$")
_SIZE_POW = {"B": 0, "KB": 1, "MB": 2, "GB": 3, "TB": 4, "PB": 5}


def parse_msg_size(text: str) -> float:
    """``convert_size`` text (``"332.04 KB"``, ``"0B"``) -> bytes (float; 1024-based; NaN if unreadable).

    DeepSpeed rounds to two decimals, so sizes above 1 KB are approximate (±0.005 of the unit).
    """
    m = _SIZE.match(text or "")
    if not m:
        return float("nan")
    return float(m.group("num")) * 1024.0 ** _SIZE_POW[m.group("unit")]


def _read(source: str | os.PathLike[str]) -> str:
    """Text of ``source``: a path to an existing file, else the string itself."""
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source and len(source) < 4096
                                            and os.path.exists(source)):
        with open(source, encoding="utf-8", errors="replace") as f:
            return f.read()
    return str(source)


class _Quirks:
    def __init__(self) -> None:
        self.rows: list[tuple[str, int, str]] = []

    def add(self, kind: str, line: int, message: str = "") -> None:
        self.rows.append((kind, line, message or QUIRKS.get(kind, kind)))

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=["kind", "line", "message"])


def _clean_lines(text: str, q: _Quirks) -> list[tuple[int, int, str]]:
    """-> [(line_no (1-based), launcher_rank or -1, text)] with ANSI codes and rank prefixes removed."""
    text, n = strip_ansi(text)
    if n:
        q.add("ansi_colour", 0, f"{n} ANSI escape sequences stripped")
    out = []
    nprefix = 0
    for i, line in enumerate(text.splitlines(), 1):
        r = -1
        m = _RANK_PREFIX.match(line)
        if m:
            r = int(m.group(1))
            line = line[m.end():]
            nprefix += 1
        out.append((i, r, line.rstrip("\r")))
    if nprefix:
        q.add("rank_prefix", 0, f"{nprefix} lines had a launcher rank prefix")
    return out


def zero_stage_of(config: dict | str | os.PathLike[str] | None) -> int | None:
    """ZeRO stage from a DeepSpeed config (dict, JSON text or path); None when absent or ``"auto"``."""
    if config is None:
        return None
    if not isinstance(config, dict):
        try:
            config = json.loads(_read(config))
        except (OSError, ValueError):
            return None
    st = (config.get("zero_optimization") or {}).get("stage") if isinstance(config, dict) else None
    return int(st) if isinstance(st, (int, float)) or (isinstance(st, str) and st.isdigit()) else None


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

_BANNER = re.compile(r"-+\s*DeepSpeed Flops Profiler\s*-+")
_AT_STEP = re.compile(r"Profile Summary at step\s+(\d+)")
_KV = re.compile(r"^(?P<label>[A-Za-z][^:]*?(?:\([^)]*\))?[^:]*):\s+(?P<value>\S.*?)\s*$")
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*[TGMKkBmuµn]?"
_STATS = re.compile(
    rf"^(?P<params>{_NUM})\s*(?P<sep>[=,])\s*(?P<params_pct>[\d.]+)% Params,\s*"
    rf"(?P<macs>{_NUM}\s*MACs)\s*[=,]\s*(?P<macs_pct>[\d.]+)% MACs,\s*"
    rf"(?P<lat>{_NUM}\s*s)\s*[=,]\s*(?P<lat_pct>[\d.]+)% latency,\s*"
    rf"(?P<flops>{_NUM}\s*FLOPS)\s*(?:,\s*(?P<extra>.*?))?,?\s*$"
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
    """

    step: int = -1
    reported_step: int = -1
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    aggregated: pd.DataFrame = field(default_factory=pd.DataFrame)
    modules: pd.DataFrame = field(default_factory=pd.DataFrame)
    quirks: pd.DataFrame = field(default_factory=pd.DataFrame)
    zero_stage: int | None = None

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
    starts = [k for k, (_i, _r, s) in enumerate(lines) if _BANNER.search(s)]
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
    ValueError
        When ``source`` holds no report (no "DeepSpeed Flops Profiler" banner); the message names it.
    """
    profs = parse_flops_profiles(source, zero_stage=zero_stage, config=config)
    if not profs:
        where = os.fspath(source) if isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and os.path.exists(source)) else "the given text"
        msg = f"{where}: no DeepSpeed flops-profiler report (banner 'DeepSpeed Flops Profiler' not found)"
        raise ValueError(msg)
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
    for ln, _r, raw in lines:
        s = raw.strip()
        if not s:
            continue
        if _BANNER.search(s):
            continue
        m = _AT_STEP.search(s)
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
            if section == "detailed" and mod_rows:
                closed = True
            continue
        if section == "summary":
            kv = _KV.match(s)
            if not kv or s.endswith(":"):
                continue
            label, value = kv.group("label"), kv.group("value")
            key, kind = _summary_key(label)
            if key in ("world_size", "data_parallel_size", "model_parallel_size", "batch_size_per_gpu",
                       "samples_per_s"):
                try:
                    val, unit = float(value), ("samples/s" if key == "samples_per_s" else "")
                except ValueError:
                    val, unit = float("nan"), ""
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
                depth = int(md.group(1))
                continue
            ma = re.match(r"^(params|MACs|fwd latency)\s*-\s*(\{.*\})\s*$", s)
            if ma:
                metric = {"params": "params", "MACs": "macs", "fwd latency": "fwd_latency"}[ma.group(1)]
                try:
                    d = ast.literal_eval(ma.group(2))
                except (ValueError, SyntaxError):
                    q.add("unparsed_line", ln, f"aggregated line not a dict: {s[:80]!r}")
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
    if section == "detailed" and mod_rows and not closed:
        q.add("truncated", lines[-1][0] if lines else 0, "the detailed profile has no closing dashed line")
    prof.summary = pd.DataFrame(summary_rows, columns=["key", "label", "text", "value", "unit", "flag"])
    prof.aggregated = pd.DataFrame(agg_rows, columns=["depth", "metric", "module_type", "text", "value", "unit", "flag"])
    cols = ["path", "name", "type", "depth", "params", "params_ratio", "macs", "macs_ratio", "fwd_latency_ns",
            "fwd_latency_ratio", "fwd_flops_per_s", "extra_repr", "flag"]
    mods = pd.DataFrame(mod_rows)
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


def _fill_stats(row: dict[str, Any], st: re.Match[str], q: _Quirks, ln: int) -> None:
    if st.group("sep") == "," and not any(r[0] == "older_layout" and "Params" in r[2] for r in q.rows):
        q.add("older_layout", ln, "module stats written 'x, y% Params' (older DeepSpeed)")
    row["params"] = parse_quantity(st.group("params"), "params")[0]
    row["params_ratio"] = float(st.group("params_pct")) / 100
    row["macs"] = parse_quantity(st.group("macs"))[0]
    row["macs_ratio"] = float(st.group("macs_pct")) / 100
    lat = parse_quantity(st.group("lat"))[0]
    row["fwd_latency_ratio"] = float(st.group("lat_pct")) / 100
    row["fwd_flops_per_s"] = parse_quantity(st.group("flops"))[0]
    row["extra_repr"] = (st.group("extra") or "").strip()
    row["flag"] = ""
    if lat > _EPOCH_NS:
        q.add("epoch_as_latency", ln, f"module {row.get('type')} fwd latency {st.group('lat').strip()} is the epoch time")
        lat = float("nan")
        row["flag"] = "epoch_as_latency"
    row["fwd_latency_ns"] = lat


# --------------------------------------------------------------------------- comms logger

_COMMS_COLS = {
    "comm. op": "op",
    "message size": "msg_size",
    "count": "count",
    "total latency(ms)": "total_latency_ns",
    "avg latency(ms)": "avg_latency_ns",
    "tput_avg (gbps)": "algbw_gbps",
    "busbw_avg (gbps)": "busbw_gbps",
    "total comm lat(ms)": "total_comm_latency_ns",
    "total straggler(ms)": "total_straggler_ns",
    "avg comm lat(ms)": "avg_comm_latency_ns",
    "avg straggler(ms)": "avg_straggler_ns",
}
_CALLER = re.compile(r"^(?P<op>.*?)\s*\|\s*\[Caller Func:\s*(?P<caller>[^\]]*)\]\s*$")


@dataclass
class CommsLog:
    """Comms-logger output.

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per (op, caller, message size) of ``log_summary()``: ``op, caller, msg_size, msg_bytes,
        count, total_latency_ns, avg_latency_ns, algbw_gbps, busbw_gbps, table, rank``
        (``table`` = ``"summary"`` or ``"straggler"``, whose rows carry ``total_comm_latency_ns,
        total_straggler_ns, avg_comm_latency_ns, avg_straggler_ns`` instead). ``msg_bytes`` is
        1024-based and approximate (DeepSpeed prints 2 decimals); for all_gather it is the per-rank
        input, for all_reduce/reduce_scatter the whole tensor. Gbps = 1e9 bit/s (DeepSpeed's
        ``calc_bw_log``: ``tput`` is algbw, for all_reduce ``2*size/t``, for all_gather/reduce_scatter
        ``n*size/t``).
    ops : pandas.DataFrame
        Verbose per-op lines: ``op, caller, latency_ns, msg_size, msg_bytes, algbw_gbps, busbw_gbps, rank, time, line``.
    quirks : pandas.DataFrame
    """

    summary: pd.DataFrame
    ops: pd.DataFrame
    quirks: pd.DataFrame

    def counts(self) -> pd.Series:
        """Calls per op from the summary table (int64 Series indexed by op)."""
        s = self.summary
        if s.empty:
            return pd.Series(dtype="int64")
        s = s[s["table"] == "summary"]
        return s.groupby("op", observed=True)["count"].sum().astype("int64")


_HEADER_NAMES = re.compile("|".join(re.escape(k) for k in sorted(_COMMS_COLS, key=len, reverse=True)), re.I)
#: a table row: indented, a convert_size message size ("332.04 KB", "0B"), then numbers
_ROW = re.compile(r"^\s+(\d+(?:\.\d+)?\s?(?:B|KB|MB|GB|TB|PB))\s+([-\d.eE+\s]+?)\s*$")


def _header_cols(s: str) -> list[str]:
    """Column names of a comms table header (DeepSpeed pads each to 20 characters, but
    'Total straggler(ms)' is 19 + 1 space, so splitting on runs of spaces would merge two)."""
    found = [m.group(0).lower() for m in _HEADER_NAMES.finditer(s)]
    chunks = [s[i:i + 20].strip().lower() for i in range(0, len(s.rstrip()), 20)]
    chunks = [c for c in chunks if c]
    return found if len(found) >= len(chunks) else chunks


def parse_comms_summary(source: str | os.PathLike[str]) -> pd.DataFrame:
    """The comms-logger ``log_summary()`` table(s) -> DataFrame (see :class:`CommsLog` ``summary``)."""
    return parse_log(source).comms.summary


def parse_comms_ops(source: str | os.PathLike[str]) -> pd.DataFrame:
    """The comms-logger verbose ``comm op: ...`` lines -> DataFrame (see :class:`CommsLog` ``ops``).

    These lines appear only when ``comms_logger.verbose`` is true **and** DeepSpeed's logger is at INFO in
    the ranks: ``"log_level": "info"`` in the config where DeepSpeed declares that key (PR #8067; 0.19.8
    does), else ``nbprof.deepspeed.attach.set_deepspeed_log_level("info")`` (see ``nbprof.deepspeed.config``).
    """
    return parse_log(source).comms.ops


def _comms_tables(lines: list[tuple[int, int, str]], q: _Quirks) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    cols: list[str] | None = None
    op = caller = None
    table = "summary"
    rank = -1
    for ln, r, raw in lines:
        s = raw.rstrip()
        if s.strip().startswith("Comm. Op"):
            hdr = _header_cols(s)
            cols = [_COMMS_COLS.get(h, re.sub(r"[^a-z0-9]+", "_", h).strip("_")) for h in hdr]
            table = "straggler" if "total_straggler_ns" in cols else "summary"
            op = caller = None
            rank = r
            continue
        if cols is None:
            continue
        if "Breakdown with straggler effect" in s or not s.strip():
            continue
        if not raw[:1].isspace():
            cm = _CALLER.match(s)
            if cm:
                op, caller = cm.group("op").strip(), cm.group("caller").strip()
            elif re.fullmatch(r"[A-Za-z_][\w.]*", s.strip()):
                op, caller = s.strip(), ""
            # any other line (interleaved output of another rank, a log line) is skipped
            continue
        rm = _ROW.match(s)
        if not rm:
            continue
        vals = [rm.group(1), *rm.group(2).split()]
        if op is None or len(vals) != len(cols) - 1:
            q.add("unparsed_line", ln, f"comms table row not understood: {s.strip()[:80]!r}")
            continue
        row: dict[str, Any] = dict(op=op, caller=caller, table=table, rank=rank)
        for c, v in zip(cols[1:], vals):
            if c == "msg_size":
                row["msg_size"] = v
                row["msg_bytes"] = parse_msg_size(v)
            elif c == "count":
                try:
                    row["count"] = int(v)
                except ValueError:
                    row["count"] = -1
                    q.add("unparsed_line", ln, f"count {v!r} not an integer")
            else:
                try:
                    x = float(v)
                except ValueError:
                    x = float("nan")
                    q.add("unparsed_line", ln, f"{c} {v!r} not a number")
                row[c] = x * 1e6 if c.endswith("_ns") else x
        rows.append(row)
    base = ["op", "caller", "msg_size", "msg_bytes", "count", "total_latency_ns", "avg_latency_ns", "algbw_gbps",
            "busbw_gbps", "table", "rank"]
    df = pd.DataFrame(rows)
    for c in base:
        if c not in df:
            df[c] = pd.Series(dtype="float64")
    extra = [c for c in df.columns if c not in base]
    df = df[base + extra]
    if len(df):
        df["count"] = df["count"].astype("int64")
    return df


_OPLINE = re.compile(
    r"comm op:\s*(?P<op>[^|]+?)\s*\|\s*(?:\[Caller Func:\s*(?P<caller>[^\]]*)\]\s*\|\s*)?"
    r"time \(ms\):\s*(?P<t>[-\d.eE+]+)\s*\|\s*msg size:\s*(?P<size>[^|]+?)\s*\|\s*"
    r"algbw \(Gbps\):\s*(?P<alg>[-\d.eE+]+)\s*\|\s*busbw \(Gbps\):\s*(?P<bus>[-\d.eE+]+)"
)


def _comms_ops(lines: list[tuple[int, int, str]], q: _Quirks) -> pd.DataFrame:
    rows = []
    for ln, r, s in lines:
        if "comm op:" not in s:
            continue
        m = _OPLINE.search(s)
        if not m:
            q.add("unparsed_line", ln, f"comm op line not understood: {s.strip()[:100]!r}")
            continue
        lp = _LOG_PREFIX.match(s)
        rk = _DS_RANK.search(s)
        rows.append(dict(
            op=m.group("op").strip(), caller=(m.group("caller") or "").strip(),
            latency_ns=float(m.group("t")) * 1e6, msg_size=m.group("size").strip(),
            msg_bytes=parse_msg_size(m.group("size")), algbw_gbps=float(m.group("alg")),
            busbw_gbps=float(m.group("bus")), rank=int(rk.group(1)) if rk else r,
            time=lp.group("time") if lp else "", line=ln))
    return pd.DataFrame(rows, columns=["op", "caller", "latency_ns", "msg_size", "msg_bytes", "algbw_gbps",
                                       "busbw_gbps", "rank", "time", "line"])


# --------------------------------------------------------------------------- timers, memory

_TIMER = re.compile(r"time \(ms\)\s*((?:\|\s*[\w.]+:\s*[-\d.eE+]+\s*)+)")


def parse_timers(source: str | os.PathLike[str]) -> pd.DataFrame:
    """``wall_clock_breakdown`` lines -> long DataFrame.

    Columns: ``rank`` (from ``[Rank N]``, else the launcher prefix, else -1), ``group`` (index of the
    line among timer lines), ``timer`` (``fwd_microstep``, ``bwd``, ``optimizer_step``... as printed;
    older DeepSpeed spells ``forward_microstep``/``backward_microstep``), ``time_ns``, ``line``.
    The lines carry no step number: DeepSpeed prints them every ``steps_per_print`` steps.
    """
    return parse_log(source).timers


def _timers(lines: list[tuple[int, int, str]]) -> pd.DataFrame:
    rows = []
    g = 0
    for ln, r, s in lines:
        m = _TIMER.search(s)
        if not m:
            continue
        rk = _DS_RANK.search(s)
        rank = int(rk.group(1)) if rk else r
        for part in m.group(1).split("|"):
            part = part.strip()
            if not part:
                continue
            k, v = part.rsplit(":", 1)
            rows.append(dict(rank=rank, group=g, timer=k.strip(), time_ns=float(v) * 1e6, line=ln))
        g += 1
    return pd.DataFrame(rows, columns=["rank", "group", "timer", "time_ns", "line"])


_MEM = re.compile(
    r"MA\s+(?P<ma>[\d.]+)\s*GB\s+Max_MA\s+(?P<max_ma>[\d.]+)\s*GB\s+CA\s+(?P<ca>[\d.]+)\s*GB\s+Max_CA\s+(?P<max_ca>[\d.]+)\s*GB"
)
_VM = re.compile(r"CPU Virtual Memory:\s*used\s*=\s*(?P<used>[\d.]+)\s*GB,\s*percent\s*=\s*(?P<pct>[\d.]+)%")
_GIB = 1024**3


def parse_memory_usage(source: str | os.PathLike[str]) -> pd.DataFrame:
    """``see_memory_usage`` output -> DataFrame.

    Columns: ``message`` (the line printed before, DeepSpeed's label), ``allocated_bytes`` (MA),
    ``max_allocated_bytes`` (Max_MA), ``reserved_bytes`` (CA), ``max_reserved_bytes`` (Max_CA),
    ``cpu_used_bytes``, ``cpu_used_ratio``, ``line``. DeepSpeed prints GiB (1024**3) rounded to 2
    decimals (Max_CA to an integer), so values are approximate to that precision.
    """
    return parse_log(source).memory


def _memory(lines: list[tuple[int, int, str]]) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    prev = ""
    for ln, _r, s in lines:
        m = _MEM.search(s)
        if m:
            rows.append(dict(message=prev.strip(), allocated_bytes=float(m.group("ma")) * _GIB,
                             max_allocated_bytes=float(m.group("max_ma")) * _GIB,
                             reserved_bytes=float(m.group("ca")) * _GIB,
                             max_reserved_bytes=float(m.group("max_ca")) * _GIB,
                             cpu_used_bytes=np.nan, cpu_used_ratio=np.nan, line=ln))
        else:
            v = _VM.search(s)
            if v and rows and np.isnan(rows[-1]["cpu_used_bytes"]):
                rows[-1]["cpu_used_bytes"] = float(v.group("used")) * _GIB
                rows[-1]["cpu_used_ratio"] = float(v.group("pct")) / 100
            elif s.strip():
                prev = s
    return pd.DataFrame(rows, columns=["message", "allocated_bytes", "max_allocated_bytes", "reserved_bytes",
                                       "max_reserved_bytes", "cpu_used_bytes", "cpu_used_ratio", "line"])


# --------------------------------------------------------------------------- whole log


@dataclass
class DeepSpeedLog:
    """Everything nbprof reads from one DeepSpeed log (stdout of the launcher/torchrun, or a file).

    Attributes
    ----------
    flops : list of FlopsProfile
    comms : CommsLog
    timers : pandas.DataFrame
        See :func:`parse_timers`.
    memory : pandas.DataFrame
        See :func:`parse_memory_usage`.
    quirks : pandas.DataFrame
        ``kind, line, message`` for the whole log.
    """

    flops: list[FlopsProfile]
    comms: CommsLog
    timers: pd.DataFrame
    memory: pd.DataFrame
    quirks: pd.DataFrame

    def timer_means(self) -> pd.DataFrame:
        """Per rank and timer: ``count``, ``mean_ns``, ``total_ns`` over every printed timer line."""
        t = self.timers
        if t.empty:
            return pd.DataFrame(columns=["rank", "timer", "count", "mean_ns", "total_ns"])
        return (t.groupby(["rank", "timer"])["time_ns"].agg(count="count", mean_ns="mean", total_ns="sum")
                .reset_index())


def parse_log(source: str | os.PathLike[str] | Iterable[str], *, zero_stage: int | None = None,
              config: dict | str | os.PathLike[str] | None = None) -> DeepSpeedLog:
    """Parse a DeepSpeed log: flops reports, comms tables and op lines, timers, memory lines.

    Parameters
    ----------
    source : str, PathLike or iterable of str
        A path, the text, or several paths/texts (e.g. one log per rank) read one after the other.
    zero_stage, config
        As in :func:`parse_flops_profiles`.

    Returns
    -------
    DeepSpeedLog
        Never raises on odd content: what could not be read is listed in ``quirks``.

    Raises
    ------
    FileNotFoundError
        Only when ``source`` is a PathLike that does not exist.
    """
    if isinstance(source, os.PathLike) and not os.path.exists(source):
        raise FileNotFoundError(f"no such DeepSpeed log: {os.fspath(source)!r}")
    if not isinstance(source, (str, os.PathLike)):
        text = "\n".join(_read(s) for s in source)
    else:
        text = _read(source)
    if zero_stage is None:
        zero_stage = zero_stage_of(config)
    q = _Quirks()
    lines = _clean_lines(text, q)
    flops = parse_flops_profiles(text, zero_stage=zero_stage)
    comms = CommsLog(summary=_comms_tables(lines, q), ops=_comms_ops(lines, q), quirks=q.frame())
    log = DeepSpeedLog(flops=flops, comms=comms, timers=_timers(lines), memory=_memory(lines), quirks=q.frame())
    return log
