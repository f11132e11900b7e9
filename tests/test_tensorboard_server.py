"""A REAL TensorBoard server on 127.0.0.1 serving an nbprof-written logdir.

Started with ``nbprof.tensorboard.start`` (``python -m tensorboard.main --logdir D --host 127.0.0.1
--port P`` as an argv list), queried over its HTTP data routes (scalars, text, and the
torch-tb-profiler 0.4.3 plugin routes when that plugin is installed), stopped by pid.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import nbprof
from nbprof.errors import MissingDependencyError
from nbprof.tensorboard import discover, write_run
from nbprof.tensorboard.launch import TensorBoardStartError, embed, proxy_url, running, start, stop

ROOT = Path(__file__).resolve().parents[1]
TRACES = {
    "nw0": ROOT / "data" / "cpu" / "cnn_nw0.pt.trace.json.gz",
    "nw2": ROOT / "data" / "cpu" / "cnn_nw2.pt.trace.json.gz",
    "gpu/nw0": ROOT / "data" / "gpu" / "cnn_nw0_prep.pt.trace.json.gz",
}
EVIL = "aten::evil|<script>alert(1)</script>"


def _get(port: int, route: str, **params):
    q = ("?" + urllib.parse.urlencode(params)) if params else ""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{route}{q}", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=30) as r:  # loopback only
        body = r.read()
        if r.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    return json.loads(body)


def _wait(pred, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}; last: {last!r}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("tblogs")
    written = {run: write_run(p, logdir, run, "worker0") for run, p in TRACES.items()}
    evil_src = logdir.parent / "evil.pt.trace.json"
    evs = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 500.0},
           {"ph": "X", "cat": "cpu_op", "name": EVIL, "pid": 1, "tid": 1, "ts": 10.0, "dur": 100.0}]
    evil_src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": evs, "deviceProperties": []}))
    written["evil"] = write_run(evil_src, logdir, "evil", "worker0")
    h = start(logdir, reload_interval_s=1)
    try:
        yield logdir, h, written
    finally:
        stop(h)


def test_server_lists_runs_and_serves_nbprof_scalars(served):
    logdir, h, written = served
    assert not h.reused and h.alive()
    want_runs = set(written)
    tags = _wait(lambda: (t := _get(h.port, "/data/plugin/text/tags")) and set(t) >= want_runs and t, 60, "text tags")
    for run, w in written.items():
        assert set(tags[run]) == set(w.text_tags)
        assert "nbprof/summary" in tags[run]
    # scalars: every tag nbprof says it wrote is served, with the values the analysis computed
    stags = _get(h.port, "/data/plugin/scalars/tags")
    for run, w in written.items():
        assert set(stags.get(run, {})) == set(w.scalar_tags)
    if "nbprof/step_time_ms" in written["nw0"].scalar_tags:
        from nbprof.analysis.steps import step_breakdown

        df = step_breakdown(nbprof.load(TRACES["nw0"]))
        pts = _get(h.port, "/data/plugin/scalars/scalars", run="nw0", tag="nbprof/step_time_ms")
        assert [p[1] for p in pts] == [int(s) for s in df["step"]]
        assert [p[2] for p in pts] == pytest.approx(list(df["step_ns"] / 1e6), rel=1e-6)
        stags["nw0"]["nbprof/step_time_ms"]["description"]  # described
        dl0 = _get(h.port, "/data/plugin/scalars/scalars", run="nw0", tag="nbprof/step_breakdown/dataloader_ms")
        dl2 = _get(h.port, "/data/plugin/scalars/scalars", run="nw2", tag="nbprof/step_breakdown/dataloader_ms")
        # the DataLoader difference is visible in stock TensorBoard
        assert sum(p[2] for p in dl0) / len(dl0) > 2 * sum(p[2] for p in dl2) / len(dl2)
    else:
        assert "step_breakdown" in written["nw0"].skipped


def test_text_route_renders_markdown_tables_with_escaped_names(served):
    logdir, h, written = served
    _wait(lambda: "evil" in _get(h.port, "/data/plugin/text/tags"), 60, "evil run")
    (summary,) = _get(h.port, "/data/plugin/text/text", run="nw0", tag="nbprof/summary")
    assert summary["step"] == 0
    n = len(nbprof.load(TRACES["nw0"]).events)
    assert "<table>" in summary["text"] and f"<td>{n}</td>" in summary["text"]
    if "nbprof/top_operators" in written["evil"].text_tags:
        (ops,) = _get(h.port, "/data/plugin/text/text", run="evil", tag="nbprof/top_operators")
        html = ops["text"]
        assert "<script>" not in html
        assert "aten::evil|&lt;script&gt;alert(1)&lt;/script&gt;" in html  # one cell, shown as text
        assert html.count("<th>") == html.count("<td>") // 2  # 2 rows, every row as wide as the header


def test_torch_tb_profiler_lists_nbprof_runs(served):
    pytest.importorskip("torch_tb_profiler")
    logdir, h, written = served
    disc = discover(logdir)
    want = sorted(disc["run"].unique())
    base = "/data/plugin/pytorch_profiler"

    def loaded():
        r = _get(h.port, f"{base}/runs")
        return r if (set(r["runs"]) >= set(want) and not r["loading"]) else None

    r = _wait(loaded, 90, "the profiler plugin to load the runs")
    assert sorted(r["runs"]) == want
    for run in ("nw0", "gpu/nw0"):
        rows = disc[disc["run"] == run]
        assert _get(h.port, f"{base}/workers", run=run, view="Overview") == sorted(rows["worker"].unique())
        assert _get(h.port, f"{base}/spans", run=run, worker="worker0") == list(rows["span"])
        ov = _get(h.port, f"{base}/overview", run=run, worker="worker0", span=rows["span"].iloc[0])
        names = [c["name"] for c in ov["steps"]["columns"] if "name" in c]
        assert names[1] == ("Kernel" if run.startswith("gpu") else "DataLoader")
        # the plugin's step labels are the trace's ProfilerStep numbers (its GPU overview lists each twice)
        assert sorted({int(r[0]) for r in ov["steps"]["rows"]}) == nbprof.load(TRACES[run]).steps


def test_start_reuses_a_server_for_the_same_logdir(served):
    logdir, h, _ = served
    again = start(logdir)
    assert again.reused and again.pid == h.pid and again.port == h.port
    assert any(x.pid == h.pid for x in running(logdir))
    assert h.pid in {x.pid for x in running()}


def test_port_taken_and_bad_arguments_give_clear_errors(tmp_path):
    before = set(Path(tempfile.gettempdir()).glob("nbprof-tensorboard-*.stderr"))  # e.g. the module's live server
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with pytest.raises(TensorBoardStartError, match=f"port {port} on 127.0.0.1 is already in use") as ei:
            start(tmp_path, port=port, reuse=False)
        assert ei.value.port == port
    with pytest.raises(TensorBoardStartError, match="exited with code") as ei:
        start(tmp_path / "x", extra_args=["--no_such_flag"], timeout_s=60)
    assert "no_such_flag" in ei.value.stderr
    # the failed starts removed their stderr files (only files that appeared during this test count)
    assert not set(Path(tempfile.gettempdir()).glob("nbprof-tensorboard-*.stderr")) - before


def test_missing_tensorboard_package(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # what `import tensorboard` sees when it is absent
    with pytest.raises(MissingDependencyError, match=r"pip install .nbprof\[tensorboard\]."):
        start(tmp_path)


def test_stop_by_pid_and_embed_outside_a_notebook(tmp_path, capsys):
    h = start(tmp_path / "solo")
    try:
        assert _get(h.port, "/data/plugins_listing")
        embed(h)  # not in a notebook kernel: TensorBoard's notebook module prints where it runs
        assert str(h.port) in capsys.readouterr().out
    finally:
        stop(h.pid)
    assert not h.alive()
    with pytest.raises(urllib.error.URLError):
        _get(h.port, "/data/plugins_listing")
    with pytest.raises(ValueError, match="not a TensorBoard process"):
        stop(os.getpid())


def test_proxy_url(monkeypatch):
    monkeypatch.setenv("TENSORBOARD_PROXY_URL", "/user/me/proxy/%PORT%/")
    assert proxy_url(6006) == "/user/me/proxy/6006/"
    monkeypatch.delenv("TENSORBOARD_PROXY_URL")
    import importlib.util

    if importlib.util.find_spec("jupyter_server_proxy") is None:
        assert proxy_url(6006) is None
    else:
        monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/me/")
        assert proxy_url(6006) == "/user/me/proxy/6006/"
