"""``python -m nbprof.report_demo``: the demo's whole loop, what ``make demo`` runs (issue 20).

1. **Before**: ``examples/train_cnn.py --num-workers 0 --preprocess-ms P --preprocess-kind io --threads 1``
   profiled (torch.profiler; Nsight Systems too when it is installed): every batch is read in the training
   process (a blocking read of ``P`` ms per sample), the GPU (or CPU) waits.
2. **After** the DataLoader fix: the same script with ``--num-workers 2``: the workers overlap the reads.

The gain holds on a machine busy with other jobs: the batch's preparation *waits* (I/O) rather than computes, so the
workers do not compete with the training process for the cores, and the training process uses one intra-op thread
(a second OpenMP thread would wait for a busy core at every parallel region, so the step time would measure the
machine's load). The report's first screen gives the before/after ratio with its bootstrap interval.
3. **Distributed**: the 2-rank CPU DeepSpeed example (ZeRO-2, gloo; :func:`nbprof.deepspeed.run.run_example`),
   left out with a note when DeepSpeed is not installed.
4. ``nbprof report`` on all of it (:func:`nbprof.report.build_report`): step 1 and 2 on *before*, step 3 compares
   *before* with *after* (and shows both TensorBoard runs), step 4 the two ranks and DeepSpeed's own log.

Commands are argv lists (never a shell). Everything goes to a new ``demo-<time>`` folder inside ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .errors import NbprofError
from .report import Artefacts, ReportError, build_report, bundled_example, run_workload

__all__ = ["run_demo", "main"]


def run_demo(out_dir: str | os.PathLike[str] = "results", *, steps: int = 6, preprocess_ms: float = 5.0,
             workers_after: int = 2, use_nsys: bool = True, deepspeed: bool = True, progress: bool = False,
             log=print) -> Path:
    """Profile the before/after pair and the DeepSpeed example, then write the report.

    Parameters
    ----------
    out_dir : path
        A new ``demo-<YYYYmmdd-HHMMSS>`` folder is made inside it (runs, TensorBoard logdir, report).
    steps : int
        Training steps of each CNN run.
    preprocess_ms : float
        Synthetic read time per sample (``--preprocess-ms`` with ``--preprocess-kind io``): what makes
        ``--num-workers 0`` DataLoader-bound.
    workers_after : int
        ``--num-workers`` of the run after the fix.
    use_nsys : bool
        Profile the *before* run with Nsight Systems too (when it is installed).
    deepspeed : bool
        Run the 2-rank DeepSpeed example (skipped with a note when DeepSpeed is missing or fails).

    Returns
    -------
    pathlib.Path
        The report's HTML file.

    Raises
    ------
    ReportError
        A training run or a notebook failed (the message has the command and its last lines).
    """
    out = Path(out_dir).resolve() / time.strftime("demo-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=False)
    script = str(bundled_example("train_cnn.py"))
    common = ["--preprocess-ms", str(preprocess_ms), "--preprocess-kind", "io", "--threads", "1"]
    log(f"1/4 before: train_cnn.py --num-workers 0 {' '.join(common)}")
    before = run_workload(script, ["--num-workers", "0", *common], out / "before", steps=steps, use_nsys=use_nsys,
                          tensorboard=False, log=log)
    log(f"2/4 after the DataLoader fix: train_cnn.py --num-workers {workers_after} {' '.join(common)}")
    after = run_workload(script, ["--num-workers", str(workers_after), *common], out / "after", steps=steps,
                         use_nsys=False, tensorboard=False, log=log)
    art = Artefacts(trace=before.trace, compare_trace=after.trace, nsys_report=before.nsys_report,
                    notes=before.notes + after.notes)
    try:
        from .tensorboard import write_run

        for name, t in (("before", before.trace), ("after", after.trace)):
            write_run(t, str(out / "tb"), run=name)
        art.logdir = str(out / "tb")
    except (NbprofError, OSError, ValueError) as exc:
        art.notes.append(f"TensorBoard runs not written: {exc}")
    if deepspeed:
        log("3/4 the 2-rank CPU DeepSpeed example (ZeRO-2, gloo)")
        try:
            from .deepspeed.run import run_example

            ds = run_example(stage=2, out_dir=out / "deepspeed", timeout_s=300)
            art.ds_traces = [str(p) for p in ds.traces]
            if ds.stdout_path is not None:
                art.ds_log = str(_deepspeed_log(ds.stdout_path, ds.out_dir / "flops_rank0.txt"))
        except NbprofError as exc:
            art.notes.append(f"DeepSpeed example left out: {exc}".splitlines()[0])
            log(art.notes[-1])
    log("4/4 nbprof report")
    return build_report(art, out, progress=progress)


def _deepspeed_log(launch_log: Path, flops_file: Path) -> Path:
    """What DeepSpeed wrote, as one log for the report: the launcher's output, then the flops profiler's report
    (the example has rank 0 write it to its own file, ``flops_output_file``) when there is one."""
    if not flops_file.is_file():
        return launch_log
    out = launch_log.with_name("deepspeed.log")
    out.write_bytes(launch_log.read_bytes().rstrip(b"\n") + b"\n" + flops_file.read_bytes())
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line of :func:`run_demo`; prints where the report is. Exit status 1 with one line on failure."""
    p = argparse.ArgumentParser(prog="python -m nbprof.report_demo", description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results", help="folder for the demo-<time> folder (default ./results)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--preprocess-ms", type=float, default=5.0)
    p.add_argument("--workers-after", type=int, default=2)
    p.add_argument("--no-nsys", action="store_true", help="do not run Nsight Systems on the before run")
    p.add_argument("--no-deepspeed", action="store_true", help="leave the DeepSpeed example out")
    a = p.parse_args(argv)
    try:
        html = run_demo(a.out, steps=a.steps, preprocess_ms=a.preprocess_ms, workers_after=a.workers_after,
                        use_nsys=not a.no_nsys, deepspeed=not a.no_deepspeed)
    except (ReportError, NbprofError, FileNotFoundError) as exc:
        print(f"nbprof demo: error: {exc}", file=sys.stderr)
        return 1
    print(f"report: {html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
