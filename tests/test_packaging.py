"""Packaging: the bare core (``pip install nbprof``, no extras) in a fresh venv loads and analyses real traces from
the command line exactly as the full environment does, and names the extra for what it lacks; the wheel and
the sdist build (``python -m build``) and pass ``twine check``, with py.typed, the console script, the lean
dependency list, the extras, the licence and the URLs in their metadata."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from _support.paths import ROOT, corpus_path

SAXPY = "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
ALEXNET = "facebookresearch__HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
CORE = {"numpy", "pandas", "msgspec", "orjson", "pyarrow"}
EXTRAS = {"viz", "notebook", "report", "tensorboard", "deepspeed", "dask", "sql", "perfetto", "torch", "all", "test",
          "examples"}
#: a child process must import the installed package, not this checkout
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def _source_copy(dst: Path) -> Path:
    """What a build needs (pyproject's package and data files), copied so no build output lands in the checkout."""
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, dst / name)
    shutil.copytree(ROOT / "nbprof", dst / "nbprof", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for sub, pattern in (("notebooks", "*.ipynb"), ("examples", "*.py")):
        (dst / sub).mkdir()
        for f in (ROOT / sub).glob(pattern):
            shutil.copy2(f, dst / sub / f.name)
    return dst


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=CLEAN_ENV, **kw)


def _metadata(text: str):
    return Parser().parsestr(text)


@pytest.mark.slow
def test_bare_core_in_a_fresh_venv_runs_summary_and_stats_and_names_the_viz_extra(tmp_path):
    saxpy, alexnet = corpus_path(SAXPY), corpus_path(ALEXNET)
    src = tmp_path / "src"
    src.mkdir()
    _source_copy(src)
    venv = tmp_path / "venv"
    r = _run([sys.executable, "-m", "venv", venv], timeout=300)
    assert r.returncode == 0, r.stderr
    py, nb = venv / "bin" / "python", venv / "bin" / "nbprof"
    # pip's cache is reused (the default ~/.cache/pip); an unreachable index is a skip, said as such
    r = _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(src)], timeout=900)
    if r.returncode != 0 and any(s in r.stderr for s in ("No matching distribution", "Could not find a version",
                                                           "Failed to establish", "NewConnectionError",
                                                           "Temporary failure in name resolution", "Network is unreachable")):
        pytest.skip(f"pip cannot reach a package index from here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-3000:]
    r = _run([py, "-c", "import importlib.metadata as m, json; print(json.dumps(sorted(d.metadata['Name'].lower() "
                        "for d in m.distributions())))"], timeout=120)
    installed = set(json.loads(r.stdout))
    assert installed >= CORE and "nbprof" in installed
    assert not installed & {"bokeh", "ipywidgets", "jupyter-bokeh", "jupyter_bokeh", "ipython", "papermill", "nbformat",
                            "nbconvert", "ipykernel", "tensorboard", "tqdm", "psutil", "torch", "duckdb"}, installed

    # the same answers as this (full) environment: summary JSON and the nsys-style stats CSV
    full_env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for argv in (["summary", "--format", "json", alexnet], ["stats", saxpy, "-r", "cuda_gpu_kern_sum,cuda_api_sum",
                                                           "-f", "csv"],
                 ["stats", alexnet, "-r", "ops,kernels,steps,idle,findings", "-f", "csv"]):
        core = _run([nb, *argv], timeout=300, cwd=tmp_path)
        full = subprocess.run([sys.executable, "-m", "nbprof", *map(str, argv)], capture_output=True, text=True,
                              env=full_env, timeout=300, cwd=tmp_path)
        assert core.returncode == 0 == full.returncode, core.stderr
        assert core.stdout == full.stdout and core.stdout, argv

    # a feature without its extra: MissingDependencyError (an ImportError) naming the extra
    probe = ("import nbprof\n"
             "from nbprof.errors import MissingDependencyError\n"
             f"tr = nbprof.load({str(alexnet)!r})\n"
             "for what, call in (('nbprof.viz', lambda: nbprof.viz), ('Trace.show', tr.show)):\n"
             "    try:\n"
             "        call()\n"
             "    except MissingDependencyError as e:\n"
             "        print(what, isinstance(e, ImportError), e.name, str(e).split('; ')[-1])\n")
    r = _run([py, "-c", probe], timeout=300)
    lines = r.stdout.splitlines()
    assert lines == ["nbprof.viz True bokeh hint: pip install 'nbprof[viz]'",
                     "Trace.show True bokeh hint: pip install 'nbprof[viz]'"], r.stdout + r.stderr
    r = _run([nb, "report", alexnet, "-o", tmp_path / "r.html", "--no-progress"], timeout=300, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("nbprof report: error: nbprof report needs papermill") and "nbprof[report]" in r.stderr


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    if importlib.util.find_spec("build") is None or importlib.util.find_spec("twine") is None:
        pytest.skip("`build` and `twine` are not installed (pip install 'nbprof[test]')")
    import setuptools

    tmp = tmp_path_factory.mktemp("dist")
    src = tmp / "src"
    src.mkdir()
    _source_copy(src)
    out = tmp / "dist"
    # this environment's setuptools when it is new enough (no download); else an isolated build env
    iso = ["--no-isolation"] if int(setuptools.__version__.split(".")[0]) >= 77 else []
    r = subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", *iso, "--outdir", str(out), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheel = next(out.glob("nbprof-*.whl"))
    sdist = next(out.glob("nbprof-*.tar.gz"))
    return wheel, sdist


def test_wheel_and_sdist_pass_twine_check(dists):
    wheel, sdist = dists
    r = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("PASSED") == 2


def test_wheel_has_py_typed_the_console_script_and_a_lean_core(dists):
    wheel, _ = dists
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = _metadata(z.read(info).decode())
        entry = z.read(info.replace("METADATA", "entry_points.txt")).decode()
    for f in ("nbprof/py.typed", "nbprof/__main__.py", "nbprof/_deps.py", "nbprof/cli.py",
              "nbprof-0.1.0.data/data/share/nbprof/notebooks/01_system_nsys.ipynb",
              "nbprof-0.1.0.data/data/share/nbprof/examples/train_cnn.py"):
        assert f in names, f
    assert any(n.startswith("nbprof/analysis/data/") for n in names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "nbprof = nbprof.cli:main" in entry
    reqs = meta.get_all("Requires-Dist")
    core = {r.split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in reqs if "extra ==" not in r}
    assert core == CORE
    assert set(meta.get_all("Provides-Extra")) >= EXTRAS
    viz = {r.split(">")[0].strip() for r in reqs if r.endswith('extra == "viz"')}
    assert viz == {"bokeh", "ipywidgets", "jupyter_bokeh"}
    assert meta["License-Expression"] == "BSD-3-Clause" and meta["Requires-Python"] == ">=3.10"
    assert "Typing :: Typed" in meta.get_all("Classifier")
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert set(urls) >= {"Homepage", "Source", "Issues"} and all(u.startswith("https://") for u in urls.values())
    assert meta.get_content_type() and meta["Description-Content-Type"] == "text/markdown"


def test_sdist_carries_the_sources_the_licence_and_py_typed(dists):
    _, sdist = dists
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for f in ("pyproject.toml", "README.md", "LICENSE", "nbprof/py.typed", "nbprof/__main__.py", "nbprof/cli.py",
              "notebooks/01_system_nsys.ipynb", "examples/train_cnn.py"):
        assert f in names, f
