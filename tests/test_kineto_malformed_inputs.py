"""Issue 18 (Kineto part): the smallest real-derived input for each defect, its recovered values and
its load-report entry (kind, action, count, byte offset); strict mode raises ``TraceFormatError``
at that offset. The events are the base trace of ``test_kineto_bad_inputs`` (a step, an operator, a
[memory] instant, a launch with its flow and the kernel it launched)."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
from test_kineto_bad_inputs import (
    BASE_EVENTS,
    FLOW_F,
    FLOW_S,
    KERNEL,
    MEM,
    OP,
    RT,
    STEP,
    issue,
    strict_error,
    trace_text,
    write,
)

import nbprof
from nbprof.errors import NbprofError, TraceFormatError
from nbprof.trace import steps
from nbprof.trace.model import LoadReport


def _names(tr) -> list[str]:
    return sorted(tr.events["name"].astype(str))


BASE_NAMES = ["ProfilerStep#1", "aten::mm", "cudaLaunchKernel", "gemm_kernel"]


# ---------------------------------------------------------------------------- A1: elements that are not events


@pytest.mark.parametrize("stray", ["1", "null", "[]", '"x"'])
def test_one_non_object_element_drops_only_itself(tmp_path, stray):
    text = trace_text([STEP, OP, stray, RT, KERNEL])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    assert _names(tr) == BASE_NAMES  # both neighbours kept
    at = text.index(",\n" + stray + ",") + 2
    it = issue(tr, "not_an_event")
    assert (it.action, it.count, it.offset) == ("dropped", 1, at)
    assert tr.report.get("unparseable_event") is None and tr.report.get("truncated") is None
    err = strict_error(p)
    assert err.offset == at and err.event_index == 2


def test_many_non_object_elements_and_one_last(tmp_path):
    text = trace_text([STEP, "1", OP, "2", "3", RT, "null", KERNEL, MEM, "4"])
    tr = nbprof.load(write(tmp_path, text))
    assert _names(tr) == BASE_NAMES and len(tr.memory) == 1
    it = issue(tr, "not_an_event")
    assert (it.count, it.offset) == (5, text.index(",\n1,") + 2)
    assert it.message.startswith("5 elements")
    assert tr.report.get("truncated") is None  # the array is complete
    assert tr.meta.extra.get("traceName") == "t.json"  # the metadata after the events is read


def test_non_object_elements_around_a_repaired_event(tmp_path):
    """A stray element before an event that needs a repair (NaN) and another after it: every event
    kept, the repair and the two drops each reported at their own offset."""
    nan = OP.replace('"dur": 10.500', '"dur": NaN')
    text = trace_text([STEP, "1", nan, "[]", RT, KERNEL])
    tr = nbprof.load(write(tmp_path, text))
    assert _names(tr) == BASE_NAMES
    assert (issue(tr, "not_an_event").count, issue(tr, "not_an_event").offset) == (2, text.index(",\n1,") + 2)
    assert issue(tr, "nonfinite").offset == text.index(nan)


def _big_trace(n: int) -> list[str]:
    return [STEP.replace('"dur": 50.000', f'"dur": {n + 100}.000')] + [
        OP.replace('"ts": 101.000', f'"ts": {101 + i}.000').replace('"External id": 7', f'"External id": {i + 10}')
        for i in range(n)]


def test_non_object_element_last_loads_in_linear_time(tmp_path):
    """1 MB with a stray element last took 9.7 s (quadratic) and was reported truncated."""
    evs = _big_trace(5000)
    clean, stray = write(tmp_path, trace_text(evs), "clean.json"), write(tmp_path, trace_text([*evs, "1"]), "stray.json")
    assert stray.stat().st_size > 900_000

    def best(p):
        t = []
        for _ in range(3):
            a = time.perf_counter()
            tr = nbprof.load(p)
            t.append(time.perf_counter() - a)
        return min(t), tr

    t_clean, _ = best(clean)
    t_stray, tr = best(stray)
    assert len(tr.events) == 5001
    it = issue(tr, "not_an_event")
    assert it.count == 1 and it.offset == stray.read_text().rindex("1\n  ]")
    assert tr.report.get("truncated") is None
    assert t_stray < 10 * t_clean + 0.5, (t_stray, t_clean)


def test_non_object_element_two_processes_equal_one(tmp_path, monkeypatch):
    p = write(tmp_path, trace_text([*_big_trace(3000)[:1500], "[]", *_big_trace(3000)[1500:]]))
    monkeypatch.setenv("NBPROF_LOAD_PROCESSES", "1")
    one = nbprof.load(p)
    monkeypatch.setenv("NBPROF_LOAD_PROCESSES", "2")
    two = nbprof.load(p)
    pd.testing.assert_frame_equal(one.events, two.events)
    assert [(i.kind, i.count, i.offset) for i in one.report.issues] == [(i.kind, i.count, i.offset) for i in two.report.issues]
    assert one.report.get("not_an_event").count == 1 and len(one.events) == 3001


# ---------------------------------------------------------------------------- A2: ts far outside the trace


ABS_HEAD = '{\n  "schemaVersion": 1,\n  "traceEvents": [\n'


def _absolute(ev: str) -> str:
    """The event in absolute µs since the epoch (pre-2022 traces, no baseTimeNanoseconds)."""
    return ev.replace('"ts": 1', '"ts": 17121954955191')


def test_kernel_with_ts_zero_in_an_absolute_trace(tmp_path):
    """pytorch/kineto#109: kernels with "ts": 0 made a 51-year trace and ~0 GPU utilisation."""
    zero = KERNEL.replace('"ts": 110.000', '"ts": 0')
    evs = [_absolute(e) for e in (STEP, OP, RT, FLOW_S, KERNEL)] + [zero]
    text = trace_text(evs, head=ABS_HEAD)
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    assert len(tr.events) == 4 and (tr.events["cat"] == "kernel").sum() == 1
    assert tr.events["ts_ns"].max() - tr.events["ts_ns"].min() < 10**6  # µs, not 51 years
    assert tr.meta.origin_ns == 17121954955191_00 * 1000
    it = issue(tr, "ts_outlier")
    assert (it.action, it.count, it.offset) == ("dropped", 1, text.index(zero))
    assert "1 day from the median" in it.message
    assert strict_error(p).offset == text.index(zero)


def test_an_outlier_beyond_int64_ns_is_dropped_without_a_cast_warning(tmp_path):
    # fuzz seed 18 kineto:179: a dropped outlier ts (2**64 µs) still went through the int64 ns cast
    # ("RuntimeWarning: invalid value encountered in cast")
    import warnings

    huge = OP.replace('"ts": 101.000', '"ts": 18446744073709551616')
    text = trace_text([STEP, huge, RT, KERNEL])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = nbprof.load(write(tmp_path, text))
    assert tr.events["name"].tolist() == ["ProfilerStep#1", "cudaLaunchKernel", "gemm_kernel"]
    assert tr.events["ts_ns"].tolist() == [0, 3000, 10000]
    it = issue(tr, "ts_outlier")
    assert (it.action, it.count, it.offset) == ("dropped", 1, text.index(huge))


def test_flow_and_memory_with_ts_zero_leave_their_tables(tmp_path):
    evs = [_absolute(e) for e in BASE_EVENTS]
    evs[2] = evs[2].replace('"ts": 1712195495519102.000', '"ts": 0')  # the [memory] instant
    evs[6] = evs[6].replace('"ts": 1712195495519110.000', '"ts": 0')  # the flow finish
    tr = nbprof.load(write(tmp_path, trace_text(evs, head=ABS_HEAD)))
    assert len(tr.memory) == 0 and tr.flows["dst_ts_ns"].tolist() == [-1]
    assert issue(tr, "ts_outlier").count == 2


# ---------------------------------------------------------------------------- A3: string ids


def test_distinct_string_ids_stay_distinct_and_are_reported(tmp_path):
    a = OP.replace('"pid": 11', '"pid": "simd_A"')
    b = RT.replace('"pid": 11', '"pid": "simd_B"')
    fs = FLOW_S.replace('"id": 42', '"id": "a1"')
    ff = FLOW_F.replace('"id": 42', '"id": "b1"')
    text = trace_text([STEP, a, b, fs, KERNEL, ff])
    tr = nbprof.load(write(tmp_path, text))
    ev = tr.events.set_index("name")
    assert ev.loc["aten::mm", "pid"] != ev.loc["cudaLaunchKernel", "pid"]
    assert min(ev.loc["aten::mm", "pid"], ev.loc["cudaLaunchKernel", "pid"]) < -1
    assert len(tr.flows) == 2 and (tr.flows["dst_ts_ns"] < 0).sum() == 1  # "a1" and "b1" do not pair
    it = issue(tr, "string_id_pid")
    assert (it.action, it.count, it.offset) == ("repaired", 2, text.index(a))
    assert f"'simd_A' -> {ev.loc['aten::mm', 'pid']}" in it.message
    assert issue(tr, "string_id_flow id").count == 2
    # the same text has the same id in another file (stable)
    again = nbprof.load(write(tmp_path, trace_text([STEP, a]), "again.json"))
    assert again.events.set_index("name").loc["aten::mm", "pid"] == ev.loc["aten::mm", "pid"]


def test_numbers_written_as_strings_are_read_and_noted(tmp_path):
    """Kineto 2021 wrote tids as strings: "25738", and "stream 7" for GPU rows."""
    op = OP.replace('"tid": 12', '"tid": "25738"')
    k = KERNEL.replace('"tid": 7', '"tid": "stream 7"').replace('"stream": 7, ', "")
    text = trace_text([STEP, op, RT, k])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    ev = tr.events.set_index("name")
    assert ev.loc["aten::mm", "tid"] == 25738 and ev.loc["gemm_kernel", "stream"] == 7
    it = issue(tr, "string_tid")
    assert (it.action, it.count, it.offset) == ("assumed", 2, text.index(op))
    assert tr.report.clean and nbprof.load(p, strict=True).report.get("string_tid") is not None


def test_kineto_span_lanes_have_no_process(tmp_path):
    span = ('{"ph": "X", "cat": "Trace", "ts": 100.000, "dur": 60.000, "pid": "Spans", "tid": "PyTorch Profiler", '
            '"name": "PyTorch Profiler (0)", "args": {"Op count": 0}}')
    tr = nbprof.load(write(tmp_path, trace_text([span, *BASE_EVENTS])))
    row = tr.events[tr.events["name"] == "PyTorch Profiler (0)"].iloc[0]
    assert (row["pid"], row["tid"]) == (-1, -1)
    assert tr.report.kinds() == {"rank_assumed"}


def test_ids_above_2_63_are_noted_or_reported(tmp_path):
    rt = RT.replace('"correlation": 42', f'"correlation": {2**64 - 5}')
    k = KERNEL.replace('"correlation": 42', f'"correlation": {2**64 - 5}')
    text = trace_text([STEP, OP, rt, k])
    tr = nbprof.load(write(tmp_path, text))
    assert (tr.events.loc[tr.events["name"] == "gemm_kernel", "correlation"] == -5).all()  # bit pattern
    assert tr.events.loc[tr.events["name"] == "gemm_kernel", "step"].tolist() == [1]
    it = issue(tr, "u64_correlation")
    assert (it.action, it.count, it.offset) == ("assumed", 2, text.index(rt))


# ---------------------------------------------------------------------------- encoding, structure


def test_utf8_bom_is_accepted_and_reported(tmp_path):
    data = b"\xef\xbb\xbf" + trace_text(BASE_EVENTS).encode()
    p = write(tmp_path, data)
    tr = nbprof.load(p)
    assert _names(tr) == BASE_NAMES
    it = issue(tr, "utf8_bom")
    assert (it.action, it.count, it.offset) == ("repaired", 1, 0)
    assert strict_error(p).offset == 0


def test_deep_nesting_drops_that_event(tmp_path):
    deep = OP.replace('"name": "aten::mm"', '"name": "deep"').replace('"Input Dims": [[4, 8], [8, 2]]',
                                                                      '"x": ' + "[" * 5000 + "]" * 5000)
    text = trace_text([STEP, OP, deep, RT, KERNEL])
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    assert _names(tr) == BASE_NAMES
    it = issue(tr, "unparseable_event")
    assert (it.action, it.count, it.offset) == ("dropped", 1, text.index(deep))
    err = strict_error(p)
    assert text.index(deep) < err.offset < text.index(deep) + len(deep) and "nested" in err.reason


def test_deep_nesting_in_metadata_is_a_trace_format_error(tmp_path):
    text = trace_text(BASE_EVENTS, head='{"deviceProperties": ' + "[" * 5000 + "]" * 5000 + ',\n "traceEvents": [\n')
    try:
        tr = nbprof.load(write(tmp_path, text))
    except NbprofError as exc:
        assert isinstance(exc, TraceFormatError)
    else:
        assert _names(tr) == BASE_NAMES and not tr.report.clean


def test_bytes_after_the_document_are_reported(tmp_path):
    text = trace_text(BASE_EVENTS) + "garbage{}"
    p = write(tmp_path, text)
    tr = nbprof.load(p)
    assert _names(tr) == BASE_NAMES and tr.meta.extra["traceName"] == "t.json"
    it = issue(tr, "trailing_bytes")
    assert (it.action, it.count, it.offset) == ("dropped", 9, text.index("garbage"))
    assert strict_error(p).offset == text.index("garbage")


def test_strict_messages_carry_one_offset(tmp_path):
    bad = OP.replace('"dur": 10.500', '"dur": NaN')
    text = trace_text([STEP, bad, RT, KERNEL])
    err = strict_error(write(tmp_path, text))
    assert "(byte" not in err.reason and "(byte" not in str(err).split(": ", 1)[1]
    assert text.index(bad) < err.offset < text.index(bad) + len(bad)


# ---------------------------------------------------------------------------- steps, rank


GPU_STEP = ('{"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#4", "pid": 0, "tid": 7, "ts": 109.000, '
            '"dur": 8.000, "args": {"External id": 1, "device": 0, "stream": 7}}')


def test_profiler_step_only_on_the_device(tmp_path):
    tr = nbprof.load(write(tmp_path, trace_text([OP, RT, FLOW_S, GPU_STEP, KERNEL, FLOW_F])))
    ev = tr.events.set_index("name")
    assert ev.loc["gemm_kernel", "step"] == 4 and ev.loc["aten::mm", "step"] == -1
    it = issue(tr, "steps_from_device")
    assert (it.action, it.count) == ("assumed", 1)


def test_rank_beyond_int32_is_ignored_and_reported(tmp_path):
    head = '{"distributedInfo": {"rank": 2147483648, "world_size": 4294967296}, "traceEvents": [\n'
    tr = nbprof.load(write(tmp_path, trace_text(BASE_EVENTS, head=head)))
    assert tr.rank == 0 and tr.meta.world_size == 1
    assert issue(tr, "rank_invalid").action == "assumed" and issue(tr, "world_size_invalid").count == 1


def test_step_number_and_assign_steps_for_another_source():
    assert steps.step_number("ProfilerStep#12") == 12 and steps.step_number("ProfilerStep # 3") == 3
    assert steps.step_number("aten::mm") is None and steps.step_number(None) is None
    # an nsys-like source: ranges per process, device rows by correlation
    ev = pd.DataFrame({"ts_ns": [5, 15, 25, 16, 40], "pid": [1, 1, 2, 2, 0], "device": [-1, -1, -1, -1, 0],
                       "correlation": [-1, 7, -1, -1, 7]})
    ranges = pd.DataFrame({"step": [0, 1, 9], "start_ns": [0, 10, 10], "end_ns": [10, 20, 30], "pid": [1, 1, 2]})
    steps.assign_steps(ev, ranges)
    assert ev["step"].tolist() == [0, 1, 9, 9, 1]  # the kernel at 40 ns: its launch's step


# ---------------------------------------------------------------------------- LoadReport.add


def test_merged_report_issue_states_the_merged_count():
    r = LoadReport()
    r.add("bad_args", "repaired", 1, "1 events had args of unexpected types", offset=10)
    r.add("bad_args", "repaired", 3, "3 events had args of unexpected types", offset=99)
    it = r.get("bad_args")
    assert (it.count, it.offset, it.message) == (4, 10, "4 events had args of unexpected types")
    r.add("no_steps", "assumed", 0, "no ProfilerStep#N events")
    r.add("no_steps", "assumed", 0, "no ProfilerStep#N events")
    assert r.get("no_steps").message == "no ProfilerStep#N events"


def test_bad_args_in_several_groups_report_the_total(tmp_path):
    op = OP.replace('"Sequence number": 3', '"Sequence number": [3]')
    k = KERNEL.replace('"device": 0', '"device": [0]')
    text = trace_text([STEP, op, RT, k])
    it = issue(nbprof.load(write(tmp_path, text)), "bad_args")
    assert (it.count, it.offset) == (2, text.index(op)) and it.message.startswith("2 events")
    json.loads(text)  # the input is valid JSON: only the types are off
    assert np.isfinite(0)
