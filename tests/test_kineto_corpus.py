"""Every Kineto file in ../shared/corpus loads, with real per-category counts."""

from __future__ import annotations

import pytest

import nbprof
from conftest import corpus_path

# (corpus path, expected per-category counts (subset), rank, number of steps)
CASES = [
    ("AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz", {"kernel": 768, "cpu_op": 4809, "gpu_memcpy": 161, "cuda_runtime": 1151}, 0, 0),
    ("AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz", {"kernel": 60, "cpu_op": 479}, 0, 1),
    ("AMD-AGI__TraceLens/tests/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz", {"kernel": 562, "cuda_runtime": 631}, 0, 0),
    ("facebookresearch__HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz", {"kernel": 19370, "cpu_op": 56680, "gpu_memcpy": 2040}, 1, 5),
    ("facebookresearch__HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", {"user_annotation": 11, "cpu_op": 4}, 34, 1),
    ("pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz", {"kernel": 8772, "cpu_op": 23646, "gpu_memset": 312, "gpu_memcpy": 12}, 0, 6),
]


@pytest.mark.parametrize("rel,counts,rank,nsteps", CASES, ids=[c[0].split("/")[-1] for c in CASES])
def test_corpus_counts(rel, counts, rank, nsteps):
    tr = nbprof.load(corpus_path(rel))
    tr.validate()
    got = tr.category_counts()
    for cat, n in counts.items():
        assert got.get(cat, 0) == n, cat
    assert tr.rank == rank
    assert len(tr.steps) == nsteps


def test_old_schema_memory_events_and_times():
    tr = nbprof.load(corpus_path("pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"))
    assert len(tr.memory) == 12838
    assert tr.meta.origin_ns is not None and tr.meta.origin_ns > 1_600_000_000 * 10**9  # absolute µs in 2021 traces
    assert tr.events["ts_ns"].min() == 0
    # kernels sit on device 0, stream 7 with pid/tid mapped to device/stream
    k = tr.events[tr.events["cat"] == "kernel"]
    assert set(k["device"].unique()) == {0}
    assert 7 in set(k["stream"].unique())
