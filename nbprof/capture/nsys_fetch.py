"""Find Nsight Systems, or obtain Debian's ``nsight-systems`` 2022.4 into a private cache folder.

``python -m nbprof.capture.nsys_fetch`` (the Makefile's ``nsys`` target) prints where ``nsys`` is,
fetching it first when it is not found. It never touches the system's apt sources and never runs
``apt-get install``: a private sources file (``Components: contrib non-free``) is given to apt with
``-o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts=<cache>/apt ...``, the packages are
downloaded with ``apt-get download`` and unpacked with ``dpkg -x`` into ``<cache>/prefix``.
Two fixes make the unpacked CLI work (facts from ``shared/notes/nsys-on-cpu.md``):

1. a symlink ``<prefix>/usr/lib/x86_64-linux-gnu/nsight-systems/host-linux-x64`` ->
   ``../../nsight-systems/host-linux-x64`` so ``nsys profile`` finds its ``QdstrmImporter``;
2. ``LD_LIBRARY_PATH=<prefix>/usr/lib/x86_64-linux-gnu`` so the importer finds ``libssh.so.4``
   (Debian's ``libssh-4`` is unpacked into the same prefix).

The cache folder is ``$NBPROF_NSYS_CACHE`` or ``$XDG_CACHE_HOME/nbprof/nsys`` (default
``~/.cache/nbprof/nsys``). Once unpacked, a second call only checks a marker file (fast, idempotent).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CaptureError

#: Debian bookworm packages unpacked into the prefix.
PACKAGES = ("nsight-systems", "nsight-systems-target", "libssh-4")
_MARKER = "nbprof-nsys-ok"
_LIBDIR = "usr/lib/x86_64-linux-gnu"


def cache_dir() -> Path:
    """The cache folder: ``$NBPROF_NSYS_CACHE``, else ``$XDG_CACHE_HOME/nbprof/nsys`` (``~/.cache/...``)."""
    env = os.environ.get("NBPROF_NSYS_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nbprof" / "nsys"


@dataclass
class NsysInstall:
    """A usable ``nsys`` binary.

    Attributes
    ----------
    path : str
        The ``nsys`` executable.
    env : dict
        Extra environment variables it needs (``LD_LIBRARY_PATH`` for the cached Debian copy).
    source : str
        ``"NBPROF_NSYS"``, ``"PATH"`` or ``"cache"``.
    """

    path: str
    env: dict[str, str] = field(default_factory=dict)
    source: str = "PATH"

    def environ(self) -> dict[str, str]:
        """``os.environ`` merged with ``env`` (LD_LIBRARY_PATH prepended, not replaced)."""
        out = dict(os.environ)
        for k, v in self.env.items():
            if k == "LD_LIBRARY_PATH" and out.get(k):
                out[k] = v + os.pathsep + out[k]
            else:
                out[k] = v
        return out

    def version(self) -> str:
        """The version string printed by ``nsys --version`` (e.g. ``"2022.4.2.1"``).

        Raises
        ------
        CaptureError
            When ``nsys --version`` fails.
        """
        try:
            cp = subprocess.run([self.path, "--version"], capture_output=True, text=True, env=self.environ(),
                                timeout=60, check=False)
        except OSError as exc:
            raise CaptureError(f"cannot run {self.path}: {exc}") from exc
        m = re.search(r"(\d{4}\.\d+(?:\.\d+)*)", cp.stdout + cp.stderr)
        if cp.returncode != 0 or not m:
            raise CaptureError(f"{self.path} --version failed (exit {cp.returncode}): {(cp.stdout + cp.stderr).strip()}")
        return m.group(1)


def _cached_install(root: Path | None = None) -> NsysInstall | None:
    root = root or cache_dir()
    prefix = root / "prefix"
    exe = prefix / "usr" / "bin" / "nsys"
    if (root / _MARKER).exists() and exe.exists():
        return NsysInstall(str(exe), {"LD_LIBRARY_PATH": str(prefix / _LIBDIR)}, "cache")
    return None


def find_nsys() -> NsysInstall | None:
    """Locate ``nsys``: ``$NBPROF_NSYS``, then ``PATH``, then the cache folder. None when absent.

    ``$NBPROF_NSYS`` names a binary; when it is set but not executable, the search stops there
    (returns None) so a wrong override is not silently ignored.
    """
    env = os.environ.get("NBPROF_NSYS")
    if env:
        p = shutil.which(env) or (env if os.access(env, os.X_OK) else None)
        if p is None:
            return None
        # a binary inside our cache still needs its LD_LIBRARY_PATH
        cached = _cached_install()
        if cached and os.path.realpath(p) == os.path.realpath(cached.path):
            return NsysInstall(p, cached.env, "NBPROF_NSYS")
        return NsysInstall(p, {}, "NBPROF_NSYS")
    p = shutil.which("nsys")
    if p:
        return NsysInstall(p, {}, "PATH")
    return _cached_install()


def _apt(args: list[str], root: Path) -> subprocess.CompletedProcess:
    opts = [
        "-o", "Dir::Etc::sourcelist=/dev/null",
        "-o", f"Dir::Etc::sourceparts={root / 'apt' / 'sources'}",
        "-o", f"Dir::State::Lists={root / 'apt' / 'lists'}",
        "-o", f"Dir::Cache={root / 'apt' / 'cache'}",
        "-o", "Debug::NoLocking=1",
        "-q",
    ]
    return subprocess.run(["apt-get", *opts, *args], capture_output=True, text=True, check=False,
                          cwd=root / "debs", timeout=900)


def fetch(root: Path | None = None, *, quiet: bool = False) -> NsysInstall:
    """Download and unpack Debian bookworm's ``nsight-systems`` 2022.4 (+ ``libssh-4``) into ``root``.

    Parameters
    ----------
    root : Path, optional
        Cache folder (default :func:`cache_dir`).
    quiet : bool
        Do not print progress.

    Returns
    -------
    NsysInstall

    Raises
    ------
    CaptureError
        When apt/dpkg are missing (not a Debian-like system), a download fails, or the unpacked
        ``nsys --version`` does not run. The message says what to do instead.
    """
    root = root or cache_dir()
    have = _cached_install(root)
    if have:
        return have
    for tool in ("apt-get", "dpkg"):
        if not shutil.which(tool):
            raise CaptureError(
                f"cannot fetch Nsight Systems: {tool!r} not found (this fetcher needs Debian/Ubuntu). "
                "Install Nsight Systems from https://developer.nvidia.com/nsight-systems and put `nsys` on PATH "
                "or set NBPROF_NSYS=/path/to/nsys."
            )
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    for sub in ("apt/sources", "apt/lists/partial", "apt/cache/archives/partial", "debs"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    signed = f"Signed-By: {keyring}\n" if os.path.exists(keyring) else ""
    mirror = os.environ.get("NBPROF_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    (root / "apt" / "sources" / "nbprof-nsys.sources").write_text(
        f"Types: deb\nURIs: {mirror}\nSuites: bookworm\nComponents: main contrib non-free\n{signed}"
    )
    say(f"nbprof: fetching {', '.join(PACKAGES)} from Debian bookworm into {root}")
    cp = _apt(["update"], root)
    if cp.returncode != 0:
        raise CaptureError(f"apt-get update (private sources in {root}) failed:\n{cp.stderr.strip()[-2000:]}")
    for old in (root / "debs").glob("*.deb"):
        old.unlink()
    cp = _apt(["download", *PACKAGES], root)
    if cp.returncode != 0:
        raise CaptureError(f"apt-get download {' '.join(PACKAGES)} failed:\n{cp.stderr.strip()[-2000:]}")
    prefix = root / "prefix"
    if prefix.exists():
        shutil.rmtree(prefix)
    prefix.mkdir(parents=True)
    for deb in sorted((root / "debs").glob("*.deb")):
        say(f"nbprof: unpacking {deb.name}")
        cp = subprocess.run(["dpkg", "-x", str(deb), str(prefix)], capture_output=True, text=True, check=False)
        if cp.returncode != 0:
            raise CaptureError(f"dpkg -x {deb} failed: {cp.stderr.strip()}")
    # fix 1: the CLI looks for host-linux-x64 next to its target folder
    link = prefix / _LIBDIR / "nsight-systems" / "host-linux-x64"
    if not link.exists() and (prefix / "usr/lib/nsight-systems/host-linux-x64").exists():
        link.symlink_to("../../nsight-systems/host-linux-x64")
    exe = prefix / "usr" / "bin" / "nsys"
    if not exe.exists():
        raise CaptureError(f"unpacked packages hold no usr/bin/nsys under {prefix}")
    inst = NsysInstall(str(exe), {"LD_LIBRARY_PATH": str(prefix / _LIBDIR)}, "cache")
    ver = inst.version()  # raises when it does not run
    (root / _MARKER).write_text(ver + "\n")
    for deb in (root / "debs").glob("*.deb"):  # ~170 MB we no longer need
        deb.unlink()
    shutil.rmtree(root / "apt" / "cache", ignore_errors=True)
    say(f"nbprof: nsys {ver} ready")
    return inst


def ensure_nsys(*, fetch_missing: bool = False) -> NsysInstall:
    """An ``nsys`` to run, or an actionable error.

    Parameters
    ----------
    fetch_missing : bool
        Fetch Debian's copy into the cache when none is found.

    Raises
    ------
    CaptureError
        When no ``nsys`` is found (the message says how to get one).
    """
    inst = find_nsys()
    if inst is not None:
        return inst
    if os.environ.get("NBPROF_NSYS"):
        raise CaptureError(f"NBPROF_NSYS={os.environ['NBPROF_NSYS']!r} is not an executable nsys binary")
    if fetch_missing:
        return fetch()
    raise CaptureError(
        "Nsight Systems (`nsys`) not found on PATH nor in the nbprof cache "
        f"({cache_dir()}). Fix: run `python -m nbprof.capture.nsys_fetch` (Debian/Ubuntu, unpacks "
        "Debian's nsight-systems 2022.4 into the cache), install Nsight Systems from "
        "https://developer.nvidia.com/nsight-systems, or set NBPROF_NSYS=/path/to/nsys."
    )


def main(argv: list[str] | None = None) -> int:
    """CLI: print the path of ``nsys`` (fetching it when missing); exit 1 with the reason on failure."""
    try:
        inst = ensure_nsys(fetch_missing=True)
        ver = inst.version()
    except CaptureError as exc:
        print(f"nbprof: {exc}", file=sys.stderr)
        return 1
    extra = f" (needs LD_LIBRARY_PATH={inst.env['LD_LIBRARY_PATH']})" if inst.env.get("LD_LIBRARY_PATH") else ""
    print(f"nsys {ver}: {inst.path}{extra} [{inst.source}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
