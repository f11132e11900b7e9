"""The ``nbprof`` command: thin glue over the library (argument parsing only).

Conventions (each held by a subprocess test in tests/test_cli.py): data on stdout, diagnostics on stderr;
``-o/--output`` is the output everywhere; a trace may be given positionally; ``--format json`` is pure JSON;
a closed pipe (``nbprof summary T | head``) ends quietly; exit codes are :data:`EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import time
from typing import Any

from .atomic import atomic_write
from .registry import Registry
from .sources import suffixes as _loader_suffixes

__all__ = ["main", "EXIT_CODES", "STATS_REPORTS"]

#: exit status -> meaning (also in ``nbprof --help`` and the README)
EXIT_CODES = {
    0: "success (for check: no regression beyond the threshold)",
    1: "a gate failed: nbprof check found a step-time regression beyond --max-regress",
    2: "bad input or usage: unknown option, missing or unreadable file, missing optional dependency, bare nbprof",
    3: "a run failed: the profiled script or a report notebook raised (its output is shown)",
}

#: ``nbprof stats`` reports: the ``nsys stats`` names (nsys's column headers) and nbprof's own analyses
NSYS_REPORTS = ("cuda_gpu_kern_sum", "cuda_api_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "nvtx_sum",
                "osrt_sum", "nvtx_pushpop_trace", "nvtx_gpu_proj_trace")
NBPROF_REPORTS = ("ops", "kernels", "steps", "idle", "collectives", "findings", "annotations", "aten_kernels")
#: report name -> ``f(trace) -> DataFrame`` (int64 ns / bytes), imported when the report runs
REPORTS = Registry("report", error=ValueError)
for _n in NSYS_REPORTS:
    REPORTS.register(_n, f"nbprof.analysis.nsys_stats:{_n}")
REPORTS.register("ops", "nbprof.analysis.operators:operator_summary")
REPORTS.register("kernels", "nbprof.analysis.kernels:kernel_summary")
REPORTS.register("steps", "nbprof.analysis.steps:step_breakdown")
REPORTS.register("idle", "nbprof.analysis.utilization:idle_breakdown")
REPORTS.register("collectives", "nbprof.analysis.distributed.comms:collectives")
REPORTS.register("findings", "nbprof.cli:_findings")
REPORTS.register("annotations", "nbprof.analysis.annotations:annotation_breakdown")
REPORTS.register("aten_kernels", "nbprof.analysis.launch_ops:aten_op_kernels")
STATS_REPORTS = REPORTS.keys()
#: what ``nbprof stats`` runs without ``-r`` (the reports ``nsys stats`` runs by default)
DEFAULT_REPORTS = ("nvtx_sum", "osrt_sum", "cuda_api_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum",
                   "cuda_gpu_mem_size_sum")
_EXT = {"table": "txt", "csv": "csv", "json": "json", "parquet": "parquet"}
#: what a trace path looks like: the loaders' suffixes (nbprof.sources.FORMATS) and the Perfetto export's
_TRACE_SUFFIXES = (*_loader_suffixes(), ".pftrace")


class _CliError(Exception):
    """A one-line error for the user (``nbprof <cmd>: error: <msg>``) with its exit status."""

    def __init__(self, msg: str, rc: int = 2) -> None:
        super().__init__(msg)
        self.rc = rc


def _fail(cmd: str, msg: str, rc: int = 2) -> int:
    """Print ``nbprof <cmd>: error: <msg>`` on stderr (no traceback) and return ``rc``."""
    print(f"nbprof {cmd}: error: {msg}", file=sys.stderr)
    return rc


def _note(msg: str) -> None:
    print(msg, file=sys.stderr)


def _echo(line: str) -> None:
    """A line the profiled script printed, as it runs: on stderr (stdout is the command's result)."""
    sys.stderr.write(line)
    sys.stderr.flush()


class _Parser(argparse.ArgumentParser):
    """argparse with hints: a misspelt command or option gets "did you mean", a stray path the right form."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        hint = _hint(self, message)
        self.exit(2, f"{self.prog}: error: {message}\n" + (f"hint: {hint}\n" if hint else ""))


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings]


def _hint(parser: argparse.ArgumentParser, message: str) -> str:
    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if m:
        choices = re.findall(r"'([^']*)'", m.group(2))
        close = difflib.get_close_matches(m.group(1), choices, n=1)
        if close:
            return f"did you mean {close[0]!r}?"
        return f"run '{parser.prog} --help' for the choices"
    m = re.search(r"unrecognized arguments: (.*)", message)
    if m:
        positional_trace = any(a.dest == "trace" and not a.option_strings for a in parser._actions)
        for tok in m.group(1).split():
            if tok.startswith("-"):
                if positional_trace and tok.split("=")[0] in ("--trace", "--input", "--file", "-i"):
                    return f"the trace is positional: {parser.prog} TRACE [options]"
                close = difflib.get_close_matches(tok.split("=")[0], _options(parser), n=1, cutoff=0.75)
                if close:
                    return f"did you mean {close[0]}?"
            elif os.path.exists(tok) or tok.endswith(_TRACE_SUFFIXES):
                if parser.prog.endswith("check"):
                    return f"{parser.prog} --baseline A --candidate B (or {parser.prog} A B)"
                return f"{parser.prog} takes one trace: {parser.prog} TRACE [options]"
        return f"see '{parser.prog} --help'"
    if "-r/--report: expected one argument" in message:
        return f"reports: {', '.join(STATS_REPORTS)}"
    if "the following arguments are required" in message or "expected one argument" in message:
        return f"see '{parser.prog} --help'"
    return ""


def _load(cmd: str, path: str, *, strict: bool = False) -> Any:
    """``nbprof.load(path)`` with every failure as a :class:`_CliError` (exit 2) naming the path."""
    from . import load
    from .errors import MissingDependencyError, NbprofError

    try:
        return load(path, strict=strict)
    except FileNotFoundError as exc:  # "no such trace file: 'x.json'", not "[Errno 2] no such trace file: ..."
        raise _CliError(f"{exc.strerror}: {exc.filename!r}" if exc.strerror and exc.filename else str(exc)) from None
    except MissingDependencyError as exc:
        raise _CliError(str(exc)) from None
    except NbprofError as exc:
        hint = ""
        if strict:
            hint = "\nhint: without --strict nbprof repairs what it can and lists the repairs in the load report"
        raise _CliError(f"cannot read the trace: {exc}{hint}") from None
    except OSError as exc:  # no permission, I/O error, ...
        raise _CliError(f"cannot read {path!r}: {exc.strerror or exc}") from None


# ----------------------------------------------------------------------------------------------------- summary
def _cmd_summary(args: argparse.Namespace) -> int:
    """Load one trace; print its summary and load report (text, or one JSON object with ``--format json``)."""
    from .results.cli_render import summary_text

    _output_folder(args.output)
    tr = _load("summary", args.trace, strict=bool(args.strict))
    if args.format == "json":
        doc = dict(tr.summary())
        doc["load_report"] = [{"kind": i.kind, "action": i.action, "count": i.count, "message": i.message,
                               "offset": i.offset} for i in tr.report.issues]
        _write(args, json.dumps(doc, indent=1, default=str) + "\n")
    else:
        _write(args, summary_text(tr.summary(), tr.report))
    return 0


def _output_folder(output: str | None) -> None:
    """Fail (exit 2, before any work) when ``-o`` points into a folder that does not exist."""
    if not output:
        return
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise _CliError(f"-o {output!r}: the folder {parent!r} does not exist (create it first, e.g. mkdir -p)")


def _write_file(path: str, data: str | bytes) -> None:
    """``data`` to ``path`` (text as UTF-8); an OS error (no folder, no permission, disk full) is a :class:`_CliError`."""
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise _CliError(f"cannot write {path!r}: {exc.strerror or exc}") from None
    _note(f"wrote {path}")


def _write(args: argparse.Namespace, text: str) -> None:
    """``text`` to ``-o FILE`` when given (the path is noted on stderr), else stdout."""
    out = getattr(args, "output", None)
    if out:
        _write_file(out, text)
    else:
        sys.stdout.write(text)


# ------------------------------------------------------------------------------------------------------- stats
def _report_names(spec: list[str]) -> list[str]:
    from .analysis.nsys_stats import REPORT_NAMES

    old = {v[0]: k for k, v in REPORT_NAMES.items()}  # 2022 names (gpukernsum) are accepted too
    names: list[str] = []
    for part in spec:
        for n in (x.strip() for x in part.split(",")):
            if not n:
                continue
            n = old.get(n, n)
            if n not in STATS_REPORTS:
                close = difflib.get_close_matches(n, STATS_REPORTS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise _CliError(f"unknown report {n!r}{hint}; known: {', '.join(STATS_REPORTS)}")
            if n not in names:
                names.append(n)
    return names


def _compute(name: str, tr: Any) -> Any:
    return REPORTS.resolve(name)(tr)


def _findings(tr: Any) -> Any:
    """The ``findings`` report: the advisor's findings as a frame."""
    from .analysis.advisor import advise, findings_frame

    return findings_frame(advise(tr))


def _render(name: str, df: Any, fmt: str, path: str) -> str | bytes:
    from .results.cli_render import machine_frame, nsys_columns, stats_text

    if fmt == "table":
        return stats_text(name, df, nsys=name in NSYS_REPORTS, path=path)
    frame = machine_frame(nsys_columns(df) if name in NSYS_REPORTS else df)
    if fmt == "csv":
        return str(frame.to_csv(index=False))
    if fmt == "json":
        return json.dumps(json.loads(frame.to_json(orient="records", default_handler=str)), indent=1) + "\n"
    import io

    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    return buf.getvalue()


def _job(args: argparse.Namespace) -> Any:
    """The job dataset of ``--ranks DIR`` (``nbprof.job.build_job``: written or brought up to date in ``--dataset
    PATH``, else a cache folder), opened; every rank that could not be loaded is named on stderr."""
    import warnings

    from .errors import NbprofError
    from .job import build_job

    if not os.path.exists(args.ranks):
        raise _CliError(f"--ranks {args.ranks!r} does not exist")
    try:
        with warnings.catch_warnings():  # the skipped ranks are noted below, once
            warnings.simplefilter("ignore", UserWarning)
            job = build_job(args.ranks, getattr(args, "dataset", None), progress=False)
    except (FileNotFoundError, NbprofError) as exc:
        raise _CliError(f"--ranks {args.ranks!r}: {exc}") from None
    for n, e in job.failed.items():
        _note(f"note: {n}: not loaded, skipped: {e}")
    return job


def _cmd_stats_ranks(args: argparse.Namespace) -> int:
    """``nbprof stats --ranks DIR``: the job's reports from its dataset's reductions (``nbprof.job.Job.reports``)."""
    if args.trace:
        raise _CliError(f"give a trace or --ranks DIR, not both ({args.trace!r})")
    job = _job(args)
    avail = job.reports()
    names = [n.strip() for part in args.report for n in part.split(",") if n.strip()] or list(job.DEFAULT_REPORTS)
    for n in names:
        if n not in avail:
            raise _CliError(f"unknown report {n!r} for --ranks; known: {', '.join(avail)}")
    if args.format == "parquet" and not args.output:
        raise _CliError("-f parquet writes files: give -o BASE (writes BASE_<report>.parquet)")
    _output_folder(args.output)
    outputs = []
    for n in dict.fromkeys(names):
        df = avail[n]()
        if not len(df):
            _note(f"SKIPPED: {args.ranks} has no data for the {n} report")
            continue
        outputs.append((n, _render(n, df, args.format, args.ranks)))
    return _emit(args, outputs, names)


def _cmd_stats(args: argparse.Namespace) -> int:
    """``nsys stats`` for any trace: each report on stdout, or in ``<BASE>_<report>.<ext>`` with ``-o BASE``."""
    if getattr(args, "ranks", None):
        return _cmd_stats_ranks(args)
    names = _report_names(args.report) if args.report else (
        ["steps"] if os.path.isdir(args.trace) else list(DEFAULT_REPORTS))
    if args.format == "parquet" and not args.output:
        raise _CliError("-f parquet writes files: give -o BASE (writes BASE_<report>.parquet)")
    _output_folder(args.output)
    from .sources.watch_run import is_run_dir, read_run

    run = read_run(args.trace) if is_run_dir(args.trace) else None
    if run is not None and names != ["steps"]:
        raise _CliError(f"{args.trace!r} is a watch run folder: its report is -r steps (the per-step log)")
    tr = None if run is not None else _load("stats", args.trace)
    outputs: list[tuple[str, str | bytes]] = []
    for n in names:
        df = run.steps if run is not None else _compute(n, tr)
        if not len(df):
            _note(f"SKIPPED: {args.trace} has no data for the {n} report")
            continue
        outputs.append((n, _render(n, df, args.format, args.trace)))
    if not outputs and not args.report and run is None:  # a CPU-only Kineto trace has none of the nsys reports
        _note(f"hint: none of the nsys stats reports has data in {args.trace}; nbprof's own reports read any trace: "
              f"nbprof stats {args.trace} -r ops,steps,findings")
    return _emit(args, outputs, names)


def _emit(args: argparse.Namespace, outputs: list[tuple[str, str | bytes]], names: list[str]) -> int:
    """Write the rendered reports: ``BASE_<report>.<ext>`` with ``-o BASE``, else stdout (one JSON document for
    several JSON reports, ``# <report>`` headers between CSV ones)."""
    if args.output:
        for n, data in outputs:
            _write_file(f"{args.output}_{n}.{_EXT[args.format]}", data)
        return 0
    if args.format == "json" and len(names) > 1:  # one JSON document: {report: rows}
        doc = {n: json.loads(data) for n, data in outputs}
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
        return 0
    for i, (n, data) in enumerate(outputs):
        if args.format == "csv" and len(names) > 1:
            sys.stdout.write(("\n" if i else "") + f"# {n}\n")
        sys.stdout.write(str(data))
    return 0


# ------------------------------------------------------------------------------------------------------- check
def _threshold(text: str) -> float:
    s = text.strip()
    try:
        v = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        raise _CliError(f"--max-regress {text!r}: give a percentage (5%) or a fraction (0.05)") from None
    if not s.endswith("%") and v >= 1:
        raise _CliError(f"--max-regress {text!r}: a fraction below 1 (0.05) or a percentage (5%)")
    if v < 0:
        raise _CliError(f"--max-regress {text!r} is negative")
    return v


def _cmd_check(args: argparse.Namespace) -> int:
    """Compare per-step times of two traces (bootstrap interval); exit 1 on a regression beyond the threshold."""
    from .analysis.regression import check_regression
    from .analysis.steps import step_times
    from .results.cli_render import check_markdown

    pos = list(args.traces)
    base = args.baseline or (pos.pop(0) if pos else None)
    cand = args.candidate or (pos.pop(0) if pos else None)
    if pos or not base or not cand:
        raise _CliError("give two traces: --baseline A --candidate B (or nbprof check A B)")
    thr = _threshold(args.max_regress)
    def load(path: str) -> tuple[Any, tuple[str, int] | None]:  # a watch run folder (nbprof watch) or a trace
        from .sources.watch_run import is_run_dir, read_run, run_step_times

        if is_run_dir(path):
            return run_step_times(read_run(path)), None
        tr = _load("check", path)
        return step_times(tr), _hardware(tr)

    try:
        (a, ha), (b, hb) = load(base), load(cand)
        if not args.allow_different_hardware and ha is not None and hb is not None and ha != hb:
            raise _CliError(f"the runs differ in hardware: baseline {ha[0]} x{ha[1]} ranks, candidate {hb[0]} "
                            f"x{hb[1]} ranks; step times of different devices or world sizes are not a regression "
                            "check (--allow-different-hardware compares them anyway)")
        for path, v in ((base, a), (cand, b)):
            if not len(v):
                raise ValueError(f"{path}: no host events, so no step times to compare")
            if args.skip >= len(v):
                raise ValueError(f"{path}: --skip {args.skip} leaves none of its {len(v)} steps")
        a, b = a[args.skip:], b[args.skip:]
        res = check_regression(a, b, max_regress=thr, statistic=args.statistic, confidence=args.confidence,
                               resamples=args.resamples, seed=args.seed)
    except ValueError as exc:
        raise _CliError(str(exc)) from None
    res.baseline, res.candidate = base, cand
    text = json.dumps(res.to_dict(), indent=1) + "\n" if args.format == "json" else check_markdown(res)
    _write(args, text)
    if res.failed:
        _note(f"nbprof check: regression: step time {args.statistic} x{res.ratio:.3f} "
              f"(interval {res.ci_low:.3f}-{res.ci_high:.3f}) exceeds --max-regress {args.max_regress}")
    return 1 if res.failed else 0


def _hardware(trace: Any) -> tuple[str, int]:
    """(device names, world size) of a trace: what two runs must share for their step times to be compared."""
    names = sorted(str(d.get("name", "")) for d in (trace.meta.device_properties or []))
    return (", ".join(names) if names else "no GPU", int(getattr(trace.meta, "world_size", 1) or 1))


# ------------------------------------------------------------------------------------------------------ export
def _cmd_export(args: argparse.Namespace) -> int:
    """Write a trace as Perfetto protobuf (``Trace.to_perfetto``) or Chrome trace JSON (``Trace.to_chrome_trace``)."""
    fmt = "perfetto" if args.perfetto else "chrome" if args.chrome else None
    if fmt is None:
        low = args.output.lower()
        fmt = "perfetto" if low.endswith((".pftrace", ".perfetto-trace", ".pb")) else (
            "chrome" if low.endswith((".json", ".json.gz")) else None)
        if fmt is None:
            raise _CliError(f"-o {args.output!r}: say --perfetto or --chrome (or end the name in .pftrace / .json)")
    method = {"perfetto": "to_perfetto", "chrome": "to_chrome_trace"}[fmt]
    _output_folder(args.output)
    tr = _load("export", args.trace)
    try:
        rep = getattr(tr, method)(args.output)
    except OSError as exc:
        raise _CliError(f"cannot write {args.output!r}: {exc.strerror or exc}") from None
    _note(f"wrote {args.output} ({rep})")
    return 0


# -------------------------------------------------------------------------------------------------- demo/report
def _cmd_demo(args: argparse.Namespace) -> int:
    """Profile the bundled CNN example on this machine and print the trace summary."""
    import importlib.util

    from .report import ReportError, bundled_example, run_workload
    from .results.cli_render import summary_text

    try:
        script = bundled_example("train_cnn.py")
    except ReportError as exc:
        raise _CliError(f"{exc}\nhint: or profile your own script with `nbprof report --script your_script.py`") from None
    if importlib.util.find_spec("torch") is None:
        raise _CliError(f"the demo trains a small CNN with PyTorch, which is not installed in {sys.executable}\n"
                        "hint: pip install 'nbprof[examples]'")
    out = os.path.join(os.path.abspath(args.output or args.out), time.strftime("demo-%Y%m%d-%H%M%S"))
    try:
        art = run_workload(str(script), (), out, steps=args.steps, use_nsys=False, tensorboard=False)
    except ReportError as exc:
        return _fail("demo", str(exc), 3)
    tr = _load("demo", str(art.trace))
    sys.stdout.write(summary_text(tr.summary(), tr.report))
    return 0


def _classify_inputs(args: argparse.Namespace) -> None:
    """Positional inputs of ``nbprof report``: a folder is a --logdir, .sqlite/.nsys-rep a --nsys report,
    other files the --trace then the --compare-trace."""
    for p in args.inputs:
        low = p.lower()
        if os.path.isdir(p):
            field = "logdir"
        elif low.endswith((".sqlite", ".nsys-rep")):
            field = "nsys_report"
        else:
            field = "trace" if not args.trace else "compare_trace"
        if getattr(args, field):
            raise _CliError(f"{p!r}: already have --{field.replace('_', '-')} {getattr(args, field)!r}")
        setattr(args, field, p)


def _capture_args(args: argparse.Namespace) -> list[str]:
    """``report``'s schedule flags as ``python -m nbprof.capture.script`` flags (empty when none was given)."""
    out = [x for f in ("wait", "warmup", "active") if getattr(args, f) is not None
           for x in (f"--{f}", str(getattr(args, f)))]
    out += ["--whole-run"] if args.whole_run else []
    if out and not args.script:
        raise _CliError(f"{' '.join(a for a in out if a.startswith('--'))}: a schedule applies to --script only")
    if out and args.watch:
        raise _CliError("--watch chooses its own capture windows: no --wait/--warmup/--active/--whole-run with it")
    return out


def _cmd_report(args: argparse.Namespace) -> int:
    """Run the workflow notebooks (on a fresh run of --script, or on given artefacts) into one HTML page."""
    from .report import Artefacts, ReportError, ReportInputError, build_report, run_workload

    # papermill -> nbformat -> jsonschema imports rfc3987-syntax when installed, which compiles ~35 Earley grammars
    # at import (about 1 s; python-jsonschema/jsonschema#1428, opendatahub-io/notebooks#3532). No notebook schema
    # uses the "iri" format: this command's own process goes without that one format checker.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    _classify_inputs(args)
    capture_args = _capture_args(args)
    out_file = None
    out_dir = args.out
    if args.output:  # -o FILE.html writes that file; -o DIR a folder (a new report-<time> folder inside)
        if args.output.lower().endswith((".html", ".htm")):
            out_file = args.output
        elif os.path.isdir(args.output) or args.output.endswith(os.sep) or not os.path.splitext(args.output)[1]:
            out_dir = args.output
        else:
            raise _CliError(f"-o {args.output!r}: the report is one .html file (-o report.html) or a folder (-o DIR)")
    if out_file and os.path.lexists(out_file) and not args.force:  # checked before a workload runs for minutes
        raise _CliError(f"-o {out_file!r} exists: pass --force to replace it")
    out = os.path.abspath(out_dir)
    # every given path is checked before anything runs (a workload can take minutes)
    given = [("script", args.script)] + [(f, getattr(args, f)) for f in ("trace", "compare_trace", "nsys_report", "logdir", "ds_log")]
    given += [("ds_trace", p) for p in args.ds_trace]
    for field, val in given:
        if val and not os.path.exists(val):
            flag = "--nsys" if field == "nsys_report" else "--" + field.replace("_", "-")
            raise _CliError(f"{flag} {val!r} does not exist")
    if args.script and not os.path.isfile(args.script):
        raise _CliError(f"--script {args.script!r} is a directory, not a Python script")
    if not (args.script or args.trace or args.nsys_report or args.logdir or args.ds_log or args.ds_trace or args.ranks):
        raise _CliError("nothing to report on: give --script or at least one of "
                        "--trace/--nsys/--logdir/--ds-log/--ds-trace/--ranks")
    if args.ranks:  # step 4 analyses the job from its dataset (docs/dataset.md), built or updated here
        args.ds_trace = [*args.ds_trace, _job(args).path]
    try:
        if args.script:
            art = run_workload(args.script, args.script_args, os.path.join(out, time.strftime("run-%Y%m%d-%H%M%S")),
                               steps=args.steps, use_nsys=not args.no_nsys, watch=args.watch,
                               capture_args=capture_args, log=_note, echo=_echo)
        else:
            art = Artefacts()
        for field in ("trace", "compare_trace", "nsys_report", "logdir", "ds_log"):
            val = getattr(args, field)
            if val:
                setattr(art, field, os.path.abspath(val))
        art.ds_traces += [os.path.abspath(p) for p in args.ds_trace]
        for n in art.notes:
            _note(f"note: {n}")
        html = build_report(art, out, progress=not args.no_progress, output=out_file, overwrite=args.force)
    except ReportInputError as exc:  # a bad --trace/--nsys/... (a folder, not a trace): bad input, exit 2
        raise _CliError(str(exc)) from None
    except ReportError as exc:
        print(f"nbprof report: error: {exc}", file=sys.stderr)
        if exc.notebook:
            print(f"the executed notebook with the error is kept at {exc.notebook}", file=sys.stderr)
        return 3
    print(f"report: {html}")
    return 0


# ------------------------------------------------------------------------------------------------------- watch
def _cmd_watch(args: argparse.Namespace) -> int:
    """Run a script under the step watch (``nbprof.watching.run_script``); print the watched run's summary."""
    from .analysis.watch import what_grew
    from .results.watch_render import watch_text
    from .sources.watch_run import read_run
    from .watching import captured, default_run_dir, run_script

    if not os.path.isfile(args.script):
        why = "is a directory, not a Python script" if os.path.isdir(args.script) else "no such file"
        raise _CliError(f"script {args.script!r}: {why}")
    run_dir = args.output or str(default_run_dir(args.out))
    kw = {"k": args.k, "min_excess_ns": int(args.min_excess_ms * 1e6), "capture_steps": args.capture_steps,
          "max_captures": args.max_captures}
    try:
        code, _ = run_script(args.script, args.script_args, run_dir, **kw)
    except Exception as exc:
        from .capture.script import raised_in

        if raised_in(exc, args.script):  # the script raised: its own traceback (no nbprof frames), exit 3
            return _script_raised(exc, args.script, run_dir)
        if isinstance(exc, ValueError):  # bad watch settings (raised before the script runs)
            raise _CliError(str(exc)) from None
        raise
    run = read_run(run_dir)
    sys.stdout.write(watch_text(run_dir, run.steps, what_grew(run.steps), captured(run_dir), run.summary))
    return int(code)


def _script_raised(exc: BaseException, script: str, run_dir: str) -> int:
    """Show the exception a watched script raised as Python would (its own frames only), say what was kept;
    exit status 3 (:data:`EXIT_CODES`: a run failed)."""
    from .capture.script import format_script_exception

    sys.stderr.write(format_script_exception(exc, script))
    _note(f"nbprof watch: error: the script {script!r} raised {type(exc).__name__}; the steps watched until then "
          f"are in {run_dir}")
    return 3


# ------------------------------------------------------------------------------------------------------ parser
_TRACE_HELP = ("a trace file: Kineto JSON (.json, .json.gz), Nsight Systems (.sqlite, .nsys-rep), "
               "CUDA allocator snapshot (.pickle), export_memory_timeline rows (.raw.json.gz)")


def _version() -> str:
    from . import __version__

    return f"nbprof {__version__}"


def _parser() -> tuple[_Parser, dict[str, _Parser]]:
    codes = "\n".join(f"  {k}  {v}" for k, v in EXIT_CODES.items())
    p = _Parser(
        prog="nbprof",
        description="Notebook-first performance workbench for AI training.",
        epilog=(
            "examples:\n"
            "  nbprof summary run.pt.trace.json.gz             # what a trace holds, and what the loader repaired\n"
            "  nbprof summary --format json run.json | jq .steps\n"
            "  nbprof stats report.sqlite -r cuda_gpu_kern_sum -f csv   # nsys stats for any trace\n"
            "  nbprof check --baseline main.json --candidate pr.json --max-regress 5%   # CI gate\n"
            "  nbprof report run.pt.trace.json.gz -o report.html        # one offline HTML report\n"
            "  nbprof report --script train.py --steps 20      # profile a script, then report\n"
            "  nbprof watch -o runs/a train.py --lr 0.1        # time every step; profile the slow ones\n"
            "in Jupyter: %load_ext nbprof, then %%torchprof or %nsys (see README.md)\n\n"
            f"exit status:\n{codes}"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=_version(), help="print the version and exit")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)
    subs: dict[str, _Parser] = {}

    s = sub.add_parser("summary", help="load a trace and print its summary and load report")
    s.add_argument("trace", help=_TRACE_HELP)
    s.add_argument("--strict", action="store_true", help="fail on the first defect instead of repairing it (every format)")
    s.add_argument("-f", "--format", choices=("text", "json"), default="text",
                   help="text (default) or json: one JSON object, the load report under 'load_report'")
    s.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of stdout")
    s.set_defaults(func=_cmd_summary)
    subs["summary"] = s

    st = sub.add_parser("stats", help="nsys-stats-style reports (cuda_gpu_kern_sum, ...) and nbprof's analyses",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="reports:\n  nsys stats names (nsys's column headers; ns, bytes): " + ", ".join(NSYS_REPORTS)
                        + "\n  nbprof: " + ", ".join(NBPROF_REPORTS)
                        + "\n  default: " + ",".join(DEFAULT_REPORTS) + " (as nsys stats); empty ones are SKIPPED")
    st.add_argument("trace", nargs="?", default=None,
                    help=_TRACE_HELP + "; or an nbprof watch run folder (its per-step log: -r steps)")
    st.add_argument("--ranks", default=None, metavar="DIR",
                    help="the per-rank traces of one job (folder, glob or archive): reports from its Parquet dataset's "
                    "reductions (docs/dataset.md), not from every trace in memory")
    st.add_argument("--dataset", default=None, metavar="PATH",
                    help="with --ranks: the dataset folder to write or update (default: a folder in the nbprof cache)")
    st.add_argument("-r", "--report", action="append", default=[], metavar="REPORT[,REPORT]",
                    help="report(s) to compute (repeatable, comma-separated; 2022 nsys names such as gpukernsum too)")
    st.add_argument("-f", "--format", choices=tuple(_EXT), default="table",
                    help="table (default, for people), csv, json or parquet (needs -o)")
    st.add_argument("-o", "--output", default=None, metavar="BASE",
                    help="write BASE_<report>.<ext> per report (as nsys stats -o) instead of stdout")
    st.set_defaults(func=_cmd_stats)
    subs["stats"] = st

    c = sub.add_parser("check", help="CI gate: fail (exit 1) when the candidate's step time regressed",
                       description="Noise-aware step-time comparison: percentile bootstrap interval of the ratio of "
                       "the per-step time median (or mean), candidate / baseline, with a fixed seed; exit 1 when "
                       "the interval's lower bound exceeds --max-regress; 'inconclusive' (exit 0, with the smallest "
                       "detectable change) when the interval is too wide to rule such a slowdown out; exit 2 for "
                       "runs of different devices or world sizes (see nbprof.analysis.regression).")
    c.add_argument("traces", nargs="*", metavar="TRACE", help="baseline and candidate, when not given as options")
    c.add_argument("--baseline", "-a", default=None, metavar="A",
                   help="the reference: a trace, or an nbprof watch run folder (every watched step)")
    c.add_argument("--candidate", "-b", default=None, metavar="B", help="the run to check: a trace or a watch run folder")
    c.add_argument("--max-regress", default="5%", metavar="P", help="allowed slowdown: 5%% (default) or 0.05")
    c.add_argument("--statistic", choices=("median", "mean"), default="median", help="per-step statistic (default median)")
    c.add_argument("--skip", type=int, default=0, metavar="N", help="drop the first N steps of each trace (warm-up)")
    c.add_argument("--confidence", type=float, default=0.95, metavar="C", help="interval level (default 0.95)")
    c.add_argument("--resamples", type=int, default=10_000, metavar="N", help="bootstrap resamples (default 10000)")
    c.add_argument("--seed", type=int, default=0, help="random seed of the bootstrap (default 0)")
    c.add_argument("--allow-different-hardware", action="store_true",
                   help="compare runs of different devices or world sizes (refused by default: exit 2)")
    c.add_argument("-f", "--format", choices=("markdown", "json"), default="markdown",
                   help="markdown (default, for a CI job summary) or json")
    c.add_argument("-o", "--output", default=None, metavar="FILE", help="write the summary to FILE instead of stdout")
    c.set_defaults(func=_cmd_check)
    subs["check"] = c

    e = sub.add_parser("export", help="write a trace for Perfetto (protobuf) or chrome://tracing (JSON)")
    e.add_argument("trace", help=_TRACE_HELP)
    g = e.add_mutually_exclusive_group()
    g.add_argument("--perfetto", action="store_true", help="Perfetto protobuf trace (Trace.to_perfetto)")
    g.add_argument("--chrome", action="store_true", help="Chrome Trace Event Format JSON (Trace.to_chrome_trace)")
    e.add_argument("-o", "--output", required=True, metavar="FILE", help="the file to write")
    e.set_defaults(func=_cmd_export)
    subs["export"] = e

    d = sub.add_parser("demo", help="profile the bundled example CNN and summarise it")
    d.add_argument("--steps", type=int, default=8, help="training steps to run (default 8)")
    d.add_argument("-o", "--output", default=None, metavar="DIR", help="folder for the trace (default ./results)")
    d.add_argument("--out", default="results", help="same as -o (kept for older scripts)")
    d.set_defaults(func=_cmd_demo)
    subs["demo"] = d

    r = sub.add_parser("report", help="run the four-step workflow notebooks and write one offline HTML report")
    r.add_argument("inputs", nargs="*", metavar="INPUT",
                   help="traces (the first is --trace, a second --compare-trace), .sqlite/.nsys-rep (--nsys), a folder (--logdir)")
    r.add_argument("--script", help="training script to profile first (e.g. examples/train_cnn.py)")
    r.add_argument("--script-args", nargs=argparse.REMAINDER, default=[], help="arguments for --script (put last)")
    r.add_argument("--steps", type=int, default=None, help="--steps N passed to scripts that take it")
    r.add_argument("--trace", help="existing Kineto trace (.json[.gz])")
    r.add_argument("--compare-trace", help="a second trace to compare with (before/after)")
    r.add_argument("--nsys", dest="nsys_report", help="existing Nsight Systems report (.nsys-rep or .sqlite)")
    r.add_argument("--logdir", help="existing TensorBoard logdir")
    r.add_argument("--ds-log", help="existing DeepSpeed log (flops profiler / comms logger output)")
    r.add_argument("--ds-trace", action="append", default=[], help="per-rank trace of a distributed job (repeatable), or a folder of them")
    r.add_argument("--ranks", default=None, metavar="DIR",
                   help="the per-rank traces of one job: step 4 analyses it from its Parquet dataset (docs/dataset.md)")
    r.add_argument("--dataset", default=None, metavar="PATH",
                   help="with --ranks: the dataset folder to write or update (default: a folder in the nbprof cache)")
    r.add_argument("--no-nsys", action="store_true", help="do not run Nsight Systems on --script")
    for flag, what in (("--wait", "steps of --script skipped before warm-up (default 3)"),
                       ("--warmup", "warm-up steps of --script, profiled and discarded (default 1)"),
                       ("--active", "steps of --script recorded (default 5)")):
        r.add_argument(flag, type=int, default=None, metavar="N", help=what)
    r.add_argument("--whole-run", action="store_true",
                   help="record the whole run of --script as one window (no automatic steps)")
    r.add_argument("--watch", action="store_true",
                   help="run --script under the step watch (nbprof watch): report on the window that captured a slow step")
    r.add_argument("--no-progress", action="store_true", help="no progress bar while the notebooks run")
    r.add_argument("-o", "--output", default=None, metavar="FILE.html|DIR",
                   help="the report file (-o report.html) or a folder for a new report-<time> folder (-o DIR)")
    r.add_argument("--out", default="results", metavar="DIR",
                   help="output folder when -o is not a folder (default results): the report without -o, and "
                   "--script's run-<time> folder (its trace, TensorBoard run) with -o FILE.html too")
    r.add_argument("--force", action="store_true", help="replace the -o FILE.html when it exists")
    r.set_defaults(func=_cmd_report)
    subs["report"] = r

    w = sub.add_parser("watch", help="run a script under the always-on step watch; profile the slow steps",
                       description="Times every training step from cheap hooks (no profiler); a step slower than "
                       "K x the running median arms torch.profiler for the next steps. Writes a run folder "
                       "(steps.parquet, summary.json, captured traces) that nbprof check/stats read. Under "
                       "Nsight Systems: nsys profile --capture-range=cudaProfilerApi --capture-range-end=repeat "
                       "nbprof watch train.py (CUDA only). nbprof watch's options go before the script: every word after "
                       "it is the script's (nbprof watch -o runs/a train.py --epochs 3).")
    w.add_argument("script", help="the training script (run as __main__)")
    w.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the script")
    w.add_argument("-k", type=float, default=3.0, help="flag a step slower than K x the running median (default 3)")
    w.add_argument("--min-excess-ms", type=float, default=2.0, metavar="MS",
                   help="and at least MS longer than the median (default 2)")
    w.add_argument("--capture-steps", type=int, default=20, metavar="N", help="steps per profiled window (0: none)")
    w.add_argument("--max-captures", type=int, default=2, metavar="N", help="windows with a slow step to keep")
    w.add_argument("-o", "--output", default=None, metavar="DIR", help="the run folder (default OUT/run-<time>)")
    w.add_argument("--out", default="nbprof-watch", metavar="OUT", help="parent of the default run folder (default nbprof-watch)")
    w.set_defaults(func=_cmd_watch)
    subs["watch"] = w
    return p, subs


def _main(argv: list[str] | None) -> int:
    p, subs = _parser()
    args, extra = p.parse_known_args(argv)
    if args.cmd is None:  # bare `nbprof`: the commands, on stderr, exit 2 (a usage error)
        p.print_help(sys.stderr)
        return 2
    if extra:
        subs[args.cmd].error(f"unrecognized arguments: {' '.join(extra)}")
    if args.cmd == "stats" and not (args.trace or args.ranks):  # usage error: exits 2 with the usage line
        subs["stats"].error("the following arguments are required: trace (or --ranks DIR)")
    from .errors import NbprofError

    try:
        return int(args.func(args) or 0)
    except _CliError as exc:
        return _fail(args.cmd, str(exc), exc.rc)
    except NbprofError as exc:  # nbprof's own errors carry the file and where: no traceback needed
        return _fail(args.cmd, str(exc), 2)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nbprof`` console script (and ``python -m nbprof``); returns the exit status.

    A reader that closes the pipe early (``nbprof summary T | head``) ends the command quietly with status 0.
    """
    try:
        rc = _main(argv)
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        # the reader went away: send the rest of stdout nowhere so the interpreter's final flush is quiet too
        # (the recipe of https://docs.python.org/3/library/signal.html#note-on-sigpipe)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 0
    except KeyboardInterrupt:
        _note("nbprof: interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
