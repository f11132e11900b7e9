"""``docs/layout.md`` names every top-level module and subpackage of ``nbprof/`` (issue 35): its "Modules" list is
checked against the package, both ways, so that the page cannot fall behind the code."""

from __future__ import annotations

import re

from _support.paths import ROOT

PKG = ROOT / "nbprof"
LAYOUT = ROOT / "docs" / "layout.md"


def _package_entries() -> set[str]:
    """``name.py`` for each top-level module, ``name/`` for each subpackage (a folder with ``__init__.py``)."""
    return ({p.name for p in PKG.glob("*.py")}
            | {f"{p.name}/" for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()})


def _documented_entries() -> list[str]:
    """The names that open the bullets of the "## Modules" section (``- `name.py`: ...``)."""
    section = LAYOUT.read_text(encoding="utf-8").split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- `([\w.]+/?)`", section, flags=re.MULTILINE)


def test_layout_names_every_top_level_module_and_subpackage():
    documented = _documented_entries()
    actual = _package_entries()
    assert {"trace/", "analysis/", "units.py", "cli.py"} <= actual  # the scan sees the package
    missing = sorted(actual - set(documented))
    unknown = sorted(set(documented) - actual)
    twice = sorted({d for d in documented if documented.count(d) > 1})
    assert not missing, f"docs/layout.md does not name {missing}: add one line each"
    assert not unknown, f"docs/layout.md names {unknown}, not in nbprof/: remove or rename them"
    assert not twice, f"docs/layout.md names {twice} more than once"
