"""Container mutators: rank archives (zip / tar) and saved traces (``.nbprof``).

Archives are built from the Kineto seeds (two or three rank members), then tampered with: size fields of
the zip headers and the tar header that lie, members that inflate far beyond their stored size (ratio),
names that leave the extraction folder (``../``, absolute), duplicate names, links (tar symlinks/hardlinks,
a zip entry marked as a symlink), a member that is a FIFO or a device, truncation and byte flips.

A name meant to escape ends in :data:`ESCAPE_MARK`; the worker looks for that name outside the case's
folder after the load (``WROTE-OUTSIDE``).

Saved traces are ``Trace.save`` files of the Kineto seeds (written by ``seeds.py``), tampered with as a
ZIP (entries duplicated, dropped, renamed, their bytes cut or flipped, a part replaced by one that
inflates) and in their header ``nbprof.json`` (the JSON structure mutator: type swaps per field,
duplicate keys, deep nesting).
"""

from __future__ import annotations

import io
import json
import random
import struct
import tarfile
import warnings
import zipfile

from . import mutate as M

ESCAPE_MARK = "nbprof_fuzz_escaped.json"

_ESCAPES = ["../" + ESCAPE_MARK, "../../" + ESCAPE_MARK, "/tmp/" + ESCAPE_MARK, "a/../../" + ESCAPE_MARK,
            "..\\..\\" + ESCAPE_MARK, "./././" + ESCAPE_MARK, "//" + ESCAPE_MARK]


def _zip(members: list[tuple[str, bytes]], deflate: bool) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), \
            zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as z:
        warnings.simplefilter("ignore")  # "Duplicate name": a duplicate entry is the mutation
        for name, data in members:
            zi = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
            z.writestr(zi, data)
    return buf.getvalue()


def _patch_zip_sizes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Overwrite the compressed or uncompressed size (local header and/or central directory) of one entry."""
    b = bytearray(data)
    local = [i for i in range(len(b) - 30) if b[i:i + 4] == b"PK\x03\x04"]
    central = [i for i in range(len(b) - 46) if b[i:i + 4] == b"PK\x01\x02"]
    val = rng.choice([0, 1, 7, 0xFFFFFFFF, 0x7FFFFFFF, rng.randrange(1, 1 << 24)])
    what = rng.choice(["compressed", "uncompressed"])
    where = rng.choice(["local", "central", "both"])
    n = 0
    if where in ("local", "both") and local:
        i = rng.choice(local)
        struct.pack_into("<I", b, i + (18 if what == "compressed" else 22), val)
        n += 1
    if where in ("central", "both") and central:
        i = rng.choice(central)
        struct.pack_into("<I", b, i + (20 if what == "compressed" else 24), val)
        n += 1
    return bytes(b), f"zip {what} size set to {val} in {where} header ({n} patched)"


def _patch_tar_size(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Overwrite the size field of one tar header (uncompressed tar only)."""
    b = bytearray(data)
    heads = [i for i in range(0, len(b) - 512, 512) if b[i + 257:i + 262] == b"ustar"]
    if not heads:
        return data, "tar size: no header found"
    i = rng.choice(heads)
    val = rng.choice([0, 1, 10**11 - 1, rng.randrange(1, 1 << 20)])
    field = f"{val:011o}".encode()[:11] + b"\0"
    b[i + 124:i + 136] = field
    chk = sum(b[i:i + 148]) + 8 * 32 + sum(b[i + 156:i + 512])
    b[i + 148:i + 156] = f"{chk:06o}\0 ".encode()
    return bytes(b), f"tar header size set to {val}"


def archive_case(rng: random.Random, seeds: list[tuple[str, bytes]]) -> tuple[bytes, str, str]:
    """A rank archive from ``seeds`` ((file name, bytes) of Kineto traces), tampered with once or twice:
    (archive bytes, file name ending in .zip/.tar/.tar.gz, description)."""
    k = rng.randint(2, 3)
    members = []
    for r in range(k):
        name, data = rng.choice(seeds)
        ext = ".json.gz" if data[:2] == b"\x1f\x8b" else ".json"
        members.append((f"run/rank{r}.pt.trace{ext}", data))
    kind = rng.choice(["zip", "zip", "tar", "tar.gz"])
    deflate = rng.random() < 0.5
    descs = []
    t = rng.randrange(12)
    tar_links: list[tarfile.TarInfo] = []
    if t == 0:  # ratio: a member that inflates far beyond its stored size
        big = b"\0" * rng.choice([1 << 20, 16 << 20, 64 << 20]) if rng.random() < 0.5 else b" " * (32 << 20)
        members.append(("run/rank9.pt.trace.json", big))
        deflate = True
        kind = rng.choice(["zip", "tar.gz"])
        descs.append(f"member of {len(big)} bytes of {big[:1]!r} (compresses ~1000:1)")
    elif t == 1:  # names that leave the extraction folder
        i = rng.randrange(len(members))
        members[i] = (rng.choice(_ESCAPES), members[i][1])
        descs.append(f"member {i} named {members[i][0]!r}")
    elif t == 2:  # duplicate names
        members.append((members[0][0], rng.choice(seeds)[1]))
        descs.append(f"member name {members[0][0]!r} twice")
    elif t == 3 and kind.startswith("tar"):  # links
        ti = tarfile.TarInfo(rng.choice(["run/rank7.pt.trace.json", "run/" + ESCAPE_MARK]))
        ti.type = rng.choice([tarfile.SYMTYPE, tarfile.LNKTYPE])
        ti.linkname = rng.choice(["/etc/passwd", "../../" + ESCAPE_MARK, members[0][0], "/dev/zero", "run"])
        tar_links.append(ti)
        descs.append(f"tar {'symlink' if ti.type == tarfile.SYMTYPE else 'hardlink'} {ti.name!r} -> {ti.linkname!r}")
    elif t == 4 and kind.startswith("tar"):  # a FIFO / device member named like a trace
        ti = tarfile.TarInfo("run/rank8.pt.trace.json")
        ti.type = rng.choice([tarfile.FIFOTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.DIRTYPE])
        tar_links.append(ti)
        descs.append(f"tar member of type {ti.type!r} named like a trace")
    elif t == 5:  # an empty / directory-like / odd name
        members.append((rng.choice(["", "/", "run/", ".json", "run/.pt.trace.json", "\u00e9\U0001f600.json"]),
                        rng.choice(seeds)[1]))
        descs.append(f"member named {members[-1][0]!r}")
    elif t == 6:  # a member whose content is another archive
        members.append(("run/rank5.pt.trace.json", _zip(members[:1], True)))
        descs.append("member holding a zip")
    if kind == "zip":
        data = _zip(members, deflate)
        if t == 3:
            data = _zip_symlink(data, members[0][0])
            descs.append("first zip entry marked as a symlink (external attributes)")
    else:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz" if kind == "tar.gz" else "w") as tf:
            for name, d in members:
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime = len(d), 1700000000
                tf.addfile(ti, io.BytesIO(d))
            for ti in tar_links:
                ti.mtime = 1700000000
                tf.addfile(ti)
        data = buf.getvalue()
    # then the bytes of the archive itself
    u = rng.randrange(8)
    if u == 0 and kind == "zip":
        data, d = _patch_zip_sizes(rng, data)
        descs.append(d)
    elif u == 1 and kind == "tar":
        data, d = _patch_tar_size(rng, data)
        descs.append(d)
    elif u == 2:
        data, d = M.byte_mutation(rng, data)
        descs.append(f"archive bytes: {d}")
    elif u == 3:
        cut = rng.randrange(len(data))
        data = data[:cut]
        descs.append(f"archive truncated at {cut}/{len(data)}")
    ext = {"zip": ".zip", "tar": ".tar", "tar.gz": ".tar.gz"}[kind]
    return data, "ranks" + ext, f"{kind} of {len(members)} members; " + "; ".join(descs or ["untampered"])


def _zip_symlink(data: bytes, name: str) -> bytes:
    """Mark the central-directory entry of ``name`` as a Unix symlink (external attributes 0o120777 << 16)."""
    b = bytearray(data)
    i = b.find(b"PK\x01\x02")
    while i >= 0:
        n = struct.unpack_from("<H", b, i + 28)[0]
        if bytes(b[i + 46:i + 46 + n]) == name.encode():
            struct.pack_into("<H", b, i + 4, (3 << 8) | 20)  # made by Unix
            struct.pack_into("<I", b, i + 38, (0o120777 << 16))
            break
        i = b.find(b"PK\x01\x02", i + 4)
    return bytes(b)


def saved_case(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A ``.nbprof`` file (ZIP: ``nbprof.json`` + Parquet parts), tampered with: (bytes, description)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            entries = [(i.filename, z.read(i)) for i in z.infolist()]
    except (zipfile.BadZipFile, OSError, ValueError):
        return M.byte_mutation(rng, data)
    t = rng.randrange(10)
    desc = ""
    if t <= 2:  # the header: JSON structure mutations (type swaps per field, duplicate keys, nesting)
        j = next((k for k, (n, _) in enumerate(entries) if n == "nbprof.json"), None)
        if j is not None:
            try:
                head = json.loads(entries[j][1])
                new, d = M.json_structure_mutation(rng, head, events_key=None)
            except (ValueError, RecursionError):
                new, d = M.byte_mutation(rng, entries[j][1])
            entries[j] = ("nbprof.json", new)
            desc = f"header: {d}"
    elif t == 3:  # a duplicate entry
        k = rng.randrange(len(entries))
        entries.append(entries[k] if rng.random() < 0.5 else (entries[k][0], rng.choice(entries)[1]))
        desc = f"entry {entries[k][0]!r} twice"
    elif t == 4:  # an entry dropped or renamed
        k = rng.randrange(len(entries))
        n, b = entries.pop(k)
        if rng.random() < 0.5:
            entries.append((rng.choice(["../" + n, "/" + n, n.upper(), n + "\0", "tables/../" + n]), b))
            desc = f"entry {n!r} renamed to {entries[-1][0]!r}"
        else:
            desc = f"entry {n!r} dropped"
    elif t == 5:  # a part's bytes mutated
        k = rng.randrange(len(entries))
        b, d = M.byte_mutation(rng, entries[k][1])
        entries[k] = (entries[k][0], b)
        desc = f"entry {entries[k][0]!r}: {d}"
    elif t == 6:  # a part swapped for another
        a, c = rng.randrange(len(entries)), rng.randrange(len(entries))
        entries[a] = (entries[a][0], entries[c][1])
        desc = f"entry {entries[a][0]!r} holds the bytes of {entries[c][0]!r}"
    elif t == 7:  # a part that inflates (written deflated: the format stores parts, so it is crafted)
        k = rng.randrange(len(entries))
        entries[k] = (entries[k][0], entries[k][1] + b"\0" * rng.choice([1 << 20, 64 << 20]))
        desc = f"entry {entries[k][0]!r} padded with zeros, deflated"
        return _zip(entries, True), desc
    else:  # the ZIP's bytes
        out, d = M.byte_mutation(rng, _zip(entries, False))
        if rng.random() < 0.3:
            out, d2 = _patch_zip_sizes(rng, out)
            d = f"{d}; {d2}"
        return out, f"file bytes: {d}"
    return _zip(entries, rng.random() < 0.2), desc

