"""Package-wide contracts from the style anchors (../shared/notes/style-anchors.md, "What nbprof should absorb").

- import contracts (fresh subprocesses): loading and analysing a trace imports no display/notebook/torch
  package; the two front ends (magics, cli) never import each other; without torch ``import nbprof`` and
  ``nbprof.load`` work and every capture entry point answers with a ``MissingDependencyError`` naming
  ``nbprof[torch]`` (anchors 1, 2, 8);
- the exception hierarchy: every public exception class subclasses ``NbprofError`` / ``NbprofWarning``,
  says "Raised when" / "Issued when", and survives a pickle round trip with its attributes (anchor 4);
- docstrings: every public module, function, class, method and property has one, and every DataFrame an
  analysis returns has each of its columns named in the function's docstring (anchor 9);
- the ``nbprof`` command's error paths: no traceback, the file named, where in it, and a non-zero status;
- the wheel carries what ``nbprof report`` / ``nbprof demo`` need (data-files in pyproject.toml).
"""

from __future__ import annotations

import importlib
import inspect
import json
import pickle
import pkgutil
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import nbprof
from nbprof import errors

ROOT = Path(__file__).resolve().parents[1]
CPU_TRACE = ROOT / "data" / "cpu" / "lm.pt.trace.json.gz"
GPU_MEM_TRACE = ROOT / "data" / "gpu" / "lm_mem.pt.trace.json.gz"
SNAPSHOT = ROOT / "data" / "gpu" / "lm_leak_snapshot.pickle"
TIMELINE = ROOT / "data" / "gpu" / "lm_memory_timeline.raw.json.gz"

#: packages that loading + analysing a trace must not import (display, notebook, capture)
HEAVY = ("torch", "bokeh", "ipywidgets", "IPython", "jupyter_bokeh", "papermill")

#: a sys.meta_path finder that makes ``import torch`` fail as it does where torch is not installed
BLOCK_TORCH = textwrap.dedent(
    """
    import importlib.abc, sys
    class _NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, _NoTorch())
    """
)


def _run(code: str, *, block_torch: bool = False, timeout: int = 120) -> dict:
    """Run ``code`` in a fresh interpreter (repo on sys.path); it prints one JSON object last."""
    src = (BLOCK_TORCH if block_torch else "") + textwrap.dedent(code)
    cp = subprocess.run(
        [sys.executable, "-c", src], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert cp.returncode == 0, f"subprocess failed (exit {cp.returncode}):\n{cp.stdout}\n{cp.stderr}"
    return json.loads(cp.stdout.strip().splitlines()[-1])


def _public_modules() -> list[str]:
    """Every nbprof module whose dotted name has no ``_``-prefixed part."""
    names = ["nbprof"]
    for m in pkgutil.walk_packages(nbprof.__path__, "nbprof."):
        if not any(part.startswith("_") for part in m.name.split(".")):
            names.append(m.name)
    return sorted(names)


# ----------------------------------------------------------------------------------------- 1. imports


def test_load_and_analyses_import_no_display_notebook_or_torch_package():
    out = _run(
        f"""
        import importlib, json, pkgutil, sys
        import nbprof
        tr = nbprof.load({str(CPU_TRACE)!r})
        import nbprof.analysis
        mods = [m.name for m in pkgutil.walk_packages(nbprof.analysis.__path__, "nbprof.analysis.")]
        for m in mods:
            importlib.import_module(m)
        from nbprof.analysis import operators, steps, advisor
        ops = operators.operator_summary(tr)
        st = steps.step_breakdown(tr)
        findings = advisor.advise(tr)
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in {list(HEAVY)!r})
        print(json.dumps({{"heavy": heavy, "mods": mods, "events": len(tr.events), "ops": len(ops),
                           "steps": st["step"].tolist(), "magics": "nbprof.magics" in sys.modules}}))
        """
    )
    assert out["heavy"] == []
    assert out["magics"] is False  # the magic module is imported only by load_ipython_extension
    assert {"nbprof.analysis.operators", "nbprof.analysis.steps", "nbprof.analysis.memory_snapshot",
            "nbprof.analysis.nsys_stats", "nbprof.analysis.distributed"} <= set(out["mods"])
    assert out["events"] == 6160 and out["steps"] == [2, 3, 4] and out["ops"] > 10


@pytest.mark.parametrize(
    ("imports", "forbidden"),
    [
        (["nbprof.magics", "nbprof.magics.torchprof", "nbprof.magics.nsys"], "nbprof.cli"),
        (["nbprof.cli"], "nbprof.magics"),
    ],
)
def test_front_ends_do_not_import_each_other(imports, forbidden):
    out = _run(
        f"""
        import importlib, json, sys
        for m in {imports!r}:
            importlib.import_module(m)
        print(json.dumps(sorted(m for m in sys.modules if m == {forbidden!r} or m.startswith({forbidden!r} + "."))))
        """
    )
    assert out == [], f"importing {imports} imported {out}"


def test_without_torch_load_works_and_capture_names_the_extra():
    out = _run(
        f"""
        import contextlib, io, json, sys
        import nbprof
        from nbprof.errors import MissingDependencyError
        tr = nbprof.load({str(CPU_TRACE)!r})
        res = {{"events": len(tr.events), "steps": tr.steps}}
        try:
            with nbprof.profile():
                res["ran"] = True
        except MissingDependencyError as exc:
            res["profile"] = [str(exc), isinstance(exc, ModuleNotFoundError), exc.name]
        from nbprof.deepspeed import attach
        class Engine:
            global_steps = 0
            def step(self):
                self.global_steps += 1
        try:
            attach(Engine(), 1, 2, "unused-dir")
        except MissingDependencyError as exc:
            res["attach"] = str(exc)
        from nbprof.capture.script import main as script_main
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            res["script_rc"] = script_main(["--trace", "unused.json.gz", {str(ROOT / "examples" / "train_cnn.py")!r}])
        res["script_err"] = err.getvalue()
        from nbprof.cli import main as cli_main
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            res["cli_rc"] = cli_main(["summary", "--format", "json", {str(CPU_TRACE)!r}])
        res["cli_summary"] = json.loads(buf.getvalue())
        res["torch_loaded"] = "torch" in sys.modules
        print(json.dumps(res))
        """,
        block_torch=True,
    )
    assert out["events"] == 6160 and out["steps"] == [2, 3, 4]
    assert "ran" not in out, "the profiled block ran although torch is missing"
    msg, is_mnf, name = out["profile"]
    assert is_mnf and name == "torch"
    assert "nbprof[torch]" in msg and "No module named 'torch'" in msg
    assert "nbprof[torch]" in out["attach"]
    assert out["script_rc"] == 2 and "nbprof[torch]" in out["script_err"]
    assert out["cli_rc"] == 0 and out["cli_summary"]["events"] == 6160
    assert out["torch_loaded"] is False


def test_torchprof_magic_without_torch_is_a_usage_error_before_the_cell_runs():
    out = _run(
        """
        import json
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance()
        ip.run_line_magic("load_ext", "nbprof")
        r = ip.run_cell("%%torchprof\\ncell_ran = True\\n")
        print(json.dumps({"ok": r.success, "error": type(r.error_in_exec).__name__,
                          "msg": str(r.error_in_exec), "ran": "cell_ran" in ip.user_ns}))
        """,
        block_torch=True,
    )
    assert out["ok"] is False and out["error"] == "UsageError" and out["ran"] is False
    assert "nbprof[torch]" in out["msg"]


# ----------------------------------------------------------------------------------- 2. exceptions


def _public_exception_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for name in _public_modules():
        mod = importlib.import_module(name)
        for attr, obj in vars(mod).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("nbprof")
                and not attr.startswith("_")
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


#: how to build one instance of each exception class whose constructor is not ``cls(message)``
EXAMPLES = {
    "nbprof.errors.TraceFormatError": lambda c: c(
        "/data/run.pt.trace.json.gz", 1234, "invalid character", table="StringIds", event_index=17
    ),
    "nbprof.errors.ReportError": lambda c: c("02_operators_pytorch.ipynb failed", notebook="/tmp/out/02.ipynb"),
    "nbprof.errors.ReportInputError": lambda c: c("--trace runs/: a folder, not a trace"),
    "nbprof.errors.TensorBoardStartError": lambda c: c(
        "tensorboard exited early", port=6123, stderr="E0101 address in use\nbye"
    ),
    "nbprof.errors.MissingDependencyError": lambda c: c("needs torch; hint: pip install 'nbprof[torch]'", name="torch"),
}


def test_exception_classes_found_include_the_known_ones():
    names = set(_public_exception_classes())
    assert {
        "nbprof.errors.NbprofError", "nbprof.errors.TraceFormatError", "nbprof.errors.SchemaError",
        "nbprof.errors.EmptyProfileError", "nbprof.errors.CaptureError", "nbprof.errors.MissingDependencyError",
        "nbprof.errors.NbprofWarning", "nbprof.errors.ReportError", "nbprof.errors.ReportInputError",
        "nbprof.errors.TensorBoardStartError", "nbprof.deepspeed.config.DeepSpeedConfigWarning",
    } <= names


@pytest.mark.parametrize("qualname", sorted(_public_exception_classes()))
def test_exception_class_contract(qualname):
    cls = _public_exception_classes()[qualname]
    if issubclass(cls, Warning):
        assert issubclass(cls, errors.NbprofWarning), f"{qualname} is a warning outside the NbprofWarning tree"
    else:
        assert issubclass(cls, errors.NbprofError), f"{qualname} does not subclass NbprofError"
    doc = inspect.getdoc(cls) or ""
    assert re.match(r"(Raised when|Issued when|Base class)", doc), f"{qualname}: docstring should say 'Raised when ...'"
    if cls.__module__ == "nbprof.errors":
        assert qualname.rsplit(".", 1)[1] in errors.__all__
    own_init = any("__init__" in vars(k) for k in cls.__mro__ if k.__module__.startswith("nbprof"))
    if own_init:
        assert qualname in EXAMPLES, f"{qualname} has its own __init__: add a pickle example to EXAMPLES"
    err = EXAMPLES.get(qualname, lambda c: c("something went wrong at byte 3"))(cls)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert str(back) == str(err) and back.args == err.args
    assert vars(back) == vars(err)
    for attr in ("name", "path"):  # ImportError's own attributes are not in __dict__
        if isinstance(err, ImportError):
            assert getattr(back, attr) == getattr(err, attr)


def test_trace_format_error_attributes_and_message():
    err = pickle.loads(pickle.dumps(EXAMPLES["nbprof.errors.TraceFormatError"](errors.TraceFormatError)))
    assert (err.path, err.offset, err.reason, err.table, err.event_index) == (
        "/data/run.pt.trace.json.gz", 1234, "invalid character", "StringIds", 17
    )
    assert str(err) == "/data/run.pt.trace.json.gz at byte 1234, table StringIds, event #17: invalid character"
    assert isinstance(err, ValueError)


def test_missing_dependency_error_is_a_module_not_found_error():
    assert issubclass(errors.MissingDependencyError, ModuleNotFoundError)
    back = pickle.loads(pickle.dumps(EXAMPLES["nbprof.errors.MissingDependencyError"](errors.MissingDependencyError)))
    assert back.name == "torch" and "nbprof[torch]" in str(back)


def test_tensorboard_start_error_keeps_port_and_stderr_tail():
    from nbprof.tensorboard.launch import TensorBoardStartError

    err = pickle.loads(pickle.dumps(EXAMPLES["nbprof.errors.TensorBoardStartError"](TensorBoardStartError)))
    assert err.port == 6123 and err.stderr == "E0101 address in use\nbye"
    assert str(err).endswith("--- tensorboard stderr (last lines) ---\nE0101 address in use\nbye")


def test_deepspeed_config_warning_is_an_nbprof_warning():
    from nbprof.deepspeed.config import DeepSpeedConfigWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error", errors.NbprofWarning)
        with pytest.raises(DeepSpeedConfigWarning, match="profiler section"):
            warnings.warn("profiler section translated", DeepSpeedConfigWarning, stacklevel=1)
    assert caught == []


# ----------------------------------------------------------------------------------- 3. docstrings


def _undocumented() -> list[str]:
    missing = []
    for name in _public_modules():
        mod = importlib.import_module(name)
        if not (mod.__doc__ or "").strip():
            missing.append(f"{name} (module)")
        public = set(getattr(mod, "__all__", ())) | {n for n in vars(mod) if not n.startswith("_")}
        for attr in sorted(public):
            obj = getattr(mod, attr, None)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or getattr(obj, "__module__", None) != name:
                continue
            doc = obj.__doc__ or ""
            # a dataclass without a docstring gets "Name(field, ...)" from dataclasses
            if not doc.strip() or (inspect.isclass(obj) and doc.startswith(f"{obj.__name__}(")):
                missing.append(f"{name}.{attr}")
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                for m_name, member in vars(obj).items():
                    if m_name.startswith("_"):
                        continue
                    fn = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                    if (inspect.isfunction(fn) or isinstance(member, property)) and not (fn.__doc__ or "").strip():
                        missing.append(f"{name}.{attr}.{m_name}")
    return missing


def test_every_public_module_function_class_and_method_has_a_docstring():
    assert _undocumented() == []


#: columns the docstring does not name yet, by function (owner told; remove once documented)
KNOWN_COLUMN_GAPS: dict[str, set[str]] = {}


@pytest.fixture(scope="module")
def analysis_inputs():
    import pandas as pd

    from nbprof.analysis.advisor import advise
    from nbprof.analysis.compare import compare
    from nbprof.analysis.distributed.reductions import concat_reductions, reduce_rank
    from nbprof.sources.memory_snapshot import load_memory_snapshot, load_memory_timeline

    tr = nbprof.load(GPU_MEM_TRACE)
    snap = load_memory_snapshot(SNAPSHOT)
    return {
        "trace": (tr,),
        "traces": ([tr],),
        "findings": (advise(tr),),
        "snap": (snap,),
        "tl": (load_memory_timeline(TIMELINE),),
        "live_at": (snap, 100),
        "wait_transfer_summary": (pd.DataFrame(columns=["collective", "k", "rank"]),),
        "busbw_vs_link": ([tr],),
        "link_peaks": (),
        "replay": (tr, tr),  # graph_capture.capture_trace_attribution(replay, capture)
        "collective_summary": ([tr],),
        # the reductions' table-generic helpers: one table of reduce_rank (columns: the reductions module's docstring)
        "conform": ("kernels", reduce_rank(tr)["kernels"]),
        "reduction_table": (tr, "kernels"),
        "analysis_collectives": (concat_reductions([(0, reduce_rank(tr))])["collectives"],),
        "frequent_kernel_sequences": (tr, "Optimizer"),
        "step_waterfall": (compare(tr, tr),),
        "step_windows_at": (tr, tr.events["ts_ns"].to_numpy(), tr.events["dur_ns"].to_numpy()),
        # a watch step log: step 3's data wait grew by 200 ms (the columns nbprof.capture.watch writes)
        "what_grew": (pd.DataFrame({
            "step": range(6), "step_ns": [10_000_000] * 3 + [210_000_000] + [10_000_000] * 2,
            "flagged": [False] * 3 + [True] + [False] * 2, "profiled": [False] * 6,
            "data_wait_ns": [1_000_000] * 3 + [201_000_000] + [1_000_000] * 2, "forward_ns": [3_000_000] * 6,
            "backward_ns": [4_000_000] * 6, "optimizer_ns": [1_000_000] * 6, "gc_ns": [0] * 6,
            "blocked_ns": [0] * 6}),),
    }


def _dataframe_functions() -> list[str]:
    import nbprof.analysis

    out = []
    for m in pkgutil.walk_packages(nbprof.analysis.__path__, "nbprof.analysis."):
        if any(p.startswith("_") for p in m.name.split(".")):
            continue
        mod = importlib.import_module(m.name)
        for attr, fn in vars(mod).items():
            if attr.startswith("_") or not inspect.isfunction(fn) or fn.__module__ != m.name:
                continue
            ret = inspect.signature(fn).return_annotation
            ret = ret if isinstance(ret, str) else getattr(ret, "__name__", str(ret))
            if ret.split(".")[-1] == "DataFrame":
                out.append(f"{m.name}.{attr}")
    return sorted(out)


def _named(col: str, doc: str) -> bool:
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(col) + r"(?![A-Za-z0-9_])", doc) is not None


def test_dataframe_function_list_is_complete():
    found = _dataframe_functions()
    assert len(found) >= 40
    for name in ("nbprof.analysis.operators.operator_summary", "nbprof.analysis.kernels.kernel_summary",
                 "nbprof.analysis.steps.step_breakdown", "nbprof.analysis.memory.memory_curve",
                 "nbprof.analysis.utilization.gpu_utilization", "nbprof.analysis.launch.launch_stats"):
        assert name in found


@pytest.mark.parametrize("qualname", _dataframe_functions())
def test_analysis_docstring_names_every_returned_column(qualname, analysis_inputs):
    mod_name, attr = qualname.rsplit(".", 1)
    fn = getattr(importlib.import_module(mod_name), attr)
    doc = inspect.getdoc(fn) or ""
    if mod_name.endswith(".reductions"):  # a table of the reductions: its columns are named in the module's docstring
        from nbprof.analysis.distributed import collectives  # its ``collectives`` table is this one's, without rank

        doc += "\n" + (inspect.getdoc(importlib.import_module(mod_name)) or "") + "\n" + (inspect.getdoc(collectives) or "")
    first = next(iter(inspect.signature(fn).parameters))
    key = attr if attr in analysis_inputs else first
    assert key in analysis_inputs, f"{qualname}: add an input for its first parameter {first!r} to analysis_inputs"
    df = fn(*analysis_inputs[key])
    cols = [str(c) for c in df.columns] + ([str(df.index.name)] if df.index.name else [])
    assert cols, f"{qualname} returned a frame without columns"
    # a column named by a parameter (e.g. ``<by>``, the grouping key) counts as named when it is that default
    by_param = {
        str(p.default) for p in inspect.signature(fn).parameters.values()
        if isinstance(p.default, str) and f"<{p.name}>" in doc
    }
    missing = {c for c in cols if not _named(c, doc) and c not in by_param}
    assert missing <= KNOWN_COLUMN_GAPS.get(qualname, set()), f"{qualname}: docstring does not name {sorted(missing)}"


# ----------------------------------------------------------------------------------- CLI error paths


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    from nbprof.cli import main

    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_cli_summary_of_a_missing_file_names_it(capsys, tmp_path):
    missing = tmp_path / "nope.pt.trace.json.gz"
    rc, out, err = _cli(capsys, "summary", str(missing))
    assert rc == 2 and out == ""
    assert err.startswith("nbprof summary: error: ") and str(missing) in err


def test_cli_summary_of_a_truncated_trace_strict_names_file_and_byte(capsys, tmp_path):
    import gzip

    bad = tmp_path / "cut.pt.trace.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":1},'))
    rc, out, err = _cli(capsys, "summary", "--strict", str(bad))
    assert rc == 2 and "Traceback" not in err
    assert f"{bad} at byte 70: " in err and "hint: without --strict" in err
    rc, out, err = _cli(capsys, "summary", str(bad))  # tolerant: loads and says what it repaired
    assert rc == 0 and "repaired: truncated at byte 70" in out


@pytest.mark.parametrize(
    ("name", "content", "expect"),
    [
        ("run.txt", b"hello", "unknown trace file type: expected a file ending in one of"),
        ("empty.json", b"", "at byte 0: file is empty"),
        ("obj.json", b"{}", "no 'traceEvents' key"),
        ("run.sqlite", b"garbage", "not a readable SQLite database"),
        ("snap.pickle", b"garbage", "not a readable pickle"),
    ],
)
def test_cli_summary_of_a_bad_file_says_which_and_why(capsys, tmp_path, name, content, expect):
    bad = tmp_path / name
    bad.write_bytes(content)
    rc, out, err = _cli(capsys, "summary", str(bad))
    assert rc == 2 and out == "" and "Traceback" not in err and err.count("\n") == 1
    assert err.startswith(f"nbprof summary: error: cannot read the trace: {bad}") and expect in err


def test_cli_summary_of_a_directory_and_strict_on_a_snapshot(capsys, tmp_path):
    d = tmp_path / "dir.json"
    d.mkdir()
    rc, _, err = _cli(capsys, "summary", str(d))
    assert rc == 2 and err == f"nbprof summary: error: cannot read the trace: {d}: is a directory, not a trace file\n"
    rc, out, err = _cli(capsys, "summary", "--strict", "--format", "json", str(SNAPSHOT))  # every loader takes strict
    assert rc == 0 and json.loads(out)["trace_entries"] == 2941


def test_cli_summary_of_a_memory_snapshot_and_timeline(capsys):
    rc, out, _ = _cli(capsys, "summary", "--format", "json", str(SNAPSHOT))
    s = json.loads(out)
    assert rc == 0
    assert (s["trace_entries"], s["segments"], s["blocks"], s["devices"]) == (2941, 16, 146, [0])
    rc, out, _ = _cli(capsys, "summary", "--format", "json", str(TIMELINE))
    s = json.loads(out)
    assert rc == 0 and s["rows"] == sum(s["categories"].values()) and s["categories"]["parameter"] > 0


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        ((), "nothing to report on: give --script or at least one of --trace/--nsys/--logdir/--ds-log/--ds-trace/--ranks"),
        (("--trace", "/nonexistent/run.json.gz"), "--trace '/nonexistent/run.json.gz' does not exist"),
        (("--script", "/nonexistent/train.py"), "--script '/nonexistent/train.py' does not exist"),
        (("--ds-trace", "/nonexistent/r0.json"), "--ds-trace '/nonexistent/r0.json' does not exist"),
        (("--nsys", "/nonexistent/x.sqlite"), "--nsys '/nonexistent/x.sqlite' does not exist"),
    ],
)
def test_cli_report_checks_its_inputs_before_running(capsys, tmp_path, argv, expect):
    rc, out, err = _cli(capsys, "report", "--out", str(tmp_path), *argv)
    assert rc == 2 and out == ""
    assert err == f"nbprof report: error: {expect}\n"
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing written


def test_cli_help_lists_every_command_and_explains_every_option(capsys):
    from nbprof.cli import main

    with pytest.raises(SystemExit, match="0"):
        main(["--help"])
    out = capsys.readouterr().out
    for cmd in ("summary", "demo", "report"):
        assert re.search(rf"^\s+{cmd}\s+\S", out, re.MULTILINE), f"{cmd} has no help line"
    assert "examples:" in out
    for cmd in ("summary", "demo", "report"):
        with pytest.raises(SystemExit, match="0"):
            main([cmd, "--help"])
        lines = capsys.readouterr().out.splitlines()
        body = [ln for ln in lines[lines.index("options:"):] if ln.strip()] if "options:" in lines else []
        body += [ln for ln in lines if re.match(r"^  [a-z]\w*$|^  [a-z]\w*\s{2,}\S", ln)]  # positionals
        explained = 0
        for i, ln in enumerate(body):
            m = re.match(r"^  (-[\w-]+(?:, --[\w-]+)?(?: [A-Z_.]+| \.\.\.)?|[a-z]\w*)(\s{2,}\S.*)?$", ln)
            if not m:
                continue
            nxt = body[i + 1] if i + 1 < len(body) else ""
            has_help = bool(m.group(2)) or re.match(r"^\s{10,}\S", nxt) is not None
            assert has_help, f"nbprof {cmd} --help: {m.group(1)!r} has no help text"
            explained += 1
        assert explained >= 2, f"nbprof {cmd} --help: options not found in {lines}"


def test_nsys_loader_missing_file_is_file_not_found():
    from nbprof.sources.nsys import load_nsys

    with pytest.raises(FileNotFoundError, match=r"no such Nsight Systems file: '/nonexistent/x\.sqlite'"):
        load_nsys("/nonexistent/x.sqlite")


# ----------------------------------------------------------------------------------- packaging


def test_wheel_data_files_carry_the_report_notebooks_and_the_demo_script():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    from nbprof.report import NOTEBOOKS

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    assert sorted(cfg["share/nbprof/notebooks"]) == sorted(f"notebooks/{n}" for n, _ in NOTEBOOKS)
    assert "examples/train_cnn.py" in cfg["share/nbprof/examples"]
    for files in cfg.values():
        for f in files:
            assert (ROOT / f).is_file(), f"{f} listed in data-files does not exist"
