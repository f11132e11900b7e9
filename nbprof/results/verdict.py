"""The verdict in words: one sentence with human units, then the top findings with their next step.

``verdict_sentence(v)`` states :class:`nbprof.analysis.verdict.Verdict`
("DataLoader-bound: waiting for the next batch takes 33% of each step (58.6 of 177.6 ms); compute kernels 56%;
the GPU is busy 61% of the time"); ``verdict_html(v, findings)`` is the first section of the report and of the
dashboard. Findings are ranked by ``predicted_saving_ns`` when they carry one (the what-if replay), else kept in
the advisor's order; a rule shows once.
"""

from __future__ import annotations

import html as _html
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..analysis.findings import MIN_SAVING_RATIO
from ..units import fmt_ns, is_missing
from ..units import fmt_ns_of as _ms_pair
from ..units import fmt_pct_text as _pct

__all__ = ["BOUND_LABELS", "verdict_sentence", "saving_words", "listed", "verdict_html", "verdict_text", "ZOOM_SCRIPT",
           "TIMELINE_ANCHOR"]

#: bound -> (headline, what the time is)
BOUND_LABELS: dict[str, tuple[str, str]] = {
    "dataloader": ("DataLoader-bound", "waiting for the next batch (DataLoader)"),
    "host": ("Host-bound", "CPU-side work (operators, runtime and launch calls) while the GPU idles"),
    "sync_wait": ("Sync-bound", "the host blocked in sync calls while no device op runs"),
    "python": ("Host-bound (Python)", "Python code outside any torch op"),
    "gpu_compute": ("GPU compute-bound", "compute kernels"),
    "communication": ("Communication-bound", "exposed communication"),
    "memcpy": ("Memcpy-bound", "memory copies and sets not hidden by kernels"),
    "idle": ("Idle-bound", "time outside every op and Python frame"),
    "too_short": ("Too short to judge", ""),
    "none": ("No steps", ""),
}
_PART_SHORT = {"gpu_compute": "compute kernels", "communication": "communication", "memcpy": "memcpy",
               "host": "host", "sync_wait": "sync waits", "dataloader": "DataLoader", "python": "Python",
               "idle": "idle"}


def _short_name(name: str, n: int = 60) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _frame_words(frame: str) -> str:
    """``train.py:42 in step`` for a frame ``train.py(42): step``; the name itself for other frames."""
    head, sep, func = frame.partition("): ")
    if sep and "(" in head:
        file, _, line = head.rpartition("(")
        return f"{file}:{line} in {func}"
    return frame


def _what(v: Any) -> str:
    """What the bound's time is, in words, naming its largest event / frame / sync call."""
    b = v.bound
    what = BOUND_LABELS.get(b, (b, b))[1]
    top = _short_name(v.contributors[0].name, 40) if v.contributors else ""
    if b == "host":
        if not v.has_device:
            return "the model's operators on the CPU (its compute)" + (f" (largest: {top})" if top else "")
        return "CPU-side work while the GPU idles" + (f" (largest: {top})" if top else "")
    if b == "communication" and top:
        return f"exposed communication ({top})"
    if b == "python":
        return what + (f" (top frame: {_frame_words(v.python_frame)})" if v.python_frame else "")
    if b == "idle":
        if v.python_frame or getattr(v, "parts_ns", {}).get("python", 0) > 0:
            return what + " (a sleep, or a wait inside C code)"
        return "host code outside any torch op (record with_stack=True to see which)"
    if b == "sync_wait":
        names = ", ".join(v.sync_names[:3])
        return (f"the host waiting in {names or 'sync calls'} while no device op runs: the work it waits for is "
                "outside the profiled window or in another process (profile more steps)")
    return what


def verdict_sentence(v: Any, findings: Sequence[Any] = ()) -> str:
    """The verdict as plain text: the bound (and a close second), its share, the other large parts, the straggler,
    why the bound is not the largest part, what limits the verdict."""
    if v.bound == "none":
        return "No steps: the trace has no host events to measure a step from."
    if v.bound == "too_short":
        return (f"Too short to judge: {v.bound_reason} ({v.steps} step{'s' if v.steps != 1 else ''}); profile more "
                "steps, e.g. torch.profiler.schedule(wait=1, warmup=1, active=3).")
    head = BOUND_LABELS.get(v.bound, (v.bound, v.bound))[0]
    if v.bound == "host" and not v.has_device:
        head = "CPU compute-bound"
    contended = next((f for f in findings if getattr(f, "rule", "") == "cpu_contention" and _is_ranked(f)), None) \
        if v.bound == "host" and getattr(v, "first_rule", "") == "cpu_contention" else None
    if contended is not None:  # the host time is partly a wait for a CPU, not compute
        head = "CPU-contended"
    co = getattr(v, "co_bound", "")
    if co:
        head = f"{head} / {BOUND_LABELS.get(co, (co, co))[0] if co != 'python' else 'Python'}"
    what = _what(v) if contended is None else _what(v).replace("(its compute)", "(compute and the wait for a CPU)")
    s = f"{head}: {what}, {_pct(v.bound_ratio)} of each step ({_ms_pair(v.bound_ns, v.step_ns)}"
    s += f", average of {v.steps} step{'s' if v.steps != 1 else ''})"
    if co:
        s += f" / {_PART_SHORT.get(co, co)} {_pct(v.ratio(co))}"
        if co == "python" and v.python_frame:
            s += f" (top frame: {_frame_words(v.python_frame)})"
    others = sorted((p for p in v.parts_ns if p not in (v.bound, co)), key=lambda p: -v.parts_ns[p])
    extra = [f"{_PART_SHORT.get(p, p)} {_pct(v.ratio(p))}" for p in others[:2] if v.ratio(p) >= 0.05]
    if extra:
        s += "; " + ", ".join(extra)
    if v.has_device and not is_missing(v.gpu_busy_ratio):
        s += f"; the GPU is busy {_pct(v.gpu_busy_ratio)} of the time"
    elif not v.has_device:
        s += "; CPU-only profile (no device activity)"
    sg = getattr(v, "straggler", None)
    if sg is not None:
        unit, div = ("s", 1e9) if sg.caused_wait_ns >= 1e9 else ("ms", 1e6) if sg.caused_wait_ns >= 1e6 else ("µs", 1e3)
        s += (f"; rank {sg.rank} is the straggler (last in {sg.straggler_steps} of {sg.steps} steps): the other "
              f"ranks wait ~{_sig2(sg.caused_wait_ns / div)} {unit} per step for it")
    s += "."
    largest = max(v.parts_ns, key=lambda p: v.parts_ns[p])
    if v.bound != largest and largest != co:
        first = next((f for f in findings if _is_ranked(f)), None)
        fix = f" ({first.title})" if first is not None else ""
        s += (f" The largest part is {_PART_SHORT.get(largest, largest)} ({_pct(v.ratio(largest))}), but the fix with "
              f"the largest predicted saving{fix} shrinks {_PART_SHORT.get(v.bound, v.bound)}.")
    elif v.bound == largest and not any(_is_ranked(f) for f in findings):
        s += f" No finding is predicted to save {_pct(MIN_SAVING_RATIO)} of the step."
        s += _bound_fix_limit(v, findings)
    elif getattr(v, "first_part", "") and v.first_part != v.bound and v.first_part in v.parts_ns:
        # analysis.verdict: the first fix saves more than its part holds (it saves by letting work overlap)
        first = next((f for f in findings if _is_ranked(f)), None)
        fix = f" ({first.title})" if first is not None else ""
        part = v.first_part
        s += (f" The fix with the largest predicted saving{fix} removes {_PART_SHORT.get(part, part)} "
              f"({_pct(v.ratio(part), 1)} of the step) and saves more by letting other work overlap, so the bound "
              f"named is the largest part.")
    if contended is not None:
        s += (f" The training thread waited for a CPU {_pct(float(contended.evidence.get('ratio', 0.0)))} of each step "
              "(run-queue wait: other processes or more threads than cores): the op times include that wait.")
    if getattr(v, "caveat", ""):
        s += f" ({v.caveat[0].upper()}{v.caveat[1:]}.)"
    return s


def listed(findings: Iterable[Any], top: int | None) -> tuple[list[Any], list[Any]]:
    """The findings as given (the advisor's one ranking): ``(ranked, apart)`` -- the first ``top`` ranked findings
    (``Finding.ranked``: a saving of at least ``findings.MIN_SAVING_RATIO`` of the step), and the first ``top`` of
    the others (no saving to show, or one under the floor: listed apart with their reason)."""
    fs = list(findings)
    ranked = [f for f in fs if _is_ranked(f)]
    apart = [f for f in fs if not _is_ranked(f)]
    return (ranked[:top], apart[:top]) if top is not None else (ranked, apart)


def _is_ranked(f: Any) -> bool:
    """``f.ranked`` (:class:`nbprof.analysis.findings.Finding`), or a saving > 0 for a finding-like row without it."""
    r = getattr(f, "ranked", None)
    return bool(r) if r is not None else _has_saving(f)


def _bound_fix_limit(v: Any, findings: Sequence[Any]) -> str:
    """Why the bound's own fix saves little, when a finding shrinks the bound's part but its replay saves under
    the floor: the critical path runs through other work about as long (V100 ResNet-50 ``num_workers_4``: compute
    kernels 70 % by the breakdown's priority counting, yet halving its fp32 GEMM/convolution kernels, 83 of 141 ms,
    saves 1.4 ms: the host's own ops, which the breakdown counts under the kernels, are about as long). ``""`` when
    no such finding."""
    own = [f for f in findings if getattr(f, "part", "") == v.bound and _has_saving(f)]
    if not own:
        return ""
    f = max(own, key=lambda x: float(x.predicted_saving_ns))
    other = ("the host's ops and launches, which this breakdown counts under the kernels"
             if v.bound == "gpu_compute" else "work outside it")
    return (f" Even the fix for {_PART_SHORT.get(v.bound, v.bound)} ({f.title}) {saving_words(f)}: other work on the "
            f"critical path ({other}) takes about as long, so shortening {_PART_SHORT.get(v.bound, v.bound)} alone "
            "barely shortens the step.")


def _has_saving(f: Any) -> bool:
    s: Any = getattr(f, "predicted_saving_ns", None)
    return not is_missing(s) and float(s) > 0


def _sig2(x: float) -> str:
    """``x`` at two significant digits (``34``, ``2.0``, ``0.57``)."""
    if x <= 0:
        return "0"
    digits = max(0, 1 - int(math.floor(math.log10(x))))
    return f"{x:.{digits}f}"


def saving_words(f: Any) -> str:
    """A finding's saving in words at the precision its validation supports: ``saves ~20-34 ms per step`` (the
    range of ``f.saving_range_ns()``, two significant digits, one unit); for a finding without a saving, why
    (``not quantified: ...``; a replay that predicts none: ``no saving predicted``); never "saves 0"."""
    rng = f.saving_range_ns() if hasattr(f, "saving_range_ns") else None
    s: Any = getattr(f, "predicted_saving_ns", None)
    if rng is None and _has_saving(f):
        rng = (float(s), float(s))
    if rng is not None:
        lo, hi = rng
        unit, div = ("s", 1e9) if hi >= 1e9 else ("ms", 1e6) if hi >= 1e6 else ("µs", 1e3)
        a, b = _sig2(lo / div), _sig2(hi / div)
        txt = f"saves ~{a} {unit} per step" if a == b else f"saves ~{a}\u2013{b} {unit} per step"
        return txt if _is_ranked(f) else f"{txt}, under {_pct(MIN_SAVING_RATIO)} of the step"
    reason = str(getattr(f, "saving_reason", ""))
    if reason.startswith("not quantified: "):
        return reason
    if not is_missing(s):
        return "no saving predicted by the replay (" + ("it slows the step" if float(s) < 0 else "not modelled") + ")"
    return "not quantified"


def verdict_text(v: Any, findings: Sequence[Any] = (), top: int = 3) -> str:
    """The verdict and the findings (in the given order: the advisor's ranking) as plain text: the first ``top``
    with a saving, then the first ``top`` without one, apart."""
    lines = [verdict_sentence(v, findings)]
    ranked, apart = listed(findings, top)
    for i, f in enumerate(ranked, 1):
        lines.append(f"{i}. {f.title} ({saving_words(f)})")
        if getattr(f, "code_line", ""):
            lines.append(f"   code: {_frame_words(f.code_line)}")
        if getattr(f, "next_step", ""):
            lines.append(f"   next: {f.next_step}")
    if apart:
        lines.append(f"Not ranked (no saving predicted, or under {_pct(MIN_SAVING_RATIO)} of the step):")
        for f in apart:
            lines.append(f"- {f.title} ({saving_words(f)})")
    return "\n".join(lines)


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
    sent = verdict_sentence(v, findings)
    head, _, rest = sent.partition(": ")
    parts = [f'<div class="nbprof-verdict" style="border-left:6px solid {color};padding:6px 12px;margin:6px 0;'
             f'font-size:1.15em"><b style="color:{color}">{e(head)}</b>' + (f": {e(rest)}" if rest else "") + "</div>"]
    if v.contributors:
        items = ", ".join(f"<code>{e(_short_name(c.name))}</code> {e(fmt_ns(c.self_ns))} ({c.count}×)"
                          for c in v.contributors)
        parts.append(f'<div class="nbprof-verdict-top" style="margin:2px 12px">Largest (self time): {items}</div>')
    ranked, apart = listed(findings, top)
    if ranked or apart:
        def item(f: Any) -> str:
            save = f' <span class="nbprof-saving">{e(saving_words(f))}</span>'
            where = f'<br><small>where: {e(f.where)}</small>' if getattr(f, "where", "") else ""
            code = f"<br><small>code: <code>{e(_frame_words(f.code_line))}</code></small>" if getattr(f, "code_line", "") else ""
            nxt = f"<br><b>Next step:</b> {e(f.next_step)}" if getattr(f, "next_step", "") else ""
            link = _zoom_link(zoom(f)) if zoom is not None else ""
            return (f'<li style="margin:4px 0"><b>{e(f.title)}</b> <small>[{e(f.severity)}]</small>{save}{link}{nxt}'
                    f'{code}{where}</li>')

        if ranked:
            parts.append('<div style="margin:4px 12px"><b>What to fix first</b><ol>'
                         + "".join(item(f) for f in ranked) + "</ol></div>")
        if apart:
            parts.append('<div class="nbprof-apart" style="margin:4px 12px"><b>Also found (no predicted saving, or under '
                         f'{_pct(MIN_SAVING_RATIO)} of the step)</b>'
                         "<ul>" + "".join(item(f) for f in apart) + "</ul></div>")
    else:
        parts.append('<div style="margin:4px 12px"><i>No advisor finding for this trace.</i></div>')
    # line-height: ipywidgets' HTML widget sets its inline height (28 px) as the line height; a paragraph reads tighter
    return '<div class="nbprof-verdict-section" style="line-height:1.45">' + "".join(parts) + "</div>"
