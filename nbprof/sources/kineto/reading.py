"""Reading trace files: plain or gzip, into bytes or a mutable buffer (``MAP_POPULATE`` for large files).

Nothing is ever written next to the input.
"""

from __future__ import annotations

import gzip
import mmap
import os
import re
import zlib

from ...errors import TraceFormatError
from ...trace.model import LoadReport


def read_bytes(path: str | os.PathLike[str], report: LoadReport | None = None) -> bytes:
    """Read a file, gunzipping ``.gz`` (or gzip magic) content.

    A truncated gzip stream (job killed while writing) yields what could be
    decompressed, noted in ``report`` (kind ``gzip_truncated``).

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    TraceFormatError
        When the gzip stream is corrupt before any data could be read.
    """
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        d = zlib.decompressobj(wbits=31)
        try:
            out = d.decompress(raw)
        except zlib.error:
            out = b""
        if not out:
            raise TraceFormatError(str(path), 0, f"corrupt gzip stream: {exc}") from exc
        if report is not None:
            report.add(
                "gzip_truncated",
                "repaired",
                1,
                f"gzip stream ends early ({exc}): the {len(raw)}-byte file decompressed to the first "
                f"{len(out)} bytes of the trace",
                offset=len(out),
            )
        return out


_POPULATE_MIN_BYTES = 64 << 20


def _read_buffer(path: str, report: LoadReport) -> bytearray | mmap.mmap:
    """``read_bytes`` into a mutable buffer (read in place for plain files; one copy after gunzip).

    A plain file of ``_POPULATE_MIN_BYTES`` or more goes into anonymous memory mapped with
    ``MAP_POPULATE`` (Linux): the kernel provides all its pages in one call instead of one page
    fault per 4 KiB as the read first touches them (580 MB: 0.27 s instead of 0.40 s here). The
    file itself is never mapped, so it may change on disk while it is being loaded.
    """
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            f.seek(0)
            size = os.fstat(f.fileno()).st_size
            buf: bytearray | mmap.mmap
            if size >= _POPULATE_MIN_BYTES and hasattr(mmap, "MAP_POPULATE"):
                buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
            else:
                buf = bytearray(size)
            n = f.readinto(buf)
            if n < size:  # the file shrank while being read
                return bytearray(memoryview(buf)[:n])
            return buf
    return bytearray(read_bytes(path, report))


_WS = re.compile(rb"\s*")


def _first_char(data: bytes | bytearray | memoryview | mmap.mmap) -> bytes:
    """The first non-whitespace byte (b"" if none), without copying the data."""
    m = _WS.match(data)  # ``\s*`` always matches
    i = m.end() if m is not None else 0
    return bytes(data[i : i + 1])
