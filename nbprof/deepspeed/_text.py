"""Shared pieces of the DeepSpeed text parsers: quirk kinds, quantities with DeepSpeed's prefixes,
reading a path-or-text source, and the line cleaner (ANSI codes, launcher rank prefixes).

See :mod:`nbprof.deepspeed.parsers` for the format facts.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Iterable
from typing import Any

import pandas as pd

__all__ = ["QUIRKS", "parse_quantity", "parse_msg_size", "strip_ansi", "zero_stage_of", "to_float"]

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
    "zero_stages": "the log prints several ZeRO stages (several engines in one launch)",
    "older_layout": "an older DeepSpeed layout was recognised (e.g. 'x, y% Params' instead of 'x = y% Params')",
    "bad_number": "a number field holds something that is not a number (e.g. '1.2.3'): read as NaN",
    "traceback": "the log holds a Python traceback: the error and the line it starts at are named",
    "cut_short": "a report or table stops at a traceback in the log: what follows the error is missing",
    "profiler_crashed": "the flops profiler was running (its config or messages are in the log) but the log has a "
                        "traceback and no report: the run crashed before the profiler printed",
    "shared_module": "a module appears under several parents in the detailed profile: its params/MACs are counted "
                     "once per parent, so children sum to more than their parent",
}

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)?(\d{1,9})\]:\s?")  # digits bounded: int() of 4300+ digits raises
_LOG_PREFIX = re.compile(
    r"^\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\]\s+\[(?P<level>[A-Z]+)\]\s+\[(?P<where>[^\]]*)\]\s*"
)
_DS_RANK = re.compile(r"\[Rank (\d{1,9})\]\s*")  # digits bounded: int() of 4300+ digits raises

_SI = {"T": 1e12, "G": 1e9, "M": 1e6, "K": 1e3, "k": 1e3, "B": 1e9, "": 1.0, "m": 1e-3, "u": 1e-6, "µ": 1e-6, "n": 1e-9}
#: one way to match each input (no overlapping quantifiers): linear time; applied to stripped text
_QTY = re.compile(r"(?P<num>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<pre>[TGMKkBmuµn]?)(?P<unit>MACs|FLOPS|s|B)?")


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
    m = _QTY.fullmatch((text or "").strip())
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


_SIZE = re.compile(r"(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>B|KB|MB|GB|TB|PB)")  # on stripped text
_SIZE_POW = {"B": 0, "KB": 1, "MB": 2, "GB": 3, "TB": 4, "PB": 5}


def parse_msg_size(text: str) -> float:
    """``convert_size`` text (``"332.04 KB"``, ``"0B"``) -> bytes (float; 1024-based; NaN if unreadable).

    DeepSpeed rounds to two decimals, so sizes above 1 KB are approximate (±0.005 of the unit).
    """
    m = _SIZE.fullmatch((text or "").strip())
    if not m:
        return float("nan")
    return float(m.group("num")) * 1024.0 ** _SIZE_POW[m.group("unit")]


_PATHLIKE = re.compile(r"(?:\.(?:log|txt|out|err|json)(?:\.\d+)?|\.gz)$", re.IGNORECASE)


def _read(source: str | os.PathLike[str]) -> str:
    """Text of ``source``: a path to an existing file, else the string itself.

    A PathLike, or a one-line string that reads as a file name (``run.log``, ``out.txt``, ``./x``,
    ``/abs/path``) and does not exist, raises ``FileNotFoundError`` naming it (instead of being parsed
    as the text of an empty log). A UTF-8 byte-order mark is dropped.

    Raises
    ------
    nbprof.errors.TraceFileNotFoundError
        Missing file (also a ``FileNotFoundError``; ``filename`` is the name given).
    nbprof.errors.TraceFormatError
        A directory, FIFO, socket or device (nothing is opened: a FIFO cannot block, /dev/zero cannot
        run forever).
    """
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source and len(source) < 4096
                                            and (os.path.lexists(source) or _PATHLIKE.search(source.strip())
                                                 or source.startswith(("/", "./", "../", "~")))):
        from ..errors import TraceFileNotFoundError
        from ..sources import check_file

        path = os.path.expanduser(os.fspath(source))
        try:
            check_file(path, "DeepSpeed log or report")
        except TraceFileNotFoundError:
            raise TraceFileNotFoundError(errno.ENOENT, "no such DeepSpeed log or report", os.fspath(source)) from None
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    else:
        text = str(source)
    return text[1:] if text.startswith("\ufeff") else text


TRACEBACK = "Traceback (most recent call last)"


def traceback_error(lines: list[tuple[int, int, str]], k: int) -> tuple[str, int]:
    """The error a traceback starting at ``lines[k]`` ends with (``"ZeroDivisionError: ..."``) and its
    line number; ``("(traceback without an error line)", line)`` when the log ends first."""
    for ln, _r, raw in lines[k + 1:k + 400]:
        s = raw.strip()
        if not s or raw[:1].isspace() or s.startswith(TRACEBACK):
            continue
        if s.startswith(("During handling", "The above exception")):
            continue
        return s[:200], ln
    return "(traceback without an error line)", lines[k][0]


def tracebacks(lines: list[tuple[int, int, str]]) -> list[tuple[int, str, int]]:
    """``(line, error, error_line)`` of every traceback in the log."""
    return [(ln, *traceback_error(lines, k)) for k, (ln, _r, s) in enumerate(lines) if s.lstrip().startswith(TRACEBACK)]


def to_float(text: str) -> float:
    """``float(text)``, NaN when it is not a number (``"1.2.3"``, ``"-"``, ``""``)."""
    try:
        return float(text)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


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
    if isinstance(st, bool):
        return None
    if isinstance(st, int) or (isinstance(st, float) and st.is_integer()):
        return int(st) if 0 <= st <= 3 else None
    return int(st) if isinstance(st, str) and st.isdigit() and len(st) < 3 else None


def zero_stage_of_traces(traces: Iterable[Any]) -> int | None:
    """ZeRO stage recorded in traces written by ``nbprof.deepspeed.attach`` (their top-level
    ``"deepspeed": {"zero_stage": N}``, from the engine's ``zero_optimization_stage()``), given as
    loaded ``Trace`` objects; None when none of them holds one, or when they disagree."""
    seen = set()
    for t in traces:
        facts = getattr(getattr(t, "meta", None), "extra", {}).get("deepspeed")
        st = facts.get("zero_stage") if isinstance(facts, dict) else None
        if isinstance(st, int) and not isinstance(st, bool) and 0 <= st <= 3:
            seen.add(st)
    return seen.pop() if len(seen) == 1 else None
