"""Issue 33 B12: the Chrome export read by the peers' own parsers gives the original's numbers
(torch-tb-profiler 0.4.3 on a 2021 V100 trace: overview costs incl. the Runtime row, approximated SM
efficiency from ``blocks per SM``; HTA 0.5 on the B200 trace: idle time per rank)."""

from __future__ import annotations

import gzip
import json
import logging
import shutil

import pytest
from _support.paths import corpus_path

import nbprof
from nbprof.export.chrome import chrome_trace_dict

V100 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
B200 = "AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz"

pytestmark = pytest.mark.slow


def _tb(doc):
    tbp = pytest.importorskip("torch_tb_profiler.profiler.data", reason="torch-tb-profiler (peer) not installed")
    logging.disable(logging.WARNING)
    try:
        p = tbp.RunProfileData.from_json("worker0", "span", doc)
        p.process()
        p.analyze()
    finally:
        logging.disable(logging.NOTSET)
    return p


def test_tb_profiler_reads_the_export_of_a_2021_trace_with_the_same_numbers():
    path = corpus_path(V100)
    orig = _tb(json.loads(gzip.decompress(path.read_bytes())))
    tr = nbprof.load(path)
    assert tr.meta.extra["nbprof_category_names"]["cuda_runtime"] == "Runtime"  # the 2021 spelling kept
    back = _tb(json.loads(json.dumps(chrome_trace_dict(tr)[0])))
    assert back.avg_costs.costs == pytest.approx(orig.avg_costs.costs)  # Runtime row included
    sm = [x for x in orig.gpu_metrics_parser.avg_approximated_sm_efficiency_per_device if x is not None]
    assert sm and [x for x in back.gpu_metrics_parser.avg_approximated_sm_efficiency_per_device
                   if x is not None] == pytest.approx(sm)


def test_hta_reads_the_export_of_the_b200_trace_with_the_same_idle_time(tmp_path):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis (peer) not installed")
    from hta.trace_analysis import TraceAnalysis

    src = corpus_path(B200)
    a, b = tmp_path / "orig", tmp_path / "export"
    a.mkdir()
    b.mkdir()
    shutil.copyfile(src, a / "rank-0.json.gz")
    nbprof.load(src).to_chrome_trace(b / "rank-0.json.gz")
    logging.getLogger("hta").setLevel(logging.ERROR)

    def idle(d):
        df = TraceAnalysis(trace_dir=str(d)).get_temporal_breakdown(visualize=False)
        return df[["idle_time_pctg", "compute_time_pctg"]].to_numpy().ravel().tolist()

    orig = idle(a)
    assert orig[0] > 80  # measured: 87.2 % idle, 12.02 % compute; the export 87.29 / 11.93 (was 0.5 % idle)
    assert idle(b) == pytest.approx(orig, abs=0.15)
