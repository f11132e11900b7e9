"""The fuzz engine: case generation (deterministic per seed, format and index), the worker
subprocess, the invariants that need the parent (hang by hard kill, files written next to the
input), counting, and failure records.

Invariants per case:
1. only nbprof errors (``NbprofError`` subclasses) escape ``nbprof.load(path, strict=False)`` and the
   DeepSpeed parsers, and the analyses / static page run on a loaded result (``FOREIGN`` otherwise);
2. no hang: a per-case alarm in the worker, and a hard kill by the parent (``HANG``); a case that hits the
   limit once runs again (its worker restarted) with 5x the limit and is a ``HANG`` only if it hits that too;
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
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from . import containers as C
from . import mutate as M
from .seeds import ROOT, build_seeds

FORMATS = ("kineto", "nsys", "snapshot", "timeline", "deepspeed", "archive", "saved", "special")
OUTCOMES = ("ok-clean", "ok-repaired", "nbprof-error", "FOREIGN", "HANG", "WROTE-NEXT-TO-INPUT", "WROTE-OUTSIDE",
            "ACCOUNTING")
FAILURES = ("FOREIGN", "HANG", "WROTE-NEXT-TO-INPUT", "WROTE-OUTSIDE", "ACCOUNTING")
_RANK = {o: i for i, o in enumerate(("ok-clean", "ok-repaired", "nbprof-error", "ACCOUNTING", "WROTE-NEXT-TO-INPUT",
                                     "WROTE-OUTSIDE", "FOREIGN", "HANG"))}
# shares of the cases; "special" (FIFO, folder, empty, /dev/null, ... under each loader's suffix: 54 combinations)
# gets ~1.8 %, i.e. each combination about once per 3,000 cases
WEIGHTS = {"kineto": 0.36, "nsys": 0.09, "snapshot": 0.13, "timeline": 0.11, "deepspeed": 0.182, "archive": 0.06,
           "saved": 0.05, "special": 0.018}

SPECIAL_NAMES = {"kineto": ["trace.pt.trace.json", "trace.json.gz"], "nsys": ["report.sqlite"],
                 "snapshot": ["snap.pickle"], "timeline": ["tl.raw.json.gz"], "deepspeed": ["ds.log"],
                 "archive": ["ranks.zip", "ranks.tar.gz"], "saved": ["trace.nbprof"]}
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
    """One worker subprocess running one case at a time; replaced when it hangs past the hard
    timeout (killed) or dies."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.started = 0
        self.job: dict | None = None  # the case in flight: {"case", "req", "before", "outd", "t", "deadline"}

    def start(self) -> None:
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", NBPROF_LOAD_PROCESSES="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.worker"], cwd=str(ROOT), env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1)
        self.started += 1
        r, _, _ = select.select([self.proc.stdout], [], [], 180)
        line = self.proc.stdout.readline() if r else ""
        if "hello" not in line:
            self.stop()
            raise RuntimeError("fuzz worker did not start")

    def fileno(self) -> int:
        assert self.proc and self.proc.stdout
        return self.proc.stdout.fileno()

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

    def send(self, req: dict) -> str:
        """'' when sent, else why not (the worker is then replaced)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc and self.proc.stdin
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            return ""
        except (BrokenPipeError, OSError):
            return f"worker died before the case (exit {self.stop()})"

    def receive(self) -> tuple[dict | None, str]:
        assert self.proc and self.proc.stdout
        line = self.proc.stdout.readline()
        if not line:
            return None, f"worker died (exit {self.stop()})"
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
                self._snap[p] = pickle.load(fh)
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
            if fmt == "archive":  # an untampered archive of the seeds
                path = os.path.join(d, "ranks.zip")
                Path(path).write_bytes(C._zip([(f"rank{r}.pt.trace.json", self.plain(s)) for r, s in enumerate(seeds)],
                                              True))
                return fmt, path, "unmutated seed: zip of every Kineto seed"
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
        if fmt == "archive":  # the seeds are Kineto traces: ranks of an archive, then the archive tampered with
            data, name, desc = C.archive_case(rng, [(s.name, self.raw(s)) for s in seeds])
            path = os.path.join(d, name)
            Path(path).write_bytes(data)
            return fmt, path, desc
        if fmt == "saved":
            data, desc = C.saved_case(rng, self.raw(seed))
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


_NUM = re.compile(r"-?\d+(\.\d+)?(e[+-]?\d+)?")
_QUOTED = re.compile(r"b?'(?:[^'\\]|\\.)*'|b?\"(?:[^\"\\]|\\.)*\"")


def mutation_kind(fmt: str, desc: str) -> str:
    """The kind of a case's mutation: its description without the seed's name, the later mutations of a
    stacked case (after the first ';'), numbers (N) and quoted values (Q): "flip N bits", "duplicate key ts"."""
    if desc.startswith("unmutated seed"):
        return "unmutated seed"
    if fmt == "special":
        return desc.split(" named ")[0]
    head, sep, rest = desc.partition(": ")
    if sep and "." in head and " " not in head:  # "<seed file>: <mutation>"
        desc = rest
    desc = desc.split(";")[0].strip()
    desc = _QUOTED.sub("Q", desc)
    desc = _NUM.sub("N", desc)
    return desc[:70]


def _signature(fmt: str, target: str, p: dict) -> tuple:
    return (p["outcome"], target if fmt != "special" else f"special/{target}", p["stage"], p["exc_type"], p["where"])


def run_fuzz(seed: int = 0, cases: int = 1000, time_budget: float | None = None, formats: list[str] | None = None,
             out_dir: str | os.PathLike[str] | None = None, timeout: float = 5.0, analyses_rate: float = 1.0,
             html_rate: float = 0.05, keep_per_signature: int = 3, replay: tuple[str, int] | None = None,
             progress: bool = False, log=print, jobs: int = 1, checkpoint: str | os.PathLike[str] | None = None,
             checkpoint_every: int = 250, resume: dict | None = None, stop_after: int | None = None) -> dict:
    """Run the fuzzer; returns {"counts": {fmt: Counter}, "signatures": {...}, "cases": n, "elapsed": s, ...}.

    ``checkpoint``: write the result so far there (:func:`write_json`, ``"partial": true``) every
    ``checkpoint_every`` cases, so a run stopped early (time, SIGTERM, Ctrl-C: the cases done are
    counted, ``stopped`` says why) still has its numbers. ``resume``: a result of an earlier run with the
    same seed and case count (:func:`read_json`): its cases are not run again and its counts are added.
    ``stop_after``: stop starting cases once that many are done (counting the resumed ones): a long run in parts.
    """
    t0 = time.monotonic()
    prev = resume or {}
    if prev and (prev.get("seed", seed), prev.get("cases_asked", cases)) != (seed, cases):
        raise ValueError(f"resume: the earlier run had seed {prev.get('seed')} and {prev.get('cases_asked')} cases, "
                         f"not {seed} and {cases}: another schedule")
    done_keys: dict[str, list[int]] = {f: list(v) for f, v in prev.get("done", {}).items()}
    skip = {(f, j) for f, v in done_keys.items() for j in v}
    seeds, skipped = build_seeds()
    fmts = [f for f in (formats or FORMATS) if f in FORMATS and (f == "special" or f in seeds)]
    for f in formats or FORMATS:
        if f in skipped:
            log(f"format {f} skipped: {skipped[f]}")
    gen = Generator(seed, seeds)
    if replay is None:
        sched = _schedule(cases, fmts)
    else:  # the seed cases (they decide strict_kw), then the one case
        sched = [(f, j) for f in seeds for j in range(len(seeds[f]))]
        sched = [x for x in sched if x != tuple(replay)] + [tuple(replay)]
    base = tempfile.mkdtemp(prefix="nbprof-fuzz-")
    out = Path(out_dir) if out_dir else None
    strict_kw: dict[str, bool] = dict(prev.get("strict_kw", {}))
    counts: dict[str, Counter] = defaultdict(Counter, {f: Counter(c) for f, c in prev.get("counts", {}).items()})
    times: dict[str, float] = defaultdict(float, prev.get("seconds", {}))
    # the workers' CPU seconds (load-independent cost)
    cpu: dict[str, float] = defaultdict(float, prev.get("cpu_seconds", {}))
    cpu_max: dict[str, float] = defaultdict(float, prev.get("cpu_max", {}))  # slowest case that did not hang
    kinds: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))  # format -> kind -> outcomes
    for f, ks in prev.get("kinds", {}).items():
        for k, c in ks.items():
            kinds[f][k].update(c)
    acct = [int(prev.get("accounting_checked", 0))]  # Kineto cases where the accounting invariant was checked
    sigs: dict[tuple, dict] = {tuple(k): v for k, v in prev.get("signatures", {}).items()}
    workers = [Worker() for _ in range(max(1, jobs))]
    done = int(prev.get("cases", 0))
    elapsed0 = float(prev.get("elapsed", 0.0))
    started0 = int(prev.get("workers_started", 0))
    stopped = ""
    # the worker's own clocks (CPU time, and wall time while blocked) end a case after ~timeout;
    # past this wall limit the worker is stuck where no signal handler runs (C code) and is killed

    retry: list[tuple[str, int, float]] = []  # cases that hit the per-case limit once: run again, 5x the limit

    def finish(w: Worker, res: dict | None, why: str) -> None:
        nonlocal done
        job, w.job = w.job, None
        case: Case = job["case"]
        times[case.fmt] += time.monotonic() - job["t"]
        hung = (res is None and "unresponsive" in why) or (
            res is not None and any(p["outcome"] == "HANG" for p in res["problems"]))
        if hung and job["limit"] == timeout:
            # one slow case on a busy machine (a GC pass of the worker's heap, another process on the core) is not
            # a hang: its worker is restarted and the case runs again with 5x the limit, and only counts then
            w.stop()
            retry.append((case.fmt, case.index, timeout * 5))
            shutil.rmtree(case.dirpath, ignore_errors=True)
            shutil.rmtree(job["outd"], ignore_errors=True)
            return
        if res is None:
            case.outcome = "HANG" if "unresponsive" in why else "FOREIGN"
            case.problems = [{"outcome": case.outcome, "stage": "worker", "exc_type": "WorkerLost", "message": why,
                              "where": "?", "traceback": why}]
        else:
            case.problems = res["problems"]
            case.outcome = res["outcome"]
            cpu[case.fmt] += res.get("cpu_s", 0.0)
            acct[0] += bool(res.get("accounting_checked"))
            if not any(p["outcome"] == "HANG" for p in case.problems):
                cpu_max[case.fmt] = max(cpu_max[case.fmt], res.get("cpu_s", 0.0))
        new = sorted(_listing(case.dirpath) - job["before"])
        if new:
            name = os.path.basename(case.path)
            case.problems.append({"outcome": "WROTE-NEXT-TO-INPUT", "stage": "listing", "exc_type": "-",
                                  "message": f"new next to the input: {new}",
                                  "where": "files: " + ", ".join(sorted({n.replace(name, "<input>") for n in new})),
                                  "traceback": ""})
        for p in case.problems:
            # an nbprof error of an analysis is a fine answer (EmptyProfileError); of the load it is the outcome
            counts_here = p["stage"] == "load" or p["stage"].startswith("deepspeed") or p["outcome"] != "nbprof-error"
            if counts_here and _RANK[p["outcome"]] > _RANK[case.outcome]:
                case.outcome = p["outcome"]
        # the seed case shows whether the loader takes strict=False; later cases follow it
        if case.mutation.startswith("unmutated seed") and case.target not in strict_kw:
            strict_kw[case.target] = not any(p["exc_type"] == "TypeError" and "strict" in p["message"]
                                             for p in case.problems)
        counts[case.fmt][case.outcome] += 1
        kinds[case.fmt][mutation_kind(case.fmt, case.mutation)][case.outcome] += 1
        for p in case.problems:
            if p["outcome"] in FAILURES:
                sig = _signature(case.fmt, case.target, p)
                ent = sigs.setdefault(sig, {"count": 0, "example": f"{case.fmt}:{case.index}",
                                            "mutation": case.mutation, "message": p["message"][:300]})
                ent["count"] += 1
                if out is not None and ent["count"] <= keep_per_signature:
                    _record(out, seed, case, p, sig)
        if replay is not None and (case.fmt, case.index) == tuple(replay):
            for p in case.problems:
                log(p["traceback"] or p["message"])
            log(f"replay {case.fmt}:{case.index}: {case.outcome} ({case.mutation})")
        done += 1
        done_keys.setdefault(case.fmt, []).append(case.index)
        if progress and done % 500 == 0:
            bad = sum(c.get(o, 0) for c in counts.values() for o in FAILURES)
            log(f"... {done} cases, {time.monotonic() - t0:.0f} s, {bad} failing"
                + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(_outcome_totals(counts).items()) if k in FAILURES)})"
                   if bad else "") + f", load average {os.getloadavg()[0]:.1f}")
        if checkpoint and done % max(1, checkpoint_every) == 0:
            write_json(result(partial=True), checkpoint)
        shutil.rmtree(case.dirpath, ignore_errors=True)
        shutil.rmtree(job["outd"], ignore_errors=True)

    def dispatch(w: Worker, fmt: str, j: int, limit: float | None = None) -> None:
        limit = timeout if limit is None else limit
        d = os.path.join(base, f"{fmt}-{j}")
        os.mkdir(d)
        rng = random.Random(f"{seed}/{fmt}/{j}/run")
        try:
            target, path, desc = gen.make(fmt, j, d)
        except Exception as exc:  # a generator bug must not stop the run
            log(f"generator error for {fmt}:{j}: {type(exc).__name__}: {exc}")
            shutil.rmtree(d, ignore_errors=True)
            return
        case = Case(fmt, j, target, path, desc, d, strict_kw.get(target, True),
                    analyses=rng.random() < analyses_rate, html=rng.random() < html_rate)
        outd = os.path.join(base, f"out-{fmt}-{j}")
        os.mkdir(outd)
        req = {"id": f"{fmt}:{j}", "target": target, "path": path, "timeout": limit, "strict_kw": case.strict_kw,
               "analyses": case.analyses, "html": case.html, "outdir": outd}
        now = time.monotonic()
        w.job = {"case": case, "before": _listing(d), "outd": outd, "t": now, "limit": limit,
                 "deadline": now + limit * 10 + 10}
        why = w.send(req)
        if why:
            finish(w, None, why)
        elif case.html:
            w.job["deadline"] += 60

    def run_phase(items: list[tuple[str, int]] | list[tuple[str, int, float]]) -> None:
        nonlocal stopped
        it = iter(items)
        exhausted = False
        while True:
            for w in workers:
                if w.job is None and not exhausted and not stopped:
                    if time_budget is not None and time.monotonic() - t0 > time_budget:
                        stopped = f"time budget of {time_budget:.0f} s reached after {done} of {len(sched)} cases"
                        break
                    if stop_after is not None and done + sum(x.job is not None for x in workers) >= stop_after:
                        stopped = f"stopped after {stop_after} cases (--stop-after)"
                        break
                    nxt = next(it, None)
                    if nxt is None:
                        exhausted = True
                        break
                    dispatch(w, *nxt)  # type: ignore[arg-type]
            busy = [w for w in workers if w.job is not None]
            if not busy:
                if exhausted or stopped:
                    return
                continue
            wait = max(0.0, min(w.job["deadline"] for w in busy) - time.monotonic())
            ready, _, _ = select.select(busy, [], [], wait)
            for w in ready:
                res, why = w.receive()
                finish(w, res, why)
            now = time.monotonic()
            for w in busy:
                if w.job is not None and w not in ready and now > w.job["deadline"]:
                    w.stop()
                    finish(w, None, "worker unresponsive past the hard timeout: killed")

    def result(partial: bool = False) -> dict:
        return {"counts": {f: dict(c) for f, c in counts.items()}, "signatures": sigs, "cases": done,
                "elapsed": elapsed0 + time.monotonic() - t0, "stopped": stopped, "skipped": skipped,
                "strict_kw": strict_kw, "workers_started": started0 + sum(w.started for w in workers),
                "seconds": dict(times), "jobs": len(workers), "cpu_seconds": dict(cpu), "cpu_max": dict(cpu_max),
                "accounting_checked": acct[0], "seed": seed, "cases_asked": cases, "partial": partial,
                "done": {f: sorted(v) for f, v in done_keys.items()},
                "kinds": {f: {k: dict(c) for k, c in sorted(ks.items())} for f, ks in kinds.items()}}

    sched = [x for x in sched if x not in skip]
    seeds_first = [(f, j) for f, j in sched if f != "special" and j < len(seeds.get(f, []))]
    try:
        run_phase(seeds_first)  # strict_kw is known for every target before the mutated cases
        first = set(seeds_first)
        run_phase([(f, j) for f, j in sched if (f, j) not in first])
        stopped_before, stopped = stopped, ""  # the retries run even after the time budget
        run_phase(list(retry))
        stopped = stopped_before
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM by the CLI: the cases done so far are the result
        stopped = f"interrupted after {done} of {len(sched) + len(skip)} cases (the cases in flight are not counted)"
        log(stopped)
    finally:
        for w in workers:
            w.stop()
        shutil.rmtree(base, ignore_errors=True)
    res = result()
    if checkpoint:
        write_json(res, checkpoint)
    return res


def _outcome_totals(counts: dict[str, Counter]) -> Counter:
    tot: Counter = Counter()
    for c in counts.values():
        tot.update(c)
    return tot


def write_json(res: dict, path: str | os.PathLike[str]) -> None:
    """Write a :func:`run_fuzz` result as JSON (signatures as a list; atomically: a stopped run leaves the last
    complete file)."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({**res, "signatures": [{"signature": list(k), **v} for k, v in res["signatures"].items()]}, fh,
                  indent=1, default=str)
    os.replace(tmp, path)


def read_json(path: str | os.PathLike[str]) -> dict:
    """A result written by :func:`write_json`, with its signatures keyed by tuple again."""
    with open(path) as fh:
        res = json.load(fh)
    res["signatures"] = {tuple(e.pop("signature")): e for e in res.get("signatures", [])}
    return res


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
        n = max(1, sum(c.values()))
        ms = 1000 * res.get("seconds", {}).get(f, 0.0) / n
        cms = 1000 * res.get("cpu_seconds", {}).get(f, 0.0) / n
        lines.append(f"{f:<10}" + "".join(f"{c.get(o, 0):>14}" for o in OUTCOMES) + f"{sum(c.values()):>8}"
                     + f"  {ms:.0f} ms/case ({cms:.0f} ms CPU, max {1000 * res.get('cpu_max', {}).get(f, 0.0):.0f})")
    lines.append(f"{'all':<10}" + "".join(f"{tot.get(o, 0):>14}" for o in OUTCOMES) + f"{sum(tot.values()):>8}"
                 + f"  {sum(res.get('cpu_seconds', {}).values()):.0f} s CPU in the workers")
    lines.append(f"{res['cases']} cases in {res['elapsed']:.1f} s with {res.get('jobs', 1)} worker(s) "
                 f"({res['workers_started']} worker starts); Kineto accounting checked on "
                 f"{res.get('accounting_checked', 0)} loaded cases"
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


def format_kinds(res: dict) -> str:
    """Cases per format and mutation kind (:func:`mutation_kind`), with the failing ones."""
    lines = ["cases per mutation kind (format: kind cases[/failing]):"]
    for f in FORMATS:
        ks = res.get("kinds", {}).get(f)
        if not ks:
            continue
        parts = []
        for k, c in sorted(ks.items(), key=lambda kv: -sum(kv[1].values())):
            bad = sum(c.get(o, 0) for o in FAILURES)
            parts.append(f"{k} {sum(c.values())}" + (f"/{bad}" if bad else ""))
        lines.append(f"  {f} ({len(ks)} kinds): " + ", ".join(parts))
    return "\n".join(lines)


def failure_total(res: dict) -> int:
    return sum(c.get(o, 0) for c in res["counts"].values() for o in FAILURES)
