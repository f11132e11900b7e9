"""Regenerate the screenshots in docs/ with headless Chromium (Playwright, ``executable_path=/usr/bin/chromium``).

    python scripts/screenshots.py                 # runs the browser tests, copies their shots to docs/
    python scripts/screenshots.py --only report   # just the report (or: dashboard, views)
    python scripts/screenshots.py --keep DIR      # also keep every shot the tests took in DIR

The screenshots are the ones the browser tests take while they check the pages (so a shot in docs/ is of a
page that passed its checks): ``tests/test_browser_report_themes.py`` (the report's first screen, light and
dark colour scheme), ``tests/test_browser_reload.py`` (the dashboard, ``tr.show()``, each of its views in
JupyterLab light and dark, after a page reload) and ``tests/test_browser.py`` (each view on its own, a zoomed
timeline, the dark theme). The tests run with ``NBPROF_SCREENSHOTS`` pointing at a temporary folder; this
script then copies the shots named in ``DOCS`` into docs/. Needs Debian's chromium (``make browser``) and
JupyterLab; never downloads a browser. Run it from the repository root with the project's venv.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the dashboard's views of one trace (the registry's order), each shot light and dark
DASHBOARD_VIEWS = ("overview", "operators", "kernels", "timeline", "memory", "critical_path", "roofline", "modules",
                   "call_stack")

#: group -> (test file, [(shot taken by the test, name in docs/), ...])
DOCS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "report": ("tests/test_browser_report_themes.py", [
        ("report_first_screen_light.png", "report_first_screen.png"),
        ("report_first_screen_dark.png", "report_first_screen_dark.png"),
    ]),
    "dashboard": ("tests/test_browser_reload.py", [
        *((f"dashboard_{v}_{t}.png", f"dashboard_{v}_{t}.png")
          for v in DASHBOARD_VIEWS
          for t in ("light", "dark")),
        ("dashboard_overview_light.png", "dashboard.png"),
    ]),
    "views": ("tests/test_browser.py", [(f"{n}.png", f"{n}.png") for n in (
        "timeline", "operators", "memory", "overview", "timeline_zoomed", "timeline_dark", "operators_dark",
        "timeline_corpus")]),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=sorted(DOCS), action="append", help="a group of shots (repeatable)")
    ap.add_argument("--keep", type=Path, help="keep all the shots the tests took in this folder")
    ap.add_argument("--docs", type=Path, default=ROOT / "docs", help="where the shots go (default docs/)")
    a = ap.parse_args(argv)
    groups = a.only or list(DOCS)
    shots = Path(tempfile.mkdtemp(prefix="nbprof_shots_")) if a.keep is None else a.keep
    shots.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NBPROF_SCREENSHOTS=str(shots),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    tests = [DOCS[g][0] for g in groups]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=ROOT, env=env)
    a.docs.mkdir(parents=True, exist_ok=True)
    missing = []
    for g in groups:
        for src, dst in DOCS[g][1]:
            if (shots / src).exists():
                shutil.copyfile(shots / src, a.docs / dst)
                print(f"docs/{dst}  <- {src}")
            else:
                missing.append(src)
    if missing:
        print("not taken (a test failed or was skipped): " + ", ".join(missing), file=sys.stderr)
    if a.keep is None:
        shutil.rmtree(shots, ignore_errors=True)
    return r.returncode or (1 if missing else 0)


if __name__ == "__main__":
    sys.exit(main())
