"""The ``nbprof`` command's conventions, each run as a real subprocess (real exit codes, real pipes): --version,
python -m nbprof, bare nbprof, exit codes in --help, hints for wrong arguments, summary --format json through
``python -m json.tool``, a reader closing the pipe early, stats with nsys's report names and headers (checked
against the real ``nsys stats`` where Nsight Systems runs here), -o BASE files, check's bootstrap gate, export;
and the ``%nsys`` magic's argument conventions (--help, -o NAME, -r, --var, a stray word)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest
from _support.paths import DATA, ROOT, corpus_path

from nbprof.analysis import nsys_stats

SAXPY = "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
TRACE = DATA / "gpu" / "cnn_h200.pt.trace.json.gz"  # 3 steps, 2304 events
FAST = DATA / "gpu" / "cnn_nw4_prep.pt.trace.json.gz"  # 6 steps, median 3.13 ms (4 DataLoader workers)
SLOW = DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"  # same CNN, 6 steps, median 24.2 ms (no workers)
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def nbprof(*argv: str, module: str = "nbprof", **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *map(str, argv)], capture_output=True, text=True, env=ENV,
                          timeout=600, **kw)


# ------------------------------------------------------------------------------------- entry points, usage


def test_version_from_python_m_nbprof_and_the_cli_module():
    from nbprof import __version__

    for module in ("nbprof", "nbprof.cli"):
        r = nbprof("--version", module=module)
        assert (r.returncode, r.stdout, r.stderr) == (0, f"nbprof {__version__}\n", "")


def test_bare_nbprof_lists_the_commands_on_stderr_with_exit_2():
    r = nbprof()
    assert r.returncode == 2 and r.stdout == ""
    for cmd in ("summary", "stats", "check", "export", "demo", "report"):
        assert re.search(rf"^\s+{cmd}\s+\S", r.stderr, re.MULTILINE), cmd


def test_help_documents_the_exit_codes():
    r = nbprof("--help")
    assert r.returncode == 0 and r.stderr == ""
    codes = r.stdout.split("exit status:\n", 1)[1]
    assert re.search(r"^  0  success", codes, re.MULTILINE)
    assert re.search(r"^  1  a gate failed: nbprof check", codes, re.MULTILINE)
    assert re.search(r"^  2  bad input or usage", codes, re.MULTILINE)


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (("sumary", TRACE), "hint: did you mean 'summary'?"),
        (("summary", "--stirct", TRACE), "hint: did you mean --strict?"),
        (("summary", TRACE, TRACE), "hint: nbprof summary takes one trace: nbprof summary TRACE [options]"),
        (("report", "--tarce", TRACE), "hint: did you mean --trace?"),
        (("stats", TRACE, "-f", "xml"), "invalid choice: 'xml'"),
        (("stats",), "hint: see 'nbprof stats --help'"),
        (("summary", "--trace", TRACE), "hint: the trace is positional: nbprof summary TRACE [options]"),
        (("stats", TRACE, "-r"), "hint: reports: cuda_gpu_kern_sum, cuda_api_sum,"),
        (("report", "--bogus"), "hint: see 'nbprof report --help'"),
    ],
)
def test_wrong_arguments_exit_2_with_a_hint_and_no_traceback(argv, hint):
    r = nbprof(*argv)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.startswith("usage: nbprof") and hint in r.stderr


def test_summary_of_a_directory_says_so_and_names_it(tmp_path):
    r = nbprof("summary", tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"nbprof summary: error: cannot read the trace: {tmp_path}: is a directory, not a trace file\n"


def test_report_takes_the_trace_positionally_and_o_means_output(tmp_path):
    missing = tmp_path / "nope.pt.trace.json.gz"
    r = nbprof("report", missing, cwd=tmp_path)  # positional = --trace: checked before anything runs
    assert r.returncode == 2 and r.stderr == f"nbprof report: error: --trace '{missing}' does not exist\n"
    r = nbprof("report", TRACE, "-o", tmp_path / "r.txt", cwd=tmp_path)
    assert r.returncode == 2 and "one .html file (-o report.html) or a folder (-o DIR)" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cmd", [("summary", TRACE), ("stats", TRACE, "-r", "ops"), ("export", TRACE, "--chrome")])
def test_o_into_a_missing_folder_exits_2_in_one_line_before_loading(tmp_path, cmd):
    out = tmp_path / "no" / "such" / "out.json"
    r = nbprof(*cmd, "-o", out)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr == (f"nbprof {cmd[0]}: error: -o '{out}': the folder '{out.parent}' does not exist "
                        "(create it first, e.g. mkdir -p)\n")
    assert not (tmp_path / "no").exists()


def test_o_onto_an_unwritable_path_exits_2_without_a_traceback(tmp_path):
    # the folder exists but -o names a folder: the write itself fails (EISDIR) -> one line, exit 2
    (tmp_path / "d").mkdir()
    r = nbprof("summary", TRACE, "-o", tmp_path / "d")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == f"nbprof summary: error: cannot write '{tmp_path / 'd'}': Is a directory\n"


@pytest.mark.parametrize("what", ["directory", "not a trace"])
def test_report_trace_on_a_directory_or_a_non_trace_file_exits_2(tmp_path, what):
    bad = tmp_path / "folder"
    if what == "directory":
        bad.mkdir()
    else:
        bad = tmp_path / "notes.txt"
        bad.write_text("hello, not a trace\n")
    r = nbprof("report", "--trace", bad, "-o", tmp_path / "r.html", "--no-progress", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"nbprof report: error: --trace '{bad}' ") and len(r.stderr.splitlines()) == 1
    assert ("is a directory, not a trace file" if what == "directory" else "is not a trace nbprof can read") in r.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.slow
def test_report_of_a_positional_trace_with_o_dir_writes_a_report_folder_there(tmp_path):
    """`nbprof report TRACE -o DIR`: the trace given positionally, the report in a new report-<time> folder in DIR
    (-o FILE.html writes one file: tests/test_report.py)."""
    r = nbprof("report", TRACE, "-o", tmp_path / "reports", "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    (html,) = (tmp_path / "reports").glob("report-*/report.html")
    assert r.stdout == f"report: {html}\n"
    assert "aten::conv2d" in html.read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------- summary


def test_summary_json_is_pure_json_for_python_m_json_tool():
    prod = subprocess.Popen([sys.executable, "-m", "nbprof", "summary", "--format", "json", str(TRACE)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    tool = subprocess.run([sys.executable, "-m", "json.tool"], stdin=prod.stdout, capture_output=True, text=True)
    prod.stdout.close()
    assert prod.wait(timeout=300) == 0 and prod.stderr.read() == b""
    assert tool.returncode == 0, tool.stderr
    doc = json.loads(tool.stdout)
    assert (doc["events"], doc["steps"], doc["duration_ns"], doc["devices"]) == (2304, [2, 3, 4], 11960487, ["NVIDIA H200"])
    assert [(i["kind"], i["action"]) for i in doc["load_report"]] == [("rank_assumed", "assumed")]


def test_summary_text_is_for_people_and_o_writes_the_file(tmp_path):
    r = nbprof("summary", TRACE)
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert "steps:     2, 3, 4" in lines and "duration:  11.960 ms" in lines and "devices:   NVIDIA H200" in lines
    assert lines[-1] == "  - assumed: no distributedInfo.rank and no rank in the file name: rank assumed 0"
    out = tmp_path / "s.json"
    r = nbprof("summary", TRACE, "-f", "json", "-o", out)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == f"wrote {out}\n"
    assert json.loads(out.read_text())["events"] == 2304


def test_a_reader_closing_the_pipe_early_ends_quietly():
    """`nbprof stats T -r ops -f csv | head -c 100`: the pipe is shrunk to one page so that the 16 kB of CSV
    cannot fit in it, the reader takes 100 bytes and closes it; nbprof gets EPIPE and must exit 0 quietly."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    proc = subprocess.Popen([sys.executable, "-m", "nbprof", "stats", str(TRACE), "-r", "ops", "-f", "csv"],
                            stdout=write_end, stderr=subprocess.PIPE, env=ENV)
    os.close(write_end)
    head = os.read(read_end, 100)
    os.close(read_end)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err
    assert head.startswith(b"name,cat,count,self_host_ns")
    assert err == "" and "BrokenPipe" not in err


# --------------------------------------------------------------------------------------------------- stats


def test_stats_csv_has_nsys_report_names_headers_and_numbers():
    saxpy = corpus_path(SAXPY)
    r = nbprof("stats", saxpy, "-r", "cuda_gpu_kern_sum", "-f", "csv")
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0] == "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),GridXYZ,BlockXYZ,Name"
    assert lines[1] == '100.0,88573480,5,17714696.0,17713960.0,17700808,17733416,12992.1,"2,1,1","512,1,1",' \
                       '"saxpy(double *, double *, double *, double, int)"'
    # the 2022 name (gpukernsum) is the same report; a report without data is SKIPPED on stderr
    r2 = nbprof("stats", saxpy, "-r", "gpukernsum,osrt_sum", "-f", "csv")
    assert r2.returncode == 0 and r2.stdout == "# cuda_gpu_kern_sum\n" + r.stdout
    assert r2.stderr == f"SKIPPED: {saxpy} has no data for the osrt_sum report\n"
    r3 = nbprof("stats", saxpy, "-r", "cuda_gpu_kern_summ")
    assert r3.returncode == 2 and "unknown report 'cuda_gpu_kern_summ' (did you mean 'cuda_gpu_kern_sum'?)" in r3.stderr


def test_stats_headers_equal_the_real_nsys_stats_headers(tmp_path):
    """Where Nsight Systems runs here: `nsys stats --format csv` on the same export has the same columns
    (sizes: nsys prints MB, nbprof keeps bytes) and the same Time (%) values."""
    import shutil

    from _support.nsys import nsys_or_skip, oracle_frame

    from nbprof.capture.nsys import stats_csv

    inst = nsys_or_skip()
    copy = tmp_path / "saxpy.sqlite"  # nsys stats gets a copy, never the corpus file
    shutil.copyfile(corpus_path(SAXPY), copy)
    old = {"cuda_gpu_kern_sum": "gpukernsum", "cuda_api_sum": "cudaapisum", "cuda_gpu_mem_time_sum": "gpumemtimesum",
           "cuda_gpu_mem_size_sum": "gpumemsizesum", "nvtx_sum": "nvtxsum"}
    theirs = {k: oracle_frame(v) for k, v in stats_csv(copy, list(old.values()), nsys=inst).items()}
    r = nbprof("stats", copy, "-r", ",".join(old), "-f", "csv", "-o", tmp_path / "nb")
    assert r.returncode == 0
    for new, o in old.items():
        ours = pd.read_csv(tmp_path / f"nb_{new}.csv")
        assert [c.replace("(B)", "(MB)") for c in ours.columns] == list(theirs[o].columns), new
        if "Time (%)" in ours:
            assert sorted(ours["Time (%)"]) == sorted(theirs[o]["Time (%)"].astype(float)), new


def test_stats_o_base_writes_one_file_per_report_with_ns_and_bytes(tmp_path):
    from nbprof import load
    from nbprof.analysis.steps import step_breakdown

    base = tmp_path / "run"
    r = nbprof("stats", TRACE, "-r", "cuda_gpu_kern_sum,steps,kernels,findings,collectives", "-f", "parquet", "-o", base)
    assert r.returncode == 0 and r.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run_cuda_gpu_kern_sum.parquet", "run_findings.parquet",
                                                          "run_kernels.parquet", "run_steps.parquet"]
    assert f"SKIPPED: {TRACE} has no data for the collectives report" in r.stderr
    tr = load(TRACE)
    steps = pd.read_parquet(f"{base}_steps.parquet")
    pd.testing.assert_frame_equal(steps, step_breakdown(tr).reset_index(drop=True), check_dtype=False)
    assert steps["step_ns"].tolist() == [4159186, 3673572, 3766659]
    kern = pd.read_parquet(f"{base}_cuda_gpu_kern_sum.parquet")
    ref = nsys_stats.cuda_gpu_kern_sum(tr)
    assert kern["Total Time (ns)"].tolist() == ref["total_ns"].tolist() and len(kern) == 35
    assert kern["Instances"].sum() == 114  # every kernel of the trace
    findings = pd.read_parquet(f"{base}_findings.parquet")
    assert "dataloader" in set(findings["rule"]) and findings["evidence"].map(json.loads).map(type).eq(dict).all()
    r = nbprof("stats", TRACE, "-r", "steps", "-f", "parquet")
    assert r.returncode == 2 and "give -o BASE" in r.stderr


def test_stats_json_is_one_document():
    r = nbprof("stats", TRACE, "-r", "steps,idle", "-f", "json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert list(doc) == ["steps", "idle"] and [s["step"] for s in doc["steps"]] == [2, 3, 4]
    r = nbprof("stats", TRACE, "-r", "steps", "-f", "json")
    assert [s["step_ns"] for s in json.loads(r.stdout)] == [4159186, 3673572, 3766659]


def test_stats_annotations_and_aten_kernels_reports():
    """``-r annotations,aten_kernels``: the time per GPU-side annotation name and the kernels per ATen op
    (``nbprof.analysis.annotations.annotation_breakdown``, ``launch_ops.aten_op_kernels``), in ns."""
    from nbprof import load
    from nbprof.analysis.launch_ops import aten_op_kernels

    r = nbprof("stats", TRACE, "-r", "annotations,aten_kernels", "-f", "json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    ref = aten_op_kernels(load(TRACE))
    assert len(doc["aten_kernels"]) == len(ref) > 0
    assert doc["aten_kernels"][0]["occurrence_count"] == int(ref["occurrence_count"].iloc[0])
    assert sum(a["occurrence_count"] for a in doc["aten_kernels"]) == int(ref["occurrence_count"].sum())
    assert (doc["aten_kernels"][0]["aten_op_name"], doc["aten_kernels"][0]["occurrence_count"]) == ("aten::fill_", 12)
    assert [(a["name"], a["total_ns"]) for a in doc["annotations"]][:2] == [("ProfilerStep#2", 909074),
                                                                          ("ProfilerStep#3", 784789)]
    assert len(doc["annotations"]) == 4 and doc["annotations"][3]["name"] == "Optimizer.step#SGD.step"


def test_stats_table_prints_nsys_columns_for_people():
    r = nbprof("stats", corpus_path(SAXPY), "-r", "cuda_gpu_mem_size_sum")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[1].startswith("** cuda_gpu_mem_size_sum (")
    assert lines[3].split() == ["Total", "(B)", "Count", "Avg", "(B)", "Med", "(B)", "Min", "(B)", "Max", "(B)",
                                "StdDev", "(B)", "Operation"]
    assert lines[5].split()[:2] == ["2,621,440,000", "10"] and lines[5].endswith("[CUDA memcpy HtoD]")


# --------------------------------------------------------------------------------------------------- check


def test_check_fails_a_real_regression_with_exit_1_and_markdown():
    r = nbprof("check", "--baseline", FAST, "--candidate", SLOW, "--max-regress", "5%")
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("### nbprof check: regression (FAIL)")
    assert "candidate / baseline = **7.753**" in r.stdout and "[2.090, 11.411]" in r.stdout
    assert "nbprof check: regression: step time median x7.753" in r.stderr


def test_check_json_same_trace_and_improvement_pass():
    r = nbprof("check", TRACE, TRACE, "--format", "json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    # a trace against itself passes, but its 3 steps' spread cannot rule out a 5% slowdown: inconclusive, not ok
    assert (doc["verdict"], doc["ratio"], doc["failed"]) == ("inconclusive", 1.0, False)
    assert doc["ci_low"] < 1 < 1.05 < doc["ci_high"] and doc["baseline_steps_ns"] == [4159186, 3673572, 3766659]
    assert doc["notes"][1:] == ["the baseline has 3 steps: the interval is coarse (profile more steps for a firmer answer)",
                            "the candidate has 3 steps: the interval is coarse (profile more steps for a firmer answer)"]
    r = nbprof("check", "-a", SLOW, "-b", FAST, "-f", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["verdict"] == "improvement"


def test_check_is_noise_aware_and_deterministic():
    """CPU CNN with 0 vs 2 DataLoader workers: the 2-worker run's first step (43 ms warm-up) and its spread make
    a 37% median difference impossible to call at 5% -- "inconclusive", never "ok" -- with the smallest change
    these steps can detect; the same call gives the same interval (fixed seed)."""
    a, b = DATA / "cpu" / "cnn_nw2.pt.trace.json.gz", DATA / "cpu" / "cnn_nw0.pt.trace.json.gz"
    outs = [nbprof("check", "-a", a, "-b", b, "-f", "json") for _ in range(2)]
    assert outs[0].returncode == 0 and outs[0].stdout == outs[1].stdout
    doc = json.loads(outs[0].stdout)
    assert doc["verdict"] == "inconclusive" and round(doc["ratio"], 3) == 1.374 and doc["ci_low"] < 1.05
    assert doc["ci_high"] > 1.05 and doc["failed"] is False
    mdc = doc["min_detectable_change"]
    assert mdc == pytest.approx((doc["ci_high"] - doc["ci_low"]) / (2 * doc["ratio"])) and mdc > 0.05
    assert any(f"about {100 * mdc:.0f}% or more can be detected" in n for n in doc["notes"])
    md = nbprof("check", "-a", a, "-b", b).stdout
    assert md.startswith("### nbprof check: inconclusive (cannot tell: smallest detectable change about")
    assert "(ok)" not in md


def test_check_refuses_runs_of_different_hardware():
    """A V100 trace against a CPU-only one: exit 2 with the reason, unless --allow-different-hardware."""
    gpu = corpus_path("pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz")
    cpu = DATA / "cpu" / "cnn_nw0.pt.trace.json.gz"
    r = nbprof("check", gpu, cpu)
    assert r.returncode == 2 and "the runs differ in hardware: baseline Tesla V100" in r.stderr
    assert "candidate no GPU x1 ranks" in r.stderr and "--allow-different-hardware" in r.stderr
    r = nbprof("check", gpu, cpu, "--allow-different-hardware", "-f", "json")
    assert r.returncode in (0, 1) and json.loads(r.stdout)["baseline_steps_ns"][0] == 187948000


def test_check_usage_errors():
    r = nbprof("check", TRACE)
    assert r.returncode == 2 and "give two traces: --baseline A --candidate B" in r.stderr
    r = nbprof("check", TRACE, TRACE, "--max-regress", "5")
    assert r.returncode == 2 and "a fraction below 1 (0.05) or a percentage (5%)" in r.stderr
    r = nbprof("check", TRACE, TRACE, "--skip", "3")
    assert r.returncode == 2 and "--skip 3 leaves none of its 3 steps" in r.stderr


# -------------------------------------------------------------------------------------------------- export


def test_export_writes_perfetto_and_chrome_files_that_read_back(tmp_path):
    import json

    from nbprof import load

    pytest.importorskip("perfetto")
    want = load(TRACE).to_chrome_trace(tmp_path / "api.json")  # the API's own count of slices written
    out = tmp_path / "t.pftrace"
    r = nbprof("export", TRACE, "--perfetto", "-o", out)
    assert r.returncode == 0 and out.stat().st_size > 0 and "Traceback" not in r.stderr
    assert r.stdout == "" and "wrote" in r.stderr  # data files, diagnostics on stderr
    out = tmp_path / "t.json"  # the format from the suffix
    r = nbprof("export", TRACE, "-o", out)
    assert r.returncode == 0
    events = json.loads(out.read_text())["traceEvents"]
    assert sum(e.get("ph") == "X" for e in events) == want.slices == 2304  # every event of the trace
    assert sum(e.get("name") == "[memory]" for e in events) == want.memory == 392
    r = nbprof("export", TRACE, "-o", tmp_path / "t.bin")
    assert r.returncode == 2 and "say --perfetto or --chrome" in r.stderr


# -------------------------------------------------------------------------------------------- %nsys magic


@pytest.fixture(scope="module")
def ip():
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import get_ipython

    shell = get_ipython()
    shell.run_line_magic("load_ext", "nbprof")
    return shell


def test_nsys_help_shows_the_options_without_running_anything(ip, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for line in ("--help", "-h", "profile --help"):
        assert ip.run_line_magic("nsys", line) is None
        out = capsys.readouterr().out
        assert "-o NAME, --output NAME" in out and "--var NAME" in out and "Report name, as nsys -o" in out
    assert list(tmp_path.iterdir()) == []  # nothing profiled
    doc = ip.find_line_magic("nsys").__doc__  # what %nsys? shows
    assert "-o NAME, --output NAME" in doc and "-r " in doc


@pytest.mark.parametrize("line", ["python t.py", "profile python t.py", "-o NAME python t.py",
                                  "--cuda-memory-usage true python t.py", "profile -q t.py -- python t.py"])
def test_nsys_a_word_not_after_double_dash_is_a_usage_error(ip, line):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="is not an option; the program goes after --"):
        ip.run_line_magic("nsys", line)


def test_nsys_o_names_the_report_and_r_var_return_the_result(ip, tmp_path, monkeypatch):
    from _support.nsys import nsys_or_skip

    from nbprof.results.nsys import NsysResult

    nsys_or_skip()
    monkeypatch.chdir(tmp_path)
    res = ip.run_line_magic("nsys", "profile -o myrun -r -q --var kept --results res "
                            "-- python -c \"import time; time.sleep(0.05)\"")
    assert isinstance(res, NsysResult) and ip.user_ns["kept"] is res
    assert os.path.basename(res.run.report_path).startswith("myrun")
    # as `nsys profile -o myrun`: relative to the working directory (--results only holds unnamed reports)
    assert os.path.dirname(os.path.abspath(res.run.report_path)) == str(tmp_path)
    assert ip.run_line_magic("nsys", f"load -q --var again {res.run.sqlite_path}") is None  # no -r: nothing returned
    assert ip.user_ns["again"].trace.meta.source_path == str(res.run.sqlite_path)


def test_summary_counts_equal_devices_and_names_the_one_with_events():
    # the machine's four V100s are in deviceProperties; the trace's events ran on GPU 0 only
    path = corpus_path("pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz")
    r = nbprof("summary", path)
    assert r.returncode == 0
    assert "devices:   4 x Tesla V100-DGXS-32GB (events on device 0)\n" in r.stdout
    doc = json.loads(nbprof("summary", path, "--format", "json").stdout)
    assert doc["devices"] == ["Tesla V100-DGXS-32GB"] * 4 and doc["event_devices"] == [0]
