"""The renderer contract: ``render(result, fmt)`` for every nbprof result object.

A renderer is a class with ``text(result) -> str`` and ``html(result) -> str`` (escaped HTML; every
name from a trace is untrusted). Renderers are registered by result class name as
``"module:Class"`` strings (:data:`RENDERERS`, a :class:`nbprof.registry.Registry`), imported on first use,
so a result module never imports its renderer.
TensorBoard output (Markdown text tags) is ``nbprof.results.tensorboard``.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..registry import Registry

__all__ = ["Renderer", "RENDERERS", "register", "renderer_for", "render", "mimebundle", "FORMATS"]

#: formats ``render`` accepts
FORMATS = ("text", "html")


class Renderer(Protocol):
    """What a renderer provides."""

    def text(self, result: Any) -> str:
        """The ``text/plain`` form."""

    def html(self, result: Any) -> str:
        """The ``text/html`` form (escaped)."""


#: result class name -> ``"module:Class"`` of its renderer; nbprof's own are registered by the package
#: (``nbprof/results/__init__.py``), so a result module, which calls :func:`render`, names no renderer
RENDERERS = Registry("renderer", error=TypeError)


def register(class_name: str, target: str) -> None:
    """Render instances of the class named ``class_name`` with ``target`` (``"module:Class"``)."""
    RENDERERS.register(class_name, target)


def renderer_for(result: Any) -> Any:
    """The renderer instance of ``result`` (looked up along its class's MRO).

    Raises
    ------
    TypeError
        When no renderer is registered for it.
    """
    for cls in type(result).__mro__:
        if cls.__name__ in RENDERERS:
            return RENDERERS.resolve(cls.__name__)()
    msg = f"no nbprof renderer for {type(result).__name__}"
    raise TypeError(msg)


def render(result: Any, fmt: str = "text") -> str:
    """``result`` as ``"text"`` or ``"html"``.

    Raises
    ------
    ValueError
        Unknown ``fmt``.
    """
    if fmt not in FORMATS:
        msg = f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}"
        raise ValueError(msg)
    return getattr(renderer_for(result), fmt)(result)


def mimebundle(result: Any) -> dict[str, str]:
    """``{"text/plain": ..., "text/html": ...}`` for ``_repr_mimebundle_``."""
    r = renderer_for(result)
    return {"text/plain": r.text(result), "text/html": r.html(result)}
