"""Python frames (``python_function`` events of a ``with_stack=True`` Kineto trace): the user's code line.

Kineto names a frame ``file.py(LINE): function`` (``torch/nn/modules/module.py(1501): _call_impl``), a C
function ``<built-in method item of Tensor object at 0x...>`` and a module ``nn.Module: Linear_0``
(torch.profiler's ``python_tracer``). A *user* frame is a ``file(LINE): function`` frame outside the
installed packages (``site-packages``, ``dist-packages``, ``torch/``, ``<frozen ...>``, the standard library's
``threading.py`` / ``runpy.py`` / ``contextlib.py``) and outside nbprof's own capture wrappers (``nbprof/capture/``:
the step watch's counting wrappers around ``Tensor.item`` or ``torch.autograd.backward``).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace.model import Trace
from . import _intervals as iv

__all__ = ["PYTHON_CATEGORY", "WAIT_FRAME_RE", "is_frame", "location", "is_user_frame", "enclosing_user_frame",
           "coverage", "top_frame"]

PYTHON_CATEGORY = "python_function"
_LOC = re.compile(r"^(?P<file>[^()<>]+?\.py)\((?P<line>\d+)\): (?P<func>.+)$")
#: C frames in which the thread waits off the CPU (Kineto's names of CPython built-ins): ``time.sleep``,
#: ``select``/``poll``, socket receives, file reads. Their time uses no core (a read, a remote fetch, a sleep).
WAIT_FRAME_RE = re.compile(r"^<built-in (?:function|method) (?:sleep|select|poll|epoll|recv|recv_into|recvfrom|"
                           r"readinto|read|pread)\b|^<method '(?:read|readinto|recv|recv_into|poll)' of ")
_LIB = re.compile(r"(^|/)(site-packages|dist-packages|torch|nbprof/capture|lib/python3[.\d]*)/|^<frozen|^(threading|runpy|contextlib|"
                  r"selectors|socket|queue|multiprocessing|concurrent|asyncio)\b")


def is_frame(trace: Trace) -> np.ndarray:
    """Bool mask of ``trace.events`` rows that are Python frames."""
    return np.asarray(trace.events["cat"] == PYTHON_CATEGORY, dtype=bool)


def location(name: str) -> tuple[str, int, str] | None:
    """``(file, line, function)`` of a frame name ``file.py(LINE): function``; None for other names."""
    m = _LOC.match(name)
    return (m["file"], int(m["line"]), m["func"]) if m else None


def is_user_frame(name: str) -> bool:
    """A ``file.py(LINE): function`` frame of the user's code (not an installed package's)."""
    loc = location(name)
    return loc is not None and not _LIB.search(loc[0])


def enclosing_user_frame(trace: Trace, row: int) -> str:
    """The innermost user frame (its name, ``file.py(LINE): function``) enclosing event ``row`` (positional) on its
    thread; ``""`` without one (no stacks recorded, or only library frames)."""
    ev = trace.events
    m = is_frame(trace)
    if not m.any():
        return ""
    pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    t = ts[row]
    cand = np.flatnonzero(m & (pid == pid[row]) & (tid == tid[row]) & (ts <= t) & (end > t))
    names = ev["name"].astype(object).to_numpy()
    user = [i for i in cand if is_user_frame(str(names[i]))]
    if not user:
        return ""
    return str(names[max(user, key=lambda i: (ts[i], -end[i]))])


def coverage(trace: Trace) -> iv.Intervals:
    """The union of the Python frames' time (int64 ns intervals)."""
    m = is_frame(trace)
    ev = trace.events
    ts = ev["ts_ns"].to_numpy(np.int64)[m]
    return iv.merge(ts, ts + ev["dur_ns"].to_numpy(np.int64)[m])


def top_frame(trace: Trace, within: iv.Intervals) -> tuple[str, int]:
    """The frame that best names the time ``within``: among frames covering at least half of the most any frame
    covers of it, the most specific (shortest mean duration), preferring user frames; ``(name, covered ns)``,
    ``("", 0)`` when no frame covers it."""
    m = is_frame(trace)
    if not m.any() or within[0].size == 0:
        return "", 0
    ev = trace.events
    rows = np.flatnonzero(m)
    ts = ev["ts_ns"].to_numpy(np.int64)[rows]
    end = ts + ev["dur_ns"].to_numpy(np.int64)[rows]
    names = ev["name"].astype(object).to_numpy()[rows]
    cov = iv.overlap_with_windows(within, ts, end)
    keep = cov > 0
    if not keep.any():
        return "", 0
    g = pd.DataFrame({"n": names[keep], "c": cov[keep], "d": (end - ts)[keep]}).groupby("n", sort=True).agg(
        c=("c", "sum"), d=("d", "mean"))
    best = int(g["c"].max())
    cands = [(str(n), (int(r.c), float(r.d))) for n, r in g[g["c"] >= 0.5 * best].iterrows()]
    user = [x for x in cands if is_user_frame(x[0])]
    pool = user or cands
    name, v = min(pool, key=lambda x: (x[1][1], x[0]))
    return name, v[0]
