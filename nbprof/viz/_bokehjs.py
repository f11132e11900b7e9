"""BokehJS in the notebook page: loaded inline (no CDN), once per *page*, not once per kernel.

``jupyter_bokeh``'s ``BokehView`` calls ``window.Bokeh.require`` in its constructor, so the page must
hold BokehJS before a view is created, and it fails with "Failed to create view for 'BokehView' ...
Cannot read properties of undefined (reading 'require')" otherwise. BokehJS lives in the page, but
the kernel outlives pages: after a browser reload, or when a notebook whose kernel still runs is
opened again, the new page has no BokehJS while the kernel remembers having loaded it.

So each live view carries the loader in the page it is shown in, as widget state rather than notebook
output: :func:`loader_widget` is one ``ipywidgets.Output`` per kernel holding the guarded loader
(:func:`loader_js`) as an ``application/javascript`` output, and every ``NbprofView`` has it as its first
child. The Output widget's outputs are trusted (``OutputAreaModel({trusted: true})`` in
``@jupyter-widgets/jupyterlab-manager``) and JupyterLab renders ``application/javascript`` by evaluating
it at render time (``@jupyterlab/javascript-extension``), even before the node is attached; the view's
children are created in order, so BokehJS runs before the ``BokehView`` sibling is constructed. After a
reload the widget manager restores the Output's state from the kernel (sent once per page, not stored
in the notebook). The loader is guarded browser-side (it runs BokehJS only when ``window.Bokeh`` is
missing or of another version), so a page that has BokehJS pays nothing but the bytes. The first view of a
kernel also displays the loader as a cell output (``load_bokehjs``), as ``bokeh.io.output_notebook``
did, for frontends that render widgets without ``application/javascript`` outputs.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["load_bokehjs", "loader_js", "loader_widget"]

_LOADER = """(function () {
  const want = %(version)s;
  const B = window.Bokeh;
  if (B !== undefined && B.version === want && B.Widgets !== undefined && B.Tables !== undefined) { return; }
  const sources = %(sources)s;
  for (const src of sources) {
    const s = document.createElement("script");
    s.textContent = src;
    document.head.appendChild(s);
  }
})();
"""


def loader_js() -> str:
    """The browser-side loader: BokehJS (``bokeh.resources.INLINE``, all bundles) run only when absent."""
    import bokeh
    from bokeh.resources import INLINE

    return _LOADER % {"version": json.dumps(bokeh.__version__), "sources": json.dumps(list(INLINE.js_raw))}


_state: dict[str, Any] = {"loaded": False, "widget": None}


def loader_widget():
    """The kernel's ``ipywidgets.Output`` holding the guarded BokehJS loader (created once, reused)."""
    import ipywidgets as widgets

    w = _state["widget"]
    if w is None or getattr(w, "comm", None) is None:  # none yet, or closed
        w = widgets.Output(layout=widgets.Layout(height="0px", margin="0", padding="0", overflow="hidden"))
        js = loader_js()
        w.outputs = ({"output_type": "display_data", "data": {"application/javascript": js}, "metadata": {}},)
        w.add_class("nbprof-bokehjs-loader")
        _state["widget"] = w
    return w


def load_bokehjs(force: bool = False) -> bool:
    """Load BokehJS into the notebook page as a cell output, INLINE (no CDN is needed or reachable), once
    per kernel (``force``: again). Every live view also carries :func:`loader_widget`, which is what makes
    BokehJS available in a page opened or reloaded later. Outside an IPython kernel this does nothing.

    Returns
    -------
    bool
        True when the loader was displayed now or before; False outside an IPython kernel.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipython is a dependency
        return False
    ip = get_ipython()
    if ip is None or not hasattr(ip, "kernel"):
        return False
    if _state["loaded"] and not force:
        return True
    from IPython.display import display

    js = loader_js()
    display({"application/vnd.bokehjs_load.v0+json": js, "application/javascript": js}, raw=True)
    _state["loaded"] = True
    return True
