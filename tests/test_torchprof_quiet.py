"""``%%torchprof -q`` is quiet: libkineto's ``USDT ... profiler_start``/``profiler_stop`` lines, which torch 2.13
writes straight to file descriptor 2 on every start and stop of the profiler, do not reach the notebook's stderr
(issue 20); what the user's own code writes to fd 2 still does. A real IPython shell in a subprocess (so the
fd-level output is what the test reads), real torch on CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

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
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and "DONE ProfileResult" in r.stdout, (r.stdout[-2000:], r.stderr[-3000:])
    assert "USDT" not in r.stderr and "profiler_start" not in r.stderr, r.stderr[-2000:]
    assert "user line" in r.stderr  # the profiled code's own fd-2 output is untouched
