"""Readers: one module per input format, each returning a ``Trace``.

``load(path)`` picks the reader from :data:`FORMATS` (a :class:`nbprof.registry.Registry`): by the longest
registered file suffix, then, where several formats share it (``.json``: Kineto, rocprofv3, torch's memory
timeline curves), by content: each candidate's sniffer reads the first bytes (gunzipped for ``.gz``),
highest priority first; the format without a sniffer (Kineto for ``.json``) is the fallback. The error for
an unknown suffix lists the registered ones. A new format is one reader module plus one :func:`register`
line here.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from typing import Any

from ..registry import Registry
from ..trace.model import Trace

_Loader = Callable[..., Trace]

#: format name -> reader ``f(path, *, strict=False, **kwargs)``; info ``suffixes`` (lower case)
FORMATS = Registry("trace format", error=ValueError)
#: bytes a sniffer sees (decompressed): enough for a JSON document's first keys
HEAD_BYTES = 4096


def register(name: str, target: str, *, suffixes: Iterable[str], sniff: Callable[[bytes], bool] | str | None = None,
             priority: int = 0) -> None:
    """Register the reader ``target`` (``"module:function"``) of format ``name`` for files ending in one of
    ``suffixes``; ``sniff(head)`` tells it apart from other formats of the same suffix (see the module doc)."""
    FORMATS.register(name, target, sniff=sniff, priority=priority, suffixes=tuple(x.lower() for x in suffixes))


def suffixes() -> list[str]:
    """Registered suffixes, longest first."""
    return sorted({x for e in FORMATS for x in e.info["suffixes"]}, key=lambda x: (-len(x), x))


def head(path: str, n: int = HEAD_BYTES) -> bytes:
    """The first ``n`` bytes of ``path``'s content (gunzipped when it is gzip), b"" when unreadable."""
    import gzip
    import zlib

    try:
        with open(path, "rb") as f:
            raw = f.read(n)
        if raw[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as g:
                return g.read(n)
        return raw
    except (OSError, EOFError, zlib.error):
        return b""


def format_of(path: str) -> str:
    """The registered format ``load`` uses for ``path``.

    Raises
    ------
    TraceFormatError
        When no registered suffix matches (the message lists them; a ``ValueError`` too).
    """
    low = os.fspath(path).lower()
    suf = next((x for x in suffixes() if low.endswith(x)), None)
    if suf is None:
        from ..errors import TraceFormatError

        msg = f"unknown trace file type: expected a file ending in one of {', '.join(suffixes())}"
        raise TraceFormatError(os.fspath(path), None, msg)
    cands = [e.key for e in FORMATS if suf in e.info["suffixes"]]
    if len(cands) == 1:
        return cands[0]
    chosen = FORMATS.choose(cands, head(os.fspath(path)))
    return chosen if chosen is not None else cands[0]


class LoaderRegistry:
    """The suffix view of :data:`FORMATS` that ``load`` uses (kept for callers of ``registry.resolve``)."""

    def suffixes(self) -> list[str]:
        """Registered suffixes, longest first."""
        return suffixes()

    def resolve(self, path: str) -> _Loader:
        """The reader of ``path`` (:func:`format_of`; raises ``TraceFormatError`` for an unknown suffix)."""
        reader: _Loader = FORMATS.resolve(format_of(path))
        return reader


registry = LoaderRegistry()


def _json_array_of_arrays(h: bytes) -> bool:
    """torch ``export_memory_timeline`` output: ``[[...], ...]`` (curves ``[times, sizes]`` or raw rows); a Kineto
    trace is an object (``{"traceEvents": ...}``) or an array of event objects."""
    t = h.lstrip(b"\xef\xbb\xbf \t\r\n")
    return t[:1] == b"[" and t[1:].lstrip(b" \t\r\n")[:1] == b"["


register("kineto", "nbprof.sources.kineto:load_kineto", suffixes=(".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz"))
register("memory_snapshot", "nbprof.sources.memory_snapshot:load_memory_snapshot", suffixes=(".pickle", ".pkl", ".pickle.gz"))
register("memory_timeline", "nbprof.sources.memory_snapshot:load_memory_timeline",
         suffixes=(".raw.json", ".raw.json.gz", ".raw.gz", ".json", ".json.gz"), sniff=_json_array_of_arrays)
register("rocprofv3", "nbprof.sources.rocprofv3:load_rocprofv3", suffixes=(".json", ".json.gz"), sniff="nbprof.sources.rocprofv3:sniff")
register("nsys_sqlite", "nbprof.sources.nsys:load_nsys", suffixes=(".sqlite",))  # Nsight Systems export
register("saved", "nbprof.export.saved:load_saved", suffixes=(".nbprof",))  # a saved Trace (Trace.save)
# Nsight Systems report: exported with nsys first (a façade, not a reader)
register("nsys_report", "nbprof.api:load_nsys_report", suffixes=(".nsys-rep", ".qdrep"))


def _kind(mode: int) -> str | None:
    """What a non-regular file is ("a directory", "a FIFO", ...); None for a regular file."""
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return None if stat.S_ISREG(mode) else "not a regular file"


def check_file(path: str, what: str = "trace file") -> None:
    """Check that ``path`` is a regular file before anything opens it (a FIFO would block ``open``,
    ``/dev/zero`` would never end).

    Raises
    ------
    nbprof.errors.TraceFileNotFoundError
        No such file (also a ``FileNotFoundError``; a dangling symlink too).
    TraceFormatError
        A directory, FIFO, socket or device (the reason says which), or a file that cannot be read.
    """
    import errno

    from ..errors import TraceFileNotFoundError, TraceFormatError

    try:
        st = os.stat(path)  # follows symlinks: a link to a FIFO is a FIFO
    except FileNotFoundError:
        raise TraceFileNotFoundError(errno.ENOENT, f"no such {what}", path) from None
    except OSError as exc:
        raise TraceFormatError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    kind = _kind(st.st_mode)
    if kind is not None:
        raise TraceFormatError(path, None, f"is {kind}, not a {what}")
    if not os.access(path, os.R_OK):
        raise TraceFormatError(path, None, "cannot read: permission denied")


def load(path: str | os.PathLike[str] | list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...], *,
         strict: bool = False, **kwargs: Any) -> Trace:
    """Load any supported trace file into a ``Trace`` (see ``nbprof.load``).

    A list of two files -- one Nsight Systems file (``.nsys-rep``/``.qdrep``/``.sqlite``) and one Kineto
    trace of the same run, in either order -- loads both and merges them into one ``Trace``
    (:func:`nbprof.trace.merge.merge`; ``kwargs`` go to the merge, e.g. ``window="all"``); another number
    of files raises ``TraceFormatError``.

    Every loader takes ``strict``: False repairs what it can and lists it in the load report; True
    raises ``TraceFormatError`` where tolerant mode would report a repair or a drop. The path is checked
    first: a directory, FIFO, socket or device is refused with a ``TraceFormatError`` saying which
    (nothing is opened, so a FIFO cannot block).
    """
    if isinstance(path, (list, tuple)):
        from ..errors import TraceFormatError
        from ..trace.merge import merge

        if len(path) != 2:
            raise TraceFormatError(", ".join(os.fspath(p) for p in path), None,
                                   f"give two files of one run (an nsys report and a Kineto trace) to merge, not {len(path)}")
        a, b = (load(p, strict=strict) for p in path)
        return merge(a, b, **kwargs)
    spath = os.fspath(path)
    check_file(spath)
    return registry.resolve(spath)(spath, strict=strict, **kwargs)
