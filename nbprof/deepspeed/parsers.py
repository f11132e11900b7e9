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

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ._text import (  # re-exported
    _DS_RANK,
    _LOG_PREFIX,
    QUIRKS,
    TRACEBACK,
    _clean_lines,
    _Quirks,
    _read,
    parse_msg_size,
    parse_quantity,
    strip_ansi,
    to_float,
    traceback_error,
    tracebacks,
    zero_stage_of,
    zero_stage_of_traces,
)
from .flops import FlopsProfile, parse_flops_profile, parse_flops_profiles  # re-exported

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
    "zero_stage_of_traces",
]


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
def _caller(s: str) -> tuple[str, str] | None:
    """``op | [Caller Func: f]`` -> (op, f); one pass (the regex it replaces was quadratic)."""
    op, sep, rest = s.partition("|")
    rest = rest.strip()
    if not sep or not rest.startswith("[Caller Func:") or not rest.endswith("]") or "]" in rest[:-1]:
        return None
    return op.strip(), rest[len("[Caller Func:"):-1].strip()


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
_ROW = re.compile(r"^\s+(\d+(?:\.\d+)?\s?(?:B|KB|MB|GB|TB|PB))\s+([-\d.eE+][-\d.eE+\s]*)$")  # on rstripped lines


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
    for k, (ln, r, raw) in enumerate(lines):
        s = raw.rstrip()
        if cols is not None and s.lstrip().startswith(TRACEBACK):
            err, eln = traceback_error(lines, k)
            q.add("cut_short", ln, f"the comms-logger {table} table stops at a traceback at line {ln}: {err} "
                                   f"(line {eln}); {sum(1 for x in rows if x['table'] == table)} rows were read before it")
            cols = None
            continue
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
            cm = _caller(s)
            if cm:
                op, caller = cm
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
                x = to_float(v)
                if x != x:
                    q.add("bad_number", ln, f"{c} {v!r} not a number")
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


_NUMERIC = re.compile(r"[-\d.eE+]+")
_OP_FIELDS = {"time (ms)": "t", "msg size": "size", "algbw (gbps)": "alg", "busbw (gbps)": "bus"}


def _opline(s: str) -> dict[str, str] | None:
    """Fields of ``comm op: OP | [Caller Func: F] | time (ms): T | msg size: S | algbw (Gbps): A |
    busbw (Gbps): B`` (None when one is missing). Split on ``|``: one pass over the line (the regex
    it replaces took minutes on a line with a long run of spaces)."""
    parts = [p.strip() for p in s[s.index("comm op:") + len("comm op:"):].split("|")]
    out: dict[str, str] = {"op": parts[0], "caller": ""}
    rest = parts[1:]
    if rest and rest[0].startswith("[Caller Func:") and rest[0].endswith("]"):
        out["caller"] = rest[0][len("[Caller Func:"):-1].strip()
        rest = rest[1:]
    for p in rest:
        k, sep, v = p.partition(":")
        key = _OP_FIELDS.get(k.strip().lower())
        if sep and key and key not in out:
            v = v.strip()
            if key != "size":
                m = _NUMERIC.match(v)
                if not m:
                    return None
                v = m.group(0)
            out[key] = v
    if not out["op"] or len(out) != 6 or not out["size"]:
        return None
    return out


def _comms_ops(lines: list[tuple[int, int, str]], q: _Quirks) -> pd.DataFrame:
    rows = []
    for ln, r, s in lines:
        if "comm op:" not in s:
            continue
        m = _opline(s)
        if not m:
            q.add("unparsed_line", ln, f"comm op line not understood: {s.strip()[:100]!r}")
            continue
        lp = _LOG_PREFIX.match(s)
        rk = _DS_RANK.search(s)
        t, alg, bus = (to_float(m[g]) for g in ("t", "alg", "bus"))
        if t != t or alg != alg or bus != bus:
            q.add("bad_number", ln, f"comm op line with a field that is not a number: {s.strip()[:100]!r}")
        rows.append(dict(
            op=m["op"], caller=m["caller"],
            latency_ns=t * 1e6, msg_size=m["size"],
            msg_bytes=parse_msg_size(m["size"]), algbw_gbps=alg,
            busbw_gbps=bus, rank=int(rk.group(1)) if rk else r,
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


def _timers(lines: list[tuple[int, int, str]], q: _Quirks | None = None) -> pd.DataFrame:
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
            x = to_float(v)
            if x != x and q is not None:
                q.add("bad_number", ln, f"timer {k.strip()!r}: {v.strip()[:40]!r} is not a number")
            rows.append(dict(rank=rank, group=g, timer=k.strip(), time_ns=x * 1e6, line=ln))
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


def _memory(lines: list[tuple[int, int, str]], q: _Quirks | None = None) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    prev = ""
    for ln, _r, s in lines:
        m = _MEM.search(s)
        if m:
            vals = {g: to_float(m.group(g)) for g in ("ma", "max_ma", "ca", "max_ca")}
            if any(x != x for x in vals.values()) and q is not None:
                q.add("bad_number", ln, f"see_memory_usage line with a value that is not a number: {s.strip()[:100]!r}")
            rows.append(dict(message=prev.strip(), allocated_bytes=vals["ma"] * _GIB,
                             max_allocated_bytes=vals["max_ma"] * _GIB,
                             reserved_bytes=vals["ca"] * _GIB,
                             max_reserved_bytes=vals["max_ca"] * _GIB,
                             cpu_used_bytes=np.nan, cpu_used_ratio=np.nan, line=ln))
        else:
            v = _VM.search(s)
            if v and rows and np.isnan(rows[-1]["cpu_used_bytes"]):
                used, pct = to_float(v.group("used")), to_float(v.group("pct"))
                if (used != used or pct != pct) and q is not None:
                    q.add("bad_number", ln, f"CPU memory line with a value that is not a number: {s.strip()[:100]!r}")
                rows[-1]["cpu_used_bytes"] = used * _GIB
                rows[-1]["cpu_used_ratio"] = pct / 100
            elif s.strip():
                prev = s
    return pd.DataFrame(rows, columns=["message", "allocated_bytes", "max_allocated_bytes", "reserved_bytes",
                                       "max_reserved_bytes", "cpu_used_bytes", "cpu_used_ratio", "line"])


# --------------------------------------------------------------------------- training progress

_F = r"[-+]?(?:\d{1,30}(?:\.\d{0,30})?(?:[eE][-+]?\d{1,4})?|nan|inf)"
#: DeepSpeed ``utils/timer.py`` ``ThroughputTimer.stop`` (every ``steps_per_print`` global steps, rank 0)
_TPUT = re.compile(r"epoch=(?P<epoch>\d{1,9})/micro_step=(?P<micro>\d{1,12})/global_step=(?P<step>\d{1,12}),\s*"
                   rf"RunningAvgSamplesPerSec=(?P<avg>{_F}),\s*CurrSamplesPerSec=(?P<cur>{_F})"
                   r"(?:,\s*MemAllocated=(?P<ma>[\d.]{1,30})GB,\s*MaxMemAllocated=(?P<maxma>[\d.]{1,30})GB)?")
#: DeepSpeed ``runtime/pipe/engine.py`` ``_aggregate_total_loss`` print (pipeline engine)
_PIPE_TPUT = re.compile(rf"^steps:\s*(?P<step>\d{{1,12}})\s[^\n]{{0,400}}?samples/sec:\s*(?P<cur>{_F})")
_TOKENS = re.compile(rf"(?:tokens/s(?:ec)?|TokensPerSec|tokens_per_sec(?:ond)?)\s*[:=]\s*(?P<tok>{_F})", re.I)
_MAXCACHED = re.compile(r"MaxMemCached\s*[=:]\s*(?P<v>[\d.]{1,30})\s*GB")
#: DeepSpeed ``runtime/fp16/loss_scaler.py`` (``OVERFLOW! Rank R Skipping step. Attempted loss scale: S, reducing
#: to T``) and older fused optimizers (``Overflow detected. Skipping step. Attempted loss scale: ...``)
_OVERFLOW = re.compile(r"(?:OVERFLOW!|[Oo]verflow detected\.|overflow!)(?:\s*Rank (?P<rank>\d{1,9}))?\s*Skipping step\."
                       r"(?:\s*Attempted loss scale:\s*(?P<att>[\d.]{1,30})(?:,\s*reducing to\s*(?P<new>[\d.]{1,30}))?)?",
                       re.I)
#: DeepSpeed ``runtime/engine.py`` ``_report_progress``: ``step=N, skipped=K, lr=[...], mom=[...]``
_PROGRESS = re.compile(r"\bstep=(?P<step>\d{1,12}),\s*skipped=(?P<skipped>\d{1,12}),\s*lr=\[?(?P<lr>" + _F + ")")
#: the ZeRO stage as the engine prints it: ``Creating <dtype> ZeRO stage N optimizer`` (``engine.py``) and the config
#: dump ``zero_optimization_stage ...... N`` (``runtime/config.py`` ``print``)
_ZERO = re.compile(r"ZeRO stage (?P<a>\d) optimizer|zero_optimization_stage\s*\.{2,}\s*(?P<b>\d)\b")

_TPUT_COLS = ["rank", "line", "source", "epoch", "micro_step", "global_step", "samples_per_s", "avg_samples_per_s",
              "tokens_per_s", "mem_allocated_bytes", "max_mem_allocated_bytes", "max_mem_cached_bytes"]


def _throughput(lines: list[tuple[int, int, str]]) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for ln, r, s in lines:
        m = _TPUT.search(s)
        p = None if m else _PIPE_TPUT.search(s.strip())
        t = _TOKENS.search(s) if ("oken" in s) else None
        if not (m or p or t):
            continue
        c = _MAXCACHED.search(s) if "MaxMemCached" in s else None
        mp = m or p
        row = dict(rank=r, line=ln, source="ThroughputTimer" if m else ("pipe_engine" if p else "tokens"),
                   epoch=int(m.group("epoch")) if m else -1, micro_step=int(m.group("micro")) if m else -1,
                   global_step=int(mp.group("step")) if mp else -1,
                   samples_per_s=to_float(mp.group("cur")) if mp else np.nan,
                   avg_samples_per_s=to_float(m.group("avg")) if m else np.nan,
                   tokens_per_s=to_float(t.group("tok")) if t else np.nan,
                   mem_allocated_bytes=to_float(m.group("ma")) * _GIB if m and m.group("ma") else np.nan,
                   max_mem_allocated_bytes=to_float(m.group("maxma")) * _GIB if m and m.group("maxma") else np.nan,
                   max_mem_cached_bytes=to_float(c.group("v")) * _GIB if c else np.nan)
        rows.append(row)
    return pd.DataFrame(rows, columns=_TPUT_COLS)


def _overflows(lines: list[tuple[int, int, str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    ov: list[dict[str, Any]] = []
    pr: list[dict[str, Any]] = []
    for ln, r, s in lines:
        if "kipping step" in s or "KIPPING STEP" in s:
            m = _OVERFLOW.search(s)
            if m:
                rk = _DS_RANK.search(s)
                rank = int(m.group("rank")) if m.group("rank") else (r if r >= 0 or rk is None else int(rk.group(1)))
                ov.append(dict(rank=rank, line=ln,
                               attempted_loss_scale=to_float(m.group("att")) if m.group("att") else np.nan,
                               new_loss_scale=to_float(m.group("new")) if m.group("new") else np.nan))
        if "skipped=" in s:
            m2 = _PROGRESS.search(s)
            if m2:
                rk = _DS_RANK.search(s)
                pr.append(dict(rank=r if r >= 0 or rk is None else int(rk.group(1)), line=ln, step=int(m2.group("step")),
                               skipped=int(m2.group("skipped")),
                               lr=to_float(m2.group("lr"))))
    return (pd.DataFrame(ov, columns=["rank", "line", "attempted_loss_scale", "new_loss_scale"]),
            pd.DataFrame(pr, columns=["rank", "line", "step", "skipped", "lr"]))


def _zero_stage(lines: list[tuple[int, int, str]], q: _Quirks) -> int | None:
    seen: dict[int, int] = {}
    for ln, _r, s in lines:
        if "ZeRO stage" in s or "zero_optimization_stage" in s:
            m = _ZERO.search(s)
            if m:
                seen.setdefault(int(m.group("a") or m.group("b")), ln)
    if len(seen) > 1:
        q.add("zero_stages", min(seen.values()), f"the log prints several ZeRO stages {sorted(seen)} (several engines); "
                                                 "zero_stage is the first")
    return min(seen, key=lambda k: seen[k]) if seen else None


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
    throughput : pandas.DataFrame
        One row per throughput line: ``rank, line, source`` ("ThroughputTimer": DeepSpeed ``utils/timer.py``'s
        ``epoch=../micro_step=../global_step=.., RunningAvgSamplesPerSec=.., CurrSamplesPerSec=..,
        MemAllocated=..GB, MaxMemAllocated=..GB``; "pipe_engine": the pipeline engine's ``steps: N ...
        samples/sec: X``; "tokens": a ``tokens/s``/``TokensPerSec`` value), ``epoch, micro_step, global_step``
        (-1 unknown), ``samples_per_s`` (current), ``avg_samples_per_s`` (running average),
        ``tokens_per_s``, ``mem_allocated_bytes, max_mem_allocated_bytes, max_mem_cached_bytes`` (DeepSpeed
        prints GiB, 1024**3, rounded to 2 decimals; NaN when not printed).
    overflows : pandas.DataFrame
        fp16 loss-scale overflows, one per "OVERFLOW! ... Skipping step" line (``runtime/fp16/loss_scaler.py``;
        older "Overflow detected. Skipping step"): ``rank, line, attempted_loss_scale, new_loss_scale``.
    progress : pandas.DataFrame
        The engine's ``step=N, skipped=K, lr=..`` lines (``engine.py`` ``_report_progress``): ``rank, line, step,
        skipped, lr``.
    zero_stage : int or None
        The ZeRO stage the log prints (``Creating ... ZeRO stage N optimizer`` or the config dump's
        ``zero_optimization_stage``); None when it prints none.
    """

    flops: list[FlopsProfile]
    comms: CommsLog
    timers: pd.DataFrame
    memory: pd.DataFrame
    quirks: pd.DataFrame
    throughput: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_TPUT_COLS))
    overflows: pd.DataFrame = field(default_factory=pd.DataFrame)
    progress: pd.DataFrame = field(default_factory=pd.DataFrame)
    zero_stage: int | None = None

    @property
    def skipped_steps(self) -> int:
        """Optimizer steps skipped for fp16 overflow: the engine's own ``skipped=`` counter (its last value) when
        printed, else the number of overflow lines on the rank that printed most."""
        if len(self.progress):
            return int(self.progress["skipped"].max())
        if len(self.overflows):
            return int(self.overflows.groupby("rank").size().max())
        return 0

    def timer_means(self) -> pd.DataFrame:
        """Per rank and timer: ``count``, ``mean_ns``, ``total_ns`` over every printed timer line."""
        t = self.timers
        if t.empty:
            return pd.DataFrame(columns=["rank", "timer", "count", "mean_ns", "total_ns"])
        return (t.groupby(["rank", "timer"])["time_ns"].agg(count="count", mean_ns="mean", total_ns="sum")
                .reset_index())


def parse_log(source: str | os.PathLike[str] | Iterable[str], *, zero_stage: int | None = None,
              config: dict | str | os.PathLike[str] | None = None) -> DeepSpeedLog:
    """Parse a DeepSpeed log: flops reports, comms tables and op lines, timers, memory lines, throughput,
    fp16 overflows (skipped steps) and the ZeRO stage.

    Parameters
    ----------
    source : str, PathLike or iterable of str
        A path, the text, or several paths/texts (e.g. one log per rank) read one after the other.
    zero_stage, config
        As in :func:`parse_flops_profiles`.

    Returns
    -------
    DeepSpeedLog
        Never raises on odd content: what could not be read is listed in ``quirks`` -- including every
        traceback in the log (``traceback``: its line and error), a report or table it cut short
        (``cut_short``), and a flops profiler that was on but never printed because the run crashed
        (``profiler_crashed``).

    Raises
    ------
    FileNotFoundError
        When ``source`` names a file (a PathLike, or a one-line string such as ``"run.log"``) that
        does not exist; the exception's ``filename`` is that name.
    IsADirectoryError
        When it names a directory.
    """
    text = _read(source) if isinstance(source, (str, os.PathLike)) else "\n".join(_read(s) for s in source)
    if zero_stage is None:
        zero_stage = zero_stage_of(config)
    q = _Quirks()
    lines = _clean_lines(text, q)
    flops = parse_flops_profiles(text, zero_stage=zero_stage)
    tbs = tracebacks(lines)
    for ln, err, eln in tbs:
        q.add("traceback", ln, f"traceback at line {ln}: {err} (line {eln})")
    if tbs and not flops and _PROFILER_ON.search(text):
        ln, err, _eln = tbs[0]
        q.add("profiler_crashed", ln, f"the flops profiler was configured but printed no report: the run stopped "
                                      f"with {err} (traceback at line {ln})")
    summary = _comms_tables(lines, q)
    ops = _comms_ops(lines, q)
    timers, memory = _timers(lines, q), _memory(lines, q)
    for prof in flops:  # the whole-log quirks name a cut-short report and the lines of a report not understood
        for row in prof.quirks.itertuples():
            if row.kind in ("cut_short", "unparsed_line", "truncated"):
                q.add(row.kind, row.line, row.message)
    tput = _throughput(lines)
    overflows, progress = _overflows(lines)
    stage = _zero_stage(lines, q)
    comms = CommsLog(summary=summary, ops=ops, quirks=q.frame())
    return DeepSpeedLog(flops=flops, comms=comms, timers=timers, memory=memory, quirks=q.frame(), throughput=tput,
                        overflows=overflows, progress=progress, zero_stage=stage)


#: the log shows the flops profiler was on (config echo, or its own messages)
_PROFILER_ON = re.compile(
    r"flops_profiler[^\n]{0,300}?[\"']?enabled[\"']?\s*[:=]\s*(?:true|True)|FlopsProfiler|profile_step", re.IGNORECASE
)
