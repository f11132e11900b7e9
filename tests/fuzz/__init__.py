"""nbprof's input fuzzer (issue 18).

A mutation engine of its own over small seeds cut from the real files (data/, ../shared/notes/samples,
../shared/corpus): byte-level and structure-level mutations per format, each case run in a worker
subprocess with a per-case alarm (and a hard kill by the parent when the worker stops answering),
five invariants checked per case. ``python -m tests.fuzz --help``; the short seeded run is
tests/test_fuzz.py, the long one ``make fuzz``.
"""

from .engine import FORMATS, OUTCOMES, run_fuzz  # noqa: F401
