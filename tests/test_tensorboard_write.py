"""nbprof.tensorboard.write: tensorboard_trace_handler layout, lossless copies, scalars/text read back
with TensorBoard's own EventAccumulator (no server here; see test_tensorboard_server.py)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

import nbprof
from nbprof.tensorboard import TRACE_FILE_PATTERN, write_run, write_scalars, write_trace
from nbprof.tensorboard.write import STEP_CATEGORIES, md_escape

ROOT = Path(__file__).resolve().parents[1]
CPU_NW0 = ROOT / "data" / "cpu" / "cnn_nw0.pt.trace.json.gz"
GPU_NW0 = ROOT / "data" / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"


def _has(mod: str, name: str) -> bool:
    try:
        spec = importlib.util.find_spec(mod)
    except ModuleNotFoundError:
        return False
    if spec is None:
        return False
    return hasattr(__import__(mod, fromlist=[name]), name)


def _sha(p) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def _accumulator(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run_dir), size_guidance={"tensors": 0, "scalars": 0})
    ea.Reload()
    return ea


def _scalar_series(ea, tag) -> dict[int, float]:
    from tensorboard.util import tensor_util

    return {e.step: float(tensor_util.make_ndarray(e.tensor_proto)) for e in ea.Tensors(tag)}


def _text(ea, tag) -> str:
    evs = ea.Tensors(tag)
    assert len(evs) == 1
    return evs[0].tensor_proto.string_val[0].decode("utf-8")


def _tiny_kineto(path: Path, names: list[str], durs: list[float] | None = None) -> Path:
    """A hand-written Kineto trace: one ProfilerStep#1 of 1000 us holding one cpu_op per name (``durs`` us)."""
    durs = durs or [50.0] * len(names)
    evs = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 1000.0}]
    for i, n in enumerate(names):
        evs.append({"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": 1100.0 + 300 * i, "dur": durs[i],
                    "args": {"External id": i + 1}})
    doc = {"schemaVersion": 1, "deviceProperties": [], "distributedInfo": {"rank": 0, "world_size": 1},
           "traceEvents": evs, "baseTimeNanoseconds": 1_700_000_000_000_000_000}
    path.write_text(json.dumps(doc))
    return path


# --------------------------------------------------------------------------- trace files


def test_gz_trace_copied_byte_for_byte_in_handler_layout_and_never_overwritten(tmp_path):
    a = write_trace(CPU_NW0, tmp_path, "nw0", "worker0", timestamp_ns=1_700_000_000_000_000_000)
    b = write_trace(CPU_NW0, tmp_path, "nw0", "worker0", timestamp_ns=1_700_000_000_000_000_000)
    assert a.trace_path != b.trace_path
    assert os.path.basename(a.trace_path) == "worker0.1700000000000000000.pt.trace.json.gz"
    assert os.path.basename(b.trace_path) == "worker0.1700000000000000001.pt.trace.json.gz"  # moved on by 1 ns
    for w in (a, b):
        m = TRACE_FILE_PATTERN.match(os.path.basename(w.trace_path))
        assert m and m.group(1) == "worker0"
        assert _sha(w.trace_path) == _sha(CPU_NW0)  # lossless: the same compressed bytes
        assert Path(w.trace_path).parent == tmp_path / "nw0"


def test_plain_json_source_stays_plain_and_loaded_trace_copies_its_source(tmp_path):
    src = tmp_path / "src" / "mine.json"
    src.parent.mkdir()
    src.write_bytes(gzip.decompress(CPU_NW0.read_bytes()))
    w = write_trace(src, tmp_path / "logs", "r")
    # the file name does not follow <worker>.<ts>.pt.trace.json, so the worker falls back to worker<rank>
    assert os.path.basename(w.trace_path).startswith("worker0.")
    assert w.trace_path.endswith(".pt.trace.json")
    assert Path(w.trace_path).read_bytes() == src.read_bytes()

    t = nbprof.load(CPU_NW0)
    w2 = write_trace(t, tmp_path / "logs", "r", "cnn")
    assert _sha(w2.trace_path) == _sha(CPU_NW0)
    back = nbprof.load(w2.trace_path)
    assert len(back.events) == len(t.events)
    assert back.steps == t.steps


def test_worker_name_from_handler_file_name_is_kept(tmp_path):
    src = tmp_path / "host-a_1234.1699999999.pt.trace.json.gz"
    src.write_bytes(CPU_NW0.read_bytes())
    w = write_trace(src, tmp_path / "logs", "run1")
    assert w.worker == "host-a_1234"


def test_bad_names_and_non_kineto_traces_are_refused(tmp_path):
    with pytest.raises(ValueError, match="relative directory"):
        write_trace(CPU_NW0, tmp_path, "../escape")
    with pytest.raises(ValueError, match="relative directory"):
        write_trace(CPU_NW0, tmp_path, str(tmp_path / "abs"))
    with pytest.raises(ValueError, match="splits on"):
        write_trace(CPU_NW0, tmp_path, "r", "bad.worker")
    t = nbprof.load(CPU_NW0)
    t.meta.source_format = "nsys"
    with pytest.raises(ValueError, match="losslessly"):
        write_trace(t, tmp_path, "r")
    # write_run still gives such a trace its scalars and text, and says why there is no trace file
    w = write_run(t, tmp_path, "nsys_run")
    assert w.trace_path is None and "only the scalars" in w.skipped["trace"]
    assert "nbprof/summary" in w.text_tags and Path(w.events_path).parent == tmp_path / "nsys_run"
    assert not list((tmp_path / "nsys_run").glob("*.pt.trace.json*"))
    with pytest.raises(FileNotFoundError):
        write_trace(tmp_path / "missing.pt.trace.json", tmp_path, "r")
    assert not (tmp_path.parent / "escape").exists()


def test_write_run_from_a_torch_profiler(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("ProfilerStep#1"):
        torch.mm(torch.ones(32, 32), torch.ones(32, 32))
    w = write_run(prof, tmp_path, "torchrun", "rank0")
    assert TRACE_FILE_PATTERN.match(os.path.basename(w.trace_path)).group(1) == "rank0"
    t = nbprof.load(w.trace_path)
    assert "aten::mm" in set(t.events["name"].astype(str))
    assert "nbprof/summary" in w.text_tags


# --------------------------------------------------------------------------- scalars and text


def test_summary_text_always_written_and_skips_explained(tmp_path):
    t = nbprof.load(CPU_NW0)
    w = write_scalars(t, tmp_path, "nw0")
    ea = _accumulator(tmp_path / "nw0")
    txt = _text(ea, "nbprof/summary")
    assert f"| events | {len(t.events)} |" in txt
    assert "| steps | " + ", ".join(map(str, t.steps)) + " |" in txt
    # a CPU trace: GPU utilisation never written, with the reason
    assert "gpu_utilization" in w.skipped
    assert not any(tag.startswith("nbprof/gpu_utilization") for tag in w.scalar_tags)
    assert set(w.scalar_tags + w.text_tags) <= set(ea.Tags()["tensors"])
    assert os.path.dirname(w.events_path) == str(tmp_path / "nw0")


@pytest.mark.skipif(not _has("nbprof.analysis.steps", "step_breakdown"), reason="nbprof.analysis.steps not landed")
def test_step_scalars_equal_the_step_breakdown(tmp_path):
    from nbprof.analysis.steps import step_breakdown

    t = nbprof.load(CPU_NW0)
    w = write_scalars(t, tmp_path, "nw0")
    ea = _accumulator(tmp_path / "nw0")
    df = step_breakdown(t)
    assert len(df) >= 3
    got = _scalar_series(ea, "nbprof/step_time_ms")
    assert sorted(got) == [int(s) for s in df["step"]]
    for _, r in df.iterrows():
        assert got[int(r["step"])] == pytest.approx(r["step_ns"] / 1e6, rel=1e-6)
    dl = _scalar_series(ea, "nbprof/step_breakdown/dataloader_ms")
    assert dl[int(df["step"].iloc[0])] == pytest.approx(df["dataloader_ns"].iloc[0] / 1e6, rel=1e-6)
    # this run (num_workers=0, preprocess) spends real time in the DataLoader
    assert np.mean(list(dl.values())) > 1.0
    for cat in STEP_CATEGORIES:
        assert f"nbprof/step_breakdown/{cat}_ms" in w.scalar_tags


@pytest.mark.skipif(
    not _has("nbprof.analysis.operators", "operator_summary"), reason="nbprof.analysis.operators not landed"
)
def test_top_operators_markdown_table_is_escaped(tmp_path):
    from nbprof.analysis.operators import operator_summary

    evil = "aten::evil|<script>alert(1)</script>*_x_*"
    src = _tiny_kineto(tmp_path / "t.pt.trace.json", ["aten::mm", evil, "aten::add_"], [50.0, 200.0, 20.0])
    t = nbprof.load(src)
    w = write_scalars(t, tmp_path / "logs", "r", top_operators=3)
    txt = _text(_accumulator(tmp_path / "logs" / "r"), "nbprof/top_operators")
    lines = txt.split("\n\n")[0].splitlines()
    assert lines[0].startswith("| operator | count | self host ms | total host ms |")
    assert len(lines) == 2 + 3  # header, separator, top 3 rows (ProfilerStep*, evil, mm)
    assert "Top 3 of 4 operators" in txt
    # every row has as many cells as the header: the '|' in the name is escaped
    ncols = lines[0].count(" | ")
    for ln in lines[2:]:
        assert ln.replace("\\|", "").count(" | ") == ncols
    assert "<script>" not in txt and "&lt;script&gt;" in txt
    df = operator_summary(t)
    assert list(df["name"].astype(str).head(3)) == ["ProfilerStep*", evil, "aten::mm"]
    for i in range(3):
        row = df.iloc[i]
        assert lines[2 + i].startswith(f"| {md_escape(row['name'])} | {int(row['count'])} |")
        assert f"| {row['total_host_ns'] / 1e6:.3f} |" in lines[2 + i]
    assert "| 0.200 | 0.200 |" in lines[3]
    assert "nbprof/top_operators" in w.text_tags


@pytest.mark.skipif(
    not _has("nbprof.analysis.utilization", "gpu_utilization"), reason="nbprof.analysis.utilization not landed"
)
def test_gpu_utilization_scalar_on_a_real_h200_trace(tmp_path):
    from nbprof.analysis.utilization import gpu_utilization

    t = nbprof.load(GPU_NW0)
    w = write_scalars(t, tmp_path, "gpu")
    ea = _accumulator(tmp_path / "gpu")
    util = gpu_utilization(t)
    assert len(util) >= 1
    for _, r in util.iterrows():
        got = _scalar_series(ea, f"nbprof/gpu_utilization/device{int(r['device'])}")
        assert got[0] == pytest.approx(r["utilization_ratio"], rel=1e-6)
        assert 0.0 < got[0] < 1.0
    assert "gpu_utilization" not in w.skipped


def test_md_escape():
    assert md_escape("a|b") == "a\\|b"
    assert md_escape("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    assert md_escape("[l](u) `c` #h *e*") == "\\[l\\]\\(u\\) \\`c\\` \\#h \\*e\\*"
    assert md_escape("line1\nline2") == "line1 line2"
    assert md_escape("aten::add_") == "aten::add\\_"


@pytest.mark.skipif(not _has("nbprof.analysis.memory", "memory_peak"), reason="nbprof.analysis.memory not landed")
def test_memory_peak_scalars_on_a_real_h200_trace_with_memory(tmp_path):
    from nbprof.analysis.memory import memory_peak

    t = nbprof.load(ROOT / "data" / "gpu" / "lm_mem.pt.trace.json.gz")
    w = write_scalars(t, tmp_path, "lm")
    ea = _accumulator(tmp_path / "lm")
    peaks = memory_peak(t)
    gpu = peaks[peaks["device_type"] == 1].iloc[0]
    got = _scalar_series(ea, f"nbprof/memory_peak/device{int(gpu['device'])}_mib")
    assert got[0] == pytest.approx(gpu["peak_allocated_bytes"] / 2**20, rel=1e-6)
    assert got[0] > 1.0  # an LM on an H200 holds more than 1 MiB at its peak
    assert "nbprof/memory_peak/cpu_mib" in w.scalar_tags
    # a trace recorded without profile_memory: skipped, with the reason
    w2 = write_scalars(nbprof.load(GPU_NW0), tmp_path, "nomem")
    assert "profile_memory" in w2.skipped["memory_peak"]


@pytest.mark.skipif(not _has("nbprof.analysis.advisor", "advise"), reason="nbprof.analysis.advisor not landed")
def test_advisor_findings_text(tmp_path):
    from nbprof.analysis.advisor import advise

    t = nbprof.load(CPU_NW0)
    findings = advise(t)
    w = write_scalars(t, tmp_path, "nw0")
    txt = _text(_accumulator(tmp_path / "nw0"), "nbprof/advisor")
    lines = txt.splitlines()
    assert lines[0] == "| severity | rule | finding | where | next step |"
    assert len(lines) == 2 + len(findings)
    # num_workers=0 with per-sample preprocessing: the DataLoader rule fires, and its row carries its evidence
    (dl,) = [f for f in findings if f.rule == "dataloader"]
    row = next(ln for ln in lines[2:] if ln.startswith(f"| {dl.severity} | dataloader | "))
    assert md_escape(dl.title) in row and md_escape(dl.where) in row
    assert "nbprof/advisor" in w.text_tags and "advisor" not in w.skipped


def test_a_trace_with_nothing_to_analyse_still_gets_a_run_with_reasons(tmp_path):
    src = tmp_path / "t.pt.trace.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [
        {"ph": "i", "cat": "cpu_instant_event", "name": "x", "pid": 1, "tid": 1, "ts": 5.0, "s": "t"}]}))
    w = write_run(src, tmp_path / "logs", "r")
    assert w.scalar_tags == []
    assert "nbprof/summary" in w.text_tags
    for group in ("step_breakdown", "gpu_utilization", "memory_peak"):
        assert w.skipped[group]  # each says why
    assert "ProfilerStep" in w.skipped["step_breakdown"]
    assert Path(w.trace_path).read_bytes() == src.read_bytes()
