"""The workflow notebooks are built from notebooks/src/*.py (percent format): no drift between the two."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _make_notebooks():
    spec = importlib.util.spec_from_file_location("make_notebooks", ROOT / "scripts" / "make_notebooks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MN = _make_notebooks()


@pytest.mark.parametrize("name", MN.NOTEBOOKS)
def test_committed_notebook_equals_its_source(name, tmp_path):
    MN.build(str(tmp_path), quiet=True)
    fresh = (tmp_path / f"{name}.ipynb").read_bytes()
    committed = (ROOT / "notebooks" / f"{name}.ipynb").read_bytes()
    assert fresh == committed, MN.explain(name, committed, fresh)


def test_a_run_notebook_is_told_apart_from_an_edited_one(tmp_path):
    """A notebook JupyterLab ran and autosaved is restored with git checkout; an edited one is rebuilt from its
    source; `make_notebooks.py --check` prints the command for each (issue 38)."""
    import subprocess
    import sys

    import nbformat

    name = "case_study_dataloader"
    MN.build(str(tmp_path), quiet=True)
    path = tmp_path / f"{name}.ipynb"
    fresh = path.read_bytes()
    nb = nbformat.reads(fresh.decode(), as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.execution_count = 1
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    nbformat.write(nb, str(path))
    ran = MN.explain(name, path.read_bytes(), fresh)
    assert f"`git checkout -- notebooks/{name}.ipynb`" in ran and "was run and saved" in ran
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_notebooks.py"), "--check", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.strip() == ran
    code.source += "\nx = 1"
    edited = MN.explain(name, nbformat.writes(nb).encode(), fresh)
    assert f"edit notebooks/src/{name}.py" in edited and "`python scripts/make_notebooks.py`" in edited


def test_every_source_is_built():
    sources = {p.stem for p in (ROOT / "notebooks" / "src").glob("*.py")}
    assert sources == set(MN.NOTEBOOKS)


@pytest.mark.parametrize("name", MN.NOTEBOOKS)
def test_one_parameters_cell_of_literals(name):
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    tagged = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1 and tagged[0]["cell_type"] == "code"
    import ast

    for node in ast.parse("".join(tagged[0]["source"])).body:
        assert isinstance(node, ast.Assign), ast.dump(node)
        ast.literal_eval(node.value)


def test_percent_parser():
    text = "\n".join([
        "# header, not a cell",
        "",
        '# %% [markdown] id="m1"',
        "# # Title",
        "#",
        "# %%magic in text is not a marker",
        "",
        '# %% id="p1" tags=["parameters"]',
        "x = 1",
        "",
        "y = 2",
        "",
        "",
        "# %%",
        "print(x)",
    ])
    cells = MN.parse_percent(text, "t")
    assert [c["kind"] for c in cells] == ["markdown", "code", "code"]
    assert cells[0] == {"kind": "markdown", "id": "m1", "source": "# Title\n\n%%magic in text is not a marker"}
    assert cells[1]["source"] == "x = 1\n\ny = 2" and cells[1]["tags"] == ["parameters"]
    assert cells[2]["source"] == "print(x)" and len(cells[2]["id"]) == 8  # derived, reproducible
    assert MN.parse_percent(text, "t")[2]["id"] == cells[2]["id"]
    with pytest.raises(ValueError, match="markdown line"):
        MN.parse_percent("# %% [markdown]\nnot a comment", "t")
