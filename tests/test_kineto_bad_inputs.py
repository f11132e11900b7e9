"""The smallest hand-made input for each bad-input kind that applies to Kineto JSON traces.

Kinds from ../shared/notes/bad-inputs.md (B01 nonfinite tokens, B02 malformed/truncated JSON,
B03 control characters, B05 unescaped quotes, B07 bare array, B08 missing distributedInfo,
B11 key order, B12 negative durations, B14 overlapping same-stream kernels, B18 empty profiles)
plus big integers, invalid UTF-8, string-typed ``ts``, ``displayTimeUnit: "ns"`` and exact
nanoseconds of absolute-µs timestamps. Each test asserts the recovered values and the load
report's kind, count and byte offset; the strict-mode tests assert the error's offset.
"""

from __future__ import annotations

import gzip

import numpy as np
import pytest

import nbprof
from nbprof.errors import TraceFormatError

# ---------------------------------------------------------------------------- the base trace

STEP = '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 11, "tid": 12, "ts": 100.000, "dur": 50.000, "args": {"External id": 1}}'
OP = '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 11, "tid": 12, "ts": 101.000, "dur": 10.500, "args": {"External id": 7, "Sequence number": 3, "Input Dims": [[4, 8], [8, 2]]}}'
RT = '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 11, "tid": 12, "ts": 103.000, "dur": 2.000, "args": {"External id": 7, "correlation": 42}}'
FLOW_S = '{"ph": "s", "id": 42, "pid": 11, "tid": 12, "ts": 103.000, "cat": "ac2g", "name": "ac2g"}'
KERNEL = '{"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 110.000, "dur": 5.000, "args": {"External id": 7, "device": 0, "stream": 7, "correlation": 42, "grid": [4, 1, 1], "block": [128, 1, 1]}}'
FLOW_F = '{"ph": "f", "id": 42, "pid": 0, "tid": 7, "ts": 110.000, "cat": "ac2g", "name": "ac2g", "bp": "e"}'
MEM = '{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 11, "tid": 12, "ts": 102.000, "args": {"Total Reserved": 2097152, "Total Allocated": 1024, "Bytes": 512, "Addr": 1000, "Device Id": 0, "Device Type": 1}}'
BASE_EVENTS = [STEP, OP, MEM, RT, FLOW_S, KERNEL, FLOW_F]
HEAD = '{\n  "schemaVersion": 1,\n  "baseTimeNanoseconds": 1700000000000000000,\n  "traceEvents": [\n'
TAIL = '\n  ],\n  "traceName": "t.json"\n}\n'


def trace_text(events: list[str], head: str = HEAD, tail: str = TAIL) -> str:
    return head + ",\n".join(events) + tail


def write(tmp_path, text: str | bytes, name: str = "t.pt.trace.json"):
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def issue(tr, kind):
    it = tr.report.get(kind)
    assert it is not None, f"no {kind!r} in {tr.report}"
    return it


def strict_error(p) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as ei:
        nbprof.load(p, strict=True)
    assert ei.value.path == str(p)
    return ei.value


def test_clean_base_trace(tmp_path):
    tr = nbprof.load(write(tmp_path, trace_text(BASE_EVENTS)))
    tr.validate()
    assert tr.category_counts().to_dict() == {"cpu_op": 1, "cuda_runtime": 1, "kernel": 1, "user_annotation": 1}
    assert tr.report.kinds() == {"rank_assumed"}
    assert tr.meta.origin_ns == 1700000000000000000 + 100_000
    k = tr.events[tr.events["cat"] == "kernel"].iloc[0]
    assert (k["ts_ns"], k["dur_ns"], k["device"], k["stream"], k["correlation"], k["step"]) == (10_000, 5_000, 0, 7, 42, 1)
    assert k["grid"] == "[4, 1, 1]"
    op = tr.events[tr.events["cat"] == "cpu_op"].iloc[0]
    assert (op["external_id"], op["seq"], op["input_dims"]) == (7, 3, "[[4, 8], [8, 2]]")
    assert tr.flows[["id", "src_ts_ns", "dst_ts_ns", "dst_pid", "dst_tid"]].values.tolist() == [[42, 3000, 10000, 0, 7]]
    assert tr.memory[["ts_ns", "bytes", "total_allocated", "device", "step"]].values.tolist() == [[2000, 512, 1024, 0, 1]]
    assert tr.steps == [1]


# ---------------------------------------------------------------------------- truncation (B02 kind)


def test_truncated_file_keeps_every_complete_event(tmp_path):
    full = trace_text(BASE_EVENTS)
    cut = full.index('"name": "gemm_kernel"')  # job killed in the middle of the kernel event
    data = full[:cut]
    p = write(tmp_path, data)
    tr = nbprof.load(p)
    # complete before the cut: step, op, [memory], runtime, flow start
    assert tr.category_counts().to_dict() == {"cpu_op": 1, "cuda_runtime": 1, "user_annotation": 1}
    assert len(tr.memory) == 1 and len(tr.flows) == 1 and tr.flows["dst_ts_ns"].iloc[0] == -1
    it = issue(tr, "truncated")
    assert (it.action, it.count, it.offset) == ("repaired", 1, len(data))
    start_of_partial = data.rindex("{")
    assert it.message.startswith(f"truncated at byte {len(data)}: recovered {100 * start_of_partial / len(data):.1f}%")
    assert "5 complete events" in it.message
    assert tr.meta.origin_ns == 1700000000000000000 + 100_000  # metadata before the events survives
    err = strict_error(p)
    assert err.offset == len(data) and "truncated" in err.reason


def test_truncated_right_after_a_complete_event(tmp_path):
    full = trace_text(BASE_EVENTS)
    data = full[: full.index(FLOW_F) - 1]  # ends with the kernel event + ","
    assert data.endswith(KERNEL + ",")
    tr = nbprof.load(write(tmp_path, data))
    assert tr.category_counts()["kernel"] == 1
    assert issue(tr, "truncated").offset == len(data)
    assert "6 complete events" in issue(tr, "truncated").message


def test_truncated_gzip(tmp_path):
    kernels = [KERNEL.replace('"ts": 110.000', f'"ts": {200 + 10 * i}.000').replace('"correlation": 42', f'"correlation": {100 + i}')
               for i in range(400)]
    text = trace_text(BASE_EVENTS[:2] + kernels).encode()
    gz = gzip.compress(text, compresslevel=6)
    p = write(tmp_path, gz[: len(gz) * 2 // 3], "t.pt.trace.json.gz")
    tr = nbprof.load(p)
    g = issue(tr, "gzip_truncated")
    prefix = text[: g.offset]
    assert 0 < len(prefix) < len(text)
    complete = [k for k in kernels if text.index(k.encode()) + len(k) <= len(prefix)]
    assert 10 < len(complete) < 400
    assert tr.category_counts()["kernel"] == len(complete)
    assert tr.category_counts()["cpu_op"] == 1
    assert issue(tr, "truncated").offset == len(prefix)
    err = strict_error(p)
    assert err.offset == len(prefix) and "gzip" in err.reason


# ---------------------------------------------------------------------------- B01 NaN/Infinity/inf


def test_nonfinite_tokens_are_read_as_null(tmp_path):
    memcpy = ('{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, '
              '"ts": 120.000, "dur": 0.000, "args": {"device": 0, "stream": 7, "correlation": 43, "bytes": 200, '
              '"memory bandwidth (GB/s)": inf}}')
    op2 = OP.replace('"Sequence number": 3', '"Sequence number": 4, "flops": NaN, "x": -Infinity').replace("101.000", "130.000")
    text = trace_text(BASE_EVENTS + [memcpy, op2])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    assert tr.category_counts().to_dict() == {"cpu_op": 2, "cuda_runtime": 1, "gpu_memcpy": 1, "kernel": 1, "user_annotation": 1}
    m = tr.events[tr.events["cat"] == "gpu_memcpy"].iloc[0]
    assert (m["bytes"], m["dur_ns"], m["ts_ns"]) == (200, 0, 20_000)
    assert tr.events.loc[tr.events["seq"] == 4, "flops"].isna().all()
    it = issue(tr, "nonfinite")
    assert (it.action, it.count, it.offset) == ("repaired", 2, text.encode().index(memcpy.encode()))
    err = strict_error(p)
    assert err.offset == text.encode().index(b"inf}")


# ---------------------------------------------------------------------------- B03 control characters


def test_raw_control_character_in_a_name(tmp_path):
    bad = OP.replace("aten::mm", "aten::m\x01m")
    text = trace_text([STEP, bad, RT, KERNEL])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    assert "aten::m\x01m" in set(tr.events["name"])
    assert len(tr.events) == 4
    it = issue(tr, "control_chars")
    assert (it.count, it.offset) == (1, text.index(bad))
    assert strict_error(p).offset == text.index("\x01")


# ---------------------------------------------------------------------------- B05 unescaped quotes


def test_unescaped_quotes_in_a_python_frame_name(tmp_path):
    frame = 'torch/_dynamo/{"co_filename": "x"}.py(3): fn'
    bad = ('{"ph": "X", "cat": "python_function", "name": "' + frame + '", "pid": 11, "tid": 12, '
           '"ts": 101.500, "dur": 1.000, "args": {"Python id": 5}}')
    text = trace_text([STEP, OP, bad, RT, KERNEL])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    assert frame in set(tr.events["name"])
    assert tr.category_counts()["python_function"] == 1
    it = issue(tr, "unescaped_quotes")
    assert (it.action, it.count, it.offset) == ("repaired", 1, text.index(bad))
    err = strict_error(p)
    assert text.index(bad) < err.offset < text.index(bad) + len(bad)


def test_unrepairable_event_is_dropped_and_the_rest_kept(tmp_path):
    bad = '{"ph": "X", "cat": "cpu_op", "name": "broken", "pid": 11, "tid": 12 "ts": 1.0, "dur": }'
    text = trace_text([STEP, OP, bad, RT, KERNEL])
    tr = nbprof.load(write(tmp_path, text))
    assert len(tr.events) == 4 and "broken" not in set(tr.events["name"])
    it = issue(tr, "unparseable_event")
    assert (it.action, it.count, it.offset) == ("dropped", 1, text.index(bad))


# ---------------------------------------------------------------------------- bigint / encoding


def test_integers_above_64_bits(tmp_path):
    big = 123456789012345678901234567890
    bad = OP.replace('"External id": 7', f'"External id": {big}')
    text = trace_text([STEP, bad, RT, KERNEL])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    op = tr.events[tr.events["cat"] == "cpu_op"].iloc[0]
    # an id beyond 64 bits gets its own stable (negative) id, named in the report
    assert op["external_id"] < -1 and op["seq"] == 3
    it = issue(tr, "bigint_external_id")
    assert (it.action, it.count, it.offset) == ("repaired", 1, text.index(bad))
    assert f"'{big}' -> {op['external_id']}" in it.message
    assert strict_error(p).offset == text.index(bad)


def test_odd_pids_among_many_events_are_read_block_by_block(tmp_path):
    """Over 2 x 65536 events (ints read in blocks): a string pid (the profiler's own "Spans" row)
    and two pids above 64 bits in different blocks; every other pid exact, one report entry
    counting both big values, at the first one's offset."""
    n = 150_000
    big = 2**70
    ops = [OP.replace('"pid": 11', f'"pid": {i % 7}').replace('"ts": 101.000', f'"ts": {101 + i}.000')
           for i in range(n)]
    for i, pid in ((70_000, '"Spans"'), (80_000, big), (140_000, big)):
        ops[i] = ops[i].replace(f'"pid": {i % 7}', f'"pid": {pid}')
    text = trace_text([STEP, *ops])
    tr = nbprof.load(write(tmp_path, text))
    ev = tr.events[tr.events["cat"] == "cpu_op"].reset_index(drop=True)
    want = np.arange(n) % 7
    want[70_000] = -1  # the profiler's span lane: no process
    got = ev["pid"].to_numpy()
    want[[80_000, 140_000]] = got[80_000]  # the same big value: the same id of its own
    assert got[80_000] < -1
    assert len(ev) == n and (got == want).all()
    it = issue(tr, "bigint_pid")
    assert (it.count, it.offset) == (2, text.index(ops[80_000]))
    assert it.message.startswith("2 values of 'pid'")


def test_unsigned_64_bit_address_keeps_its_bit_pattern(tmp_path):
    mem = MEM.replace('"Addr": 1000', '"Addr": 18446744073709551000')
    tr = nbprof.load(write(tmp_path, trace_text([STEP, OP, mem])))
    assert tr.memory["addr"].iloc[0] == 18446744073709551000 - 2**64
    assert tr.report.get("bigint_Addr") is None


def test_invalid_utf8_in_a_name(tmp_path):
    text = trace_text([STEP, OP.replace("aten::mm", "aten::m@m"), RT, KERNEL]).encode()
    data = text.replace(b"aten::m@m", b"aten::m\xff\xfem")
    p = write(tmp_path, data)
    tr = nbprof.load(p)
    assert "aten::m\ufffd\ufffdm" in set(tr.events["name"])
    assert len(tr.events) == 4
    it = issue(tr, "invalid_utf8")
    assert (it.action, it.count, it.offset) == ("repaired", 1, data.index(b"\xff"))
    assert strict_error(p).offset == data.index(b"\xff")


def test_invalid_utf8_after_another_defect_keeps_the_events_after_it(tmp_path):
    # fuzz seed 18 kineto:179: a NaN first (the first error names no UTF-8), then a surrogate in a
    # later event: that bulk decode failed with no byte offset and every later event was lost as
    # "truncated" (no drop reported)
    op2 = OP.replace('"Sequence number": 3', '"Sequence number": 3, "flops": NaN')
    text = trace_text([STEP, op2, RT.replace("cudaLaunchKernel", "cudaLaunch@"), KERNEL]).encode()
    data = text.replace(b"cudaLaunch@", b"cudaLaunch\xed\xa0\x80")
    tr = nbprof.load(write(tmp_path, data))
    assert list(tr.events["name"]) == ["ProfilerStep#1", "aten::mm", "cudaLaunch\ufffd\ufffd\ufffd", "gemm_kernel"]
    it = issue(tr, "invalid_utf8")
    assert (it.action, it.count, it.offset) == ("repaired", 1, data.index(b"\xed"))
    assert tr.report.get("truncated") is None and issue(tr, "nonfinite").count == 1


def test_bad_event_holding_an_array_of_objects_does_not_end_the_events(tmp_path):
    # fuzz seed 3 kineto:34: the "}]" closing an array of objects inside a bad event was taken for the
    # end of traceEvents: every later event vanished unreported
    bad = STEP.replace('"ts": 100.000', '"ts": [[], {"ph": Infinity}]')
    text = trace_text([OP, bad, RT, KERNEL])
    tr = nbprof.load(write(tmp_path, text))
    assert list(tr.events["name"]) == ["aten::mm", "cudaLaunchKernel", "gemm_kernel"]
    it = issue(tr, "unparseable_event")
    assert (it.action, it.count, it.offset) == ("dropped", 1, text.encode().index(bad.encode()))
    assert tr.report.get("metadata_partial") is None and tr.report.get("truncated") is None


# ---------------------------------------------------------------------------- type drift, durations


def test_string_typed_ts(tmp_path):
    bad = RT.replace('"ts": 103.000', '"ts": "103.250"')
    text = trace_text([STEP, OP, bad, KERNEL])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    assert tr.events.loc[tr.events["cat"] == "cuda_runtime", "ts_ns"].tolist() == [3_250]
    # a number written as a string is read exactly: an assumption, noted (strict mode loads it too)
    it = issue(tr, "string_ts")
    assert (it.action, it.count, it.offset) == ("assumed", 1, text.index(bad))
    assert "'103.250'" in it.message
    assert nbprof.load(p, strict=True).report.get("string_ts").count == 1


def test_events_without_a_usable_ts_are_dropped_and_the_rest_sorted(tmp_path):
    """An op without "ts" and one with "ts": null, among events written out of time order: both
    dropped (one report entry at the first one's offset), the others kept in time order."""
    late = OP.replace('"ts": 101.000', '"ts": 140.000').replace("aten::mm", "aten::late")
    no_ts = OP.replace('"ts": 101.000, ', "").replace("aten::mm", "aten::no_ts")
    null_ts = OP.replace('"ts": 101.000', '"ts": null').replace("aten::mm", "aten::null_ts")
    text = trace_text([STEP, late, no_ts, OP, null_ts, RT])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    assert tr.events["name"].astype(str).tolist() == ["ProfilerStep#1", "aten::mm", "cudaLaunchKernel", "aten::late"]
    assert tr.events["ts_ns"].tolist() == [0, 1_000, 3_000, 40_000]
    it = issue(tr, "missing_ts")
    assert (it.action, it.count, it.offset) == ("dropped", 2, text.index(no_ts))
    assert strict_error(p).offset == text.index(no_ts)


def test_negative_and_minus_one_durations(tmp_path):
    a = OP.replace('"dur": 10.500', '"dur": -1')
    b = RT.replace('"dur": 2.000', '"dur": -0.250')
    text = trace_text([STEP, a, b, KERNEL])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    assert tr.events["dur_ns"].min() == 0
    assert tr.events.loc[tr.events["cat"].isin(["cpu_op", "cuda_runtime"]), "dur_ns"].tolist() == [0, 0]
    it = issue(tr, "negative_dur")
    assert (it.action, it.count, it.offset) == ("repaired", 2, text.index(a))
    assert strict_error(p).offset == text.index(a)


def test_overlapping_same_stream_kernels_are_flagged_and_never_double_counted(tmp_path):
    k2 = KERNEL.replace('"ts": 110.000, "dur": 5.000', '"ts": 112.000, "dur": 8.000').replace("gemm_kernel", "k2")
    k3 = KERNEL.replace('"ts": 110.000, "dur": 5.000', '"ts": 113.000, "dur": 1.000').replace("gemm_kernel", "k3")
    tr = nbprof.load(write(tmp_path, trace_text([STEP, OP, RT, KERNEL, k2, k3])))
    k = tr.events[tr.events["cat"] == "kernel"]
    assert k["dur_ns"].tolist() == [5_000, 8_000, 1_000]  # kept as recorded
    it = issue(tr, "overlapping_device_ops")
    assert (it.action, it.count) == ("flagged", 2)
    assert "4000 ns overlap" in it.message  # k2 overlaps gemm by 3 µs, k3 lies inside k2 (1 µs)
    from nbprof.analysis.utilization import gpu_utilization

    u = gpu_utilization(tr)
    assert u["busy_ns"].tolist() == [10_000]  # union [110, 120] µs, not 5 + 8 + 1
    # overlap is how the device recorded it, not a defect: strict mode loads it too
    assert "overlapping_device_ops" in nbprof.load(write(tmp_path, trace_text([STEP, OP, RT, KERNEL, k2]), "s.json"),
                                                   strict=True).report.kinds()


# ---------------------------------------------------------------------------- missing fields


def test_rank_from_distributed_info_file_name_or_assumed(tmp_path):
    with_info = HEAD.replace('"schemaVersion": 1,', '"schemaVersion": 1,\n  "distributedInfo": {"backend": "nccl", "rank": 5, "world_size": 8},')
    tr = nbprof.load(write(tmp_path, trace_text(BASE_EVENTS, head=with_info), "rank-2.json"))
    assert (tr.rank, tr.meta.world_size, tr.meta.rank_source) == (5, 8, "distributedInfo")
    assert "rank_assumed" not in tr.report.kinds()
    tr = nbprof.load(write(tmp_path, trace_text(BASE_EVENTS), "job_rank-3.Jul_15.pt.trace.json"))
    assert (tr.rank, tr.meta.rank_source) == (3, "filename")
    assert issue(tr, "rank_from_filename").action == "assumed"
    tr = nbprof.load(write(tmp_path, trace_text(BASE_EVENTS), "worker0.1623143089861.pt.trace.json"))
    assert (tr.rank, tr.meta.rank_source) == (0, "assumed")
    assert issue(tr, "rank_assumed").message.endswith("rank assumed 0")
    assert (tr.events["rank"] == 0).all()
    nbprof.load(write(tmp_path, trace_text(BASE_EVENTS), "w.json"), strict=True)  # an assumption never raises


def test_no_profiler_step(tmp_path):
    tr = nbprof.load(write(tmp_path, trace_text([OP, RT, KERNEL])))
    assert tr.steps == [] and (tr.events["step"] == -1).all()
    assert issue(tr, "no_steps").action == "assumed"


@pytest.mark.parametrize("text,offset,words", [
    ("", 0, "empty"),
    ("  \n", 0, "empty"),
    ('{"traceEvents": []}', 16, "no events"),
    ('{"schemaVersion": 1, "traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "x"}}]}', 36, "no events"),
    ('{"schemaVersion": 1}', 0, "traceEvents"),
    ("[]", 0, "no events"),
    ("hello", 0, "not a JSON trace"),
], ids=["zero-bytes", "whitespace", "empty-array", "metadata-only", "no-traceEvents", "empty-bare-array", "not-json"])
def test_empty_traces_raise_a_clear_error(tmp_path, text, offset, words):
    p = write(tmp_path, text)
    for strict in (False, True):
        with pytest.raises(TraceFormatError) as ei:
            nbprof.load(p, strict=strict)
        assert ei.value.path == str(p) and ei.value.offset == offset and words in ei.value.reason


# ---------------------------------------------------------------------------- container shape, key order, units


def test_bare_top_level_array_legacy_autograd_format(tmp_path):
    legacy = ('[{"name": "aten::add", "ph": "X", "ts": 10, "dur": 4, "tid": 0, "pid": "CPU functions", "args": {}}, '
              '{"name": "aten::mul", "ph": "X", "ts": 20, "dur": 6, "tid": 0, "pid": "CPU functions", "args": {}}]')
    tr = nbprof.load(write(tmp_path, legacy))
    assert tr.events[["name", "cat", "ts_ns", "dur_ns", "pid"]].values.tolist() == [
        ["aten::add", "cpu_op", 0, 4_000, -1], ["aten::mul", "cpu_op", 10_000, 6_000, -1]]
    assert issue(tr, "legacy_cpu_functions").count == 2
    assert tr.meta.origin_ns is None  # relative µs and no baseTimeNanoseconds: no absolute origin


def test_metadata_after_trace_events_key_order_does_not_matter(tmp_path):
    before = nbprof.load(write(tmp_path, trace_text(BASE_EVENTS, head=HEAD.replace(
        '"schemaVersion": 1,', '"schemaVersion": 1,\n  "distributedInfo": {"rank": 1, "world_size": 2},')), "a.json"))
    after = nbprof.load(write(tmp_path, trace_text(
        BASE_EVENTS, head='{"traceEvents": [\n',
        tail='\n], "distributedInfo": {"rank": 1, "world_size": 2}, "baseTimeNanoseconds": 1700000000000000000, '
             '"deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "schemaVersion": 1}'), "b.json"))
    assert after.rank == before.rank == 1 and after.meta.world_size == 2
    assert after.meta.origin_ns == before.meta.origin_ns == 1700000000000000000 + 100_000
    assert after.meta.schema_version == 1 and after.meta.device_properties[0]["name"] == "NVIDIA H100"
    assert after.events.equals(before.events)


def test_display_time_unit_ns_does_not_rescale(tmp_path):
    head = HEAD.replace('"schemaVersion": 1,', '"schemaVersion": 1,\n  "displayTimeUnit": "ns",')
    tr = nbprof.load(write(tmp_path, trace_text(BASE_EVENTS, head=head)))
    assert tr.meta.extra["displayTimeUnit"] == "ns"
    assert tr.events.loc[tr.events["cat"] == "cpu_op", "dur_ns"].tolist() == [10_500]  # ts/dur stay µs


def test_absolute_microsecond_timestamps_keep_nanoseconds(tmp_path):
    # old traces: absolute µs since the epoch with 3 decimals; float64 steps there are 0.25 µs
    a = STEP.replace('"ts": 100.000', '"ts": 1712195495519689.047')
    b = OP.replace('"ts": 101.000', '"ts": 1712195495519695.812')
    c = RT.replace('"ts": 103.000', '"ts": 1712195495519695.813')
    tr = nbprof.load(write(tmp_path, trace_text([a, b, c], head='{"traceEvents": [\n')))
    assert tr.events["ts_ns"].tolist() == [0, 6_765, 6_766]
    assert tr.meta.origin_ns == 1712195495519689047
    assert 1712195495519695.812 == 1712195495519695.813  # why the exact path is needed


def test_strict_mode_clean_trace_loads(tmp_path):
    with_info = HEAD.replace('"schemaVersion": 1,', '"schemaVersion": 1,\n  "distributedInfo": {"rank": 0},')
    tr = nbprof.load(write(tmp_path, trace_text(BASE_EVENTS, head=with_info)), strict=True)
    assert tr.report.clean and len(tr.events) == 4


def test_counters_are_read(tmp_path):
    c = '{"ph": "C", "name": "gpu_util", "pid": 0, "ts": 105.0, "args": {"util": 87.5, "sm": 3}}'
    tr = nbprof.load(write(tmp_path, trace_text(BASE_EVENTS + [c])))
    assert tr.counters[["ts_ns", "name", "series", "value"]].values.tolist() == [
        [5_000, "gpu_util", "util", 87.5], [5_000, "gpu_util", "sm", 3.0]]


def test_generator_and_loader_smoke(tmp_path):
    """benchmarks/gen_kineto.py output loads with exactly the counts it says it wrote."""
    import importlib.util
    import pathlib

    spec = importlib.util.spec_from_file_location(
        "gen_kineto", pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gen_kineto.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    p = tmp_path / "g.pt.trace.json.gz"
    counts = gen.generate(str(p), 300, steps=3)
    tr = nbprof.load(p)
    cc = tr.category_counts()
    assert (cc["python_function"], cc["cpu_op"], cc["cuda_runtime"], cc["kernel"], cc["user_annotation"]) == (
        counts["python_function"], counts["cpu_op"], counts["cuda_runtime"], counts["kernel"], counts["steps"])
    assert len(tr.flows) == counts["ac2g"] // 2 and (tr.flows["dst_ts_ns"] >= 0).all()
    assert len(tr.memory) == counts["memory"]
    assert tr.steps == [0, 1, 2] and (tr.events["step"] >= 0).all()
    assert tr.report.clean and tr.rank == 0 and tr.meta.world_size == 8
    assert np.isclose(tr.events.loc[tr.events["cat"] == "kernel", "occupancy_ratio"].max(), 1.0)


def test_events_of_phases_kineto_does_not_write_are_reported(tmp_path):
    # no "ph" at all, a phase outside the Trace Event Format ("Z") and a valid but unsupported one ("B")
    no_ph = '{"cat": "cpu_op", "name": "b", "pid": 11, "tid": 12, "ts": 102.000, "dur": 2.000}'
    bogus = '{"ph": "Z", "cat": "cpu_op", "name": "c", "pid": 11, "tid": 12, "ts": 103.000, "dur": 2.000}'
    begin = '{"ph": "B", "cat": "cpu_op", "name": "d", "pid": 11, "tid": 12, "ts": 104.000}'
    tr = nbprof.load(write(tmp_path, trace_text([STEP, OP, no_ph, bogus, begin])))
    assert tr.events["name"].tolist() == ["ProfilerStep#1", "aten::mm"]
    it = issue(tr, "unsupported_phase")
    assert (it.action, it.count) == ("dropped", 3)
    assert "phase , B, Z" in it.message


def test_args_of_unexpected_types_are_ignored_for_that_event_only(tmp_path):
    bad = ('{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 11, "tid": 12, "ts": 102.000, '
           '"dur": 1.000, "args": {"External id": [8], "Sequence number": 4}}')
    text = trace_text([STEP, OP, bad, RT, KERNEL])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    it = issue(tr, "bad_args")
    assert (it.action, it.count, it.offset) == ("repaired", 1, text.index(bad))
    ops = tr.events[tr.events["cat"] == "cpu_op"].set_index("name")
    assert (ops.loc["aten::add", "external_id"], ops.loc["aten::add", "seq"]) == (-1, -1)  # its args dropped
    assert (ops.loc["aten::mm", "external_id"], ops.loc["aten::mm", "seq"]) == (7, 3)  # the others kept
    assert strict_error(p).offset == text.index(bad)
