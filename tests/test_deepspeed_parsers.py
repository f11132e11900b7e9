"""DeepSpeed text parsers on real outputs (notes/samples from DeepSpeed 0.19.8 runs, the LLaVA ZeRO-3 corpus
file) and on real lines with the quirks the field shows (ANSI colours, rank prefixes, truncation)."""

from __future__ import annotations

import math

import pytest
from _support.paths import corpus_path, sample_path

from nbprof.deepspeed import parsers as P

LLAVA = "OAfzal__LLaVA-parallelism/flops_profiler.txt"
LLAVA_CFG = "OAfzal__LLaVA-parallelism/scripts/zero3.json"


def test_quantities_follow_deepspeed_prefixes():
    assert P.parse_quantity("1.35 MMACs") == (1.35e6, "MAC")
    assert P.parse_quantity("85 K", "params") == (85e3, "")
    assert P.parse_quantity("7.2 B", "params")[0] == pytest.approx(7.2e9)
    assert P.parse_quantity("324.61 k", "params")[0] == pytest.approx(324610)
    assert P.parse_quantity("4.07 ms") == (pytest.approx(4.07e6), "ns")
    assert P.parse_quantity("98.47 us")[0] == pytest.approx(98470)
    assert P.parse_quantity("1.08 s")[0] == pytest.approx(1.08e9)
    assert P.parse_quantity("49.01 TFLOPS") == (pytest.approx(49.01e12), "FLOP/s")
    assert P.parse_quantity("2.71 M", "flops") == (pytest.approx(2.71e6), "FLOP")
    assert math.isnan(P.parse_quantity("n/a")[0])
    assert P.parse_msg_size("332.04 KB") == pytest.approx(332.04 * 1024)
    assert P.parse_msg_size("0B") == 0.0
    assert P.parse_msg_size("1.5 MB") == 1.5 * 1024**2


def test_flops_stage3_sample_numbers_and_quirks():
    prof = P.parse_flops_profile(sample_path("ds_flops_stage3_rank0.txt"), zero_stage=3)
    assert (prof.reported_step, prof.step) == (4, 3)
    g = prof.get
    assert (g("world_size"), g("data_parallel_size"), g("batch_size_per_gpu")) == (2, 2, 8)
    assert g("params_per_gpu") == 85e3
    assert g("fwd_macs_per_gpu") == pytest.approx(1.35e6)
    assert g("fwd_flops_per_gpu") == pytest.approx(2.71e6)
    assert g("fwd_latency") == pytest.approx(4.07e6)  # ns
    assert g("fwd_flops_per_s") == pytest.approx(665.07e6)
    assert g("bwd_latency") == pytest.approx(9.42e6)
    assert g("iter_latency") == pytest.approx(21.99e6)
    assert g("flops_per_s") == pytest.approx(369.43e6)
    assert g("samples_per_s") == pytest.approx(727.59)
    # the three pitfalls of feasibility.md §3
    assert {"step_off_by_one", "epoch_as_latency", "zero3_doubled_macs"} <= prof.flags
    agg = prof.aggregated
    lat = agg[(agg["metric"] == "fwd_latency") & (agg["module_type"] == "Sequential")].iloc[0]
    assert lat["text"] == "1.8 Gs" and math.isnan(lat["value"]) and lat["flag"] == "epoch_as_latency"
    m = prof.modules
    assert list(m["path"]) == ["", "0", "1", "2", "3", "4"]
    assert list(m["type"]) == ["Sequential", "Linear", "ReLU", "Linear", "ReLU", "Linear"]
    root = m.iloc[0]
    assert math.isnan(root["fwd_latency_ns"]) and math.isnan(root["fwd_flops_per_s"])
    lin2 = m[m["path"] == "2"].iloc[0]
    assert lin2["params"] == pytest.approx(65.79e3)
    assert lin2["params_ratio"] == pytest.approx(0.774)
    assert lin2["macs"] == pytest.approx(1.05e6)
    assert lin2["fwd_latency_ns"] == pytest.approx(778440)
    assert math.isnan(lin2["fwd_latency_ratio"])  # "0% latency" is meaningless under the epoch bug
    assert lin2["extra_repr"] == "in_features=256, out_features=256, bias=True"


def test_zero3_macs_are_twice_stage1_in_the_samples():
    s1 = P.parse_flops_profile(sample_path("ds_flops_stage1_rank0.txt"), zero_stage=1)
    s3 = P.parse_flops_profile(sample_path("ds_flops_stage3_rank0.txt"), zero_stage=3)
    assert "zero3_doubled_macs" not in s1.flags
    assert s3.get("fwd_macs_per_gpu") == pytest.approx(2 * s1.get("fwd_macs_per_gpu"), rel=0.01)
    # the module tree agrees with the summary (sum of the Linear layers = root)
    for prof in (s1, s3):
        m = prof.modules
        assert m[m["depth"] == 1]["macs"].sum() == pytest.approx(m.iloc[0]["macs"], rel=0.01)


def test_standalone_profile_has_sane_latencies():
    prof = P.parse_flops_profile(sample_path("ds_flops_standalone.txt"))
    assert "epoch_as_latency" not in prof.flags
    assert prof.get("fwd_latency") == pytest.approx(23.17e6)
    assert prof.modules.iloc[0]["fwd_latency_ratio"] == 1.0
    assert prof.modules["fwd_latency_ratio"].iloc[1:].sum() == pytest.approx(0.9962, abs=1e-3)


def test_llava_zero3_corpus_profile():
    prof = P.parse_flops_profile(corpus_path(LLAVA), config=corpus_path(LLAVA_CFG))
    assert prof.zero_stage == 3
    assert (prof.reported_step, prof.step) == (2, 1)  # zero3.json: profile_step 1
    g = prof.get
    assert g("world_size") == 4 and g("batch_size_per_gpu") == 1
    assert g("params_per_gpu") == pytest.approx(135.87e6)
    assert g("fwd_macs_per_gpu") == pytest.approx(9123.92e9)
    assert g("fwd_flops_per_gpu") == pytest.approx(18248.35e9)
    assert g("fwd_latency") == pytest.approx(372.35e6)
    assert g("bwd_latency") == pytest.approx(458.55e6)
    assert g("step_latency") == pytest.approx(249.58e6)
    assert g("iter_latency") == pytest.approx(1.08e9)
    assert g("fwd_bwd_flops_per_s") == pytest.approx(65.89e12)
    assert g("samples_per_s") == pytest.approx(3.70)
    # older layout: 'params per gpu' lower case, 'x, y% Params' module stats
    assert {"older_layout", "zero3_doubled_macs", "step_off_by_one"} <= prof.flags
    assert "epoch_as_latency" not in prof.flags and "unparsed_line" not in prof.flags
    agg = prof.aggregated
    assert sorted(agg["depth"].unique()) == list(range(9))
    d4 = agg[(agg["depth"] == 4) & (agg["metric"] == "params")].iloc[0]
    assert (d4["module_type"], d4["value"]) == ("CLIPVisionTransformer", pytest.approx(324.61e3))
    m = prof.modules
    assert len(m) == 754
    root = m.iloc[0]
    assert (root["type"], root["macs"], root["fwd_latency_ns"]) == ("LlavaLlamaForCausalLM", 9123.92e9, 370.11e6)
    head = m[m["path"] == "lm_head"].iloc[0]
    assert head["type"] == "Linear" and head["depth"] == 1
    assert head["macs"] == pytest.approx(173.28e9) and head["macs_ratio"] == pytest.approx(0.019)
    assert head["extra_repr"] == "in_features=4096, out_features=32000, bias=False"
    q = m[m["path"] == "model.layers.0.self_attn.q_proj"].iloc[0]
    assert q["depth"] == 5 and q["fwd_flops_per_s"] == pytest.approx(198.78e12)
    # lm_head MACs = tokens x 4096 x 32000: the same token count for every decoder q_proj (4096x4096)
    tokens = head["macs"] / (4096 * 32000)
    assert q["macs"] / (4096 * 4096) == pytest.approx(tokens, rel=0.01)


def test_comms_summary_stage3_launcher_log():
    log = P.parse_log(sample_path("ds_launcher_stage3.log"), zero_stage=3)
    s = log.comms.summary
    assert log.comms.counts().to_dict() == {
        "all_gather_into_tensor": 48, "all_reduce": 6, "barrier": 3, "broadcast": 20,
        "log_summary_barrier": 1, "reduce_scatter_tensor": 6,
    }
    rs = s[s["op"] == "reduce_scatter_tensor"].iloc[0]
    assert rs["msg_bytes"] == pytest.approx(332.04 * 1024)
    assert rs["total_latency_ns"] == pytest.approx(51.51e6)
    assert rs["avg_latency_ns"] == pytest.approx(8.66e6)
    assert (rs["algbw_gbps"], rs["busbw_gbps"]) == (0.77, 0.39)
    # the wall-clock breakdown: 6 steps x (optimizer_step, 5 microstep timers, 5 timers) on rank 0
    t = log.timers
    assert set(t["rank"]) == {0}
    assert (t["timer"] == "fwd").sum() == 6
    assert t[(t["timer"] == "bwd_allreduce")]["time_ns"].iloc[3] == pytest.approx(6.93e6)
    assert log.flops == []  # flops went to output_file


def test_comms_verbose_lines_and_callers():
    log = P.parse_log(sample_path("ds_launcher_stage2_comms_verbose.log"))
    ops = log.comms.ops
    assert len(ops) == 17
    assert set(ops["rank"]) == {0}
    ar = ops[(ops["op"] == "all_reduce") & (ops["caller"] == "allreduce_bucket")]
    assert len(ar) == 3
    assert ar["latency_ns"].tolist() == pytest.approx([100.06e6, 100.99e6, 103.12e6])
    assert ar["msg_bytes"].tolist() == pytest.approx([332.04 * 1024] * 3)
    s = log.comms.summary
    # the summary agrees with the per-op lines (op, caller, count, total latency); log_summary's own
    # barrier is logged once more after the table is printed
    assert (ops["op"] == "log_summary_barrier").sum() == 2
    for (op, caller), g in ops[ops["op"] != "log_summary_barrier"].groupby(["op", "caller"]):
        row = s[(s["op"] == op) & (s["caller"] == caller)]
        assert row["count"].sum() == len(g), (op, caller)
    got = s[(s["op"] == "all_reduce") & (s["caller"] == "allreduce_bucket")].iloc[0]
    assert got["total_latency_ns"] == pytest.approx(ar["latency_ns"].sum(), rel=1e-3)


def test_single_process_log_holds_flops_report_and_table():
    log = P.parse_log(sample_path("ds_single_process_stage1.log"), zero_stage=1)
    assert len(log.flops) == 1
    prof = log.flops[0]
    assert prof.get("world_size") == 1 and prof.get("fwd_latency") == pytest.approx(329.49e3)
    assert "epoch_as_latency" in prof.flags
    assert log.comms.counts()["all_reduce"] == 12


def test_quirks_ansi_rank_prefix_interleaving_truncation_never_crash():
    text = (
        "\x1b[32m[rank0]:[Rank 0] time (ms) | fwd: 1.50 | bwd: 2.25\x1b[0m\n"
        "[rank1]:some other rank's line\n"
        "[default0]:Comm. Op            Message Size        Count               Total Latency(ms)   "
        "Avg Latency(ms)     tput_avg (Gbps)     busbw_avg (Gbps)    \n"
        "[default0]:all_reduce\n"
        "[rank1]:[W socket.cpp:464] interleaved warning from rank 1\n"
        "[default0]:                    1.0 MB              4                   8.00                "
        "2.00                4.19                4.19                \n"
        "[default0]:                    garbled row\n"
        "comm op: broken | time (ms): x\n"
        "-------------------------- DeepSpeed Flops Profiler --------------------------\n"
        "Profile Summary at step 2:\n"
        "params per GPU:                                                         1.2 M\n"
        "fwd latency:                                                            1.8 Gs\n"
        "------------------------------ Detailed Profile per GPU ------------------------------\n"
        "Net(\n"
        "  1.2 M = 100% Params, 2 GMACs = 100% MACs, 1.8 Gs = 100% latency, 0 FLOPS\n"
        "  (fc): Linear(1.2 M = 100% Params, 2 GMACs = 100% MACs, 3 ms = 0% latency, 1.33 TFLOPS, x=1)\n"
        "  (bad line without stats\n"
    )
    log = P.parse_log(text)
    kinds = set(log.quirks["kind"])
    assert {"ansi_colour", "rank_prefix", "unparsed_line"} <= kinds
    t = log.timers
    assert t[["timer", "time_ns"]].values.tolist() == [["fwd", 1.5e6], ["bwd", 2.25e6]]
    s = log.comms.summary
    assert len(s) == 1 and s.iloc[0]["msg_bytes"] == 1024**2 and s.iloc[0]["count"] == 4
    prof = log.flops[0]
    assert {"epoch_as_latency", "truncated", "unparsed_line", "step_off_by_one"} <= prof.flags
    assert math.isnan(prof.get("fwd_latency"))
    assert prof.modules["path"].tolist() == ["", "fc"]
    assert prof.modules.iloc[1]["fwd_latency_ns"] == 3e6


def test_see_memory_usage_lines():
    # the exact text runtime/utils.py:see_memory_usage prints (its f-string keeps the continuation spaces)
    text = (
        "After forward\n"
        "MA 1.25 GB         Max_MA 2.5 GB         CA 3.0 GB         Max_CA 4 GB \n"
        "CPU Virtual Memory:  used = 7.43 GB, percent = 31.2%\n"
    )
    m = P.parse_memory_usage(text)
    assert len(m) == 1
    r = m.iloc[0]
    assert r["message"] == "After forward"
    assert r["allocated_bytes"] == 1.25 * 1024**3 and r["max_reserved_bytes"] == 4 * 1024**3
    assert r["cpu_used_bytes"] == pytest.approx(7.43 * 1024**3) and r["cpu_used_ratio"] == pytest.approx(0.312)


def test_no_report_is_a_clear_error(tmp_path):
    p = tmp_path / "empty.txt"
    p.write_text("nothing here\n")
    with pytest.raises(ValueError, match=r"empty\.txt: no DeepSpeed flops-profiler report"):
        P.parse_flops_profile(p)
    with pytest.raises(FileNotFoundError):
        P.parse_log(tmp_path / "missing.log")


def test_straggler_block_of_log_summary():
    # the exact layout of comms_logging.CommsLogger.log_all(show_straggler=True): 20-wide columns, where
    # 'Total straggler(ms)' leaves a single space before the next header
    def row(*cells):
        return "".join(f"{c: <20}" for c in cells)

    text = "\n".join([
        row("Comm. Op", "Message Size", "Count", "Total Latency(ms)", "Avg Latency(ms)", "tput_avg (Gbps)",
            "busbw_avg (Gbps)"),
        "all_reduce",
        row(" ", "332.04 KB", 6, "554.05", "100.06", "0.05", "0.03"),
        "_______________________________",
        "Breakdown with straggler effect",
        "-------------------------------",
        row("Comm. Op", "Message Size", "Count", "Total comm lat(ms)", "Total straggler(ms)", "Avg comm lat(ms)",
            "Avg straggler(ms)"),
        "all_reduce",
        row(" ", "332.04 KB", 6, "12.50", "541.55", "2.08", "90.26"),
    ])
    s = P.parse_log(text).comms.summary
    assert s["table"].tolist() == ["summary", "straggler"]
    st = s.iloc[1]
    assert (st["op"], st["count"], st["msg_bytes"]) == ("all_reduce", 6, pytest.approx(332.04 * 1024))
    assert st["total_comm_latency_ns"] == pytest.approx(12.5e6)
    assert st["total_straggler_ns"] == pytest.approx(541.55e6)
    assert st["avg_straggler_ns"] == pytest.approx(90.26e6)
    assert P.parse_log(text).comms.counts().to_dict() == {"all_reduce": 6}  # straggler rows not double-counted
