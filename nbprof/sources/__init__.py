"""Readers: one module per input format, each returning a ``Trace``.

``load(path)`` picks the reader by exact file suffix from a small registry
(longest suffix wins); the error for an unknown suffix lists the registered ones.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any

from ..trace.model import Trace

_Loader = Callable[..., Trace]


class LoaderRegistry:
    """Map of file suffix -> loader (``"module:function"`` strings, imported on first use)."""

    def __init__(self) -> None:
        self._by_suffix: dict[str, str] = {}

    def register(self, suffix: str, target: str) -> None:
        """Register ``target`` ("package.module:function") for files ending in ``suffix``."""
        self._by_suffix[suffix.lower()] = target

    def suffixes(self) -> list[str]:
        """Registered suffixes, longest first."""
        return sorted(self._by_suffix, key=len, reverse=True)

    def resolve(self, path: str) -> _Loader:
        """The loader for ``path``.

        Raises
        ------
        TraceFormatError
            When no registered suffix matches (the message lists them; a ``ValueError`` too).
        """
        low = os.fspath(path).lower()
        for suf in self.suffixes():
            if low.endswith(suf):
                mod, fn = self._by_suffix[suf].split(":")
                import importlib

                reader: Callable[..., Trace] = getattr(importlib.import_module(mod), fn)
                return reader
        from ..errors import TraceFormatError

        msg = f"unknown trace file type: expected a file ending in one of {', '.join(self.suffixes())}"
        raise TraceFormatError(os.fspath(path), None, msg)


registry = LoaderRegistry()
for _suf in (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz"):
    registry.register(_suf, "nbprof.sources.kineto:load_kineto")
for _suf in (".pickle", ".pkl", ".pickle.gz"):
    registry.register(_suf, "nbprof.sources.memory_snapshot:load_memory_snapshot")
for _suf in (".raw.json", ".raw.json.gz", ".raw.gz"):
    registry.register(_suf, "nbprof.sources.memory_snapshot:load_memory_timeline")
registry.register(".sqlite", "nbprof.sources.nsys:load_nsys")  # Nsight Systems export
registry.register(".nbprof", "nbprof.export.saved:load_saved")  # a saved Trace (Trace.save)
for _suf in (".nsys-rep", ".qdrep"):  # Nsight Systems report: exported with nsys first (a façade, not a reader)
    registry.register(_suf, "nbprof.api:load_nsys_report")


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
