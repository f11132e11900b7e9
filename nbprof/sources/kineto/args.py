"""``args`` of events: which keys are kept per category group, their typed structs, their columns.

The ``args`` of one category group (host ops, runtime calls, device ops, ``[memory]``, ``M``
metadata) are joined into one JSON array and decoded in one pass into a ``gc=False`` Struct holding
only the keys that group carries (``_FIELDS``); unknown keys are skipped by msgspec. An event whose
args have unexpected types gets default args (reported as ``bad_args``). ``python_function`` args
are never decoded.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec
import numpy as np

from ...trace import schema
from ...trace.dtypes import MAX_MESSAGE_BYTES, item_bytes
from .columns import _col, _intish, _json_array, _num_or_nan, _raw_texts, _to_int_array
from .context import _Ctx
from .repair import _REPAIR_TEXT
from .structs import _EMPTY_RAW, _NAN, _Int, _Num

# The ``args`` keys nbprof keeps: attribute -> (JSON key, type, default). Which keys a category
# carries (formats.md §4.2): host ops (cpu_op, user_annotation, old ``Operator``): External id,
# Sequence number, Fwd thread id, Input Dims/type, Concrete Inputs (scalar arguments such as
# ``is_causal``, stride, padding: the work models need them), Call stack, Module Hierarchy, flops, collective
# fields (record_param_comms); runtime calls: External id, correlation (ROCm's hipLaunchKernel also
# grid/block/shared memory; Triton launches a "grid" string); device ops: External id, correlation,
# device, stream, bytes, grid, block, registers, shared memory, occupancy, blocks per SM, NCCL
# collective fields;
# ``[memory]``: Bytes, Total Allocated/Reserved, Device Type/Id, Addr; ``M`` events: name, labels.
_ARG_SPEC: dict[str, tuple[str, Any, Any]] = {
    "external_id": ("External id", _Int, -1),
    "external_id_old": ("external id", _Int, -1),  # 2021 traces
    "correlation": ("correlation", _Int, -1),
    "device": ("device", _Int, -1),
    "stream": ("stream", _Int, -1),
    "seq": ("Sequence number", _Int, -1),
    "fwd_tid": ("Fwd thread id", _Int, -1),
    "input_dims": ("Input Dims", msgspec.Raw, _EMPTY_RAW),
    "input_types": ("Input type", msgspec.Raw, _EMPTY_RAW),
    "concrete_inputs": ("Concrete Inputs", msgspec.Raw, _EMPTY_RAW),
    "call_stack": ("Call stack", str | None, None),
    "module": ("Module Hierarchy", str | None, None),
    "flops": ("flops", _Num, _NAN),
    "nbytes": ("bytes", _Num, -1),
    "grid": ("grid", msgspec.Raw, _EMPTY_RAW),
    "block": ("block", msgspec.Raw, _EMPTY_RAW),
    "registers": ("registers per thread", _Num, -1),
    "shared_mem": ("shared memory", _Num, -1),
    "occupancy": ("est. achieved occupancy %", _Num, _NAN),
    "blocks_per_sm": ("blocks per SM", _Num, _NAN),
    "collective": ("Collective name", str | None, None),
    "in_nelems": ("In msg nelems", _Int, -1),
    "out_nelems": ("Out msg nelems", _Int, -1),
    "group_size": ("Group size", _Int, -1),
    "dtype": ("dtype", str | None, None),
    "pg_name": ("Process Group Name", str | None, None),
    "mem_bytes": ("Bytes", _Num, -1),
    "total_alloc": ("Total Allocated", _Num, -1),
    "total_reserved": ("Total Reserved", _Num, -1),
    "device_type": ("Device Type", _Num, -1),
    "device_id": ("Device Id", _Num, -1),
    "addr": ("Addr", _Num, -1),
    # device-row keys without an events column: numeric ones go to the ``device_args`` side table
    "queued": ("queued", _Num, _NAN),
    "context": ("context", _Num, _NAN),
    "warps_per_sm": ("warps per SM", _Num, _NAN),
    "bandwidth": ("memory bandwidth (GB/s)", _Num, _NAN),
    "theoretical_occupancy": ("theoretical occupancy %", _Num, _NAN),
    "graph_id": ("graph id", _Num, _NAN),
    "graph_node_id": ("graph node id", _Num, _NAN),
    "mname": ("name", str | int | float | None, None),
    "labels": ("labels", str | int | float | None, None),
}

# per category group: (args attribute, events column, kind) with kind int | intish | float | str | raw;
# "int" external_id also reads the 2021 spelling
_FIELDS: dict[str, list[tuple[str, str, str]]] = {
    "host op": [
        ("external_id", "external_id", "int"), ("seq", "seq", "int"), ("fwd_tid", "fwd_tid", "int"),
        ("input_dims", "input_dims", "raw"), ("input_types", "input_types", "raw"),
        ("concrete_inputs", "concrete_inputs", "raw"),
        ("call_stack", "call_stack", "str"), ("module", "module", "str"), ("flops", "flops", "float"),
        ("collective", "collective", "str"), ("in_nelems", "msg_in_nelems", "int"),
        ("out_nelems", "msg_out_nelems", "int"), ("group_size", "group_size", "int"),
        ("dtype", "dtype", "str"), ("pg_name", "pg_name", "str"), ("grid", "grid", "raw"),
    ],
    "runtime": [
        ("external_id", "external_id", "int"), ("correlation", "correlation", "int"), ("grid", "grid", "raw"),
        ("block", "block", "raw"), ("shared_mem", "shared_mem_bytes", "intish"),
    ],
    "device": [
        ("external_id", "external_id", "int"), ("correlation", "correlation", "int"),
        ("device", "device", "int"), ("stream", "stream", "int"), ("nbytes", "bytes", "intish"),
        ("grid", "grid", "raw"), ("block", "block", "raw"), ("registers", "registers", "intish"),
        ("shared_mem", "shared_mem_bytes", "intish"), ("occupancy", "occupancy_ratio", "float"),
        ("blocks_per_sm", "blocks_per_sm", "float"), ("collective", "collective", "str"),
        ("in_nelems", "msg_in_nelems", "int"), ("out_nelems", "msg_out_nelems", "int"), ("group_size", "group_size", "int"),
        ("dtype", "dtype", "str"), ("pg_name", "pg_name", "str"),
    ],
    "memory": [
        ("device_type", "device_type", "intish"), ("device_id", "device", "intish"), ("addr", "addr", "intish"),
        ("mem_bytes", "bytes", "intish"), ("total_alloc", "total_allocated", "intish"),
        ("total_reserved", "total_reserved", "intish"),
    ],
    "metadata": [("mname", "name", "str"), ("labels", "labels", "str")],
}


# Device-row args keys with no events column (formats.md §4.2; Kineto's CUPTI kernel/memcpy args):
# numeric values are kept in the ``device_args`` side table, by key. Any other numeric key of a
# device row (hardware counters such as HTA's ``cupti_profiler`` trace's ``smsp__…`` on
# ``cuda_profiler_range`` rows) is kept there too, and reported (kind ``device_args_kept``).
_DEVICE_EXTRAS = ("queued", "context", "warps_per_sm", "bandwidth", "theoretical_occupancy", "graph_id",
                  "graph_node_id")
# device-row keys known to carry no number nbprof keeps (NCCL collective details, ROCm's "kind")
_DEVICE_OTHER_KEYS = ("kind", "In split size", "Out split size", "Process Group Description", "Process Group Ranks",
                      "occupancy", "Rank", "Seq", "priority")


def _args_struct(group: str, forbid: bool = False) -> type:
    """A ``gc=False`` Struct with only the args keys ``group`` reads (unknown keys are skipped; with
    ``forbid``, an unknown key fails the decode: the device group's check for keys to keep)."""
    attrs = [a for a, _c, _k in _FIELDS[group]]
    if "external_id" in attrs:
        attrs.append("external_id_old")
    if group == "device":
        attrs += _DEVICE_EXTRAS
    fields: list[Any] = [(a, _ARG_SPEC[a][1], msgspec.field(default=_ARG_SPEC[a][2], name=_ARG_SPEC[a][0]))
                         for a in attrs]
    if forbid:
        fields += [(f"_other{i}", msgspec.Raw, msgspec.field(default=_EMPTY_RAW, name=k))
                   for i, k in enumerate(_DEVICE_OTHER_KEYS)]
    return msgspec.defstruct(f"_{group.title().replace(' ', '')}Args", fields, gc=False,
                             forbid_unknown_fields=forbid)


_ARG_STRUCTS = {g: _args_struct(g) for g in _FIELDS}
_DEVICE_ALL_KNOWN = msgspec.json.Decoder(list[_args_struct("device", forbid=True)])  # type: ignore[misc]
_DEVICE_KEYS = frozenset([_ARG_SPEC[a][0] for a, _c, _k in _FIELDS["device"]]
                         + [_ARG_SPEC["external_id_old"][0], *_DEVICE_OTHER_KEYS])
# the Structs are built at import (msgspec.defstruct): mypy cannot use a runtime class as a type argument
_ARG_LIST_DECODERS: dict[str, msgspec.json.Decoder[list[Any]]] = {
    g: msgspec.json.Decoder(list[t]) for g, t in _ARG_STRUCTS.items()  # type: ignore[valid-type]
}
_ARG_ONE_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {g: msgspec.json.Decoder(t) for g, t in _ARG_STRUCTS.items()}


_ARG_COLUMNS = {
    "external_id": "int", "correlation": "int", "device": "int", "stream": "int", "seq": "int", "fwd_tid": "int",
    "input_dims": "raw", "input_types": "raw", "concrete_inputs": "raw", "call_stack": "str", "module": "str", "flops": "float",
    "bytes": "int", "grid": "raw", "block": "raw", "registers": "int", "shared_mem_bytes": "int",
    "occupancy_ratio": "float", "blocks_per_sm": "float", "collective": "str", "msg_in_nelems": "int", "msg_out_nelems": "int",
    "group_size": "int", "dtype": "str", "pg_name": "str",
}
# integer args columns that are ids (a non-numeric string gets its own id); the others are quantities
_ID_COLUMNS = frozenset({"external_id", "correlation", "stream", "seq", "fwd_tid"})
# integer args columns that are counts: a value beyond int64 is not an unsigned bit pattern but unsound (missing,
# reported), and so is a negative one other than the missing -1
_COUNT_COLUMNS = frozenset({"msg_in_nelems", "msg_out_nelems", "group_size"})
_NO_ARGS_CATEGORIES = frozenset({schema.PYTHON_FUNCTION})
_RT_GROUP = schema.RUNTIME_CATEGORIES | {schema.CUDA_SYNC}


def _decode_args(raws: list[msgspec.Raw], group: str, ctx: _Ctx, rows: np.ndarray) -> list[Any]:
    """The ``args`` of one category group, decoded in one pass into that group's Struct.

    An event whose args have unexpected types (e.g. a list where a number belongs) gets default
    args, reported as ``bad_args`` (strict mode raises). ``rows``: the events' indices in the run.
    """
    try:
        return _ARG_LIST_DECODERS[group].decode(_json_array(raws))
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    one, default = _ARG_ONE_DECODERS[group], _ARG_STRUCTS[group]()
    out, bad = [], []
    for i, r in enumerate(raws):
        try:
            out.append(one.decode(r))
        except (msgspec.DecodeError, msgspec.ValidationError):
            out.append(default)
            bad.append(i)
    ctx.defect("bad_args", "repaired", len(bad), f"{len(bad)} {_REPAIR_TEXT['bad_args']}", int(rows[bad[0]]),
               f"{len(bad)} events have args of unexpected types")
    return out


class _ArgColumns(dict[str, Any]):
    """Args columns of ``n`` rows by name; a numeric one appears (-1 or NaN in every row) when first written."""

    DEFAULTS: ClassVar[dict[str, Any]] = {"int": -1, "float": np.nan}

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def __missing__(self, col: str) -> np.ndarray:
        v = self[col] = np.full(self.n, self.DEFAULTS[_ARG_COLUMNS[col]])
        return v


def _arg_columns(args: list[Any], group: str, ctx: _Ctx, rows: np.ndarray, cols: dict[str, Any],
                 at: np.ndarray | None) -> None:
    """Write the columns of ``_FIELDS[group]`` from decoded ``args`` into ``cols`` (at rows ``at``, or whole)."""
    sel = slice(None) if at is None else at
    n = len(args)
    for attr, col, kind in _FIELDS[group]:
        vals = _col(args, attr)
        if attr == "external_id":
            old = _col(args, "external_id_old")
            if old.count(-1) != n:  # 2021 traces spell it "external id"
                v, o = _to_int_array(vals, col, ctx, rows), _to_int_array(old, col, ctx, rows)
                cols[col][sel] = np.where((v == -1) & (o != -1), o, v)
                continue
        if vals.count(_ARG_SPEC[attr][2]) == n:  # the key is in none of them (the default is one object)
            continue
        if kind == "int":
            cols[col][sel] = _to_int_array(vals, col, ctx, rows, ids=col in _ID_COLUMNS,
                                           unsigned=col not in _COUNT_COLUMNS)
        elif kind == "intish":
            cols[col][sel] = _intish(vals, col, ctx, rows)
        elif kind == "float":
            cols[col][sel] = _num_or_nan(vals, col, ctx, rows)
        elif kind == "raw":
            cols[col].put(at, _raw_texts(vals))
        else:
            cols[col].put(at, vals)
    if any(c in cols for c in _COUNT_COLUMNS):
        _check_counts(args, group, ctx, rows, cols, sel)


def _check_counts(args: list[Any], group: str, ctx: _Ctx, rows: np.ndarray, cols: dict[str, Any], sel: Any) -> None:
    """Counts of collectives that cannot be: a negative one other than -1, and an ``In``/``Out msg nelems`` whose
    bytes (times the row's ``dtype``'s size, ``nbprof.trace.dtypes``) are beyond ``MAX_MESSAGE_BYTES`` (2**53,
    where float64 message sizes stop being exact): set to -1 (no size), reported (kinds ``negative_<column>``,
    ``msg_bytes_beyond_2_53``, with an example)."""
    names = {c for _a, c, _k in _FIELDS[group]}
    for col in sorted(_COUNT_COLUMNS & names & set(cols)):
        v = cols[col][sel]
        bad = np.flatnonzero(v < -1)
        if len(bad):
            neg = int(v[bad[0]])
            v[bad] = -1
            cols[col][sel] = v
            ctx.defect(f"negative_{col}", "repaired", len(bad),
                       f"{len(bad)} values of {col!r} were negative counts (e.g. {neg}): set to -1 (missing)",
                       int(rows[bad[0]]), f"{len(bad)} values of {col!r} are negative counts (e.g. {neg})")
    if "dtype" not in names:
        return
    item = np.array([item_bytes(d) or 0 for d in _col(args, "dtype")], dtype=np.int64)
    limit = np.where(item > 0, MAX_MESSAGE_BYTES // np.maximum(item, 1), np.iinfo(np.int64).max)
    for col in ("msg_in_nelems", "msg_out_nelems"):
        if col not in cols:
            continue
        v = cols[col][sel]
        bad = np.flatnonzero(v > limit)
        if not len(bad):
            continue
        i = int(bad[0])
        ex = f"{int(v[i])} elements of {_col(args, 'dtype')[i]} = {int(v[i]) * int(item[i])} bytes"
        v[bad] = -1
        cols[col][sel] = v
        ctx.defect("msg_bytes_beyond_2_53", "repaired", len(bad),
                   f"{len(bad)} collective message sizes (In/Out msg nelems) were beyond 2**53 bytes, where float64 sizes stop "
                   f"being exact (e.g. {ex}): set to -1 (no size)", int(rows[i]),
                   f"{len(bad)} collective message sizes are beyond 2**53 bytes (e.g. {ex})")


def _decode_device_args(raws: list[msgspec.Raw], ctx: _Ctx, rows: np.ndarray) -> tuple[list[Any], bool]:
    """``_decode_args`` for the device group, first with every known key declared and no other key
    allowed (``_DEVICE_ALL_KNOWN``): the args, and whether that decode succeeded (no key to look for)."""
    try:
        return _DEVICE_ALL_KNOWN.decode(_json_array(raws)), True
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _decode_args(raws, "device", ctx, rows), False


def _device_extras(raws: list[msgspec.Raw], args: list[Any], all_known: bool, ctx: _Ctx, rows: np.ndarray,
                   at: np.ndarray) -> list[tuple[np.ndarray, str, np.ndarray]]:
    """The numeric args of device rows that have no events column, as (rows ``at`` of those that
    carry the key, JSON key, float64 values) per key: the ``device_args`` side table's content.

    The values of known keys come from the decoded ``args``; unless ``all_known`` (see
    ``_decode_device_args``), every device row's args are read as a dict and each numeric
    value under a key not in ``_DEVICE_KEYS`` is kept as well (reported: kind ``device_args_kept``,
    count = values, the keys).
    """
    out: list[tuple[np.ndarray, str, np.ndarray]] = []
    for attr in _DEVICE_EXTRAS:
        vals = _col(args, attr)
        if vals.count(_NAN) == len(vals):  # the key is in none of them (the default is one object)
            continue
        v = _num_or_nan(vals, _ARG_SPEC[attr][0], ctx, rows)
        has = ~np.isnan(v)
        out.append((at[has], _ARG_SPEC[attr][0], v[has]))
    if all_known:
        return out
    found: dict[str, tuple[list[int], list[float]]] = {}
    for i, r in enumerate(raws):
        try:
            d = _ANY_ARGS.decode(r)
        except msgspec.DecodeError:
            continue
        if not isinstance(d, dict):
            continue
        for k, x in d.items():
            if k not in _DEVICE_KEYS and type(x) in (int, float):
                pos, xs = found.setdefault(k, ([], []))
                pos.append(i)
                xs.append(float(x))
    n = 0
    for k, (pos, xs) in found.items():
        out.append((at[pos], k, np.array(xs, dtype=np.float64)))
        n += len(xs)
    if n:
        keys = sorted(found)
        shown = ", ".join(repr(k) for k in keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
        shown = shown.replace("{", "{{").replace("}", "}}")  # the message is a template (``_Ctx.note``)
        ctx.note("device_args_kept", n, int(rows[found[keys[0]][0][0]]),
                 f"{{count}} numeric args of device rows under {len(keys)} keys nbprof has no column for ({shown}; "
                 "e.g. {example}) were kept in the side table trace.tables['device_args'] (event, key, value)",
                 f"{keys[0]!r}: {found[keys[0]][1][0]:g}")
    return out


_ANY_ARGS = msgspec.json.Decoder()
