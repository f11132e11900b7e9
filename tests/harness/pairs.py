"""The validation harness (issue 30): before/after pairs where the real fix is known, and what nbprof says of the
"before" run -- the bound, the finding ranked first, the predicted saving -- set against the measured saving.

A pair's *measured saving* is the mean step of the before run minus that of the after run, each over its
steady-state steps (``steps.step_times(tr, steady=True)``: the steps and step time the verdict and the findings'
savings average, warm-up left out), scaled to the same samples where the fix changes the batch. Its *predicted
saving* is the ``predicted_saving_ns`` of the before run's finding of the fix's rule (None: not quantified), a
replay's saving over the same steady steps (``findings.steady_saving``); so is a knob's. A pair is *disturbed*
when the work the fix does not touch (``untouched`` ops) differs between the two runs by more than :data:`GUARD` in
every round, or when its rounds' measured savings disagree by more than half their mean (the machine's load changed
between the runs): its error then measures load, not the prediction (the guard of
``tests/test_analysis_whatif.py``), and it is reported but left out of the error targets.

``evaluate(pairs)`` -> one row per pair; ``summary(rows)`` -> the targets' numbers; ``markdown(rows)`` -> the table of
``docs/harness.md`` (``scripts/harness_table.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import nbprof
from nbprof.analysis import advisor, whatif
from nbprof.analysis.findings import steady_saving
from nbprof.analysis.steps import step_times
from nbprof.analysis.verdict import verdict

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DATA = ROOT / "data"
CORPUS = Path(os.environ.get("NBPROF_CORPUS", ROOT.parent / "shared" / "corpus"))
#: the untouched work of the two runs may differ by this factor before a pair counts as disturbed
GUARD = 1.35
#: a measured saving under this (ns per step) is run-to-run noise on these CPU pairs, not a measurement of the fix: three
#: consecutive quiet runs (load 1.3, CPU pressure 2%) measured print_tensor's saving at 3.3, 0.6 and 2.2 ms
NOISE_FLOOR_NS = 1_000_000
V100 = "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_{}/"


@dataclass
class Pair:
    """One before/after pair: ``fix_rule`` is the advisor rule whose finding names the real fix."""

    name: str
    kind: str
    fix_rule: str
    before: Callable[[int], nbprof.Trace | list[nbprof.Trace]]  # round -> the trace (or every rank's)
    after: Callable[[int], nbprof.Trace | list[nbprof.Trace]]
    samples_ratio: float = 1.0  # after's samples per step / before's (tiny_batch: 16)
    untouched: str = r"^aten::addmm$"  # ops the fix leaves alone (the guard); "" = no guard
    rank: int = 0  # which rank's step (multi-rank pairs)
    rounds: int = 1
    #: the knob scenario that is the real fix (``whatif.dataloader_workers(4)``), predicted beside the finding's
    knob: whatif.Change | None = None
    #: why the pair's error is what it is, when known (the table's note column)
    note: str = ""


def cpu_pairs(out: Path, names: Sequence[str] | None = None, rounds: int = 2) -> list[Pair]:
    """Run the CPU workloads (``workloads.py``, one subprocess, ``rounds`` before/after rounds) into ``out`` and
    return their pairs."""
    from workloads import WORKLOADS  # tests/harness on sys.path

    names = list(WORKLOADS) if names is None else list(names)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, str(HERE / "workloads.py"), str(out), str(rounds), *names], check=True,
                   capture_output=True, timeout=900, env=env)
    kinds = {"dataloader": ("input pipeline: DataLoader workers", "dataloader"),
             "slow_collate": ("input pipeline: slow collate_fn", "dataloader"),
             "print_tensor": ("print(tensor) per step", "step_io"),
             "logging": ("logging a tensor per step", "step_io"),
             "checkpoint": ("torch.save every step", "step_io"),
             "optimizer": ("per-parameter optimizer loop (foreach)", "optimizer_loop"),
             "python_metrics": (".item() per sample (metrics)", "host_sync"),
             "tiny_batch": ("tiny batch (4 vs 64)", "tiny_batch")}
    pairs = []
    for n in names:
        kind, rule = kinds[n]

        def load(v: str, r: int, n: str = n) -> nbprof.Trace:
            return nbprof.load(out / f"{n}.{v}.r{r}.pt.trace.json")

        pairs.append(Pair(n, kind, rule, lambda r, load=load: load("before", r), lambda r, load=load: load("after", r),
                          samples_ratio=16.0 if n == "tiny_batch" else 1.0,
                          # tiny_batch changes the model's ops by design; after torch.save the next step's matmuls run
                          # ~10x slower (measured in every run, quiet or not: the file's write-back competes), so
                          # the fix does touch them
                          untouched="" if n in ("tiny_batch", "checkpoint") else r"^aten::addmm$", rounds=rounds,
                          # the after runs' DataLoader(num_workers=4) on this machine's cores
                          knob=whatif.dataloader_workers(4) if n in ("dataloader", "slow_collate") else None))
    return pairs


def straggler_pair(out: Path, sleep_s: float = 0.03, steps: int = 4) -> Pair:
    """The 2-rank gloo DDP job of ``tests/workloads/ddp_straggler.py``: rank 1 sleeps ``sleep_s`` per step (before)
    or not (after); measured on rank 0's step."""
    from nbprof.deepspeed.run import free_port

    def run(sub: str, s: float) -> list[nbprof.Trace]:
        d = out / sub
        d.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
                "--master_port", str(free_port()), str(ROOT / "tests" / "workloads" / "ddp_straggler.py"), str(d),
                "--sleep", str(s), "--steps", str(steps)]
        subprocess.run(argv, check=True, capture_output=True, timeout=300, cwd=str(d),
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
        return [nbprof.load(d / f"rank{r}.pt.trace.json") for r in (0, 1)]

    return Pair("straggler", "2-rank gloo straggler (rank 1 sleeps)", "straggler", lambda r: run(f"before{r}", sleep_s),
                lambda r: run(f"after{r}", 0.0), untouched=r"^aten::addmm$")


def contention_pair(out: Path, hogs: int = 2, rounds: int = 2) -> Pair:
    """CPU contention: ``tests/workloads/contended_loop.py`` pinned to one CPU with ``hogs`` busy processes pinned
    there too (before) vs alone (after), through nbprof's capture (its run-queue numbers are the finding's evidence
    and saving); ``rounds`` interleaved rounds (``tests/_support/contention.py``)."""
    from _support.contention import capture_contended, loop_cpu  # tests/ on sys.path (pytest, scripts/harness_table.py)

    cpu = loop_cpu()
    return Pair("cpu_contention", f"CPU contention ({hogs} busy processes on the loop's CPU)", "cpu_contention",
                lambda r: capture_contended(out / f"cpu_contention.before.r{r}.pt.trace.json", cpu, hogs=hogs),
                lambda r: capture_contended(out / f"cpu_contention.after.r{r}.pt.trace.json", cpu),
                untouched="", rounds=rounds,  # every op waits: nothing is untouched (the rounds' spread guards it)
                note="the saving is the before run's measured run-queue wait; an after run that still waits for a CPU "
                     "(other processes of a shared machine) measures less by that wait (tests/test_cpu_contention.py)")


def gpu_pairs() -> list[Pair]:
    """The real GPU pairs: data/gpu's H200 CNN (num_workers 0 -> 4, 1 ms preprocessing per sample) and the corpus
    V100 ResNet-50 (torch-tb-profiler's num_workers 0 -> 4 samples; skipped when the corpus is absent)."""
    out = [Pair("h200_cnn_workers", "GPU input pipeline (H200 CNN, workers 0 -> 4)", "dataloader",
                lambda r: nbprof.load(DATA / "gpu" / "cnn_nw0_prep.pt.trace.json.gz"),
                lambda r: nbprof.load(DATA / "gpu" / "cnn_nw4_prep.pt.trace.json.gz"), untouched="",
                knob=whatif.dataloader_workers(4, cores=16))]  # the H200 host's 16 cores (data/gpu/env.json)
    d0, d4 = CORPUS / V100.format(0), CORPUS / V100.format(4)
    if d0.is_dir() and d4.is_dir():
        out.append(Pair("v100_resnet50_workers", "GPU input pipeline (V100 ResNet-50, workers 0 -> 4)", "dataloader",
                        lambda r: nbprof.load(next(d0.glob("*.pt.trace.json*"))),
                        lambda r: nbprof.load(next(d4.glob("*.pt.trace.json*"))), untouched="",
                        # a DGX Station (Tesla V100-DGXS-32GB: a 20-core Xeon E5-2698 v4)
                        knob=whatif.dataloader_workers(4, cores=20),
                        note="the data wait is predicted right (after: <= 1.4 ms/step; predicted step within 7% of "
                             "the after median); the after run's first step waits 40 ms on device work queued before "
                             "the window and step 9's host work is 28 ms slower (tests/test_harness.py)"))
    return out


def _untouched_ns(tr: nbprof.Trace, pattern: str) -> float:
    import re

    ev = tr.events
    rx = re.compile(pattern)
    m = ev["name"].astype(str).map(lambda n: rx.search(n) is not None).to_numpy(bool) & (ev["device"].to_numpy() < 0)
    n = max(int(ev["name"].astype(str).str.startswith("ProfilerStep#").sum()), 1)
    return float(ev.loc[m, "dur_ns"].sum()) / n


def _round(p: Pair, r: int) -> dict:
    b, a = p.before(r), p.after(r)
    ranks = b if isinstance(b, list) else None
    tb = b[p.rank] if isinstance(b, list) else b
    ta = a[p.rank] if isinstance(a, list) else a
    fs = advisor.advise(tb, ranks=tuple(ranks) if ranks else None)
    v = verdict(tb, findings=fs, ranks=ranks)
    pos = next((i for i, f in enumerate(fs, 1) if f.rule == p.fix_rule), 0)
    fix = fs[pos - 1] if pos else None
    pred = fix.predicted_saving_ns if fix is not None and fix.quantified else None
    # the step time a report page shows (the verdict's, the findings' savings'): the steady-state steps
    mb = float(step_times(tb, steady=True).mean())
    knob = steady_saving(tb, whatif.predict(tb, p.knob))[0] if p.knob is not None else None
    ma = float(step_times(ta, steady=True).mean()) / p.samples_ratio
    ratio = float("nan")
    if p.untouched:
        ub, ua = _untouched_ns(tb, p.untouched), _untouched_ns(ta, p.untouched)
        ratio = ub / ua if ua > 0 else float("nan")
    return dict(bound=v.bound, first_rule=fs[0].rule if fs else "", fix_rank=pos, predicted_ns=pred, knob_ns=knob,
                reason="" if pred is not None else (fix.saving_reason if fix else "no finding of the fix's rule"),
                measured_ns=mb - ma, before_step_ns=mb, after_step_ns=ma, untouched_ratio=ratio,
                disturbed=bool(p.untouched) and not (1 / GUARD <= ratio <= GUARD))


def evaluate(pairs: Sequence[Pair]) -> list[dict]:
    """One row per pair: ``name, kind, fix_rule, bound, first_rule, fix_rank`` (1-based position of the fix's finding
    in the ranking, 0 when absent), ``predicted_ns`` (None: not quantified), ``reason`` (why not), ``measured_ns``,
    ``error`` (predicted / measured - 1; None when either is missing), ``disturbed`` (the guard), ``untouched_ratio``,
    ``rounds`` (undisturbed rounds used). With several rounds the numbers are the means over the undisturbed rounds
    (all rounds, marked disturbed, when none is); the bound and the ranking are the first such round's."""
    rows = []
    for p in pairs:
        rs = [_round(p, r) for r in range(p.rounds)]
        quiet = [x for x in rs if not x["disturbed"]] or rs
        row = dict(quiet[0], name=p.name, kind=p.kind, fix_rule=p.fix_rule, rounds=len(quiet))
        for k in ("measured_ns", "before_step_ns", "after_step_ns", "untouched_ratio"):
            row[k] = float(np.mean([x[k] for x in quiet]))
        preds = [x["predicted_ns"] for x in quiet if x["predicted_ns"] is not None]
        row["predicted_ns"] = float(np.mean(preds)) if len(preds) == len(quiet) else None
        row["knob"] = str(p.knob) if p.knob is not None else ""
        row["note"] = p.note
        row["knob_ns"] = float(np.mean([x["knob_ns"] for x in quiet])) if p.knob is not None else None
        row["knob_error"] = (row["knob_ns"] / row["measured_ns"] - 1) if row["knob_ns"] is not None \
            and row["measured_ns"] > 0 else None
        row["error"] = (row["predicted_ns"] / row["measured_ns"] - 1) if row["predicted_ns"] is not None \
            and row["measured_ns"] > 0 else None
        ms_ = [x["measured_ns"] for x in quiet]
        # rounds whose measured savings disagree by more than half their mean measured load, not the fix
        row["rounds_disagree"] = len(ms_) >= 2 and (max(ms_) - min(ms_)) > 0.5 * abs(float(np.mean(ms_)))
        row["under_noise"] = 0 <= row["measured_ns"] < NOISE_FLOOR_NS
        row["disturbed"] = all(x["disturbed"] for x in rs) or row["rounds_disagree"] or row["under_noise"]
        rows.append(row)
    return rows


def summary(rows: Sequence[dict]) -> dict:
    """The issue's targets on ``rows``: ``pairs``, ``right_first`` (fix ranked first), ``quantified`` (undisturbed
    pairs with a prediction), ``median_abs_error``, ``max_factor`` (worst predicted/measured or its inverse)."""
    q = [r for r in rows if r["error"] is not None and not r["disturbed"]]
    errs = [abs(r["error"]) for r in q]
    factors = [max((1 + r["error"]), 1 / (1 + r["error"])) if 1 + r["error"] > 0 else float("inf") for r in q]
    return dict(pairs=len(rows), right_first=sum(r["fix_rank"] == 1 for r in rows), quantified=len(q),
                median_abs_error=float(np.median(errs)) if errs else float("nan"),
                max_factor=max(factors) if factors else float("nan"))


def _ms(ns: float | None) -> str:
    return "-" if ns is None or ns != ns else f"{ns / 1e6:.1f}"


def markdown(rows: Sequence[dict]) -> str:
    """The harness table (Markdown), then the summary line, then the knob scenarios' table (pairs with a knob)."""
    head = ("| pair | kind | bound named | first finding | fix's rank | predicted saving (ms/step) | "
            "measured saving (ms/step) | error | note |\n|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        err = "-" if r["error"] is None else f"{100 * r['error']:+.0f}%"
        note = "; ".join(x for x in (
            ("disturbed (rounds disagree)" if r.get("rounds_disagree") else
             "disturbed (measured saving under 1 ms: run-to-run noise)" if r.get("under_noise") else
             "disturbed (untouched work x{:.2f})".format(r["untouched_ratio"])) if r["disturbed"] else "",
            r["reason"].replace("|", "/")[:100] if r["predicted_ns"] is None else "",
            r.get("note", "").replace("|", "/")) if x)
        lines.append(f"| {r['name']} | {r['kind']} | {r['bound']} | {r['first_rule']} | {r['fix_rank'] or 'absent'} | "
                     f"{_ms(r['predicted_ns'])} | {_ms(r['measured_ns'])} | {err} | {note} |")
    s = summary(rows)
    foot = (f"\nRight fix first: **{s['right_first']} of {s['pairs']}**. Quantified and undisturbed: {s['quantified']}; "
            f"median absolute error of the saving: **{100 * s['median_abs_error']:.0f}%** of the measured saving; "
            f"worst: **{s['max_factor']:.2f}x** off.\n")
    kn = [r for r in rows if r.get("knob")]
    knobs = ""
    if kn:
        knobs = ("\nKnob scenarios (the fix as a what-if change of the *before* run, beside the finding's scenario):\n\n"
                 "| pair | knob | predicted saving (ms/step) | measured saving (ms/step) | error |\n|---|---|---|---|---|\n"
                 + "\n".join(f"| {r['name']} | `{r['knob']}` | {_ms(r['knob_ns'])} | {_ms(r['measured_ns'])} | "
                             + ("-" if r["knob_error"] is None else f"{100 * r['knob_error']:+.0f}%")
                             + (" (disturbed)" if r["disturbed"] else "") + " |" for r in kn) + "\n")
    return head + "\n".join(lines) + "\n" + foot + knobs
