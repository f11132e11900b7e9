"""The test suite's own machinery (tests/conftest.py): markers set from what a test uses, and the leak check."""

from __future__ import annotations

import json
import subprocess
import sys

from _support.leaks import leak_state, leaks_since
from _support.markers import SLOW
from _support.paths import ROOT

_DUMP = """
import json, sys, pytest
class Dump:
    def pytest_collection_finish(self, session):
        names = {"browser", "lab", "nsys", "corpus", "slow", "timing"}
        print("MARKS" + json.dumps({i.nodeid: sorted({m.name for m in i.iter_markers()} & names) for i in session.items}))
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[Dump()]))
"""


def _marks(*files: str) -> dict[str, list[str]]:
    """Node id -> markers, as one collection of ``files`` sets them."""
    r = subprocess.run([sys.executable, "-c", _DUMP, *files], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       check=False)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("MARKS")), None)
    assert r.returncode == 0 and line, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(line[5:])


def test_markers_come_from_the_fixtures_and_helpers_a_test_uses():
    marks = _marks("tests/test_browser_modules.py", "tests/test_browser_lab_layout.py", "tests/test_nsys_stats.py",
                   "tests/test_cli.py", "tests/test_layers.py", "tests/test_reductions.py")
    def having(m: str, f: str) -> set[str]:
        return {t for t, ms in marks.items() if m in ms and t.startswith(f"tests/{f}::")}

    def of(f: str) -> set[str]:
        return {t for t in marks if t.startswith(f"tests/{f}::")}

    assert having("browser", "test_browser_modules.py") == of("test_browser_modules.py") != set()
    assert having("lab", "test_browser_lab_layout.py") == of("test_browser_lab_layout.py") != set()
    # the one of test_browser_modules.py's tests that starts a JupyterLab
    assert having("lab", "test_browser_modules.py") == {"tests/test_browser_modules.py::test_live_views_in_jupyterlab"}
    assert having("nsys", "test_nsys_stats.py") and not any(ms for t, ms in marks.items() if "test_layers.py" in t)
    assert having("slow", "test_cli.py") == {t for t in SLOW if t.startswith("tests/test_cli.py::")}
    # timing: the one test of test_reductions.py that measures with timing_guard.measure (left out of `make test-fast`)
    assert having("timing", "test_reductions.py") == {"tests/test_reductions.py::test_1024_ranks_from_reductions"}
    assert not having("timing", "test_cli.py")


def test_the_leak_check_finds_and_undoes_a_registry_change_and_a_running_profiler():
    from nbprof import sources

    state = leak_state()
    sources.register("leaky", "nbprof.sources.kineto:load_kineto", suffixes=(".leak",))
    import torch
    from torch.profiler import profile

    p = profile()
    p.__enter__()
    leaks = leaks_since(state)
    assert len(leaks) == 2 and "profiler session" in leaks[0] and "sources.FORMATS changed (leaky)" in leaks[1]
    assert "leaky" not in sources.FORMATS and not torch._C._autograd._profiler_enabled()
    assert not torch.autograd.profiler._is_profiler_enabled  # the Python flag too (issue 35: -n 2 ran a test after it)
    assert leaks_since(state) == []


def test_helpers_are_imported_from_support_not_from_conftest():
    """conftest.py holds fixtures and hooks only; what tests share is imported from ``tests/_support`` (issue 35)."""
    import re

    old = re.compile(r"^\s*(from|import) (conftest|browser_support|nsys_support|merge_support|timing_guard)\b", re.M)
    files = [*(ROOT / "tests").rglob("*.py"), *(ROOT / "scripts").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    assert len(files) > 100
    assert [str(p.relative_to(ROOT)) for p in files if old.search(p.read_text(encoding="utf-8"))] == []
    assert not [p.name for p in (ROOT / "tests").glob("*_support.py")] and not (ROOT / "tests/timing_guard.py").exists()


_LEAKY = '''
from nbprof import sources


def test_leaves_a_format_registered():
    sources.register("leaky", "nbprof.sources.kineto:load_kineto", suffixes=(".leak",))


def test_after_it_sees_no_leak():
    assert "leaky" not in sources.FORMATS
'''


def test_the_autouse_leak_check_fails_the_leaking_test_and_undoes_the_leak(tmp_path):
    """The autouse fixture end to end: tests/conftest.py as the only plug-in of a pytest run of two tests."""
    import os

    (tmp_path / "test_leaky.py").write_text(_LEAKY, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider", "-rE",
                        "test_leaky.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                       check=False)
    out = r.stdout + r.stderr
    # the check fails the leaking test in its teardown (an error), and the test after it runs without the leak
    assert r.returncode == 1 and "2 passed, 1 error" in out, out[-3000:]
    assert "ERROR test_leaky.py::test_leaves_a_format_registered" in out, out[-3000:]
    assert "leaked out of the test: sources.FORMATS changed (leaky)" in out, out[-3000:]
