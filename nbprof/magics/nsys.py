"""``%nsys`` / ``%%nsys``: Nsight Systems from a notebook (IPython glue only).

- ``%nsys profile [options] -- python script.py args``: runs ``nsys profile`` on the command (an argv
  list built with ``shlex``, never a shell; ``python``/``python3`` means this kernel's interpreter),
  shows live progress (phase, elapsed time), exports SQLite, loads it and displays the summary
  (``nsys stats``-equivalent tables, expert-rule findings, the timeline when ``nbprof.viz`` is there).
- ``%%nsys [options]``: profiles the cell's code run as a script (saved next to the report).
- ``%nsys load FILE``: a ``.nsys-rep`` (exported with the installed nsys) or ``.sqlite``.

Options other than the ones below are passed to ``nsys profile`` as they are (e.g.
``--cuda-memory-usage=true``, ``--capture-range=cudaProfilerApi``). ``-o/--output NAME`` is the report
name, as in ``nsys profile -o``; ``-r`` returns the result (``r = %nsys -r ...``) and ``--var NAME``
stores it in a variable. The program comes after ``--``: any other
word that is not an option's value is a ``UsageError``. ``%nsys --help`` (or ``%nsys?``) shows the options.
``NBPROF_NSYS`` overrides the nsys binary. A missing nsys raises ``CaptureError`` saying how to get one.
"""

from __future__ import annotations

import datetime as _dt
import html
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from ..results.nsys import NsysResult

__all__ = ["NsysMagics", "NsysResult", "make_magics"]


_COMMON = [
    argument("-t", "--trace", default=None, help="nsys -t (default cuda,nvtx,osrt with a CUDA driver, else nvtx,osrt)."),
    argument("--sample", default="none",
             help="nsys --sample (default none: CPU sampling hangs Debian's nsys 2022.4 on CPU-only machines)."),
    argument("--cpuctxsw", default="none", help="nsys --cpuctxsw (default none, same reason)."),
    argument("--results", default="results/nsys", metavar="DIR", help="Folder for reports (default results/nsys)."),
    argument("-o", "--output", default=None, metavar="NAME",
             help="Report name, as nsys -o (default: a unique name in --results)."),
    argument("--force", action="store_true", help="Overwrite an existing --output report."),
    argument("--timeout", type=float, default=None, metavar="S", help="End nsys and the program after S seconds."),
    argument("--no-timeline", action="store_true", help="Do not show the timeline widget."),
    argument("-r", dest="return_result", action="store_true", help="Return the NsysResult (r = %%nsys -r ...)."),
    argument("--var", default=None, metavar="NAME", help="Store the NsysResult in the variable NAME."),
    argument("-q", "--quiet", action="store_true", help="Do not display the result."),
]


def _common(func):
    for dec in reversed(_COMMON):
        func = dec(func)
    return func


@magics_class
class NsysMagics(Magics):
    """The ``%nsys`` line/cell magic."""

    @magic_arguments()
    @argument("action", nargs="?", default="profile", help="profile (default) or load")
    @_common
    @no_var_expand
    @line_cell_magic
    def nsys(self, line: str, cell: str | None = None) -> Any:
        """Profile a command or the cell with Nsight Systems, or load a report (see module docstring)."""
        parser = self.nsys.parser
        opts_part, sep, command = line.partition(" -- ")
        stripped = line.strip()
        if not sep and (stripped == "--" or stripped.startswith("-- ")):
            opts_part, sep, command = "", "--", stripped[2:]
        elif not sep and stripped.endswith(" --"):
            opts_part, sep, command = stripped[:-3], "--", ""
        try:
            tokens = shlex.split(opts_part)
        except ValueError as exc:
            raise UsageError(f"%nsys: {exc}") from exc
        if "-h" in tokens or "--help" in tokens:  # %nsys --help: the options, not a program called `help`
            print(parser.format_help())
            return None
        action = tokens.pop(0) if tokens and tokens[0] in ("profile", "load") else "profile"
        try:
            args, unknown = parser.parse_known_args(tokens)
        except SystemExit as exc:
            raise UsageError(f"%nsys: bad options {opts_part!r}") from exc
        if args.action != "profile":  # a word argparse took for the action: back among the unknown tokens
            w = args.action
            i = tokens.index(w)
            at = unknown.index(tokens[i - 1]) + 1 if i > 0 and tokens[i - 1] in unknown else 0
            unknown.insert(at, w)
        args.action = action
        if args.var is not None and not str(args.var).isidentifier():
            raise UsageError(f"--var {args.var!r} is not a valid variable name")
        words = _positionals(unknown)
        load_file = None
        if args.action == "load":  # %nsys load [options] FILE
            if len(words) != 1:
                raise UsageError("%nsys load [options] FILE: give one .nsys-rep or .sqlite file")
            load_file = words[0]
            unknown.remove(load_file)
        elif words:
            # `%nsys python x.py` or `%nsys profile python x.py`: the program must follow `--`
            stray = " ".join(words)
            raise UsageError(f"%nsys: {stray!r} is not an option; the program goes after --: "
                             "%nsys profile [options] -- python script.py args | %nsys load FILE | %nsys --help")
        if args.action == "load":
            if cell is not None:
                raise UsageError("%%nsys load is not a cell magic; use %nsys load FILE")
            from ..sources import load

            trace = load(os.path.expanduser(str(load_file)))
            return self._publish(NsysResult(trace), args)
        if cell is not None:
            if command:
                raise UsageError("%%nsys profiles the cell: no `-- command` on the first line")
            res_dir = Path(args.results)
            res_dir.mkdir(parents=True, exist_ok=True)
            script = res_dir / f"cell-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.py"
            n = 0
            while script.exists():
                n += 1
                script = script.with_name(f"{script.stem}-{n}.py")
            script.write_text(cell)
            argv = [sys.executable, str(script)]
        else:
            if not command.strip():
                raise UsageError("usage: %nsys profile [options] -- python script.py args")
            try:
                argv = shlex.split(command)
            except ValueError as exc:
                raise UsageError(f"%nsys: {exc}") from exc
            if argv and argv[0] in ("python", "python3"):
                argv[0] = sys.executable
        return self._profile(argv, args, unknown)

    def _profile(self, argv: list[str], args: Any, nsys_args: list[str]) -> Any:
        from ..capture.nsys import profile
        from ..errors import CaptureError

        show = not args.quiet
        handle = None
        last = [0.0]
        if show:
            from IPython.display import HTML, display

            handle = display(HTML("<code>nsys: starting</code>"), display_id=True)

        def progress(phase: str, elapsed: float, line: str) -> None:
            now = time.monotonic()
            if handle is None or (now - last[0] < 0.5 and phase != "done"):
                return
            last[0] = now
            from IPython.display import HTML

            handle.update(HTML(f"<code>nsys: {html.escape(phase)} &middot; {elapsed:.1f} s</code>"
                               f"<br><small>{html.escape(line[-160:])}</small>"))

        run = profile(argv, results_dir=args.results, output=args.output, trace=args.trace, sample=args.sample,
                      cpuctxsw=args.cpuctxsw, nsys_args=nsys_args, overwrite=args.force, timeout_s=args.timeout,
                      progress=progress, cwd=os.getcwd())
        if handle is not None:
            from IPython.display import HTML

            handle.update(HTML(f"<code>nsys: done in {run.elapsed_s:.1f} s &middot; "
                               f"{html.escape(str(run.report_path))}</code>"))
        from ..api import load_nsys_run

        result = NsysResult(load_nsys_run(run), run)
        self._publish(result, args, display_it=show and not args.return_result)
        if run.returncode != 0:
            raise CaptureError(f"the profiled program exited with status {run.returncode} (report kept: "
                               f"{run.report_path}); its output:\n{run.output[-3000:]}")
        return result if args.return_result else None

    def _publish(self, result: NsysResult, args: Any, *, display_it: bool | None = None) -> Any:
        if args.var and self.shell is not None:
            self.shell.user_ns[args.var] = result
        if display_it is None:
            display_it = not (args.quiet or args.return_result)
        if display_it:
            from IPython.display import display

            if not args.no_timeline:
                display(result.timeline())
            display(result)
        return result if args.return_result else None


def _positionals(unknown: list[str]) -> list[str]:
    """The words of ``unknown`` (what the magic's parser did not know) that are neither options for nsys nor
    the value of such an option (``--cuda-memory-usage true``: ``true`` is a value; ``--x=1`` takes none)."""
    words = []
    prev_takes_value = False
    for tok in unknown:
        if tok.startswith("-") and tok != "-":
            prev_takes_value = "=" not in tok
            continue
        if not prev_takes_value:
            words.append(tok)
        prev_takes_value = False
    return words


def make_magics(ipython: Any) -> NsysMagics:
    """The ``Magics`` instance ``nbprof.magics.register`` adds to ``ipython``."""
    return NsysMagics(ipython)
