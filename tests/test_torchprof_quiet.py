"""``%%torchprof -q`` hides the profiler's own stderr noise (issue 20), in a real IPython shell with real torch.

The native profiler writes ``USDT: … profiler_start`` / ``profiler_stop`` straight to file descriptor 2; pytest's
``capfd`` sees fd 2, so these tests see what a terminal (or a Jupyter kernel forwarding fd 2) would show.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from _support.paths import ROOT

pytest.importorskip("torch")

from nbprof.capture.quiet import is_noise, quiet_profiler


@pytest.fixture(scope="module")
def ip():
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    shell = globalipapp.get_ipython()
    loaded_here = "nbprof" not in shell.extension_manager.loaded
    if loaded_here:
        shell.run_line_magic("load_ext", "nbprof")
    shell.run_cell("import sys, torch\nqa = torch.randn(64, 64)\n").raise_error()
    yield shell
    if loaded_here:
        shell.run_line_magic("unload_ext", "nbprof")


CELL = "qb = torch.mm(qa, qa)\nprint('from the cell', file=sys.__stderr__, flush=True)\n"


def test_quiet_hides_profiler_lines_keeps_the_cells(ip, capfd, tmp_path):
    capfd.readouterr()
    ip.run_cell(f"%%torchprof --trace {tmp_path / 'loud.json'}\n{CELL}").raise_error()
    loud = capfd.readouterr().err
    ip.run_cell(f"%%torchprof -q --trace {tmp_path / 'quiet.json'}\n{CELL}").raise_error()
    quiet = capfd.readouterr()
    assert "from the cell" in quiet.err  # the user's own stderr line stays
    assert not [ln for ln in quiet.err.splitlines() if is_noise(ln)], quiet.err
    assert "profiler_start" not in quiet.err and "USDT" not in quiet.err
    assert quiet.out == ""  # -q: nothing displayed
    # without -q too: nbprof's own start/stop calls run inside the same filter (fd-2 lines only)
    assert "from the cell" in loud and "profiler_start" not in loud and "USDT" not in loud


def test_quiet_reraises_the_cells_exception(ip, capfd, tmp_path):
    capfd.readouterr()
    res = ip.run_cell(f"%%torchprof -q --trace {tmp_path / 'err.json'}\n"
                      "print('before the error', file=sys.__stderr__, flush=True)\nraise KeyError('from the cell')\n")
    assert isinstance(res.error_in_exec, KeyError)
    err = capfd.readouterr().err
    assert "before the error" in err and "profiler_start" not in err
    # fd 2 is restored: a later write reaches it directly
    import os

    os.write(2, b"after the cell\n")
    assert "after the cell" in capfd.readouterr().err


def test_quiet_profiler_filters_only_noise(capfd):
    import os

    with quiet_profiler():
        os.write(2, b"USDT:2026-12-01 18:04:18 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"[W1201 12:00:00.123456 42 c10/cuda/CUDAAllocatorConfig.h:28] Warning: expandable_segments\n")
        os.write(2, b"STAGE:2026-12-01 18:04:18 1:1 ActivityProfilerController.cpp:312] Completed Stage: Warm Up\n")
        os.write(2, b"[W1201 12:00:00.1 42 my_extension.cpp:3] Warning: a user library\n")
        os.write(2, b"plain line\n")
    err = capfd.readouterr().err
    assert err == "[W1201 12:00:00.1 42 my_extension.cpp:3] Warning: a user library\nplain line\n"
    with quiet_profiler(False):
        os.write(2, b"USDT: kept when off\n")
    assert "kept when off" in capfd.readouterr().err


# a terminal IPython in a subprocess (the fd-level output is what the test reads): nbprof's own profiler calls
# (start/stop, also without -q) and the cell under -q leave no USDT line; the cell's own fd-2 output stays
SCRIPT = textwrap.dedent("""
    from IPython.testing.globalipapp import start_ipython
    ip = start_ipython()
    ip.run_line_magic("load_ext", "nbprof")
    ip.run_cell("import os, torch, nbprof; a = torch.randn(64, 64); b = torch.randn(64, 64)")
    ip.run_cell_magic("torchprof", "-q --var kept --profile-memory", "torch.mm(a, b)\\nos.write(2, b'user line\\\\n')\\n")
    ip.run_cell_magic("torchprof", "-q --var k2 --active 1 --repeat 2",
                      "for _ in range(3):\\n    torch.mm(a, b)\\n    nbprof.step()\\n")
    print("DONE", type(ip.user_ns["kept"]).__name__, len(ip.user_ns["kept"].operators()))
""")


def test_quiet_torchprof_has_no_usdt_lines_on_stderr(tmp_path):
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and "DONE ProfileResult" in r.stdout, (r.stdout[-2000:], r.stderr[-3000:])
    assert "USDT" not in r.stderr and "profiler_start" not in r.stderr, r.stderr[-2000:]
    assert "user line" in r.stderr  # the profiled code's own fd-2 output is untouched
