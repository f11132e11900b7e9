"""``NsysResult``: a loaded Nsight Systems profile with its summaries (what ``%nsys`` displays / returns).

Plain data: the trace, the ``nsys profile`` run, the ``nsys stats``-equivalent tables and the expert-rule
findings. Its text and HTML forms are ``nbprof.results.nsys_render`` (through ``nbprof.results.render``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["NsysResult"]


class NsysResult:
    """A loaded Nsight Systems profile with its summaries (what ``%nsys`` displays / returns with ``-o``).

    Attributes
    ----------
    trace : nbprof.Trace
    run : nbprof.capture.nsys.NsysRun or None
        The ``nsys profile`` run (None for ``%nsys load``).
    summaries : dict of DataFrame
        ``nbprof.analysis.nsys_stats.summaries(trace)``.
    findings : list of Finding
        ``nbprof.analysis.nsys_rules.nsys_findings(trace)``.
    """

    def __init__(self, trace, run=None) -> None:
        from ..analysis import nsys_rules, nsys_stats

        self.trace = trace
        self.run = run
        self.summaries = nsys_stats.summaries(trace)
        self.findings = nsys_rules.nsys_findings(trace)

    @property
    def steps(self) -> pd.DataFrame:
        """The NVTX step ranges (``nvtx_pushpop_trace`` rows whose range is a step), or an empty frame."""
        from ..sources.nsys import nsys_tables

        nv = nsys_tables(self.trace).get("nvtx")
        if nv is None:
            return pd.DataFrame()
        ev = self.trace.events
        if self.trace.meta.extra.get("steps_detected"):  # steps found from what repeats: no NVTX step range
            return pd.DataFrame()
        m = (ev["cat"].astype(str) == "nvtx") & (ev["step"] >= 0)
        return ev.loc[m, ["step", "name", "ts_ns", "dur_ns", "pid", "tid"]].reset_index(drop=True)

    def timeline(self, **kwargs: Any) -> Any:
        """The interactive timeline (the ``timeline`` view of ``nbprof.viz.registry``)."""
        from ..viz import registry

        return registry.get("timeline").live_builder()(self.trace, **kwargs)

    def to_html(self, max_rows: int = 15) -> str:
        """The summary as escaped HTML (tables + findings)."""
        from .render import renderer_for

        return renderer_for(self).html(self, max_rows=max_rows)

    def __repr__(self) -> str:
        from .render import render

        return render(self, "text")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .render import mimebundle

        return mimebundle(self)
