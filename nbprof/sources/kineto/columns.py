"""Columns from decoded Structs: int64/float64 arrays, categoricals built without object arrays.

Columns come from ``np.fromiter(map(attrgetter(field), structs))`` (no intermediate list) or list
comprehensions compiled per field name (``_col``); subsets are taken with ``itertools.compress``;
categoricals (``_CatColumn``) are coded by one dict lookup per value (a new value takes the next
code in ``__missing__``). Values that are not plain numbers go through ``_to_int_array`` /
``_to_float``, which report what they converted.
"""

from __future__ import annotations

import contextlib
import re
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from .context import _Ctx

_INT_BLOCK = 1 << 16


def _to_int_array(
    values: list[Any], name: str, ctx: _Ctx, rows: np.ndarray | None = None, *, tried: bool = False
) -> np.ndarray:
    """list of int|float|str|None -> int64 with -1 for missing.

    Fast path ``np.fromiter``; else strings like ``"12"`` are parsed, floats truncated,
    unsigned 64-bit values keep their bit pattern, larger integers become -1 (reported). The
    plain ints among them still go through ``np.fromiter``, in blocks of ``_INT_BLOCK`` values
    (a trace's one ``"pid": "Spans"`` row must not send a million values through the type check).
    """
    n = len(values)
    if not tried:  # (``tried``: the caller's own np.fromiter already failed)
        try:
            return np.fromiter(values, dtype=np.int64, count=n)
        except (TypeError, ValueError, OverflowError):
            pass
    out = np.empty(n, dtype=np.int64)
    todo: list[int] = []  # positions of the values that are not plain ints
    for a in range(0, n, _INT_BLOCK):  # blocks: one odd value sends only its block to the type check
        block = values[a : a + _INT_BLOCK]
        k = len(block)
        try:
            out[a : a + k] = np.fromiter(block, dtype=np.int64, count=k)
            continue
        except (TypeError, ValueError, OverflowError):
            pass
        is_int = np.fromiter(map(is_, map(type, block), repeat(int, k)), dtype=bool, count=k)
        try:
            out[a : a + k][is_int] = np.fromiter(compress(block, is_int.tolist()), dtype=np.int64)
            todo += (np.flatnonzero(~is_int) + a).tolist()
        except OverflowError:  # ints beyond 64 bits: the whole block through the loop
            todo += range(a, a + k)
    bad: list[int] = []
    for i in todo:
        v = values[i]
        if v is None:
            out[i] = -1
        elif isinstance(v, int):
            if -(2**63) <= v < 2**63:
                out[i] = v
            elif 0 <= v < 2**64:  # unsigned 64-bit ids/addresses: keep the bit pattern
                out[i] = v - 2**64
            else:
                out[i] = -1
                bad.append(i)
        elif isinstance(v, float):
            out[i] = int(v) if np.isfinite(v) and abs(v) < 2**63 else -1
        elif isinstance(v, str) and v[:2].lower() == "0x":  # ROCm streams: "0x0"
            try:
                out[i] = int(v, 16) if int(v, 16) < 2**63 else -1
            except ValueError:
                out[i] = -1
        else:
            m = re.search(r"-?\d+", str(v))
            out[i] = int(m.group(0)) if m and abs(int(m.group(0))) < 2**63 else -1
    if bad:
        ctx.defect(f"bigint_{name}", "repaired", len(bad),
                   f"{len(bad)} values of {name!r} were integers above 64 bits: set to -1",
                   int(rows[bad[0]]) if rows is not None else None,
                   f"{len(bad)} values of {name!r} are integers above 64 bits (e.g. {values[bad[0]]})")
    return out


def _to_float(values: list[Any], what: str, ctx: _Ctx, rows: np.ndarray | None) -> np.ndarray:
    """float|int|str|None values -> float64 with NaN for missing; string-typed values parsed and reported."""
    try:
        if str not in set(map(type, values)):  # np.array would parse "12.5" silently
            return np.array(values, dtype=np.float64)  # None -> NaN
    except (TypeError, ValueError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    strs: list[int] = []
    for i, v in enumerate(values):
        if v is None:
            out[i] = np.nan
        elif isinstance(v, str):
            strs.append(i)
            try:
                out[i] = float(v)
            except ValueError:
                out[i] = np.nan
        else:
            out[i] = v
    if strs and rows is not None:
        ctx.defect(f"string_{what}", "repaired", len(strs),
                   f"{len(strs)} events had string-typed '{what}': converted to numbers", int(rows[strs[0]]),
                   f"{len(strs)} events have string-typed {what!r} (e.g. {values[strs[0]]!r})")
    return out


def _intish(values: list[Any], name: str, ctx: _Ctx) -> np.ndarray:
    """int or float (``"registers per thread": 32.0``) -> int64, -1 missing."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        pass
    return _to_int_array([int(v) if isinstance(v, float) and np.isfinite(v) and abs(v) < 2**63 else v
                          for v in values], name, ctx)


def _num_or_nan(values: list[Any]) -> np.ndarray:
    try:
        return np.fromiter(values, dtype=np.float64, count=len(values))
    except (TypeError, ValueError):
        out = np.full(len(values), np.nan)
        for i, v in enumerate(values):
            with contextlib.suppress(TypeError, ValueError):
                out[i] = float(v) if v is not None else np.nan
        return out


def _raw_texts(values: list[msgspec.Raw]) -> list[str]:
    """msgspec.Raw JSON values -> their text ('' when absent), in one join/split."""
    if not values:
        return []
    return b"\x00".join(values).decode("utf-8", "replace").split("\x00")


def _compact_json_text(s: Any) -> str | None:
    if not s:
        return None
    if "\n" in s or "  " in s:
        s = re.sub(r"\s+", "", s)
    if "," in s and ", " not in s:
        s = s.replace(",", ", ")
    return s


def _select(objs: list[Any], mask: np.ndarray) -> list[Any]:
    """``[o for o, m in zip(objs, mask) if m]`` at C speed (``itertools.compress``: half the time of
    ``itemgetter`` over the indices)."""
    return list(compress(objs, mask.tolist()))


_GETTERS: dict[str, Any] = {}


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


class _Codes(dict):
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


def _ints(objs: list[Any], attr: str, name: str, ctx: _Ctx, rows: np.ndarray | None = None) -> np.ndarray:
    """Attribute ``attr`` of every object as int64 (-1 missing), C-level when all are ints.

    ``np.fromiter(map(attrgetter))`` converts each value while it is in cache and builds no list
    (~25% faster than a list comprehension then ``np.fromiter``); other values take
    ``_to_int_array`` (whose blocks keep the plain ints at C speed).
    """
    try:
        return np.fromiter(map(attrgetter(attr), objs), dtype=np.int64, count=len(objs))
    except (TypeError, ValueError, OverflowError):
        return _to_int_array(_col(objs, attr), name, ctx, rows, tried=True)


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
