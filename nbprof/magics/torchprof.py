"""``%%torchprof`` / ``%torchprof``: PyTorch Profiler around a notebook cell (IPython glue only).

Options are declared once, as the fields of ``nbprof.capture.options.ProfileOptions``; their
``IPython.core.magic_arguments`` arguments are built from the fields' metadata, so ``%torchprof?``
prints them and a bad flag raises ``UsageError``. The profiling is ``nbprof.profile``
(``nbprof.profiling``); the displayed object is ``nbprof.results.profile.ProfileResult``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..capture.options import ProfileOptions, argparse_arguments

__all__ = ["TorchProfMagics", "make_magics"]

#: A cell that steps the profiler itself (``nbprof.step()``, ``prof.step()``) keeps its own steps.
_STEPS_ITSELF = re.compile(r"\bnbprof\.step\(|\bprof\w*\.step\(|(?<![.\w])step\(\s*\)")


def _option_arguments(func: Any) -> Any:
    """One IPython ``argument`` per :class:`ProfileOptions` field (flags, help, type from its metadata)."""
    for flags, kwargs in reversed(argparse_arguments()):
        func = argument(*flags, **kwargs)(func)
    return func


def _split_line(parser: Any, line: str) -> tuple[str, str]:
    """Split a line-magic line into (options, statement).

    Options come first; the statement starts at the first token that is neither an option nor
    an option's value, or after a lone ``--``.
    """
    takes_value = {opt for act in parser._actions for opt in act.option_strings if act.nargs != 0}
    pos, n = 0, len(line)
    while True:
        while pos < n and line[pos].isspace():
            pos += 1
        if pos >= n:
            return line, ""
        if line.startswith("--", pos) and (pos + 2 == n or line[pos + 2].isspace()):
            return line[:pos], line[pos + 2 :].strip()
        if line[pos] != "-":
            return line[:pos], line[pos:].strip()
        m = re.compile(r"\S+").match(line, pos)
        tok = m.group(0)  # type: ignore[union-attr]
        pos = m.end()  # type: ignore[union-attr]
        if tok in takes_value:  # the value is the next token (maybe quoted)
            while pos < n and line[pos].isspace():
                pos += 1
            if pos < n and line[pos] in "'\"":
                end = line.find(line[pos], pos + 1)
                pos = n if end < 0 else end + 1
            else:
                m = re.compile(r"\S+").match(line, pos)
                pos = m.end() if m else n


@magics_class
class TorchProfMagics(Magics):
    """The ``torchprof`` magic."""

    @magic_arguments()
    @_option_arguments
    @argument("-o", dest="return_result", action="store_true", help="Return the ProfileResult (r = %%torchprof -o ...).")
    @argument("--var", default=None, metavar="NAME", help="Store the ProfileResult in the variable NAME.")
    @no_var_expand
    @line_cell_magic
    def torchprof(self, line: str, cell: str | None = None) -> Any:
        """Profile a cell (``%%torchprof``) or a statement (``%torchprof [options] stmt``) with torch.profiler.

        Shows a summary (wall time, steps, top operators, files written) and the operator table
        (self/total host and device time, memory, FLOPs), computed by nbprof from the exported
        Kineto trace. If the code raises, the partial profile is saved and shown, then the
        exception propagates. Existing files are never overwritten without --force.

        A cell run once (``--steps 1``) that runs a training loop needs no ``nbprof.step()``: each
        ``optimizer.step()`` (else each DataLoader batch) ends a ``ProfilerStep#N``
        (``nbprof.capture.auto_steps``); without ``--active`` the profiler records 5 steps and stops while the
        loop runs on, and the result states the profiler's overhead. A cell that calls ``nbprof.step()`` keeps
        its own steps.

        Examples::

            %%torchprof --steps 5 --record-shapes --profile-memory
            train_one_step()

            %%torchprof --activities cpu,cuda --wait 1 --warmup 1 --active 3 --tensorboard runs/prof
            for batch in loader:
                train_step(batch)
                nbprof.step()

            r = %torchprof -o --sort-by self_cuda_time_total model(x).sum().backward()
        """
        from ..profiling import profile

        if cell is None:
            opts, code = _split_line(self.torchprof.parser, line)
            if not code:
                raise UsageError("%torchprof needs a statement to profile (or use the %%torchprof cell magic)")
        else:
            opts, code = line, cell
        args = parse_argstring(self.torchprof, opts)
        if args.var is not None and not str(args.var).isidentifier():
            raise UsageError(f"--var {args.var!r} is not a valid variable name")
        options = ProfileOptions.from_namespace(args)
        if options.steps == 1 and not _STEPS_ITSELF.search(code):
            # a cell that runs a loop: its optimizer.step() / DataLoader batches are the steps (nbprof.capture.auto_steps)
            options = replace(options, auto_steps=True)
        try:
            options = options.validated()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        from ..capture.torch_profiler import _import_torch
        from ..errors import MissingDependencyError

        try:  # before the cell runs: a one-line answer, not a traceback, when torch is not installed
            _import_torch()
        except MissingDependencyError as exc:
            raise UsageError(str(exc)) from None

        shell = self.shell
        if shell is None:
            raise UsageError("%%torchprof runs inside IPython only")
        source = shell.transform_cell(code)
        filename = shell.compile.cache(source)  # so tracebacks show the cell's lines
        compiled = shell.compile(source, filename, "exec")  # a SyntaxError surfaces before profiling
        session = profile(options=options)
        result = session.result
        from ..capture.quiet import quiet_profiler

        try:
            # -q: the profiler's own stderr lines (USDT probes, Kineto/allocator warnings) are hidden, the cell's kept
            with quiet_profiler(bool(args.quiet)), session:
                for i in range(options.steps):
                    exec(compiled, shell.user_global_ns, shell.user_ns)
                    if i < options.steps - 1:
                        session.step()
        except BaseException:
            self._publish(result, args, display_it=not args.quiet)
            raise
        self._publish(result, args, display_it=not (args.quiet or args.return_result))
        return result if args.return_result else None

    def _publish(self, result: Any, args: Any, *, display_it: bool) -> None:
        if args.var and self.shell is not None:
            self.shell.user_ns[args.var] = result
        if display_it:
            from IPython.display import display

            display(result)


def make_magics(ipython: Any) -> TorchProfMagics:
    """The ``Magics`` instance ``nbprof.magics.register`` adds to ``ipython``."""
    return TorchProfMagics(ipython)
