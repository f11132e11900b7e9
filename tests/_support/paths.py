"""Where the tests find their inputs: the repository, its ``data/``, and the shared real traces and samples
(``../shared`` beside the repository, ``NBPROF_SHARED`` overrides), which skip the calling test with the reason
when absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
    """Path of a sample under ../shared/notes/samples; skips the calling test when it is absent."""
    p = SAMPLES / rel
    if not p.exists():
        pytest.skip(f"sample {rel} not available: ../shared/notes/samples is absent on this machine")
    return p
