"""Issue 25: one run, two sources. examples/train_cnn.py profiled by Nsight Systems and torch.profiler at once
(the report's --script path), merged by nbprof.merge / nbprof.load([...]): clock alignment on the NVTX ranges
vs record_function annotations, duplicates merged into one row, nsys lanes next to Kineto's, and the advisor's
causal chain of the data wait. Real nsys 2022.4 (skipped with the reason when it cannot be had)."""

from __future__ import annotations

import numpy as np
import pytest
from _support.paired_capture import BATCH, PREPROCESS_MS, capture_pair
from _support.paths import corpus_path
from _support.timing_guard import measure

import nbprof
from nbprof.errors import SchemaError, TraceFormatError
from nbprof.trace.merge import MERGE_TABLE, event_sources

MARKED = ("step", "data", "forward", "backward")  # NVTX names (nbprof.nvtx.range in examples/train_cnn.py)


def _kineto_marked(names) -> np.ndarray:
    """Kineto's side of the marked ranges: the data/forward/backward record_functions and ProfilerStep#N
    (the NVTX step range's counterpart)."""
    n = names.astype(str)
    return (n.isin(MARKED[1:]) | n.str.startswith("ProfilerStep#")).to_numpy()


@pytest.fixture(scope="module")
def pair_run(tmp_path_factory):
    """The nsys + torch.profiler run, with how disturbed the machine was while it ran (timing_guard; one try: the
    capture takes about a minute, and a loaded machine rarely quietens in the next one)."""
    return measure(lambda attempt: capture_pair(tmp_path_factory.mktemp(f"merge_run{attempt}")), tries=1,
                   what="the nsys + torch.profiler run")


@pytest.fixture(scope="module")
def pair(pair_run):
    return pair_run.value


@pytest.fixture(scope="module")
def merged(pair):
    return nbprof.load(list(pair))


def test_load_list_is_merge_in_either_order(pair_run, pair, merged):
    nsys_path, kineto_path = pair
    n, k = nbprof.load(nsys_path), nbprof.load(kineto_path)
    other = nbprof.merge(k, n)  # swapped arguments are put right
    assert merged.meta.source_format == other.meta.source_format == "kineto+nsys"
    assert len(merged.events) == len(other.events)
    merged.validate()
    mt = merged.tables[MERGE_TABLE]
    assert len(mt) == len(merged.events)
    src = event_sources(merged)
    assert set(src.unique()) == {"kineto", "nsys", "both"}
    # every Kineto row is in the merged trace exactly once; nsys rows only once too
    kr = mt["kineto_row"].to_numpy()
    assert sorted(kr[kr >= 0].tolist()) == list(range(len(k.events)))
    nr = mt["nsys_row"].to_numpy()
    assert len(np.unique(nr[nr >= 0])) == int((nr >= 0).sum())
    # the merged rows carry both sources' fields: Kineto's name/duration, the nsys row's duration (a range pair
    # that a preemption split apart matches by time only on an undisturbed run)
    pair_run.skip_if_disturbed()
    both = merged.events[mt["source"].astype(str).to_numpy() == "both"]
    assert set(both["name"].astype(str)) >= set(MARKED[1:]) and both["name"].astype(str).str.startswith(
        "ProfilerStep#").sum() == 6
    assert (mt.loc[both.index, "nsys_dur_ns"] > 0).all()
    # nsys side tables come along on the merged clock
    assert "osrt" in merged.tables and "nvtx" in merged.tables
    assert merged.meta.extra["merge"]["kineto_path"] == kineto_path


def test_alignment_matches_the_marked_ranges_with_small_residual(pair_run, pair, merged):
    al = merged.meta.extra["merge"]
    assert al["anchor"] == "nvtx" and al["coarse_source"] == "origins"
    n = nbprof.load(pair[0])
    k = nbprof.load(pair[1])
    # Kineto annotates steps 2..7 (6 profiled steps) x step/data/forward/backward/optimizer
    kin = k.events[(k.events["cat"] == "user_annotation").to_numpy() & _kineto_marked(k.events["name"])]
    assert len(kin) == 4 * 6
    nvtx_all = n.events[(n.events["cat"] == "nvtx") & n.events["name"].astype(str).isin(MARKED)]
    assert len(nvtx_all) == 4 * 8  # nsys saw all 8 steps; the 2 unprofiled ones fall outside the Kineto window
    # Kineto's own times are untouched (a whole-ns shift): the DataLoader ranges keep their durations
    dl = lambda t: sorted(t.events.loc[t.events["name"].astype(str).str.startswith("enumerate(DataLoader)"),  # noqa: E731
                                       "dur_ns"].tolist())
    assert dl(merged) == dl(k)
    # matching and residuals are bounds on times: on a disturbed run a preemption splits a range pair apart
    pair_run.skip_if_disturbed()
    assert al["nvtx_ranges"] >= len(kin) and al["nvtx_matched"] / al["nvtx_ranges"] >= 0.99
    # every NVTX step/data/forward/backward range inside the window is one merged row with its annotation
    mt = merged.tables[MERGE_TABLE]
    src = mt["source"].astype(str).to_numpy()
    marked_rows = _kineto_marked(merged.events["name"]) & (
        merged.events["cat"].astype(str).to_numpy() == "user_annotation")
    assert marked_rows.sum() == len(kin) and (src[marked_rows] == "both").all()
    assert not (merged.events["cat"].astype(str).isin(["nvtx"]) & merged.events["name"].astype(str).isin(MARKED)).any()
    issue = merged.report.get("clock_alignment")
    assert issue is not None and issue.count == al["pairs"] and "residual max" in issue.message
    # residuals of the offset + drift fit over the starts and ends kept (a pair whose two calls were split by
    # a preemption of the busy 2-core machine is an outlier point: few of them, unless the machine was loaded)
    assert al["residual_max_ns"] < 50_000 and al["residual_median_ns"] < 50_000
    assert al["pairs"] >= 0.95 * 5 * 6 and al["outliers"] <= 0.25 * 2 * al["pairs"] and abs(al["drift"]) < 1e-3


def test_preprocessing_shows_on_the_main_thread_in_both_sources_lanes(merged):
    from nbprof.viz.timeline_lod import TimelineLayout

    ev, mt = merged.events, merged.tables[MERGE_TABLE]
    data = ev[(ev["name"].astype(str) == "data") & (ev["cat"].astype(str) == "user_annotation")]
    main = int(data["tid"].iloc[0])
    assert set(data["tid"]) == {main} and main == int(data["pid"].iloc[0])  # the main thread
    expected = PREPROCESS_MS * 1e6 * BATCH
    kin_ns = data["dur_ns"].to_numpy()
    nsys_ns = mt.loc[data.index, "nsys_dur_ns"].to_numpy()
    # each step's data wait holds the 64 x 0.2 ms of preprocessing, seen by Kineto and by nsys alike
    assert (kin_ns >= expected).all() and (nsys_ns >= expected).all()
    assert np.allclose(kin_ns, nsys_ns, rtol=0.01)
    lay = TimelineLayout(merged)
    labels = [ln.label for ln in lay.lanes]
    assert any(s.startswith("[Kineto + nsys] ") for s in labels) and any(s.startswith("[Kineto] ") for s in labels)
    assert any(s.startswith("[nsys] ") for s in labels)
    # the data rows are drawn in the main thread's "both sources" lane
    row_of = dict(zip(lay.src.tolist(), lay.row.tolist()))
    lane = next(ln for ln in lay.lanes if ln.first_row <= row_of[int(data.index[0])] < ln.first_row + ln.n_rows)
    assert lane.label.startswith("[Kineto + nsys] ") and f"thread {main}" in lane.label
    # and the main thread has an nsys lane (its OS runtime calls)
    osrt_main = ev[(ev["cat"].astype(str) == "osrt") & (ev["tid"] == main)]
    assert len(osrt_main)
    lane_n = next(ln for ln in lay.lanes
                  if ln.first_row <= row_of[int(osrt_main.index[0])] < ln.first_row + ln.n_rows)
    assert lane_n.label.startswith("[nsys] ") and f"thread {main}" in lane_n.label


def test_advisor_chain_names_the_preprocessing(merged):
    from nbprof.analysis import advisor
    from nbprof.analysis.causal import data_wait_chains

    ch = data_wait_chains(merged)
    assert len(ch) == 6 and (ch["gpu_idle_ns"] == -1).all()
    expected = PREPROCESS_MS * 1e6 * BATCH
    assert (ch["wait_ns"] >= expected).all()
    # busy-wait preprocessing: the main thread ran on the CPU, mostly outside OS calls (a loaded machine adds a
    # few: allocator mmap/munmap)
    assert (ch["on_cpu_ns"] >= 0.5 * ch["wait_ns"]).all() and (ch["on_cpu_ns"] / ch["wait_ns"]).median() >= 0.8
    # one cause, one finding: the chain explains the DataLoader wait, so it is the dataloader finding's evidence
    # (findings.one_per_cause), with the saving the chain alone predicts
    every = advisor.advise(merged)
    assert [f.rule for f in every].count("dataloader") == 1 and "data_stall_chain" not in {f.rule for f in every}
    dl = next(f for f in every if f.rule == "dataloader")
    alone = advisor.advise(merged, rules=["data_stall_chain"])
    assert len(alone) == 1 and dl.predicted_saving_ns == alone[0].predicted_saving_ns
    (same,) = dl.evidence["same_cause"]
    assert same["rule"] == "data_stall_chain" and same["title"] in dl.next_step
    title, ev = same["title"], same["evidence"]
    assert "CPU-only profile" in title and "GPU idle" not in title
    assert "DataLoader (`__next__`" in title and "`__getitem__`" in title and "on the CPU" in title
    assert dl.predicted_saving_ns is not None and dl.predicted_saving_ns > 0.5 * expected
    assert ev["wait_ns"] == int(ch["wait_ns"].max())
    # evidence from both sources: the merged data range (both) and Kineto's DataLoader range
    srcs = {e["source"] for e in ev["wait_events"]}
    assert srcs == {"both", "kineto"}
    assert all(e["nsys_row"] >= 0 for e in ev["wait_events"] if e["source"] == "both")
    rows = merged.events.iloc[alone[0].evidence_rows[:2]]
    assert set(rows["tid"]) == {ev["tid"]}
    # the plain Kineto trace (no OS view) has no chain, only the dataloader finding
    k = nbprof.load(merged.meta.extra["merge"]["kineto_path"])
    rules = {x.rule for x in advisor.advise(k, quantify=False)}
    assert "dataloader" in rules and "data_stall_chain" not in rules


def test_window_all_keeps_the_whole_nsys_session(pair, merged):
    full = nbprof.load(list(pair), window="all")
    assert full.report.get("nsys_outside_window") is None
    assert merged.report.get("nsys_outside_window").count > 0
    assert len(full.events) > len(merged.events) and full.events["ts_ns"].min() == 0
    assert full.duration_ns > merged.duration_ns


def test_refuses_what_is_not_one_run(pair):
    k = nbprof.load(pair[1])
    with pytest.raises(SchemaError, match="one Nsight Systems and one Kineto"):
        nbprof.merge(k, k)
    with pytest.raises(TraceFormatError, match="two files"):
        nbprof.load([pair[1]])


def test_refuses_traces_of_two_runs():
    other = corpus_path("hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    from pathlib import Path

    k = Path(__file__).resolve().parents[1] / "data" / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"
    with pytest.raises(SchemaError, match="not traces of one run"):
        nbprof.load([other, str(k)])


def test_report_step1_uses_the_merged_trace(pair, tmp_path):
    from nbprof.report import Artefacts, build_report

    nsys_path, kineto_path = pair
    page = build_report(Artefacts(trace=kineto_path, nsys_report=nsys_path), tmp_path, progress=False,
                        notebooks=["01_system_nsys.ipynb"], output=tmp_path / "report.html")
    text = page.read_text(encoding="utf-8")
    from test_report import assert_clean

    assert "the nsys report and the PyTorch trace merged into one trace" in text  # the notebook merged the two
    assert "nvtx pairs aligned the clocks, residual max" in text
    assert_clean(text, "report.html")  # human units only
    assert "[Kineto + nsys] " in text and "[nsys] " in text  # the merged timeline's lanes
    # the page's verdict block ranks the advisor findings of the merged trace: the data-wait chain names the
    # preprocessing in the dataset's __getitem__
    assert "in the DataLoader" in text and "__getitem__" in text
    # merged once, in the parent: the first screen (the verdict block, before step 1) is computed on the trace
    # step 1 shows -- its data-wait chain finding is only in the merged trace, not in the Kineto one
    import html as html_mod

    from nbprof.analysis import advisor

    chain = advisor.advise(nbprof.load(list(pair)), rules=["data_stall_chain"])
    assert chain and not advisor.advise(nbprof.load(kineto_path), rules=["data_stall_chain"])
    first_screen = text[: text.index("Step 1 - System view")] if "Step 1 - System view" in text else text
    assert html_mod.escape(chain[0].title) in first_screen or chain[0].title in first_screen
    # one cause once: the chain is the dataloader finding's evidence, not a second item under "What to fix first"
    assert max(first_screen.count(html_mod.escape(chain[0].title)), first_screen.count(chain[0].title)) == 1


def test_kernel_anchors_recover_a_known_offset_and_drift():
    """The GPU path on a real nsys export (A100 saxpy, nsys 2022.2): its device rows and CUDA API calls put on
    a second clock (known offset + 20 ppm drift) as the Kineto side; merge must pick the kernels as anchors,
    recover the map within 2 µs and merge every kernel, copy and API call into one row."""
    import copy

    n = nbprof.load(corpus_path("hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"))
    k = copy.deepcopy(n)
    keep = k.events["cat"].astype(str).isin(["kernel", "gpu_memcpy", "cuda_runtime", "cuda_driver"]).to_numpy()
    ev = k.events[keep].reset_index(drop=True)
    t = ev["ts_ns"].to_numpy()
    end = t + ev["dur_ns"].to_numpy()
    shift = lambda x: x + 7_000 + np.rint((x - t.min()) * 20e-6).astype(np.int64)  # noqa: E731
    ev["ts_ns"] = shift(t)
    ev["dur_ns"] = shift(end) - shift(t)
    k.events, k.tables, k.flows = ev, {}, k.flows.iloc[0:0]
    k.meta.source_format = "kineto"
    m = nbprof.merge(n, k, window="all")
    al = m.meta.extra["merge"]
    assert al["anchor"] == "kernels" and al["pairs"] == 5
    assert al["residual_max_ns"] < 2_000 and abs(al["drift"] - 20e-6) < 5e-6
    src = m.tables[MERGE_TABLE]["source"].astype(str)
    cats = m.events["cat"].astype(str)
    assert (src[cats.isin(["kernel", "gpu_memcpy", "cuda_runtime", "cuda_driver"])] == "both").all()
    assert m.meta.extra["merge"]["duplicates"] == {"device": 20, "runtime": 95}
    # nothing counted twice: each kernel once, its nsys launch geometry kept
    assert int((cats == "kernel").sum()) == 5
    kr = m.events[cats == "kernel"]
    assert set(kr["grid"].astype(str)) == {"2,1,1"} and (kr["registers"] == 26).all()
