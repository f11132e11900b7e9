"""``with nbprof.profile(...) as p:`` / ``nbprof.step()`` for scripts, and the result object."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

import nbprof  # noqa: E402
from nbprof.analysis.operators import operator_summary  # noqa: E402
from nbprof.capture.torch_profiler import ProfileOptions, active_session, unique_path  # noqa: E402
from nbprof.result import ProfileResult, resolve_sort_key  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cnn():
    pytest.importorskip("sklearn")
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import train_cnn
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return train_cnn


def test_training_loop_with_step(cnn, tmp_path):
    out = tmp_path / "train.pt.trace.json.gz"
    with nbprof.profile(record_shapes=True, profile_memory=True, warmup=1, trace=out) as p:
        assert isinstance(p, ProfileResult) and p.running and active_session() is not None
        cnn.train(steps=4, batch_size=32, step_callback=nbprof.step)
    assert active_session() is None and not p.running
    assert p.steps_run == 5  # 4 step() calls + the step open at exit
    # step 0 was the warm-up; like torch, the step opened by the last step() call is recorded
    # (here empty, since train() calls step() at the end of each iteration)
    assert p.trace.steps == [1, 2, 3, 4]
    assert p.paths == [out] and p.trace_files == [out]
    ops = p.operators().set_index("name")
    assert ops.loc["aten::conv2d", "count"] == 6
    ev = p.trace.events
    assert (ev[ev["name"] == "aten::conv2d"]["step"] == 4).sum() == 0
    # the result's analyses are those of nbprof.load on the exported file
    pd.testing.assert_frame_equal(operator_summary(nbprof.load(out)), p.operators())
    assert "aten::conv2d" in p._repr_mimebundle_()["text/html"]


def test_profiler_passed_to_train_like_torch(cnn):
    # examples/train_cnn.py calls profiler.step(): the result object offers the same method
    with nbprof.profile(active=2) as p:
        cnn.train(steps=3, batch_size=16, profiler=p)
    assert p.trace.steps == [0, 1]
    with pytest.raises(RuntimeError, match="not running"):
        p.step()


def test_step_outside_a_profile_is_a_no_op():
    assert active_session() is None
    nbprof.step()  # no error, nothing to step


def test_exception_is_reraised_after_saving(tmp_path):
    out = tmp_path / "boom.json"
    a = torch.randn(16, 16)
    with pytest.raises(ZeroDivisionError), nbprof.profile(trace=out) as p:
        torch.mm(a, a)
        p.step()
        torch.mm(a, a)
        1 / 0
    assert isinstance(p.exception, ZeroDivisionError)
    assert out.exists() and p.trace.steps == [0, 1]
    assert (nbprof.load(out).events["name"] == "aten::mm").sum() == 2
    assert "raised ZeroDivisionError" in p.summary()


def test_nothing_recorded_during_wait():
    with nbprof.profile(wait=5, active=1) as p:
        torch.ones(3)
    assert p.traces == [] and p.trace_files == []
    assert any("nothing was recorded" in n for n in p.notes)
    with pytest.raises(LookupError, match="nothing was recorded"):
        p.trace
    assert "nothing recorded" in repr(p) and "<table" not in p._repr_html_()


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"activities": "tpu"}, ValueError, "unknown activity"),
        ({"bogus": 1}, TypeError, "unknown option"),
        ({"trace": "x.txt"}, ValueError, r"\.json or \.json\.gz"),
        ({"sort_by": "nope"}, ValueError, "unknown sort key"),
        ({"wait": -1}, ValueError, "wait must be >= 0"),
        ({"active": 0}, ValueError, "active must be >= 1"),
        ({"group_by": "module"}, ValueError, "unknown group_by"),
    ],
)
def test_bad_options(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        nbprof.profile(**kwargs)


def test_options_normalise_activities():
    o = ProfileOptions(activities=("CPU, cuda", "cpu")).validated()
    assert o.activities == ("cpu", "cuda")
    assert ProfileOptions(steps=5, wait=1, warmup=1).schedule_args() == {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}


def test_sort_keys_follow_torch():
    assert resolve_sort_key("cuda_time_total") == "total_device_ns"
    assert resolve_sort_key("self_cuda_time_total") == "self_device_ns"
    assert resolve_sort_key("self_cpu_time_total") == "self_host_ns"
    assert resolve_sort_key("cpu_time_total") == "total_host_ns"
    assert resolve_sort_key("count") == "count"
    assert resolve_sort_key("self_host_ns") == "self_host_ns"  # nbprof column names too


def test_unique_path(tmp_path):
    p = tmp_path / "run.pt.trace.json.gz"
    assert unique_path(p, tag="w.1") == p
    p.write_bytes(b"x")
    assert unique_path(p, tag="w.1") == tmp_path / "run.w.1.pt.trace.json.gz"
    assert unique_path(p, tag="w.1", force=True) == p
    assert unique_path(p, tag="w.1", force=True, taken={p.resolve()}) == tmp_path / "run.w.1.pt.trace.json.gz"
    (tmp_path / "run.w.1.pt.trace.json.gz").write_bytes(b"x")
    assert unique_path(p, tag="w.1") == tmp_path / "run.w.1.1.pt.trace.json.gz"
    q = tmp_path / "out.json"
    q.write_text("{}")
    assert unique_path(q, tag="t") == tmp_path / "out.t.json"


def test_save_never_overwrites(tmp_path):
    with nbprof.profile() as p:
        torch.ones(4).sum()
    dst = tmp_path / "saved.json"
    assert p.save(dst) == dst
    pd.testing.assert_frame_equal(operator_summary(nbprof.load(dst)), p.operators())
    assert "aten::sum" in set(p.operators()["name"])
    with pytest.raises(FileExistsError):
        p.save(dst)
    p.save(tmp_path / "saved.json.gz")
    pd.testing.assert_frame_equal(operator_summary(nbprof.load(tmp_path / "saved.json.gz")), p.operators())


def test_viewer_methods(tmp_path):
    pytest.importorskip("bokeh")
    pytest.importorskip("ipywidgets")
    with nbprof.profile(record_shapes=True) as p:
        torch.mm(torch.ones(8, 8), torch.ones(8, 8))
    import ipywidgets

    assert isinstance(p.dashboard(), ipywidgets.Widget)
    for method, kind in {"trace_view": "timeline", "operators_view": "operators", "memory_view": "memory"}.items():
        view = getattr(p, method)()
        assert isinstance(view, ipywidgets.Widget) and view.kind == kind, method
    assert "aten::mm" in p.operators_view().text
    page = tmp_path / "p.html"
    p.to_html(page)
    assert "aten::mm" in page.read_text()
    with pytest.raises(NotImplementedError, match=r"nbprof\.viz\.no_such_view is not available"):
        p._viz(("no_such_view",))


def test_temporary_trace_file_lives_as_long_as_its_trace():
    import gc

    with nbprof.profile() as p:
        torch.ones(3).sum()
    f = p.trace_files[0]
    assert p.paths == [] and f.exists()  # no output asked for: a temporary file
    trace = p.trace
    del p
    gc.collect()
    assert f.exists()
    del trace
    gc.collect()
    assert not f.exists()


def test_a_profile_is_entered_once():
    prof = nbprof.profile()
    with prof:
        torch.ones(2).sum()
    with pytest.raises(RuntimeError, match="entered once"), prof:
        pass
