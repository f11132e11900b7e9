"""Façade compositions that cross layers: "run a tool, then read what it wrote".

``sources`` only read files and ``capture`` only produces them; the few entry points that need both
(an ``.nsys-rep`` report is read by exporting it to SQLite with nsys first) live here, so neither
layer imports the other. ``nbprof.load`` reaches these through the loader registry.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .trace.model import Trace

if TYPE_CHECKING:  # pragma: no cover
    from .capture.nsys import NsysRun

__all__ = ["load_nsys_report", "load_nsys_run"]


def load_nsys_report(path: str | os.PathLike[str], *, strict: bool = False, nsys: str | None = None) -> Trace:
    """Export an Nsight Systems report (``.nsys-rep``/``.qdrep``) to SQLite, then load that export.

    The export goes where :func:`nbprof.capture.nsys.export_sqlite` puts it: a sibling
    ``<report>.sqlite`` newer than the report is reused as is (read only), otherwise nsys writes it into
    the nbprof cache (``~/.cache/nbprof/exports/<hash>/``, or ``$NBPROF_EXPORT_CACHE``) -- never next to
    the report. ``meta.source_path`` and ``report.path`` name the report; ``meta.extra["sqlite_path"]``
    the export that was read.

    Parameters
    ----------
    path : str or PathLike
        The report.
    strict : bool, default False
        Passed to :func:`nbprof.sources.nsys.load_nsys`.
    nsys : str, optional
        ``nsys`` binary for the export (default: ``$NBPROF_NSYS``, PATH, then the nbprof cache).

    Returns
    -------
    Trace

    Raises
    ------
    FileNotFoundError
        The report does not exist.
    nbprof.errors.CaptureError
        nsys missing, the report is newer than the installed nsys, or the export failed.
    nbprof.errors.TraceFormatError
        The export cannot be read.
    """
    from .capture.nsys import export_sqlite
    from .sources.nsys import load_nsys

    rep = os.fspath(path)
    if not os.path.isfile(rep):
        raise FileNotFoundError(f"no such Nsight Systems file: {rep!r}")
    trace = load_nsys(export_sqlite(rep, nsys=nsys), strict=strict)
    trace.meta.source_path = rep
    trace.report.path = rep
    return trace


def load_nsys_run(run: NsysRun, *, strict: bool = False) -> Trace:
    """The ``Trace`` of an :class:`nbprof.capture.nsys.NsysRun` (from its SQLite export).

    Raises
    ------
    nbprof.errors.CaptureError
        When the run produced no SQLite export (the message carries the end of nsys's output).
    """
    from .errors import CaptureError
    from .sources.nsys import load_nsys

    if not run.sqlite_path:
        raise CaptureError(f"nsys produced no SQLite export; output:\n{run.output[-2000:]}")
    return load_nsys(run.sqlite_path, strict=strict)
