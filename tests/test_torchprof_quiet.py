"""``%%torchprof -q`` hides the profiler's own stderr noise (issue 20), in a real IPython shell with real torch.

The native profiler writes ``USDT: … profiler_start`` / ``profiler_stop`` straight to file descriptor 2; pytest's
``capfd`` sees fd 2, so these tests see what a terminal (or a Jupyter kernel forwarding fd 2) would show.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from nbprof.magics._quiet import is_noise, quiet_profiler


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
    if "profiler_start" not in loud:
        pytest.skip("this torch build prints no USDT profiler_start line: nothing to hide")
    assert "from the cell" in loud


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
