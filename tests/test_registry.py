"""The one registry shape (``nbprof.registry``) at every plug-in point, and loaders chosen by content where
formats share a suffix (``.json``: Kineto, torch's memory timeline curves, rocprofv3).

The rocprofv3 input: no public rocprofv3 JSON output could be found (searched the code index for the
format's top key and its record fields, the producer's repository ROCm/rocprofiler-sdk at 8ab1ed7 -- it
holds only input configs and the schema -- TraceLens's fixtures and ../shared/corpus). The document here is
laid out field for field as the producer writes it (``generateJSON.cpp``, ``cxx/serialization.hpp``), with
one process, one MI300X agent, a HIP launch, its kernel dispatch, a host-to-device copy and a ROCTx range.
"""

from __future__ import annotations

import json

import pytest

import nbprof
from nbprof import sources
from nbprof.registry import Registry
from nbprof.results import render as render_mod
from nbprof.trace import hooks
from nbprof.viz import registry as views

KINETO = "AMD-AGI__TraceLens/tests/traces/mi300/gaunernst_bert-small-uncased__1016001.json.gz"


def _rec(kind, op, tid, corr, t0, t1, **kw):
    return {"size": 64, "kind": kind, "operation": op, "thread_id": tid,
            "correlation_id": {"internal": corr, "external": 0}, "start_timestamp": t0, "end_timestamp": t1, **kw}


def _rocprofv3_doc() -> dict:
    dispatch = {"size": 96, "agent_id": {"handle": 22}, "queue_id": {"handle": 99}, "kernel_id": 3, "dispatch_id": 1,
                "private_segment_size": 0, "group_segment_size": 1024, "workgroup_size": {"x": 256, "y": 1, "z": 1},
                "grid_size": {"x": 1048576, "y": 1, "z": 1}}
    return {"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 4242, "init_time": 1_000_000, "fini_time": 9_000_000, "command": ["./app"]},
        "agents": [{"size": 400, "id": {"handle": 11}, "type": 1, "name": "AMD EPYC 9654"},
                   {"size": 400, "id": {"handle": 22}, "type": 2, "name": "gfx942",
                    "product_name": "AMD Instinct MI300X", "logical_node_type_id": 0}],
        "strings": {"buffer_records": [
            {"kind": "NONE", "operations": []},
            {"kind": "HIP_RUNTIME_API", "operations": ["hipMalloc", "hipLaunchKernel", "hipMemcpy"]},
            {"kind": "MARKER_CORE_API", "operations": ["roctxRangePushA"]},
            {"kind": "MEMORY_COPY", "operations": ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_DEVICE"]},
            {"kind": "KERNEL_DISPATCH", "operations": ["KERNEL_DISPATCH_ENQUEUE", "KERNEL_DISPATCH_COMPLETE"]}],
            "marker_api": [{"key": 7, "value": "train_step"}]},
        "kernel_symbols": [{"kernel_id": 3, "formatted_kernel_name": "vectorAdd(float const*, float const*, float*, int)"}],
        "buffer_records": {
            "hip_api": [_rec(1, 1, 4243, 5, 2_000_000, 2_010_000), _rec(1, 2, 4243, 6, 1_500_000, 1_900_000)],
            "hsa_api": [], "rccl_api": [],
            "marker_api": [_rec(2, 0, 4243, 7, 1_400_000, 3_000_000)],
            "kernel_dispatch": [_rec(4, 2, 4243, 5, 2_020_000, 2_520_000, dispatch_info=dispatch)],
            "memory_copy": [_rec(3, 1, 4243, 6, 1_600_000, 1_850_000, src_agent_id={"handle": 11},
                                 dst_agent_id={"handle": 22}, bytes=4194304)]}}]}


def test_registry_shape_lazy_targets_sniffing_and_the_error_listing_keys():
    r = Registry("widget", error=LookupError)
    r.register("text", "builtins:str")
    r.register("json", "json:dumps", sniff=lambda h: h[:1] == b"{", priority=1)
    r.register("list", "builtins:list", sniff="nbprof.sources.rocprofv3:sniff", priority=5)
    assert r.resolve("json") is json.dumps and r.keys() == ("text", "json", "list")
    assert r.choose(["text", "json", "list"], b'{"x": 1}') == "json"
    assert r.choose(["text", "json", "list"], b'{"rocprofiler-sdk-tool": []}') == "list"  # priority 5 asked first
    assert r.choose(["text", "json"], b"[1]") == "text"  # no sniffer said yes: the fallback
    with pytest.raises(LookupError, match="unknown widget 'yaml'; registered: text, json, list"):
        r.resolve("yaml")
    with pytest.raises(ValueError, match=r"must be 'package\.module:attr'"):
        r.register("bad", "builtins.str")


def test_every_plug_in_point_is_a_registry():
    assert isinstance(sources.FORMATS, Registry) and isinstance(views.VIEW_REGISTRY, Registry)
    assert isinstance(render_mod.RENDERERS, Registry) and isinstance(hooks.HOOKS, Registry)
    from nbprof import cli

    assert isinstance(cli.REPORTS, Registry) and cli.STATS_REPORTS == cli.NSYS_REPORTS + cli.NBPROF_REPORTS
    assert cli.REPORTS.resolve("kernels").__name__ == "kernel_summary"
    assert set(hooks.HOOKS.keys()) == {"viewer", "save", "chrome", "perfetto", "sql"}


def test_a_view_registered_after_import_is_in_the_dashboard_list():
    before = views.VIEW_REGISTRY.snapshot()
    try:
        views.register("late", title="Late", live="nbprof.viz.overview:overview_view",
                       static="nbprof.viz.overview:static_view")
        assert views.trace_views()[-1] == "late" and "late" not in views.VIEWS
    finally:
        views.VIEW_REGISTRY.unregister("late")
    assert views.VIEW_REGISTRY.snapshot() == before


def test_json_loaders_are_chosen_by_content(corpus, samples, tmp_path):
    assert sources.format_of(str(corpus(KINETO))) == "kineto"
    curve = samples("torch_mem_timeline_cpu.json")  # torch export_memory_timeline(path.json), torch on CPU
    assert sources.format_of(str(curve)) == "memory_timeline"
    assert type(nbprof.load(curve)).__name__ == "MemoryTimeline"  # was "not a Kineto trace" by suffix alone
    p = tmp_path / "4242_results.json"
    p.write_text(json.dumps(_rocprofv3_doc(), indent=4))
    assert sources.format_of(str(p)) == "rocprofv3"
    bad = tmp_path / "x.txt"
    bad.write_text("{}")
    with pytest.raises(nbprof.TraceFormatError, match=r"expected a file ending in one of .*\.json"):
        nbprof.load(bad)


def test_rocprofv3_json_through_one_registration(tmp_path):
    """The new format is one reader module plus one ``register`` line (``nbprof/sources/__init__.py``)."""
    assert sources.FORMATS.entry("rocprofv3").target == "nbprof.sources.rocprofv3:load_rocprofv3"
    p = tmp_path / "4242_results.json.gz"
    import gzip

    p.write_bytes(gzip.compress(json.dumps(_rocprofv3_doc()).encode()))
    tr = nbprof.load(p)
    ev = tr.events
    assert tr.meta.producer == "rocprofv3" and tr.meta.origin_ns == 1_400_000
    assert tr.meta.device_properties == [{"id": 0, "name": "AMD Instinct MI300X", "gfx": "gfx942"}]
    k = ev[ev["cat"] == "kernel"].iloc[0]
    assert (k["name"], k["ts_ns"], k["dur_ns"], k["device"], k["stream"], k["grid"], k["block"]) == (
        "vectorAdd(float const*, float const*, float*, int)", 620_000, 500_000, 0, 99, "1048576,1,1", "256,1,1")
    launch = ev[(ev["cat"] == "cuda_runtime") & (ev["correlation"] == k["correlation"])].iloc[0]
    assert launch["name"] == "hipLaunchKernel" and (launch["pid"], launch["tid"]) == (4242, 4243)
    cp = ev[ev["cat"] == "gpu_memcpy"].iloc[0]
    assert (cp["name"], cp["bytes"], cp["device"], cp["dur_ns"]) == ("MEMORY_COPY_HOST_TO_DEVICE", 4194304, 0, 250_000)
    rng = ev[ev["cat"] == "user_annotation"].iloc[0]
    assert (rng["name"], rng["ts_ns"], rng["dur_ns"]) == ("train_step", 0, 1_600_000)
    from nbprof.analysis.kernels import kernel_summary

    assert int(kernel_summary(tr)["total_ns"].iloc[0]) == 500_000
    assert tr.report.get("no_flows") is not None
