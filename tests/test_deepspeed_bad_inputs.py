"""DeepSpeed parsers on bad inputs derived from the real DeepSpeed 0.19.8 outputs in notes/samples:
linear-time regexes, non-numbers, bad aggregated dicts, missing files, tracebacks that cut a report or
table short, a profiler that crashed before printing, a module shared by several parents."""

from __future__ import annotations

import math
import time

import pytest
from _support.paths import sample_path

from nbprof.deepspeed import parsers as P

STAGE1 = "ds_flops_stage1_rank0.txt"


def _text(name=STAGE1):
    return sample_path(name).read_text()


@pytest.mark.parametrize("line", ["-" * 40000, "a" * 40000, "a" + " " * 40000 + "b", "x:" + " " * 40000,
                                  "  (0): Linear(1 = 1% Params, 1 MACs = 1% MACs, 1 s = 1% latency, 1 FLOPS," + " " * 40000 + "x)",
                                  "comm op: " + " " * 40000, "1" * 40000, "  " + "1" * 40000 + " = 1% Params",
                                  "all_reduce" + " " * 40000 + "x", "1.5 " + " " * 40000 + "MB"])
def test_long_lines_parse_in_linear_time(line):
    text = _text().replace("world size:", line + "\nworld size:", 1).replace("  (1): ReLU", line + "\n  (1): ReLU", 1)
    t0 = time.perf_counter()
    log = P.parse_log(text + "\n" + line + "\n")
    # before: _BANNER took ~43 s on a 40,000-dash line, _OPLINE ~170 s on "comm op:" + 5,000 spaces,
    # _STATS ~3 s on 5,000 digits, _KV/_CALLER were quadratic
    assert time.perf_counter() - t0 < 1.0
    assert log.flops[0].get("world_size") == 2 and len(log.flops[0].modules) >= 6


def test_a_number_that_is_not_one_is_nan_and_flagged():
    text = _text().replace("883.76", "1.2.3").replace("19.58% Params", "1.2.3% Params")
    prof = P.parse_flops_profile(text)
    assert math.isnan(prof.get("samples_per_s")) and math.isnan(prof.modules.iloc[1]["params_ratio"])
    q = prof.quirks[prof.quirks["kind"] == "bad_number"]
    assert len(q) == 2 and "'1.2.3' is not a number" in q.iloc[0]["message"]
    log = P.parse_log("[Rank 0] time (ms) | fwd: 1.2.3 | bwd: 2.25\nMA 1.2.3 GB Max_MA 2 GB CA 3 GB Max_CA 4 GB\n")
    assert math.isnan(log.timers.iloc[0]["time_ns"]) and log.timers.iloc[1]["time_ns"] == 2.25e6
    assert math.isnan(log.memory.iloc[0]["allocated_bytes"]) and (log.quirks["kind"] == "bad_number").sum() == 2


@pytest.mark.parametrize("bad", ["{'Sequential': '85 K'} + 1", "{1, 2}", "{" + "[" * 50 + "]" * 50 + "}", "{'a': [1]}[0]", "{[1]: '85 K'}",
                                 "{" * 100000 + "}" * 100000])
def test_aggregated_line_that_is_not_a_dict(bad):
    text = _text().replace("{'Sequential': '85 K'}", bad, 1)
    prof = P.parse_flops_profile(text)
    q = prof.quirks[prof.quirks["kind"] == "unparsed_line"]
    assert len(q) == 1 and "aggregated line not a dict" in q.iloc[0]["message"]
    assert set(prof.aggregated["metric"]) == {"macs", "fwd_latency"}


def test_numbers_of_thousands_of_digits_where_a_depth_rank_or_step_belongs():
    # fuzz seed 101 deepspeed:195: int() of a 5,000-digit "depth N:" raised ValueError (int max str digits)
    big = "9" * 5000
    text = _text().replace("depth 0:", f"depth {big}:", 1).replace("at step 4:", f"at step {big}:", 1)
    prof = P.parse_flops_profile(text)
    q = prof.quirks[prof.quirks["kind"] == "unparsed_line"]
    assert len(q) == 1 and "aggregated depth of 5000 digits" in q.iloc[0]["message"]
    assert prof.reported_step == -1 and prof.get("world_size") == 2
    assert "a step number of 5000 digits" in prof.quirks.loc[prof.quirks["kind"] == "bad_number", "message"].iloc[0]
    log = P.parse_log(f"[{big}]: [Rank 0] time (ms) | fwd: 1.5 | bwd: 2.25\n")
    assert log.timers["time_ns"].tolist() == [1.5e6, 2.25e6]
    # fuzz seed 0 deepspeed:1702/1876: a 5,000-digit "[Rank N]" in a timer line (int() raised ValueError): not a
    # rank, so the line's rank is the launcher prefix's (here none: -1); the timers are kept
    log = P.parse_log(f"[Rank {big}] time (ms) | fwd: 1.5 | bwd: 2.25\n[1]: [Rank {big}] time (ms) | fwd: 3.0\n")
    assert log.timers["time_ns"].tolist() == [1.5e6, 2.25e6, 3.0e6] and log.timers["rank"].tolist() == [-1, -1, 1]


def test_missing_log_is_file_not_found_naming_it(tmp_path):
    for src in ("missing.log", str(tmp_path / "nope.txt"), tmp_path / "gone.log"):
        with pytest.raises(FileNotFoundError) as ei:
            P.parse_log(src)
        assert ei.value.filename == str(src) and "no such DeepSpeed log" in str(ei.value)
    from nbprof.errors import TraceFormatError

    with pytest.raises(TraceFormatError, match="is a directory"):
        P.parse_log(tmp_path)
    assert P.parse_log("[Rank 0] time (ms) | fwd: 1.5").timers["time_ns"].tolist() == [1.5e6]  # text still works


TB = """Traceback (most recent call last):
  File "train.py", line 41, in <module>
    engine.step()
  File "/usr/lib/python3/site-packages/deepspeed/profiling/flops_profiler/profiler.py", line 301, in print_model_profile
    flops_per_s = total_flops / total_duration
ZeroDivisionError: float division by zero
"""


def test_a_traceback_that_cuts_a_profile_short_is_named():
    text = _text()
    cut = text[: text.index("  (2): Linear")] + TB
    log = P.parse_log(cut)
    prof = log.flops[0]
    q = prof.quirks[prof.quirks["kind"] == "cut_short"]
    assert len(q) == 1 and "ZeroDivisionError: float division by zero" in q.iloc[0]["message"]
    assert prof.modules["path"].tolist() == ["", "0", "1"] and "truncated" not in prof.flags
    kinds = log.quirks["kind"].tolist()
    assert "traceback" in kinds and "cut_short" in kinds
    tb_line = cut.splitlines().index("Traceback (most recent call last):") + 1
    assert log.quirks.loc[log.quirks["kind"] == "traceback", "line"].tolist() == [tb_line]


def test_a_traceback_that_cuts_a_comms_table_short_is_named():
    log = P.parse_log(sample_path("ds_launcher_stage2.log"))
    full = log.comms.summary
    text = sample_path("ds_launcher_stage2.log").read_text()
    head = text[: text.index("Comm. Op")]
    body = text[text.index("Comm. Op"):].splitlines()
    cut = head + "\n".join(body[:3]) + "\n" + TB + "\n".join(body[3:]) + "\n"
    log2 = P.parse_log(cut)
    q = log2.quirks[log2.quirks["kind"] == "cut_short"]
    assert len(q) == 1 and "comms-logger summary table stops at a traceback" in q.iloc[0]["message"]
    assert len(log2.comms.summary) < len(full)


def test_a_profiler_that_crashed_before_printing_is_named():
    log = P.parse_log('[INFO] flops_profiler ..... {"enabled": true, "profile_step": 4}\n' + TB)
    assert log.flops == []
    q = log.quirks[log.quirks["kind"] == "profiler_crashed"]
    assert len(q) == 1 and "ZeroDivisionError" in q.iloc[0]["message"] and q.iloc[0]["line"] == 2
    # a traceback without the profiler on is only a traceback
    assert "profiler_crashed" not in set(P.parse_log(TB).quirks["kind"])


def test_a_module_shared_by_two_parents_is_flagged():
    text = _text()
    first = next(ln for ln in text.splitlines() if ln.startswith("  (0): Linear("))
    shared = text.replace("\n)\n---", "\n" + first.replace("(0):", "(5):") + "\n)\n---")  # (0) reused as (5)
    prof = P.parse_flops_profile(shared)
    assert prof.modules["path"].tolist() == ["", "0", "1", "2", "3", "4", "5"]
    q = prof.quirks[prof.quirks["kind"] == "shared_module"]
    assert len(q) == 1 and "the root module" in q.iloc[0]["message"] and "101,640 params" in q.iloc[0]["message"]
    assert "shared_module" not in P.parse_flops_profile(text).flags


def test_utf8_bom_in_a_log_and_a_config(tmp_path):
    log = tmp_path / "run.log"
    log.write_bytes(b"\xef\xbb\xbf" + sample_path(STAGE1).read_bytes())
    prof = P.parse_flops_profile(log)
    assert prof.get("world_size") == 2 and len(prof.modules) == 6
    cfg = tmp_path / "ds.json"
    cfg.write_bytes(b'\xef\xbb\xbf{"zero_optimization": {"stage": 3}}')
    assert P.zero_stage_of(cfg) == 3
    assert P.zero_stage_of({"zero_optimization": {"stage": float("nan")}}) is None  # ValueError before


def test_a_real_module_shared_by_two_blocks_is_named(capsys):
    """DeepSpeed's own flops profiler on a model whose two blocks share one Linear: the report prints it under
    both with the totals of both calls (more latency than either block); nbprof names it and flags its rows."""
    pytest.importorskip("deepspeed", reason="deepspeed not installed (DS_BUILD_OPS=0 pip install deepspeed)")
    import torch
    from deepspeed.profiling.flops_profiler import get_model_profile
    from torch import nn

    class Block(nn.Module):
        def __init__(self, lin: nn.Module) -> None:
            super().__init__()
            self.lin, self.act = lin, nn.ReLU()

        def forward(self, x):
            return self.act(self.lin(x))

    shared = nn.Linear(32, 32)
    model = nn.Sequential(Block(shared), Block(shared), nn.Linear(32, 4))
    torch.manual_seed(0)
    capsys.readouterr()
    get_model_profile(model, input_shape=(8, 32), print_profile=True, detailed=True, module_depth=-1, top_modules=3)
    prof = P.parse_flops_profile(capsys.readouterr().out)
    mods = prof.modules.set_index("path")
    assert mods.loc[["0.lin", "1.lin"], "macs"].round().tolist() == [16380, 16380]  # 2 calls x 8 x 32 x 32 (printed 16.38 K), both places
    assert mods.index[mods["flag"] == "shared_module"].tolist() == ["0.lin", "1.lin"]
    q = prof.quirks[prof.quirks["kind"] == "shared_module"]
    assert len(q) == 1
    msg = q.iloc[0]["message"]
    assert "one Linear module is printed under several parents ('0.lin', '1.lin'" in msg
    assert "more latency than its parent" in msg or "params, more than its own" in msg
