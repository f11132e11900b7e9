"""Record CUDA caching-allocator history around user code and dump a snapshot pickle.

``torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks=..., max_entries=N)``
turns recording on; ``torch.cuda.memory._snapshot()`` returns the plain dict that
``_dump_snapshot`` would pickle. nbprof pickles it itself with **protocol 4**, which torch's
``MemoryViz.js`` can read (it fails on protocol 5: pytorch #183842), and never overwrites a file.
Snapshots need CUDA: on other machines ``record`` yields ``None`` after a one-line note, and
``profile_memory=True`` in torch.profiler is the path that works everywhere.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..atomic import atomic_open
from ._files import unique_path

__all__ = ["record", "SnapshotCapture", "cuda_available"]


def cuda_available() -> bool:
    """True when torch is importable and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@dataclass
class SnapshotCapture:
    """Where a recorded snapshot went: ``path`` (None when nothing was recorded) and ``note``."""

    path: Path | None
    note: str = ""


@contextlib.contextmanager
def record(
    path: str | os.PathLike[str],
    *,
    max_entries: int = 100_000,
    stacks: str = "python",
    force: bool = False,
    quiet: bool = False,
) -> Iterator[SnapshotCapture]:
    """Record allocator history inside the ``with`` block and write a snapshot pickle at its end.

    Parameters
    ----------
    path : path-like
        Wanted file; an existing file is kept and a timestamped name is used instead (unless ``force``).
    max_entries : int, default 100000
        Ring-buffer size of the allocator history (older entries are dropped by torch).
    stacks : {"python", "all"}, default "python"
        ``"all"`` adds C++ frames (much slower to record and to dump: torchtitan #3628).
    force : bool, default False
        Overwrite ``path`` if it exists.
    quiet : bool, default False
        Do not print the CPU-only note.

    Yields
    ------
    SnapshotCapture
        ``.path`` is set after the block (also when the block raises: the partial snapshot is kept and
        the exception propagates).
    """
    cap = SnapshotCapture(None)
    if not cuda_available():
        cap.note = ("memory snapshot skipped: allocator snapshots need a CUDA device; "
                    "use profile_memory (--profile-memory) for the memory timeline that works everywhere")
        if not quiet:
            print(cap.note)
        yield cap
        return
    import torch

    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks=stacks, max_entries=max_entries)
    try:
        yield cap
    finally:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        out = unique_path(path, tag=time.strftime("%Y%m%d-%H%M%S"), force=force)
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(out, "wb") as f:  # nbprof.atomic: private temp file, renamed into place
            pickle.dump(snap, f, protocol=4)
        cap.path = out
