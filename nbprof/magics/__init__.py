"""IPython glue only: each magic lives in its own module and is registered here."""

from __future__ import annotations

from typing import Any

_REGISTERED: list[Any] = []


def register(ipython) -> None:
    """Register every nbprof magic with ``ipython`` (an ImportError in a magic module propagates)."""
    from . import nsys, torchprof

    for mod in (torchprof, nsys):
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
