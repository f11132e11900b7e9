"""What the autouse leak check (``tests/conftest.py``) compares before and after each test: whether a torch
profiler session runs, and every plug-in registry's entries."""

from __future__ import annotations

import sys


def registries() -> dict[str, object]:
    """Every plug-in registry of nbprof, by name (imported: all are cheap, strings only)."""
    from nbprof import cli, sources
    from nbprof.results.render import RENDERERS
    from nbprof.trace.hooks import HOOKS
    from nbprof.viz.registry import VIEW_REGISTRY

    return {"sources.FORMATS": sources.FORMATS, "viz.registry.VIEW_REGISTRY": VIEW_REGISTRY,
            "results.render.RENDERERS": RENDERERS, "trace.hooks.HOOKS": HOOKS, "cli.REPORTS": cli.REPORTS}


def profiler_on() -> bool:
    """Whether a torch profiler session is running in this process."""
    torch = sys.modules.get("torch")  # a test that never imported torch cannot have started a session
    return bool(torch is not None and torch._C._autograd._profiler_enabled())


def leak_state() -> tuple[dict[str, dict], bool]:
    """What :func:`leaks_since` compares against: each registry's entries, and whether a profiler session runs."""
    return {n: r.snapshot() for n, r in registries().items()}, profiler_on()  # type: ignore[attr-defined]


def leaks_since(state: tuple[dict[str, dict], bool]) -> list[str]:
    """What changed since ``state`` (a profiler session left running, a registry changed), each undone."""
    before, was_on = state
    leaks = []
    if profiler_on() and not was_on:
        import torch

        torch._C._autograd._disable_profiler()
        # and torch's Python-side flag, which profile.__exit__ resets and the C call does not: left True, it tells a
        # later test in this process (nbprof's automatic steps) that the script runs its own profiler
        torch.autograd.profiler._set_is_profiler_enabled(False)
        leaks.append("a torch profiler session is still running (exit its `with profile(...)` block)")
    for n, r in registries().items():
        after = r.snapshot()  # type: ignore[attr-defined]
        if after != before[n]:
            changed = sorted(set(after) ^ set(before[n]) | {k for k in after if k in before[n] and after[k] != before[n][k]})
            r.restore(before[n])  # type: ignore[attr-defined]
            leaks.append(f"{n} changed ({', '.join(changed)}): restore it (register, then unregister in a finally)")
    return leaks
