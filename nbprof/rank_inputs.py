"""Inputs of :func:`nbprof.scale.load_ranks`: a folder, a glob or a list of paths expanded into trace
files, and tar/zip archives of per-rank traces (members listed and streamed out, never unpacked by name)."""

from __future__ import annotations

import glob as _glob
import os
from collections.abc import Iterable
from typing import Any

_TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz", ".json", ".json.gz")
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz", ".zip")


def _is_archive(spec: Any) -> bool:
    if not isinstance(spec, (str, os.PathLike)):
        return False
    s = os.fspath(spec)
    return os.path.isfile(s) and s.lower().endswith(_ARCHIVE_SUFFIXES)


def _archive_members(archive: str) -> list[str]:
    """Trace members (``*.json[.gz]``, regular files) of a tar or zip archive, in archive order."""
    import tarfile
    import zipfile

    if archive.lower().endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            return [i.filename for i in z.infolist() if not i.is_dir() and i.filename.endswith(_TRACE_SUFFIXES)]
    with tarfile.open(archive) as t:
        return [m.name for m in t if m.isfile() and m.name.endswith(_TRACE_SUFFIXES)]


def _extract_members(archive: str, members: list[str], into: str) -> list[str]:
    """Stream ``members`` of ``archive`` into ``into`` (a private temporary folder), one file each.

    Member names never become paths: member i is written as ``into/i/<basename>`` (no traversal out of
    ``into``; the base name keeps a ``rank3`` in the name for the rank fallback). Returns the paths."""
    import shutil
    import tarfile
    import zipfile

    out = []
    wanted = {m: i for i, m in enumerate(members)}
    dests = {m: os.path.join(into, str(i), os.path.basename(m)) for m, i in wanted.items()}
    for d in dests.values():
        os.makedirs(os.path.dirname(d), exist_ok=True)
    if archive.lower().endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for m in members:
                with z.open(m) as src, open(dests[m], "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
                out.append(dests[m])
        return out
    with tarfile.open(archive) as t:  # one pass, members streamed (gzip is sequential)
        for ti in t:
            if ti.name in wanted and ti.isfile():
                fobj = t.extractfile(ti)
                if fobj is None:
                    continue
                with fobj, open(dests[ti.name], "wb") as dst:
                    shutil.copyfileobj(fobj, dst, 1 << 22)
    return [dests[m] for m in members if os.path.exists(dests[m])]


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
