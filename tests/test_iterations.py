"""Iteration detection for traces without ``ProfilerStep#N`` (issue 31): real traces, real torch runs."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.analysis import steps
from nbprof.trace import iterations

V100_NW0 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
H100_BERT = "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
H100_QWEN = "AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
B200 = "AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz"


def _without_profiler_steps(path, tmp_path):
    """The trace file with every ``ProfilerStep#N`` event (host and GPU annotation) filtered out of its JSON."""
    data = json.loads(gzip.decompress(path.read_bytes()))
    before = len(data["traceEvents"])
    data["traceEvents"] = [e for e in data["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    assert before - len(data["traceEvents"]) >= 1
    out = tmp_path / "stripped.pt.trace.json"
    out.write_text(json.dumps(data))
    return out


def test_v100_resnet_without_profiler_steps_gets_the_same_steps(tmp_path):
    path = corpus_path(V100_NW0)
    orig = steps.step_windows(nbprof.load(path))
    tr = nbprof.load(_without_profiler_steps(path, tmp_path))
    assert tr.steps == [0, 1, 2, 3, 4, 5]  # the detected iterations are the events' steps
    src = iterations.step_source(tr)
    assert (src.source, src.marker, src.confidence, src.side) == (
        "optimizer_step", "Optimizer.step#SGD.step", "high", "host")
    got = steps.step_windows(tr)
    assert len(got) == len(orig) == 6
    d_orig = (orig.end_ns - orig.start_ns).to_numpy()
    d_got = (got.end_ns - got.start_ns).to_numpy()
    np.testing.assert_allclose(d_got, d_orig, rtol=0.01)
    # the load report says which source defined the steps
    note = tr.report.get("steps_detected")
    assert note is not None and note.action == "assumed" and "Optimizer.step#SGD.step" in note.message
    assert iterations.step_source(nbprof.load(path)).source == "profiler_step"


@pytest.mark.parametrize("rel, layers", [(H100_BERT, 4), (H100_QWEN, None), (B200, 36)])
def test_tracelens_inference_traces_get_per_iteration_windows(rel, layers, tmp_path):
    """Each of these inference traces holds one forward pass (one top-level ``nn.Module`` forward; the H100 ones
    inside their single ``ProfilerStep#6``, stripped here as an inference server's trace would lack it): the
    repeating unit is a kernel sequence inside that forward -- its layers (BERT: 4 ``BertLayer``; GPT-OSS on B200:
    36 ``TransformerBlock`` alternating sliding-window and full attention, so 18 two-layer repeats) -- and the
    record says so, with low confidence."""
    path = corpus_path(rel)
    tr = nbprof.load(_without_profiler_steps(path, tmp_path) if rel != B200 else path)
    src = iterations.step_source(tr)
    assert src.source == "kernel_sequence" and src.confidence == "low" and src.side == "device"
    assert "one forward pass" in src.note and "layers" in src.note
    w = steps.step_windows(tr)
    assert len(w) == src.steps > 1
    if layers is not None:
        assert layers % len(w) == 0 and layers // len(w) in (1, 2)
    d = (w.end_ns - w.start_ns).to_numpy()
    assert (d > 0).all() and (np.diff(w.start_ns.to_numpy()) > 0).all()
    # the middle repeats are alike (per-layer windows of one model): their typical deviation is under 5 %
    mid = d[1:-1]
    assert np.median(np.abs(mid / np.median(mid) - 1)) < 0.05
    # every window holds device work
    assert (w.device_ops > 0).all()


def test_cpu_training_loop_without_schedule_gets_its_iterations(tmp_path):
    """A real torch loop with an optimizer under ``torch.profiler.profile()`` without a schedule (no ProfilerStep):
    one iteration per ``optimizer.step()``; the first (allocator/first-run costs) may be skipped as warm-up."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    n = 7
    out = tmp_path / "loop.pt.trace.json"
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
    prof.export_chrome_trace(str(out))
    tr = nbprof.load(out)
    assert tr.steps == list(range(n))
    src = iterations.step_source(tr)
    assert (src.source, src.marker, src.steps) == ("optimizer_step", "Optimizer.step#SGD.step", n)
    w = steps.step_windows(tr)
    assert len(w) == n
    # each window holds exactly one forward matmul chain: aten::addmm twice per forward
    ev = tr.events
    mm = ev[ev.name == "aten::addmm"].ts_ns.to_numpy()
    per = [int(((mm >= s) & (mm < e)).sum()) for s, e in zip(w.start_ns, w.end_ns)]
    assert per == [2] * n
    ss = steps.steady_state(tr)
    assert len(ss) == n and ss.skipped.sum() <= n // 2
    assert all(r.startswith("warm-up") for r in ss.skip_reason[ss.skipped])
    assert len(steps.steady_breakdown(tr)) == n - int(ss.skipped.sum())


def test_trace_where_nothing_repeats_is_one_whole_trace_step():
    tr = nbprof.load(corpus_path(B200))
    assert iterations.step_source(tr).source == "kernel_sequence"
    # a trace with host work only and no repeat: the record says why there is one step
    import copy

    one = copy.copy(tr)
    one.__dict__ = {k: v for k, v in tr.__dict__.items() if not k.startswith("_nbprof")}
    one.events = tr.events[tr.events.device < 0].reset_index(drop=True)
    one.events = one.events[~one.events.name.astype(str).str.startswith("nn.Module")].reset_index(drop=True)
    src = iterations.step_source(one)
    assert src.source == "whole_trace" and src.steps == 1 and "nothing repeats" in src.note
    assert [c for c, _ in src.considered][:2] == ["optimizer_step", "user_range"]
    assert len(steps.step_windows(one)) == 1


def test_step_outliers_name_what_grew():
    """tb-plugin ResNet-50 with 4 workers: steps 5 (1.44x the median) and 9 (1.29x) are slow because the host
    did more (the DataLoader workers contend with the main thread), not because of data wait."""
    tr = nbprof.load(corpus_path(V100_NW0.replace("num_workers_0/worker0.1623143089861",
                                                  "num_workers_4/worker0.1623212756351")))
    out = steps.step_outliers(tr, k=1.2)
    assert out.step.tolist() == [5, 9]
    assert out.grew.tolist() == ["host work", "host work"]
    assert out.ratio.iloc[0] == pytest.approx(182306 / 126682, rel=1e-3)
    assert out.grew_ns.iloc[0] == out.host_ns_excess_ns.iloc[0] > 40_000_000
    assert steps.step_outliers(tr, k=1.5).empty


def test_first_screen_paragraph_names_the_steps_the_steady_state_and_escapes_names(tmp_path):
    from nbprof.results.steps_render import steps_html, steps_text

    tr = nbprof.load(corpus_path(B200))
    text = steps_text(iterations.step_source(tr), steps.steady_state(tr), steps.step_outliers(tr))
    assert text[0].startswith("Steps: 18 found from kernel sequence (fmhaSm100aKernel_") and "probably its layers" in text[0]
    assert text[1] == "Steady state: 17 of 18 steps; skipped step 0: warm-up: 2.4x the median later step."
    # a CPU run whose first profiled step is 2.4x the others (the check test's warm-up step)
    from _support.paths import DATA

    cpu = nbprof.load(DATA / "cpu" / "cnn_nw2.pt.trace.json.gz")
    ss = steps.steady_state(cpu)
    assert ss.skipped.tolist() == [True] + [False] * 5 and ss.skip_reason.iloc[0].startswith("warm-up: 2.4x")
    assert steps.step_times(cpu, steady=True).tolist() == ss.step_ns.iloc[1:].tolist()
    # kernel names are trace text: escaped in the HTML
    bert = nbprof.load(_without_profiler_steps(corpus_path(H100_BERT), tmp_path))
    page = steps_html(iterations.step_source(bert), steps.steady_state(bert), steps.step_outliers(bert))
    assert "flash_fwd_kernel&lt;pytorch_flash::Flash_fwd_kernel_traits" in page and "kernel<pytorch" not in page


def _inference_run(path, numbered_ranges: bool, with_stack: bool):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).eval()
    x = torch.randn(16, 64)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], with_stack=with_stack) as prof:
        for i in range(5):
            if numbered_ranges:
                with record_function(f"decode {i}"):
                    x = model(x)
            else:
                x = model(x)
    prof.export_chrome_trace(str(path))
    return nbprof.load(path)


def test_cpu_inference_loop_steps_from_numbered_ranges_or_module_forwards(tmp_path):
    """No optimizer: numbered ``record_function`` ranges (``decode 0`` .. ``decode 4``) are the iterations; without
    them, the top-level module's forwards (``with_stack`` Python frames) are."""
    tr = _inference_run(tmp_path / "ranges.pt.trace.json", numbered_ranges=True, with_stack=False)
    src = iterations.step_source(tr)
    assert (src.source, src.marker, src.steps) == ("user_range", "decode 0", 5)
    w = steps.step_windows(tr)
    ev = tr.events
    rng = ev[ev.name.astype(str).str.startswith("decode ")].sort_values("ts_ns")
    assert w.host_start_ns.tolist() == rng.ts_ns.tolist()
    assert w.host_end_ns.tolist() == (rng.ts_ns + rng.dur_ns).tolist()
    tr = _inference_run(tmp_path / "modules.pt.trace.json", numbered_ranges=False, with_stack=True)
    src = iterations.step_source(tr)
    if not tr.events.name.astype(str).str.startswith("nn.Module: ").any():
        pytest.skip("this torch build records no nn.Module Python frames with with_stack=True")
    assert (src.source, src.marker, src.steps) == ("module_forward", "nn.Module: Sequential_0", 5)
    lin = tr.events[tr.events.name == "aten::linear"].ts_ns.to_numpy()
    w = steps.step_windows(tr)
    assert [int(((lin >= s) & (lin < e)).sum()) for s, e in zip(w.start_ns, w.end_ns)] == [2] * 5
