"""The README's "Disk" paragraph (issue 38): the folders it names are the ones nbprof writes to, and the commands it
gives remove them (``make clean`` removes the .venv; the caches live under ``~/.cache/nbprof``)."""

from __future__ import annotations

import os
import re

from _support.paths import ROOT

from nbprof.capture import nsys_fetch
from nbprof.trace_cache import default_cache_dir


def test_readme_names_the_folders_nbprof_writes_and_how_to_remove_them(monkeypatch, tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    disk = re.search(r"\*\*Disk\.\*\*(.*?)\n\n", readme, re.S).group(1)
    assert re.search(r"takes [\d.]+ GB in \d+ packages", disk) and re.search(r"\(\d+ MB;", disk)
    for var in ("NBPROF_NSYS_CACHE", "NBPROF_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    home = str(tmp_path)
    for folder in (str(nsys_fetch.cache_dir()), default_cache_dir()):
        shown = "~" + folder[len(home):]
        assert f"`{shown}`" in disk and os.path.commonpath([folder, os.path.join(home, ".cache", "nbprof")]) == \
            os.path.join(home, ".cache", "nbprof")
    assert "`rm -rf ~/.cache/nbprof`" in disk and "`make clean`" in disk
    clean = re.search(r"^clean:\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "$(VENV)" in clean.split()  # make clean removes the environment the paragraph measures
