"""Import contract of the layers (docs/DESIGN: capture -> sources -> trace -> analysis -> viz/results).

Imports are read with ``ast`` from every module of nbprof/, function-level imports included (a deferred
import is still a dependency), so these tests need nothing beyond the source files.

Layers: ``nbprof.trace`` is the model; ``nbprof.sources`` read files into it (``nbprof.tensorboard.read`` and
``nbprof.deepspeed.parsers`` are readers too); ``nbprof.capture`` runs profilers and writes files (with
``nbprof.deepspeed.attach``/``config`` and the TensorBoard launcher);
``nbprof.analysis`` turns a Trace into frames; ``nbprof.viz``, ``nbprof.result(s)``, ``nbprof.report`` and the
TensorBoard writer present them; ``nbprof.magics``, ``nbprof.cli`` and ``nbprof.deepspeed.run`` are glue.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "nbprof"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}
PACKAGES = {m for m, p in MODULES.items() if p.name == "__init__.py"}


def _resolve(module: str, level: int, current: str) -> str:
    if level == 0:
        return module
    base = current.split(".") if current in PACKAGES else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _imports(name: str) -> Iterator[tuple[str, int, str]]:
    """(imported nbprof module, line, imported name or '') for every import in module ``name``: ``import`` and
    ``from`` statements, and string imports: a string constant that is a module path under ``nbprof`` or a
    ``"nbprof.module:attr"`` target (registries, hooks, ``importlib.import_module("nbprof.x")``)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"), filename=str(MODULES[name]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "nbprof" or a.name.startswith("nbprof."):
                    yield a.name, node.lineno, ""
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node.module or "", node.level, name)
            if not (target == "nbprof" or target.startswith("nbprof.")):
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                # `from . import steps` imports the module nbprof.analysis.steps; `from .x import f` imports x
                yield (sub if sub in MODULES else target), node.lineno, a.name
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # a string import: a registry's ``"nbprof.x:y"`` target or ``import_module("nbprof.x")``
            m = _STRING_IMPORT.fullmatch(node.value)
            if m:
                yield _owner(m.group(1)), node.lineno, m.group(2) or ""


_STRING_IMPORT = re.compile(r"(nbprof(?:\.\w+)+)(?::([\w.]+))?")


def _owner(dotted: str) -> str:
    """The module a dotted name lives in (``nbprof.export.saved`` -> itself; ``nbprof.x.f`` -> ``nbprof.x``)."""
    while dotted not in MODULES and "." in dotted:
        dotted = dotted.rsplit(".", 1)[0]
    return dotted


GRAPH: dict[str, set[str]] = {m: set() for m in MODULES}
EDGES: list[tuple[str, str, int, str]] = []
for _m in MODULES:
    for _t, _line, _what in _imports(_m):
        # a package its own submodule imports is already imported (as house_check counts it)
        if _t in MODULES and _t != _m and not _m.startswith(_t + "."):
            GRAPH[_m].add(_t)
            EDGES.append((_m, _t, _line, _what))


def _in(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _violations(src: tuple[str, ...], forbidden: tuple[str, ...], names: tuple[str, ...] = ()) -> list[str]:
    out = []
    for m, t, line, what in EDGES:
        if _in(m, src) and (_in(t, forbidden) or (t == "nbprof" and what in names)):
            out.append(f"{MODULES[m].relative_to(PKG.parent)}:{line} imports {t}{'.' + what if t == 'nbprof' else ''}")
    return sorted(set(out))


def test_modules_found():
    assert {"nbprof.trace.model", "nbprof.analysis.steps", "nbprof.sources", "nbprof.capture.nsys"} <= set(MODULES)
    assert ("nbprof.analysis.steps", "nbprof.trace.predicates") in {(m, t) for m, t, _, _ in EDGES}


def test_string_imports_are_edges():
    """Registry targets and hooks are imports the layer rules and the cycle check see: the model's writers and
    viewer are the façade's arrows (``nbprof/__init__.py``), not the model's; a result's renderer is its package's."""
    edges = {(m, t) for m, t, _, _ in EDGES}
    for writer in ("nbprof.export.saved", "nbprof.export.chrome", "nbprof.export.perfetto", "nbprof.export.sql",
                   "nbprof.viz.dashboard"):
        assert ("nbprof", writer) in edges
        assert not any(m.startswith("nbprof.trace") and t == writer for m, t in edges)
    assert ("nbprof.results", "nbprof.results.profile_render") in edges
    assert ("nbprof.sources", "nbprof.sources.kineto") in edges


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(GRAPH[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycles():
    cycles = _cycles()
    detail = []
    for comp in cycles:
        members = set(comp)
        detail.append(" <-> ".join(comp) + "\n    " + "\n    ".join(
            f"{m} -> {t} (line {line})" for m, t, line, _ in EDGES if m in members and t in members))
    assert not cycles, "import cycles in nbprof:\n" + "\n".join(detail)


READERS = ("nbprof.sources", "nbprof.tensorboard.read", "nbprof.deepspeed.parsers", "nbprof.scale", "nbprof.trace_cache",
           "nbprof.rank_inputs")
PRESENTERS = ("nbprof.viz", "nbprof.result", "nbprof.results", "nbprof.report", "nbprof.tensorboard.write")
# deepspeed.run runs the DeepSpeed examples end to end (launch, load, analyse): glue like the cli
GLUE = ("nbprof.magics", "nbprof.cli", "nbprof.deepspeed.run")
CAPTURE = ("nbprof.capture", "nbprof.deepspeed.attach", "nbprof.deepspeed.config", "nbprof.tensorboard.launch")
LOADERS = ("load", "load_ranks", "merge")  # nbprof's loading API, re-exported at the top level

RULES = {
    # analyses are pure: Trace in, frames out -- no display, no file formats, no side effects
    "analysis imports no viz, results, report, glue, capture or file-format reader": (
        ("nbprof.analysis",), PRESENTERS + GLUE + CAPTURE + READERS, LOADERS),
    # the model is the bottom layer
    "trace (the model) imports no other layer": (
        ("nbprof.trace",), PRESENTERS + GLUE + CAPTURE + READERS + ("nbprof.analysis",), LOADERS),
    # capture produces files; loading them is the caller's (cli, magics, report) business
    "capture never loads": (CAPTURE, READERS, LOADERS),
    # a reader turns a file into a Trace; it never runs a profiler
    "sources never run a profiler": (("nbprof.sources",), CAPTURE, ()),
    # readers and capture know nothing of presentation
    "sources and capture import no viz, results or report": (("nbprof.sources",) + CAPTURE, PRESENTERS + GLUE, ()),
}


@pytest.mark.parametrize("rule", list(RULES))
def test_layer_rule(rule):
    src, forbidden, names = RULES[rule]
    bad = _violations(src, forbidden, names)
    assert not bad, f"{rule}:\n  " + "\n  ".join(bad)


DISPLAY_LIBS = ("bokeh", "ipywidgets", "jupyter_bokeh", "matplotlib", "IPython.display")


def _defs(name: str) -> Iterator[tuple[str, int]]:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno


# a formatter by its name: fmt_*, ms, pct, their _private and _suffixed forms (_ms, _pct, _ms_pair), gbps, human_*
_FORMATTER_NAME = re.compile(r"_*(fmt_\w*|ms|pct|ms_\w+|pct_\w+|gbps|human\w*)")


def _str_functions(name: str) -> Iterator[tuple[str, int]]:
    """(name, line) of every function of ``name`` annotated ``-> str`` (a parser named ``_pct`` returns a float)."""
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None \
                and ast.unparse(node.returns).strip("'\"") == "str":
            yield node.name, node.lineno


def test_unit_formatters_live_only_in_units():
    """Human units (durations from ns, bytes, percentages, rates) have one home, ``nbprof/units.py``: a function
    named like a formatter (``fmt_*``, ``_ms``, ``_pct``, ...) that returns text is defined nowhere else."""
    bad = [f"{MODULES[m].relative_to(PKG.parent)}:{line} defines {fn}"
           for m in MODULES if m != "nbprof.units"
           for fn, line in _str_functions(m) if _FORMATTER_NAME.fullmatch(fn)]
    assert not bad, "unit formatters outside nbprof/units.py:\n  " + "\n  ".join(sorted(bad))
    assert {fn for fn, _ in _str_functions("nbprof.units")} >= {"fmt_ns", "fmt_ms_text", "fmt_pct", "fmt_rate"}


def test_units_is_the_ground_floor():
    """``nbprof.units`` imports nothing of nbprof, so every layer (analysis's finding titles included) may use it."""
    assert not GRAPH["nbprof.units"], sorted(GRAPH["nbprof.units"])


def test_model_analysis_and_readers_define_no_rich_display():
    """``_repr_html_``/``_repr_mimebundle_`` (rich display for people) belong to results/ and viz/."""
    layers = ("nbprof.trace", "nbprof.analysis", "nbprof.sources", "nbprof.capture")
    bad = [f"{MODULES[m].relative_to(PKG.parent)}:{line} defines {fn}"
           for m in MODULES if _in(m, layers)
           for fn, line in _defs(m) if fn in ("_repr_html_", "_repr_mimebundle_", "_repr_markdown_")]
    assert not bad, "rich display outside results/viz:\n  " + "\n  ".join(sorted(bad))


def test_model_and_analysis_import_no_display_library():
    bad = []
    for m in MODULES:
        if not _in(m, ("nbprof.trace", "nbprof.analysis")):
            continue
        for node in ast.walk(ast.parse(MODULES[m].read_text(encoding="utf-8"))):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            bad += [f"{MODULES[m].relative_to(PKG.parent)}:{node.lineno} imports {x}" for x in mods
                    if _in(x, DISPLAY_LIBS)]
    assert not bad, "\n  ".join(bad)


def test_one_memo_for_per_trace_results():
    """Cached analysis results have one mechanism, ``nbprof.analysis._memo.per_trace`` (the memo lives on the
    Trace or Graph, so it goes with it): no weak-reference table keyed by ``id()`` elsewhere in the analyses."""
    bad = []
    for m in MODULES:
        if not _in(m, ("nbprof.analysis", "nbprof.trace")) or m == "nbprof.analysis._memo":
            continue
        for node in ast.walk(ast.parse(MODULES[m].read_text(encoding="utf-8"))):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            bad += [f"{MODULES[m].relative_to(PKG.parent)}:{node.lineno} imports {x}" for x in mods if x == "weakref"]
    assert not bad, "a second cache mechanism:\n  " + "\n  ".join(bad)
    from nbprof.analysis import whatif
    from nbprof.analysis.critical_path import graph

    assert all(getattr(f, "__wrapped__", None) for f in (graph.whole_graph, whatif._plan_of))  # both per_trace


def test_one_codec_for_metadata_and_side_tables():
    """The trace cache and the saved ``.nbprof`` file share ``nbprof.codec``, not each other's private helpers."""
    edges = {(m, t) for m, t, _, _ in EDGES}
    assert {("nbprof.trace_cache", "nbprof.codec"), ("nbprof.export.saved", "nbprof.codec")} <= edges
    assert ("nbprof.export.saved", "nbprof.trace_cache") not in edges
    assert ("nbprof.trace_cache", "nbprof.export.saved") not in edges


def test_public_errors_live_in_errors_py():
    """The error policy (``nbprof/errors.py``'s docstring): every public nbprof exception class is defined there."""
    bad = []
    for m in MODULES:
        if m == "nbprof.errors":
            continue
        for node in ast.walk(ast.parse(MODULES[m].read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and any(
                    ast.unparse(b).split(".")[-1].endswith(("Error", "Exception")) for b in node.bases):
                bad.append(f"{MODULES[m].relative_to(PKG.parent)}:{node.lineno} defines {node.name}")
    assert not bad, "exception classes outside nbprof/errors.py:\n  " + "\n  ".join(bad)
