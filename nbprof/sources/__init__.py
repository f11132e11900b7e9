"""Readers: one module per input format, each returning a ``Trace``.

``load(path)`` picks the reader by exact file suffix from a small registry
(longest suffix wins); the error for an unknown suffix lists the registered ones.
"""

from __future__ import annotations

import os
from typing import Callable

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

                return getattr(importlib.import_module(mod), fn)
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
for _suf in (".nsys-rep", ".qdrep"):  # Nsight Systems report: exported with nsys first (a façade, not a reader)
    registry.register(_suf, "nbprof.api:load_nsys_report")


def load(path: str | os.PathLike[str], **kwargs) -> Trace:
    """Load any supported trace file into a ``Trace`` (see ``nbprof.load``)."""
    spath = os.fspath(path)
    if not os.path.exists(spath):
        msg = f"no such trace file: {spath!r}"
        raise FileNotFoundError(msg)
    return registry.resolve(spath)(spath, **kwargs)
