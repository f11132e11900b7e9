"""IPython glue only: each magic lives in its own module and is registered here."""

from __future__ import annotations

from typing import Any

_REGISTERED: list[Any] = []


def register(ipython) -> None:
    """Register every nbprof magic with ``ipython`` (modules that are not there yet are skipped)."""
    import importlib

    for modname in ("nbprof.magics.torchprof", "nbprof.magics.nsys"):
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name == modname:
                continue
            raise
        magics = mod.make_magics(ipython)
        ipython.register_magics(magics)
        _REGISTERED.append(magics)


def unregister(ipython) -> None:
    """Remove what ``register`` added."""
    mm = ipython.magics_manager
    for magics in _REGISTERED:
        for kind, names in magics.magics.items():
            for name in names:
                mm.magics[kind].pop(name, None)
    _REGISTERED.clear()
