"""Issue 24: DeepSpeed logs -- the flops-profiler report stops at its closing line and reports what it did not
parse inside it; throughput, skipped steps (fp16 overflows) and the ZeRO stage are read from the logs.

Real outputs: DeepSpeed 0.19.8 CPU runs in ../shared/notes/samples, the LLaVA ZeRO-3 profile in ../shared/corpus
(the real 2-rank run's throughput lines are checked in tests/test_ranks_timeline.py)."""

from __future__ import annotations

import pytest
from _support.paths import corpus_path, sample_path

from nbprof.deepspeed import parsers as P

LLAVA = "OAfzal__LLaVA-parallelism/flops_profiler.txt"


def test_profile_stops_at_its_end_in_a_single_process_log():
    """The flops report (lines 18-69) is followed by the comms table: those 25 lines were all flagged as
    unparsed profile lines before."""
    path = sample_path("ds_single_process_stage1.log")
    log = P.parse_log(path)
    prof = log.flops[0]
    assert prof.end_line == 69 and path.read_text().splitlines()[68] == "-" * 78
    assert "unparsed_line" not in set(prof.quirks["kind"]) and "unparsed_line" not in set(log.quirks["kind"])
    assert len(prof.modules) == 6
    assert "log_summary_barrier" in set(log.comms.summary["op"].astype(str))  # the table after the report is read


def test_unparsed_lines_inside_the_profile_are_quirks_and_launcher_lines_after_it_are_not():
    text = corpus_path(LLAVA).read_text()
    lines = text.splitlines()
    assert P.parse_flops_profile(text).end_line == len(lines) == 1187
    # a garbled line inside the detailed profile (line 100), then a real launcher log after the report
    bad = "    (layers): ModuleList(12 = 3%, ???"
    garbled = "\n".join(lines[:99] + [bad] + lines[99:])
    after = sample_path("ds_launcher_stage2_comms_verbose.log").read_text()
    log = P.parse_log(garbled + "\n" + after)
    prof = log.flops[0]
    assert prof.end_line == 1188
    un = prof.quirks[prof.quirks["kind"] == "unparsed_line"]
    assert un["line"].tolist() == [100]
    lq = log.quirks[log.quirks["kind"] == "unparsed_line"]
    assert lq["line"].tolist() == [100] and "not understood" in lq["message"].iloc[0]
    assert len(prof.modules) == len(P.parse_flops_profile(text).modules) + 1  # kept, without stats
    # what follows the report is read as the log it is
    assert log.zero_stage == 2 and log.progress["step"].tolist() == [0, 2] and log.skipped_steps == 0


def test_zero_stage_progress_and_no_overflow_in_real_launcher_logs():
    v = P.parse_log(sample_path("ds_launcher_stage2_comms_verbose.log"))  # DeepSpeed logger at INFO
    assert v.zero_stage == 2 and v.skipped_steps == 0 and v.overflows.empty
    assert (v.progress["skipped"] == 0).all() and (v.progress["rank"] == 0).all() and (v.progress["lr"] == 0.001).all()
    # at DeepSpeed's default WARNING level the engine prints no stage: None (the script's own "zero=1" is not read)
    for stage in (1, 2, 3):
        log = P.parse_log(sample_path(f"ds_launcher_stage{stage}.log"))
        assert log.zero_stage is None and log.skipped_steps == 0 and log.progress.empty


def test_fp16_overflow_lines_count_skipped_steps():
    """DeepSpeed's fp16 loss-scaler messages, verbatim from its source (0.19.8 ``runtime/fp16/loss_scaler.py``
    ``DynamicLossScaler.update_scale`` / ``LossScaler.update_scale``; older fused optimizers' 'Overflow detected')
    with the logger prefix DeepSpeed writes."""
    pre = "[2026-12-01 18:03:10,138] [INFO] [loss_scaler.py:262:update_scale] "
    text = "\n".join([
        pre + "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
        pre + "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32768, but hysteresis is 2. "
              "Reducing hysteresis to 1",
        "[2026-12-01 18:03:10,140] [WARNING] [logging.py:123:log_dist] [Rank 0] [deepspeed] OVERFLOW! Skipping step. "
        "Gradients are non-finite, weights were not updated.",
        "[1]:[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 4294967296, reducing to 2147483648",
    ])
    log = P.parse_log(text)
    ov = log.overflows
    assert ov["line"].tolist() == [1, 2, 3, 4] and ov["rank"].tolist() == [0, 0, 0, 1]
    assert ov["attempted_loss_scale"].tolist()[:2] == [65536.0, 32768.0] and ov["new_loss_scale"].iloc[0] == 32768.0
    assert ov["attempted_loss_scale"].iloc[3] == 4294967296.0 and ov["new_loss_scale"].iloc[3] == 2147483648.0
    assert log.skipped_steps == 3  # rank 0 printed three
    # the engine's own counter wins when printed
    log2 = P.parse_log(text + "\n[2026-12-01 18:03:10,177] [INFO] [logging.py:123:log_dist] [Rank 0] step=10, "
                              "skipped=4, lr=[0.001], mom=[(0.9, 0.999)]")
    assert log2.skipped_steps == 4 and log2.progress["step"].tolist() == [10]


def test_throughput_lines():
    """ThroughputTimer's line (DeepSpeed 0.19.8 ``utils/timer.py``), as the real 2-rank CPU run prints it, and the
    pipeline engine's ``samples/sec`` print (``runtime/pipe/engine.py``)."""
    text = "\n".join([
        "[2026-12-01 18:03:10,138] [INFO] [timer.py:264:stop] epoch=0/micro_step=3/global_step=3, "
        "RunningAvgSamplesPerSec=378.1931629904309, CurrSamplesPerSec=378.18422382244336, MemAllocated=0.44GB, "
        "MaxMemAllocated=0.44GB",
        "steps: 20 loss: 2.3012 iter time (s): 0.512 samples/sec: 62.500",
    ])
    t = P.parse_log(text).throughput
    assert t["source"].tolist() == ["ThroughputTimer", "pipe_engine"] and t["global_step"].tolist() == [3, 20]
    assert t["samples_per_s"].tolist() == pytest.approx([378.18422382244336, 62.5])
    assert t["avg_samples_per_s"].iloc[0] == pytest.approx(378.1931629904309)
    assert t["max_mem_allocated_bytes"].iloc[0] == pytest.approx(0.44 * 1024**3)
