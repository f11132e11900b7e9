"""Capture the small real GPU test inputs committed under data/gpu/ (issue 36's validation run).

    python scripts/gpu_capture.py OUTDIR                 # on a CUDA machine: every scenario, < 8 minutes on one GPU
    python scripts/gpu_capture.py OUTDIR --dry           # on a CPU: the same code paths, tiny steps (CI runs this)
    python scripts/gpu_capture.py OUTDIR --only cnn_pair,amp_pair --budget-s 300

Each scenario is independent (one failing never stops the others) and writes into OUTDIR; ``manifest.json`` records,
per scenario, ``ok`` / ``skipped`` (with the reason) / ``failed`` (with the error), the files written, the measured
mean step time of every run (ms, ``time.perf_counter`` around the step, after a CUDA synchronize on GPU) — the
"measured" side of the what-if validations — and torch/CUDA/GPU versions. ``validations`` holds, per Kineto trace
written, what issue 36 checks on it: the CUDA-graph attribution (replayed device ops per method, match rate) and
the Inductor kernel mapping (kernels with a launch, compiled region, FX graph, source line, work model). Scenarios:

  cnn_pair        CNN, num_workers 0 vs 4, 0.3 ms/sample Python preprocessing: ``cnn_nw0_prep`` / ``cnn_nw4_prep``
                  (Kineto); also under Nsight Systems (``*.nsys-rep`` + ``.sqlite``) when nsys is found, with NVTX
                  step ranges and kernels as merge anchors
  graph_pair      one LM training step eager vs captured as a CUDA graph (``torch.compile(mode="reduce-overhead")``),
                  and ``lm_graph_capture``: a fresh reduce-overhead model's warm-up, capture and replays in one trace
  compiled        a ``torch.compile``d LM (Triton kernels on GPU, C++/OpenMP on CPU; with ``--dry`` only when
                  ``--with-compile`` is given: Inductor's first compile costs minutes on 2 CPU cores)
  amp_pair        the LM step fp32 vs ``torch.autocast`` (bf16 on GPU/CPU)
  double_layer    the LM with its head projection computed twice (2x the work of one layer) vs once: a
                  "kernel made 2x longer" pair for ``whatif.scale(<kernel>, 2)``
  lm_mem          LM with record_shapes + profile_memory + with_stack + flops + modules; memory timeline
  ddp             CNN under DDP (NCCL, world size 1): NCCL kernels + distributedInfo (CUDA only)
  snapshots       memory snapshot with a deliberate 1 MiB/step leak, and one taken at an out-of-memory error under a
                  per-process memory cap (CUDA only)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def t(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Ctx:
    """What every scenario gets: output folder, device, sizes, and the manifest entry to fill."""

    def __init__(self, out: str, dry: bool, with_compile: bool) -> None:
        import torch

        self.torch = torch
        self.out = out
        self.dry = dry
        self.with_compile = with_compile
        self.dev = "cuda" if torch.cuda.is_available() else "cpu"
        if dry:
            self.dev = "cpu"
        self.cuda = self.dev == "cuda"
        self.steps = 4 if dry else 8
        self.entry: dict[str, Any] = {}

    def path(self, name: str) -> str:
        p = os.path.join(self.out, name)
        self.entry.setdefault("files", []).append(name)
        return p

    def activities(self) -> list:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def skip(self, reason: str) -> None:
        raise _Skip(reason)


class _Skip(Exception):
    pass


def _profile(ctx: Ctx, path: str, active: int, **kw):
    from torch.profiler import profile, schedule

    return profile(activities=ctx.activities(), schedule=schedule(wait=1, warmup=1, active=active), record_shapes=True,
                   on_trace_ready=lambda p: p.export_chrome_trace(path), **kw)


def _lm_steps(ctx: Ctx, model, steps: int, *, profiler=None, amp: bool = False, batch: int = 8, seq: int = 64) -> float:
    """``steps`` next-token steps of ``model``; returns the mean step time (ms) of all but the first two steps."""
    torch = ctx.torch
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator().manual_seed(0)
    times = []
    for _ in range(steps):
        ctx.sync()
        t0 = time.perf_counter()
        tok = torch.randint(0, 512, (batch, seq + 1), generator=g).to(ctx.dev)
        with torch.autocast(ctx.dev, dtype=torch.bfloat16, enabled=amp):
            logits = model(tok[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 512).float(), tok[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=False)  # keep .grad tensors: CUDA-graph trees need stable addresses
        loss.backward()
        opt.step()
        ctx.sync()
        times.append((time.perf_counter() - t0) * 1e3)
        if profiler is not None:
            profiler.step()
    kept = times[2:] or times
    return round(sum(kept) / len(kept), 3)


def _tiny_lm(ctx: Ctx, head_repeat: int = 1):
    import train_transformer

    torch = ctx.torch
    torch.manual_seed(0)
    model = train_transformer.TinyLM()
    if head_repeat > 1:  # the head's matmul done head_repeat times (same result): that layer's work x head_repeat
        head = model.lm_head

        class Repeated(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = head

            def forward(self, x):
                out = self.inner(x)
                for _ in range(head_repeat - 1):
                    out = out + 0.0 * self.inner(x)
                return out

        model.lm_head = Repeated()
    return model.to(ctx.dev)


def cnn_pair(ctx: Ctx) -> None:
    import train_cnn

    for nw in (0, 4):
        stem = f"cnn_nw{nw}_prep"
        path = ctx.path(f"{stem}.pt.trace.json.gz")
        with _profile(ctx, path, ctx.steps - 2) as p:
            ms = train_cnn.train(ctx.steps, 64, nw, 2 if nw else None, 0.3, ctx.dev, p)
        ctx.entry[stem] = {"mean_step_ms": round(ms, 3), "num_workers": nw, "preprocess_ms": 0.3}
        t(f"{path}: {ms:.1f} ms/step")
    _under_nsys(ctx)


def _under_nsys(ctx: Ctx) -> None:
    """The same pair under Nsight Systems + torch.profiler (kernels and NVTX steps as merge anchors), when nsys exists."""
    try:
        from nbprof.capture.nsys import profile as nsys_profile
        from nbprof.capture.nsys_fetch import find_nsys
    except ImportError as exc:
        ctx.entry["nsys"] = f"skipped: nbprof not importable ({exc})"
        return
    if find_nsys() is None:
        ctx.entry["nsys"] = "skipped: nsys not found (make nsys)"
        return
    for nw in (0, 4):
        stem = f"cnn_nw{nw}_nsys"
        kineto = ctx.path(f"{stem}.pt.trace.json.gz")
        cmd = [sys.executable, os.path.join(HERE, "..", "examples", "train_cnn.py"), "--steps", str(ctx.steps),
               "--num-workers", str(nw), "--preprocess-ms", "0.3", "--profile", kineto]
        if ctx.cuda:
            cmd += ["--device", "cuda"]
        run = nsys_profile(cmd, output=os.path.join(ctx.out, stem), overwrite=True, timeout_s=240)
        ctx.entry.setdefault("files", []).extend(os.path.basename(str(p)) for p in (run.report_path, run.sqlite_path) if p)
        t(f"nsys {stem}: {run.report_path} (rc {run.returncode})")


def graph_pair(ctx: Ctx) -> None:
    torch = ctx.torch
    if not ctx.cuda and not ctx.dry:
        ctx.skip("CUDA graphs need a CUDA device")
    eager = _tiny_lm(ctx)
    with _profile(ctx, ctx.path("lm_eager.pt.trace.json.gz"), ctx.steps - 2) as p:
        ctx.entry["lm_eager"] = {"mean_step_ms": _lm_steps(ctx, eager, ctx.steps, profiler=p)}
    if not ctx.cuda:
        ctx.entry["lm_graph"] = "skipped: reduce-overhead (CUDA graphs) needs a CUDA device"
        return
    graphed = torch.compile(_tiny_lm(ctx), mode="reduce-overhead")
    _lm_steps(ctx, graphed, 3)  # compile + graph capture outside the profile
    with _profile(ctx, ctx.path("lm_graph.pt.trace.json.gz"), ctx.steps - 2) as p:
        ctx.entry["lm_graph"] = {"mean_step_ms": _lm_steps(ctx, graphed, ctx.steps, profiler=p)}
    # the first steps of a fresh reduce-overhead model inside the profile: CUDA-graph trees' eager warm-up, the
    # capture (cudaStreamBeginCapture ... EndCapture) and the replays in one trace, for graph attribution's
    # "capture" and "sequence" methods (validate(): match rate per method)
    from torch.profiler import profile

    torch._dynamo.reset()
    fresh = torch.compile(_tiny_lm(ctx), mode="reduce-overhead")
    cap = ctx.path("lm_graph_capture.pt.trace.json.gz")
    with profile(activities=ctx.activities(), record_shapes=True) as p2:
        ms = _lm_steps(ctx, fresh, 5)
    p2.export_chrome_trace(cap)
    ctx.entry["lm_graph_capture"] = {"mean_step_ms": ms, "note": "compile, warm-up and capture inside the profile"}


def compiled(ctx: Ctx) -> None:
    torch = ctx.torch
    if ctx.dry and not ctx.with_compile:
        ctx.skip("--dry without --with-compile (Inductor's first compile is minutes on 2 CPU cores)")
    import torch._inductor.config as icfg

    icfg.cpp.enable_kernel_profile = True  # CPU: Inductor's C++ kernels profiled by name (GPU: Triton launches are)
    model = torch.compile(_tiny_lm(ctx))
    _lm_steps(ctx, model, 2)
    with _profile(ctx, ctx.path("lm_compiled.pt.trace.json.gz"), ctx.steps - 2, with_stack=True) as p:
        ctx.entry["lm_compiled"] = {"mean_step_ms": _lm_steps(ctx, model, ctx.steps, profiler=p)}


def amp_pair(ctx: Ctx) -> None:
    for amp in (False, True):
        stem = "lm_amp" if amp else "lm_fp32"
        with _profile(ctx, ctx.path(f"{stem}.pt.trace.json.gz"), ctx.steps - 2) as p:
            ctx.entry[stem] = {"mean_step_ms": _lm_steps(ctx, _tiny_lm(ctx), ctx.steps, profiler=p, amp=amp)}


def double_layer(ctx: Ctx) -> None:
    for k in (1, 2):
        stem = f"lm_head_x{k}"
        with _profile(ctx, ctx.path(f"{stem}.pt.trace.json.gz"), ctx.steps - 2) as p:
            ctx.entry[stem] = {"mean_step_ms": _lm_steps(ctx, _tiny_lm(ctx, head_repeat=k), ctx.steps, profiler=p),
                               "head_repeat": k}


def lm_mem(ctx: Ctx) -> None:
    import train_transformer

    torch = ctx.torch
    path = ctx.path("lm_mem.pt.trace.json.gz")
    from torch.profiler import profile, schedule

    with profile(activities=ctx.activities(), schedule=schedule(wait=1, warmup=1, active=3), record_shapes=True,
                 profile_memory=True, with_stack=True, with_flops=True, with_modules=True,
                 experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as p:
        ms = train_transformer.train(5, 8, 64, device=ctx.dev, profiler=p)
    with contextlib.suppress(Exception):  # the memory timeline is optional (torch raises on some CPU builds)
        p.export_memory_timeline(ctx.path("lm_memory_timeline.raw.json.gz"), device="cuda:0" if ctx.cuda else "cpu")
    ctx.entry["lm_mem"] = {"mean_step_ms": round(ms, 3)}


def ddp(ctx: Ctx) -> None:
    if not ctx.cuda:
        ctx.skip("NCCL needs a CUDA device")
    import torch.distributed as dist
    import train_cnn
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch = ctx.torch
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = DDP(train_cnn.SmallCNN().cuda(), device_ids=[0])
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        it = iter(train_cnn.make_loader(64, 0, None, 0.0))
        with _profile(ctx, ctx.path("ddp_nccl_rank0.pt.trace.json.gz"), 4) as p:
            for _ in range(6):
                x, y = next(it)
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                opt.zero_grad()
                loss.backward()
                buf = torch.ones(1 << 20, device="cuda")
                dist.all_reduce(buf)
                dist.all_gather_into_tensor(torch.empty(1 << 20, device="cuda"), buf)
                opt.step()
                p.step()
    finally:
        dist.destroy_process_group()


def snapshots(ctx: Ctx) -> None:
    if not ctx.cuda:
        ctx.skip("CUDA memory snapshots need a CUDA device")
    import train_transformer

    torch = ctx.torch
    torch.cuda.memory._record_memory_history(max_entries=50000)
    model = train_transformer.TinyLM().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    leak = []
    for _ in range(6):
        tok = torch.randint(0, 512, (8, 65), device="cuda")
        loss = torch.nn.functional.cross_entropy(model(tok[:, :-1]).reshape(-1, 512), tok[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        leak.append(loss.new_empty(8 * 64 * 512))  # deliberate leak: 8*64*512*4 bytes per step
    with open(ctx.path("lm_leak_snapshot.pickle"), "wb") as f:
        pickle.dump(torch.cuda.memory._snapshot(), f, protocol=4)
    ctx.entry["leak"] = {"leak_tensor_bytes": 8 * 64 * 512 * 4, "leak_steps": 6}
    # out of memory under a cap: the snapshot taken in the handler shows what filled the memory
    del leak
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, (2 << 30) / total))
    held = []
    try:
        for _ in range(4096):
            held.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
        ctx.entry["oom"] = "no out-of-memory error under the cap"
    except torch.cuda.OutOfMemoryError as exc:
        with open(ctx.path("oom_snapshot.pickle"), "wb") as f:
            pickle.dump(torch.cuda.memory._snapshot(), f, protocol=4)
        ctx.entry["oom"] = {"held_blocks": len(held), "block_bytes": 64 << 20, "error": str(exc).splitlines()[0]}
    finally:
        held.clear()
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.memory._record_memory_history(enabled=None)


def _graph_attribution(tr: Any) -> dict[str, Any]:
    """Graph replays of a loaded trace: replayed device ops per attribution method and the match rate
    (``nbprof.trace.graph_replay``)."""
    from nbprof.trace.graph_replay import graph_replays

    g = graph_replays(tr)
    by = {str(k): int(v) for k, v in g["method"].value_counts().items()}
    matched = by.get("capture", 0) + by.get("sequence", 0)
    return {"replayed_device_ops": int(len(g)), "launches": int(g["launch"].nunique()) if len(g) else 0,
            "graphs": int(g["graph"].nunique()) if len(g) else 0, "by_method": by,
            "match_rate": round(matched / len(g), 4) if len(g) else None}


def _inductor_mapping(tr: Any) -> dict[str, Any]:
    """Inductor kernels of a loaded trace and how many map to a compiled region, an FX graph, a work model
    (``nbprof.analysis.compiled``)."""
    from nbprof.analysis.compiled import compiled_kernels

    ck = compiled_kernels(tr)
    n = int(len(ck))
    return {"kernels": n, "kinds": {str(k): int(v) for k, v in ck["kind"].value_counts().items()},
            "with_launch": int((ck["launch_event"] >= 0).sum()), "with_region": int((ck["region"] != "").sum()),
            "with_compiled_function": int((ck["compiled_function"] != "").sum()),
            "with_fx_graph": int((ck["fx_graph"] != "").sum()), "with_source": int((ck["source"] != "").sum()),
            "with_work_model": int(ck["flops"].notna().sum()),
            "kernel_time_share": round(float(ck["dur_ns"].sum()) / max(1, int(tr.events.loc[
                tr.events["cat"] == "kernel", "dur_ns"].sum())), 4) if n and tr.has_device else None}


def validate(out: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """What to check on the traces written (issue 36): per Kineto trace, the CUDA-graph attribution (replayed ops
    by method, match rate) and the Inductor kernel mapping (kernels with a region, graph, source line, work model);
    per trace an ``error`` instead when it does not load."""
    out_v: dict[str, Any] = {}
    try:
        import nbprof
    except ImportError as exc:
        return {"error": f"nbprof not importable: {exc}"}
    files = sorted({f for e in manifest["scenarios"].values() for f in e.get("files", [])
                    if f.endswith(".pt.trace.json.gz")})
    for f in files:
        path = os.path.join(out, f)
        if not os.path.exists(path):
            continue
        try:
            tr = nbprof.load(path)
            out_v[f] = {"graph_attribution": _graph_attribution(tr), "inductor": _inductor_mapping(tr)}
        except Exception as exc:  # one bad trace never hides the others' checks
            out_v[f] = {"error": repr(exc)}
    return out_v


SCENARIOS: dict[str, Callable[[Ctx], None]] = {
    "cnn_pair": cnn_pair, "graph_pair": graph_pair, "compiled": compiled, "amp_pair": amp_pair,
    "double_layer": double_layer, "lm_mem": lm_mem, "ddp": ddp, "snapshots": snapshots,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--dry", action="store_true", help="CPU, tiny steps: check the code paths (CI)")
    ap.add_argument("--with-compile", action="store_true", help="run the torch.compile scenario also with --dry")
    ap.add_argument("--only", default="", help=f"comma-separated scenarios (default all): {', '.join(SCENARIOS)}")
    ap.add_argument("--budget-s", type=float, default=450.0, help="start no scenario after this many seconds")
    a = ap.parse_args(argv)
    names = [n for n in a.only.split(",") if n] or list(SCENARIOS)
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        ap.error(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")
    os.makedirs(a.out, exist_ok=True)
    ctx = Ctx(a.out, a.dry, a.with_compile)
    torch = ctx.torch
    manifest: dict[str, Any] = {
        "torch": torch.__version__, "cuda": torch.version.cuda, "dry": a.dry, "device": (
            torch.cuda.get_device_name(0) if ctx.cuda else "cpu"), "scenarios": {}}
    t0 = time.perf_counter()
    for name in names:
        ctx.entry = {}
        if time.perf_counter() - t0 > a.budget_s:
            ctx.entry.update(status="skipped", reason=f"time budget of {a.budget_s:.0f} s spent")
        else:
            s0 = time.perf_counter()
            try:
                SCENARIOS[name](ctx)
                ctx.entry["status"] = "ok"
            except _Skip as exc:
                ctx.entry.update(status="skipped", reason=str(exc))
            except Exception as exc:  # keep going: each artefact is independent
                ctx.entry.update(status="failed", error=repr(exc), traceback=traceback.format_exc(limit=5))
            ctx.entry["seconds"] = round(time.perf_counter() - s0, 1)
        manifest["scenarios"][name] = ctx.entry
        t(f"{name}: {ctx.entry.get('status')} {ctx.entry.get('reason') or ctx.entry.get('error') or ''}")
    manifest["validations"] = validate(a.out, manifest)
    manifest["seconds"] = round(time.perf_counter() - t0, 1)
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    failed = [n for n, e in manifest["scenarios"].items() if e.get("status") == "failed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
