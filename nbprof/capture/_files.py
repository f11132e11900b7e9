"""File helpers shared by the capture modules: never-overwrite names, trace copies, the temporary folder."""

from __future__ import annotations

import atexit
import contextlib
import gzip
import os
import shutil
import tempfile
from pathlib import Path

from ..atomic import atomic_open, atomic_write

__all__ = ["unique_path", "copy_trace", "write_trace_bytes", "read_trace_bytes", "tmp_dir", "unlink_quietly"]


def _split_suffix(name: str) -> tuple[str, str]:
    low = name.lower()
    for suf in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json"):
        if low.endswith(suf):
            return name[: -len(suf)], name[-len(suf):]
    return name, ""


def unique_path(path: str | os.PathLike[str], *, tag: str, force: bool = False, taken: set[Path] | None = None) -> Path:
    """A path to write ``path`` to without overwriting anything.

    Parameters
    ----------
    path : path-like
        The wanted file.
    tag : str
        Inserted before the suffix when the file exists, TensorBoard style
        (``out.json`` -> ``out.<tag>.json``; ``run.pt.trace.json.gz`` -> ``run.<tag>.pt.trace.json.gz``).
    force : bool
        Return ``path`` even if it exists (unless it is in ``taken``).
    taken : set of Path, optional
        Paths already written by this session; never returned.

    Returns
    -------
    Path
    """
    p = Path(path)
    taken = taken or set()
    if p.resolve() not in taken and (force or not p.exists()):
        return p
    stem, suf = _split_suffix(p.name)
    n = 0
    while True:
        extra = f".{n}" if n else ""
        cand = p.with_name(f"{stem}.{tag}{extra}{suf}")
        if not cand.exists() and cand.resolve() not in taken:
            return cand
        n += 1


def read_trace_bytes(path: Path) -> bytes:
    """The (decompressed) bytes of a ``.json`` or ``.json.gz`` trace."""
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def write_trace_bytes(data: bytes, path: Path) -> None:
    """Write (decompressed) trace bytes to ``path``, gzip-compressed when it ends in ``.gz``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = gzip.compress(data, compresslevel=6) if path.name.lower().endswith(".gz") else data
    atomic_write(path, payload)


def copy_trace(src: Path, dst: Path) -> None:
    """Copy a trace, converting between ``.json`` and ``.json.gz`` as the names say."""
    if src.name.lower().endswith(".gz") == dst.name.lower().endswith(".gz"):
        dst.parent.mkdir(parents=True, exist_ok=True)
        with open(src, "rb") as fsrc, atomic_open(dst, "wb") as fdst:
            shutil.copyfileobj(fsrc, fdst, 1 << 22)
    else:
        write_trace_bytes(read_trace_bytes(src), dst)


def unlink_quietly(path: Path) -> None:
    """Remove ``path``; a file that is already gone (or cannot be removed) is not an error."""
    with contextlib.suppress(OSError):
        path.unlink()


_TMP_ROOT: list[str] = []


def tmp_dir() -> Path:
    """This process's temporary folder for exported traces (removed at exit)."""
    if not _TMP_ROOT:
        d = tempfile.mkdtemp(prefix="nbprof-torchprof-")
        _TMP_ROOT.append(d)
        atexit.register(shutil.rmtree, d, True)
    return Path(_TMP_ROOT[0])
