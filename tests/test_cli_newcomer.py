"""What a new user types first, run as the real ``nbprof`` command (subprocess): a missing trace, a folder given
as ``--script``, a watched script that raises, and the ``watch`` help and examples (nbprof's options before the
script: every word after it is the script's)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def nbprof(*argv: object, cwd: object = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbprof", *map(str, argv)], capture_output=True, text=True,
                          env=ENV, timeout=600, cwd=cwd)


def test_a_missing_trace_is_named_without_an_errno_prefix(tmp_path):
    for cmd in (["summary"], ["stats"], ["export", "--chrome", "-o", tmp_path / "x.json"]):
        r = nbprof(*cmd, tmp_path / "nope.json.gz")
        assert r.returncode == 2 and r.stdout == "", r.stderr
        assert r.stderr == f"nbprof {cmd[0]}: error: no such trace file: '{tmp_path / 'nope.json.gz'}'\n"


def test_report_and_watch_refuse_a_folder_as_the_script_in_one_line(tmp_path):
    r = nbprof("report", "--script", tmp_path, "--no-nsys", "-o", tmp_path / "r.html")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == f"nbprof report: error: --script '{tmp_path}' is a directory, not a Python script\n"
    r = nbprof("watch", tmp_path)
    assert r.returncode == 2
    assert r.stderr == f"nbprof watch: error: script '{tmp_path}': is a directory, not a Python script\n"
    assert not (tmp_path / "r.html").exists()


def test_a_watched_script_that_raises_shows_its_own_traceback_and_exits_3(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("def f():\n    raise ValueError('user bug 42')\n\nf()\n")
    r = nbprof("watch", "-o", tmp_path / "run", script, cwd=tmp_path)
    assert r.returncode == 3, r.stderr  # EXIT_CODES[3]: a run failed
    assert r.stderr.startswith("Traceback (most recent call last):\n")
    assert "ValueError: user bug 42" in r.stderr and "line 2, in f" in r.stderr
    assert "nbprof/" not in r.stderr.split("ValueError: user bug 42")[0]  # only the script's frames
    assert f"nbprof watch: error: the script '{script}' raised ValueError" in r.stderr
    assert (tmp_path / "run").is_dir()


def test_watch_options_go_before_the_script_as_help_and_examples_say(tmp_path):
    script = tmp_path / "argv.py"
    script.write_text("import sys\nprint('ARGV', sys.argv[1:])\n")
    r = nbprof("watch", "-o", tmp_path / "run", script, "--epochs", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ARGV ['--epochs', '3']" in r.stdout and (tmp_path / "run").is_dir()
    top, sub = nbprof("--help").stdout, nbprof("watch", "--help").stdout
    assert "nbprof watch -o runs/a train.py" in top and "watch train.py -o" not in top
    assert "options go before the script" in " ".join(sub.split())
