"""The one registry shape: key -> entry with a lazy ``"module:attr"`` target, used by every plug-in point.

Loaders (``nbprof.sources``), views (``nbprof.viz.registry``), renderers (``nbprof.results.render``),
``nbprof stats`` reports (``nbprof.results.cli_render``), the trace writers and the viewer ``Trace.show``
calls (``nbprof.trace.hooks``) are each one :class:`Registry`. An entry is

- a key (a format, view, result class, report or writer name);
- a target: ``"package.module:attr"``, imported on first :meth:`Registry.resolve` (so registering imports
  nothing, and the layer test reads these strings as imports), or the object itself;
- optional ``sniff``: ``f(head: bytes) -> bool`` on the first bytes of a file (or its ``"module:attr"``,
  imported when first asked), and ``priority``: among the
  entries a file could be (a shared suffix such as ``.json``), the sniffers are asked highest priority first
  and the first yes wins; an entry without a sniffer is the fallback (:meth:`Registry.choose`);
- ``info``: whatever else the registry's users need (a view's title, a loader's suffixes), in order.

An unknown key raises the registry's error type (each plug-in point keeps the one its callers catch) with a
message listing the registered keys. The ground floor: imports nothing of nbprof.

>>> r = Registry("greeting")
>>> r.register("hi", "builtins:str", sniff=lambda head: head.startswith(b"h"))
>>> r.register("any", "builtins:repr")
>>> r.resolve("hi")(5), r.choose(["any", "hi"], b"hello"), r.choose(["any", "hi"], b"{")
('5', 'hi', 'any')
>>> r.resolve("bye")
Traceback (most recent call last):
...
ValueError: unknown greeting 'bye'; registered: hi, any
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Entry", "Registry", "import_target"]


def import_target(target: str) -> Any:
    """The object a ``"package.module:attr"`` string names (``attr`` may be dotted), imported now.

    Raises
    ------
    ValueError
        ``target`` has no ``:``.
    ModuleNotFoundError, AttributeError
        As the import raises them.
    """
    mod, sep, attr = target.partition(":")
    if not sep or not mod or not attr:
        msg = f"target {target!r} must be 'package.module:attr'"
        raise ValueError(msg)
    obj: Any = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Entry:
    """One registered entry (see the module doc)."""

    key: str
    target: Any
    sniff: Callable[[bytes], bool] | str | None = None
    priority: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Any:
        """The target, imported on first use when it is a ``"module:attr"`` string."""
        return import_target(self.target) if isinstance(self.target, str) else self.target


class Registry:
    """Key -> :class:`Entry`, in registration order; ``error`` is the type an unknown key raises."""

    def __init__(self, what: str, *, error: type[Exception] = ValueError) -> None:
        self.what = what
        self.error = error
        self._entries: dict[str, Entry] = {}

    def register(self, key: str, target: Any, *, sniff: Callable[[bytes], bool] | str | None = None, priority: int = 0,
                 **info: Any) -> None:
        """Add (or replace) ``key``; ``target`` is ``"module:attr"`` (imported on use) or the object."""
        if isinstance(target, str) and ":" not in target:
            msg = f"{self.what} target {target!r} must be 'package.module:attr'"
            raise ValueError(msg)
        self._entries[key] = Entry(key, target, sniff, priority, dict(info))

    def unregister(self, key: str) -> None:
        """Remove ``key`` (nothing when absent)."""
        self._entries.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries.values()))

    def keys(self) -> tuple[str, ...]:
        """Registered keys, in registration order."""
        return tuple(self._entries)

    def entry(self, key: str) -> Entry:
        """The entry of ``key``; an unknown key raises ``self.error`` listing the registered keys."""
        try:
            return self._entries[key]
        except KeyError:
            msg = f"unknown {self.what} {key!r}; registered: {', '.join(self._entries) or '(none)'}"
            raise self.error(msg) from None

    def resolve(self, key: str) -> Any:
        """The target of ``key``, imported now (see :meth:`entry` for the error)."""
        return self.entry(key).load()

    def choose(self, keys: Iterable[str], head: bytes) -> str | None:
        """Of ``keys``, the entry whose sniffer says yes to ``head`` (highest priority first, then registration
        order), else the first without a sniffer (the fallback), else None."""
        cands = [self.entry(k) for k in keys]
        for e in sorted((e for e in cands if e.sniff is not None), key=lambda e: -e.priority):
            test = import_target(e.sniff) if isinstance(e.sniff, str) else e.sniff
            if test is not None and test(head):
                return e.key
        return next((e.key for e in cands if e.sniff is None), None)

    def snapshot(self) -> dict[str, Entry]:
        """A copy of the entries (to tell whether something changed the registry, e.g. a test)."""
        return dict(self._entries)

    def restore(self, snapshot: dict[str, Entry]) -> None:
        """Make the entries those of ``snapshot`` (:meth:`snapshot`) again."""
        self._entries = dict(snapshot)
