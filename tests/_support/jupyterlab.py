"""A real JupyterLab server for the browser tests (the ``lab`` fixture of ``tests/conftest.py``) and the console
messages of a JupyterLab page that are not errors of the page under test.

The server runs on 127.0.0.1 with a token, its own JUPYTER_*/IPython/XDG/npm directories and settings (news
fetching off), and is stopped by process group (SIGTERM, then SIGKILL) with its kernels.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

from _support.chromium import collect_errors
from _support.paths import ROOT

# console noise that is not an error of the page under test
LAB_BENIGN = ("Failed to load resource", "favicon", "[Violation]", "Widget model not found", "translations",
              "npm", "DevTools")


def lab_errors(page) -> list[str]:
    """:func:`_support.chromium.collect_errors` with JupyterLab's benign messages (:data:`LAB_BENIGN`)."""
    return collect_errors(page, LAB_BENIGN)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyterlab_server(base: Path) -> Iterator[dict]:
    """Start JupyterLab with its root, settings and state under the empty folder ``base``; yields ``{"url",
    "token", "root", "base"}`` once ``/api/status`` answers (RuntimeError with the server's log when it does not
    within 90 s) and stops it, kernels included, on exit."""
    root = base / "root"
    root.mkdir()
    settings = base / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = dict(os.environ)
    for k, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                   ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "mpl"), ("XDG_CACHE_HOME", "cache"),
                   ("XDG_CONFIG_HOME", "xdgconfig")):
        (base / sub).mkdir()
        env[k] = str(base / sub)
    # jupyter_lsp runs `npm prefix --global` at startup: keep npm's logs out of ~ too
    env["npm_config_cache"] = str(base / "cache" / "npm")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("JUPYTER_PATH", None)
    port = free_port()
    token = uuid.uuid4().hex
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           f"--LabApp.user_settings_dir={base / 'settings'}", f"--LabApp.workspaces_dir={base / 'workspaces'}",
           "--LabApp.expose_app_in_browser=True", "--ServerApp.allow_root=True",
           "--LabServerApp.news_url=", "--ServerApp.disable_check_xsrf=True"]
    log = open(base / "lab.log", "w")  # noqa: SIM115 - the server writes to it until the fixture ends
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                log.flush()
                raise RuntimeError("JupyterLab did not start:\n" + (base / "lab.log").read_text()[-3000:])
            time.sleep(0.5)
        yield {"url": url, "token": token, "root": root, "base": base}
    finally:
        # stop the server (and its kernels) by pid: SIGTERM to its process group, then SIGKILL
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
