"""Start (or reuse) TensorBoard on 127.0.0.1 from a notebook, embed it, stop it by pid.

- ``start(logdir)`` reuses a live TensorBoard already serving the same logdir (found through
  TensorBoard's own registry, ``tensorboard.manager.get_all()``, which also lists instances
  started with ``%tensorboard``), else launches ``python -m tensorboard.main --logdir D --host
  127.0.0.1 --port P`` as an argv list (the kernel's interpreter, so no PATH surprises) and waits
  until its HTTP server answers.
- ``embed(handle)`` shows it inline through ``tensorboard.notebook.display`` (which honours
  ``TENSORBOARD_PROXY_URL``); when ``jupyter-server-proxy`` is installed and no proxy URL is set,
  nbprof points the frame at ``<base_url>proxy/<port>/`` so it works on JupyterHub/Binder.
- Errors are ``TensorBoardStartError`` (port taken, process exited, not ready in time, with the
  last lines of its stderr) or ``MissingDependencyError`` (no ``tensorboard`` package).
"""

from __future__ import annotations

import contextlib
import html
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from ..errors import TensorBoardStartError

__all__ = ["TensorBoardHandle", "TensorBoardStartError", "start", "stop", "running", "embed", "free_port", "proxy_url"]

HOST = "127.0.0.1"


@dataclass
class TensorBoardHandle:
    """A TensorBoard server on 127.0.0.1.

    Attributes
    ----------
    pid, port : int
    logdir : str
        Absolute logdir it serves.
    reused : bool
        True when ``start`` found it already running.
    url : str
        ``http://127.0.0.1:<port>/``.
    """

    pid: int
    port: int
    logdir: str
    reused: bool = False
    _proc: subprocess.Popen | None = field(default=None, repr=False, compare=False)
    _stderr_path: str | None = field(default=None, repr=False, compare=False)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/``, the address TensorBoard serves on."""
        return f"http://{HOST}:{self.port}/"

    def alive(self) -> bool:
        """True while the process runs (and, for one this session started, has not exited)."""
        if self._proc is not None:
            return self._proc.poll() is None
        return _pid_alive(self.pid)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop this server by pid (SIGTERM, then SIGKILL after ``timeout_s``)."""
        stop(self, timeout_s=timeout_s)

    def embed(self, height: int = 800):
        """Show the TensorBoard UI inline (see ``embed``)."""
        return embed(self, height=height)

    def _repr_html_(self) -> str:
        state = "running" if self.alive() else "stopped"
        how = "reused" if self.reused else "started"
        url = html.escape(self.url, quote=True)
        return (
            f"<div>TensorBoard ({how}, {state}) pid {self.pid} serving <code>{html.escape(self.logdir)}</code> "
            f"at <a href=\"{url}\" target=\"_blank\">{url}</a>. Call <code>.embed()</code> to show it here.</div>"
        )


_STARTED: dict[int, TensorBoardHandle] = {}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still "exists": reap it when it is ours
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def _http_ok(port: int, path: str = "/data/plugins_listing", timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _require_tensorboard() -> None:
    from .._deps import require

    require("tensorboard", "tensorboard", f"launching TensorBoard from {sys.executable}")


def running(logdir: str | os.PathLike[str] | None = None) -> list[TensorBoardHandle]:
    """Live TensorBoard servers known to TensorBoard's registry (``tensorboard.manager.get_all``).

    Parameters
    ----------
    logdir : path, optional
        Only those serving this logdir (compared as real paths).
    """
    _require_tensorboard()
    from tensorboard import manager

    want = os.path.realpath(os.fspath(logdir)) if logdir is not None else None
    out = []
    for info in manager.get_all():
        if not info.logdir or not _pid_alive(info.pid):
            continue
        if want is not None and os.path.realpath(info.logdir) != want:
            continue
        h = _STARTED.get(info.pid) or TensorBoardHandle(info.pid, info.port, os.path.realpath(info.logdir), True)
        out.append(h)
    return out


def start(
    logdir: str | os.PathLike[str],
    *,
    port: int | None = None,
    reuse: bool = True,
    timeout_s: float = 60.0,
    reload_interval_s: float | None = None,
    extra_args: list[str] | tuple[str, ...] = (),
) -> TensorBoardHandle:
    """Start TensorBoard on 127.0.0.1 for ``logdir``, or reuse one already serving it.

    Parameters
    ----------
    logdir : path
        Created when missing.
    port : int, optional
        Default: a free port chosen by the OS.
    reuse : bool, default True
        Return a live server already serving the same logdir (and the same port when ``port`` is given).
    timeout_s : float, default 60
        How long to wait for the HTTP server to answer.
    reload_interval_s : float, optional
        ``--reload_interval`` (how often TensorBoard rescans the logdir).
    extra_args : sequence of str
        More ``tensorboard`` arguments (argv items, never a shell string).

    Returns
    -------
    TensorBoardHandle

    Raises
    ------
    MissingDependencyError
        ``tensorboard`` is not installed.
    TensorBoardStartError
        The port is taken, the process exited, or it did not answer within ``timeout_s`` (it is then killed).
    """
    _require_tensorboard()
    ld = os.path.realpath(os.fspath(logdir))
    os.makedirs(ld, exist_ok=True)
    if reuse:
        for h in running(ld):
            if (port is None or h.port == port) and _http_ok(h.port):
                h.reused = True
                return h
    if port is None:
        port = free_port()
    elif not _port_free(port):
        who = [h for h in running() if h.port == port]
        extra = f" by TensorBoard pid {who[0].pid} serving {who[0].logdir}" if who else ""
        msg = f"cannot start TensorBoard: port {port} on {HOST} is already in use{extra}; pass another port or port=None"
        raise TensorBoardStartError(msg, port=port)
    argv = [sys.executable, "-m", "tensorboard.main", "--logdir", ld, "--host", HOST, "--port", str(port)]
    if reload_interval_s is not None:
        argv += ["--reload_interval", str(float(reload_interval_s))]
    argv += [str(a) for a in extra_args]
    fd, err_path = tempfile.mkstemp(prefix="nbprof-tensorboard-", suffix=".stderr")
    try:
        proc = subprocess.Popen(  # argv list, no shell
            argv, stdout=subprocess.DEVNULL, stderr=fd, stdin=subprocess.DEVNULL, start_new_session=True
        )
    finally:
        os.close(fd)
    h = TensorBoardHandle(proc.pid, port, ld, False, proc, err_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rc = proc.poll()
        if rc is not None:
            msg = f"TensorBoard exited with code {rc} before serving {ld} on {HOST}:{port}"
            raise TensorBoardStartError(msg, port=port, stderr=_read(err_path, unlink=True))
        if _http_ok(port, timeout=1.0):
            _STARTED[proc.pid] = h
            return h
        time.sleep(0.2)
    _terminate(proc.pid, proc, 5.0)
    msg = f"TensorBoard (pid {proc.pid}) did not answer on {HOST}:{port} within {timeout_s:.0f} s; it was stopped"
    raise TensorBoardStartError(msg, port=port, stderr=_read(err_path, unlink=True))


def _read(path: str | None, *, unlink: bool = False) -> str:
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""
    finally:
        if unlink:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _terminate(pid: int, proc: subprocess.Popen | None, timeout_s: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None:
                return
        elif not _pid_alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def stop(handle_or_pid: TensorBoardHandle | int, *, timeout_s: float = 10.0) -> None:
    """Stop a TensorBoard server by its pid (SIGTERM, then SIGKILL after ``timeout_s``).

    Only pids that TensorBoard's registry lists (or this session started) are signalled.

    Raises
    ------
    ValueError
        When the pid is not a known TensorBoard process.
    """
    if isinstance(handle_or_pid, TensorBoardHandle):
        h = handle_or_pid
    else:
        pid = int(handle_or_pid)
        known = _STARTED.get(pid) or next((x for x in running() if x.pid == pid), None)
        if known is None:
            msg = f"pid {pid} is not a TensorBoard process known to this session or to tensorboard.manager"
            raise ValueError(msg)
        h = known
    _terminate(h.pid, h._proc, timeout_s)
    _STARTED.pop(h.pid, None)
    if h._stderr_path:
        with contextlib.suppress(OSError):
            os.unlink(h._stderr_path)


def proxy_url(port: int) -> str | None:
    """The URL path under which the notebook server proxies ``port``, or None for a direct connection.

    ``TENSORBOARD_PROXY_URL`` (TensorBoard's own setting, ``%PORT%`` replaced) wins; else, when
    ``jupyter-server-proxy`` is installed, ``<JUPYTERHUB_SERVICE_PREFIX or "/">proxy/<port>/``.
    """
    env = os.environ.get("TENSORBOARD_PROXY_URL")
    if env:
        return env.replace("%PORT%", str(int(port)))
    if importlib.util.find_spec("jupyter_server_proxy") is not None:
        prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or os.environ.get("NB_PREFIX") or "/"
        if not prefix.endswith("/"):
            prefix += "/"
        return f"{prefix}proxy/{int(port)}/"
    return None


def embed(handle: TensorBoardHandle, height: int = 800) -> None:
    """Display the TensorBoard UI in the notebook output (``tensorboard.notebook.display``).

    Proxy-aware: see ``proxy_url``. Outside a notebook this prints the URL (TensorBoard's behaviour).
    """
    _require_tensorboard()
    from tensorboard import notebook

    purl = proxy_url(handle.port)
    old = os.environ.get("TENSORBOARD_PROXY_URL")
    try:
        if purl is not None:
            os.environ["TENSORBOARD_PROXY_URL"] = purl
        notebook.display(port=handle.port, height=int(height))
    finally:
        if purl is not None:
            if old is None:
                os.environ.pop("TENSORBOARD_PROXY_URL", None)
            else:
                os.environ["TENSORBOARD_PROXY_URL"] = old
