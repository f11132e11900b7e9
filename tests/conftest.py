"""Fixtures and hooks only (what they use lives in ``tests/_support/``): paths to the real corpus and samples
(skip with a reason when absent), one headless Chromium and one JupyterLab server per module, markers set from
what a test uses (:mod:`_support.markers`), and an autouse check that no test leaks a profiler session or a
registry change (:mod:`_support.leaks`)."""

from __future__ import annotations

import pytest
from _support.leaks import leak_state, leaks_since
from _support.markers import markers_of
from _support.paths import corpus_path, sample_path


@pytest.fixture(scope="session")
def corpus():
    """:func:`_support.paths.corpus_path`: a corpus file's path, or a skip with the reason."""
    return corpus_path


@pytest.fixture(scope="session")
def samples():
    """:func:`_support.paths.sample_path`: a sample's path, or a skip with the reason."""
    return sample_path


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium through Playwright (``executable_path``, never ``playwright install``); skips
    with the reason when Chromium or Playwright is missing. One browser per test module."""
    from _support.chromium import CHROMIUM, LAUNCH_ARGS, need_chromium

    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A real JupyterLab server (:func:`_support.jupyterlab.jupyterlab_server`), one per test module; skips with the
    reason when Chromium, Playwright or JupyterLab is missing."""
    from _support.chromium import need_chromium
    from _support.jupyterlab import jupyterlab_server

    need_chromium()
    pytest.importorskip("jupyterlab")
    with jupyterlab_server(tmp_path_factory.mktemp("lab")) as server:
        yield server


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add the markers each test gets from what it uses (:func:`_support.markers.markers_of`)."""
    for item in items:
        for m in sorted(markers_of(item) - {mk.name for mk in item.iter_markers()}):
            item.add_marker(getattr(pytest.mark, m))


@pytest.fixture(autouse=True)
def _no_leaks():
    """Fail the test that leaves a torch profiler session running or a registry changed (both undone, so that
    the tests after it run as if it had not)."""
    state = leak_state()
    yield
    leaks = leaks_since(state)
    if leaks:
        pytest.fail("leaked out of the test: " + "; ".join(leaks), pytrace=False)
