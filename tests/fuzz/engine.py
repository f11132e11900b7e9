"""The fuzz engine: case generation (deterministic per seed, format and index), the worker
subprocess, the invariants that need the parent (hang by hard kill, files written next to the
input), counting, and failure records.

Invariants per case:
1. only nbprof errors (``NbprofError`` subclasses) escape ``nbprof.load(path, strict=False)`` and the
   DeepSpeed parsers, and the analyses / static page run on a loaded result (``FOREIGN`` otherwise);
2. no hang: a per-case alarm in the worker, and a hard kill by the parent (``HANG``);
3. nothing new appears in the input's folder (each case has its own; ``WROTE-NEXT-TO-INPUT``);
4. Kineto: the file's events = rows kept + events the report says were dropped, where a stdlib
   JSON parse of the mutated file gives the file's count (``ACCOUNTING``; see worker.kineto_accounting);
5. the fixed set of analyses and ``nbprof.viz.static.to_html`` raise nothing foreign (part of 1).

A loader that does not accept ``strict`` (the unmutated seed case of its format shows it) is then
called without it, so the rest of its cases still test its content handling; the seed case keeps
the finding.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import random
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from . import mutate as M
from .seeds import ROOT, build_seeds

FORMATS = ("kineto", "nsys", "snapshot", "timeline", "deepspeed", "special")
OUTCOMES = ("ok-clean", "ok-repaired", "nbprof-error", "FOREIGN", "HANG", "WROTE-NEXT-TO-INPUT", "ACCOUNTING")
FAILURES = ("FOREIGN", "HANG", "WROTE-NEXT-TO-INPUT", "ACCOUNTING")
_RANK = {o: i for i, o in enumerate(("ok-clean", "ok-repaired", "nbprof-error", "ACCOUNTING", "WROTE-NEXT-TO-INPUT",
                                     "FOREIGN", "HANG"))}
# shares of the cases; "special" (FIFO, folder, empty, /dev/null, ... under each loader's suffix: 54 combinations)
# gets ~1.8 %, i.e. each combination about once per 3,000 cases
WEIGHTS = {"kineto": 0.40, "nsys": 0.10, "snapshot": 0.15, "timeline": 0.12, "deepspeed": 0.202, "special": 0.018}

SPECIAL_NAMES = {"kineto": ["trace.pt.trace.json", "trace.json.gz"], "nsys": ["report.sqlite"],
                 "snapshot": ["snap.pickle"], "timeline": ["tl.raw.json.gz"], "deepspeed": ["ds.log"]}
SPECIAL_KINDS = ["fifo", "dir", "empty", "devnull", "dangling", "bom-only", "gzip-empty", "devzero", "whitespace"]


@dataclass
class Case:
    fmt: str
    index: int  # index within the format
    target: str  # the loader family the case exercises
    path: str
    mutation: str
    dirpath: str
    strict_kw: bool = True
    analyses: bool = True
    html: bool = False
    outcome: str = ""
    problems: list = field(default_factory=list)


class Worker:
    """One worker subprocess; ``run`` returns its answer or None when it hung or died (then it is replaced)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.started = 0

    def start(self) -> None:
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", NBPROF_LOAD_PROCESSES="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.worker"], cwd=str(ROOT), env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1)
        self.started += 1
        line = self._readline(120)
        if not line or "hello" not in line:
            raise RuntimeError("fuzz worker did not start")

    def _readline(self, timeout: float) -> str | None:
        assert self.proc and self.proc.stdout
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return None
        return self.proc.stdout.readline() or None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        p, self.proc = self.proc, None
        if p.poll() is None:
            p.kill()
        try:
            return p.wait(10)
        except subprocess.TimeoutExpired:
            return None

    def run(self, req: dict, hard_timeout: float) -> tuple[dict | None, str]:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc and self.proc.stdin
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            rc = self.stop()
            return None, f"worker died before the case (exit {rc})"
        line = self._readline(hard_timeout)
        if line is None:
            alive = self.proc.poll() is None
            rc = self.stop()
            return None, ("worker unresponsive past the hard timeout: killed" if alive else f"worker died (exit {rc})")
        return json.loads(line), ""


def _listing(d: str) -> set[str]:
    out = set()
    for root, dirs, files in os.walk(d, followlinks=False):
        rel = os.path.relpath(root, d)
        for n in dirs + files:
            out.add(os.path.normpath(os.path.join(rel, n)))
    return out


class Generator:
    """Makes case inputs, deterministically from (seed, format, index)."""

    def __init__(self, seed: int, seeds: dict[str, list[Path]]) -> None:
        self.seed = seed
        self.seeds = seeds
        self._raw: dict[Path, bytes] = {}
        self._plain: dict[Path, bytes] = {}
        self._snap: dict[Path, dict] = {}

    def rng(self, fmt: str, i: int) -> random.Random:
        return random.Random(f"{self.seed}/{fmt}/{i}")

    def raw(self, p: Path) -> bytes:
        if p not in self._raw:
            self._raw[p] = p.read_bytes()
            b = self._raw[p]
            self._plain[p] = gzip.decompress(b) if M.gz_magic(b) else b
        return self._raw[p]

    def plain(self, p: Path) -> bytes:
        self.raw(p)
        return self._plain[p]

    def snap(self, p: Path) -> dict:
        if p not in self._snap:
            with open(p, "rb") as fh:  # the seed: built by seeds.py from the repository's own data/
                self._snap[p] = pickle.load(fh)  # noqa: S301
        return self._snap[p]

    def make(self, fmt: str, i: int, d: str) -> tuple[str, str, str]:
        """Write case ``i`` of ``fmt`` into folder ``d``: (target, path, description)."""
        rng = self.rng(fmt, i)
        if fmt == "special":
            return self._special(rng, i, d)
        seeds = self.seeds[fmt]
        seed = seeds[i % len(seeds)] if i < len(seeds) else rng.choice(seeds)
        path = os.path.join(d, seed.name)
        if i < len(seeds):  # the unmutated seeds come first
            if fmt == "nsys":
                shutil.copyfile(seed, path)
            else:
                Path(path).write_bytes(self.raw(seed))
            return fmt, path, f"unmutated seed {seed.name}"
        if fmt in ("kineto", "timeline"):
            key = "traceEvents" if fmt == "kineto" else None
            plain = self.plain(seed)
            gz = seed.name.endswith(".gz")

            def mut(r, b):
                out, desc = M.text_json_mutation(r, b, key)
                if r.random() < 0.25:
                    out, d2 = M.text_json_mutation(r, out, key)
                    desc = f"{desc}; {d2}"
                return out, desc

            if gz and rng.random() < 0.5:
                data, desc = M.gzip_mutation(rng, plain, mut)
            else:
                data, desc = mut(rng, plain)
                if gz:
                    data = gzip.compress(data, mtime=0)
                elif rng.random() < 0.04:
                    data = gzip.compress(data, mtime=0)
                    desc += "; gzip content in a plain-named file"
            Path(path).write_bytes(data)
            return fmt, path, f"{seed.name}: {desc}"
        if fmt == "snapshot":
            data, desc = M.snapshot_mutation(rng, self.snap(seed))
            Path(path).write_bytes(data)
            return fmt, path, f"{seed.name}: {desc}"
        if fmt == "nsys":
            shutil.copyfile(seed, path)
            desc = M.nsys_mutation(rng, path)
            for ext in ("-wal", "-shm", "-journal"):  # the mutation's own side files are not the loader's
                if os.path.exists(path + ext):
                    os.unlink(path + ext)
            if rng.random() < 0.08:
                data, d2 = M.byte_mutation(rng, Path(path).read_bytes())
                Path(path).write_bytes(data)
                desc += f"; file bytes: {d2}"
            return fmt, path, f"{seed.name}: {desc}"
        if fmt == "deepspeed":
            data, desc = M.deepspeed_mutation(rng, self.plain(seed).decode("utf-8", "replace"))
            Path(path).write_bytes(data)
            return fmt, path, f"{seed.name}: {desc}"
        raise ValueError(fmt)

    def _special(self, rng: random.Random, i: int, d: str) -> tuple[str, str, str]:
        combos = [(t, n, k) for k in SPECIAL_KINDS for t in SPECIAL_NAMES if t in self.seeds or t == "kineto"
                  for n in SPECIAL_NAMES[t]]
        target, name, kind = combos[i % len(combos)]
        p = os.path.join(d, name)
        if kind == "fifo":
            os.mkfifo(p)
        elif kind == "dir":
            os.mkdir(p)
        elif kind == "empty":
            Path(p).write_bytes(b"")
        elif kind == "devnull":
            os.symlink(os.devnull, p)
        elif kind == "devzero":
            os.symlink("/dev/zero", p)
        elif kind == "dangling":
            os.symlink(os.path.join(d, "no-such-target"), p)
        elif kind == "bom-only":
            Path(p).write_bytes(b"\xef\xbb\xbf")
        elif kind == "gzip-empty":
            Path(p).write_bytes(gzip.compress(b"", mtime=0))
        else:
            Path(p).write_bytes(b" \n\t\r\n" * 3)
        return target, p, f"special input: {kind} named {name}"


def _schedule(n: int, fmts: list[str]) -> list[tuple[str, int]]:
    w = {f: WEIGHTS[f] for f in fmts}
    tot = sum(w.values())
    counts = {f: max(1, round(n * w[f] / tot)) for f in fmts}
    while sum(counts.values()) > n and any(c > 1 for c in counts.values()):
        f = max(counts, key=counts.get)
        counts[f] -= 1
    items = [((j + 0.5) / counts[f], k, f, j) for k, f in enumerate(fmts) for j in range(counts[f])]
    items.sort()
    return [(f, j) for _, _, f, j in items]


def _signature(fmt: str, target: str, p: dict) -> tuple:
    return (p["outcome"], target if fmt != "special" else f"special/{target}", p["stage"], p["exc_type"], p["where"])


def run_fuzz(seed: int = 0, cases: int = 1000, time_budget: float | None = None, formats: list[str] | None = None,
             out_dir: str | os.PathLike[str] | None = None, timeout: float = 5.0, analyses_rate: float = 1.0,
             html_rate: float = 0.05, keep_per_signature: int = 3, replay: tuple[str, int] | None = None,
             progress: bool = False, log=print) -> dict:
    """Run the fuzzer; returns {"counts": {fmt: Counter}, "signatures": {...}, "cases": n, "elapsed": s, ...}."""
    t0 = time.monotonic()
    seeds, skipped = build_seeds()
    fmts = [f for f in (formats or FORMATS) if f in FORMATS and (f == "special" or f in seeds)]
    for f in formats or FORMATS:
        if f in skipped:
            log(f"format {f} skipped: {skipped[f]}")
    gen = Generator(seed, seeds)
    sched = _schedule(cases, fmts) if replay is None else [(replay[0], j) for j in
                                                            sorted({*range(min(replay[1], len(seeds.get(replay[0], [])))), replay[1]})]
    base = tempfile.mkdtemp(prefix="nbprof-fuzz-")
    out = Path(out_dir) if out_dir else None
    strict_kw: dict[str, bool] = {}
    counts: dict[str, Counter] = defaultdict(Counter)
    times: dict[str, float] = defaultdict(float)
    sigs: dict[tuple, dict] = {}
    worker = Worker()
    done = 0
    stopped = ""
    try:
        for fmt, j in sched:
            if time_budget is not None and time.monotonic() - t0 > time_budget:
                stopped = f"time budget of {time_budget:.0f} s reached after {done} of {len(sched)} cases"
                break
            d = os.path.join(base, f"{fmt}-{j}")
            os.mkdir(d)
            rng = random.Random(f"{seed}/{fmt}/{j}/run")
            try:
                target, path, desc = gen.make(fmt, j, d)
            except Exception as exc:  # noqa: BLE001 -- a generator bug must not stop the run
                log(f"generator error for {fmt}:{j}: {type(exc).__name__}: {exc}")
                shutil.rmtree(d, ignore_errors=True)
                continue
            case = Case(fmt, j, target, path, desc, d, strict_kw.get(target, True),
                        analyses=rng.random() < analyses_rate, html=rng.random() < html_rate)
            outd = os.path.join(base, f"out-{fmt}-{j}")
            os.mkdir(outd)
            before = _listing(d)
            req = {"id": f"{fmt}:{j}", "target": target, "path": path, "timeout": timeout, "strict_kw": case.strict_kw,
                   "analyses": case.analyses, "html": case.html, "outdir": outd}
            tc = time.monotonic()
            res, why = worker.run(req, hard_timeout=timeout * 2 + 15)
            times[fmt] += time.monotonic() - tc
            if res is None:
                case.outcome = "HANG" if "unresponsive" in why else "FOREIGN"
                case.problems = [{"outcome": case.outcome, "stage": "worker", "exc_type": "WorkerLost", "message": why,
                                  "where": "?", "traceback": why}]
            else:
                case.problems = res["problems"]
                case.outcome = res["outcome"]
            after = _listing(d)
            new = sorted(after - before)
            if new:
                case.problems.append({"outcome": "WROTE-NEXT-TO-INPUT", "stage": "listing", "exc_type": "-",
                                      "message": f"new next to the input: {new}", "where": "files: " + ", ".join(
                                          sorted({n.replace(os.path.basename(path), "<input>") for n in new})),
                                      "traceback": ""})
            for p in case.problems:
                if p["stage"] == "load" or p["stage"].startswith("deepspeed") or p["outcome"] != "nbprof-error":
                    if _RANK[p["outcome"]] > _RANK[case.outcome]:
                        case.outcome = p["outcome"]
            # the seed case shows whether the loader takes strict=False; later cases follow it
            if j < len(seeds.get(fmt, [])) and fmt != "special" and target not in strict_kw:
                strict_kw[target] = not any(p["exc_type"] == "TypeError" and "strict" in p["message"]
                                            for p in case.problems)
            counts[fmt][case.outcome] += 1
            for p in case.problems:
                if p["outcome"] in FAILURES:
                    sig = _signature(fmt, target, p)
                    ent = sigs.setdefault(sig, {"count": 0, "example": f"{fmt}:{j}", "mutation": desc,
                                                "message": p["message"][:300]})
                    ent["count"] += 1
                    if out is not None and ent["count"] <= keep_per_signature:
                        _record(out, seed, case, p, sig)
            if replay is not None and j == replay[1]:
                for p in case.problems:
                    log(p["traceback"] or p["message"])
                log(f"replay {fmt}:{j}: {case.outcome} ({desc})")
            done += 1
            if progress and done % 200 == 0:
                log(f"... {done} cases, {time.monotonic() - t0:.0f} s")
            shutil.rmtree(d, ignore_errors=True)
            shutil.rmtree(outd, ignore_errors=True)
    finally:
        worker.stop()
        shutil.rmtree(base, ignore_errors=True)
    return {"counts": {f: dict(c) for f, c in counts.items()}, "signatures": sigs, "cases": done,
            "elapsed": time.monotonic() - t0, "stopped": stopped, "skipped": skipped, "strict_kw": strict_kw,
            "workers_started": worker.started, "seconds": dict(times)}


def _record(out: Path, seed: int, case: Case, p: dict, sig: tuple) -> None:
    d = out / case.fmt / f"{p['outcome']}-{case.index}"
    d.mkdir(parents=True, exist_ok=True)
    info = {"seed": seed, "format": case.fmt, "index": case.index, "target": case.target, "mutation": case.mutation,
            "outcome": p["outcome"], "stage": p["stage"], "exc_type": p["exc_type"], "where": p["where"],
            "message": p["message"], "signature": list(sig), "input_name": os.path.basename(case.path),
            "replay": f"python -m tests.fuzz --seed {seed} --replay {case.fmt}:{case.index}"}
    src = case.path
    if os.path.isfile(src) and not os.path.islink(src):
        shutil.copyfile(src, d / ("input-" + os.path.basename(src)))
    else:
        info["input_kind"] = ("fifo" if os.path.exists(src) and not os.path.isfile(src) and not os.path.isdir(src)
                              else "dir" if os.path.isdir(src) else "symlink" if os.path.islink(src) else "other")
        if os.path.islink(src):
            info["link_target"] = os.readlink(src)
    (d / "case.json").write_text(json.dumps(info, indent=1, default=str))
    (d / "traceback.txt").write_text(p.get("traceback") or p["message"])


def format_summary(res: dict) -> str:
    """Per-format counts per outcome, then the distinct failure signatures."""
    lines = []
    head = f"{'format':<10}" + "".join(f"{o:>14}" for o in OUTCOMES) + f"{'total':>8}"
    lines.append(head)
    tot = Counter()
    for f in FORMATS:
        c = res["counts"].get(f)
        if not c:
            continue
        tot.update(c)
        ms = 1000 * res.get("seconds", {}).get(f, 0.0) / max(1, sum(c.values()))
        lines.append(f"{f:<10}" + "".join(f"{c.get(o, 0):>14}" for o in OUTCOMES) + f"{sum(c.values()):>8}"
                     + f"{ms:>9.0f} ms/case")
    lines.append(f"{'all':<10}" + "".join(f"{tot.get(o, 0):>14}" for o in OUTCOMES) + f"{sum(tot.values()):>8}")
    lines.append(f"{res['cases']} cases in {res['elapsed']:.1f} s ({res['workers_started']} worker starts)"
                 + (f"; {res['stopped']}" if res["stopped"] else ""))
    if res.get("strict_kw"):
        no = [t for t, ok in res["strict_kw"].items() if not ok]
        if no:
            lines.append(f"loaders that refuse strict=False (called without it after their seed case): {', '.join(no)}")
    if res["signatures"]:
        lines.append("failure classes (outcome | format | stage | exception | where: count, example):")
        for sig, ent in sorted(res["signatures"].items(), key=lambda kv: (-kv[1]["count"], kv[0])):
            lines.append(f"  {' | '.join(sig)}: {ent['count']}  e.g. {ent['example']} [{ent['mutation'][:120]}]"
                         f" -- {ent['message'][:160]!r}")
    return "\n".join(lines)


def failure_total(res: dict) -> int:
    return sum(c.get(o, 0) for c in res["counts"].values() for o in FAILURES)
