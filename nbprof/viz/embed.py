"""Show a view live (ipywidgets) or as static Bokeh components (for papermill/nbconvert reports).

A report page (``nbprof report``) loads BokehJS once, inline, in its ``<head>``; the notebook cells
then carry only each view's document (``bokeh.embed.components``), so the HTML stays small and works
with no network. The workflow notebooks pass their ``static_views`` papermill parameter (``nbprof
report`` sets it True) as ``static``. In a live notebook the same call displays the interactive widget.
"""

from __future__ import annotations

__all__ = ["show"]


def show(obj, views=None, *, static: bool = False, theme: str = "auto", width: int = 1100):
    """Display ``obj`` (a Trace, an ``NbprofView``, a dashboard or a Bokeh layout).

    Parameters
    ----------
    obj : Trace, NbprofView, Dashboard or bokeh LayoutDOM
    views : list of str, optional
        For a Trace: which views (``nbprof.viz.static.VIEWS``); default all.
    static : bool, default False
        Static components (True: for a report page that loads BokehJS itself) or the live widget.
    theme : {"auto", "light", "dark"}
        Theme of the static form; ``"auto"`` draws light colours and switches to dark ones in the browser under
        a dark JupyterLab or a report page read with a dark colour scheme (``data-jp-theme-light="false"``).

    Returns
    -------
    The displayed widget (live), or None (static: the components are displayed, not returned, so a
    cell ending in ``show(...)`` does not render them twice).
    """
    from IPython.display import HTML, display

    if static:
        # static layouts are built from the analyses' tables without a widget, so nothing loads
        # BokehJS into the notebook's outputs: the report page loads it once
        from bokeh.core.validation import silence
        from bokeh.core.validation.warnings import MISSING_RENDERERS
        from bokeh.embed import components
        from bokeh.model import Model

        from .static import static_layout

        lay = obj if isinstance(obj, Model) else static_layout(obj, views, theme=theme, width=width)
        silence(MISSING_RENDERERS, True)  # empty placeholder figures are intended: no W-1000 in the outputs
        try:
            script, div = components(lay)
        finally:
            silence(MISSING_RENDERERS, False)
        display(HTML(div + script))
        return None
    from ..trace.model import Trace

    if isinstance(obj, Trace):
        from .dashboard import dashboard

        w = dashboard(obj, views=tuple(views)) if views else dashboard(obj)
    else:
        w = obj
    display(w)
    return w
