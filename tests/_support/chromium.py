"""What the browser tests share: the Debian Chromium they drive through Playwright and an offline context.

Chromium: ``/usr/bin/chromium`` (``NBPROF_CHROMIUM`` overrides; ``make browser`` installs it), launched
with ``executable_path``, never ``playwright install``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("NBPROF_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def need_chromium() -> None:
    """Skip the calling test, with the reason, when Chromium or Playwright is missing."""
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"Chromium not found at {CHROMIUM} (run `make browser`, i.e. apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright (pip) not installed")


def block_network(ctx) -> list[str]:
    """Abort every request of the Playwright context ``ctx`` that leaves the machine (anything but
    ``file:``, ``data:`` and ``blob:`` URLs); returns the list the aborted URLs are appended to."""
    blocked: list[str] = []

    def route(r):
        if r.request.url.startswith(("file:", "data:", "blob:")):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    ctx.route("**/*", route)
    return blocked


#: console messages that are not page errors (a missing favicon, Chrome's own notices)
BENIGN = ("Failed to load resource", "favicon", "[Violation]", "DevTools")


def collect_errors(page, benign: tuple[str, ...] = BENIGN) -> list[str]:
    """The list that the page's console errors (but the ``benign`` ones) and page errors are appended to."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}")
            if m.type == "error" and not any(s in m.text for s in benign) else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    return errors


def open_page(browser, url: str, *, color_scheme: str = "light", width: int = 1400, height: int = 1000,
              benign: tuple[str, ...] = BENIGN):
    """A new offline context (network blocked, ``color_scheme``) with one page at ``url`` that records its errors
    (:func:`collect_errors`), once BokehJS has a document. Returns ``(ctx, page, errors, blocked)``; close ``ctx``."""
    ctx = browser.new_context(viewport={"width": width, "height": height}, offline=True, color_scheme=color_scheme)
    blocked = block_network(ctx)
    page = ctx.new_page()
    errors = collect_errors(page, benign)
    page.goto(url)
    page.wait_for_function("() => window.Bokeh !== undefined && Bokeh.documents.length > 0", timeout=60_000)
    return ctx, page, errors, blocked


def open_notebook(page, lab: dict, nb, *, run_all: bool = True, workspace: str | None = None) -> None:
    """Open notebook ``nb`` (a path in the ``lab`` server's root) in a fresh JupyterLab workspace, wait for an idle
    kernel and, with ``run_all``, run every cell."""
    import uuid

    ws = workspace or uuid.uuid4().hex[:8]
    page.goto(f"{lab['url']}/lab/workspaces/{ws}/tree/{nb.name}?token={lab['token']}", timeout=90_000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=60_000)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=120_000)
    if run_all:
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")


def sized_canvas(canvas, what: str):
    """``canvas`` (a Playwright locator of a visible canvas) once Bokeh has laid it out (over 100 x 50 px): a
    canvas drawn before its output area has a width stays tiny; the test fails naming ``what`` and its box."""
    box = None
    for _ in range(100):
        box = canvas.bounding_box()
        if box and box["width"] > 100 and box["height"] > 50:
            return canvas
        time.sleep(0.1)
    pytest.fail(f"{what}: canvas never got a size ({box})")


def shot_dir(tmp_path: Path) -> Path:
    """Where a test saves its screenshots: ``$NBPROF_SCREENSHOTS``, else ``tmp_path/screenshots`` (created)."""
    d = Path(os.environ.get("NBPROF_SCREENSHOTS", tmp_path / "screenshots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def luminance(png: bytes) -> float:
    """Mean luminance (0-255) of a PNG screenshot."""
    import io

    import numpy as np
    from PIL import Image

    return float(np.asarray(Image.open(io.BytesIO(png)).convert("L")).mean())
