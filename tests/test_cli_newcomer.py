"""What a new user types first, run as the real ``nbprof`` command (subprocess): a missing trace, a folder given
as ``--script``, a watched script that raises, and the ``watch`` help and examples (nbprof's options before the
script: every word after it is the script's)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from _support.paths import ROOT

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


TINY = """
import time
import torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 12 * 4
    def __getitem__(self, i):
        time.sleep(0.005)
        return torch.randn(8), torch.randn(1)

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(DataLoader(Slow(), batch_size=4)):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"step {i} loss {loss.item():.4f}")
"""


def test_report_of_an_unmodified_script_says_who_marked_the_steps_in_short_numbers(tmp_path):
    import re

    pytest.importorskip("torch")
    pytest.importorskip("papermill")
    script = tmp_path / "train.py"
    script.write_text(TINY)
    r = nbprof("report", "--script", script, "--no-nsys", "--no-progress", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    # no ProfilerStep in the script: the report says nbprof's optimizer hook made them (not "the profiler's own")
    assert "ProfilerStep ranges, marked by nbprof at each optimizer.step() of the script." in page
    assert "(the profiler&#x27;s own)" not in page and "(the profiler's own)" not in page
    # the first screen's sentences: three significant digits ("56.2 ms", "560 ms"), not "560.023 ms"
    line = re.search(r"Step time: median ([^<]*) over \d+ steps\.", page).group(1)
    assert re.fullmatch(r"(\d{3}|\d{2}\.\d|\d\.\d\d) m?s, min (\d{3}|\d{2}\.\d|\d\.\d\d) m?s, "
                        r"max (\d{3}|\d{2}\.\d|\d\.\d\d) m?s", line), line
    over = re.search(r"Profiler overhead: profiled steps took [\d.]+x the unprofiled ones \(median ([^)]*)\)", page)
    assert over and not re.search(r"\d\.\d{3} m?s", over.group(1)), over


def test_a_captured_step_left_out_of_a_window_verdict_is_not_called_its_first_step():
    from types import SimpleNamespace

    from nbprof.results.watch_render import captured_line

    row = SimpleNamespace(step=16, profiler_step=1, trace="w/capture.pt.trace.json.gz", step_ns=231_143_000,
                          median_ns=65_580_000, grew="cpu_wait", bound="dataloader", bound_ratio=0.8,
                          trace_step_ns=231_324_000, first_rule="", first_finding="", syncs=1, median_syncs=1.0,
                          in_window_verdict=False, contributors=[])
    line = captured_line(row)  # ProfilerStep#1: a second leading step steady_state took for warm-up
    assert "left out of the window's verdict (one of its leading steps, taken for warm-up)" in line
    assert "its first step" not in line


def test_report_script_shows_what_the_script_prints_and_its_own_exception(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "boom.py"
    script.write_text("print('epoch 0 starting', flush=True)\n\ndef f():\n    raise ValueError('user bug 42')\n\nf()\n")
    r = nbprof("report", "--script", script, "--no-nsys", "--no-progress", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert r.returncode == 3 and r.stdout == "", r.stderr  # stdout is the result (report: PATH); none here
    err = r.stderr
    # the script's own output as it runs, then its exception as Python prints it: its frames, no nbprof frames
    assert err.index("profiling with torch.profiler: ") < err.index("epoch 0 starting") < err.index("Traceback")
    tb = err[err.index("Traceback"):err.index("ValueError: user bug 42")]
    assert f'File "{script}", line 6, in <module>' in tb and "line 4, in f" in tb and "nbprof" not in tb
    assert err.count("ValueError: user bug 42") == 1  # shown once, not again in nbprof's error line
    assert "nothing was recorded" not in err and "a GPU was requested" not in err
    assert err.rstrip().endswith("(its output is above)") and "nbprof report: error: the workload failed" in err
    assert not (tmp_path / "r.html").exists()


def test_stats_of_a_cpu_trace_without_r_points_to_the_reports_that_have_data():
    from _support.paths import DATA

    trace = DATA / "cpu" / "cnn_nw2.pt.trace.json.gz"
    r = nbprof("stats", trace)
    assert r.returncode == 0 and r.stdout == ""
    assert r.stderr.count("SKIPPED: ") == 6
    assert r.stderr.endswith(f"hint: none of the nsys stats reports has data in {trace}; nbprof's own reports read "
                             f"any trace: nbprof stats {trace} -r ops,steps,findings\n")
    r = nbprof("stats", trace, "-r", "steps")  # the hint's command works
    assert r.returncode == 0 and "step" in r.stdout and "hint:" not in r.stderr


def test_the_readmes_capture_script_command_runs_as_written(tmp_path):
    import re
    import shlex

    pytest.importorskip("torch")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    cmd = re.search(r"`(python -m nbprof\.capture\.script [^`]*)`", " ".join(readme.split())).group(1)
    argv = shlex.split(cmd)
    assert argv[-1] == "train.py" and "--trace" in argv  # --trace is required: without it argparse refuses
    (tmp_path / "train.py").write_text(TINY)
    r = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, env=ENV, timeout=600,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    trace = tmp_path / argv[argv.index("--trace") + 1]
    assert trace.is_file() and trace.stat().st_size > 0


def test_check_and_stats_help_say_they_read_a_watch_run_folder():
    check = " ".join(nbprof("check", "--help").stdout.split())
    assert "a trace, or an nbprof watch run folder" in check and "a trace or a watch run folder" in check
    stats = " ".join(nbprof("stats", "--help").stdout.split())
    assert "or an nbprof watch run folder (its per-step log: -r steps)" in stats
    report = " ".join(nbprof("report", "--help").stdout.split())  # -o FILE.html still writes the run into --out
    assert "--script's run-<time> folder (its trace, TensorBoard run) with -o FILE.html too" in report
