"""Shared fixtures: paths to the real corpus (skip with a reason when absent) and to data/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NBPROF_SHARED", ROOT.parent / "shared"))
CORPUS = SHARED / "corpus"
SAMPLES = SHARED / "notes" / "samples"
DATA = ROOT / "data"


def corpus_path(rel: str) -> Path:
    """Path of a corpus file; skips the calling test when ../shared/corpus or the file is absent."""
    p = CORPUS / rel
    if not p.exists():
        pytest.skip(f"real trace {rel} not available: ../shared/corpus is absent on this machine")
    return p


def sample_path(rel: str) -> Path:
    p = SAMPLES / rel
    if not p.exists():
        pytest.skip(f"sample {rel} not available: ../shared/notes/samples is absent on this machine")
    return p


@pytest.fixture(scope="session")
def corpus():
    return corpus_path


@pytest.fixture(scope="session")
def samples():
    return sample_path


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium through Playwright (``executable_path``, never ``playwright install``); skips
    with the reason when Chromium or Playwright is missing. One browser per test module."""
    from browser_support import CHROMIUM, LAUNCH_ARGS, need_chromium

    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield b
        finally:
            b.close()
