"""The examples in nbprof's docstrings run (``make test`` runs this file).

Every module of nbprof/ whose source holds a ``>>>`` example is imported and its docstrings are run with
doctest; the model (``nbprof.trace``) and the analyses (``nbprof.analysis``) are always searched, examples
or not, so that their examples stay honest as they are added.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "nbprof"


def _modules() -> list[str]:
    out = []
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        always = name.startswith(("nbprof.trace", "nbprof.analysis"))
        if always or ">>>" in p.read_text(encoding="utf-8"):
            out.append(name)
    return out


MODULES = _modules()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in finder.find(mod, name, globs={"__name__": name, **vars(mod)}):
        runner.run(test)
    res = runner.summarize(verbose=False)
    assert res.failed == 0, f"{res.failed} of {res.attempted} docstring examples in {name} failed (output above)"


def test_examples_exist():
    finder = doctest.DocTestFinder(exclude_empty=True)
    n = sum(len(t.examples) for name in MODULES for t in finder.find(importlib.import_module(name), name))
    assert n >= 30, n
