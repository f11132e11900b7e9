"""nbprof — a notebook-first performance workbench for AI training.

Public API::

    trace = nbprof.load("run.pt.trace.json.gz")   # Kineto JSON (more sources register themselves)
    %load_ext nbprof                                # %%torchprof and %nsys magics

torch, bokeh, ipywidgets and IPython are imported lazily: loading and analysing a
trace needs only numpy, pandas and msgspec.
"""

from __future__ import annotations

from .errors import (
    CaptureError,
    EmptyProfileError,
    MissingDependencyError,
    NbprofError,
    SchemaError,
    TraceFileNotFoundError,
    TraceFormatError,
)
from .profiling import profile, step
from .scale import load_ranks
from .sources import load
from .trace import LoadReport, Trace, TraceMeta

__version__ = "0.1.0"

__all__ = [
    "load_ranks",
    "load",
    "profile",
    "step",
    "Trace",
    "TraceMeta",
    "LoadReport",
    "NbprofError",
    "TraceFormatError",
    "TraceFileNotFoundError",
    "SchemaError",
    "EmptyProfileError",
    "CaptureError",
    "MissingDependencyError",
    "load_ipython_extension",
    "unload_ipython_extension",
]


def load_ipython_extension(ipython) -> None:
    """``%load_ext nbprof``: register nbprof's magics (imported only now)."""
    from .magics import register

    register(ipython)


def unload_ipython_extension(ipython) -> None:
    """``%unload_ext nbprof``."""
    from .magics import unregister

    unregister(ipython)
