"""Shared plumbing of the live views: BokehJS loading, the widget wrapper (units: ``nbprof.units``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ._bokehjs import load_bokehjs, loader_widget

__all__ = ["NbprofView", "load_bokehjs"]


def fit_width(layout) -> None:
    """Let a live view fit the notebook panel: every box of ``layout`` with a fixed width (plots, tables, text)
    stretches to the width the output area gives it, at most its own ``width`` px (a 1100 px view in a panel
    narrowed by JupyterLab's file browser otherwise runs past its right edge, cut off)."""
    from bokeh.models import LayoutDOM

    for m in layout.select({"type": LayoutDOM}):
        w = getattr(m, "width", None)
        if w and m.sizing_mode in (None, "fixed"):
            m.update(sizing_mode="stretch_width", max_width=int(w))


class NbprofView(widgets.VBox):
    """An ipywidgets ``VBox`` holding one Bokeh layout through ``jupyter_bokeh.BokehModel``.

    Attributes
    ----------
    bokeh_layout : bokeh.models.LayoutDOM
        The live Bokeh layout (Python callbacks run over the widget comm).
    text : str
        The ``text/plain`` fallback (what a terminal or a text-only renderer shows).
    kind : str
        ``"timeline"``, ``"operators"``, ``"memory"``, ``"overview"`` or ``"dashboard"``.
    """

    def __init__(self, bokeh_layout, text: str, kind: str,
                 static_builder: Callable[..., Any] | None = None, extra: list | None = None, **kw):
        from jupyter_bokeh import BokehModel

        load_bokehjs()
        fit_width(bokeh_layout)
        self.bokeh_layout = bokeh_layout
        self.text = text
        self.kind = kind
        self._static_builder = static_builder
        self.bokeh_widget = BokehModel(bokeh_layout)
        # the loader first: its view (BokehJS, when the page lacks it) renders before the BokehView sibling
        super().__init__([loader_widget(), *list(extra or []), self.bokeh_widget], **kw)
        self.add_class("nbprof-view")
        self.add_class(f"nbprof-{kind}")

    def static_layout(self, theme: str = "light"):
        """A fresh Bokeh layout of this view with browser-side interaction only (for static HTML)."""
        if self._static_builder is None:
            raise NotImplementedError(f"{self.kind} view has no static form")
        return self._static_builder(theme=theme)

    def __repr__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, tuple):
            data, meta = bundle
        else:
            data, meta = bundle, {}
        if data is not None:
            data["text/plain"] = self.text
        return data, meta
