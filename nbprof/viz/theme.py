"""Light and dark themes for nbprof's Bokeh views, following JupyterLab's theme.

JupyterLab sets ``document.body.dataset.jpThemeLight`` (``"true"``/``"false"``) from its theme
manager (jupyterlab ``packages/apputils-extension/src/themesplugins.ts``; the vega5 renderer reads it
the same way). In ``theme="auto"`` mode a small browser-side callback reads that attribute once the
plots are laid out and recolours them; ``"light"`` and ``"dark"`` fix the colours in Python (static
HTML uses these, with ``"light"`` as the default).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from bokeh.models import CustomJS

__all__ = ["LIGHT", "DARK", "CATEGORY_COLORS", "apply_theme", "auto_theme_callback", "on_render", "palette"]

LIGHT = {
    "background": "#ffffff",
    "border": "#ffffff",
    "text": "#222222",
    "grid": "#e6e6e6",
    "axis": "#888888",
    "band_a": "#eef2f7",
    "band_b": "#f8f9fb",
}
DARK = {
    "background": "#1e1e1e",
    "border": "#1e1e1e",
    "text": "#e0e0e0",
    "grid": "#333333",
    "axis": "#aaaaaa",
    "band_a": "#2a2f36",
    "band_b": "#23262b",
}

#: Colour per canonical category (two shades each; the second for alternate names).
CATEGORY_COLORS: dict[str, tuple[str, str]] = {
    "cpu_op": ("#4c78a8", "#72a0d0"),
    "python_function": ("#9d9da1", "#bab0ac"),
    "user_annotation": ("#2a9d8f", "#56c2b4"),
    "nvtx": ("#2a9d8f", "#56c2b4"),
    "gpu_user_annotation": ("#2a9d8f", "#56c2b4"),
    "cuda_runtime": ("#f58518", "#ffb45a"),
    "cuda_driver": ("#e45756", "#ff8c8b"),
    "cuda_sync": ("#b279a2", "#d6a5c9"),
    "kernel": ("#54a24b", "#88d27a"),
    "gpu_memcpy": ("#9467bd", "#c5b0d5"),
    "gpu_memset": ("#d67195", "#f1a7c1"),
    "collective_comm": ("#eeca3b", "#f5dc83"),
    "step": ("#7f7f7f", "#a5a5a5"),
    "other": ("#8c6d31", "#bd9e39"),
}


def palette() -> tuple[list[str], dict[str, int]]:
    """The flat colour list and the base index of each category in it (2 shades per category)."""
    colors: list[str] = []
    base: dict[str, int] = {}
    for cat, (a, b) in CATEGORY_COLORS.items():
        base[cat] = len(colors)
        colors += [a, b]
    return colors, base


def _style_plot(p, t: dict) -> None:
    p.background_fill_color = t["background"]
    p.border_fill_color = t["border"]
    p.outline_line_color = t["grid"]
    if p.title is not None:
        p.title.text_color = t["text"]
    for ax in list(p.xaxis) + list(p.yaxis):
        ax.major_label_text_color = t["text"]
        ax.axis_label_text_color = t["text"]
        ax.axis_line_color = t["axis"]
        ax.major_tick_line_color = t["axis"]
        ax.minor_tick_line_color = t["axis"]
    for g in list(p.xgrid) + list(p.ygrid):
        g.grid_line_color = t["grid"]
    if p.legend:
        for lg in p.legend:
            lg.background_fill_color = t["background"]
            lg.label_text_color = t["text"]
            lg.border_line_color = t["grid"]


def apply_theme(plots: Iterable, theme: str = "light") -> None:
    """Colour Bokeh figures for ``theme`` (``"light"`` or ``"dark"``) in Python.

    Raises
    ------
    ValueError
        For any other theme name.
    """
    if theme not in ("light", "dark"):
        raise ValueError(f"theme must be 'light' or 'dark' here, got {theme!r}")
    t = LIGHT if theme == "light" else DARK
    for p in plots:
        _style_plot(p, t)


_AUTO_JS = """
const body = (typeof document !== 'undefined') ? document.body : null;
if (body == null) { return; }
body.dataset.nbprofReady = String(Number(body.dataset.nbprofReady || 0) + 1);
const dark = body.dataset.jpThemeLight === 'false';
if (!dark || (marker.tags.length > 0 && marker.tags[0] === 'dark')) { return; }
marker.tags = ['dark'];
for (const p of plots) {
  p.background_fill_color = t.background; p.border_fill_color = t.border;
  p.outline_line_color = t.grid;
  if (p.title != null) { p.title.text_color = t.text; }
  for (const ax of [...p.below, ...p.left, ...p.above, ...p.right]) {
    if (ax.major_label_text_color !== undefined) {
      ax.major_label_text_color = t.text; ax.axis_label_text_color = t.text;
      ax.axis_line_color = t.axis; ax.major_tick_line_color = t.axis; ax.minor_tick_line_color = t.axis;
    }
    if (ax.label_text_color !== undefined) { ax.label_text_color = t.text; ax.background_fill_color = t.background; }
  }
  for (const g of p.center) {
    if (g.grid_line_color !== undefined) { g.grid_line_color = t.grid; }
    if (g.label_text_color !== undefined) { g.label_text_color = t.text; g.background_fill_color = t.background; }
  }
}
"""


def auto_theme_callback(plots: list, marker) -> CustomJS:
    """A browser-side callback that switches ``plots`` to the dark colours when JupyterLab is dark.

    It also increments ``document.body.dataset.nbprofReady`` (a hook browser tests wait on).
    ``marker`` is any model of the layout whose ``tags`` remember that the switch happened.
    """
    from bokeh.models import CustomJS

    return CustomJS(args=dict(plots=list(plots), t=DARK, marker=marker), code=_AUTO_JS)


_AUTO_CSS = """
:host { color: var(--jp-ui-font-color1, inherit); }
.slick-header-column, .slick-header, .slick-headerrow, .bk-data-table, .slick-viewport, .slick-pane {
  background: var(--jp-layout-color1, #ffffff) !important; color: var(--jp-ui-font-color1, #222222) !important;
  border-color: var(--jp-border-color2, #e0e0e0) !important; }
.slick-row.even, .slick-row.even .slick-cell { background: var(--jp-layout-color1, #ffffff) !important; }
.slick-row.odd, .slick-row.odd .slick-cell { background: var(--jp-layout-color2, #f7f7f7) !important; }
.slick-cell { color: var(--jp-ui-font-color1, #222222) !important; border-color: var(--jp-border-color2, #e0e0e0) !important; }
label, .bk-input-group { color: var(--jp-ui-font-color1, inherit); }
select, input, option, .bk-input { background-color: var(--jp-layout-color1, #ffffff) !important;
  color: var(--jp-ui-font-color1, #222222) !important; border-color: var(--jp-border-color1, #cccccc) !important; }
"""


def _dark_css() -> str:
    t = DARK
    return f"""
:host {{ color: {t['text']}; }}
.slick-header-column, .slick-header, .slick-headerrow, .bk-data-table, .slick-viewport, .slick-pane,
.slick-row.even, .slick-row.even .slick-cell {{ background: {t['background']} !important; color: {t['text']} !important;
  border-color: {t['grid']} !important; }}
.slick-row.odd, .slick-row.odd .slick-cell {{ background: #262626 !important; }}
.slick-cell {{ color: {t['text']} !important; border-color: {t['grid']} !important; }}
label, .bk-input-group {{ color: {t['text']}; }}
select, input, option, .bk-input {{ background-color: {t['background']} !important; color: {t['text']} !important;
  border-color: {t['axis']} !important; }}
"""


def style_widgets(layout, theme: str) -> None:
    """Give the Divs, tables and inputs of ``layout`` the theme's text/background colours.

    ``"auto"`` uses JupyterLab's CSS variables (``--jp-layout-color1``, ``--jp-ui-font-color1``...), which
    reach into Bokeh's shadow DOM, so tables and text follow a theme switch even after rendering; outside
    JupyterLab the fallbacks are the light colours. ``"dark"`` fixes dark colours; ``"light"`` changes nothing.
    """
    if theme == "light":
        return
    from bokeh.models import Button, DataTable, Div, InlineStyleSheet, Select, TextInput

    sheet = InlineStyleSheet(css=_AUTO_CSS if theme == "auto" else _dark_css())
    for m in layout.references():
        if isinstance(m, (Div, DataTable, Select, TextInput, Button)):
            m.stylesheets = list(m.stylesheets) + [sheet]


#: First thing in a page's ``<body>``: under a dark colour scheme (``prefers-color-scheme: dark``) the page says it
#: is dark the way JupyterLab does (``data-jp-theme-light="false"``, which the ``theme="auto"`` callbacks read
#: before the views first render) and the way DataTables does (class ``dark`` on ``<html>``).
DARK_SCHEME_SCRIPT = (
    "<script>if (window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches) {"
    " document.body.dataset.jpThemeLight = 'false'; document.body.dataset.jpThemeName = 'JupyterLab Dark';"
    " document.documentElement.classList.add('dark'); }</script>"
)


def dark_scheme_css(jupyterlab_dark_css: str = "") -> str:
    """A ``<style>`` that gives a page outside JupyterLab dark colours under ``prefers-color-scheme: dark``.

    ``jupyterlab_dark_css``: JupyterLab's dark theme variables (nbconvert's ``theme-dark.css``, for a page
    rendered by nbconvert); without it, the ``--jp-*`` variables that :data:`_AUTO_CSS` reads are set from
    :data:`DARK`. Links keep a link colour in both schemes."""
    t = DARK
    own = (f"--jp-layout-color0: {t['background']}; --jp-layout-color1: {t['background']}; "
           f"--jp-layout-color2: #262626; --jp-ui-font-color1: {t['text']}; --jp-border-color1: {t['axis']}; "
           f"--jp-border-color2: {t['grid']}; --jp-content-link-color: #64b5f6;")
    dark_vars = jupyterlab_dark_css or f":root {{ {own} }}"
    return ("<style>a { color: var(--jp-content-link-color, #1976d2); }\n"
            "@media (prefers-color-scheme: dark) {\n" + dark_vars + "\n"
            "body, main, .jp-Notebook { background: var(--jp-layout-color0); color: var(--jp-ui-font-color1); }\n"
            "}</style>")


_READY_JS = """
if (typeof document !== 'undefined') {
  document.body.dataset.nbprofReady = String(Number(document.body.dataset.nbprofReady || 0) + 1); }"""


def on_render(layout, plots: list, theme: str, *, document_ready: bool = False) -> None:
    """Attach the first-render callback of a view to ``plots[0]`` (nothing when there is no plot); with
    ``document_ready`` also to the document's ready event (a view whose first layout may come before BokehJS
    reports it ready).

    With ``theme="auto"`` it is :func:`auto_theme_callback` (dark colours under a dark JupyterLab or a dark
    page); otherwise it only increments ``document.body.dataset.nbprofReady`` (the hook browser tests wait on).
    """
    if not plots:
        return
    from bokeh.models import CustomJS

    cb = auto_theme_callback(plots, layout) if theme == "auto" else CustomJS(code=_READY_JS)
    plots[0].js_on_change("inner_width", cb)
    if document_ready:
        plots[0].js_on_event("document_ready", cb)
