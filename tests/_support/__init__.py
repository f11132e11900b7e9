"""What the tests share, one module per thing provided; ``tests/conftest.py`` keeps only fixtures and hooks.

- :mod:`_support.paths`: the repository, ``data/`` and the shared corpus/samples (``corpus_path`` skips with the
  reason when a file is absent);
- :mod:`_support.chromium`: the Debian Chromium driven through Playwright, offline pages, JupyterLab notebooks;
- :mod:`_support.nsys`: Nsight Systems (``nsys_or_skip``), ``nsys stats`` CSV oracles, leftover-agent checks;
- :mod:`_support.paired_capture`: one real run profiled by nsys and torch.profiler at once;
- :mod:`_support.timing_guard`: the guard every wall-clock bound uses (``measure``, ``until_right``);
- :mod:`_support.markers`: markers set from what a test uses and the measured slow tests;
- :mod:`_support.leaks`: what the autouse leak check compares (profiler session, plug-in registries).

Imported as ``_support`` (``tests/`` is on ``sys.path``: pyproject's pytest ``pythonpath``, and scripts that
import it put it there), like the ``fuzz`` package beside it.
"""
