"""What the browser tests share: the Debian Chromium they drive through Playwright and an offline context.

Chromium: ``/usr/bin/chromium`` (``NBPROF_CHROMIUM`` overrides; ``make browser`` installs it), launched
with ``executable_path``, never ``playwright install``.
"""

from __future__ import annotations

import os

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


def open_page(browser, url: str, *, color_scheme: str = "light", width: int = 1400, height: int = 1000):
    """A new offline context (network blocked, ``color_scheme``) with one page that records console errors and
    page errors, at ``url``. Returns ``(ctx, page, errors, blocked)``; close ``ctx`` when done."""
    ctx = browser.new_context(viewport={"width": width, "height": height}, offline=True, color_scheme=color_scheme)
    blocked = block_network(ctx)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(url)
    return ctx, page, errors, blocked
