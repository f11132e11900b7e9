"""Issue 33 (loaders round 3): the smallest real-derived input for each defect, its recovered values
and its load-report entry."""

from __future__ import annotations

import gzip
import json

import pandas as pd

import nbprof

BERT = "AMD-AGI__TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
CUPTI = "facebookresearch__HolisticTraceAnalysis/tests/data/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"


def _doc(path) -> dict:
    with gzip.open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------------------- B1: strings byte-exact


def test_pretty_printed_trace_keeps_spaces_inside_strings(tmp_path, corpus):
    src = corpus(BERT)
    pretty = tmp_path / "pretty.pt.trace.json"
    pretty.write_text(json.dumps(_doc(src), indent=2))
    a, b = nbprof.load(src), nbprof.load(pretty)
    for col in ("input_types", "input_dims"):
        pd.testing.assert_series_equal(a.events[col].astype(object), b.events[col].astype(object))
    types = set(b.events["input_types"].dropna().astype(str))
    assert '["long int", "Scalar", "Scalar", "Scalar", "Scalar"]' in types
    assert not any("longint" in t for t in types)
