"""Plain result objects and their renderers (numbers for people through :mod:`nbprof.units`, the one formatter).

- ``profile``: :class:`ProfileResult` (what ``%%torchprof`` / ``nbprof.profile`` give back);
- ``nsys``: :class:`NsysResult` (what ``%nsys`` gives back);
- ``render``: the renderer contract, ``render(result, fmt)`` with ``fmt`` in ``"text"``, ``"html"``;
- ``tensorboard``: the Markdown of nbprof's TensorBoard text tags.

Submodules are imported on first use (PEP 562), so importing one costs nothing else.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ProfileResult", "NsysResult", "render"]

_LAZY = {"ProfileResult": "profile", "NsysResult": "nsys", "render": "render"}

from .render import register as _register  # noqa: E402  (strings only: no result or renderer module is imported)

_register("ProfileResult", "nbprof.results.profile_render:ProfileRenderer")
_register("NsysResult", "nbprof.results.nsys_render:NsysRenderer")
_register("LoadReport", "nbprof.results.load_report:LoadReportRenderer")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(name)
