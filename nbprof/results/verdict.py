"""The verdict in words: one sentence with human units, then the top findings with their next step.

``verdict_sentence(v)`` states :class:`nbprof.analysis.verdict.Verdict`
("DataLoader-bound: waiting for the next batch takes 33% of each step (58.6 of 177.6 ms); compute kernels 56%;
the GPU is busy 61% of the time"); ``verdict_html(v, findings)`` is the first section of the report and of the
dashboard. Findings are ranked by ``predicted_saving_ns`` when they carry one (the what-if replay), else kept in
the advisor's order; a rule shows once.
"""

from __future__ import annotations

import html as _html
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .format import fmt_ns, is_missing

__all__ = ["BOUND_LABELS", "verdict_sentence", "rank_findings", "verdict_html", "verdict_text", "ZOOM_SCRIPT",
           "TIMELINE_ANCHOR"]

#: bound -> (headline, what the time is)
BOUND_LABELS: dict[str, tuple[str, str]] = {
    "dataloader": ("DataLoader-bound", "waiting for the next batch (DataLoader)"),
    "host": ("Host-bound", "CPU-side work (operators, runtime and launch calls) while the GPU idles"),
    "gpu_compute": ("GPU compute-bound", "compute kernels"),
    "communication": ("Communication-bound", "exposed communication"),
    "memcpy": ("Memcpy-bound", "memory copies and sets not hidden by kernels"),
    "idle": ("Idle-bound", "time with neither host nor GPU activity"),
    "none": ("No steps", ""),
}
_PART_SHORT = {"gpu_compute": "compute kernels", "communication": "communication", "memcpy": "memcpy",
               "host": "host", "dataloader": "DataLoader", "idle": "idle"}


def _pct(r: float) -> str:
    return "" if is_missing(r) else f"{100 * r:.0f}%"


def _ms_pair(a: float, b: float) -> str:
    """``11.7 of 18.8 ms`` (one unit chosen for both)."""
    unit, div = ("s", 1e9) if b >= 1e9 else ("ms", 1e6) if b >= 1e6 else ("µs", 1e3)
    digits = 1 if b / div >= 10 else 2
    return f"{a / div:.{digits}f} of {b / div:.{digits}f} {unit}"


def _short_name(name: str, n: int = 60) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def verdict_sentence(v: Any) -> str:
    """The verdict as one plain-text sentence with units."""
    if v.bound == "none":
        return "No steps: the trace has no host events to measure a step from."
    head, what = BOUND_LABELS.get(v.bound, (v.bound, v.bound))
    if v.bound == "host" and v.contributors:
        work = "CPU-side work while the GPU idles" if v.has_device else "CPU-side work (operators, Python, runtime)"
        what = f"{work} (largest: {_short_name(v.contributors[0].name, 40)})"
    elif v.bound == "communication" and v.contributors:
        what = f"exposed communication ({_short_name(v.contributors[0].name, 40)})"
    s = f"{head}: {what}, {_pct(v.bound_ratio)} of each step ({_ms_pair(v.bound_ns, v.step_ns)}"
    s += f", average of {v.steps} step{'s' if v.steps != 1 else ''})"
    others = sorted((p for p in v.parts_ns if p != v.bound), key=lambda p: -v.parts_ns[p])
    extra = [f"{_PART_SHORT[p]} {_pct(v.ratio(p))}" for p in others[:2] if v.ratio(p) >= 0.05]
    if extra:
        s += "; " + ", ".join(extra)
    if v.has_device and not is_missing(v.gpu_busy_ratio):
        s += f"; the GPU is busy {_pct(v.gpu_busy_ratio)} of the time"
    elif not v.has_device:
        s += "; CPU-only profile (no device activity)"
    return s + "."


def rank_findings(findings: Iterable[Any], top: int | None = None) -> list[Any]:
    """Findings ranked for reading: by ``predicted_saving_ns`` (largest first) when any finding carries one,
    else the given (advisor) order; the first finding of each rule only."""
    seen: set[tuple[str, str]] = set()
    uniq = []
    for f in findings:
        key = (str(getattr(f, "rule", "")), str(getattr(f, "title", "")) if getattr(f, "rule", "") == "" else "")
        if key in seen:
            continue
        seen.add(key)
        uniq.append(f)

    def saving(f: Any) -> float:
        s: Any = getattr(f, "predicted_saving_ns", None)
        return -1.0 if is_missing(s) else float(s)

    if any(saving(f) >= 0 for f in uniq):
        uniq = sorted(uniq, key=lambda f: -saving(f))  # stable: ties keep the advisor's order
    return uniq[:top] if top is not None else uniq


def verdict_text(v: Any, findings: Sequence[Any] = (), top: int = 3) -> str:
    """The verdict and the top findings as plain text."""
    lines = [verdict_sentence(v)]
    for i, f in enumerate(rank_findings(findings, top), 1):
        s: Any = getattr(f, "predicted_saving_ns", None)
        lines.append(f"{i}. {f.title}" + _saving_text(s, " ({})"))
        if getattr(f, "next_step", ""):
            lines.append(f"   next: {f.next_step}")
    return "\n".join(lines)


def _saving_text(s: Any, template: str, *, escape: bool = False) -> str:
    """``template`` filled with the predicted saving in words ("saves ~21.1 ms per step"; a zero saving says the
    what-if replay predicts none); "" when the finding is not quantified."""
    if is_missing(s):
        return ""
    words = "the what-if replay predicts no step-time saving" if float(s) <= 0 else f"saves ~{fmt_ns(float(s))} per step"
    return template.format(_html.escape(words) if escape else words)


_BOUND_COLORS = {"dataloader": "#e45756", "host": "#f58518", "gpu_compute": "#54a24b", "communication": "#b8860b",
                 "memcpy": "#9467bd", "idle": "#9d9da1", "none": "#9d9da1"}


#: the anchor a finding's timeline link scrolls to (the report puts it above step 1's timeline)
TIMELINE_ANCHOR = "nbprof-timeline"


def _zoom_link(window: tuple[float, float] | None) -> str:
    """A finding's link to the timeline: ``data-x0-ms``/``data-x1-ms`` (the timeline's x axis is ms from the trace
    origin) for the page's script (:data:`ZOOM_SCRIPT`), the window in words."""
    if window is None:
        return ""
    x0, x1 = float(window[0]), float(window[1])
    words = _html.escape(f"show on the timeline ({fmt_ns(max(x0, 0.0))} to {fmt_ns(x1)})")  # the window, padded
    return (f' &middot; <a class="nbprof-zoom" href="#{TIMELINE_ANCHOR}" data-x0-ms="{x0 / 1e6!r}" '
            f'data-x1-ms="{x1 / 1e6!r}">{words}</a>')


#: the page script behind the links: sets the x range of the first Bokeh timeline (layout ``nbprof_timeline``,
#: figure first) to the link's window; the link's own ``href`` scrolls there
ZOOM_SCRIPT = """<script>
document.addEventListener("click", function (ev) {
  var a = ev.target && ev.target.closest ? ev.target.closest("a.nbprof-zoom") : null;
  if (!a || !window.Bokeh) { return; }
  var x0 = parseFloat(a.getAttribute("data-x0-ms")), x1 = parseFloat(a.getAttribute("data-x1-ms"));
  if (!isFinite(x0) || !isFinite(x1) || x1 <= x0) { return; }
  var docs = window.Bokeh.documents || [];
  for (var i = 0; i < docs.length; i++) {
    var lay = docs[i].get_model_by_name("nbprof_timeline");
    if (lay && lay.children && lay.children.length) {
      lay.children[0].x_range.setv({start: x0, end: x1});
      return;
    }
  }
});
</script>"""


def verdict_html(v: Any, findings: Sequence[Any] = (), *, top: int = 3,
                 zoom: Callable[[Any], tuple[float, float] | None] | None = None) -> str:
    """The verdict sentence (bold headline) and the top findings, each with its next step and where it is.

    ``zoom(finding)`` gives a finding's evidence window (ns from the trace origin, e.g.
    ``nbprof.analysis.evidence.interval(trace, f.evidence_rows)``) or None: the finding then links to the
    timeline at that window (:data:`ZOOM_SCRIPT` must be in the page). Every trace-derived text is escaped.
    """
    e = _html.escape
    color = _BOUND_COLORS.get(v.bound, "#4c78a8")
    sent = verdict_sentence(v)
    head, _, rest = sent.partition(": ")
    parts = [f'<div class="nbprof-verdict" style="border-left:6px solid {color};padding:6px 12px;margin:6px 0;'
             f'font-size:1.15em"><b style="color:{color}">{e(head)}</b>' + (f": {e(rest)}" if rest else "") + "</div>"]
    if v.contributors:
        items = ", ".join(f"<code>{e(_short_name(c.name))}</code> {e(fmt_ns(c.total_ns))} ({c.count}×)"
                          for c in v.contributors)
        parts.append(f'<div class="nbprof-verdict-top" style="margin:2px 12px">Largest: {items}</div>')
    ranked = rank_findings(findings, top)
    if ranked:
        lis = []
        for f in ranked:
            s: Any = getattr(f, "predicted_saving_ns", None)
            save = _saving_text(s, ' <span class="nbprof-saving">{}</span>', escape=True)
            where = f'<br><small>where: {e(f.where)}</small>' if getattr(f, "where", "") else ""
            nxt = f"<br><b>Next step:</b> {e(f.next_step)}" if getattr(f, "next_step", "") else ""
            link = _zoom_link(zoom(f)) if zoom is not None else ""
            lis.append(f'<li style="margin:4px 0"><b>{e(f.title)}</b> <small>[{e(f.severity)}]</small>{save}{link}{nxt}'
                       f'{where}</li>')
        parts.append('<div style="margin:4px 12px"><b>What to fix first</b><ol>' + "".join(lis) + "</ol></div>")
    else:
        parts.append('<div style="margin:4px 12px"><i>No advisor finding for this trace.</i></div>')
    # line-height: ipywidgets' HTML widget sets its inline height (28 px) as the line height; a paragraph reads tighter
    return '<div class="nbprof-verdict-section" style="line-height:1.45">' + "".join(parts) + "</div>"
