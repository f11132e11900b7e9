"""The fuzz worker: a subprocess that runs cases sent by the parent (one JSON line each) and answers
with one JSON line each. Every case runs under a ``setitimer`` alarm; the parent kills the worker
when it stops answering (a hang in C code the alarm cannot interrupt) and starts another.

Run as ``python -m tests.fuzz.worker`` (by ``engine``); its stdout is the protocol channel, so fd 1
is pointed at stderr while cases run.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import sys
import time
import traceback
import warnings
import zlib
from pathlib import Path

ANALYSES = [("operators", "operator_summary"), ("kernels", "kernel_summary"), ("steps", "step_breakdown"),
            ("utilization", "gpu_utilization"), ("memory", "memory_curve"), ("advisor", "advise")]
SNAPSHOT_ANALYSES = ["snapshot_timeline", "allocations", "snapshot_peak", "leak_suspects", "growth",
                     "fragmentation", "oom_events"]
TIMELINE_ANALYSES = ["timeline_by_category", "timeline_peak"]
# parse_log runs every inner parser (flops reports, comms tables and ops, timers, memory lines);
# parse_flops_profile has its own raising contract (no report)
DS_CALLS = ["parse_log", "parse_flops_profile"]


class CaseTimeout(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in a loader swallows it."""


# Two clocks per case, so a loaded machine (other jobs on the two cores) does not make HANGs:
# - CPU time (ITIMER_PROF): ``timeout`` seconds of this process's CPU -> a compute hang;
# - wall time (ITIMER_REAL, every ``block`` s): when the case used under 5 % of the elapsed
#   wall time as CPU, it is blocked (a FIFO without writer, a device), not slow -> a hang too;
#   otherwise it is re-armed (and a case past ``wall_max`` is a hang whatever its CPU use).
_CASE = {"t0": 0.0, "c0": 0.0, "block": 2.0, "wall_max": 60.0}


def _alarm_cpu(signum, frame):
    raise CaseTimeout("per-case CPU time limit reached")


def _alarm_wall(signum, frame):
    wall = time.monotonic() - _CASE["t0"]
    cpu = time.process_time() - _CASE["c0"]
    if cpu < 0.05 * wall:
        raise CaseTimeout(f"blocked: {cpu:.2f} s of CPU in {wall:.1f} s")
    if wall > _CASE["wall_max"]:
        raise CaseTimeout(f"per-case wall time limit reached ({wall:.0f} s)")
    signal.setitimer(signal.ITIMER_REAL, _CASE["block"])


def _arm(cpu_s: float) -> None:
    _CASE["t0"], _CASE["c0"] = time.monotonic(), time.process_time()
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    signal.setitimer(signal.ITIMER_REAL, _CASE["block"])


def _disarm() -> None:
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)


def where_of(tb) -> str:
    """The innermost frame inside nbprof/ (else the innermost frame outside this worker) as 'path:line in func'."""
    frames = [fr for fr in traceback.extract_tb(tb) if os.path.basename(fr.filename) != "worker.py"]
    pick = None
    for fr in frames:
        if f"{os.sep}nbprof{os.sep}" in fr.filename:
            pick = fr
    if pick is None and frames:
        pick = frames[-1]
    if pick is None:
        return "(no frame below the worker: a blocking system call)"
    fn = pick.filename
    i = fn.rfind(f"{os.sep}nbprof{os.sep}")
    fn = fn[i + 1:] if i >= 0 else os.path.basename(fn)
    return f"{fn}:{pick.lineno} in {pick.name}"


def _problem(outcome: str, stage: str, exc: BaseException) -> dict:
    return {"outcome": outcome, "stage": stage, "exc_type": type(exc).__name__,
            "message": str(exc)[:500], "where": where_of(exc.__traceback__),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-20000:]}


def _classify(exc: BaseException) -> str:
    from nbprof.errors import NbprofError

    if isinstance(exc, CaseTimeout):
        return "HANG"
    return "nbprof-error" if isinstance(exc, NbprofError) else "FOREIGN"


# --------------------------------------------------------------------------- Kineto accounting

def kineto_expected(path: str) -> dict | None:
    """Per-kind event counts from a stdlib-json parse of the file (None when it does not parse or
    has no events array: the invariant is only checked where it is well defined)."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            return None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError, MemoryError):
        return None
    evs = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(evs, list):
        return None
    c = {"total": len(evs), "main": 0, "flow": 0, "side": 0, "other": 0}
    for e in evs:
        ph = e.get("ph") if isinstance(e, dict) else None
        if not isinstance(ph, str):
            c["other"] += 1
        elif ph == "X":
            c["main"] += 1
        elif ph in ("i", "I"):
            if e.get("name") == "[memory]":
                c["main"] += 1
            elif e.get("s") == "g":
                c["side"] += 1  # global instants: viewer markers, left out by design
            else:
                c["main"] += 1
        elif ph in ("s", "f", "t"):
            c["flow"] += 1
        elif ph in ("M", "C"):
            c["side"] += 1  # thread names (deduplicated) / counters (one row per series)
        else:
            c["other"] += 1
    return c


def kineto_accounting(trace, exp: dict) -> str | None:
    """None when the trace's tables and its report account for the file's events, else (class, detail).

    kept_main = events rows + memory rows (X and non-global instants go there, or are reported
    dropped); kept_flow = start/finish sides present in the flows table (every flow event appears
    in exactly one row side). Metadata (M), counters (C) and global instants have no 1:1 row, so
    they only widen the allowed range: total - kept - side <= dropped <= total - kept.
    """
    kept_main = len(trace.events) + len(trace.memory)
    fl = trace.flows
    if len(fl):
        # every finish is in exactly one row; a start is in one row, or (one start, several
        # finishes: graph launches, reused ids) repeated on each of its finishes' rows
        src = (fl["src_ts_ns"] != -1) | (fl["src_pid"] != -1) | (fl["src_tid"] != -1)
        dst = (fl["dst_ts_ns"] != -1) | (fl["dst_pid"] != -1) | (fl["dst_tid"] != -1)
        paired = fl[src & dst]
        n_paired_src = len(paired[["id", "cat", "src_ts_ns", "src_pid", "src_tid"]].drop_duplicates())
        kept_flow = int(dst.sum()) + int((src & ~dst).sum()) + n_paired_src
    else:
        kept_flow = 0
    dropped = sum(i.count for i in trace.report.issues if i.action == "dropped" and not i.kind.startswith("metadata"))
    if kept_main > exp["main"]:
        return "rows invented", f"{kept_main} events+memory rows but only {exp['main']} X/instant events in the file"
    if kept_flow > exp["flow"]:
        return "flow sides invented", f"{kept_flow} flow sides but only {exp['flow']} flow events in the file"
    lo = exp["total"] - kept_main - kept_flow - exp["side"]
    hi = exp["total"] - kept_main - kept_flow
    if not lo <= dropped <= hi:
        return ("events lost without a report entry" if dropped < lo else "more drops reported than events missing",
                (f"file {exp['total']} events (main {exp['main']}, flow {exp['flow']}, side {exp['side']}, other "
                 f"{exp['other']}); kept main {kept_main}, flow sides {kept_flow}; report drops {dropped}, "
                 f"expected between {lo} and {hi}"))
    return None


# --------------------------------------------------------------------------- one case

def run_case(req: dict) -> dict:
    import nbprof

    target, path = req["target"], req["path"]
    problems: list[dict] = []
    status = "ok-clean"
    _CASE["block"] = max(0.5, 2.0 * float(req["timeout"]))
    _CASE["wall_max"] = 30.0 * float(req["timeout"])
    _arm(float(req["timeout"]))
    result = None
    try:
        try:
            if target == "deepspeed":
                from nbprof.deepspeed import parsers as P

                for name in DS_CALLS:
                    try:
                        r = getattr(P, name)(Path(path))
                        if name == "parse_log":
                            result = r
                    except CaseTimeout:
                        raise
                    except BaseException as exc:  # classified
                        problems.append(_problem(_classify(exc), f"deepspeed.{name}", exc))
                if result is not None:
                    q = getattr(result, "quirks", None)
                    if q is not None and len(q):
                        status = "ok-repaired"
            elif target == "archive":
                from nbprof.scale import load_ranks

                try:
                    job = load_ranks(path, on_error="skip", progress=False, workers=1, cache=False)
                    if len(job.failed):
                        status = "ok-repaired"
                    result = next(iter(job.traces()), None)
                except CaseTimeout:
                    raise
                except BaseException as exc:  # classified
                    problems.append(_problem(_classify(exc), "load", exc))
                problems += _escaped(req)
                if result is not None:
                    problems += _check_loaded(result, req)
            else:
                kw = {"strict": False} if req.get("strict_kw", True) else {}
                try:
                    result = nbprof.load(path, **kw)
                except CaseTimeout:
                    raise
                except BaseException as exc:  # classified
                    problems.append(_problem(_classify(exc), "load", exc))
                if result is not None:
                    rep = getattr(result, "report", None)
                    if rep is not None and not rep.clean:
                        status = "ok-repaired"
                    problems += _check_loaded(result, req)
        except CaseTimeout as exc:
            problems.append(_problem("HANG", "timeout", exc))
    finally:
        _disarm()
    return {"outcome": status, "problems": problems, "accounting_checked": bool(req.get("_acct"))}


def _check_loaded(result, req: dict) -> list[dict]:
    from nbprof.trace import Trace

    problems = []
    if isinstance(result, Trace):
        if req["target"] == "kineto":
            exp = kineto_expected(req["path"])
            req["_acct"] = exp is not None
            if exp is not None:
                bad = kineto_accounting(result, exp)
                if bad:
                    problems.append({"outcome": "ACCOUNTING", "stage": "accounting", "exc_type": "-",
                                     "message": bad[1], "where": f"kineto accounting: {bad[0]}", "traceback": bad[1]})
        if req.get("analyses"):
            import importlib

            for mod, fn in ANALYSES:
                try:
                    r = getattr(importlib.import_module(f"nbprof.analysis.{mod}"), fn)(result)
                    if fn == "advise":
                        from nbprof.analysis.advisor import findings_frame

                        findings_frame(r)
                except CaseTimeout:
                    raise
                except BaseException as exc:  # classified
                    problems.append(_problem(_classify(exc), f"analysis.{fn}", exc))
        if req.get("analyses") and req["target"] in ("kineto", "saved", "archive"):
            problems += export_reload(result, req)
        if req.get("html"):
            problems += _html(result, req)
        return problems
    from nbprof.sources.memory_snapshot import MemorySnapshot, MemoryTimeline

    if req.get("analyses") and isinstance(result, (MemorySnapshot, MemoryTimeline)):
        from nbprof.analysis import memory_snapshot as MS

        for fn in SNAPSHOT_ANALYSES if isinstance(result, MemorySnapshot) else TIMELINE_ANALYSES:
            try:
                getattr(MS, fn)(result)
            except CaseTimeout:
                raise
            except BaseException as exc:  # classified
                problems.append(_problem(_classify(exc), f"analysis.{fn}", exc))
        if req.get("html") and isinstance(result, MemorySnapshot):
            problems += _html(result, req)
    return problems


def export_reload(trace, req: dict) -> list[dict]:
    """The Chrome export of a loaded trace, loaded again, keeps every events and memory row, except rows the
    second load's report says it dropped (``ACCOUNTING``, where "export re-load"); an export or re-load
    that raises is classified like a load."""
    import nbprof

    out = Path(req["outdir"]) / "back.pt.trace.json"
    try:
        trace.to_chrome_trace(out)
        back = nbprof.load(out)
    except CaseTimeout:
        raise
    except BaseException as exc:  # classified
        return [_problem(_classify(exc), "export-reload", exc)]
    finally:
        if out.exists():
            out.unlink()
    dropped = sum(i.count for i in back.report.issues if i.action == "dropped")
    n0, n1 = len(trace.events) + len(trace.memory), len(back.events) + len(back.memory)
    if n1 + dropped != n0 or (not dropped and (len(back.events), len(back.memory)) != (len(trace.events), len(trace.memory))):
        msg = (f"exported {len(trace.events)} events + {len(trace.memory)} memory rows, read back {len(back.events)} + "
               f"{len(back.memory)}, the re-load reports {dropped} dropped: {[(i.kind, i.count) for i in back.report.issues]}")
        return [{"outcome": "ACCOUNTING", "stage": "export-reload", "exc_type": "-", "message": msg,
                 "where": "export re-load: rows lost or invented", "traceback": msg}]
    return []


def _escaped(req: dict) -> list[dict]:
    """``WROTE-OUTSIDE`` when an archive member named to escape (``containers.ESCAPE_MARK``) was written outside
    the extraction folder: the case's folder, its parent, the system temporary folder or ``/tmp``."""
    import tempfile

    from tests.fuzz.containers import ESCAPE_MARK

    case = Path(req["path"]).parent
    found = [str(d / ESCAPE_MARK) for d in {case, case.parent, Path(tempfile.gettempdir()), Path("/tmp")}
             if (d / ESCAPE_MARK).exists() or (d / ESCAPE_MARK).is_symlink()]
    if not found:
        return []
    for f in found:
        with contextlib.suppress(OSError):
            os.unlink(f)
    msg = f"an archive member was written outside the extraction folder: {found}"
    return [{"outcome": "WROTE-OUTSIDE", "stage": "archive", "exc_type": "-", "message": msg,
             "where": "archive extraction", "traceback": msg}]


def _html(result, req: dict) -> list[dict]:
    from nbprof.viz.static import to_html

    out = Path(req["outdir"]) / "page.html"
    # the static page takes ~1 s (bokeh): its own, longer alarm
    _CASE["wall_max"] = 30.0 * float(req.get("html_timeout", 20))
    _arm(max(float(req["timeout"]), float(req.get("html_timeout", 20))))
    try:
        obj = result
        from nbprof.sources.memory_snapshot import MemorySnapshot

        if isinstance(result, MemorySnapshot):
            from nbprof.viz.memory_snapshot import memory_snapshot_view

            obj = memory_snapshot_view(result)
        to_html(obj, out, overwrite=True)
        return []
    except CaseTimeout:
        raise
    except BaseException as exc:  # classified
        return [_problem(_classify(exc), "viz.to_html", exc)]


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything a loader prints goes to stderr, not into the protocol
    sys.stdout = sys.stderr
    warnings.simplefilter("ignore")
    try:
        import resource

        mb = int(os.environ.get("NBPROF_FUZZ_MEM_MB", "3072"))
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    except (ImportError, ValueError, OSError):
        pass
    if os.environ.get("NBPROF_FUZZ_RECURSION"):  # default: Python's own limit, as in a user's process
        sys.setrecursionlimit(int(os.environ["NBPROF_FUZZ_RECURSION"]))
    signal.signal(signal.SIGPROF, _alarm_cpu)
    signal.signal(signal.SIGALRM, _alarm_wall)
    import nbprof
    import nbprof.analysis.advisor
    import nbprof.deepspeed.parsers
    import nbprof.viz.memory_snapshot
    import nbprof.viz.static
    for mod in ("timeline", "operators", "memory", "overview"):
        __import__(f"nbprof.viz.{mod}")
    import bokeh.embed
    import bokeh.resources  # noqa: F401

    import nbprof.analysis.memory_snapshot
    for mod, _fn in ANALYSES:
        __import__(f"nbprof.analysis.{mod}")

    # the imported modules (pandas, bokeh, nbprof: ~10^6 objects) never die: out of the collector's reach, and
    # fewer young-generation passes over the analyses' many short-lived frames (measured: ~10-15 % of a
    # Kineto case's CPU time); cycles are still collected, only less often
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(20000, 20, 100)
    proto.write(json.dumps({"hello": nbprof.__file__}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        c0 = time.process_time()
        try:
            res = run_case(req)
        except BaseException as exc:  # the worker itself must survive a case
            res = {"outcome": "ok-clean", "problems": [_problem("FOREIGN", "worker", exc)]}
        res["id"] = req["id"]
        res["cpu_s"] = time.process_time() - c0
        proto.write(json.dumps(res, default=str) + "\n")


if __name__ == "__main__":
    main()
