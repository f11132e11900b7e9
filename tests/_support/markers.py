"""Markers set at collection from what a test uses (``tests/conftest.py``'s hook calls :func:`markers_of`), never
by hand:

- ``browser``, ``lab``, ``nsys``, ``corpus``: from the fixtures a test uses (``browser``, ``lab``, ``corpus``)
  and from what the test or its fixtures call (``need_chromium``/Playwright, JupyterLab, ``nsys_or_skip``,
  ``corpus_path``), so ``-m "not browser"`` leaves out every Chromium test;
- ``timing``: the tests whose assertions are bounds on live timings (they or their fixtures call
  ``_support.timing_guard``'s ``measure``/``until_right``): another process on the cores disturbs them, so the
  parallel fast loop (``make test-fast``: ``-n 2``) leaves them out and ``make test`` runs them serially;
- ``slow``: the tests listed in :data:`SLOW` and those using a fixture of :data:`SLOW_FIXTURES` (measured over
  10 s), so ``-m "not slow"`` is the fast loop (serial), ``-m "not slow and not timing" -n 2`` its parallel form.
"""

from __future__ import annotations

import inspect

import pytest

#: marker -> (fixture names, text in the source of the test or of one of its fixtures)
NEEDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "browser": (("browser",), ("need_chromium(", "sync_playwright")),
    "lab": (("lab",), ("jupyterlab", '"lab"')),
    "nsys": ((), ("nsys_or_skip(",)),
    "corpus": (("corpus",), ("corpus_path(",)),
    "timing": ((), (" measure(", "=measure(", "until_right(")),
}

#: tests over 10 s, by node id -> seconds measured (``pytest --durations``: setup + call) on the 2-core machine shared
#: by other sessions. The first block: load 11-14 (2-4x a quiet run's), before issue 35. The last block (issue 35):
#: every test not marked slow, run in 8 chunks at load 11-16 with each chunk's process CPU time; a test's quiet-machine
#: seconds = measured / the chunk's slowdown (its wall time / its CPU time, 2.6-3.3), shown after ``#``; slow when > 10
SLOW: dict[str, float] = {
    "tests/test_browser_reload.py::test_dashboard_survives_page_reload_and_reads_in_light_and_dark": 322.9,
    "tests/test_browser.py::test_views_in_jupyterlab": 73.8,
    "tests/test_browser_watch_lab.py::test_watch_chart_flag_click_dashboard_and_reload": 47.1,
    "tests/test_browser_distributed_lab.py::test_dashboard_of_two_ranks_in_jupyterlab": 37.8,
    "tests/test_browser_merge.py::test_merged_timeline_static_page_has_both_sources_lanes": 33.4,
    "tests/test_browser_lab_layout.py::test_dashboard_fits_the_notebook_panel_with_the_file_browser_open": 32.9,
    "tests/test_browser_lab_layout.py::test_show_on_the_timeline_brings_the_plot_into_the_window": 31.9,
    "tests/test_browser_dashboard_links.py::test_finding_button_selects_the_timeline_and_zooms_to_the_evidence": 29.3,
    "tests/test_browser_modules.py::test_live_views_in_jupyterlab": 27.5,
    "tests/test_browser_report_tables.py::test_column_header_click_sorts_numerically": 21.7,
    "tests/test_report_browser.py::test_report_renders_offline": 18.3,
    "tests/test_browser_report_themes.py::test_report_first_screen_light_and_dark": 17.8,
    "tests/test_browser.py::test_static_html_offline": 14.4,
    "tests/test_report_demo.py::test_demo_loop_answers_all_four_questions": 116.5,
    "tests/test_report.py::test_cli_report_from_a_real_run": 63.3,
    "tests/test_tensorboard_notebook.py::test_tensorboard_compare_notebook": 50.4,
    "tests/test_whatif_knobs.py::test_balance_ranks_on_a_real_gloo_straggler": 46.6,
    "tests/test_script_capture.py::test_report_script_without_steps_profiles_the_whole_run": 39.7,
    "tests/test_report.py::test_report_on_existing_artefacts": 35.2,
    "tests/test_cli.py::test_report_of_a_positional_trace_with_o_dir_writes_a_report_folder_there": 35.2,
    "tests/test_scale_archives.py::test_script_without_main_guard_gets_a_clear_error": 22.3,
    "tests/test_torchprof_magic.py::test_demo_notebook_shows_table_and_summary": 19.2,
    "tests/test_script_capture.py::test_report_script_under_nsys_merges_on_step_ranges": 18.6,
    "tests/test_cli.py::test_check_usage_errors": 17.5,
    "tests/test_report.py::test_report_to_a_file_and_step_4_on_one_ddp_rank": 17.2,
    "tests/test_scale.py::test_dask_local_cluster_gives_identical_results": 16.4,
    "tests/test_cli.py::test_export_writes_perfetto_and_chrome_files_that_read_back": 16.2,
    "tests/test_cli.py::test_check_refuses_runs_of_different_hardware": 16.2,
    "tests/test_watch_trainers.py::test_hf_trainer_callback": 15.7,
    "tests/test_cli.py::test_check_is_noise_aware_and_deterministic": 15.3,
    "tests/test_cli.py::test_stats_csv_has_nsys_report_names_headers_and_numbers": 15.0,
    "tests/test_cli.py::test_summary_counts_equal_devices_and_names_the_one_with_events": 12.9,
    "tests/test_cli.py::test_check_json_same_trace_and_improvement_pass": 12.5,
    "tests/test_report.py::test_cli_report_errors": 12.0,
    # issue 35, the parallel fast loop: measured s  # its process tree's CPU s (alone, load 5.5): a full
    # `nbprof report --script` (a profiled script, then the four papermill notebooks)
    "tests/test_cli_newcomer.py::test_report_of_an_unmodified_script_says_who_marked_the_steps_in_short_numbers": 31.0,  # 15.2
    "tests/test_cli.py::test_summary_text_is_for_people_and_o_writes_the_file": 11.1,
    # issue 35 (measured s  # quiet s)
    "tests/test_ranks_timeline.py::test_distributed_view_on_real_deepspeed_run": 45.8,  # 15.9
    "tests/test_html_clean.py::test_cli_report_html_is_clean": 35.0,  # 13.7
    "tests/test_gpu_capture.py::test_dry_run_pairs_and_skips": 38.5,  # 12.4
    "tests/test_browser_ranks_overview.py::test_report_of_a_job_dataset_draws_the_overview": 50.0,  # ~17 (load 13)
    "tests/test_browser_ranks_overview_lab.py::test_click_a_rank_opens_its_full_timeline": 57.0,  # ~19 (load 13)
    # issue 30 (CPU contention: two captures a try, the before one 3x slower by design, up to 3 tries; load 4-7)
    "tests/test_cpu_contention.py::test_other_processes_on_the_cpu_are_named_with_the_measured_saving": 54.2,
}
#: (test file, fixture) -> seconds of its setup: a module fixture over 10 s makes every test that uses it (or a
#: fixture built on it) slow, since its setup is charged to whichever of them runs first; measured as :data:`SLOW`
SLOW_FIXTURES: dict[tuple[str, str], float] = {
    ("test_analysis_whatif.py", "cpu_runs"): 106.1,
    ("test_harness.py", "rows"): 83.6,
    ("test_deepspeed_run.py", "runs"): 43.8,
    # issue 35 (measured s  # quiet s)
    ("test_distributed_depth.py", "straggler_run"): 63.7,  # 20.6: a 2-rank gloo DDP job under torchrun
    ("test_distributed_depth.py", "gpipe_traces"): 39.6,  # 12.8: a 2-stage GPipe job under torchrun
}

_SOURCES: dict[object, str] = {}


def _source(fn: object) -> str:
    if fn not in _SOURCES:
        try:
            _SOURCES[fn] = inspect.getsource(fn)  # type: ignore[arg-type]
        except (OSError, TypeError):
            _SOURCES[fn] = ""
    return _SOURCES[fn]


def markers_of(item: pytest.Item) -> set[str]:
    """The markers ``item`` gets from the fixtures it uses, what it or they call, and :data:`SLOW`."""
    names = set(getattr(item, "fixturenames", ()))
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    texts = [_source(getattr(item, "function", None))]
    texts += [_source(d[-1].func) for n, d in defs.items() if d and n in names]
    out = {m for m, (fixtures, calls) in NEEDS.items()
           if names & set(fixtures) or any(c in t for t in texts for c in calls)}
    rel = item.nodeid.split("[")[0]
    if rel in SLOW or f"tests/{rel}" in SLOW or any((item.path.name, f) in SLOW_FIXTURES for f in names):
        out.add("slow")
    return out
