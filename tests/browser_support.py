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
