"""nsys loader on the real corpus export, the runner (unique names, no overwrite, timeout + leftover agent
cleanup), .nsys-rep export and version errors, missing-nsys errors, the %nsys magic, nbprof.nvtx."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from _support.nsys import agents_running, nsys_or_skip
from _support.paths import corpus_path

import nbprof
from nbprof.errors import CaptureError, TraceFormatError

SAXPY = "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"


def test_corpus_export_loads_kernels_copies_api_nvtx():
    t = nbprof.load(corpus_path(SAXPY))
    t.validate()
    c = t.category_counts()
    assert (c["kernel"], c["gpu_memcpy"], c["cuda_runtime"], c["cuda_driver"], c["nvtx"]) == (5, 15, 94, 1, 22)
    k = t.events[t.events["cat"] == "kernel"].iloc[0]
    assert k["name"] == "saxpy(double *, double *, double *, double, int)"
    assert (k["grid"], k["block"], int(k["registers"]), int(k["device"]), int(k["stream"])) == ("2,1,1", "512,1,1", 26, 0, 7)
    m = t.events[t.events["cat"] == "gpu_memcpy"]
    assert set(m["name"]) == {"[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]"} and set(m["bytes"]) == {262144000}
    # every GPU op is linked to its launching API call (ac2g flow by correlation id)
    assert len(t.flows) == 20 and set(t.flows["dst_tid"]) == {7}
    assert t.meta.device_properties[0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert t.meta.device_properties[0]["totalGlobalMem"] == 42297524224
    assert t.meta.origin_ns == 1687813257637297504
    assert "MPI:MPI_Send" in set(t.events.loc[t.events["cat"] == "nvtx", "name"])
    from nbprof.sources.nsys import decode_global_id, nsys_tables

    assert decode_global_id(302119224788637) == (1230493, 1230493)
    tabs = nsys_tables(t)
    assert len(tabs["cpu_samples"]) == 5451 and tabs["cpu_samples"]["call_stack"].notna().any()
    assert tabs["kernels"]["short_name"].iloc[0] == "saxpy"
    assert "MPI Rank 0" in set(t.threads["name"])


def test_bad_sqlite_inputs_name_the_file(tmp_path):
    bad = tmp_path / "notdb.sqlite"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(TraceFormatError) as ei:
        nbprof.load(bad)
    assert str(bad) in str(ei.value)
    import sqlite3

    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    with pytest.raises(TraceFormatError, match="StringIds"):
        nbprof.load(other)


def test_missing_nsys_is_an_actionable_error(monkeypatch, tmp_path):
    from nbprof.capture.nsys import profile
    from nbprof.capture.nsys_fetch import ensure_nsys

    monkeypatch.setenv("NBPROF_NSYS", str(tmp_path / "no-such-nsys"))
    with pytest.raises(CaptureError, match="NBPROF_NSYS"):
        ensure_nsys()
    monkeypatch.delenv("NBPROF_NSYS")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("NBPROF_NSYS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(CaptureError, match="nsys_fetch"):
        profile(["true"], results_dir=tmp_path)


def test_unique_output_names(tmp_path):
    from nbprof.capture.nsys import unique_output

    a = unique_output(tmp_path, "train cnn")
    a.with_name(a.name + ".nsys-rep").write_text("x")
    b = unique_output(tmp_path, "train cnn")
    assert a != b and a.name.startswith("train_cnn-") and b.name.startswith(a.name)


WORK = textwrap.dedent('''
    import time, nbprof.nvtx as nv
    for i in range(2):
        with nv.range("step", payload=i):
            time.sleep(0.01)
''')


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    inst = nsys_or_skip()
    from nbprof.capture.nsys import profile

    d = tmp_path_factory.mktemp("nsysrun")
    (d / "work.py").write_text(WORK)
    phases = []
    run = profile([sys.executable, str(d / "work.py")], output=d / "out", nsys=inst, timeout_s=240,
                  progress=lambda p, e, line: phases.append(p))
    return run, d, phases


def test_runner_argv_output_and_no_overwrite(small_run):
    from nbprof.capture.nsys import profile

    run, d, phases = small_run
    assert run.returncode == 0 and run.report_path == str(d / "out.nsys-rep") and os.path.exists(run.sqlite_path)
    assert run.argv[1] == "profile" and "--force-overwrite" in run.argv and run.argv[-1].endswith("work.py")
    assert phases[0] == "starting" and phases[-1] == "done" and "generating report" in phases
    from nbprof.api import load_nsys_run

    assert load_nsys_run(run).steps == [0, 1]
    with pytest.raises(CaptureError, match="exists"):
        profile([sys.executable, "-c", "pass"], output=d / "out")


def test_nsys_rep_exports_to_cache_and_newer_report_is_refused(small_run, tmp_path, monkeypatch):
    run, d, _ = small_run
    monkeypatch.setenv("NBPROF_EXPORT_CACHE", str(tmp_path / "exports"))
    rep = tmp_path / "copy.nsys-rep"
    shutil.copyfile(run.report_path, rep)
    t = nbprof.load(rep)  # exported with the installed nsys into the cache, not next to the report
    assert t.steps == [0, 1] and not (tmp_path / "copy.sqlite").exists()
    assert str(tmp_path / "exports") in t.meta.extra["sqlite_path"]
    from nbprof.capture.nsys import report_version

    data = rep.read_bytes()
    v = report_version(rep)
    assert v and v.startswith("2022.4")
    newer = tmp_path / "newer.nsys-rep"
    newer.write_bytes(data.replace(v.encode(), b"2099.1" + v.encode()[6:]))
    with pytest.raises(CaptureError) as ei:
        nbprof.load(newer)
    assert "2099.1" in str(ei.value) and "2022.4" in str(ei.value) and "newer" in str(ei.value)


def test_timeout_ends_nsys_and_its_agent(tmp_path):
    inst = nsys_or_skip()
    from nbprof.capture.nsys import profile

    before = set(agents_running())
    with pytest.raises(CaptureError, match="timed out"):
        profile([sys.executable, "-c", "import time; time.sleep(120)"], output=tmp_path / "slow", nsys=inst,
                timeout_s=6)
    assert set(agents_running()) <= before, "an nsys agent of the timed-out run survived"


def test_nsys_cell_magic_and_usage_errors(tmp_path, monkeypatch):
    nsys_or_skip()
    from IPython.core.error import UsageError
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    ip.run_line_magic("load_ext", "nbprof")
    monkeypatch.chdir(tmp_path)
    res = ip.run_cell_magic("nsys", "-r -q --results res",
                            "import time, nbprof.nvtx as nv\nfor i in range(3):\n"
                            "    with nv.range('step', payload=i):\n        time.sleep(0.01)\n")
    assert res.trace.steps == [0, 1, 2] and res.run.report_path.startswith("res/")
    assert "nvtx_sum" in res.to_html() and "&lt;" not in res.to_html().split("nvtx_sum")[0][:50]
    with pytest.raises(UsageError):
        ip.run_line_magic("nsys", "profile")
    with pytest.raises(UsageError):
        ip.run_line_magic("nsys", "load")
    loaded = ip.run_line_magic("nsys", f"load -r -q {res.run.sqlite_path}")
    assert loaded.trace.steps == [0, 1, 2]


def test_nvtx_is_a_noop_without_library_or_when_disabled():
    code = ("import nbprof.nvtx as nv\n"
            "with nv.range('a', payload=1, domain='d'):\n    nv.mark('m')\n"
            "@nv.range()\ndef f(x):\n    return x + 1\n"
            "assert f(1) == 2 and nv.start_range('x') == 0\n"
            "print(nv.available())\n")
    env = dict(os.environ, NBPROF_NVTX="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"
    import nbprof.nvtx as nv

    with nv.range("outside a profiler"):  # the real library, no injection: must not fail
        pass


def test_fetch_cli_reports_nsys():
    nsys_or_skip()
    cp = subprocess.run([sys.executable, "-m", "nbprof.capture.nsys_fetch"], capture_output=True, text=True,
                        timeout=600, check=False)
    assert cp.returncode == 0 and cp.stdout.startswith("nsys 20"), cp.stderr
