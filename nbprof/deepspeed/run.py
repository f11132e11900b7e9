"""One call: run the 2-rank DeepSpeed example under torchrun and return traces plus parsed tables.

>>> run = nbprof.deepspeed.run_example(stage=2)           # doctest: +SKIP
>>> run.traces                            # rank0/rank1 Kineto traces  # doctest: +SKIP
>>> run.flops.summary, run.comms.summary  # flops-profiler / comms-logger tables  # doctest: +SKIP
>>> run.report().overlap                  # nbprof.analysis.distributed over the ranks  # doctest: +SKIP

The command is an argv list (never a shell string): ``python -m torch.distributed.run --nproc_per_node 2
--master_addr 127.0.0.1 --master_port <free port> -m nbprof.deepspeed.example --stage ...``. On CPU the
ranks use gloo, ``torch_adam`` and skip DeepSpeed's shared-memory op build (../shared/notes/feasibility.md §3).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CaptureError
from .parsers import CommsLog, DeepSpeedLog, FlopsProfile, parse_flops_profile, parse_log

__all__ = ["DeepSpeedRun", "run_example", "run_examples", "free_port"]

_MARK = re.compile(r"^=== nbprof zero stage (\d{1,9}) ===\s*$", re.M)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DeepSpeedRun:
    """What one ZeRO stage of the example produced.

    Attributes
    ----------
    stage : int
    out_dir : pathlib.Path
    traces : list of pathlib.Path
        Per-rank Kineto traces (``rank{R}.steps{S}-{E}.pt.trace.json.gz``), sorted by rank.
    flops : FlopsProfile or None
        Rank 0's flops-profiler report (``flops_rank0.txt``).
    log : DeepSpeedLog
        The launch's stdout for this stage, parsed (comms table, per-op lines, timers).
    rank_info : list of dict
        Per rank (``rank{R}.comms.json``): ``model_params``, ``zero_stage``, ``optimizer``, ``backend``,
        ``comms_total`` / ``comms_window`` (comms-logger call counts per op: whole run / inside the window).
    stdout_path : pathlib.Path
    """

    stage: int
    out_dir: Path
    traces: list[Path]
    flops: FlopsProfile | None
    log: DeepSpeedLog
    rank_info: list[dict[str, Any]] = field(default_factory=list)
    stdout_path: Path | None = None

    @property
    def comms(self) -> CommsLog:
        """The comms-logger tables of this stage (``log.comms``)."""
        return self.log.comms

    def load_traces(self) -> list:
        """The per-rank traces as :class:`nbprof.Trace` (rank from ``distributedInfo``)."""
        from ..sources import load

        return [load(p) for p in self.traces]

    def report(self):
        """:func:`nbprof.analysis.distributed.distributed_report` over :meth:`load_traces`."""
        from ..analysis.distributed import distributed_report

        return distributed_report(self.load_traces())


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _rank_of(path: Path) -> int:
    m = re.match(r"rank(\d{1,9})(?!\d)", path.name)
    return int(m.group(1)) if m else -1


def run_examples(
    stages: Sequence[int] = (1, 2, 3),
    *,
    nproc: int = 2,
    steps: int = 4,
    start_step: int = 2,
    end_step: int = 4,
    out_dir: str | os.PathLike[str] | None = None,
    comms_verbose: bool = False,
    profile_memory: bool = False,
    timeout_s: float = 600,
    extra_args: Sequence[str] = (),
) -> dict[int, DeepSpeedRun]:
    """Run the example once under torchrun for several ZeRO stages (one launch, one engine per stage).

    Parameters
    ----------
    stages : sequence of int
        ZeRO stages, run one after the other in the same processes.
    nproc : int
        Ranks (processes) on this host.
    steps, start_step, end_step : int
        Training steps and the profiled window ``[start_step, end_step)`` of engine global steps.
    out_dir : str or PathLike, optional
        Must not exist or be empty (nothing is overwritten); default a new temporary directory.
    comms_verbose : bool
        Per-op comms-logger lines (DeepSpeed logger at INFO).
    profile_memory : bool
        ``torch.profiler`` ``profile_memory`` in the window.
    timeout_s : float
        The launch is killed (its whole process group) after this many seconds.
    extra_args : sequence of str
        More arguments for ``nbprof.deepspeed.example``.

    Returns
    -------
    dict of int to DeepSpeedRun

    Raises
    ------
    MissingDependencyError
        When deepspeed is not installed (``pip install nbprof[deepspeed]``, with ``DS_BUILD_OPS=0`` on CPU).
    FileExistsError
        When ``out_dir`` exists and is not empty.
    CaptureError
        When the launch fails or times out (the message holds the end of its output).
    """
    import importlib.util

    if importlib.util.find_spec("deepspeed") is None:
        from .._deps import missing

        raise missing("deepspeed", "deepspeed", "running DeepSpeed (install with DS_BUILD_OPS=0)")
    stages = [int(s) for s in stages]
    if out_dir is None:
        out = Path(tempfile.mkdtemp(prefix="nbprof_ds_"))
    else:
        out = Path(out_dir).resolve()  # absolute: the launch runs in ``out`` and is given ``out`` again
        if out.exists() and any(out.iterdir()):
            raise FileExistsError(f"{out}: output directory exists and is not empty (nbprof never overwrites)")
        out.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(int(nproc)),
        "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
        "-m", "nbprof.deepspeed.example", "--stage", ",".join(map(str, stages)),
        "--steps", str(int(steps)), "--start-step", str(int(start_step)), "--end-step", str(int(end_step)),
        "--out-dir", str(out),
    ]
    if comms_verbose:
        argv.append("--comms-verbose")
    if profile_memory:
        argv.append("--profile-memory")
    argv.extend(str(a) for a in extra_args)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_package_root(), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.setdefault("OMP_NUM_THREADS", "1")
    stdout_path = out / "launch.log"
    with open(stdout_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(out), env=env,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise CaptureError(f"DeepSpeed example timed out after {timeout_s:.0f} s; output: "
                               f"{_tail(stdout_path)}") from None
        except BaseException:
            _kill_group(proc)
            raise
    if rc != 0:
        raise CaptureError(f"DeepSpeed example failed (exit {rc}): {' '.join(argv)}\n{_tail(stdout_path)}")
    text = stdout_path.read_text(encoding="utf-8", errors="replace")
    return _collect(text, stages, out, stdout_path)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-n:]
    except OSError:
        return ""


def _collect(text: str, stages: list[int], out: Path, stdout_path: Path) -> dict[int, DeepSpeedRun]:
    import json

    marks = list(_MARK.finditer(text))
    segments: dict[int, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        segments[int(m.group(1))] = text[m.start():end]
    runs = {}
    for st in stages:
        d = out / f"zero{st}" if len(stages) > 1 else out
        traces = sorted(d.glob("rank*.pt.trace.json.gz"), key=_rank_of)
        flops_path = d / "flops_rank0.txt"
        flops = parse_flops_profile(flops_path, zero_stage=st) if flops_path.exists() else None
        infos = []
        for p in sorted(d.glob("rank*.comms.json")):
            with open(p) as f:
                infos.append(json.load(f))
        infos.sort(key=lambda x: x.get("rank", 0))
        runs[st] = DeepSpeedRun(stage=st, out_dir=d, traces=traces, flops=flops,
                                log=parse_log(segments.get(st, text), zero_stage=st), rank_info=infos,
                                stdout_path=stdout_path)
    return runs


def run_example(stage: int = 2, **kwargs: Any) -> DeepSpeedRun:
    """Run the 2-rank example at one ZeRO ``stage``; see :func:`run_examples` for the keywords.

    Returns
    -------
    DeepSpeedRun
        ``.traces`` (per-rank Kineto traces), ``.flops`` (flops-profiler tables), ``.comms`` (comms-logger
        tables), ``.report()`` (overlap, bandwidth, skew over the ranks).
    """
    return run_examples([stage], **kwargs)[int(stage)]
