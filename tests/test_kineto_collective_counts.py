"""Collective message sizes that cannot be (issue 33, loaders leftover): ``In``/``Out msg nelems`` beyond
int64, negative, or whose bytes (times the dtype's size) are beyond 2**53, where the float64 message sizes
of ``collectives`` stop being exact (2**62 BFloat16 elements were 2**63 bytes: a float, then
-9223372036854775808 in the job reductions' Int64 column). Each is read as no size (-1) and reported as a
repair; the collective then has no size (NaN / NA: left out of the bandwidths), never a wrapped one.

The input: the real B200 trace's one NCCL kernel (rank 0 of 8, ``_allgather_base``, 25136 -> 201088 BFloat16
elements), with its launch and its ``record_param_comms`` op, cut from the corpus file."""

from __future__ import annotations

import gzip
import json
import math

import pandas as pd
import pytest

import nbprof
from nbprof.errors import NbprofError

B200 = "AMD-AGI__TraceLens/tests/traces/b200/eager_trace.json.gz"


def _cut(corpus) -> dict:
    with gzip.open(corpus(B200)) as f:
        doc = json.load(f)
    evs = doc["traceEvents"]
    k = next(e for e in evs if e.get("cat") == "kernel" and "In msg nelems" in (e.get("args") or {}))
    corr, ext = k["args"]["correlation"], k["args"]["External id"]
    keep = [e for e in evs if e.get("ph") == "M" or e is k
            or (e.get("args") or {}).get("correlation") == corr
            or (e.get("name") == "record_param_comms" and (e.get("args") or {}).get("External id") == ext)]
    doc["traceEvents"] = keep
    return doc


def _load(tmp_path, doc, nelems=None, **kw):
    if nelems is not None:
        k = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
        k["args"]["In msg nelems"] = nelems
        k["args"]["Out msg nelems"] = nelems
    p = tmp_path / "nccl.pt.trace.json"
    p.write_text(json.dumps(doc))
    return nbprof.load(p, **kw)


def _kernel(tr):
    return tr.events[tr.events["cat"] == "kernel"].iloc[0]


def _msg_bytes(tr):
    from nbprof.analysis.distributed import comms, reductions

    c = comms.collectives(tr)
    red = reductions.reduction_table(tr, "collectives")
    return c["msg_bytes"].tolist(), red["msg_bytes"].tolist()


def _no_size(tr):
    (c,), (r,) = _msg_bytes(tr)
    assert math.isnan(c) and r is pd.NA


def test_the_cut_as_recorded(tmp_path, corpus):
    tr = _load(tmp_path, _cut(corpus))
    k = _kernel(tr)
    assert (k["msg_in_nelems"], k["msg_out_nelems"], k["dtype"]) == (25136, 201088, "BFloat16")
    assert _msg_bytes(tr) == ([201088 * 2], [201088 * 2])  # all_gather: the gathered output, 2 bytes each
    assert not any(i.kind.startswith(("bigint_msg", "negative_msg", "msg_bytes")) for i in tr.report.issues)


def test_message_bytes_beyond_2_53_are_no_size_and_reported(tmp_path, corpus):
    tr = _load(tmp_path, _cut(corpus), 2**62)  # 2**63 bytes: was a float, then INT64_MIN in the reductions
    k = _kernel(tr)
    assert (k["msg_in_nelems"], k["msg_out_nelems"]) == (-1, -1)
    it = tr.report.get("msg_bytes_beyond_2_53")
    assert it is not None and it.action == "repaired" and it.count == 2
    assert f"{2**62} elements of BFloat16 = {2**63} bytes" in it.message
    _no_size(tr)
    # just under the limit is kept as written
    tr = _load(tmp_path, _cut(corpus), 2**52)
    assert _kernel(tr)["msg_in_nelems"] == 2**52 and tr.report.get("msg_bytes_beyond_2_53") is None
    assert _msg_bytes(tr) == ([2.0**53], [2**53])


@pytest.mark.parametrize(("value", "kind"), [(2**63 + 5, "bigint_msg_in_nelems"), (2**64, "bigint_msg_in_nelems"),
                                             (-7, "negative_msg_in_nelems")])
def test_counts_beyond_int64_or_negative_are_no_size_and_reported(tmp_path, corpus, value, kind):
    tr = _load(tmp_path, _cut(corpus), value)
    k = _kernel(tr)  # was: 2**63 + 5 stored as its bit pattern, a negative count, and only noted
    assert (k["msg_in_nelems"], k["msg_out_nelems"]) == (-1, -1)
    it = tr.report.get(kind)
    assert it is not None and it.action == "repaired" and it.count == 1 and str(value) in it.message
    _no_size(tr)
    with pytest.raises(NbprofError):
        _load(tmp_path, _cut(corpus), value, strict=True)
