"""Mutators: byte level, JSON structure level, gzip, pickle structure, SQLite tables, DeepSpeed text.

Every mutator takes a ``random.Random`` and returns the mutated value plus a short description (kept
in the case record, so a failing case says what was done to its seed). Nothing here ever unpickles
mutated bytes: snapshot pickles are built from the trusted seed's dict (mutated as a dict, then
pickled); only nbprof's own loader reads the mutated bytes.
"""

from __future__ import annotations

import copy
import gzip
import itertools
import json
import pickle
import random
import re
import sqlite3
import sys
import zlib
from collections.abc import Callable
from typing import Any

DEEP = "__NBPROF_FUZZ_DEEP__"

# --------------------------------------------------------------------------- values

HUGE_INTS = [2**63, 2**64, -(2**63) - 1, 10**30, -(10**40), 2**63 - 1, -(2**63), 10**400]
ODD_FLOATS = [1e308, -1e308, 1e-320, -0.0, 0.5, 1.5e19, float("nan"), float("inf"), -float("inf")]
ODD_STRINGS = ["", " ", "1.2.3", "NaN", "-1", "0x10", "\u00e9\u4e2d\U0001f600", "\x00", "\ufeff", "a\"b", "\\", "[memory]",
               "ProfilerStep#x", "ProfilerStep#99999999999999999999", "\ud800"]


def rand_value(rng: random.Random, depth: int = 0) -> Any:
    """A value of a random JSON type (number <-> string <-> null <-> array <-> object <-> bool)."""
    k = rng.randrange(10)
    if k == 0:
        return None
    if k == 1:
        return rng.choice([True, False])
    if k == 2:
        return rng.choice(HUGE_INTS)
    if k == 3:
        return rng.choice(ODD_FLOATS)
    if k == 4:
        return rng.randint(-5, 5)
    if k == 5:
        return rng.choice(ODD_STRINGS)
    if k == 6:
        return "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(1, 12)))
    if k == 7 and depth < 2:
        return [rand_value(rng, depth + 1) for _ in range(rng.randrange(0, 3))]
    if k == 8 and depth < 2:
        return {rng.choice(["a", "ts", "name", "ph", ""]): rand_value(rng, depth + 1) for _ in range(rng.randrange(0, 3))}
    return rng.uniform(-1e6, 1e6)


def swap_type(rng: random.Random, v: Any) -> Any:
    """``v`` as a value of another JSON type."""
    if isinstance(v, bool) or v is None:
        return rng.choice([0, "true", [], {}, 1.5])
    if isinstance(v, (int, float)):
        return rng.choice([str(v), None, [v], {"v": v}, rng.choice(HUGE_INTS), rng.choice(ODD_FLOATS), True])
    if isinstance(v, str):
        try:
            num: Any = float(v)
        except ValueError:
            num = len(v)
        return rng.choice([num, None, [v], {"s": v}, v.encode("utf-8", "replace").hex(), 0])
    if isinstance(v, list):
        return rng.choice([{str(i): x for i, x in enumerate(v)}, None, len(v), "list", v[:1] if v else 0])
    if isinstance(v, dict):
        return rng.choice([list(v.values()), list(v.items()), None, "obj", 0, list(v)])
    return None


def _nodes(obj: Any, path: tuple = (), out: list | None = None, limit: int = 20000) -> list[tuple]:
    """Paths to every container slot under ``obj`` (parent, key) for random choice."""
    if out is None:
        out = []
    stack = [obj]
    while stack and len(out) < limit:
        o = stack.pop()
        if isinstance(o, dict):
            for k in list(o):
                out.append((o, k))
                if isinstance(o[k], (dict, list)):
                    stack.append(o[k])
        elif isinstance(o, list):
            for i in range(len(o)):
                out.append((o, i))
                if isinstance(o[i], (dict, list)):
                    stack.append(o[i])
    return out


# --------------------------------------------------------------------------- bytes

def byte_mutation(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """One byte-level mutation."""
    b = bytearray(data)
    n = len(b)
    k = rng.randrange(11)
    if n == 0:
        return bytes(rng.randbytes(rng.randrange(1, 16))), "random bytes into empty"
    if k == 0:
        cnt = rng.randint(1, 8)
        for _ in range(cnt):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b), f"flip {cnt} bits"
    if k == 1:
        i = rng.randrange(n)
        return bytes(b[:i]), f"truncate at {i}/{n}"
    if k == 2:
        i = rng.randrange(n)
        j = min(n, i + rng.randint(1, max(1, n // 8)))
        return bytes(b[:i] + b[j:]), f"delete span {i}:{j}"
    if k == 3:
        i = rng.randrange(n)
        j = min(n, i + rng.randint(1, max(1, n // 8)))
        at = rng.randrange(n)
        return bytes(b[:at] + b[i:j] + b[at:]), f"duplicate span {i}:{j} at {at}"
    if k == 4:
        return b"\xef\xbb\xbf" + bytes(b), "UTF-8 BOM prefix"
    if k == 5:
        i = rng.randrange(n)
        ins = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\x1b[31m", b"\r", b"\x80\x80"])
        return bytes(b[:i] + ins + b[i:]), f"insert {ins!r} at {i}"
    if k == 6:
        i = rng.randrange(n)
        tok = rng.choice([b"NaN", b"Infinity", b"-Infinity", b"1e999", b"99999999999999999999999",
                          b"-", b"\"", b",", b"]", b"}", b"{", b"["])
        return bytes(b[:i] + tok + b[i:]), f"insert token {tok!r} at {i}"
    if k == 7:
        i = rng.randrange(n)
        return bytes(b[:i] + rng.randbytes(rng.randint(1, 32)) + b[i:]), f"insert random bytes at {i}"
    if k == 8:
        return bytes(b) + rng.choice([b"\n", b"garbage", b"\x00" * 10, b"]}", bytes(b[:50])]), "trailing bytes"
    if k == 9:
        i = rng.randrange(n)
        b[i] = rng.randrange(256)
        return bytes(b), f"set byte {i}"
    return b"\xef\xbb\xbf" + bytes(b[: rng.randrange(n)]), "BOM + truncate"


def gzip_mutation(rng: random.Random, raw: bytes, mutate_plain: Callable[[random.Random, bytes], tuple[bytes, str]]) -> tuple[bytes, str]:
    """For .gz content: mutate the compressed bytes, or mutate the plain bytes then recompress."""
    k = rng.randrange(6)
    if k in (0, 1):
        comp = gzip.compress(raw, mtime=0)
        b, d = byte_mutation(rng, comp)
        return b, f"gzip bytes: {d}"
    if k == 2:
        comp = gzip.compress(raw, mtime=0)
        i = rng.randrange(10, max(11, len(comp) - 8))
        return comp[:i], f"gzip truncated at {i}/{len(comp)}"
    if k == 3:
        comp = gzip.compress(raw, mtime=0)
        return comp + rng.choice([gzip.compress(b"xx"), b"\x1f\x8b", b"garbage", comp]), "gzip trailing member/garbage"
    if k == 4 and rng.random() < 0.5:  # issue 33: the document split over several members, or zero padding
        if rng.random() < 0.5 and len(raw) > 2:
            cut = sorted(rng.sample(range(1, len(raw)), min(len(raw) - 1, rng.randint(1, 4))))
            bounds = [0, *cut, len(raw)]
            return b"".join(gzip.compress(raw[a:b], mtime=0) for a, b in itertools.pairwise(bounds)), \
                f"gzip {len(bounds) - 1} members"
        return gzip.compress(raw, mtime=0) + bytes(rng.choice([1, 512, 4096])), "gzip zero padding"
    plain, d = mutate_plain(rng, raw)
    return gzip.compress(plain, mtime=0), f"recompressed: {d}"


# --------------------------------------------------------------------------- JSON documents

def _dumps(obj: Any, deep: int = 0) -> bytes:
    txt = json.dumps(obj, ensure_ascii=False, allow_nan=True)
    if deep:
        txt = txt.replace(json.dumps(DEEP), "[" * deep + "1" + "]" * deep, 1)
    return txt.encode("utf-8", "surrogatepass")


def json_structure_mutation(rng: random.Random, doc: Any, events_key: str | None = "traceEvents") -> tuple[bytes, str]:
    """One structure-level mutation of a parsed JSON document (Kineto object/array, timeline rows)."""
    doc = copy.deepcopy(doc)
    evs = doc.get(events_key) if isinstance(doc, dict) and events_key else doc
    if not isinstance(evs, list):
        evs = []
    k = rng.randrange(14)
    deep = 0
    if k == 0 and evs:  # type swap of a value inside an event
        ev = rng.choice(evs)
        slots = _nodes(ev)
        if slots:
            par, key = rng.choice(slots)
            par[key] = swap_type(rng, par[key])
            return _dumps(doc), f"type swap at {key!r}"
    if k == 1 and evs:  # type swap of a whole event / of a top-level key
        if isinstance(doc, dict) and rng.random() < 0.4:
            key = rng.choice(list(doc))
            doc[key] = swap_type(rng, doc[key])
            return _dumps(doc), f"type swap of top-level {key!r}"
        i = rng.randrange(len(evs))
        evs[i] = swap_type(rng, evs[i])
        return _dumps(doc), f"type swap of event {i}"
    if k == 2:  # non-object elements in the events array
        cnt = rng.randint(1, 5)
        for _ in range(cnt):
            evs.insert(rng.randrange(len(evs) + 1), rng.choice([1, "x", None, [], [1, 2], True, 1.5, "", {}]))
        return _dumps(doc), f"{cnt} non-object elements inserted"
    if k == 3:  # deep nesting
        deep = rng.choice([200, 2000, 20000, 200000])
        if evs and isinstance(evs[0], (dict, list)) and rng.random() < 0.7:
            ev = rng.choice([e for e in evs if isinstance(e, (dict, list))] or [evs])
            if isinstance(ev, dict):
                key = rng.choice(["args", "name", "ts", "dur", "cat", "pid", "extra"] + list(ev))
                ev[key] = DEEP
                where = f"event key {key!r}"
            else:
                ev.append(DEEP)
                where = "row"
        elif isinstance(doc, dict):
            doc[rng.choice(["deviceProperties", "distributedInfo", "x"])] = DEEP
            where = "top level"
        else:
            evs.append(DEEP)
            where = "array"
        return _dumps(doc, deep), f"nesting depth {deep} at {where}"
    if k == 4 and evs:  # huge string
        size = rng.choice([1 << 16, 1 << 18, 1 << 20])
        ev = rng.choice(evs)
        s = rng.choice(["a", "\u00e9", "\\", " ", "\""]) * size
        if isinstance(ev, dict):
            key = rng.choice(["name", "cat", "ph", "args", "id", "s"])
            ev[key] = s
        elif isinstance(ev, list) and ev:
            ev[rng.randrange(len(ev))] = s
        return _dumps(doc), f"huge string ({size} chars)"
    if k == 5 and evs:  # delete keys
        ev = rng.choice(evs)
        if isinstance(ev, dict) and ev:
            for key in rng.sample(list(ev), rng.randint(1, len(ev))):
                del ev[key]
            return _dumps(doc), "keys deleted from an event"
        if isinstance(ev, list) and ev:
            del ev[rng.randrange(len(ev)):]
            return _dumps(doc), "ragged row"
    if k == 6 and evs:  # duplicate / shuffle events
        if rng.random() < 0.5:
            i = rng.randrange(len(evs))
            evs[i:i] = copy.deepcopy(evs[i: i + rng.randint(1, 10)]) * rng.randint(1, 3)
            return _dumps(doc), "events duplicated"
        rng.shuffle(evs)
        return _dumps(doc), "events shuffled"
    if k == 7 and evs:  # odd numeric values in time/size fields
        ev = rng.choice(evs)
        v = rng.choice(HUGE_INTS + ODD_FLOATS + [-1, 0, "12.5", "x", None])
        if isinstance(ev, dict):
            key = rng.choice(["ts", "dur", "pid", "tid", "id", "ts", "dur"])
            ev[key] = v
            return _dumps(doc), f"{key} = {v!r}"
        if isinstance(ev, list) and ev:
            ev[rng.randrange(len(ev))] = v
            return _dumps(doc), f"row value = {v!r}"
    if k == 8 and isinstance(doc, dict):  # traceEvents itself odd / top level odd
        choice = rng.randrange(5)
        if choice == 0:
            doc[events_key] = swap_type(rng, evs)
        elif choice == 1:
            doc = evs
        elif choice == 2:
            doc[events_key] = []
        elif choice == 3:
            doc = {k2: v2 for k2, v2 in doc.items() if k2 != events_key}
        else:
            doc["traceEvents2"] = doc.pop(events_key, [])
        return _dumps(doc), f"events array odd ({choice})"
    if k == 9 and evs:  # args mutated
        ev = rng.choice(evs)
        if isinstance(ev, dict):
            a = ev.get("args")
            if isinstance(a, dict) and a:
                key = rng.choice(list(a))
                a[key] = swap_type(rng, a[key])
                return _dumps(doc), f"args[{key!r}] type swap"
            ev["args"] = rand_value(rng)
            return _dumps(doc), "args replaced"
    if k == 10 and evs:  # phase swaps
        ev = rng.choice(evs)
        if isinstance(ev, dict):
            ev["ph"] = rng.choice(["X", "i", "I", "s", "f", "t", "M", "C", "B", "E", "b", "e", "", "XX", 1, None, "x"])
            if rng.random() < 0.3:
                ev["name"] = rng.choice(["[memory]", "process_name", "thread_name", "process_labels", "ProfilerStep#1"])
            return _dumps(doc), f"phase {ev['ph']!r}"
    if k == 11 and isinstance(doc, dict):  # metadata odd
        key = rng.choice(["baseTimeNanoseconds", "distributedInfo", "deviceProperties", "schemaVersion", "displayTimeUnit"])
        doc[key] = rand_value(rng)
        return _dumps(doc), f"metadata {key} = random"
    if k == 12 and evs:  # many random values
        for _ in range(rng.randint(2, 10)):
            ev = rng.choice(evs)
            slots = _nodes(ev) if isinstance(ev, (dict, list)) else []
            if slots:
                par, key = rng.choice(slots)
                par[key] = rand_value(rng)
        return _dumps(doc), "several random values"
    if k == 13 and evs:  # flows and steps odd
        ev = rng.choice(evs)
        if isinstance(ev, dict):
            ev["ph"] = rng.choice(["s", "f", "t"])
            ev["id"] = rng.choice([1, -1, 2**70, "7", None, 1.5])
            ev["cat"] = rng.choice(["ac2g", "fwdbwd", "async", None, 3])
            return _dumps(doc), "event turned into a flow"
    return _dumps(doc), "re-serialized (no change)"


_OBJ_GAP = re.compile(rb"\}(\s*),(\s*)\{")
_KEY_AT = re.compile(rb'\{\s*"')
_STR_VAL = re.compile(rb':\s*"([^"\\\n]{0,40})"')


def json_text_mutation(rng: random.Random, raw: bytes) -> tuple[bytes, str]:
    """Issue 33's text-level kinds: a duplicate key in an event, a trailing comma before ``]``/``}``, a
    missing comma between two events, an invalid escape (a Windows path) in a string value."""
    k = rng.randrange(4)
    if k == 0:  # duplicate key: '{"ts": <value>, ' in front of an event's own keys
        ms = list(_KEY_AT.finditer(raw, 0, 1 << 20))
        if ms:
            m = rng.choice(ms)
            key = rng.choice([b"ts", b"dur", b"ph", b"name", b"cat", b"pid", b"tid", b"args", b"id"])
            val = rng.choice([b"1", b"-1", b'"x"', b"null", b"[]", b"{}", b"1e400", b"18446744073709551616"])
            i = m.start() + 1
            return raw[:i] + b'"' + key + b'": ' + val + b", " + raw[i:], f"duplicate key {key.decode()}"
    if k == 1:  # trailing comma before a closing bracket
        closes = [i for i in range(max(0, len(raw) - 4096), len(raw)) if raw[i:i + 1] in (b"]", b"}")]
        closes += [m.end() - 1 for m in re.finditer(rb"\}", raw[: 1 << 16])][:200]
        if closes:
            i = rng.choice(closes)
            return raw[:i] + b"," + raw[i:], f"trailing comma at {i}"
    if k == 2:  # missing comma between two events
        gaps = list(_OBJ_GAP.finditer(raw, 0, 1 << 20))
        if gaps:
            m = rng.choice(gaps)
            return raw[: m.start() + 1] + m.group(1) + m.group(2) + raw[m.end() - 1:], f"missing comma at {m.start()}"
    if k == 3:  # an invalid escape inside a string value
        vals = list(_STR_VAL.finditer(raw, 0, 1 << 20))
        if vals:
            m = rng.choice(vals)
            bad = rng.choice([b"C:\\Users\\me\\x.py", b"\\q", b"\\u12", b"\\", b"\\x41"])
            return raw[: m.start(1)] + bad + raw[m.start(1):], f"invalid escape {bad!r}"
    return byte_mutation(rng, raw)


def text_json_mutation(rng: random.Random, raw: bytes, events_key: str | None = "traceEvents") -> tuple[bytes, str]:
    """A JSON file's bytes mutated: structure level when it parses, else byte level (or one of issue 33's
    text-level kinds, ``json_text_mutation``)."""
    if rng.random() < 0.2:
        return json_text_mutation(rng, raw)
    if rng.random() < 0.35:
        return byte_mutation(rng, raw)
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return byte_mutation(rng, raw)
    out, d = json_structure_mutation(rng, doc, events_key)
    if rng.random() < 0.15:
        out, d2 = byte_mutation(rng, out)
        d = f"{d}; {d2}"
    return out, d


# --------------------------------------------------------------------------- memory snapshot pickles

def snapshot_mutation(rng: random.Random, snap: dict) -> tuple[bytes, str]:
    """Mutate the (trusted) seed snapshot dict, re-pickle with a random protocol."""
    s = copy.deepcopy(snap)
    descs = []
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(9)
        slots = _nodes(s)
        if k == 0 and slots:  # type swap anywhere
            par, key = rng.choice(slots)
            par[key] = rng.choice([swap_type(rng, par[key]), b"bytes", (1, 2), {1, 2}, 1 + 2j, rng.choice(HUGE_INTS)])
            descs.append(f"type swap at {key!r}")
        elif k == 1:  # frames with odd line/name/filename
            fr = [(p, key) for p, key in slots if key in ("line", "name", "filename")]
            if fr:
                par, key = rng.choice(fr)
                par[key] = rng.choice(["12", 1.5, None, -1, 2**70, [1], {"a": 1}, "", b"x", float("nan")])
                descs.append(f"frame {key} = {par[key]!r}")
        elif k == 2:  # container swaps
            tgt = [(p, key) for p, key in slots if isinstance(p[key], (list, dict))]
            if tgt:
                par, key = rng.choice(tgt)
                v = par[key]
                par[key] = rng.choice([tuple(v) if isinstance(v, list) else list(v.items()), None, "x", 0,
                                       {i: x for i, x in enumerate(v)} if isinstance(v, list) else list(v.values())])
                descs.append(f"container swap at {key!r}")
        elif k == 3 and slots:  # delete keys
            dk = [(p, key) for p, key in slots if isinstance(p, dict)]
            if dk:
                par, key = rng.choice(dk)
                del par[key]
                descs.append(f"del {key!r}")
        elif k == 4:  # trace entries odd
            traces = s.get("device_traces")
            if isinstance(traces, list) and traces and isinstance(traces[0], list):
                tr = traces[0]
                tr.insert(rng.randrange(len(tr) + 1), rng.choice([
                    None, 1, "alloc", [],
                    {"action": rng.choice(["alloc", "free_requested", "free_completed", "oom", "snapshot",
                                           "segment_alloc", "x", None, 3])},
                    {"action": "alloc", "addr": rng.choice(HUGE_INTS), "size": rng.choice([-1, 2**70, "5", None]),
                     "time_us": rng.choice([-5, 2**64, 1.5, "t", None])},
                ]))
                descs.append("odd trace entry")
        elif k == 5:  # numbers odd
            nk = [(p, key) for p, key in slots if isinstance(p[key], (int, float)) and not isinstance(p[key], bool)]
            if nk:
                par, key = rng.choice(nk)
                par[key] = rng.choice(HUGE_INTS + ODD_FLOATS + [-1, 0, True])
                descs.append(f"{key} = {par[key]!r}")
        elif k == 6:  # top level odd
            segs = s.get("segments") if isinstance(s, dict) else []
            s = rng.choice([[s], "snapshot", None, {"segments": segs}, {}, list(s.items()) if isinstance(s, dict) else s])
            descs.append("top level odd")
            break
        elif k == 8 and rng.random() < 0.5:  # issue 33: back-references that expand (a shared sub-list)
            shared: Any = [{"filename": "a.py", "line": 1, "name": "f"}]
            for _ in range(rng.choice([3, 8, 14])):
                shared = [shared] * rng.choice([2, 10])
            tgt = [(p, key) for p, key in slots if key in ("frames", "blocks", "segments")]
            if tgt:
                par, key = rng.choice(tgt)
                par[key] = shared
                descs.append(f"shared back-references at {key!r}")
        elif k == 7:  # deep nesting (the pickler is iterative on load; pickling needs headroom)
            deep: Any = 1
            for _ in range(rng.choice([50, 500, 3000])):
                deep = [deep]
            tgt = [(p, key) for p, key in slots if key in ("frames", "blocks", "name", "segments", "action")]
            if tgt:
                par, key = rng.choice(tgt)
                par[key] = deep
                descs.append(f"deep nesting at {key!r}")
        else:  # huge strings
            sk = [(p, key) for p, key in slots if isinstance(p[key], str)]
            if sk:
                par, key = rng.choice(sk)
                par[key] = "x" * rng.choice([1 << 16, 1 << 20])
                descs.append(f"huge string at {key!r}")
    proto = rng.randrange(0, pickle.HIGHEST_PROTOCOL + 1)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20000))
    try:
        data = pickle.dumps(s, protocol=proto)
    except (RecursionError, pickle.PicklingError, TypeError, ValueError) as exc:
        data = pickle.dumps(snap, protocol=proto)
        descs.append(f"(unpicklable mutation dropped: {type(exc).__name__})")
    finally:
        sys.setrecursionlimit(old)
    if rng.random() < 0.15:
        data, d = byte_mutation(rng, data)
        descs.append(f"pickle bytes: {d}")
    if rng.random() < 0.08:
        data = gzip.compress(data, mtime=0)
        descs.append("gzip-compressed content")
    return data, f"protocol {proto}: " + "; ".join(descs or ["none"])


# --------------------------------------------------------------------------- Nsight Systems SQLite

NSYS_TABLES = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
               "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS", "StringIds", "ThreadNames", "PROCESSES",
               "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", "EXPORT_META_DATA", "OSRT_API",
               "SCHED_EVENTS", "COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS", "TARGET_INFO_CUDA_STREAM",
               "CUDA_CALLCHAINS", "ProcessStreams", "TARGET_INFO_SYSTEM_ENV"]

SQL_VALUES = ["NULL", "'abc'", "x'ff00fe'", "1.5", "9223372036854775807", "-9223372036854775808", "-1", "0",
              "CAST(x'fffe41c3' AS TEXT)", "'1.2.3'", "''", "1e308", "randomblob(8)"]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def nsys_mutation(rng: random.Random, path: str) -> str:
    """Mutate the SQLite file at ``path`` (a copy of the seed) in place; returns the description."""
    con = sqlite3.connect(path, isolation_level=None)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        present = [t for t in NSYS_TABLES if t in names] or names
        descs = []
        for _ in range(rng.randint(1, 3)):
            t = rng.choice(present)
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({_q(t)})")]
            if not cols:
                continue
            k = rng.randrange(10)
            c = rng.choice(cols)
            if rng.random() < 0.1:  # issue 33: the table replaced by a VIEW (schema drift; a recursive one never ends)
                sel = ", ".join(f"x AS {_q(x)}" for x in cols)
                con.execute(f"DROP TABLE {_q(t)}")
                if rng.random() < 0.5:
                    con.execute(f"CREATE VIEW {_q(t)} AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
                                f"SELECT {sel} FROM r")
                    descs.append(f"{t} replaced by a recursive view")
                else:
                    con.execute(f"CREATE VIEW {_q(t)} AS SELECT {sel} FROM (SELECT 1 AS x)")
                    descs.append(f"{t} replaced by a view")
                present = [x for x in present if x != t] or present
                continue
            if k in (0, 1, 2, 3, 4, 5, 8):  # the table is rebuilt without constraints first
                con.execute(f"CREATE TABLE __fz AS SELECT * FROM {_q(t)}")
                con.execute(f"DROP TABLE {_q(t)}")
                con.execute(f"ALTER TABLE __fz RENAME TO {_q(t)}")
            if k in (0, 1, 2, 3, 4, 5):  # values
                if (t == "StringIds" and c == "value") or rng.random() < 0.2:
                    c = "value" if t == "StringIds" else c
                v = rng.choice(SQL_VALUES)
                frac = rng.choice([1.0, 0.5, 0.1])
                where = "" if frac == 1.0 else f" WHERE abs(random()) % 100 < {int(frac * 100)}"
                if k == 5 and t == "StringIds":
                    con.execute(f"UPDATE StringIds SET value = CAST(x'ff' || CAST(value AS BLOB) AS TEXT){where}")
                    descs.append("invalid UTF-8 in StringIds")
                else:
                    con.execute(f"UPDATE {_q(t)} SET {_q(c)} = {v}{where}")
                    descs.append(f"{t}.{c} = {v} ({frac:.0%})")
            elif k == 6:  # drop a column
                keep = [x for x in cols if x != c]
                if keep:
                    sel = ", ".join(_q(x) for x in keep)
                    con.execute(f"CREATE TABLE __fz AS SELECT {sel} FROM {_q(t)}")
                else:
                    con.execute("CREATE TABLE __fz (x)")
                con.execute(f"DROP TABLE {_q(t)}")
                con.execute(f"ALTER TABLE __fz RENAME TO {_q(t)}")
                descs.append(f"drop column {t}.{c}")
            elif k == 7:  # drop / empty / rename table
                how = rng.randrange(3)
                if how == 0:
                    con.execute(f"DROP TABLE {_q(t)}")
                elif how == 1:
                    con.execute(f"DELETE FROM {_q(t)}")
                else:
                    con.execute(f"ALTER TABLE {_q(t)} RENAME TO {_q(t + '_V' + str(rng.choice([2, 99, 0])))}")
                descs.append(f"table {t}: {['dropped', 'emptied', 'renamed'][how]}")
            elif k == 8:  # duplicate rows / swapped times
                if rng.random() < 0.5:
                    con.execute(f"INSERT INTO {_q(t)} SELECT * FROM {_q(t)}")
                    descs.append(f"{t} rows duplicated")
                elif "start" in cols and "end" in cols:
                    con.execute(f"UPDATE {_q(t)} SET start = end, end = start")
                    descs.append(f"{t} start/end swapped")
            else:  # a view or a second variant shadowing the table
                con.execute(f"CREATE VIEW {_q(t + '_V9')} AS SELECT 1 AS x")
                descs.append(f"view {t}_V9 shadows {t}")
        if rng.random() < 0.1:
            con.execute("PRAGMA journal_mode=WAL")
            descs.append("journal_mode=WAL")
        return "; ".join(descs) or "none"
    finally:
        con.close()


# --------------------------------------------------------------------------- DeepSpeed text

def _deep_literal(rng: random.Random) -> str:
    n = rng.choice([100, 1000, 10000, 100000])
    return rng.choice(["{'a': " * n + "1" + "}" * n, "[" * n + "]" * n, "(" * n + ")" * n])


def deepspeed_mutation(rng: random.Random, text: str) -> tuple[bytes, str]:
    """Line-level and value-level mutations of a DeepSpeed log."""
    lines = text.split("\n")
    descs = []
    for _ in range(rng.randint(1, 4)):
        n = len(lines)
        k = rng.randrange(12)
        i = rng.randrange(max(n, 1))
        if k == 0 and rng.random() < 0.4:
            lines.insert(i, "-" * rng.choice([40000, 4000]))
            descs.append("long dash line")
        elif k == 1:  # numbers -> odd values
            import re

            nums = [m for m in re.finditer(r"\d+(?:\.\d+)?", lines[i])] if n else []
            if nums:
                m = rng.choice(nums)
                v = rng.choice(["1.2.3", "nan", "inf", "-inf", "1e999", "-", "", "9" * 5000, "0x1f", "1,234",
                                "\u0661\u0662", "1e-400", "--1"])
                lines[i] = lines[i][: m.start()] + v + lines[i][m.end():]
                descs.append(f"number -> {v[:10]!r}")
        elif k == 2:
            lines.insert(i, _deep_literal(rng))
            descs.append("deep literal line")
        elif k == 3 and n:  # deep literal inside a line holding one
            j = max(range(n), key=lambda x: lines[x].count("{") + lines[x].count("["))
            lines[j] = lines[j] + " " + _deep_literal(rng)
            descs.append("deep literal appended")
        elif k == 4 and n:
            del lines[i: i + rng.randint(1, 20)]
            descs.append("lines deleted")
        elif k == 5 and n:
            lines[i:i] = lines[i: i + rng.randint(1, 20)] * rng.randint(1, 3)
            descs.append("lines duplicated")
        elif k == 6 and n:
            lines[i] = rng.choice(["\x1b[32m", "[rank7]: ", "[default3]:", "\x00", "\ufeff"]) + lines[i]
            descs.append("prefix")
        elif k == 7 and n:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
            descs.append("line truncated")
        elif k == 8:
            lines.insert(i, "x" * rng.choice([1 << 16, 1 << 20]))
            descs.append("huge line")
        elif k == 9 and n:  # value of a "key: value" line odd
            if ":" in lines[i]:
                a, _, _ = lines[i].partition(":")
                lines[i] = a + ": " + rng.choice(["1.2.3 ms", "{'a': (1,)}", "[]", "None", "nan TFLOPS", "{" * 50, "1e999 s"])
                descs.append("odd value")
        elif k == 10 and n:
            rng.shuffle(lines)
            descs.append("lines shuffled")
        else:
            lines = [ln + "\r" for ln in lines]
            descs.append("CRLF")
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if rng.random() < 0.2:
        data, d = byte_mutation(rng, data)
        descs.append(d)
    return data, "; ".join(descs)


def gz_magic(b: bytes) -> bool:
    return b[:2] == b"\x1f\x8b"


def gunzip_or_none(b: bytes) -> bytes | None:
    try:
        return gzip.decompress(b)
    except (OSError, EOFError, zlib.error):
        return None


__all__ = [
    "byte_mutation",
    "deepspeed_mutation",
    "gunzip_or_none",
    "gz_magic",
    "gzip_mutation",
    "json_structure_mutation",
    "nsys_mutation",
    "snapshot_mutation",
    "text_json_mutation",
]
