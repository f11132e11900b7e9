"""DeepSpeed profiling config: the fragment is accepted by DeepSpeed's own config classes; the seed's
invented settings are translated with a warning; attach() drives torch.profiler from a step counter."""

from __future__ import annotations

import warnings

import pytest

from nbprof.deepspeed.config import (
    DeepSpeedConfigWarning,
    deepspeed_supports_log_level,
    profiling_config,
    translate_seed_argv,
    translate_seed_config,
)

deepspeed = pytest.importorskip("deepspeed", reason="deepspeed not installed (DS_BUILD_OPS=0 pip install deepspeed)")


def _ds_config(cfg: dict):
    from deepspeed.runtime.config import DeepSpeedConfig

    return DeepSpeedConfig(cfg)


def test_fragment_is_read_by_deepspeed():
    prof = profiling_config(3, 6, comms_verbose=True, flops_output_file="flops.txt", module_depth=2)
    cfg = prof.apply({"train_micro_batch_size_per_gpu": 4, "flops_profiler": {"top_modules": 3}})
    ds = _ds_config(cfg)
    fp = ds.flops_profiler_config
    assert (fp.enabled, fp.profile_step, fp.module_depth, fp.output_file) == (True, 3, 2, "flops.txt")
    assert fp.top_modules == 1  # apply(): the fragment's keys override the same keys of the given config
    cl = ds.comms_config.comms_logger
    assert ds.comms_config.comms_logger_enabled and cl.verbose and cl.prof_all
    assert ds.wall_clock_breakdown is True
    assert deepspeed_supports_log_level()  # 0.19.8 declares LOG_LEVEL = "log_level"
    assert ds.log_level == "info"
    assert prof.window.start_step == 3 and prof.window.end_step == 6 and prof.window.comms_verbose


def test_seed_profiler_section_translated_with_warning():
    seed = {
        "train_micro_batch_size_per_gpu": 8,
        "comms_logger": {"enabled": True, "debug": True},
        "profiler": {"enabled": True, "start_step": 5, "end_step": 8, "record_shapes": False,
                     "profile_memory": True, "flush_every_n_steps": 1, "bogus": 1},
    }
    with pytest.warns(DeepSpeedConfigWarning, match="no 'profiler' config section.*ignored unknown keys \\['bogus'\\]"):
        cfg, prof = translate_seed_config(seed)
    assert "profiler" not in cfg and "profiler" in seed  # input untouched
    assert cfg["flops_profiler"]["profile_step"] == 5
    assert cfg["comms_logger"]["debug"] is True  # the user's explicit keys win
    w = prof.window
    assert (w.start_step, w.end_step, w.record_shapes, w.profile_memory, w.flush_every_n_steps) == (5, 8, False, True, 1)
    ds = _ds_config(cfg)  # and DeepSpeed accepts the result
    assert ds.flops_profiler_config.profile_step == 5


def test_seed_disabled_and_argv_flag():
    with pytest.warns(DeepSpeedConfigWarning):
        cfg, prof = translate_seed_config({"profiler": {"enabled": False}})
    assert cfg == {} and prof.window.enabled is False
    with pytest.warns(DeepSpeedConfigWarning, match="no --profiling flag"):
        argv, asked = translate_seed_argv(["--num_gpus", "2", "--profiling", "train.py"])
    assert argv == ["--num_gpus", "2", "train.py"] and asked
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert translate_seed_argv(["train.py"]) == (["train.py"], False)
    with pytest.raises(ValueError, match="start_step < end_step"):
        profiling_config(4, 4)


class _Loop:
    """A plain torch training loop exposing what attach() uses: ``step()`` and ``global_steps``."""

    def __init__(self):
        import torch

        self.model = torch.nn.Linear(8, 8)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.global_steps = 0

    def step(self):
        import torch

        loss = self.model(torch.randn(4, 8)).sum()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        self.global_steps += 1


def test_attach_window_flush_and_never_overwrite(tmp_path):
    import nbprof
    from nbprof.deepspeed.attach import attach

    (tmp_path / "rank0.steps1-3.pt.trace.json.gz").write_bytes(b"user file")
    loop = _Loop()
    win = attach(loop, 1, 5, tmp_path, flush_every_n_steps=2)
    cls_step = type(loop).step
    for _ in range(6):
        loop.step()
    assert not win.active
    names = [p.rsplit("/", 1)[-1] for p in win.traces]
    assert names == ["rank0.steps1-3-1.pt.trace.json.gz", "rank0.steps3-5.pt.trace.json.gz"]
    assert (tmp_path / "rank0.steps1-3.pt.trace.json.gz").read_bytes() == b"user file"
    t = nbprof.load(win.traces[1])
    assert t.steps == [3, 4]  # ProfilerStep#N = the loop's global step
    win.close()
    assert "step" not in loop.__dict__ and type(loop).step is cls_step


def test_user_keys_win_without_a_profiler_section():
    """Issue 24: a real config (LLaVA-parallelism's zero3.json, no "profiler" section) kept its
    flops_profiler.profile_step 1 and the comms logger's verbose true only when a "profiler" section was there."""
    import json

    from _support.paths import corpus_path

    real = json.loads(corpus_path("OAfzal__LLaVA-parallelism/scripts/zero3.json").read_text())
    assert "profiler" not in real and real["flops_profiler"]["profile_step"] == 1
    user = {**real, "comms_logger": {"enabled": True, "verbose": True, "prof_all": True, "debug": False},
            "wall_clock_breakdown": False}
    before = json.dumps(user, sort_keys=True)
    cfg, prof = translate_seed_config(user)
    assert json.dumps(user, sort_keys=True) == before  # not modified
    assert cfg["flops_profiler"] == real["flops_profiler"]  # profile_step 1, output_file kept
    assert cfg["comms_logger"]["verbose"] is True
    assert cfg["wall_clock_breakdown"] is False
    assert cfg["zero_optimization"] == real["zero_optimization"]
    # what the user did not write is still added
    assert cfg["comms_logger"]["prof_ops"] == []
    # same with a "profiler" section: the user's keys win over the window's
    cfg2, _ = translate_seed_config({**user, "profiler": {"start_step": 3, "end_step": 5}}, warn=False)
    assert cfg2["flops_profiler"]["profile_step"] == 1 and cfg2["comms_logger"]["verbose"] is True
    assert "profiler" not in cfg2
