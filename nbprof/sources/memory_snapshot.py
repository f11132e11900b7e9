"""CUDA caching-allocator snapshots and ``export_memory_timeline`` outputs -> ``MemorySnapshot``.

Format facts (torch ``torch/cuda/memory.py`` ``_snapshot`` docstring; ../shared/notes/formats.md §4.3-4.4):

- ``torch.cuda.memory._dump_snapshot(path)`` pickles a plain dict ``{"segments": [...], "device_traces":
  [[TraceEntry, ...] per device], ...}`` (newer builds add ``allocator_settings``, ``external_annotations``).
  ``Segment``: ``device, address, total_size, allocated_size, active_size, requested_size, stream,
  segment_type ('small'|'large'), segment_pool_id, is_expandable, frames, blocks``;
  ``Block``: ``address, size, requested_size, state ('active_allocated'|'active_awaiting_free'|'inactive'), frames``;
  ``TraceEntry``: ``action ('alloc'|'free_requested'|'free_completed'|'segment_alloc'|'segment_free'|
  'segment_map'|'segment_unmap'|'snapshot'|'oom'), addr, size, stream, time_us, frames, device_free (oom)``;
  ``Frame``: ``filename, line, name``. Keys differ across torch versions: everything is read defensively.
- A pickle can carry code. Snapshots are plain dicts/lists/str/int/float/bool/None, so the unpickler here
  refuses **every** class lookup: a pickle that would import or call anything raises ``TraceFormatError``
  and runs nothing. Any pickle protocol (0-5) is read.
- ``export_memory_timeline(path.raw.json.gz)``: a JSON list of ``[t_ns, action, bytes, category]`` with
  ``t_ns == -1`` for pre-existing tensors, action 1 PREEXISTING, 2 CREATE, 3 INCREMENT_VERSION, 4 DESTROY
  (``torch/profiler/_memory_profiler.py`` ``Action``), category index into ``_CATEGORY_TO_COLORS``
  order: 0 parameter, 1 optimizer state, 2 input, 3 temporary, 4 activation, 5 gradient, 6 autograd detail,
  7 unknown. ``.json``: ``[times_us, sizes[t][1 + category]]``.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from typing import Any, NoReturn

import msgspec
import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..trace.memory_snapshot import TIMELINE_ACTIONS, TIMELINE_CATEGORIES, MemorySnapshot, MemoryTimeline  # re-exported
from ..trace.model import LoadReport
from .kineto import read_bytes

__all__ = [
    "MemorySnapshot",
    "MemoryTimeline",
    "load_memory_snapshot",
    "load_memory_timeline",
    "TIMELINE_CATEGORIES",
    "TIMELINE_ACTIONS",
]

_TORCH_INTERNAL = ("torch/", "torch\\", "<frozen", "site-packages/torch", "contextlib.py", "threading.py")


class _RefuseClasses(pickle.Unpickler):
    """An unpickler that resolves no globals at all: plain containers and scalars only."""

    def __init__(self, f: io.BytesIO, path: str) -> None:
        super().__init__(f)
        self._path = path

    def find_class(self, module: str, name: str) -> NoReturn:
        msg = (
            f"refusing to load {module}.{name}: a memory snapshot is plain data (dicts, lists, numbers, "
            "strings); this pickle references code, which nbprof never executes"
        )
        raise TraceFormatError(self._path, None, msg)

    def persistent_load(self, pid: Any) -> NoReturn:
        raise TraceFormatError(self._path, None, "refusing persistent ids in a memory snapshot pickle")


def _safe_unpickle(data: bytes, path: str, report: LoadReport | None = None) -> Any:
    """The unpickled object (no class ever resolved), its expansion bounded (``_check_expansion``);
    strings with lone surrogates (not encodable as UTF-8) are noted in ``report`` (``_label`` replaces
    each surrogate with U+FFFD)."""
    try:
        obj = _RefuseClasses(io.BytesIO(data), path).load()
    except TraceFormatError:
        raise
    except Exception as exc:  # truncated/corrupt pickle: EOFError, UnpicklingError, ...
        msg = f"not a readable pickle ({type(exc).__name__}: {exc})"
        raise TraceFormatError(path, None, msg) from exc
    surrogates = _check_expansion(obj, len(data), path)
    if surrogates and report is not None:
        report.add("surrogates", "repaired", surrogates,
                   f"{surrogates} strings held lone surrogate characters (not encodable as UTF-8): each replaced "
                   "with U+FFFD in frame names and file names")
    return obj


# A pickle's back-references (memo ``GET``) let a few KB stand for a tree of billions of nodes, which the
# reading below would walk node by node (a 66 KB pickle: 315 s, 6.8 GB). A real snapshot expands to about
# one node per few bytes of pickle (each frame is its own dict; only strings are shared): the bound is
# generous, in nodes and in string bytes, per byte of pickle, with floors for small files.
_MAX_NODES_PER_BYTE = 64
_MIN_MAX_NODES = 20_000_000
_MAX_TEXT_PER_BYTE = 256
_MIN_MAX_TEXT = 1 << 30


def _check_expansion(obj: Any, nbytes: int, path: str) -> int:
    """Raise ``TraceFormatError`` when ``obj``, read as a tree (every back-reference a copy), holds more
    than ``max(_MIN_MAX_NODES, _MAX_NODES_PER_BYTE * nbytes)`` containers and scalars or more than
    ``max(_MIN_MAX_TEXT, _MAX_TEXT_PER_BYTE * nbytes)`` bytes of strings, or a container holds itself.
    Linear in the distinct objects (sizes memoised by identity). Returns the number of distinct
    strings with lone surrogates."""
    max_nodes = max(_MIN_MAX_NODES, _MAX_NODES_PER_BYTE * nbytes)
    max_text = max(_MIN_MAX_TEXT, _MAX_TEXT_PER_BYTE * nbytes)
    sizes: dict[int, tuple[int, int]] = {}  # id -> (nodes, text bytes) of the tree under it
    keep: list[Any] = []  # the containers measured (their ids stay theirs while this runs)
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(obj, False)]
    surrogates = 0
    while stack:
        o, done = stack.pop()
        t = type(o)
        if t is str or t is bytes or t is bytearray:
            continue
        if t not in (dict, list, tuple, set, frozenset):
            continue
        i = id(o)
        if done:
            kids = [*o.keys(), *o.values()] if t is dict else o
            n, b = 1, 0
            for k in kids:
                tk = type(k)
                if tk is str or tk is bytes or tk is bytearray:
                    n, b = n + 1, b + len(k)
                    if tk is str and not k.isascii() and _SURROGATE.search(k) and id(k) not in sizes:
                        sizes[id(k)] = (1, len(k))
                        keep.append(k)
                        surrogates += 1
                elif tk in (dict, list, tuple, set, frozenset):
                    kn, kb = sizes[id(k)]
                    n, b = n + kn, b + kb
                else:
                    n += 1
            open_.discard(i)
            sizes[i] = (n, b)
            keep.append(o)
            if n > max_nodes or b > max_text:
                raise TraceFormatError(
                    path, None, f"the {nbytes}-byte pickle expands (through repeated back-references) to over "
                    f"{min(n, max_nodes + 1):,} objects / {b:,} bytes of strings; a memory snapshot stays under "
                    f"{max_nodes:,} / {max_text:,} for this size: refused (a crafted or corrupt file)")
            continue
        if i in sizes:
            continue
        if i in open_:
            raise TraceFormatError(path, None, "the pickle holds a container that contains itself: not a memory snapshot")
        open_.add(i)
        stack.append((o, True))
        kids = [*o.keys(), *o.values()] if t is dict else o
        stack.extend((k, False) for k in kids if type(k) in (dict, list, tuple, set, frozenset) and id(k) not in sizes)
    return surrogates


_SURROGATE = re.compile("[\ud800-\udfff]")


def _line(v: Any) -> int | None:
    """A frame's line number (int, or a decimal string); None when it is not one."""
    if v is None:
        return 0
    if isinstance(v, str) and v.strip().lstrip("-").isdigit() and len(v) < 20:
        return int(v)
    if isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63:
        return v
    return None


def _frames_key(frames: Any, bad: list[Any]) -> tuple[Any, ...] | None:
    """Hashable key of a frame list; frames that are not dicts are skipped and a line that is not an
    integer becomes 0 (both counted in ``bad[0]``, the first such value kept in ``bad[1:]``)."""
    if not frames or not isinstance(frames, (list, tuple)):
        return None
    out = []
    for fr in frames:
        if not isinstance(fr, dict):
            bad[0] += 1
            if len(bad) == 1:
                bad.append(_brief(fr))
            continue
        ln = _line(fr.get("line", 0))
        if ln is None:
            bad[0] += 1
            if len(bad) == 1:
                bad.append(_brief(fr.get("line")))
            ln = 0
        name, fn = _label(fr.get("name", "?")), _label(fr.get("filename", "?"))
        if name is None or fn is None:
            bad[0] += 1
            if len(bad) == 1:
                bad.append(f"a {type(fr.get('name') if name is None else fr.get('filename')).__name__} as frame text")
        out.append((name or "?", fn or "?", ln))
    return tuple(out) if out else None


def _brief(v: Any) -> str:
    """A short, safe description of an untrusted value for a report message: a scalar written out
    (cut at 40 characters), a container by its type name and length -- never repr'd as a whole
    (a deeply nested one would recurse, a huge one would flood the message)."""
    if v is None or isinstance(v, (bool, int, float)):
        t = repr(v) if not isinstance(v, int) or abs(v) < 10**40 else f"an int of {v.bit_length()} bits"
        return t
    if isinstance(v, (str, bytes)):
        t = repr(v[:40])
        return t + ("..." if len(v) > 40 else "")
    try:
        n = len(v)
    except Exception:  # an object without a length: the type name alone
        return f"a {type(v).__name__}"
    return f"a {type(v).__name__} of {n} item{'s' if n != 1 else ''}"


def _label(v: Any) -> str | None:
    """Frame text: a str as is, a plain scalar written out; None for containers (never repr'd: a deeply
    nested one would recurse)."""
    if isinstance(v, str):
        return v if v.isascii() else _SURROGATE.sub("\ufffd", v)
    if v is None or isinstance(v, (int, float, bool)):
        return str(v)
    return None


def _field(v: Any) -> str:
    """A text field as str: scalars and short tuples of scalars written out (``segment_pool_id`` is
    ``(0, 0)``), anything else by its type name (never repr'd deeply)."""
    lab = _label(v)
    if lab is not None:
        return lab
    if isinstance(v, (tuple, list)) and len(v) <= 16 and all(_label(x) is not None and not isinstance(x, str) for x in v):
        return str(v)
    return f"<{type(v).__name__}>"


def _seq(v: Any, what: str, report: LoadReport) -> list[Any] | tuple[Any, ...]:
    """``v`` when it is a list/tuple; None -> []; anything else -> [] with a report entry."""
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return v
    report.add(f"bad_container:{what}", "dropped", 1,
               f"{what} is a {type(v).__name__}, expected a list: ignored")
    return []


def _strict_check(report: LoadReport, path: str) -> None:
    """strict mode: the first repair or drop as an error."""
    for it in report.issues:
        if it.action in ("repaired", "dropped"):
            raise TraceFormatError(path, it.offset, f"{it.message} (strict mode: not repaired)")


def _strip_bom(data: bytes, report: LoadReport) -> bytes:
    if data[:3] == b"\xef\xbb\xbf":
        report.add("utf8_bom", "assumed", 1, "the file starts with a UTF-8 byte-order mark: skipped", offset=0)
        return data[3:]
    return data


def _is_python(fn: str) -> bool:
    return fn.endswith(".py")


def _is_internal(fn: str) -> bool:
    return any(s in fn for s in _TORCH_INTERNAL)


def _fmt(fr: tuple[Any, ...]) -> str:
    name, fn, line = fr
    return f"{name} ({os.path.basename(fn)}:{line})"


def _aten_op(key: tuple[Any, ...]) -> str:
    """``at::_ops::mm::call(...)`` -> ``aten::mm`` (the innermost dispatcher op in a C++ stack)."""
    for name, _fn, _line in key:
        if name.startswith("at::_ops::"):
            return "aten::" + str(name[len("at::_ops::"):].split("::")[0])
    return ""


def _top_user(key: tuple[Any, ...]) -> str:
    """The innermost user Python frame; else the innermost Python frame; else the aten op; else frame 0."""
    py = [fr for fr in key if _is_python(fr[1])]
    for fr in py:
        if not _is_internal(fr[1]):
            return _fmt(fr)
    if py:
        return _fmt(py[0])
    op = _aten_op(key)
    return op or _fmt(key[0])


def _int(v: Any, default: int = -1) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        # addresses are uint64: 2**63..2**64-1 wrap to the int64 with the same bits; beyond: default
        return v if -(2**63) <= v < 2**63 else (v - 2**64 if 2**63 <= v < 2**64 else default)
    if isinstance(v, float) and np.isfinite(v) and -(2.0**63) <= v < 2.0**63:
        return int(v)
    return default


def load_memory_snapshot(path: str | os.PathLike[str], *, data: bytes | None = None, strict: bool = False) -> MemorySnapshot:
    """Load a ``torch.cuda.memory._dump_snapshot`` pickle (any protocol) without executing anything.

    Parameters
    ----------
    path : str or PathLike
        The ``.pickle`` file (gzip-compressed content is accepted too).
    data : bytes, optional
        The file content, when already in memory.
    strict : bool, default False
        Raise ``TraceFormatError`` where tolerant mode would repair or drop something.

    Returns
    -------
    MemorySnapshot
        Tables described on ``MemorySnapshot``; ``report`` lists entries that were skipped, values that
        were repaired (containers of the wrong type, frame lines that are not integers) and a history
        that starts mid-run (blocks freed before any recorded allocation).

    Raises
    ------
    TraceFormatError
        When the pickle references any class or function (it could run code), is corrupt, or is not a
        snapshot dict with ``segments`` / ``device_traces``.
    """
    spath = os.fspath(path)
    report = LoadReport(path=spath)
    if data is None:
        data = read_bytes(spath, report)
    obj = _safe_unpickle(data, spath, report)
    if isinstance(obj, list):  # very old snapshots: a bare list of segments
        obj = {"segments": obj, "device_traces": []}
        report.add("old_layout", "assumed", 1, "bare list of segments (old torch): no trace entries")
    if not isinstance(obj, dict) or not ({"segments", "device_traces"} & set(obj)):
        kind = type(obj).__name__
        keys = sorted(obj)[:8] if isinstance(obj, dict) else []
        raise TraceFormatError(spath, None, f"not a memory snapshot: got a {kind} with keys {keys}, expected 'segments'/'device_traces'")

    frame_ids: dict[tuple[Any, ...], int] = {}
    bad_frames: list[Any] = [0]
    bad_sizes: list[int] = [0]

    def size(v: Any) -> int:
        """A byte count: an int in [0, 2**53); anything else (negative, huge, not a number) -> 0, counted."""
        if v is None:
            return 0
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 2**53 and float(v).is_integer():
            return int(v)
        bad_sizes[0] += 1
        return 0

    def fid(frames: Any) -> int:
        k = _frames_key(frames, bad_frames)
        if k is None:
            return -1
        i = frame_ids.get(k)
        if i is None:
            i = frame_ids[k] = len(frame_ids)
        return i

    # --- segments and blocks
    seg_rows, blk_rows = [], []
    for s in _seq(obj.get("segments"), "segments", report):
        if not isinstance(s, dict):
            report.add("bad_segment", "dropped", 1, "segment entries that are not dicts were skipped")
            continue
        dev = _int(s.get("device"), 0)
        dev = dev if 0 <= dev < 2**15 else 0
        addr = _int(s.get("address"))
        blocks = _seq(s.get("blocks"), "segment blocks", report)
        seg_rows.append(
            (
                dev,
                addr,
                size(s.get("total_size")),
                size(s.get("allocated_size")),
                size(s.get("active_size")),
                size(s.get("requested_size")),
                _int(s.get("stream"), 0),
                _field(s.get("segment_type", "")),
                _field(s.get("segment_pool_id", "")),
                bool(s.get("is_expandable", False)),
                len(blocks),
            )
        )
        for b in blocks:
            if isinstance(b, dict):
                blk_rows.append(
                    (
                        dev,
                        addr,
                        _int(b.get("address")),
                        size(b.get("size")),
                        size(b.get("requested_size", b.get("size"))),
                        _field(b.get("state", "")),
                        fid(b.get("frames")),
                    )
                )
    segments = pd.DataFrame(
        seg_rows,
        columns=[
            "device", "address", "total_size_bytes", "allocated_size_bytes", "active_size_bytes",
            "requested_size_bytes", "stream", "segment_type", "pool_id", "is_expandable", "n_blocks",
        ],
    ).astype({"device": "int16", "address": "int64", "total_size_bytes": "int64", "allocated_size_bytes": "int64",
              "active_size_bytes": "int64", "requested_size_bytes": "int64", "stream": "int64", "n_blocks": "int64"})
    segments["segment_type"] = segments["segment_type"].astype("category")
    blocks_df = pd.DataFrame(
        blk_rows, columns=["device", "segment_address", "address", "size_bytes", "requested_size_bytes", "state", "frames_id"]
    ).astype({"device": "int16", "segment_address": "int64", "address": "int64", "size_bytes": "int64",
              "requested_size_bytes": "int64", "frames_id": "int64"})
    blocks_df["state"] = blocks_df["state"].astype("category")

    # --- trace entries
    dev_col, idx_col, t_col, act_col, addr_col, size_col, stream_col, fid_col, free_col = ([] for _ in range(9))
    traces = _seq(obj.get("device_traces"), "device_traces", report)
    n_bad = 0
    for dev, entries in enumerate(traces):
        if entries is None:
            continue
        if not isinstance(entries, (list, tuple)):
            report.add("bad_container:device_traces", "dropped", 1,
                       f"device_traces[{dev}] is a {type(entries).__name__}, expected a list of trace entries: ignored")
            continue
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or "action" not in e:
                n_bad += 1
                continue
            dev_col.append(dev)
            idx_col.append(i)
            t = e.get("time_us")
            t_col.append(_int(t) if t is not None else -1)
            act_col.append(_label(e["action"]) or "unknown")
            addr_col.append(_int(e.get("addr")))
            size_col.append(size(e.get("size")))
            stream_col.append(_int(e.get("stream"), 0))
            fid_col.append(fid(e.get("frames")))
            free_col.append(_int(e.get("device_free")))
    if n_bad:
        report.add("bad_trace_entry", "dropped", n_bad, f"{n_bad} trace entries without an 'action' were skipped")
    t_arr = np.array(t_col, dtype=np.int64)
    timed = t_arr >= 0
    origin_us = int(t_arr[timed].min()) if timed.any() else None
    ts_ns = np.where(timed, (t_arr - (origin_us or 0)) * 1000, -1)
    if len(t_arr) and not timed.all():
        untimed = int((~timed).sum())
        report.add("no_time", "assumed", untimed,
                   f"{untimed} trace entries have no time_us (older torch): ordered by index only")
    events = pd.DataFrame(
        {
            "device": np.array(dev_col, dtype=np.int16),
            "idx": np.array(idx_col, dtype=np.int64),
            "ts_ns": ts_ns.astype(np.int64),
            "action": pd.Categorical(act_col),
            "addr": np.array(addr_col, dtype=np.int64),
            "size_bytes": np.array(size_col, dtype=np.int64),
            "stream": np.array(stream_col, dtype=np.int64),
            "frames_id": np.array(fid_col, dtype=np.int64),
            "device_free_bytes": np.array(free_col, dtype=np.int64),
        }
    )
    keys = sorted(frame_ids, key=frame_ids.__getitem__)
    frames = pd.DataFrame(
        {
            "frames_id": np.arange(len(keys), dtype=np.int64),
            "stack": [" <- ".join(f"{n} ({os.path.basename(f)}:{ln})" for n, f, ln in k) for k in keys],
            "top_user_frame": [_top_user(k) for k in keys],
            "op": [_aten_op(k) for k in keys],
            "depth": np.array([len(k) for k in keys], dtype=np.int64),
        }
    )
    if bad_sizes[0]:
        report.add("bad_size", "repaired", bad_sizes[0], f"{bad_sizes[0]} byte counts (size, total_size, ...) are "
                   "negative, beyond 2**53 or not numbers: set to 0")
    if bad_frames[0]:
        report.add("bad_frame", "repaired", bad_frames[0], f"{bad_frames[0]} stack frames are not dicts or have a line "
                   f"that is not an integer (first: {bad_frames[1]}): skipped / line set to 0")
    if not len(events):
        report.add("no_history", "assumed", 0, "no allocator trace entries (history was not recorded): only the final state")
    else:
        _note_mid_run(events, report)
    if strict:
        _strict_check(report, spath)
    extra = {k: v for k, v in obj.items() if k not in ("segments", "device_traces")}
    return MemorySnapshot(events, segments, blocks_df, frames, origin_us, spath, report, extra)


def _note_mid_run(events: pd.DataFrame, report: LoadReport) -> None:
    """Note a history that starts mid-run: a block freed (or a segment released) before any recorded
    allocation of its address -- the ring buffer of ``max_entries`` wrapped or recording began late."""
    act = events["action"].astype(str)
    for frees, allocs, what in ((("free_requested", "free_completed"), ("alloc",), "blocks"),
                                (("segment_free", "segment_unmap"), ("segment_alloc", "segment_map"), "segments")):
        sel = act.isin(frees + allocs) & (events["addr"] >= 0)
        if not sel.any():
            continue
        first = events[sel].drop_duplicates(["device", "addr"])
        orphan = first[act[first.index].isin(frees)]
        if len(orphan):
            i = int(orphan["idx"].iloc[0])
            report.add(f"history_starts_mid_run:{what}", "assumed", int(len(orphan)),
                       f"{len(orphan)} {what} are released before any recorded allocation (first: trace entry {i} "
                       f"of device {int(orphan['device'].iloc[0])}): the history starts mid-run (max_entries "
                       "wrapped or recording began late), so allocations made before it are not in the trace")


_TL_DECODER = msgspec.json.Decoder()
_I64 = (-(2**63), 2**63)


def _row4(r: Any) -> bool:
    """A raw timeline row ``[t, action, bytes, category]`` of four int64 integers."""
    return (isinstance(r, list) and len(r) == 4
            and all(type(x) is int and _I64[0] <= x < _I64[1] for x in r))


def load_memory_timeline(path: str | os.PathLike[str], *, device: int = 0, strict: bool = False) -> MemoryTimeline:
    """Load ``export_memory_timeline`` output (``.raw.json[.gz]`` rows or ``.json[.gz]`` curves).

    Parameters
    ----------
    path : str or PathLike
    device : int, default 0
        Stored in nothing but the report: the files do not say which device they are for.
    strict : bool, default False
        Raise ``TraceFormatError`` where tolerant mode would drop or repair rows.

    Returns
    -------
    MemoryTimeline
        For raw files, one row per action. For the ``.json`` curve form, one ``create`` row per
        category change so the same analyses apply (``bytes`` = the per-category delta). Rows that
        are not four integers in int64 range (ragged, null, huge, text) are dropped and reported with
        the first one's index.

    Raises
    ------
    TraceFormatError
        When the file is not one of the two layouts.
    """
    spath = os.fspath(path)
    report = LoadReport(path=spath)
    data = _strip_bom(read_bytes(spath, report), report)
    try:
        obj = _TL_DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:  # msgspec raises RecursionError on deep nesting
        raise TraceFormatError(spath, None, f"not JSON: {exc}") from exc
    if (isinstance(obj, list) and len(obj) == 2 and isinstance(obj[0], list) and obj[1]
            and isinstance(obj[1], list) and isinstance(obj[1][0], list)):
        ev, t0 = _curve(obj, spath, report)
        if strict:
            _strict_check(report, spath)
        return MemoryTimeline(ev, t0 * 1000, spath, report)
    if not isinstance(obj, list) or (obj and not (isinstance(obj[0], list) and len(obj[0]) == 4)):
        raise TraceFormatError(spath, None, "not an export_memory_timeline file: expected "
                               "[[ts, action, bytes, category], ...] or [times, sizes]")
    try:
        arr = np.array(obj, dtype=np.int64).reshape(-1, 4)
        ok = len(arr) == len(obj)
    except (ValueError, TypeError, OverflowError):
        ok = False
    if not ok:  # ragged, null, huge or text rows: keep the sound ones
        good = [_row4(r) for r in obj]
        first = good.index(False)
        n_bad = len(good) - sum(good)
        report.add("bad_row", "dropped", n_bad, f"{n_bad} rows are not [t, action, bytes, category] with four "
                   f"int64 integers (first: row {first}: {str(obj[first])[:60]}): dropped")
        arr = np.array([r for r, g in zip(obj, good) if g], dtype=np.int64).reshape(-1, 4)
    t = arr[:, 0]
    timed = t >= 0
    t0 = int(t[timed].min()) if timed.any() else 0
    bad_cat = (arr[:, 3] < 0) | (arr[:, 3] > 7)
    if bad_cat.any():
        report.add("unknown_category", "repaired", int(bad_cat.sum()), "rows with an unknown category index: set to 'unknown'")
    cats = np.where(bad_cat, 7, arr[:, 3])
    ev = pd.DataFrame(
        {
            "ts_ns": np.where(timed, t - t0, -1),
            "action": pd.Categorical([TIMELINE_ACTIONS.get(int(a), f"action_{int(a)}") for a in arr[:, 1]]),
            "bytes": arr[:, 2],
            "category": pd.Categorical.from_codes(cats, categories=TIMELINE_CATEGORIES),
        }
    )
    if strict:
        _strict_check(report, spath)
    return MemoryTimeline(ev, t0, spath, report)


def _curve(obj: list[Any], spath: str, report: LoadReport) -> tuple[pd.DataFrame, int]:
    """The curve form ``[times_us, sizes[t][1+cat]]`` -> per-category delta rows (bad time points dropped)."""
    times_in, sizes_in = obj[0], obj[1]
    width = len(sizes_in[0])
    keep = [i for i in range(min(len(times_in), len(sizes_in)))
            if type(times_in[i]) is int and _I64[0] <= times_in[i] < _I64[1] and isinstance(sizes_in[i], list)
            and len(sizes_in[i]) == width and all(type(x) is int and _I64[0] <= x < _I64[1] for x in sizes_in[i])]
    n_bad = max(len(times_in), len(sizes_in)) - len(keep)
    if n_bad:
        kept = set(keep)
        first = next((i for i in range(max(len(times_in), len(sizes_in))) if i not in kept), 0)
        report.add("bad_row", "dropped", n_bad, f"{n_bad} time points of the curve form are not an int64 time with "
                   f"{width} int64 sizes, or have no partner in the other list (first: index {first}): dropped")
    if width < 2:
        raise TraceFormatError(spath, None, "not an export_memory_timeline curve file: size rows have no categories")
    times = np.array([times_in[i] for i in keep], dtype=np.int64)
    sizes = np.array([sizes_in[i] for i in keep], dtype=np.int64).reshape(len(keep), width)[:, 1:]
    deltas = np.diff(np.vstack([np.zeros((1, sizes.shape[1]), np.int64), sizes]), axis=0)
    t_idx, c_idx = np.nonzero(deltas)
    t0 = int(times[times > 0].min()) if (times > 0).any() else 0
    ev = pd.DataFrame(
        {
            "ts_ns": (times[t_idx] - t0) * 1000,
            "action": pd.Categorical(np.where(deltas[t_idx, c_idx] > 0, "create", "destroy")),
            "bytes": deltas[t_idx, c_idx],
            "category": pd.Categorical([TIMELINE_CATEGORIES[min(int(c), 7)] for c in c_idx], categories=TIMELINE_CATEGORIES),
        }
    )
    report.add("curve_form", "assumed", 0, "curve (.json) form: rows are per-category deltas between time points")
    return ev, t0
