"""Distributed view: per-rank wait vs transfer in collectives, the straggler, bus bandwidth against the link.

Data: :func:`nbprof.analysis.distributed.wait_transfer` / ``wait_transfer_summary`` / ``stragglers`` /
``busbw_vs_link`` (int64 ns, bytes/s); the figures plot milliseconds and GB/s (1e9 bytes/s, nccl-tests'
unit). Takes one trace per rank (a list, a :class:`~nbprof.scale.MultiRankTrace`), a single
``Trace`` (bandwidth only: waiting needs at least two ranks), or a job dataset opened with ``nbprof.open_job``:
then every analysis runs on the job's per-rank reductions and no full trace is read.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..analysis import distributed as D
from ..units import fmt_ns, fmt_pct_text
from ..units import fmt_rate as _gbps
from ._base import NbprofView
from ._escape import escape_html
from .theme import apply_theme, on_render, style_widgets

__all__ = ["distributed_tables", "distributed_view", "static_view", "straggler_text"]


def _traces(obj: Any) -> list:
    from ..trace.model import Trace

    if isinstance(obj, Trace):
        return [obj]
    if hasattr(obj, "traces") and callable(obj.traces):  # MultiRankTrace
        return list(obj.traces())
    return list(obj)


def distributed_tables(traces: Any, *, link: str | None = None, peak_bytes_per_s: float | None = None) -> dict:
    """The frames the view shows: ``breakdown`` (:func:`~nbprof.analysis.distributed.step_breakdown`: per rank
    and step compute / overlapped / exposed communication / idle), ``collectives``
    (:func:`~nbprof.analysis.distributed.collective_summary`), ``skew`` (:func:`~nbprof.analysis.distributed.skew`,
    several ranks only), ``wait_transfer``, ``summary`` (per rank and collective), ``stragglers``, ``bandwidth``
    (:func:`~nbprof.analysis.distributed.busbw_vs_link`), ``host_calls`` (host-side communication calls per rank:
    ``rank, name, calls, total_ns``), ``world_size`` and ``ranks``.

    ``traces``: one trace per rank (a list, a ``MultiRankTrace``), one ``Trace``, or an ``nbprof.Job`` (the
    analyses take its reductions, ``job.reductions()``: equal frames, no full trace read; ``host_calls`` then comes
    from the dataset's ``events`` table, read only when the job executed no collective).
    """
    from ..job import Job

    is_job = isinstance(traces, Job)
    if is_job:
        src: Any = traces.reductions()
        ranks = [int(r) for r in traces.ranks]
        ws = [int(w) if int(w) > 0 else 1 for w in src["rank_info"]["world_size"]]  # -1: unknown, as meta's None
    else:
        src = ts = _traces(traces)
        ranks = [int(t.meta.rank) for t in ts]
        ws = [int(getattr(t.meta, "world_size", 1) or 1) for t in ts]
    wt = D.wait_transfer(src)
    bw = D.busbw_vs_link(src, link, peak_bytes_per_s=peak_bytes_per_s)
    cs = D.collective_summary(src)
    if not is_job:
        host = _host_calls(ts)
    elif cs.empty:
        host = _job_host_calls(traces)
    else:  # the view shows the host calls only without any collective
        host = pd.DataFrame(columns=["rank", "name", "calls", "total_ns"])
    return dict(wait_transfer=wt, summary=D.wait_transfer_summary(wt), stragglers=D.stragglers(wt),
                bandwidth=bw, ranks=sorted(ranks), breakdown=D.step_breakdown(src),
                collectives=cs, host_calls=host,
                skew=D.skew(src) if len(ranks) > 1 else pd.DataFrame(),
                world_size=max(ws) if ws else 0)


_HOST_CALL_COLS = ["rank", "name", "calls", "total_ns"]


def _job_host_calls(job: Any) -> pd.DataFrame:
    """:func:`_host_call_rows` of a job dataset's ``events`` table (``job.sql``: the columns the communication
    predicate reads, every rank in one query), not each rank's full trace; empty without the table."""
    if "events" not in job.tables:
        return pd.DataFrame(columns=_HOST_CALL_COLS)
    return _host_call_rows(job.sql("SELECT rank, name, cat, device, dur_ns FROM events WHERE device < 0"))


def _host_calls(ts: list) -> pd.DataFrame:
    """:func:`_host_call_rows` of each rank's trace (its host rows only are copied)."""
    evs = [t.events.loc[t.events["device"] < 0, ["name", "cat", "device", "dur_ns"]].assign(rank=int(t.meta.rank))
           for t in ts]
    return _host_call_rows(pd.concat(evs, ignore_index=True)) if evs else pd.DataFrame(columns=_HOST_CALL_COLS)


def _host_call_rows(ev: pd.DataFrame) -> pd.DataFrame:
    """Host-side communication calls per rank (``c10d::``/``nccl:``/``gloo:`` rows of
    ``nbprof.trace.predicates.is_communication``) of events with a ``rank`` column: ``rank, name, calls,
    total_ns`` (ns), ranks ascending."""
    from ..trace import predicates as pred

    h = ev[np.asarray(pred.is_communication(ev), dtype=bool) & (ev["device"].to_numpy() < 0)]
    if h.empty:
        return pd.DataFrame(columns=_HOST_CALL_COLS)
    g = (h.assign(name=h["name"].astype(str)).groupby(["rank", "name"], sort=False)["dur_ns"]
         .agg(calls="size", total_ns="sum").reset_index())
    return g.sort_values("rank", kind="stable").reset_index(drop=True)[_HOST_CALL_COLS]


def straggler_text(st: pd.DataFrame) -> str:
    """The straggler sentence of :func:`~nbprof.analysis.distributed.stragglers`' frame ``st`` (its ``straggler``
    rows: the one causing the most wait), or why there is none; durations through ``nbprof.units.fmt_ns``."""
    if st.empty:
        return "Waiting needs matched collectives on at least two ranks with an absolute clock."
    s = st[st["straggler"]]
    if s.empty:
        return "No straggler: no rank is the one the others wait for in most steps."
    r = s.sort_values("caused_wait_ns", ascending=False).iloc[0]
    return (f"Straggler: rank {int(r['rank'])}, the rank the others wait for in {int(r['straggler_steps'])} of "
            f"{int(r['steps'])} steps (longest run {int(r['longest_run'])}); others waited "
            f"{fmt_ns(float(r['caused_wait_ns']))} for it.")


def _build(tables: dict, *, theme: str = "light", width: int = 1100):
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource, DataTable, Div, HoverTool, NumberFormatter, Span, TableColumn
    from bokeh.plotting import figure

    items: list = []
    plots = []
    bd = tables.get("breakdown")
    if bd is not None and len(bd):
        keys = [f"r{int(r)} step {int(st)}" for r, st in zip(bd["rank"], bd["step"])]
        parts = ["compute_ns", "overlapped_comm_ns", "exposed_comm_ns", "idle_ns"]
        data = {"key": keys, "rank": bd["rank"].astype(int).tolist(), "step": bd["step"].astype(int).tolist(),
                **{k.replace("_ns", "_ms"): bd[k].to_numpy(np.float64) / 1e6 for k in parts + ["step_ns"]}}
        bsrc = ColumnDataSource(data, name="nbprof_dist_breakdown")
        b = figure(x_range=keys, width=width, height=300, y_axis_label="ms", toolbar_location="right",
                   tools="save,reset", name="nbprof_dist_breakdown_plot",
                   title="Per rank and step: computation, overlapped and exposed communication, idle")
        rs = b.vbar_stack([k.replace("_ns", "_ms") for k in parts], x="key", width=0.8, source=bsrc,
                          color=["#2ca02c", "#9467bd", "#d62728", "#c7c7c7"],
                          legend_label=["computation", "overlapped communication", "exposed communication", "idle"])
        b.add_tools(HoverTool(renderers=rs, tooltips=[("rank", "@rank"), ("step", "@step"), ("step", "@step_ms{0,0.000} ms"),
                                                      ("computation", "@compute_ms{0,0.000} ms"),
                                                      ("overlapped comm.", "@overlapped_comm_ms{0,0.000} ms"),
                                                      ("exposed comm.", "@exposed_comm_ms{0,0.000} ms"),
                                                      ("idle", "@idle_ms{0,0.000} ms")]))
        b.xaxis.major_label_orientation = 0.6
        b.legend.location = "top_left"
        plots.append(b)
        items.append(b)
    cs = tables.get("collectives")
    if cs is not None and len(cs):
        cd = {"rank": cs["rank"].astype(int).tolist(), "collective": cs["collective"].astype(str).tolist(),
              "count": cs["count"].astype(int).tolist(), "total_mb": cs["total_bytes"].to_numpy(np.float64) / 1e6,
              "total_ms": cs["total_ns"].to_numpy(np.float64) / 1e6,
              "algbw_gbps": cs["algbw_bytes_per_s"].to_numpy(np.float64) / 1e9,
              "busbw_gbps": cs["busbw_bytes_per_s"].to_numpy(np.float64) / 1e9,
              "group_size": cs["group_size"].astype(int).tolist()}
        num = NumberFormatter(format="0,0.000", nan_format="-")
        items.append(DataTable(
            source=ColumnDataSource(cd, name="nbprof_dist_collectives"),
            columns=[TableColumn(field="rank", title="rank"), TableColumn(field="collective", title="collective"),
                     TableColumn(field="count", title="calls"), TableColumn(field="total_mb", title="bytes (MB)", formatter=num),
                     TableColumn(field="total_ms", title="time (ms)", formatter=num),
                     TableColumn(field="algbw_gbps", title="algbw (GB/s)", formatter=num),
                     TableColumn(field="busbw_gbps", title="busbw (GB/s)", formatter=num),
                     TableColumn(field="group_size", title="ranks in group")],
            width=width, height=30 + 26 * min(len(cs), 16), index_position=None, name="nbprof_dist_collectives_table"))
    hc = tables.get("host_calls")
    if (cs is None or cs.empty) and hc is not None and len(hc):
        calls = ", ".join(f"{n} x{int(c)}" for n, c in zip(hc["name"], hc["calls"]))
        items.append(Div(text=escape_html(
            f"No collective executed (no communication kernel, no gloo work): the ranks called {calls} on the host."
            + (" NCCL short-circuits collectives in a job of world size 1." if tables.get("world_size", 0) == 1 else "")),
            name="nbprof_dist_host_calls", width=width))
    summ = tables["summary"]
    if len(summ):
        x = [f"r{int(r)} {c}" for r, c in zip(summ["rank"], summ["collective"])]
        data = {"key": x, "rank": summ["rank"].astype(int).tolist(), "collective": summ["collective"].astype(str).tolist(),
                "count": summ["count"].astype(int).tolist(),
                "wait_ms": summ["wait_ns"].to_numpy(np.float64) / 1e6,
                "transfer_ms": summ["transfer_ns"].to_numpy(np.float64) / 1e6,
                "wait_ratio": summ["wait_ratio"].to_numpy(np.float64)}
        src = ColumnDataSource(data, name="nbprof_dist_wait")
        p = figure(x_range=x, width=width, height=320, title="Collectives per rank: waiting for the last rank vs transfer",
                   y_axis_label="ms", toolbar_location="right", tools="save,reset", name="nbprof_dist_wait_plot")
        rs = p.vbar_stack(["wait_ms", "transfer_ms"], x="key", width=0.8, source=src, color=["#d62728", "#1f77b4"],
                          legend_label=["waiting", "transfer"])
        p.add_tools(HoverTool(renderers=rs, tooltips=[("rank", "@rank"), ("collective", "@collective"), ("calls", "@count"),
                                                      ("waiting", "@wait_ms{0.000} ms"), ("transfer", "@transfer_ms{0.000} ms"),
                                                      ("waiting share", "@wait_ratio{0.0%}")]))
        p.xaxis.major_label_orientation = 0.6
        p.legend.location = "top_left"
        plots.append(p)
        items.append(p)
    st_text = escape_html(straggler_text(tables["stragglers"]))
    items.append(Div(text=st_text, name="nbprof_dist_straggler", width=width,  # the straggler highlighted
                     styles={"color": "#d62728", "font-weight": "bold"} if st_text.startswith("Straggler:") else {}))
    sk = tables.get("skew")
    if sk is not None and len(sk):
        kd = {"rank": sk["rank"].astype(int).tolist(), "steps": sk["steps"].astype(int).tolist(),
              "step_ms": sk["step_mean_ns"].to_numpy(np.float64) / 1e6,
              "skew_ms": sk["step_mean_skew_ns"].to_numpy(np.float64) / 1e6,
              "lag_ms": sk["mean_lag_ns"].to_numpy(np.float64) / 1e6,
              "last": sk["last_arrival_count"].astype(int).tolist(),
              "straggler": ["straggler" if x else "" for x in sk["straggler"]]}
        num = NumberFormatter(format="0,0.000", nan_format="-")
        items.append(DataTable(
            source=ColumnDataSource(kd, name="nbprof_dist_skew"),
            columns=[TableColumn(field="rank", title="rank"), TableColumn(field="steps", title="steps"),
                     TableColumn(field="step_ms", title="mean step (ms)", formatter=num),
                     TableColumn(field="skew_ms", title="step skew vs fastest (ms)", formatter=num),
                     TableColumn(field="lag_ms", title="mean arrival lag (ms)", formatter=num),
                     TableColumn(field="last", title="arrived last"), TableColumn(field="straggler", title="")],
            width=int(width * 0.8), height=30 + 26 * min(len(sk), 16), index_position=None,
            name="nbprof_dist_skew_table"))
    st = tables["stragglers"]
    if len(st):
        sd = {"rank": st["rank"].astype(int).tolist(), "straggler_steps": st["straggler_steps"].astype(int).tolist(),
              "steps": st["steps"].astype(int).tolist(), "recurrence": st["recurrence"].to_numpy(np.float64),
              "caused_ms": st["caused_wait_ns"].to_numpy(np.float64) / 1e6,
              "own_ms": st["own_wait_ns"].to_numpy(np.float64) / 1e6}
        items.append(DataTable(
            source=ColumnDataSource(sd, name="nbprof_dist_stragglers"),
            columns=[TableColumn(field="rank", title="rank"), TableColumn(field="straggler_steps", title="straggler steps"),
                     TableColumn(field="steps", title="steps"),
                     TableColumn(field="recurrence", title="recurrence", formatter=NumberFormatter(format="0%")),
                     TableColumn(field="caused_ms", title="others' wait caused (ms)", formatter=NumberFormatter(format="0,0.000")),
                     TableColumn(field="own_ms", title="own wait (ms)", formatter=NumberFormatter(format="0,0.000"))],
            width=int(width * 0.7), height=30 + 26 * len(st), index_position=None, name="nbprof_dist_stragglers_table"))
    bw = tables["bandwidth"]
    bw = bw[bw["busbw_bytes_per_s"].notna()] if len(bw) else bw
    if len(bw):
        y = [f"r{int(r)} {c}" for r, c in zip(bw["rank"], bw["collective"])]
        bd = {"key": y, "busbw_gbps": bw["busbw_bytes_per_s"].to_numpy(np.float64) / 1e9,
              "fraction": bw["busbw_link_fraction"].to_numpy(np.float64),
              "achievable_fraction": bw["busbw_achievable_fraction"].to_numpy(np.float64)}
        link = bw["link"].iloc[0]
        q = figure(y_range=list(reversed(y)), width=width, height=60 + 24 * len(y),
                   title=f"Bus bandwidth (nccl-tests busbw) vs link {link}" if link else "Bus bandwidth (nccl-tests busbw)",
                   x_axis_label="GB/s", toolbar_location="right", tools="save,reset", name="nbprof_dist_busbw_plot")
        q.hbar(y="key", right="busbw_gbps", height=0.7, source=ColumnDataSource(bd, name="nbprof_dist_busbw"),
               color="#2ca02c")
        q.add_tools(HoverTool(tooltips=[("", "@key"), ("busbw", "@busbw_gbps{0,0.00} GB/s"),
                                        ("of link peak", "@fraction{0.0%}"),
                                        ("of achievable", "@achievable_fraction{0.0%}")]))
        peak = float(bw["link_peak_bytes_per_s"].iloc[0])
        ach = float(bw["achievable_bytes_per_s"].iloc[0])
        if peak == peak:
            q.add_layout(Span(location=peak / 1e9, dimension="height", line_color="#7f7f7f", line_dash="dashed",
                              name="nbprof_dist_link_peak"))
        if ach == ach:
            q.add_layout(Span(location=ach / 1e9, dimension="height", line_color="#ff7f0e", line_dash="dotted",
                              name="nbprof_dist_link_achievable"))
        plots.append(q)
        items.append(q)
        note = (f"Link {link}: peak {_gbps(peak)} per direction, achievable {_gbps(ach)} (NCCL guidance, see "
                "nbprof.analysis.links)." if peak == peak else
                "No link given or recognised: pass link= (e.g. 'nvlink4', 'ib_ndr') for the fraction of the link.")
        items.append(Div(text=escape_html(note), name="nbprof_dist_link_note", width=width))
    else:
        items.append(Div(text="No collective with a message size: no bus bandwidth.", render_as_text=True))
    apply_theme(plots, "dark" if theme == "dark" else "light")
    lay = column(*items, name="nbprof_distributed")
    style_widgets(lay, theme)
    on_render(lay, plots, theme)
    return lay


def _text(tables: dict) -> str:
    lines = [f"nbprof distributed ({len(tables['ranks'])} ranks):"]
    for r in tables.get("breakdown", pd.DataFrame()).itertuples(index=False):
        lines.append(f"  rank {int(r.rank)} step {int(r.step)}: computation {fmt_ns(float(r.compute_ns))}, overlapped "
                     f"communication {fmt_ns(float(r.overlapped_comm_ns))}, exposed {fmt_ns(float(r.exposed_comm_ns))}, "
                     f"idle {fmt_ns(float(r.idle_ns))}")
    for r in tables["summary"].itertuples(index=False):
        lines.append(f"  rank {int(r.rank)} {r.collective}: {int(r.count)} calls, waiting {fmt_ns(float(r.wait_ns))}, "
                     f"transfer {fmt_ns(float(r.transfer_ns))}")
    lines.append("  " + straggler_text(tables["stragglers"]))
    bw = tables["bandwidth"]
    for r in bw[bw["busbw_bytes_per_s"].notna()].itertuples(index=False) if len(bw) else []:
        frac = "" if r.busbw_link_fraction != r.busbw_link_fraction else f" ({fmt_pct_text(r.busbw_link_fraction)} of {r.link})"
        if not r.model_fits:  # above the link's peak: the link model does not describe this collective
            frac += f" -- above the {r.tier} link's peak: the model does not fit (wrong link or tier, or in-network reduction)"
        lines.append(f"  rank {int(r.rank)} {r.collective} busbw {_gbps(float(r.busbw_bytes_per_s))}{frac}")
    return "\n".join(lines)


def distributed_view(traces, *, theme: str = "auto", width: int = 1100, link: str | None = None,
                     peak_bytes_per_s: float | None = None) -> NbprofView:
    """The distributed view of a job (a widget).

    Parameters
    ----------
    traces : Trace, sequence of Trace or MultiRankTrace
        One trace per rank.
    theme : {"auto", "light", "dark"}
    width : int
    link, peak_bytes_per_s
        The link to compare bus bandwidth with (:func:`nbprof.analysis.distributed.busbw_vs_link`;
        default guessed from the GPU name).

    Returns
    -------
    NbprofView
        Stacked bars of waiting vs transfer per rank and collective, the straggler (recurrence over
        steps), bus bandwidth per rank and collective against the link's peak and achievable lines.
    """
    tables = distributed_tables(traces, link=link, peak_bytes_per_s=peak_bytes_per_s)
    view = NbprofView(_build(tables, theme=theme, width=width), _text(tables), "distributed",
                      static_builder=lambda theme="light": _build(tables, theme=theme, width=width))
    view.tables = tables
    return view


def static_view(traces, *, theme: str = "light", width: int = 1100):
    """The distributed view as a static Bokeh layout (browser-side interaction only)."""
    return _build(distributed_tables(traces), theme=theme, width=width)
