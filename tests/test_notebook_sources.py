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
    assert fresh == committed, (
        f"notebooks/{name}.ipynb differs from notebooks/src/{name}.py: run python scripts/make_notebooks.py"
    )


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
