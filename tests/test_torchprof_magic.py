"""``%%torchprof`` in a real IPython shell with real torch on the example CNN.

Every option is checked for an observable effect on the profile, the files or the display;
file outputs are read back by ``nbprof.load`` and by torch-tb-profiler's own parser.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from IPython.core.error import UsageError  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

import nbprof  # noqa: E402
from nbprof.analysis.operators import operator_summary  # noqa: E402
from nbprof.result import ProfileResult  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TRAIN_STEP = """\
x, y = next(it)
opt.zero_grad(set_to_none=True)
loss = loss_fn(model(x), y)
loss.backward()
opt.step()
"""
CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def ip():
    from IPython.testing import globalipapp

    globalipapp.start_ipython()  # once per process; other test modules may have started it
    shell = globalipapp.get_ipython()
    loaded_here = "nbprof" not in shell.extension_manager.loaded
    shell.run_line_magic("load_ext", "nbprof")
    res = shell.run_cell(
        f"import sys; sys.path.insert(0, {str(ROOT / 'examples')!r})\n"
        "import torch, nbprof\n"
        "from train_cnn import SmallCNN, make_loader\n"
        "torch.manual_seed(0)\n"
        "model = SmallCNN(); opt = torch.optim.SGD(model.parameters(), lr=0.05)\n"
        "loss_fn = torch.nn.CrossEntropyLoss()\n"
        "it = iter(make_loader(64, 0, None, 0.0))\n"
        "xb = torch.randn(8, 1, 16, 16)\n"
        "a = torch.randn(32, 32); b = torch.randn(32, 32)\n"
        "runs = 0\n"
    )
    res.raise_error()
    yield shell
    if loaded_here:
        shell.run_line_magic("unload_ext", "nbprof")


def tb_parse(path: Path):
    """torch-tb-profiler 0.4.3's own parse of one trace file (what its TensorBoard plugin shows)."""
    import tempfile

    from torch_tb_profiler.consts import WORKER_PATTERN
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    m = WORKER_PATTERN.match(path.name)
    assert m, f"{path.name} does not follow the tensorboard_trace_handler naming"
    worker, span = m.group(1), (m.group(2) or "")[1:] or None
    with tempfile.TemporaryDirectory() as cache:
        data = RunProfileData.parse(worker, span, str(path), cache)
        return data, RunGenerator(worker, span, data).generate_run_profile()


def body_rows(htm: str) -> int:
    return htm.split("<tbody>", 1)[1].split("</tbody>", 1)[0].count("<tr")


def magic(ip, line, cell="pass\n"):
    return ip.run_cell_magic("torchprof", line, cell)


# ------------------------------------------------------------------------- options and errors


def test_help_lists_every_option(ip):
    doc = ip.find_cell_magic("torchprof").__doc__
    for opt in ("--activities", "--record-shapes", "--profile-memory", "--with-stack", "--with-flops",
                "--with-modules", "--steps", "--wait", "--warmup", "--active", "--repeat", "--sort-by",
                "--row-limit", "--group-by", "--trace", "--tensorboard", "--force", "-o", "-q", "--var"):
        assert opt in doc, opt
    assert "cuda_time_total" in doc and "ProfilerActivity.GPU" in doc


@pytest.mark.parametrize(
    "line",
    [
        "--bogus",
        "--activities tpu",
        "--sort-by bogus_key",
        "--trace out.txt",
        "--steps 0",
        "--steps 2 --warmup 2",
        "--active 0",
        "--row-limit x",
        "--group-by module",
        "--var 1x",
        "stray_positional",
    ],
)
def test_bad_flags_raise_usage_error_before_running(ip, line):
    ip.user_ns["runs"] = 0
    with pytest.raises(UsageError):
        magic(ip, line, "runs += 1\n")
    assert ip.user_ns["runs"] == 0


def test_line_magic_needs_a_statement(ip):
    with pytest.raises(UsageError, match="needs a statement"):
        ip.run_line_magic("torchprof", "--record-shapes")


# ------------------------------------------------------------------------- the done-when cell


@pytest.fixture(scope="module")
def cnn(ip, tmp_path_factory):
    """``%%torchprof --steps 5 --record-shapes --profile-memory`` around one CNN training step."""
    d = tmp_path_factory.mktemp("cnn")
    line = f"--steps 5 --record-shapes --profile-memory -o --trace {d / 'cnn.json.gz'} --tensorboard {d / 'tb'}"
    with capture_output() as cap:
        r = magic(ip, line, TRAIN_STEP)
    return r, d, cap


def test_cnn_cell_profile(cnn):
    r, d, cap = cnn
    assert isinstance(r, ProfileResult)
    assert cap.outputs == []  # -o: the result is returned (Out[n]), not displayed twice
    assert r.steps_run == 5
    assert r.trace.steps == [0, 1, 2, 3, 4]
    ev = r.trace.events
    conv = ev[ev["name"] == "aten::conv2d"]
    assert len(conv) == 10  # two convolutions per step
    assert set(conv["input_dims"].astype(str)) >= {"[[64, 1, 16, 16], [16, 1, 3, 3], [16], [], [], [], []]"}
    assert len(r.trace.memory) > 100  # --profile-memory: allocation records
    ops = r.operators().set_index("name")
    assert ops.loc["aten::conv2d", "count"] == 10
    assert ops.loc["aten::conv2d", "host_mem_bytes"] > 0
    assert ops.loc["aten::convolution_backward", "self_host_ns"] > 0


def test_cnn_display_table_and_summary(cnn):
    r, _, _ = cnn
    bundle = r._repr_mimebundle_()
    text, htm = bundle["text/plain"], bundle["text/html"]
    assert "5 step(s) run, 5 recorded step(s) (#0-#4)" in text
    assert "top operators by cpu_time_total:" in text
    assert "<table" in htm and "aten::conv2d" in htm and "Self host (ms)" in htm
    assert "Host mem" in htm  # --profile-memory adds the memory columns
    assert body_rows(htm) == 20  # default --row-limit 20
    assert "showing 20 of" in htm


def test_cnn_outputs_equal_nbprof_load_and_tb_parser(cnn):
    r, d, _ = cnn
    trace_file = d / "cnn.json.gz"
    tb_files = sorted((d / "tb").glob("*.pt.trace.json*"))  # beside them: nbprof scalars (events.out.tfevents.*)
    assert r.paths == [tb_files[0], trace_file] and len(tb_files) == 1
    assert tb_files[0].name.endswith(".pt.trace.json") and tb_files[0].name.count(".") == 4
    assert gzip.decompress(trace_file.read_bytes()) == tb_files[0].read_bytes()
    mine = r.operators()
    for f in (trace_file, tb_files[0]):
        pd.testing.assert_frame_equal(operator_summary(nbprof.load(f)), mine)
    data, run = tb_parse(tb_files[0])
    assert data.steps_names == ["0", "1", "2", "3", "4"]
    assert {"Overview", "Operator", "Trace", "Memory"} <= {v.display_name for v in run.views}
    tb_ops = {row["name"]: row for row in run.operation_table_by_name["data"]}
    ops = mine.set_index("name")
    for name in ("aten::convolution_backward", "aten::mkldnn_convolution", "aten::addmm"):
        assert tb_ops[name]["calls"] == ops.loc[name, "count"]
        # tb-profiler works in whole µs: allow 1 µs per call
        assert abs(tb_ops[name]["host_self_duration"] * 1000 - ops.loc[name, "self_host_ns"]) <= 1000 * ops.loc[name, "count"]


# ------------------------------------------------------------------------- one option at a time


def test_stack_flops_modules(ip, tmp_path):
    out = tmp_path / "sfm.json"
    r = magic(ip, f"--with-stack --with-flops --with-modules -o --group-by stack --trace {out}",
              "model(xb).sum().backward()\n")
    ev = r.trace.events
    conv = ev[ev["name"] == "aten::conv2d"]
    # --with-stack: real call stacks (torch 2.13 needs the verbose experimental config)
    assert conv["call_stack"].astype(str).str.contains("_conv_forward").all()
    # --with-flops: 2*N*Cout*Hout*Wout*Cin*k*k for the two convolutions on an 8x1x16x16 batch
    assert conv["flops"].sum() == 2 * 8 * 16 * 16 * 16 * 1 * 9 + 2 * 8 * 8 * 8 * 32 * 16 * 9
    assert r.operators("name").set_index("name").loc["aten::conv2d", "flops"] == 5308416
    assert "FLOPs" in r._repr_html_()
    # --with-modules: nn.Module frames from the Python tracer
    py = ev[ev["cat"] == "python_function"]["name"].astype(str)
    assert py.str.startswith("nn.Module: Conv2d").sum() == 2
    # --group-by stack: the table is keyed by stack
    assert "stack" in r.table().columns and "Stack" in r._repr_html_()
    raw = json.loads(out.read_text())
    assert raw["with_stack"] == 1 or raw["with_stack"] is True
    # tb-profiler sees the call stacks too (its stack view needs them)
    renamed = tmp_path / "w.1.pt.trace.json"
    renamed.write_bytes(out.read_bytes())
    _, run = tb_parse(renamed)
    assert any(row["has_call_stack"] for row in run.operation_table_by_name["data"])


def test_without_flags_nothing_extra_is_recorded(cnn):
    r, _, _ = cnn
    ev = r.trace.events
    assert (ev["cat"] == "python_function").sum() == 0
    assert r.trace.events["call_stack"].isna().all()
    assert r.trace.events["flops"].isna().all()


def test_schedule_wait_warmup_active(ip):
    r = magic(ip, "--steps 5 --wait 1 --warmup 1 --active 2 -o", "torch.mm(a, b)\n")
    assert r.steps_run == 5
    assert r.trace.steps == [2, 3]
    assert r.operators().set_index("name").loc["aten::mm", "count"] == 2


def test_repeat_gives_one_gzip_file_per_cycle(ip, tmp_path):
    r = magic(ip, f"--steps 4 --active 1 --repeat 2 --gzip --tensorboard {tmp_path} --worker-name w0 -o",
              "torch.mm(a, b)\n")
    files = sorted(tmp_path.glob("*.pt.trace.json*"))
    assert len(files) == 2 and all(f.name.startswith("w0.") and f.name.endswith(".pt.trace.json.gz") for f in files)
    assert [t.steps for t in r.traces] == [[0], [1]]
    assert r.operators().set_index("name").loc["aten::mm", "count"] == 2  # cycles summed
    assert [nbprof.load(f).steps for f in files] == [[0], [1]]


def test_nbprof_step_inside_the_cell(ip):
    r = magic(ip, "-o", "for _ in range(3):\n    torch.mm(a, b)\n    nbprof.step()\n")
    assert r.trace.steps[:3] == [0, 1, 2]
    assert r.operators().set_index("name").loc["aten::mm", "count"] == 3


LOOP_CELL = """\
for _ in range(8):
    opt.zero_grad()
    loss_fn(model(xb), torch.zeros(8, dtype=torch.long)).backward()
    opt.step()
"""


def test_loop_cell_steps_from_the_optimizer(ip):
    """A cell that runs a training loop without nbprof.step(): each opt.step() ends a ProfilerStep (automatic
    steps), the schedule stops the profiler after the active steps while the loop runs on, and the step wall
    times before/after the window give the profiler's overhead."""
    from nbprof.analysis.overhead import profiler_overhead

    r = magic(ip, "-o --wait 2 --warmup 1 --active 3", LOOP_CELL)
    assert r.trace.steps == [3, 4, 5]
    ov = profiler_overhead(r.trace)
    assert ov is not None and ov.profiled_steps == (3, 4, 5) and ov.unprofiled_steps == (1, 6, 7)
    assert any(n.startswith("Profiler overhead: profiled steps took") for n in r.notes)  # shown with the result
    r = magic(ip, "-o", LOOP_CELL)  # no schedule given: the first 5 steps
    assert r.trace.steps == [0, 1, 2, 3, 4]
    # one training step in a cell is one step (the rest of the cell after opt.step() is no ProfilerStep)
    r = magic(ip, "-o", LOOP_CELL.replace("range(8)", "range(1)"))
    assert r.trace.steps == [0]
    assert (r.trace.events["name"] == "aten::convolution_backward").sum() >= 1


def test_sort_by_and_row_limit(ip):
    cell = "for _ in range(3):\n    torch.mm(a, b)\ntorch.add(a, b)\n"
    r = magic(ip, "--sort-by count --row-limit 2 -o", cell)
    t = r.table()
    assert len(t) == 2 and t["count"].iloc[0] == t["count"].max() == r.operators()["count"].max()
    assert body_rows(r._repr_html_()) == 2
    r2 = magic(ip, "--sort-by self_cpu_time_total --row-limit 50 -o", cell)
    assert r2.table()["self_host_ns"].is_monotonic_decreasing
    # torch's CUDA keys mean device time (all zero on a CPU profile, so total-host order stays)
    r3 = magic(ip, "--sort-by self_cuda_time_total -o", cell)
    assert r3.table()["name"].tolist() == r3.operators()["name"].head(20).tolist()
    assert "top operators by self_cuda_time_total" in repr(r3)


def test_group_by_shapes(ip):
    r = magic(ip, "--record-shapes --group-by shapes -o", "torch.mm(a, b)\ntorch.mm(a[:4], b)\n")
    mm = r.table(row_limit=0).query("name == 'aten::mm'")
    assert set(mm["input_dims"].astype(str)) == {"[[32, 32], [32, 32]]", "[[4, 32], [32, 32]]"}
    assert "Input shapes" in r._repr_html_()


@pytest.mark.skipif(CUDA, reason="checks the no-CUDA note; on a CUDA machine see test_cuda_profile")
@pytest.mark.parametrize("act", ["cuda", "gpu", "cpu,cuda"])
def test_cuda_requested_without_cuda(ip, act, capfd):
    r = magic(ip, f"--activities {act} -o", "torch.mm(a, b)\n")
    err = capfd.readouterr().err
    notes = [ln for ln in err.splitlines() if ln.startswith("nbprof: ")]
    assert len(notes) == 1 and "profiling the CPU only" in notes[0]
    assert r.activities == ["CPU"] and not r.trace.has_device
    assert "profiling the CPU only" in repr(r)
    assert r.operators().set_index("name").loc["aten::mm", "count"] == 1


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_profile(ip):
    cell = "a.cuda() @ b.cuda(); torch.cuda.synchronize()\n"
    r = magic(ip, "--activities cpu,gpu --sort-by cuda_time_total -o", cell)
    assert r.activities == ["CPU", "CUDA"] and r.trace.has_device and not r.notes
    assert r.operators().set_index("name").loc["aten::mm", "self_device_ns"] > 0
    assert r.table()["total_device_ns"].is_monotonic_decreasing
    assert "Self device (ms)" in r._repr_html_()
    r = magic(ip, "--activities cuda -o", cell)
    assert r.activities == ["CUDA"] and r.trace.has_device
    assert any("CPU activity is not profiled" in n for n in r.notes)


# ------------------------------------------------------------------------- display, files, errors


def test_display_quiet_return_and_var(ip):
    with capture_output() as cap:
        out = magic(ip, "", "torch.mm(a, b)\n")
    assert out is None and len(cap.outputs) == 1
    assert "aten::mm" in cap.outputs[0].data["text/html"] and "aten::mm" in cap.outputs[0].data["text/plain"]
    with capture_output() as cap:
        out = magic(ip, "-q --var kept", "torch.mm(a, b)\n")
    assert out is None and cap.outputs == []
    assert isinstance(ip.user_ns["kept"], ProfileResult)
    assert "aten::mm" in set(ip.user_ns["kept"].operators()["name"])


def test_line_magic(ip):
    r = ip.run_line_magic("torchprof", "-o --record-shapes --sort-by count torch.mm(a, b)")
    assert r.operators().set_index("name").loc["aten::mm", "count"] == 1
    assert r.options.record_shapes and r.options.sort_by == "count"
    r = ip.run_line_magic("torchprof", "-o --steps 2 -- torch.mm(a, b)")
    assert r.trace.steps == [0, 1]


def test_exception_propagates_after_saving_and_showing(ip, tmp_path):
    out = tmp_path / "err.json"
    cell = "runs += 1\ntorch.mm(a, b)\nif runs == 2:\n    raise ValueError('boom in cell')\n"
    ip.user_ns["runs"] = 0
    with capture_output() as cap, pytest.raises(ValueError, match="boom in cell"):
        magic(ip, f"--steps 3 --trace {out} --var failed", cell)
    assert ip.user_ns["runs"] == 2
    r = ip.user_ns["failed"]
    assert isinstance(r.exception, ValueError)
    assert r.trace.steps == [0, 1]  # the partial profile: the run that raised is in it
    t = nbprof.load(out)
    assert t.steps == [0, 1] and (t.events["name"] == "aten::mm").sum() == 2
    assert len(cap.outputs) == 1 and "raised ValueError: boom in cell" in cap.outputs[0].data["text/plain"]


def test_exception_propagates_through_run_cell(ip):
    res = ip.run_cell("%%torchprof -q\nraise KeyError('from the cell')\n")
    assert isinstance(res.error_in_exec, KeyError)


def test_existing_trace_is_never_overwritten_without_force(ip, tmp_path):
    out = tmp_path / "keep.pt.trace.json"
    out.write_text("precious")
    r = magic(ip, f"--trace {out} -o", "torch.mm(a, b)\n")
    assert out.read_text() == "precious"
    (written,) = r.paths
    assert written != out and written.parent == tmp_path
    assert written.name.startswith("keep.") and written.name.endswith(".pt.trace.json")
    assert any("exists" in n and "--force" in n for n in r.notes)
    assert (nbprof.load(written).events["name"] == "aten::mm").sum() == 1
    r = magic(ip, f"--trace {out} --force -o", "torch.mm(a, b)\n")
    assert r.paths == [out] and (nbprof.load(out).events["name"] == "aten::mm").sum() == 1


def test_trace_names_are_escaped_in_html(ip):
    cell = "with torch.profiler.record_function('<img src=x onerror=alert(1)>'):\n    torch.mm(a, b)\n"
    r = magic(ip, "-o", cell)
    htm = r._repr_html_()
    assert "<img src=x" not in htm and "&lt;img src=x onerror=alert(1)&gt;" in htm


def test_unload_and_reload(ip):
    ip.run_line_magic("unload_ext", "nbprof")
    assert ip.find_cell_magic("torchprof") is None and ip.find_line_magic("torchprof") is None
    ip.run_line_magic("load_ext", "nbprof")
    assert ip.find_cell_magic("torchprof") is not None
    assert magic(ip, "-o", "torch.mm(a, b)\n").operators().set_index("name").loc["aten::mm", "count"] == 1


# ------------------------------------------------------------------------- the demo notebook


def test_demo_notebook_shows_table_and_summary():
    """notebooks/torchprof_demo.ipynb, executed headless: the done-when cell shows the table and summary."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(ROOT / "notebooks" / "torchprof_demo.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in cells for o in c.outputs if o.output_type == "error"]
    (prof_cell,) = [c for c in cells if c.source.startswith("%%torchprof --steps 5 --record-shapes --profile-memory\n")]
    (shown,) = [o for o in prof_cell.outputs if o.output_type == "display_data"]
    htm, text = shown.data["text/html"], shown.data["text/plain"]
    assert "5 step(s) run, 5 recorded step(s) (#0-#4)" in text and "top operators by cpu_time_total" in text
    assert "<table" in htm and "aten::conv2d" in htm and "Host mem" in htm
    assert body_rows(htm) == 20
    last = cells[-1].outputs[0]
    assert "aten::" in last.data["text/plain"] and "[[64, " in last.data["text/html"]  # batch-64 input shapes
