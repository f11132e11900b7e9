"""Write the workflow notebooks in notebooks/ from their sources in notebooks/src/ (edit there, then run this).

    python scripts/make_notebooks.py              # writes notebooks/*.ipynb
    python scripts/make_notebooks.py --out DIR    # writes them to DIR instead
    python scripts/make_notebooks.py --check      # exit 1 when a committed notebook differs from its source

The sources are Python files in jupytext's *percent* format, so ruff and the tests see the notebooks' code:

    # %% [markdown] id="a6a53e01"
    # # A heading
    # text, one ``# `` comment line per markdown line (an empty line is a bare ``#``)

    # %% id="a34c5ced" tags=["parameters"]
    trace = ""

A cell runs from its ``# %%`` line to the next one; trailing blank lines are not part of it. Lines before the
first marker are a header for people. Attributes on the marker are ``key=JSON`` pairs: ``id`` (the nbformat
cell id; a cell without one gets an id derived from the notebook's name and the cell's position, so that
output is reproducible) and ``tags`` (e.g. ``["parameters"]`` for papermill's parameters cell: one cell of
literals per notebook). Each notebook resolves relative paths against the repository root, so it runs from
notebooks/ (nbval, JupyterLab) and from the root (``nbprof report``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "notebooks")
SRC = os.path.join(OUT, "src")

#: Notebooks built from notebooks/src/<name>.py, in build order.
NOTEBOOKS = (
    "00_workflow",
    "01_system_nsys",
    "02_operators_pytorch",
    "03_visualize_tensorboard",
    "04_distributed_deepspeed",
    "case_study_dataloader",
)

_MARKER = re.compile(r"^# %%(?=\s|$)(?: \[(?P<kind>\w+)\])?(?P<attrs>.*)$")
_ATTR = re.compile(r'\s*(\w+)=("(?:[^"\\]|\\.)*"|\[[^\]]*\])')


def _attrs(text: str, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pos = 0
    for m in _ATTR.finditer(text):
        if text[pos:m.start()].strip():
            raise ValueError(f"{where}: cannot read cell attributes {text!r}")
        out[m.group(1)] = json.loads(m.group(2))
        pos = m.end()
    if text[pos:].strip():
        raise ValueError(f"{where}: cannot read cell attributes {text!r}")
    return out


def parse_percent(text: str, name: str) -> list[dict[str, Any]]:
    """Cells of a percent-format source: dicts ``kind`` ("code"/"markdown"), ``source``, ``id``, ``tags``."""
    cells: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for lineno, line in enumerate(text.split("\n"), 1):
        m = _MARKER.match(line)
        if m:
            kind = m.group("kind") or "code"
            if kind not in ("code", "markdown"):
                raise ValueError(f"{name}:{lineno}: unknown cell kind {kind!r}")
            cur = {"kind": kind, "lines": [], **_attrs(m.group("attrs"), f"{name}:{lineno}")}
            cells.append(cur)
        elif cur is not None:
            if cur["kind"] == "markdown" and line:
                if line == "#":
                    line = ""
                elif line.startswith("# "):
                    line = line[2:]
                else:
                    raise ValueError(f"{name}:{lineno}: a markdown line must start with '# ' (or be '#')")
            elif cur["kind"] == "markdown":
                line = "\x00"  # a blank line: the end of the cell (or a gap before the next marker)
            cur["lines"].append(line)
    for i, c in enumerate(cells):
        lines = c.pop("lines")
        while lines and lines[-1] in ("", "\x00"):
            lines.pop()
        if "\x00" in lines:
            raise ValueError(f"{name}: markdown cell {i} has a blank line; write '#' for an empty markdown line")
        c["source"] = "\n".join(lines)
        c.setdefault("id", hashlib.sha1(f"{name}:{i}".encode()).hexdigest()[:8])
    return cells


def build_notebook(name: str, src_dir: str = SRC) -> nbformat.NotebookNode:
    """The notebook of ``notebooks/src/<name>.py``."""
    with open(os.path.join(src_dir, name + ".py"), encoding="utf-8") as f:
        cells = parse_percent(f.read(), name)
    nb_cells = []
    for c in cells:
        make = new_markdown_cell if c["kind"] == "markdown" else new_code_cell
        cell = make(c["source"], id=c["id"])
        if c.get("tags"):
            cell.metadata["tags"] = list(c["tags"])
        nb_cells.append(cell)
    n = new_notebook(cells=nb_cells)
    n.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    n.metadata["language_info"] = {"name": "python"}
    return n


def build(out_dir: str = OUT, src_dir: str = SRC, quiet: bool = False) -> list[str]:
    """Write every notebook of :data:`NOTEBOOKS` to ``out_dir``; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name in NOTEBOOKS:
        path = os.path.join(out_dir, name + ".ipynb")
        nbformat.write(build_notebook(name, src_dir), path)
        paths.append(path)
        if not quiet:
            print("wrote", path)
    return paths


def check(out_dir: str = OUT, src_dir: str = SRC) -> list[str]:
    """Names of the notebooks in ``out_dir`` that differ (byte for byte) from what their sources build."""
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in build(tmp, src_dir, quiet=True):
            name = os.path.basename(path)
            committed = os.path.join(out_dir, name)
            with open(path, "rb") as a:
                fresh = a.read()
            try:
                with open(committed, "rb") as b:
                    same = b.read() == fresh
            except FileNotFoundError:
                same = False
            if not same:
                stale.append(name)
    return stale


def _cells(data: bytes) -> list[tuple[str, str]] | None:
    """(cell type, source) of each cell of a notebook file's bytes; None when it is not a readable notebook."""
    try:
        nb = json.loads(data)
        return [(c.get("cell_type", ""), "".join(c.get("source", ""))) for c in nb.get("cells", [])]
    except (ValueError, AttributeError, TypeError):
        return None


def explain(name: str, committed: bytes | None, fresh: bytes) -> str:
    """Why ``notebooks/<name>.ipynb`` differs from what its source builds, and the exact command that restores it.

    A notebook whose cells are its source's but that was *run and saved* (outputs, execution counts: JupyterLab
    autosaves an open notebook) is restored with ``git checkout``; a notebook whose code was edited is rebuilt
    from ``notebooks/src`` (the source is the file to edit).
    """
    base = name[:-len(".ipynb")] if name.endswith(".ipynb") else name
    nb_path, src_path = f"notebooks/{base}.ipynb", f"notebooks/src/{base}.py"
    if committed is None:
        return f"{nb_path} is missing: run python scripts/make_notebooks.py"
    if _cells(committed) == _cells(fresh):
        return (f"{nb_path} was run and saved (its outputs, execution counts or metadata differ from {src_path}'s; "
                f"JupyterLab autosaves an open notebook): restore it with `git checkout -- {nb_path}` (close it in "
                "JupyterLab first, or its autosave writes it again; to keep a run, File > Save Notebook As a copy "
                "outside notebooks/)")
    return (f"{nb_path}'s cells differ from {src_path}: edit {src_path} (the notebook is built from it) and run "
            f"`python scripts/make_notebooks.py`, which rewrites {nb_path} (its own edits are lost; "
            f"`git diff {nb_path}` shows them)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=OUT, help="folder for the .ipynb files (default notebooks/)")
    p.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    a = p.parse_args(argv)
    if a.check:
        stale = check(a.out)
        if stale:
            with tempfile.TemporaryDirectory() as tmp:
                build(tmp, quiet=True)
                for name in stale:
                    committed = os.path.join(a.out, name)
                    old = Path(committed).read_bytes() if os.path.exists(committed) else None
                    print(explain(name, old, Path(tmp, name).read_bytes()), file=sys.stderr)
        return 1 if stale else 0
    build(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
