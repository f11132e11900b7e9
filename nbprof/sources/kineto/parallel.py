"""The two-process load of large traces: this process and a forked child decode the events array's runs.

Large traces (events arrays of 64 MB or more, Linux, two usable CPUs) are decoded and extracted in
two processes: the array is cut at event boundaries into sixteen runs, which this process and a
forked child (in its copy-on-write pages) take one at a time from a queue, so files whose regions
differ in cost per byte leave neither idle; each run is decoded in place (its bounding commas
turned into ``[``/``]``, restored afterwards: no copy of the bytes). Each run sorts its rows by
time, the child's columns come back through shared memory (pickle protocol 5 out-of-band
buffers), and ``finish`` merges the sorted runs by one stable sort. A run that needs any repair or
report entry sends the whole file through the one-process path, which reports with whole-file
offsets; results are identical either way (tests/test_kineto_parallel.py).
``NBPROF_LOAD_PROCESSES=1`` keeps every load in one process (``=2`` forces two, for tests).
"""

from __future__ import annotations

import mmap
import os
import pickle
import re
import signal
import sys
import threading
import warnings
from typing import Any

import msgspec

from ...trace.model import LoadReport
from .context import _Ctx
from .extract import _extract, _Part
from .structs import _EVENT_DECODER
from .times import _BIG_FRACTIONAL_TS

_PARALLEL_MIN_BYTES = 64 << 20
_CHUNKS = 16  # runs of the events array, taken one at a time by whichever process is free
_EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def _parallel_ok(data: bytes, quick: tuple[int, int, dict[str, Any]]) -> bool:
    """Load in two processes? Large events arrays read by nbprof (a mutable buffer) on Linux with two usable CPUs.
    ``NBPROF_LOAD_PROCESSES=1`` turns it off (``=2`` forces it for any size, for tests)."""
    env = os.environ.get("NBPROF_LOAD_PROCESSES", "")
    if env == "1" or not isinstance(data, (bytearray, mmap.mmap)) or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    start, end, _meta = quick
    return env == "2" or (end - start >= _PARALLEL_MIN_BYTES and len(os.sched_getaffinity(0)) >= 2)


def _extract_span(span: memoryview, path: str, keep: list[Any] | None = None) -> _Part | None:
    """Decode and extract one run of events on its own; None when it needs any repair or report.
    ``keep``: see ``_extract``."""
    sub = _Ctx(path, LoadReport(path=path), False, None)
    sub.fast = False  # offsets are not needed: a part with any report entry is not used
    try:
        holder = [_EVENT_DECODER.decode(span)]
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    del span
    part = _extract(holder, sub, keep)
    return part if not sub.report.issues else None


def _parallel_extract(data: bytearray | mmap.mmap, ctx: _Ctx, start: int, end: int) -> list[_Part] | None:
    """The events array decoded and extracted in two processes at once: this one and a forked child.

    The array is cut into ``_CHUNKS`` runs at event boundaries ``},{`` after each equal share of
    its bytes; the two processes take the runs one at a time from a queue (a pipe holding one byte
    per run index: a one-byte read from a pipe goes to exactly one reader), so the one that
    finishes its run first takes the next (a file's regions differ in cost per byte: host ops with
    shapes first, Python frames later; a fixed split left one process idle up to a second at the
    end). Each run is decoded in place as an array of its own: its bounding commas are turned
    into ``[`` and ``]`` (the child in its own copy-on-write pages; here they are restored after
    the decode), so nothing is copied. A boundary that is not between two top-level events (inside
    a string or a nested object) leaves the runs around it undecodable. The child sends its parts
    back (``_send_part``) and exits. A run that needs any repair or report entry, or a child that
    fails, gives None: the caller then loads the whole file in one process, which reports with the
    byte offsets of the whole file; so do absolute-µs timestamps with fractions
    (``_maybe_exact_ts``). ``ctx`` is left untouched. Returns the parts in file order.
    """
    cuts = [start - 1]  # positions of each run's opening "[" (a comma but for the first run)
    for i in range(1, _CHUNKS):
        m = _EVENT_BOUNDARY.search(data, max(cuts[-1] + 1, start + (end - start) * i // _CHUNKS), end)
        if m is None:
            break
        cuts.append(data.find(b",", m.start()))
    if len(cuts) < 2:
        return None
    runs = list(zip(cuts, [*cuts[1:], end - 1]))  # (opening "[", closing "]") positions

    def extract(k: int, keep: list[Any] | None) -> _Part | None:
        a, b = runs[k]
        old = data[a], data[b]
        data[a], data[b] = 0x5B, 0x5D  # "[", "]"
        try:
            return _extract_span(memoryview(data)[a : b + 1], ctx.path, keep)
        finally:
            data[a], data[b] = old

    shm = mmap.mmap(-1, end - start)  # shared, anonymous: pages exist once written
    qr, qw = os.pipe()  # the queue of run indices
    os.write(qw, bytes(range(len(runs))))
    os.close(qw)

    def work(keep: list[Any] | None) -> list[tuple[int, _Part | None]]:
        done: list[tuple[int, _Part | None]] = []
        while not done or done[-1][1] is not None:  # a run that needs a repair ends it: all fall back
            k = os.read(qr, 1)
            if not k:
                break
            done.append((k[0], extract(k[0], keep)))
        return done

    rfd, wfd = os.pipe()
    try:
        with warnings.catch_warnings():
            # Python >= 3.12 warns on fork() of a multi-threaded process (a Jupyter kernel): the child
            # takes no lock, runs only msgspec/numpy/pickle and leaves with os._exit.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        for fd in (rfd, wfd, qr):
            os.close(fd)
        return None
    if pid == 0:  # pragma: no cover - the child (its result is what the parent tests)
        code = 1
        try:
            os.close(rfd)
            keep: list[Any] = []  # the decoded objects: left to os._exit instead of freed one by one
            theirs = work(keep)
            with os.fdopen(wfd, "wb") as f:
                _send_part(theirs, f, shm)
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    done = False
    try:
        try:
            mine = work(None)
        finally:
            os.close(qr)
        with os.fdopen(rfd, "rb") as fr:
            rfd = -1
            theirs = _recv_part(fr, shm)
        done = True
    finally:
        if rfd >= 0:
            os.close(rfd)
        if done:  # the child has sent everything; reap it without waiting for it to unmap its memory
            threading.Thread(target=os.waitpid, args=(pid, 0), daemon=True).start()
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if theirs is None:
        return None
    by_run = dict(mine + theirs)
    if len(by_run) != len(runs) or any(p is None for p in by_run.values()):
        return None
    parts = [by_run[k] for k in range(len(runs))]
    if any(p.ns_abs is None for p in parts) and _BIG_FRACTIONAL_TS.search(data):
        return None  # absolute µs with fractions: the one-process path decodes the ts texts exactly
    return parts


def _send_part(part: Any, f: Any, shm: mmap.mmap) -> None:
    """Child side: the part's (or parts') arrays go into the shared mapping ``shm`` (pickle protocol 5 out-of-band
    buffers), the rest of the pickle and the buffers' places through the pipe ``f``; everything
    through the pipe when the arrays do not fit."""
    bufs: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(part, protocol=5, buffer_callback=bufs.append)
    placed: list[tuple[int, int]] = []
    places: list[tuple[int, int]] | None = placed
    pos = 0
    try:
        for b in bufs:
            raw = b.raw()
            n = raw.nbytes
            if pos + n > len(shm):
                raise BufferError("shared buffer full")
            shm[pos : pos + n] = raw
            placed.append((pos, n))
            pos = (pos + n + 63) & ~63
    except BufferError:  # too large or not contiguous
        payload, places = pickle.dumps(part, protocol=5), None
    pickle.dump((payload, places), f, protocol=5)


def _recv_part(f: Any, shm: mmap.mmap) -> Any:
    """Parent side of ``_send_part`` (arrays stay views of ``shm`` until ``_finish`` joins them)."""
    try:
        payload, places = pickle.load(f)
    except (EOFError, pickle.UnpicklingError):
        return None  # the child failed before sending
    if places is None:
        return pickle.loads(payload)
    view = memoryview(shm)
    return pickle.loads(payload, buffers=[view[o : o + n] for o, n in places])
