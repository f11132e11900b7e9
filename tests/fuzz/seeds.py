"""Small seeds cut from the real files, written into a cache folder outside the repository.

Every seed is derived at run time from a real file (never copied into the repo): a few events of
each (phase, category) of real Kineto traces, a few segments/blocks/trace entries of a real CUDA
memory snapshot, the first rows of a real memory timeline, an Nsight Systems export with its big
tables cut to a few dozen rows, the DeepSpeed sample logs as they are. A format whose source files
are absent is left out, with the reason in ``skipped``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pickle
import shutil
import sqlite3
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
SHARED = Path(os.environ.get("NBPROF_SHARED", ROOT.parent / "shared"))
SAMPLES = SHARED / "notes" / "samples"
CORPUS = SHARED / "corpus"
NSYS_SEED = CORPUS / "hpcgroup__pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"

SEED_VERSION = "5"


def _cut_kineto(src: Path, per_group: int) -> dict:
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as fh:
        d = json.load(fh)
    evs = d["traceEvents"]
    seen: dict[tuple, int] = defaultdict(int)
    keep = []
    flow_ids = set()
    for e in evs:
        if not isinstance(e, dict):
            continue
        ph, cat = e.get("ph"), e.get("cat")
        key = (ph, cat, e.get("name") if ph in ("M", "i") else None)
        if ph in ("s", "f", "t"):
            continue
        name = str(e.get("name", ""))
        if name.startswith("ProfilerStep") or seen[key] < per_group:
            seen[key] += 1
            keep.append(e)
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                flow_ids.add(corr)
    nflow = 0
    for e in evs:  # flows whose id is one of the kept correlations, plus a few fwdbwd ones
        if isinstance(e, dict) and e.get("ph") in ("s", "f", "t") and (
                e.get("id") in flow_ids or (e.get("cat") == "fwdbwd" and nflow < 6)):
            keep.append(e)
            nflow += 1
    keep.sort(key=lambda e: (e.get("ph") != "M", e.get("ts", 0) if isinstance(e.get("ts"), (int, float)) else 0))
    out = {k: v for k, v in d.items() if k != "traceEvents"}
    out["traceEvents"] = keep
    return out


def _cut_snapshot(src: Path) -> dict:
    with open(src, "rb") as fh:  # a trusted real file of the repository's data/, not fuzzed input
        s = pickle.load(fh)
    segs = []
    for seg in s.get("segments", [])[:3]:
        seg = dict(seg)
        seg["blocks"] = [dict(b, frames=list(b.get("frames", []))[:3]) for b in seg.get("blocks", [])[:4]]
        seg["frames"] = list(seg.get("frames", []))[:3]
        segs.append(seg)
    traces = []
    for dev in s.get("device_traces", [])[:1]:
        traces.append([dict(t, frames=list(t.get("frames", []))[:3]) for t in dev[:60]])
    out = dict(s)
    out["segments"] = segs
    out["device_traces"] = traces
    return out


def _cut_nsys(src: Path, dst: Path, rows: int = 40) -> None:
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)
    con = sqlite3.connect(dst)
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for n in names:
        if n == "StringIds" or n.startswith(("ENUM_", "EXPORT_", "META_")):
            continue
        if not con.execute(f'SELECT 1 FROM "{n}" LIMIT 1').fetchall() and not n.startswith(("CUPTI_", "TARGET_", "MPI_", "OSRT_")):
            con.execute(f'DROP TABLE "{n}"')  # empty tables nbprof never reads: less schema to parse per case
            continue
        lim = 10 if n == "TARGET_INFO_SYSTEM_ENV" else rows
        con.execute(f'DELETE FROM "{n}" WHERE rowid NOT IN (SELECT rowid FROM "{n}" ORDER BY rowid LIMIT {lim})')
    con.commit()
    con.execute("VACUUM")
    con.close()


def build_seeds(cache: str | os.PathLike[str] | None = None) -> tuple[dict[str, list[Path]], dict[str, str]]:
    """(format -> seed paths, format -> reason it has no seed). Built once per cache folder."""
    base = Path(cache) if cache else Path(tempfile.gettempdir()) / f"nbprof-fuzz-seeds-{SEED_VERSION}-{os.getuid()}"
    tag = hashlib.sha1(str(ROOT).encode()).hexdigest()[:8]
    d = base / tag
    done = d / ".done"
    seeds: dict[str, list[Path]] = defaultdict(list)
    skipped: dict[str, str] = {}
    d.mkdir(parents=True, exist_ok=True)
    build = not done.exists()

    def want(name: str) -> Path | None:
        p = d / name
        return p if (build or p.exists()) else None

    # --- Kineto JSON / .json.gz
    kin = [(DATA / "gpu/cnn_h200.pt.trace.json.gz", "gpu_small.pt.trace.json", 3, False),
           (DATA / "gpu/lm_mem.pt.trace.json.gz", "mem_small.pt.trace.json.gz", 2, True),
           (SAMPLES / "kineto_cpu_mlp_3steps.pt.trace.json", "cpu_small.pt.trace.json", 3, False),
           (DATA / "gpu/ddp_nccl_rank0.pt.trace.json.gz", "ddp_small.pt.trace.json.gz", 2, True)]
    for src, name, per, gz in kin:
        p = want(name)
        if p is None:
            continue
        if build:
            if not src.exists():
                continue
            body = json.dumps(_cut_kineto(src, per)).encode()
            p.write_bytes(gzip.compress(body, mtime=0) if gz else body)
        seeds["kineto"].append(p)
    if not seeds["kineto"]:
        skipped["kineto"] = "no Kineto trace in data/ or ../shared/notes/samples"
    else:  # rank archives are built from the Kineto seeds per case (tests/fuzz/containers.py)
        seeds["archive"] = list(seeds["kineto"])

    # --- saved traces (.nbprof): Trace.save of the Kineto seeds, by this checkout's nbprof
    for k in list(seeds.get("kineto", []))[:3]:
        p = want(k.name.split(".")[0] + ".nbprof")
        if p is None:
            continue
        if build:
            import nbprof

            try:
                nbprof.load(k).save(p)
            except Exception as exc:
                skipped["saved"] = f"Trace.save of {k.name} failed: {type(exc).__name__}: {exc}"
                continue
        seeds["saved"].append(p)
    if not seeds["saved"] and "saved" not in skipped:
        skipped["saved"] = "no Kineto seed to save"

    # --- CUDA memory snapshot pickle
    for src, name in ((DATA / "gpu/torchprof_lm_snapshot.pickle", "snap_small.pickle"),
                      (DATA / "gpu/lm_leak_snapshot.pickle", "leak_small.pickle")):
        p = want(name)
        if p is None:
            continue
        if build:
            if not src.exists():
                continue
            p.write_bytes(pickle.dumps(_cut_snapshot(src), protocol=4))
        seeds["snapshot"].append(p)
    if not seeds["snapshot"]:
        skipped["snapshot"] = "no memory snapshot pickle in data/gpu"

    # --- memory timeline .raw.json(.gz)
    src = DATA / "gpu/lm_memory_timeline.raw.json.gz"
    for name, gz in (("tl_small.raw.json.gz", True), ("tl_small.raw.json", False)):
        p = want(name)
        if p is None:
            continue
        if build:
            if not src.exists():
                continue
            rows = json.loads(gzip.decompress(src.read_bytes()))
            body = json.dumps(rows[:40] + rows[-40:]).encode()
            p.write_bytes(gzip.compress(body, mtime=0) if gz else body)
        seeds["timeline"].append(p)
    if not seeds["timeline"]:
        skipped["timeline"] = "no memory timeline in data/gpu"

    # --- Nsight Systems SQLite
    p = want("nsys_small.sqlite")
    if p is not None:
        if build and NSYS_SEED.exists():
            _cut_nsys(NSYS_SEED, p)
        if p.exists():
            seeds["nsys"].append(p)
    if not seeds["nsys"]:
        skipped["nsys"] = f"no Nsight Systems export: {NSYS_SEED} is absent (../shared/corpus)"

    # --- DeepSpeed logs (small real samples, used as they are)
    for name in ("ds_launcher_stage2_comms_verbose.log", "ds_launcher_stage3.log", "ds_single_process_stage1.log",
                 "ds_torchrun_stage2.log", "ds_flops_stage3_rank0.txt", "ds_flops_standalone.txt"):
        p = want(name)
        if p is None:
            continue
        if build:
            if not (SAMPLES / name).exists():
                continue
            p.write_bytes((SAMPLES / name).read_bytes())
        seeds["deepspeed"].append(p)
    if not seeds["deepspeed"]:
        skipped["deepspeed"] = "no DeepSpeed sample logs in ../shared/notes/samples"

    if build:
        done.write_text("ok")
    return dict(seeds), skipped
