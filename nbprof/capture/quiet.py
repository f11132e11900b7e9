"""The profiler's own stderr noise, hidden; everything else kept (one filter for capture and ``%%torchprof -q``).

Used twice: around nbprof's own profiler calls (start/stop: always, fd-2 lines only) and, under
``%%torchprof -q``, around the whole profiled cell (fd-2 lines and the profiler's Python warnings). What it hides:

- lines the native profiler writes to the process's file descriptor 2 (not through Python's ``sys.stderr``):
  torch's ``USDT: … SyncActivityProfilerHandler.cpp:52] profiler_start`` / ``profiler_stop`` probes, Kineto's
  ``STAGE:`` progress lines, and glog-style ``[W1201 12:00:00.000 123 …/CUDAAllocatorConfig.h:28] Warning: …``
  lines whose source file is Kineto's, CUPTI's, the profiler's or the CUDA caching allocator's (:data:`NOISE`);
- Python warnings raised from ``torch.profiler`` / ``torch.autograd.profiler``.

Everything else written to fd 2 during the cell (the cell's own ``print(..., file=sys.stderr)`` in a terminal
IPython, other libraries' messages) is written back to ``sys.stderr`` when the cell ends, in order; the cell's
exceptions propagate unchanged (fd 2 is restored first). In Jupyter, ``sys.stderr`` is the kernel's stream, not
fd 2, so the cell's own stderr prints are not even captured.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator

__all__ = ["NOISE", "quiet_profiler", "is_noise"]

#: profiler / allocator lines on fd 2 (torch 2.x USDT probes, Kineto stages, glog warnings of those sources)
NOISE = re.compile(
    r"^(?:USDT:|STAGE:"
    r"|\[[WIE]\d{4} [\d:.]+\s+\d+\s+[^\]]*(?:kineto|cupti|profiler|allocator|roctracer)[^\]]*\])",
    re.IGNORECASE,
)

_PROFILER_MODULES = r"torch\.(?:autograd\.)?profiler(?:\..*)?$"


def is_noise(line: str) -> bool:
    """True for a line :data:`NOISE` hides.

    >>> is_noise("USDT:2026-12-01 18:04:18 8769:8769 SyncActivityProfilerHandler.cpp:52] profiler_start")
    True
    >>> is_noise("[W1201 12:00:00.123456 42 c10/cuda/CUDAAllocatorConfig.h:28] Warning: expandable_segments")
    True
    >>> is_noise("user says")
    False
    """
    return bool(NOISE.match(line))


@contextlib.contextmanager
def quiet_profiler(enabled: bool = True, *, python_warnings: bool = True) -> Iterator[None]:
    """Capture fd 2 for the block, drop the :data:`NOISE` lines, write the rest to ``sys.stderr`` afterwards.

    Does nothing when ``enabled`` is False or fd 2 cannot be duplicated (no such descriptor). With
    ``python_warnings``, warnings raised from ``torch.profiler`` / ``torch.autograd.profiler`` are ignored too.
    Exceptions of the block propagate after fd 2 is restored and the kept lines are written.
    """
    if not enabled:
        yield
        return
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with tempfile.TemporaryFile() as buf, warnings.catch_warnings():
        if python_warnings:
            warnings.filterwarnings("ignore", module=_PROFILER_MODULES)
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(buf.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            buf.seek(0)
            text = buf.read().decode("utf-8", errors="replace")
            kept = [ln for ln in text.splitlines(keepends=True) if not is_noise(ln)]
            if kept:
                sys.stderr.write("".join(kept))
                with contextlib.suppress(Exception):
                    sys.stderr.flush()
