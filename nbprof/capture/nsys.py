"""Run Nsight Systems: ``nsys profile`` a command, export SQLite, and clean up after it.

Everything is an argv list (no shell). Output goes to a results folder under a unique name
(``<stem>-<YYYYmmdd-HHMMSS>[-N]``); an existing report is never overwritten unless asked.

Leftover agents (``shared/notes/nsys-on-cpu.md``): ``nsys profile`` starts a daemon
``nsys --start-agent --session-name=profile-<prog>-<pid of nsys profile>``; after an abnormal end
(timeout, interrupt, failure) it can stay behind spinning a CPU. :func:`profile` always looks for the
agent of *its own* session afterwards -- matched by that exact ``--session-name`` suffix
``-<pid>`` of the ``nsys profile`` process it started, never by a broad pattern -- and ends it
(SIGTERM, then SIGKILL). nsys's temporary files go to a private ``TMPDIR`` removed afterwards.

On this kind of CPU-only machine, Debian's nsys 2022.4 hung in its shutdown when CPU sampling or
context-switch tracing was on, so the defaults are ``--sample=none --cpuctxsw=none``; pass
``sample="cpu"`` (or ``--sample=cpu`` in ``nsys_args``) to sample where it works.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CaptureError
from .nsys_fetch import NsysInstall, cache_dir, ensure_nsys

__all__ = ["NsysRun", "profile", "export_sqlite", "stats_csv", "default_trace", "agents_of_session",
           "report_version", "resolve_nsys", "unique_output"]

ProgressFn = Callable[[str, float, str], None]


def resolve_nsys(nsys: str | NsysInstall | None = None) -> NsysInstall:
    """An :class:`NsysInstall` for ``nsys`` (a path), or the one found by ``ensure_nsys``.

    Raises
    ------
    CaptureError
        When no nsys is found (actionable message: how to fetch/install or set ``NBPROF_NSYS``).
    """
    if isinstance(nsys, NsysInstall):
        return nsys
    if nsys:
        p = shutil.which(nsys) or (nsys if os.access(nsys, os.X_OK) else None)
        if not p:
            raise CaptureError(f"nsys binary {nsys!r} not found or not executable")
        cached = cache_dir() / "prefix" / "usr" / "lib" / "x86_64-linux-gnu"
        env = {"LD_LIBRARY_PATH": str(cached)} if str(Path(p).resolve()).startswith(str(cache_dir())) else {}
        return NsysInstall(p, env, "given")
    return ensure_nsys()


def default_trace() -> str:
    """``-t`` default: ``cuda,nvtx,osrt`` when a CUDA driver is present, else ``nvtx,osrt``."""
    if os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version"):
        return "cuda,nvtx,osrt"
    return "nvtx,osrt"


def unique_output(results_dir: str | os.PathLike[str], stem: str) -> Path:
    """A base path ``<results_dir>/<stem>-<timestamp>[-N]`` with no existing ``.nsys-rep``/``.sqlite``."""
    d = Path(results_dir)
    d.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem).strip("._") or "profile"
    base = f"{stem}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    n = 0
    while True:
        cand = d / (base if n == 0 else f"{base}-{n}")
        if not any(cand.with_name(cand.name + ext).exists() for ext in (".nsys-rep", ".sqlite", ".qdstrm")):
            return cand
        n += 1


@dataclass
class NsysRun:
    """Result of :func:`profile`.

    Attributes
    ----------
    argv : list of str
        The exact ``nsys profile`` command line.
    returncode : int
        Exit status of ``nsys profile`` (the application's status when nsys passes it through).
    report_path, sqlite_path : str or None
        The ``.nsys-rep`` and its SQLite export (None when not produced). Paths only: capture never
        loads; read the run with ``nbprof.api.load_nsys_run(run)`` (or ``nbprof.load(run.sqlite_path)``).
    elapsed_s : float
    output : str
        Combined stdout/stderr of nsys and the application.
    phases : list of (phase, elapsed_s)
    agents_killed : list of int
        Pids of leftover agents of this session that had to be ended.
    """

    argv: list[str]
    returncode: int
    report_path: str | None
    sqlite_path: str | None
    elapsed_s: float
    output: str = ""
    phases: list[tuple[str, float]] = field(default_factory=list)
    agents_killed: list[int] = field(default_factory=list)


def _cmdline(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def agents_of_session(nsys_pid: int) -> list[int]:
    """Pids of ``nsys --start-agent`` daemons whose ``--session-name`` ends in ``-<nsys_pid>``.

    nsys names the session ``profile-<program>-<pid of the nsys profile process>``; only the agent
    of that one session matches.
    """
    out = []
    suffix = f"-{int(nsys_pid)}"
    for ent in os.listdir("/proc"):
        if not ent.isdigit():
            continue
        args = _cmdline(int(ent))
        if not args or "--start-agent" not in args:
            continue
        for a in args:
            if a.startswith("--session-name=") and a.endswith(suffix) and a[len("--session-name="):].startswith("profile-"):
                out.append(int(ent))
                break
    return out


def _end_agents(nsys_pid: int, grace_s: float) -> list[int]:
    deadline = time.monotonic() + grace_s
    while True:  # a normal run: the agent leaves by itself within a moment
        pids = agents_of_session(nsys_pid)
        if not pids or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    killed = []
    for pid in pids:
        for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            t0 = time.monotonic()
            while time.monotonic() - t0 < wait and os.path.exists(f"/proc/{pid}") and _cmdline(pid):
                time.sleep(0.1)
            if not _cmdline(pid):
                break
        killed.append(pid)
    return killed


_PHASES = (
    (re.compile(r"^Generating '.*\.qdstrm'"), "generating report"),
    (re.compile(r"^\s*Processing \[|\[\d+/\d+\].*\.nsys-rep"), "processing"),
    (re.compile(r"\[\d+/\d+\].*\.sqlite"), "exporting SQLite"),
    (re.compile(r"^Generated:"), "report written"),
    (re.compile(r"[Ee]xporting"), "exporting SQLite"),
)


def profile(
    command: Sequence[str],
    *,
    results_dir: str | os.PathLike[str] = "results/nsys",
    output: str | os.PathLike[str] | None = None,
    trace: str | None = None,
    sample: str = "none",
    cpuctxsw: str = "none",
    nsys_args: Sequence[str] = (),
    overwrite: bool = False,
    export: bool = True,
    timeout_s: float | None = None,
    progress: ProgressFn | None = None,
    nsys: str | NsysInstall | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
) -> NsysRun:
    """Run ``nsys profile`` on ``command`` (an argv list) and export the report to SQLite.

    Parameters
    ----------
    command : sequence of str
        The application and its arguments, e.g. ``["python", "train.py", "--steps", "20"]``.
    results_dir : path
        Folder for the output when ``output`` is not given (created).
    output : path, optional
        Output base name (``.nsys-rep`` is appended by nsys). Default: a unique name from the
        program name in ``results_dir``.
    trace : str, optional
        ``-t`` value; default :func:`default_trace`.
    sample, cpuctxsw : str
        ``--sample`` / ``--cpuctxsw`` (see module docstring for why ``none`` is the default).
    nsys_args : sequence of str
        More ``nsys profile`` options; those given here win over the defaults (``-t``, ``-o``...).
    overwrite : bool
        Pass ``--force-overwrite true``; otherwise an existing output is an error.
    export : bool
        Also write ``<output>.sqlite`` (``--export sqlite``; falls back to ``nsys export``).
    timeout_s : float, optional
        Kill nsys (and its application) after this many seconds; raises ``CaptureError``.
    progress : callable(phase, elapsed_s, line), optional
        Called for each output line with the current phase (``starting``, ``running application``,
        ``generating report``, ``processing``, ``report written``, ``exporting SQLite``, ``done``).
    nsys : str or NsysInstall, optional
        Binary to use (default: ``$NBPROF_NSYS``, PATH, nbprof cache).
    cwd, env
        Working folder and extra environment variables for the application.

    Returns
    -------
    NsysRun

    Raises
    ------
    CaptureError
        nsys missing, output exists (without ``overwrite``), timeout, or no report produced.
        ``KeyboardInterrupt`` is re-raised after nsys and its agent are ended.
    """
    inst = resolve_nsys(nsys)
    command = [os.fspath(c) for c in command]
    if not command:
        raise CaptureError("nothing to profile: empty command")
    user = list(nsys_args)
    has = lambda *flags: any(a == f or a.startswith(f + "=") for a in user for f in flags)  # noqa: E731
    out_base: Path | None
    if output is None and not has("-o", "--output"):
        out_base = unique_output(results_dir, Path(command[-1] if command[0].startswith("python") and len(command) > 1
                                                   else command[0]).stem)
    else:
        out_base = Path(os.fspath(output)) if output is not None else None
    argv = [inst.path, "profile"]
    if not has("-t", "--trace"):
        argv += ["-t", trace or default_trace()]
    if not has("-s", "--sample"):
        argv += [f"--sample={sample}"]
    if not has("--cpuctxsw"):
        argv += [f"--cpuctxsw={cpuctxsw}"]
    if out_base is not None:
        if out_base.suffix == ".nsys-rep":
            out_base = out_base.with_suffix("")
        out_base.parent.mkdir(parents=True, exist_ok=True)
        if not overwrite and any(out_base.with_name(out_base.name + e).exists() for e in (".nsys-rep", ".sqlite")):
            raise CaptureError(f"{out_base}.nsys-rep (or .sqlite) exists; pass overwrite=True (--force-overwrite) "
                               "or another output name")
        argv += ["-o", str(out_base)]
    if not has("-f", "--force-overwrite"):
        argv += ["--force-overwrite", "true" if overwrite else "false"]
    if export and not has("--export"):
        argv += ["--export", "sqlite"]
    argv += user + command
    if out_base is None:  # the user gave -o in nsys_args
        for i, a in enumerate(user):
            if a in ("-o", "--output") and i + 1 < len(user):
                out_base = Path(user[i + 1])
            elif a.startswith("--output="):
                out_base = Path(a.split("=", 1)[1])
        if out_base is not None and out_base.suffix == ".nsys-rep":
            out_base = out_base.with_suffix("")

    tmp = tempfile.mkdtemp(prefix="nbprof-nsys-")
    run_env = inst.environ()
    run_env.update(env or {})
    run_env["TMPDIR"] = tmp
    t0 = time.monotonic()
    phases: list[tuple[str, float]] = []
    lines: list[str] = []
    state = {"phase": ""}

    def note(phase: str, line: str = "") -> None:
        if phase != state["phase"]:
            state["phase"] = phase
            phases.append((phase, time.monotonic() - t0))
        if progress is not None:
            progress(phase, time.monotonic() - t0, line)

    note("starting")
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd, env=run_env,
                                start_new_session=True, text=True, errors="replace", bufsize=1)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CaptureError(f"cannot start {inst.path}: {exc}") from exc

    def reader() -> None:
        assert proc.stdout is not None
        first = True
        for line in proc.stdout:
            lines.append(line)
            phase = state["phase"]
            if first:
                phase, first = "running application", False
            for pat, ph in _PHASES:
                if pat.search(line):
                    phase = ph
            note(phase, line.rstrip("\n"))

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    note("running application")
    killed: list[int] = []
    timed_out = False
    try:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
    except BaseException:
        _kill_group(proc)
        killed = _end_agents(proc.pid, 0.0)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        th.join(timeout=5)
    killed = _end_agents(proc.pid, 0.0 if timed_out else 3.0)
    shutil.rmtree(tmp, ignore_errors=True)
    out = "".join(lines)
    elapsed = time.monotonic() - t0
    if timed_out:
        raise CaptureError(f"nsys profile timed out after {timeout_s:.0f} s (ended nsys"
                           f"{' and agent pids ' + str(killed) if killed else ''}); output:\n{out[-2000:]}")
    rep = out_base.with_name(out_base.name + ".nsys-rep") if out_base is not None else None
    sq = out_base.with_name(out_base.name + ".sqlite") if out_base is not None else None
    if rep is None or not rep.exists():
        raise CaptureError(f"nsys profile produced no report (exit {proc.returncode}); command: {argv}\n"
                           f"output:\n{out[-3000:]}")
    if export and (sq is None or not sq.exists()):
        note("exporting SQLite")
        sq = Path(export_sqlite(rep, nsys=inst, output=sq))
    note("done")
    return NsysRun(argv=argv, returncode=proc.returncode, report_path=str(rep),
                   sqlite_path=str(sq) if sq is not None and sq.exists() else None, elapsed_s=elapsed, output=out,
                   phases=phases, agents_killed=killed)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


_VERSION_RE = re.compile(rb"(20\d\d)\.(\d+)\.(\d+)(?:\.(\d+))?-[0-9a-f]{6,}")


def report_version(path: str | os.PathLike[str], limit: int = 4 << 20) -> str | None:
    """The Nsight Systems version that wrote a ``.nsys-rep`` (``"2022.4.2.1"``), from its header; None if unseen."""
    with open(path, "rb") as fh:
        head = fh.read(limit)
    m = _VERSION_RE.search(head)
    if not m:
        return None
    return ".".join(g.decode() for g in m.groups() if g is not None)


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def export_sqlite(report: str | os.PathLike[str], *, nsys: str | NsysInstall | None = None,
                  output: str | os.PathLike[str] | None = None) -> str:
    """Export a ``.nsys-rep`` to SQLite with the installed nsys; returns the ``.sqlite`` path.

    Without ``output``: a sibling ``<report>.sqlite`` newer than the report is reused; otherwise the
    export goes to the nbprof cache (``~/.cache/nbprof/exports/<hash>/``) so the user's folder is not
    written. Exports are reused while the report is unchanged.

    Raises
    ------
    FileNotFoundError
        The report does not exist.
    CaptureError
        No nsys; the report was written by a newer Nsight Systems than the installed one (message names
        both versions); or ``nsys export`` failed.
    """
    rep = Path(os.fspath(report))
    if not rep.exists():
        raise FileNotFoundError(f"no such report: {str(rep)!r}")
    if output is None:
        sib = rep.with_suffix(".sqlite")
        if sib.exists() and sib.stat().st_mtime >= rep.stat().st_mtime:
            return str(sib)
        st = rep.stat()
        key = hashlib.sha1(f"{rep.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
        root = Path(os.environ.get("NBPROF_EXPORT_CACHE") or cache_dir().parent / "exports") / key
        out = root / (rep.stem + ".sqlite")
        if out.exists():
            return str(out)
        root.mkdir(parents=True, exist_ok=True)
    else:
        out = Path(os.fspath(output))
    rv = report_version(rep)
    try:
        inst = resolve_nsys(nsys)
    except CaptureError as exc:
        raise CaptureError(f"cannot open {rep}{' (written by Nsight Systems ' + rv + ')' if rv else ''}: "
                           f"it must be exported to SQLite with nsys. {exc}") from exc
    iv = inst.version()
    if rv and _vtuple(rv)[:2] > _vtuple(iv)[:2]:
        raise CaptureError(f"{rep} was written by Nsight Systems {rv}, newer than the installed nsys {iv} "
                           f"({inst.path}); reports cannot be read by older versions. Export it where it was "
                           f"made (`nsys export --type sqlite {rep.name}`) and load the .sqlite, or point "
                           "NBPROF_NSYS at an nsys >= " + rv)
    tmp = tempfile.mkdtemp(prefix="nbprof-nsys-")
    env = inst.environ()
    env["TMPDIR"] = tmp
    try:
        cp = subprocess.run([inst.path, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(out),
                             str(rep)], capture_output=True, text=True, env=env, timeout=600, check=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if cp.returncode != 0 or not out.exists():
        msg = (cp.stdout + cp.stderr).strip()
        hint = ""
        if rv is None or re.search(r"version|newer|not supported|unsupported", msg, re.IGNORECASE):
            hint = f" (report version: {rv or 'unknown'}; installed nsys: {iv})"
        raise CaptureError(f"nsys export of {rep} failed (exit {cp.returncode}){hint}:\n{msg[-2000:]}")
    return str(out)


def stats_csv(path: str | os.PathLike[str], reports: Sequence[str], *, nsys: str | NsysInstall | None = None,
              timeout_s: float = 300) -> dict[str, str]:
    """Run the real ``nsys stats --format csv`` for each report on ``path``; returns ``{report: csv text}``.

    Used as the independent oracle in tests. A report with no data yields ``""``.

    Raises
    ------
    CaptureError
        When nsys is missing or ``nsys stats`` fails.
    """
    inst = resolve_nsys(nsys)
    out: dict[str, str] = {}
    tmp = tempfile.mkdtemp(prefix="nbprof-nsys-")
    env = inst.environ()
    env["TMPDIR"] = tmp
    try:
        for r in reports:
            cp = subprocess.run([inst.path, "stats", "-q", "--format", "csv", "--report", r, os.fspath(path)],
                                capture_output=True, text=True, env=env, timeout=timeout_s, check=False)
            if cp.returncode != 0:
                raise CaptureError(f"nsys stats --report {r} {path} failed (exit {cp.returncode}):\n{cp.stderr[-2000:]}")
            out[r] = cp.stdout.strip()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
