"""Answers that contradicted each other or physics (issue 34), each on the trace that showed it.

- ``distributed.skew`` named rank 0 the straggler of HTA's ``trace_filter`` pair (it arrived last at 6 of 10
  collectives by the host *call* time) where ``distributed.stragglers`` named rank 1 (it arrives last on the
  device at 8 of 10 and causes 189 ms of the others' wait, rank 0 44 ms). One definition now: arrivals are
  :func:`~nbprof.analysis.distributed.wait_transfer`'s (execution start), the straggler is the rank that
  causes the wait (:func:`~nbprof.analysis.distributed.stragglers`), and ``skew`` reports that verdict.
- ``pipeline_bubbles`` reported 82/77/83/78 % "bubble" on that pair, a data-parallel job without pipeline
  parallelism (no microbatch annotation, no send/recv): now no result, with the reason.
- ``busbw_vs_link`` compared every collective with one link; a two-tier model now (NVLink/xGMI inside a
  node, the NIC between nodes) and any fraction above 1 is flagged ``model_fits`` False.
- The roofline showed ``aten::copy_`` at 103 % of H100 HBM bandwidth on TraceLens's Qwen trace: the work
  model was wrong (it read the destination too: 3 instead of 2 tensor passes), now 69 %; and 9 of 61
  kernels above the FP32 roof on the V100 ResNet-50 trace (issue 38 item 4): non-fused Winograd
  convolutions compute in ``volta_sgemm`` kernels (they had no FLOPs; the transform kernels had all) and
  do (m+2)^2/(9 m^2) of the direct convolution's multiplications; ``clamp_min`` with an ``out=`` tensor
  counted it read. One kernel stays above (flagged ``above_roof``): a 6.4 MB scalar multiply at 1.07 TB/s
  on a 900 GB/s V100, its operand in the 6 MB L2 -- the DRAM model does not fit it.
"""

from __future__ import annotations

import numpy as np
import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.analysis import distributed as D
from nbprof.analysis import efficiency as eff

HTA = "facebookresearch__HolisticTraceAnalysis/tests/data/"
pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def filter_pair():
    return [nbprof.load(corpus_path(HTA + f"trace_filter/sampled_rank-{r}.json.gz")) for r in (0, 1)]


def test_skew_reports_the_straggler_that_causes_the_wait(filter_pair):
    st = D.stragglers(filter_pair).set_index("rank")
    sk = D.skew(filter_pair).set_index("rank")
    assert st["straggler"].to_dict() == {0: False, 1: True}
    assert sk["straggler"].to_dict() == st["straggler"].to_dict()
    assert sk["caused_wait_ns"].to_dict() == st["caused_wait_ns"].to_dict() == {0: 44_254_000, 1: 189_234_000}
    # arrivals have one definition: the last arrivals skew counts are stragglers' (2 ranks: one per instance)
    assert sk["last_arrival_count"].to_dict() == st["last_arrivals"].to_dict() == {0: 2, 1: 8}
    cs = D.collective_skew(filter_pair)
    assert len(cs) == 10 and (cs["last_rank"] == 1).sum() == 8


def test_no_pipeline_pattern_means_no_bubbles(filter_pair):
    b = D.pipeline_bubbles(filter_pair)
    assert b.empty
    assert b.attrs["reason"].startswith("no pipeline-parallel pattern")
    assert D.pipeline_bubbles(filter_pair[:1]).attrs["reason"].startswith("1 stage(s)")


def test_busbw_two_tier_link_model_flags_fractions_above_one():
    t = nbprof.load(corpus_path(HTA + "trace_diff/control/control.json.gz"))  # rank 3 of 8, A100
    c = D.collectives(t)
    intra = D.busbw_vs_link(c, "nvlink3")  # a group of 8 fits in one 8-GPU node
    sized = intra[intra["busbw_bytes_per_s"].notna()]
    assert set(sized["tier"]) == {"intra-node"} and sized["model_fits"].all()
    assert sized["busbw_link_fraction"].max() == pytest.approx(0.671, abs=5e-4)
    # the same calls read as crossing 200G InfiniBand (4 GPUs per node): up to 8x its peak -- the model does
    # not fit, and says so instead of reporting an 805 % utilisation
    inter = D.busbw_vs_link(c, "nvlink3", inter_link="ib_hdr", gpus_per_node=4)
    s = inter[inter["busbw_bytes_per_s"].notna()]
    assert set(s["tier"]) == {"inter-node"} and set(s["link"]) == {"ib_hdr"}
    assert (s["model_fits"] == ~(s["busbw_link_fraction"] > 1)).all()
    assert (~s["model_fits"]).sum() > 0 and s["busbw_link_fraction"].max() > 8
    # without an inter-node link the bottleneck is unknown: NaN, nothing claimed
    unk = D.busbw_vs_link(c, "nvlink3", gpus_per_node=4)
    assert unk["busbw_link_fraction"].isna().all() and unk["model_fits"].all()


def test_roofline_copy_under_h100_bandwidth():
    t = nbprof.load(corpus_path("AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))
    oe = eff.operator_efficiency(t)
    cp = oe[(oe["name"] == "aten::copy_") & (oe["input_dims"] == "[[16, 559, 1024], [16, 559, 1024], []]")].iloc[0]
    # 98 calls x 9,158,656 elements x (4 + 2) bytes (fp32 <-> bf16 both ways, source read + destination written)
    assert cp["bytes"] == 98 * 9_158_656 * 6
    assert cp["peak_ratio"] == pytest.approx(0.6899, abs=1e-4)  # was 1.035: the destination counted as read
    assert not oe["above_roof"].any() and not eff.kernel_efficiency(t)["above_roof"].any()


def test_roofline_v100_points_above_the_roof_found_or_flagged():
    t = nbprof.load(corpus_path("pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/"
                                "worker0.1623143089861.pt.trace.json.gz"))
    ke = eff.kernel_efficiency(t)
    assert len(ke) == 61
    above = ke[ke["above_roof"]]
    assert len(above) == 1 and "MulScalarFunctor" in above["name"].iloc[0]  # was 9 (up to 4.5x the FP32 roof)
    rate = ke["achieved_tflops_per_s"] / ke["peak_tflops_per_s"]
    assert rate.max() <= 1.0
    kw = eff.kernel_work(t)
    conv = kw[kw["kind"] == "conv"]
    names = conv["name"].astype(str)
    assert conv.loc[names.str.contains("winograd_nonfused"), "flops"].sum() == 0  # transforms: no FLOPs
    assert conv.loc[names.str.contains("sgemm"), "flops"].sum() > 0
    # operators (whole-op time, direct-convolution FLOPs): the Winograd backward convs stay above the roof,
    # flagged, never a utilisation
    oe = eff.operator_efficiency(t)
    flagged = oe[oe["above_roof"]]
    assert set(flagged["name"]) >= {"aten::cudnn_convolution_backward"}
    assert np.all(flagged["peak_ratio"] > 1)


def test_gpu_trace_without_device_properties_or_shapes_is_not_called_cpu_only(tmp_path):
    """Issue 38 item 4: an old-format GPU trace read "a CPU-only trace?" and MFU 0. tb-plugin's
    gpu_metrics_input.json (2021, 30 kernels, no ``record_shapes``) with its device properties removed:
    the peaks note names the missing ``deviceProperties`` of a trace with device activity, and the step's
    FLOPs and MFU are unknown (NaN), not 0."""
    import json

    src = corpus_path("pytorch__kineto/tb_plugin/test/gpu_metrics_input.json")
    doc = json.loads(src.read_text())
    doc.pop("deviceProperties", None)
    doc.pop("computeProperties", None)
    p = tmp_path / "old.pt.trace.json"
    p.write_text(json.dumps(doc))
    t = nbprof.load(p)
    assert t.has_device and not t.meta.device_properties
    note = eff.peaks(t).note
    assert "no deviceProperties" in note and "device activity" in note and "CPU-only" not in note
    m = eff.step_mfu(nbprof.load(src))  # with its device properties: V100, but no shapes
    assert len(m) and m["model_flops"].isna().all() and m["mfu"].isna().all()
