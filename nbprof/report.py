"""``nbprof report``: run the four-step workflow notebooks with papermill and write one offline HTML page.

Glue only: capture goes through ``nbprof.capture``, numbers through ``nbprof.analysis``, views
through ``nbprof.viz``; this module runs a workload (optional), executes
``notebooks/01_system_nsys.ipynb`` … ``04_distributed_deepspeed.ipynb`` with parameters, and converts
the executed notebooks to a single HTML file with BokehJS inline (the views are static Bokeh
components: the ``static_views=True`` papermill parameter, passed to ``nbprof.viz.embed.show``), so
the report opens with no network.

Nothing the user made is overwritten: every report goes to a new timestamped folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomic import atomic_write
from .errors import NbprofError, ReportError, ReportInputError

__all__ = ["NOTEBOOKS", "EXAMPLES", "NotebookInputs",
           "ReportError", "ReportInputError", "Artefacts", "notebooks_dir", "bundled_example", "run_workload",
           "build_report",
           "combine_html", "validate_inputs", "load_input", "report_verdict", "report_has_collectives"]

#: The workflow notebooks, in order, with the artefact each one reads.
NOTEBOOKS = (
    ("01_system_nsys.ipynb", "Step 1 - System view (Nsight Systems)"),
    ("02_operators_pytorch.ipynb", "Step 2 - Operators and kernels (PyTorch Profiler)"),
    ("03_visualize_tensorboard.ipynb", "Step 3 - Visualise and compare (TensorBoard)"),
    ("04_distributed_deepspeed.ipynb", "Step 4 - Distributed (DeepSpeed)"),
)



#: the teaching examples a workflow notebook falls back to (real traces: an H200 run of examples/train_cnn.py in
#: data/gpu, public corpus files), by parameter name; paths relative to the repository root
EXAMPLES: dict[str, str] = {
    "trace": "data/gpu/cnn_nw0_prep.pt.trace.json.gz",
    "compare_trace": "data/gpu/cnn_nw4_prep.pt.trace.json.gz",
    "nsys_report": "../shared/corpus/hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
    "ds_log": "../shared/notes/samples/ds_launcher_stage2.log",
}


class NotebookInputs:
    """How a workflow notebook turns its papermill path parameters into paths (one home for every notebook).

    ``root`` is the repository root (the working directory when it holds ``data/``, else its parent: papermill
    runs a notebook in ``notebooks/``); ``corpus`` is ``<root>/../shared/corpus``.

    >>> NotebookInputs(False, cwd="/repo/notebooks").resolve("data/x.json")
    '/repo/data/x.json'
    >>> NotebookInputs(False, cwd="/repo/notebooks").param("", "trace")  # no example without use_examples
    ''
    """

    def __init__(self, use_examples: bool, cwd: str | os.PathLike[str] | None = None) -> None:
        here = Path(cwd) if cwd is not None else Path.cwd()
        self.root = here if (here / "data").is_dir() else here.parent
        self.corpus = self.root.parent / "shared" / "corpus"
        self.use_examples = use_examples

    def resolve(self, p: str | os.PathLike[str]) -> str:
        """A parameter path, relative to the repository root unless absolute; ``""`` stays ``""``."""
        return str(p if not p or Path(p).is_absolute() else self.root / p)

    def param(self, value: str, name: str) -> str:
        """The parameter's path, or (``use_examples``) the example's (:data:`EXAMPLES`), or ``""`` when neither exists."""
        if value:
            return self.resolve(value)
        ex = EXAMPLES.get(name, "") if self.use_examples else ""
        return self.resolve(ex) if ex and Path(self.resolve(ex)).exists() else ""

@dataclass
class Artefacts:
    """Inputs of the workflow notebooks (any may be empty: the notebook then says what is missing)."""

    trace: str = ""
    compare_trace: str = ""
    nsys_report: str = ""
    logdir: str = ""
    ds_log: str = ""
    ds_traces: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    #: the loaded ``trace`` / ``compare_trace`` handed to the report's kernel (set by :func:`build_report`: one parse
    #: per input): a pickle in the report's private temporary folder, or a :class:`nbprof.scale.TraceCache` entry
    trace_cache: str = ""
    compare_cache: str = ""
    #: ``nbprof.merge`` of ``nsys_report`` and ``trace`` (one run, two sources), merged once by :func:`build_report`
    #: and handed over like ``trace_cache``: the verdict and step 1 show this one trace ("" when not merged)
    merged_cache: str = ""
    #: path -> Trace already loaded (by :func:`run_workload`): :func:`validate_inputs` takes it instead of a second parse
    preloaded: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def parameters(self) -> dict[str, Any]:
        """Papermill parameters shared by all notebooks."""
        return {
            "trace_cache": self.trace_cache,
            "compare_cache": self.compare_cache,
            "merged_cache": self.merged_cache,
            "trace": self.trace,
            "compare_trace": self.compare_trace,
            "nsys_report": self.nsys_report,
            "logdir": self.logdir,
            "ds_log": self.ds_log,
            "ds_traces": list(self.ds_traces),
        }


def _installed_dir(sub: str, marker: str, env: str | None = None) -> Path:
    """``$env``, the source checkout's ``<sub>/``, or an installed wheel's ``<prefix>/share/nbprof/<sub>``:
    the first that holds ``marker``.

    Raises
    ------
    ReportError
        When none of them does (the message lists where it looked).
    """
    cands = []
    if env and os.environ.get(env):
        cands.append(Path(os.environ[env]))
    cands.append(Path(__file__).resolve().parent.parent / sub)
    cands.append(Path(sys.prefix) / "share" / "nbprof" / sub)
    for c in cands:
        if (c / marker).exists():
            return c
    msg = f"{marker} not found in " + ", ".join(str(c) for c in cands)
    raise ReportError(msg + (f"; hint: set {env}" if env else "; hint: reinstall nbprof or run from a clone"))


def notebooks_dir() -> Path:
    """Where the workflow notebooks are: ``$NBPROF_NOTEBOOKS``, the source checkout's ``notebooks/``,
    or ``<prefix>/share/nbprof/notebooks`` of an installed wheel.

    Raises
    ------
    ReportError
        When none of them holds the notebooks.
    """
    return _installed_dir("notebooks", NOTEBOOKS[0][0], "NBPROF_NOTEBOOKS")


def bundled_example(name: str = "train_cnn.py") -> Path:
    """A bundled example script (``examples/<name>`` of a checkout, or of an installed wheel).

    Raises
    ------
    ReportError
        When the script is in neither place.
    """
    return _installed_dir("examples", name) / name


def _supports_profile_flag(script: str) -> bool:
    try:
        return "--profile" in Path(script).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False



def _profile_under_nsys(argv: list[str], out: Path, art: Artefacts, trace: Path, log) -> None:
    """Run the torch.profiler command ``argv`` under ``nsys profile``: one run, two sources (the Kineto
    trace from inside, the nsys report from outside; ``nbprof.merge`` aligns them). Sets
    ``art.nsys_report``; when nsys is missing or the run fails under it, a note says so and the caller
    runs ``argv`` without nsys (no trace file is left behind by a failed run)."""
    try:
        from .capture import nsys as nsys_cap

        log("profiling with Nsight Systems (nsys profile -t " + nsys_cap.default_trace() + ") and torch.profiler: "
            + " ".join(argv))
        run = nsys_cap.profile(argv, results_dir=out / "nsys", timeout_s=1800)
    except NbprofError as exc:
        art.notes.append(f"nsys step skipped: {exc}")
        log(f"nsys step skipped: {exc}")
        return
    if run.returncode != 0 or not trace.exists():
        art.notes.append(f"the workload under nsys exited {run.returncode}: rerun without nsys, step 1 uses the "
                         "PyTorch trace")
        trace.unlink(missing_ok=True)
        return
    if run.sqlite_path:
        art.nsys_report = run.sqlite_path
    else:
        art.notes.append("nsys produced no SQLite export: step 1 uses the PyTorch trace")

def _merged_or(nsys_trace, kineto_trace):
    """``nbprof.merge`` of the two inputs (the verdict then sees the OS view too), or the Kineto trace when
    they are not one run."""
    from .trace.merge import merge

    try:
        return merge(nsys_trace, kineto_trace)
    except NbprofError:
        return kineto_trace


def run_workload(
    script: str,
    script_args: Sequence[str] = (),
    out_dir: str | os.PathLike[str] = "results",
    *,
    steps: int | None = None,
    use_nsys: bool = True,
    tensorboard: bool = True,
    python: str | None = None,
    log=print,
    watch: bool = False,
    capture_args: Sequence[str] = (),
    echo: Callable[[str], Any] | None = None,
) -> Artefacts:
    """Profile ``script`` for the workflow: a Kineto trace (torch.profiler), an nsys report when Nsight
    Systems is available, and a TensorBoard run. Commands are argv lists, never a shell.

    Parameters
    ----------
    script : str
        A training script. Scripts with a ``--profile PATH`` option (the bundled examples) profile
        themselves with a step schedule; others run under ``python -m nbprof.capture.script``.
    script_args : sequence of str
    out_dir : path
    steps : int, optional
        Passed as ``--steps N`` to scripts that take it.
    use_nsys : bool, default True
    tensorboard : bool, default True
    python : str, optional
        Interpreter (default: this one).
    watch : bool, default False
        Run the script under the step watch (``nbprof watch``, run folder ``<out_dir>/watch``) instead of a
        fixed profiling schedule: the report's trace is the first captured window holding a slow step.
    capture_args : sequence of str, optional
        Schedule flags for ``python -m nbprof.capture.script`` (``--wait N``, ``--warmup N``, ``--active N``,
        ``--whole-run``; ``nbprof report --script`` passes its own). When given, the script runs under it even
        when it has a ``--profile`` option of its own.
    echo : callable, optional
        Called with each line the script prints (stdout and stderr, as it runs) on a run without nsys, so a
        long run shows its progress (``nbprof report`` passes ``sys.stderr.write``); default: kept quiet, the
        last lines go into the error of a failed run.

    Returns
    -------
    Artefacts

    Raises
    ------
    ReportError
        When the script fails (its exit status and the last output lines are in the message).
    FileNotFoundError
        When ``script`` does not exist (before anything runs).
    """
    if not os.path.isfile(script):
        msg = f"training script not found: {os.fspath(script)!r}"
        raise FileNotFoundError(msg)
    py = python or sys.executable
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    args = list(script_args)
    if steps is not None and "--steps" not in args:
        args += ["--steps", str(steps)]
    art = Artefacts()
    trace = out / "workload.pt.trace.json.gz"
    if watch:
        return _run_watched(py, script, args, out, art, log)
    if _supports_profile_flag(script) and not capture_args:
        argv = [py, script, *args, "--profile", str(trace), "--profile-memory"]
    else:
        argv = [py, "-m", "nbprof.capture.script", "--trace", str(trace), *capture_args, "--", script, *args]
    trace.unlink(missing_ok=True)  # a trace of an earlier run in this folder must not pass for this run's
    if use_nsys:  # one run seen by both profilers: torch.profiler inside, nsys outside (nbprof.merge aligns them)
        _profile_under_nsys(argv, out, art, trace, log)
    if not trace.exists():
        log("profiling with torch.profiler: " + " ".join(argv))
        r = _run_script(argv, echo)
        if r.returncode != 0:
            tail = "(its output is above)" if echo else "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
            raise ReportError(f"the workload failed (exit {r.returncode}): {' '.join(argv)}\n{tail}")
        if not trace.exists() and "nbprof.capture.script" in argv:
            # no step boundary (no optimizer.step(), no DataLoader batch) and so no recorded window: the whole run
            argv = [*argv[:5], "--whole-run", *argv[5:]]
            art.notes.append("no training step was found (no optimizer.step(), no DataLoader batch): the whole run "
                             "was profiled as one window")
            log("profiling the whole run with torch.profiler: " + " ".join(argv))
            r = _run_script(argv, echo)
        if not trace.exists():
            tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
            raise ReportError(f"the workload wrote no trace: {' '.join(argv)}\n{tail}")
    art.trace = str(trace)
    if tensorboard:
        try:
            from .tensorboard import write_run

            logdir = out / "tb"
            from .sources import load

            tr = load(str(trace))  # once: the TensorBoard run and the report (validate_inputs) share it
            art.preloaded[str(trace)] = tr
            write_run(tr, str(logdir), run=Path(script).stem)
            art.logdir = str(logdir)
        except Exception as exc:  # the report still runs without the TensorBoard run
            art.notes.append(f"TensorBoard run not written: {exc}")
    return art


def _run_script(argv: list[str], echo: Callable[[str], Any] | None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (no shell); with ``echo``, pass each line of its output (stderr merged into stdout) to it as
    it comes. The result's ``stdout`` holds the whole output either way (``stderr`` is "" when echoed)."""
    if echo is None:
        return subprocess.run(argv, capture_output=True, text=True)
    lines = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            echo(line)
    return subprocess.CompletedProcess(argv, proc.returncode, "".join(lines), "")


def _run_watched(py: str, script: str, args: list[str], out: Path, art: Artefacts, log) -> Artefacts:
    """``run_workload(watch=True)``: ``nbprof watch`` on the script; the trace is its first captured window."""
    import json

    run = out / "watch"
    argv = [py, "-m", "nbprof", "watch", "-o", str(run), script, *args]
    log("watching: " + " ".join(argv))
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise ReportError(f"the workload failed (exit {r.returncode}): {' '.join(argv)}\n{tail}")
    caps = json.loads((run / "summary.json").read_text(encoding="utf-8")).get("captures", [])
    if not caps:
        raise ReportError(f"the watch flagged no slow step that a profiled window captured (run folder {run}):\n"
                          + r.stdout.strip())
    art.trace = str(run / caps[0]["path"])
    art.notes.append(f"step watch run folder: {run} (flagged steps {caps[0]['flagged_steps']} are in this trace, "
                     f"watch steps {caps[0]['first_step']}..{caps[0]['last_step']})")
    from .results.watch_render import captured_line
    from .watching import captured

    cap = captured(run)
    art.notes += [captured_line(r) for r in cap[cap["trace"] == art.trace].itertuples(index=False)]
    return art


def _check_trace_path(flag: str, path: str) -> None:
    if os.path.isdir(path):
        raise ReportInputError(f"{flag} {path!r} is a directory, not a trace file (give one .json[.gz], .sqlite or "
                               ".nsys-rep)")
    if not os.path.isfile(path):
        raise ReportInputError(f"{flag} {path!r} does not exist")


def validate_inputs(art: Artefacts) -> dict[str, Any]:
    """Load every trace input once, before any notebook runs.

    Returns
    -------
    dict
        ``"trace"`` / ``"compare_trace"`` / ``"nsys_report"`` -> the loaded :class:`nbprof.Trace` (given inputs only).

    Raises
    ------
    ReportInputError
        Naming the flag and the reason (a directory, an unknown format, a JSON that is not a trace).
    """
    from .sources import load

    out: dict[str, Any] = {}
    for field_name, flag in (("trace", "--trace"), ("compare_trace", "--compare-trace"), ("nsys_report", "--nsys")):
        path = getattr(art, field_name)
        if not path:
            continue
        _check_trace_path(flag, path)
        if path.endswith(".nsys-rep"):
            continue  # exported to SQLite by step 1 (needs nsys)
        try:
            pre = art.preloaded.pop(path, None)
            out[field_name] = pre if pre is not None else load(path)
        except NbprofError as exc:
            raise ReportInputError(f"{flag} {path!r} is not a trace nbprof can read: {exc}") from exc
        except (ValueError, OSError) as exc:
            raise ReportInputError(f"{flag} {path!r} cannot be read: {type(exc).__name__}: {exc}") from exc
    for p in art.ds_traces:
        if not os.path.isdir(p):  # a folder of rank traces is searched by load_ranks (step 4)
            _check_trace_path("--ds-trace", p)
    art.preloaded.clear()  # the report holds its traces only as long as it needs them
    return out


#: metadata key of the merged notebook's cells: the workflow notebook a cell comes from
_STEP_KEY = "nbprof_step"
#: metadata marker of the verdict cell and its output (the page's first section; taken out of the notebooks)
_VERDICT_KEY = "nbprof_verdict"

#: (path, cache entry) -> Trace: what :func:`load_input` already read in this process (one report kernel)
_LOADED: dict[tuple[str, str], Any] = {}


#: the suffix of :func:`build_report`'s hand-off files (a pickled Trace: 0.2 s to write and 0.03 s to read for a
#: 1.16 M-event trace, against 0.5 s and 1.5 s for a Parquet cache entry)
_HANDOFF_SUFFIX = ".nbprof-trace.pkl"


def load_input(path: str, cache_entry: str = "") -> Any:
    """What a report notebook calls: the Trace the report handed over (``cache_entry``: its pickle, or a
    :class:`nbprof.scale.TraceCache` entry folder) when given, else ``nbprof.load(path)``.

    Read once per process: the report runs every step in one kernel, and each step gets the same Trace object
    (so the analyses memoised on it run once). Raises what ``nbprof.load`` / the cache raise.
    """
    key = (str(path), str(cache_entry))
    if key in _LOADED:
        return _LOADED[key]
    if cache_entry and os.path.isfile(cache_entry) and cache_entry.endswith(_HANDOFF_SUFFIX):
        import pickle

        # written by build_report in its own 0700 temporary folder for the kernel it started: trusted
        with open(cache_entry, "rb") as fh:
            tr = pickle.load(fh)
    elif cache_entry and os.path.isdir(cache_entry):
        from .scale import TraceCache

        tr = TraceCache(os.path.dirname(cache_entry)).get(os.path.basename(cache_entry))
    else:
        from .sources import load

        tr = load(path)
    _LOADED.clear()  # keep the latest inputs only (a notebook that loops over many traces stays lean)
    _LOADED[key] = tr
    return tr


def report_verdict(trace: str, trace_cache: str = "", nsys_report: str = "", merged_cache: str = "",
                   compare_trace: str = "", compare_cache: str = "") -> None:
    """The report's first section, displayed from its kernel: the verdict and the ranked findings of the merged
    trace when :func:`build_report` merged ``nsys_report`` and ``trace`` (``merged_cache``), else of ``trace``
    (else of ``nsys_report``), as HTML marked for :func:`build_report` (``metadata.nbprof_verdict``); then, when
    ``compare_trace`` is given, the before/after result (:func:`nbprof.analysis.before_after.before_after`:
    ``trace`` before, ``compare_trace`` after; the ratio of the median step with its bootstrap interval, and the
    ``trace``'s predicted saving for the fix made set against the measured change).

    Computed on the Traces the steps below show (:func:`load_input`), so ``advise`` runs once for the page.
    """
    from IPython.display import HTML, display

    from .analysis import advisor, evidence, steps
    from .analysis.overhead import capture_metadata
    from .analysis.verdict import verdict
    from .results.overhead import overhead_html
    from .results.steps_render import steps_html
    from .results.verdict import verdict_html
    from .trace.iterations import step_source

    if merged_cache:
        tr = load_input(trace, merged_cache)
    else:
        tr = load_input(trace, trace_cache) if trace else load_input(nsys_report) if nsys_report else None
    if tr is None:
        return
    found = advisor.advise(tr)
    html = verdict_html(verdict(tr), found, zoom=lambda f: evidence.finding_window(tr, f))
    cap = capture_metadata(tr) or {}  # an unmodified script's steps: ProfilerStep ranges nbprof's hooks wrote
    html += steps_html(step_source(tr), steps.steady_state(tr), steps.step_outliers(tr), cap.get("step_source"))
    html += overhead_html(tr)  # "profiled steps took 2.5x the unprofiled ones" (automatic-steps captures)
    if trace and compare_trace:
        from .analysis.before_after import before_after
        from .results.compare_render import before_after_html

        try:
            html += before_after_html(before_after(tr, load_input(compare_trace, compare_cache), predict=True,
                                                   findings=found))
        except ValueError as exc:  # a side without host events: no step time to compare
            import html as _html

            html += f"<p><i>Before/after not compared: {_html.escape(str(exc))}</i></p>"
    display(HTML(html), metadata={_VERDICT_KEY: True})


def report_has_collectives(trace: Any) -> bool:
    """True when a trace has collectives (communication kernels or nccl/gloo host ops) or a world size > 1:
    step 4 of the report applies to it."""
    if trace is None:
        return False
    from .trace import predicates as pred

    if int(getattr(trace.meta, "world_size", 1) or 1) > 1:
        return True
    return bool(pred.is_communication(trace.events).any())


def _ipc_kernel(folder: Path) -> dict[str, Any]:
    """Kernels talk over Unix sockets in ``folder`` (POSIX): no TCP port, no "running over TCP" warning."""
    if os.name != "posix":
        return {}
    from jupyter_client.manager import AsyncKernelManager

    class _IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            self.transport = "ipc"
            self.ip = str(folder / "kernel")

    return {"kernel_manager_class": _IPCKernelManager}


def build_report(
    art: Artefacts,
    out_dir: str | os.PathLike[str] = "results",
    *,
    notebooks: Sequence[str] | None = None,
    kernel_name: str | None = None,
    progress: bool = True,
    title: str = "nbprof report",
    extra_parameters: dict[str, Any] | None = None,
    output: str | os.PathLike[str] | None = None,
    overwrite: bool = True,
) -> Path:
    """Execute the workflow notebooks on ``art`` and write ``<out_dir>/report-<time>/report.html``.

    Parameters
    ----------
    art : Artefacts
    out_dir : path
        A new ``report-<YYYYmmdd-HHMMSS>`` folder is made inside it for the executed notebooks and the HTML.
    notebooks : sequence of str, optional
        Subset of the workflow notebook file names (default all four).
    kernel_name : str, optional
        Jupyter kernel (default: the current interpreter via ipykernel's ``python3``).
    progress : bool, default True
        Papermill's per-cell progress bar.
    output : path, optional
        Write the page to this ``.html`` file instead (the executed notebooks are then removed).
    overwrite : bool, default True
        Whether ``output`` may replace an existing file (``nbprof report -o FILE`` passes ``--force``);
        False raises ``FileExistsError`` before anything runs. Every write is atomic (``nbprof.atomic``).

    Every trace input is loaded once (:func:`validate_inputs`) before any notebook runs and handed to
    the kernel as a pickle in a private temporary folder (``trace_cache``/``compare_cache``), removed at the end.
    Step 4 runs when the trace has collectives, per-rank traces or a DeepSpeed log are given.

    Returns
    -------
    pathlib.Path
        The HTML report.

    Raises
    ------
    ReportError
        A notebook failed; ``.notebook`` is the executed copy with the traceback in it.
    """
    import shutil
    import tempfile

    from ._deps import require

    pm = require("papermill", "report", "nbprof report")
    nbformat = require("nbformat", "report", "nbprof report")

    src = notebooks_dir()
    loaded = validate_inputs(art)  # before any folder or kernel: a bad input fails in about a second
    target_file = Path(output) if output else None
    if target_file is not None and not overwrite and os.path.lexists(target_file):
        raise FileExistsError(f"{target_file} exists; pass overwrite=True (CLI: --force) to replace it")
    if target_file is not None and target_file.suffix.lower() not in (".html", ".htm"):
        raise ReportError(f"-o {str(target_file)!r}: the report is one .html file (use --out DIR for a folder)")
    if target_file is not None:
        target_file.parent.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="nbprof_report_", dir=str(target_file.parent)))
    else:
        folder = Path(out_dir) / time.strftime("report-%Y%m%d-%H%M%S")
        n = 0
        while folder.exists():
            n += 1
            folder = Path(out_dir) / (time.strftime("report-%Y%m%d-%H%M%S") + f"-{n}")
        folder.mkdir(parents=True)
    # one parse per input: the kernel reads the traces loaded above from a private temporary folder (removed at the end)
    cache_dir = Path(tempfile.mkdtemp(prefix="nbprof_report_cache_"))
    try:
        import pickle

        for field_name, cache_field in (("trace", "trace_cache"), ("compare_trace", "compare_cache")):
            tr = loaded.get(field_name)
            if tr is not None:
                handoff = cache_dir / f"{field_name}{_HANDOFF_SUFFIX}"  # mkdtemp: mode 0700, this user's only
                with open(handoff, "wb") as fh:
                    pickle.dump(tr, fh, protocol=pickle.HIGHEST_PROTOCOL)
                setattr(art, cache_field, str(handoff))
            del tr  # the parent keeps no trace while the kernel runs (peak memory of the process tree)
        names = list(notebooks or [nb for nb, _ in NOTEBOOKS])
        first = loaded.get("trace") or loaded.get("nsys_report")
        if loaded.get("trace") is not None and loaded.get("nsys_report") is not None:
            # one run, two sources: merged once, here; the verdict and step 1 both show this merged trace
            first = _merged_or(loaded["nsys_report"], loaded["trace"])
            if first is not loaded["trace"]:
                handoff = cache_dir / f"merged{_HANDOFF_SUFFIX}"
                with open(handoff, "wb") as fh:
                    pickle.dump(first, fh, protocol=pickle.HIGHEST_PROTOCOL)
                art.merged_cache = str(handoff)
        if notebooks is None and not (art.ds_traces or art.ds_log or report_has_collectives(first)):
            names = [nb for nb in names if not nb.startswith("04_")]
            art.notes.append("step 4 (distributed) left out: no collectives, no per-rank traces, no DeepSpeed log")
        del loaded
        kernel_kwargs = _ipc_kernel(cache_dir)
        # static_views: the notebooks emit their views as static components (BokehJS is inlined once in the page)
        params = art.parameters() | {"use_examples": False, "static_views": True} | (extra_parameters or {})
        with_verdict = first is not None
        del first
        if with_verdict:
            params["in_report"] = True
        # one kernel for every step: the trace is read once and each analysis runs once (load_input and the
        # per-Trace memo of nbprof.analysis keep them); the verdict is the kernel's first cell
        merged_in, merged_out = cache_dir / "report.ipynb", cache_dir / "report.executed.ipynb"
        nbformat.write(_merged_notebook(src, names, with_verdict), str(merged_in))
        try:
            pm.execute_notebook(
                str(merged_in), str(merged_out), parameters=params, kernel_name=kernel_name or "python3",
                progress_bar=progress, cwd=str(src.parent), report_mode=False, **kernel_kwargs,
            )
        except pm.PapermillExecutionError as exc:
            parts, _ = _split_executed(merged_out, folder)
            nb, cell = _failed_cell(folder, parts, exc.exec_count)
            dst = folder / nb
            msg = f"{nb} failed at cell {cell}: {exc.ename}: {exc.evalue}; executed notebook kept at {dst}"
            raise ReportError(msg, notebook=str(dst)) from exc
        parts, verdict_block = _split_executed(merged_out, folder)
        titles = dict(NOTEBOOKS)
        executed = [(folder / nb, titles.get(nb, nb)) for nb in parts]
        html = combine_html(executed, title=title, notes=art.notes, verdict=verdict_block)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
        art.trace_cache = art.compare_cache = art.merged_cache = ""
    if target_file is not None:
        atomic_write(target_file, html, overwrite=overwrite)
        shutil.rmtree(folder, ignore_errors=True)
        return target_file
    out = folder / "report.html"
    atomic_write(out, html)
    return out




def _merged_notebook(src: Path, names: Sequence[str], with_verdict: bool) -> Any:
    """The workflow notebooks ``names`` as one notebook (one kernel): the first parameters cell is kept (papermill
    injects after it), the others dropped; every cell carries its notebook's name (``metadata.nbprof_step``).
    With ``with_verdict`` a first cell displays :func:`report_verdict` (marked for :func:`_split_executed`)."""
    import nbformat

    merged = nbformat.v4.new_notebook()
    have_params = False
    for nb_name in names:
        nb = nbformat.read(str(src / nb_name), as_version=4)
        if not merged.metadata:
            merged.metadata = nb.metadata
        for c in nb.cells:
            if "parameters" in c.get("metadata", {}).get("tags", []):
                if have_params:
                    continue
                have_params = True
                merged.cells.append(c)
                # the report's own first cell: sortable tables (itables) and the verdict
                code = "from nbprof.results.table import use_datatables\nuse_datatables(static_views)\n"
                if with_verdict:
                    code += ("from nbprof.report import report_verdict\n"
                             "report_verdict(trace, trace_cache, nsys_report, merged_cache, compare_trace, "
                             "compare_cache)\n")
                v = nbformat.v4.new_code_cell(code)
                v.metadata[_STEP_KEY] = names[0]
                v.metadata[_VERDICT_KEY] = True
                merged.cells.append(v)
                continue
            c.metadata[_STEP_KEY] = nb_name
            merged.cells.append(c)
    return merged


def _split_executed(merged_path: Path, folder: Path) -> tuple[list[str], str]:
    """Write the executed merged notebook back as one executed notebook per step in ``folder``.

    Returns the step notebooks written, in order, and the verdict HTML (``""`` when there is none)."""
    import nbformat

    if not merged_path.exists():
        return [], ""
    nb = nbformat.read(str(merged_path), as_version=4)
    verdict_html = ""
    parts: dict[str, Any] = {}
    params = [c for c in nb.cells if _STEP_KEY not in c.get("metadata", {})]
    for c in nb.cells:
        step = c.get("metadata", {}).get(_STEP_KEY)
        if step is None:
            continue
        if c.get("metadata", {}).get(_VERDICT_KEY):
            outs = c.get("outputs", [])
            shown = [o for o in outs if o.get("metadata", {}).get(_VERDICT_KEY)]
            if shown:
                verdict_html = str(shown[0].get("data", {}).get("text/html", ""))
            if not any(o.get("output_type") == "error" for o in outs):
                continue  # the verdict is the page's first section; the cell itself is left out (kept when it failed)
        if step not in parts:
            parts[step] = nbformat.v4.new_notebook(metadata=nb.metadata, cells=[nbformat.from_dict(p) for p in params])
        parts[step].cells.append(c)
    for name, part in parts.items():
        nbformat.write(part, str(folder / name))
    return list(parts), verdict_html


def _failed_cell(folder: Path, parts: Sequence[str], exec_count: int | None) -> tuple[str, int]:
    """The step notebook and its code-cell number (1-based, the parameter cells counted) of the merged notebook's
    cell ``exec_count``; the last step when it cannot be told."""
    import nbformat

    for name in parts:
        nb = nbformat.read(str(folder / name), as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        for i, c in enumerate(code, 1):
            if exec_count is not None and c.get("execution_count") == exec_count:
                return name, i
    return (parts[-1] if parts else "report.ipynb"), int(exec_count or 0)


_EXTERNAL = re.compile(r"<script[^>]*\bsrc=[\"']https?://[^>]*>\s*</script>|<link[^>]*\bhref=[\"']https?://[^>]*>", re.I)


def _dark_scheme_css(exporter: Any) -> str:
    """:func:`nbprof.viz.theme.dark_scheme_css` with JupyterLab's own dark variables (nbconvert's ``lab`` template
    ``static/theme-dark.css``): the page follows the reader's colour scheme (light otherwise)."""
    from .viz.theme import dark_scheme_css

    for base in getattr(exporter, "template_paths", []):
        f = Path(base) / "static" / "theme-dark.css"
        if f.is_file():
            return dark_scheme_css(f.read_text(encoding="utf-8"))
    return dark_scheme_css()


def combine_html(executed: Sequence[tuple[Path, str]], *, title: str = "nbprof report", notes: Sequence[str] = (),
                 verdict: str = "") -> str:
    """Merge executed notebooks into one HTML page that needs no network.

    nbconvert's ``lab`` template renders each notebook (inputs hidden, outputs kept); references to
    CDNs (require.js, MathJax) are removed and BokehJS is inlined once in ``<head>``.
    """
    import html as _html

    from ._deps import require

    nbformat = require("nbformat", "report", "nbprof report")
    INLINE = require("bokeh.resources", "viz", "nbprof report").INLINE
    HTMLExporter = require("nbconvert", "report", "nbprof report").HTMLExporter

    merged = nbformat.v4.new_notebook()
    toc = []
    for i, (path, heading) in enumerate(executed):
        nb = nbformat.read(str(path), as_version=4)
        anchor = f"step-{i + 1}"
        toc.append(f'<li><a href="#{anchor}">{_html.escape(heading)}</a></li>')
        # each notebook opens with its own title; the page's table of contents links here
        merged.cells.append(nbformat.v4.new_markdown_cell(f'<a id="{anchor}"></a>'))
        for c in nb.cells:
            if "parameters" in c.get("metadata", {}).get("tags", []) or "injected-parameters" in c.get("metadata", {}).get("tags", []):
                continue
            merged.cells.append(c)
    exp = HTMLExporter(template_name="lab")
    exp.exclude_input = True
    exp.exclude_input_prompt = True
    exp.exclude_output_prompt = True
    body, _ = exp.from_notebook_node(merged)
    body = _EXTERNAL.sub("", body)
    body = re.sub(r"<title>.*?</title>", f"<title>{_html.escape(title)}</title>", body, count=1, flags=re.S)
    from .results.verdict import ZOOM_SCRIPT
    from .viz.theme import DARK_SCHEME_SCRIPT

    head = INLINE.render_js() + INLINE.render_css() + ZOOM_SCRIPT + _dark_scheme_css(exp)
    if "window._itables_" in body:  # sortable tables (itables, offline): their bundle once, as BokehJS
        from .results.table import datatables_init_html

        head += datatables_init_html()
    note_html = "".join(f"<li>{_html.escape(n)}</li>" for n in notes)
    banner = DARK_SCHEME_SCRIPT + (
        '<div style="margin:1em 2em;font-family:system-ui,-apple-system,\'Segoe UI\',Roboto,sans-serif">'
        f'<h1>{_html.escape(title)}</h1>{verdict}<ol>{"".join(toc)}</ol>'
        + (f"<p>Notes:</p><ul>{note_html}</ul>" if notes else "")
        + "</div>"
    )
    # the banner first: once BokehJS is inlined, "<body" also occurs inside its code
    body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + banner, body, count=1)
    body = body.replace("</head>", head + "\n</head>", 1)
    return body
