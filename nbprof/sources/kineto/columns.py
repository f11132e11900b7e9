"""Columns from decoded Structs: int64/float64 arrays, categoricals built without object arrays.

Columns come from ``np.fromiter(map(attrgetter(field), structs))`` (no intermediate list) or list
comprehensions compiled per field name (``_col``); subsets are taken with ``itertools.compress``;
categoricals (``_CatColumn``) are coded by one dict lookup per value (a new value takes the next
code in ``__missing__``). Values that are not plain numbers go through ``_to_int_array`` /
``_to_float``, which report what they converted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from itertools import compress, repeat
from operator import attrgetter, index, is_, pos
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from .context import _Ctx

_INT_BLOCK = 1 << 16

# One coercion rule for every numeric field written as a string (ids, counts, times):
# - a JSON integer or float is used as is (an integral float in an integer field: its int);
# - a string holding a number (``"25738"``, ``" -3 "``, ``"103.250"``, hex ``"0x1f"``, and Kineto
#   2021's GPU lanes ``"stream 7"``) is read as that number: exact, noted as an assumption
#   (kind ``string_<field>``, count, first offset, an example);
# - any other string (``"simd_A"``) and an integer beyond 64 bits: in an id field, its own stable
#   id (``_synthetic_id``: negative, from a hash of the text, so distinct texts stay distinct and the
#   same text gets the same id in every file); in a quantity field, missing (-1 / NaN); reported as
#   a repair (kinds ``string_id_<field>``, ``bigint_<field>``, ``nonnumeric_<field>``) with the mapping;
# - an unsigned 64-bit integer above 2**63-1 is stored as its bit pattern (negative int64, ``x - 2**64``;
#   2**64-1, whose pattern is the missing -1, gets its own id as above), noted (kind ``u64_<field>``);
# - in the id fields of ``_EXACT_ID_FIELDS``, every stored id that is not the value as written (a u64
#   bit pattern, an id of a text or of an integer beyond 64 bits) is kept with the original in the
#   side table ``id_values`` (``nbprof.trace.ids``), so exports and views write the exact value back;
# - null, and the empty string, are missing.
# Kineto's own lanes for its profiler spans (``"pid": "Spans"``/``"Traces"``, legacy ``"CPU
# functions"``, ``""``; the tid of such a row holds the span's name) are not OS processes: -1, not
# reported (see ``_pid_tid``).
_NUMBER_TEXT = re.compile(r"\s*(?:stream\s*)?([-+]?\d+)\s*", re.I)
_HEX_TEXT = re.compile(r"\s*0[xX]([0-9a-fA-F]+)\s*")
_LANE_PIDS = frozenset({"Spans", "Traces", "", "CPU functions"})
#: field name (as ``_to_int_array`` gets it) -> the column whose originals go to ``id_values``
_EXACT_ID_FIELDS = {"correlation": "correlation", "external_id": "external_id", "seq": "seq",
                    "fwd_tid": "fwd_tid", "flow id": "flows.id"}


def _synthetic_id(text: str, taken: dict[int, str]) -> int:
    """A stable negative int64 id for a non-numeric id text: ``-(2 + 48-bit BLAKE2b of the text)``;
    a collision with another text of the same column (``taken``) takes the next id down."""
    v = -(2 + int.from_bytes(hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=6).digest(), "big"))
    while taken.get(v, text) != text:
        v -= 1
    taken[v] = text
    return v


def _mapping_text(pairs: dict[str, int], limit: int = 5) -> str:
    items = list(pairs.items())
    shown = ", ".join(f"{k!r} -> {v}" for k, v in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _first(idx: list[int], rows: np.ndarray | None) -> int | None:
    return int(rows[idx[0]]) if rows is not None and idx else None


def _to_int_array(
    values: list[Any], name: str, ctx: _Ctx, rows: np.ndarray | None = None, *, tried: bool = False,
    ids: bool = True, lanes: frozenset[str] | None = None, lane_out: list[int] | None = None, unsigned: bool = True,
) -> np.ndarray:
    """list of int|float|str|None -> int64 with -1 for missing, by the coercion rule above.

    ``name``: the field (report kinds and messages); ``rows``: each value's event index in the
    run (for the report's byte offset); ``ids``: an id field (non-numeric texts get their own
    id) rather than a quantity (they become -1); ``lanes``: texts that mean "no id" (-1, not
    reported), whose positions are appended to ``lane_out``; ``unsigned=False``: a count, whose values above
    2**63-1 are not unsigned 64-bit bit patterns but beyond int64: missing, reported as ``bigint_<field>``.
    Fast path ``np.fromiter``; else the
    plain ints still go through ``np.fromiter``, in blocks of ``_INT_BLOCK`` values (a trace's one
    ``"pid": "Spans"`` row must not send a million values through the type check).
    """
    n = len(values)
    if not tried:  # (``tried``: the caller's own np.fromiter already failed)
        try:
            return np.fromiter(map(index, values), dtype=np.int64, count=n)
        except (TypeError, ValueError, OverflowError):
            pass
    out = np.empty(n, dtype=np.int64)
    todo: list[int] = []  # positions of the values that are not plain ints
    for a in range(0, n, _INT_BLOCK):  # blocks: one odd value sends only its block to the type check
        block = values[a : a + _INT_BLOCK]
        k = len(block)
        try:
            out[a : a + k] = np.fromiter(map(index, block), dtype=np.int64, count=k)
            continue
        except (TypeError, ValueError, OverflowError):
            pass
        is_int = np.fromiter(map(is_, map(type, block), repeat(int, k)), dtype=bool, count=k)
        try:
            out[a : a + k][is_int] = np.fromiter(compress(block, is_int.tolist()), dtype=np.int64)
            todo += (np.flatnonzero(~is_int) + a).tolist()
        except OverflowError:  # ints beyond 64 bits: the whole block through the loop
            todo += range(a, a + k)
    exact = ctx.id_values.setdefault(_EXACT_ID_FIELDS[name], {}) if ids and name in _EXACT_ID_FIELDS else None
    numeric: list[int] = []  # numeric texts
    u64: list[int] = []
    big: list[int] = []
    other: list[int] = []  # non-numeric texts
    taken: dict[int, str] = {}
    mapped: dict[str, int] = {}
    for i in todo:
        v = values[i]
        if v is None:
            out[i] = -1
        elif isinstance(v, bool):
            out[i] = int(v)
        elif isinstance(v, int):
            if -(2**63) <= v < 2**63:
                out[i] = v
            elif 0 <= v < 2**64 and (ids or unsigned):  # unsigned 64-bit ids/addresses: their bit pattern
                b = v - 2**64
                if ids and (b == -1 or taken.get(b, str(v)) != str(v)):  # the missing -1, or another text's id
                    b = _synthetic_id(str(v), taken)
                elif ids:
                    taken[b] = str(v)
                out[i] = b
                u64.append(i)
                if exact is not None:
                    exact[b] = v
            else:
                big.append(i)
                out[i] = _synthetic_id(str(v), taken) if ids else -1
                if ids:
                    mapped.setdefault(str(v), int(out[i]))
                if exact is not None:
                    exact[int(out[i])] = v
        elif isinstance(v, float):
            out[i] = int(v) if np.isfinite(v) and abs(v) < 2**63 else -1
        elif isinstance(v, str):
            if lanes is not None and v in lanes:
                out[i] = -1
                if lane_out is not None:
                    lane_out.append(i)
                continue
            if not v.strip():
                out[i] = -1
                continue
            m = _NUMBER_TEXT.fullmatch(v) or _HEX_TEXT.fullmatch(v)
            x = None
            if m is not None:
                x = int(m.group(1), 16 if m.re is _HEX_TEXT else 10)
            else:
                try:
                    f = float(v)
                    x = int(f) if np.isfinite(f) and f == int(f) else None
                except ValueError:
                    pass
            if x is not None and -(2**63) <= x < 2**63:
                out[i] = x
                numeric.append(i)
            else:
                other.append(i)
                out[i] = _synthetic_id(v, taken) if ids else -1
                if ids:
                    mapped.setdefault(v, int(out[i]))
                if exact is not None:
                    exact[int(out[i])] = v
        else:  # pragma: no cover - the decoder types allow no other value
            out[i] = -1
            other.append(i)
    if numeric:
        ctx.note(f"string_{name}", len(numeric), _first(numeric, rows),
                 f"{{count}} values of {name!r} were numbers written as strings (e.g. {{example!r}}): read as integers",
                 values[numeric[0]])
    if u64:
        ctx.note(f"u64_{name}", len(u64), _first(u64, rows),
                 f"{{count}} values of {name!r} were unsigned 64-bit integers above 2**63-1 (e.g. {{example}}): "
                 "stored as their int64 bit pattern (negative; the value is x % 2**64)"
                 + (", the exact value kept in trace.tables['id_values']" if exact is not None else ""),
                 values[u64[0]])
    if big:
        what = f"each distinct value its own id ({_mapping_text({k: v for k, v in mapped.items() if k.lstrip('-').isdigit()})})" \
            if ids else f"set to -1 (e.g. {values[big[0]]})"
        width = "64 bits" if ids or unsigned else "int64"
        ctx.defect(f"bigint_{name}", "repaired", len(big),
                   f"{len(big)} values of {name!r} were integers beyond {width}: {what}", _first(big, rows),
                   f"{len(big)} values of {name!r} are integers beyond {width} (e.g. {values[big[0]]})")
    if other:
        texts = {k: v for k, v in mapped.items() if not k.lstrip('-').isdigit()}
        if ids:
            ctx.defect(f"string_id_{name}", "repaired", len(other),
                       f"{len(other)} values of {name!r} were non-numeric strings: each distinct string has its own "
                       f"id ({_mapping_text(texts)})", _first(other, rows),
                       f"{len(other)} values of {name!r} are non-numeric strings (e.g. {values[other[0]]!r})")
        else:
            ctx.defect(f"nonnumeric_{name}", "repaired", len(other),
                       f"{len(other)} values of {name!r} were non-numeric strings (e.g. {values[other[0]]!r}): set to -1",
                       _first(other, rows),
                       f"{len(other)} values of {name!r} are non-numeric strings (e.g. {values[other[0]]!r})")
    return out


def _to_float(values: list[Any], what: str, ctx: _Ctx, rows: np.ndarray | None) -> np.ndarray:
    """float|int|str|None values -> float64 with NaN for missing, by the coercion rule above
    (numeric texts read and noted; other texts missing, reported)."""
    try:
        if str not in set(map(type, values)):  # np.array would parse "12.5" silently
            return np.array(values, dtype=np.float64)  # None -> NaN
    except (TypeError, ValueError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    strs: list[int] = []
    other: list[int] = []
    for i, v in enumerate(values):
        if v is None:
            out[i] = np.nan
        elif isinstance(v, str):
            try:
                out[i] = float(v)
                strs.append(i)
            except ValueError:
                out[i] = np.nan
                if v.strip():
                    other.append(i)
        elif isinstance(v, (int, float)):
            out[i] = v
        else:
            out[i] = np.nan
            other.append(i)
    if strs:
        ctx.note(f"string_{what}", len(strs), _first(strs, rows),
                 f"{{count}} values of {what!r} were numbers written as strings (e.g. {{example!r}}): read as numbers",
                 values[strs[0]])
    if other:
        ctx.defect(f"nonnumeric_{what}", "repaired", len(other),
                   f"{len(other)} values of {what!r} were non-numeric strings (e.g. {values[other[0]]!r}): read as missing",
                   _first(other, rows), f"{len(other)} values of {what!r} are non-numeric strings (e.g. {values[other[0]]!r})")
    return out


def _intish(values: list[Any], name: str, ctx: _Ctx, rows: np.ndarray | None = None) -> np.ndarray:
    """A quantity (int, or float such as ``"registers per thread": 32.0``) -> int64, -1 missing."""
    try:
        return np.fromiter(map(index, values), dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        pass
    return _to_int_array([int(v) if isinstance(v, float) and np.isfinite(v) and abs(v) < 2**63 else v
                          for v in values], name, ctx, rows, ids=False)


def _num_or_nan(values: list[Any], name: str, ctx: _Ctx, rows: np.ndarray | None = None) -> np.ndarray:
    """A float quantity (flops, occupancy) -> float64, NaN missing, by the coercion rule above."""
    try:
        return np.fromiter(map(pos, values), dtype=np.float64, count=len(values))
    except (TypeError, ValueError):
        return _to_float(values, name, ctx, rows)


def _pid_tid(pids: list[Any] | None, tids: list[Any] | None, ctx: _Ctx, rows: np.ndarray | None,
             objs: list[Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """pid and tid columns (int64, -1 missing) by the coercion rule; a row whose pid is one of
    Kineto's span lanes (``_LANE_PIDS``) gets pid and tid -1 (its tid is the span's name). Give the
    raw value lists, or ``objs`` (Structs with ``pid``/``tid``: read at C speed when all are ints)."""
    pid = tid = None
    if objs is not None:
        n = len(objs)
        try:
            pid = np.fromiter(map(index, map(attrgetter("pid"), objs)), dtype=np.int64, count=n)
        except (TypeError, ValueError, OverflowError):
            pids = _col(objs, "pid")
        try:
            tid = np.fromiter(map(index, map(attrgetter("tid"), objs)), dtype=np.int64, count=n)
        except (TypeError, ValueError, OverflowError):
            tids = _col(objs, "tid")
    lane: list[int] = []
    if pid is None:
        assert pids is not None  # the typed read failed: the values were listed
        pid = _to_int_array(pids, "pid", ctx, rows, tried=objs is not None, lanes=_LANE_PIDS, lane_out=lane)
    if tid is None:
        assert tids is not None  # the typed read failed: the values were listed
        if lane:  # a span lane's tid is the span's name
            tids = list(tids)
            for i in lane:
                if isinstance(tids[i], str):
                    tids[i] = None
        tid = _to_int_array(tids, "tid", ctx, rows)
    return pid, tid


def _raw_texts(values: list[msgspec.Raw]) -> list[str]:
    """msgspec.Raw JSON values -> their text ('' when absent), in one join/split."""
    if not values:
        return []
    return b"\x00".join(values).decode("utf-8", "replace").split("\x00")


# a JSON string literal (kept byte for byte), a run of whitespace or a comma outside strings
_JSON_TOKEN = re.compile(r'("(?:[^"\\]|\\.)*")|(\s+)|(,)')


def _json_token(m: re.Match[str]) -> str:
    return m.group(1) or ("" if m.group(2) else ", ")


def _compact_json_text(s: str | None) -> str | None:
    """The raw JSON text of an args value (``Input Dims``, ``Input type``, ``grid``) in Kineto's own
    layout (``[[4, 8], [8, 2]]``: no whitespace, ``", "`` after each comma), whatever the file's
    pretty-printing; string literals stay byte-exact (``"long int"``, ``"a,b"``). None when empty."""
    if not s:
        return None
    return _JSON_TOKEN.sub(_json_token, s)  # once per distinct value (the categorical's categories)


def _select(objs: list[Any], mask: np.ndarray) -> list[Any]:
    """``[o for o, m in zip(objs, mask) if m]`` at C speed (``itertools.compress``: half the time of
    ``itemgetter`` over the indices)."""
    return list(compress(objs, mask.tolist()))


_GETTERS: dict[str, Callable[[list[Any]], list[Any]]] = {}


def _col(objs: list[Any], attr: str) -> list[Any]:
    """One attribute of every Struct, as a list.

    A list comprehension with the attribute name in its code (compiled once per name) uses
    CPython's specialised attribute access: ~30 ns per element, about half of
    ``map(attrgetter(name), objs)``.
    """
    f = _GETTERS.get(attr)
    if f is None:
        if not attr.isidentifier():
            raise ValueError(attr)
        f = _GETTERS[attr] = eval(f"lambda xs: [x.{attr} for x in xs]")  # attr is one of our field names
    return f(objs)


_NO_CATEGORIES = pd.Index([], dtype="float64")


class _Codes(dict[Any, int]):
    """value -> code, a new value taking the next code on first lookup (codes in order of first appearance)."""

    def __missing__(self, value: Any) -> int:
        code = self[value] = len(self)
        return code


class _CatColumn:
    """Builds a categorical column from per-group value lists without an n-sized object array."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lut: dict[Any, int] = _Codes()
        self.codes: np.ndarray | None = None

    def put(self, rows: np.ndarray | None, values: list[Any]) -> None:
        lut = self.lut
        # one dict lookup per value (hits stay in C; ~30% less than numbering the uniques first)
        codes = np.fromiter(map(lut.__getitem__, values), dtype=np.int32, count=len(values))
        if rows is None:
            self.codes = codes
            return
        if self.codes is None:
            self.codes = np.full(self.n, -1, dtype=np.int32)
            self.lut.setdefault(None, len(self.lut))
            self.codes[:] = self.lut[None]
        self.codes[rows] = codes

    @staticmethod
    def concat(cols: list[_CatColumn], take: np.ndarray | None = None) -> _CatColumn:
        """The columns one after the other (value codes remapped onto one dictionary), then the
        rows at positions ``take`` of that, when given."""
        if len(cols) == 1 and take is None:
            return cols[0]
        out = _CatColumn(sum(c.n for c in cols) if take is None else len(take))
        if all(c.codes is None for c in cols):
            return out
        lut, pieces = out.lut, []
        for c in cols:
            if c.n == 0:  # no rows, but its values are categories as in a one-process load
                for u in c.lut:
                    lut.setdefault(u, len(lut))
                continue
            if c.codes is None:
                pieces.append(np.full(c.n, lut.setdefault(None, len(lut)), dtype=np.int32))
            else:
                remap = np.array([lut.setdefault(u, len(lut)) for u in c.lut], dtype=np.int32)
                pieces.append(remap[c.codes])
        out.codes = np.concatenate(pieces)
        if take is not None:
            out.codes = out.codes[take]
        return out

    def finish(self, transform: Any = None) -> pd.Categorical:
        """``transform`` maps each unique value to its text (None = missing); default str()."""
        if self.codes is None:
            # an all-missing column has float64 (empty) categories, as pd.Categorical([None, ...]) and
            # a parquet round trip give
            return pd.Categorical.from_codes(np.full(self.n, -1, dtype=np.int8), categories=_NO_CATEGORIES)
        uniq = list(self.lut)
        if transform is not None:
            texts = [transform(u) for u in uniq]
        else:
            texts = [u if isinstance(u, str) else (None if u is None else str(u)) for u in uniq]
        final: dict[str, int] = {}
        remap = np.empty(len(texts) + 1, dtype=np.int32)
        for i, t in enumerate(texts):
            remap[i] = -1 if t is None else final.setdefault(t, len(final))
        remap[-1] = -1
        codes = self.codes if bool((remap[:-1] == np.arange(len(texts))).all()) else remap[self.codes]
        k = len(final)
        dtype = np.int8 if k < 127 else (np.int16 if k < 32767 else np.int32)
        cats = pd.Index(list(final)) if final else _NO_CATEGORIES
        return pd.Categorical.from_codes(codes.astype(dtype), categories=cats)


def _cat_of(values: list[Any], transform: Any = None) -> pd.Categorical:
    c = _CatColumn(len(values))
    c.put(None, values)
    return c.finish(transform)


def _floats(objs: list[Any], attr: str, name: str, ctx: _Ctx, rows: np.ndarray | None) -> np.ndarray:
    """Attribute ``attr`` as float64 (NaN missing); string values (``_LooseEvent``) parsed and reported."""
    if not ctx.loose:  # typed float | None: np.fromiter takes them, a None raises
        try:
            return np.fromiter(map(attrgetter(attr), objs), dtype=np.float64, count=len(objs))
        except (TypeError, ValueError):
            pass
    return _to_float(_col(objs, attr), name, ctx, rows)


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _json_array(raws: list[msgspec.Raw]) -> bytes:
    """``[raw0,raw1,...]`` in one join (the brackets ride on the first and last items: no second copy)."""
    if len(raws) < 2:
        return b"[" + b"".join(raws) + b"]"
    return b",".join([b"[" + bytes(raws[0]), *raws[1:-1], bytes(raws[-1]) + b"]"])
