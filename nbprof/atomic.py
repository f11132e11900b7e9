"""One way every nbprof writer puts a file or a folder in place: atomically, never through a planted link.

``atomic_open(path)`` yields a private temporary file in the target folder (``tempfile.mkstemp``:
``O_CREAT | O_EXCL``, a random name, so an existing file or a symlink planted at a predictable name is
never opened), then renames it onto ``path`` (``os.replace``) when the block ends without an exception;
on an exception the temporary file is removed and ``path`` is untouched (no partial file). With
``overwrite=False`` the final step is a hard link that fails if ``path`` exists (``FileExistsError``),
so a file that appears meanwhile is not replaced either. ``atomic_path(path)`` gives the temporary file's name instead, for writers
that take a name. ``atomic_dir(final)`` does the same for a
folder (``tempfile.mkdtemp`` next to it, renamed into place when the block succeeds; when another
writer put ``final`` first, that one is kept and ours removed). Leaf module: imports nothing of nbprof.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_open", "atomic_write", "atomic_path", "atomic_dir"]


def _umask() -> int:
    """The process umask, read without changing it (``/proc``; 0o022 where that is not available)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "wb", *, overwrite: bool = True,
                **kwargs: Any) -> Iterator[IO[Any]]:
    """A file object to write ``path``'s new content into; ``path`` appears (whole) when the block ends.

    ``mode``: ``"wb"`` or ``"w"`` (``kwargs`` go to ``os.fdopen``: ``encoding``, ``newline``). The file
    gets the mode a plain ``open()`` would give (``0o666 & ~umask``), not ``mkstemp``'s 0600.

    Raises
    ------
    FileExistsError
        ``overwrite=False`` and ``path`` exists (checked before writing and again at the final link).
    OSError
        The folder cannot be written (nothing is left behind).
    """
    p = Path(path)
    if not overwrite and os.path.lexists(p):
        raise FileExistsError(f"{p} exists; pass overwrite=True (CLI: --force) to replace it")
    fd, tmp = tempfile.mkstemp(prefix="." + p.name + ".", suffix=".tmp", dir=str(p.parent) or ".")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
        if overwrite:
            os.replace(tmp, p)
        else:
            try:
                os.link(tmp, p)
            except FileExistsError:
                raise FileExistsError(f"{p} exists; pass overwrite=True (CLI: --force) to replace it") from None
            except OSError:  # no hard links on this file system: rename, after the check above
                os.replace(tmp, p)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """The name of a private new file in ``path``'s folder, for a writer that takes a file name (e.g.
    ``torch.profiler.profile.export_chrome_trace``); renamed onto ``path`` when the block succeeds,
    removed otherwise (:func:`atomic_open`'s guarantees)."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix="." + p.name + ".", suffix=".tmp", dir=str(p.parent) or ".")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        os.close(fd)
        yield tmp
        os.replace(tmp, p)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def atomic_write(path: str | os.PathLike[str], data: bytes | str, *, overwrite: bool = True,
                 encoding: str = "utf-8") -> None:
    """Write ``data`` (bytes, or text in ``encoding``) to ``path`` with :func:`atomic_open`."""
    if isinstance(data, str):
        with atomic_open(path, "w", overwrite=overwrite, encoding=encoding, newline="") as f:
            f.write(data)
    else:
        with atomic_open(path, "wb", overwrite=overwrite) as fb:
            fb.write(data)


@contextmanager
def atomic_dir(final: str | os.PathLike[str]) -> Iterator[str]:
    """A private new folder (``mkdtemp`` next to ``final``) to fill; renamed to ``final`` when the block
    ends without an exception. When ``final`` already exists (another writer finished first), it is
    kept and the new folder removed: a finished folder is never replaced or deleted here."""
    f = os.fspath(final)
    parent = os.path.dirname(f) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(f) + ".", suffix=".tmp", dir=parent)
    try:
        yield tmp
        try:
            os.rename(tmp, f)  # fails when ``final`` exists and is not empty: the other writer's stays
        except OSError:
            if not os.path.isdir(f):
                raise
    finally:
        if os.path.lexists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
