"""Ids stored as something other than their value, and the values they stand for (the ``id_values`` side table).

The id columns are int64 (``correlation``, ``external_id``, ``seq``, ``fwd_tid`` of ``Trace.events``;
``id`` of ``Trace.flows``). A Kineto trace may write an id that int64 cannot hold: an unsigned 64-bit
integer above 2**63-1 (stored as its bit pattern, ``x - 2**64``), an integer beyond 64 bits or a text
(stored as an id of its own; ``nbprof.sources.kineto.columns``). The loader keeps every such id with
the value as written in ``Trace.tables["id_values"]``, one row per (column, stored id):

=========  ========  ==============================================================================
column     category  the id column: ``correlation``, ``external_id``, ``seq``, ``fwd_tid``, ``flows.id``
id         int64     the id as stored in that column
value      str       the value as written: the decimal digits of an integer, or the text
is_text    bool      True when the value was a JSON string (written back as a string)
=========  ========  ==============================================================================

The mapping is per value, not per row, so it holds for every subset, copy or merge of the trace's rows.
Stored ids still join (a kernel's ``correlation`` equals its launch's); :func:`exact_ids` gives the
values to show or write back (``nbprof.export.chrome``, ``nbprof.export.perfetto``, the timeline).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from .schema import INT_MISSING

#: ``Trace.tables`` key of the table
ID_VALUES = "id_values"

#: The stored value of a missing id, in every id column (``nbprof.trace.schema.INT_MISSING``). It is the only
#: one: an id above 2**63-1 is stored negative (its bit pattern) and 2**64-1, whose pattern is -1, gets an
#: id of its own, so "missing" is ``== MISSING``, never ``< 0``.
MISSING = INT_MISSING


def present(ids: Any) -> Any:
    """Mask of the ids that are present (a numpy array or Series of int64 stored ids; the same type back):
    every id but :data:`MISSING`. A negative stored id is an id above 2**63-1 (its value is in the
    ``id_values`` table) and is present; filtering ids with ``>= 0`` loses those events."""
    return ids != MISSING


def id_values_table(maps: Iterable[Mapping[str, Mapping[int, int | str]]]) -> dict[str, pd.DataFrame]:
    """``{"id_values": frame}`` from per-run maps (column -> {stored id: value as written}), or ``{}``
    when no id needed one. Rows sorted by column, then id; a (column, id) seen in several runs once."""
    merged: dict[tuple[str, int], int | str] = {}
    for m in maps:
        for col, d in m.items():
            for k, v in d.items():
                merged.setdefault((col, int(k)), v)
    if not merged:
        return {}
    keys = sorted(merged)
    vals = [merged[k] for k in keys]
    df = pd.DataFrame({
        "column": pd.Categorical([k[0] for k in keys]),
        "id": np.array([k[1] for k in keys], dtype=np.int64),
        "value": [v if isinstance(v, str) else str(int(v)) for v in vals],
        "is_text": np.array([isinstance(v, str) for v in vals], dtype=bool),
    })
    return {ID_VALUES: df}


def originals(trace: Any, column: str) -> dict[int, int | str]:
    """Stored id -> the value as written (``int`` for integers, ``str`` for texts) for one id column of
    ``trace`` (``"correlation"``, ``"flows.id"`` ...); ``{}`` when the trace has no such ids."""
    df = (getattr(trace, "tables", None) or {}).get(ID_VALUES)
    if df is None or not len(df):
        return {}
    sel = df[df["column"].astype(str) == column]
    return {int(i): (v if t else int(v)) for i, v, t in zip(sel["id"].tolist(), sel["value"].tolist(),
                                                              sel["is_text"].tolist())}


def exact_ids(trace: Any, column: str, stored: Iterable[int], *, u64: bool = False) -> list[int | str]:
    """The ids ``stored`` (int64 values of ``column``) as written in the source: each one found in the
    ``id_values`` table replaced by its value (an int above 2**63-1 or beyond 64 bits, or a text), the
    others as Python ints. ``u64``: keep the stored id where the value is not an integer that fits in
    64 bits (signed or unsigned; a JSON writer such as orjson writes no other integers)."""
    ids: list[int | str] = list(np.asarray(stored, dtype=np.int64).tolist())
    m = originals(trace, column)
    if u64:
        m = {k: v for k, v in m.items() if isinstance(v, int) and -(2**63) <= v < 2**64}
    if not m:
        return ids
    return [m.get(x, x) if isinstance(x, int) else x for x in ids]
