"""notebooks/nsys_demo.ipynb executed headless: `%nsys profile -- python examples/train_cnn.py --steps 20`
runs the real nsys and shows the timeline, the NVTX-marked steps and the summary."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _support.nsys import agents_running, nsys_or_skip

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.nsys
@pytest.mark.slow
def test_nsys_demo_notebook():
    nsys_or_skip()
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    before = set(agents_running())
    nb = nbformat.read(ROOT / "notebooks" / "nsys_demo.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    cells = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in cells for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    res = None
    for c in cells:
        for o in c.outputs:
            for line in str(o.get("text", "")).splitlines():
                if line.startswith("NBPROF_RESULT "):
                    res = json.loads(line[len("NBPROF_RESULT "):])
    assert res is not None
    try:
        assert res["steps"] == list(range(20))
        assert {"step", "data", "forward", "backward", "optimizer"} <= set(res["nvtx_ranges"])
        assert res["osrt_calls"] > 0
        (prof,) = [c for c in cells if c.source.startswith("%nsys profile")]
        mimes = {m for o in prof.outputs if o.output_type == "display_data" for m in o.data}
        htmls = [o.data["text/html"] for o in prof.outputs if "text/html" in o.get("data", {})]
        assert any("nvtx_sum" in h and "<table" in h and "NVTX steps (20)" in h for h in htmls)
        # the timeline widget when nbprof.viz is there
        assert "application/vnd.jupyter.widget-view+json" in mimes
        steps_out = next(c for c in cells if c.source == "result.steps").outputs[0].data["text/plain"]
        assert "19" in steps_out
        assert set(agents_running()) <= before
    finally:
        for k in ("report", "sqlite"):
            if res.get(k) and os.path.exists(res[k]) and "results" in res[k]:
                os.unlink(res[k])
