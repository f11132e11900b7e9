"""Inputs of :func:`nbprof.scale.load_ranks`: a folder, a glob or a list of paths expanded into trace
files, and tar/zip archives of per-rank traces (members listed and streamed out, never unpacked by name)."""

from __future__ import annotations

import glob as _glob
import os
from collections.abc import Iterable
from typing import Any

from .sources import FORMATS

#: the Kineto reader's suffixes (the per-rank traces a job folder or archive holds)
_TRACE_SUFFIXES: tuple[str, ...] = FORMATS.entry("kineto").info["suffixes"]
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz", ".zip")


def _is_archive(spec: Any) -> bool:
    if not isinstance(spec, (str, os.PathLike)):
        return False
    s = os.fspath(spec)
    return os.path.isfile(s) and s.lower().endswith(_ARCHIVE_SUFFIXES)


#: what reading a damaged tar/zip raises (zipfile, tarfile, gzip/bz2/lzma streams, a lying size field)
def _archive_errors() -> tuple[type[BaseException], ...]:
    import lzma
    import tarfile
    import zipfile
    import zlib

    return (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError,
            OSError, ValueError, NotImplementedError, IndexError, RuntimeError)


def _archive_error(archive: str, exc: BaseException, member: str | None = None) -> Any:
    from .errors import TraceFormatError

    what = f"member {member!r} of the archive" if member is not None else "the archive"
    return TraceFormatError(archive, None, f"cannot read {what}: {type(exc).__name__}: {exc}")


def _zip_traces(z: Any) -> list[Any]:
    # a name that is empty or ends in "/" is no file (zipfile's is_dir() fails on an empty name)
    return [i for i in z.infolist() if i.filename and not i.filename.endswith("/")
            and i.filename.endswith(_TRACE_SUFFIXES)]


def _archive_members(archive: str) -> list[str]:
    """Names of the trace members (``*.json[.gz]``, regular files) of a tar or zip archive, in archive
    order; a name written twice is listed twice (members are told apart by their position here).

    Raises ``TraceFormatError`` (naming the archive and the reason) when the archive cannot be listed."""
    import tarfile
    import zipfile

    try:
        if archive.lower().endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                return [i.filename for i in _zip_traces(z)]
        with tarfile.open(archive) as t:
            return [m.name for m in t if m.isfile() and m.name.endswith(_TRACE_SUFFIXES)]
    except FileNotFoundError:
        raise
    except _archive_errors() as exc:
        raise _archive_error(archive, exc) from exc


def _extract_members(archive: str, picks: list[int], into: str,
                     errors: dict[int, BaseException] | None = None) -> list[str]:
    """Stream the trace members at positions ``picks`` of ``_archive_members(archive)`` into ``into`` (a
    private temporary folder), one file each; returns their paths, in the order of ``picks``.

    Member names never become paths: member k is written as ``into/k/<basename>`` (no traversal out of
    ``into``; the base name keeps a ``rank3`` in the name for the rank fallback). Two members of one
    name are two files. A member that cannot be read (bad CRC, a lying size, a stream cut short):
    with ``errors``, recorded there (position -> ``TraceFormatError``) and left out of the result (in a
    tar stream the members after it too); without, raised as ``TraceFormatError``."""
    import shutil
    import tarfile
    import zipfile

    dests: dict[int, str] = {}

    def dest(k: int, name: str) -> str:
        d = os.path.join(into, str(k), os.path.basename(name) or "trace.json")
        os.makedirs(os.path.dirname(d), exist_ok=True)
        dests[k] = d
        return d

    def failed(k: int, name: str | None, exc: BaseException) -> None:
        err = _archive_error(archive, exc, name)
        if errors is None:
            raise err from exc
        errors[k] = err
        dests.pop(k, None)

    wanted = set(picks)
    if archive.lower().endswith(".zip"):
        try:
            z = zipfile.ZipFile(archive)
        except _archive_errors() as exc:
            raise _archive_error(archive, exc) from exc
        with z:
            infos = _zip_traces(z)
            for k in picks:
                try:
                    with z.open(infos[k]) as src, open(dest(k, infos[k].filename), "xb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 22)
                except _archive_errors() as exc:
                    failed(k, infos[k].filename if k < len(infos) else None, exc)
        return [dests[k] for k in picks if k in dests]
    k = -1
    name = None
    try:
        with tarfile.open(archive) as t:  # one pass, members streamed (gzip is sequential)
            for ti in t:
                if not (ti.isfile() and ti.name.endswith(_TRACE_SUFFIXES)):
                    continue
                k += 1
                if k not in wanted:
                    continue
                name = ti.name
                fobj = t.extractfile(ti)
                if fobj is None:
                    continue
                with fobj, open(dest(k, ti.name), "xb") as dst:
                    shutil.copyfileobj(fobj, dst, 1 << 22)
    except _archive_errors() as exc:
        if k < 0 or k not in wanted:
            raise _archive_error(archive, exc) from exc
        failed(k, name, exc)
        for j in picks:  # the stream ends here: the members after it were never reached
            if j > k and j not in dests and errors is not None:
                errors[j] = _archive_error(archive, exc, f"member {j} (after the damage)")
    return [dests[k] for k in picks if k in dests]


def _expand(spec: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[str]:
    if isinstance(spec, (str, os.PathLike)):
        s = os.fspath(spec)
        if os.path.isdir(s):
            out = []
            for root, _dirs, files in os.walk(s):
                out += [os.path.join(root, f) for f in files if f.endswith(_TRACE_SUFFIXES)]
            return sorted(out)
        if any(ch in s for ch in "*?["):
            return sorted(_glob.glob(s, recursive=True))
        return [s]
    return [os.fspath(p) for p in spec]
