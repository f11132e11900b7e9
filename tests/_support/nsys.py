"""Helpers for the nsys tests: find nsys (skip with the reason when absent), compare with `nsys stats` CSV,
and check that no nsys agent of ours survives."""

from __future__ import annotations

import io
import os

import pandas as pd
import pytest


def nsys_or_skip():
    """The NsysInstall to use, or skip the test saying why."""
    from nbprof.capture.nsys_fetch import find_nsys

    inst = find_nsys()
    if inst is None:
        pytest.skip("Nsight Systems not available: run `python -m nbprof.capture.nsys_fetch` (Debian/Ubuntu) "
                    "or set NBPROF_NSYS=/path/to/nsys")
    try:
        inst.version()
    except Exception as exc:  # a broken install is a skip reason, shown
        pytest.skip(f"nsys at {inst.path} does not run: {exc}")
    return inst


def agents_running() -> list[str]:
    """Command lines of every `nsys --start-agent` process (for the leftover-agent assertions)."""
    out = []
    for ent in os.listdir("/proc"):
        if not ent.isdigit():
            continue
        try:
            with open(f"/proc/{ent}/cmdline", "rb") as fh:
                args = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
        except OSError:
            continue
        if "--start-agent" in args:
            out.append(" ".join(args))
    return out


def oracle_frame(csv_text: str) -> pd.DataFrame:
    """`nsys stats --format csv` output as a DataFrame (empty when the report had no data)."""
    text = csv_text.strip()
    if not text:
        return pd.DataFrame()
    return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)


def assert_matches(ours: pd.DataFrame, theirs: pd.DataFrame, pairs: list[tuple[str, str, str]], sort: list[str]):
    """Same rows, same numbers.

    pairs: (our column, nsys column, kind) with kind "int" (exact), "r1" (nsys rounds to 0.1: |d| <= 0.05),
    "pct" (our ratio * 100 vs nsys Time (%) rounded to 0.1), "mb" (our bytes / 1e6 vs nsys MB with 3
    decimals), "str" (exact text). sort: our columns to order both frames by (mapped through pairs).
    """
    assert len(ours) == len(theirs), f"row count: ours {len(ours)} vs nsys {len(theirs)}\n{ours}\n{theirs}"
    name_map = {o: t for o, t, _k in pairs}
    theirs = theirs.copy()
    for _o, t, kind in pairs:  # the CSV is read as text: type the numeric columns
        if kind == "int":
            theirs[t] = theirs[t].astype("int64")
        elif kind in ("r1", "pct", "mb"):
            theirs[t] = theirs[t].astype("float64")
    a = ours.sort_values(sort, kind="stable").reset_index(drop=True)
    b = theirs.sort_values([name_map[c] for c in sort], kind="stable").reset_index(drop=True)
    for o, t, kind in pairs:
        x, y = a[o], b[t]
        if kind == "int":
            assert [int(v) for v in x] == [int(v) for v in y], f"{o} vs {t}: {list(x)} != {list(y)}"
        elif kind == "r1":
            d = (x.astype(float) - y.astype(float)).abs()
            assert (d <= 0.05 + 1e-6 * y.astype(float).abs()).all(), f"{o} vs {t}: {list(x)} != {list(y)}"
        elif kind == "pct":
            d = (x.astype(float) * 100 - y.astype(float)).abs()
            assert (d <= 0.0501).all(), f"{o} vs {t}: {list(x * 100)} != {list(y)}"
        elif kind == "mb":
            d = (x.astype(float) / 1e6 - y.astype(float)).abs()
            assert (d <= 0.0005 + 1e-9).all(), f"{o} vs {t}: {list(x / 1e6)} != {list(y)}"
        else:
            xs = ["None" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v) for v in x]
            ys = ["None" if v is None or v == "" or (isinstance(v, float) and pd.isna(v)) else str(v) for v in y]
            assert xs == ys, f"{o} vs {t}: {xs} != {ys}"


def assert_no_new_agent(before: set[str], grace_s: float = 20.0) -> None:
    """No ``nsys --start-agent`` started since ``before`` (:func:`agents_running`) outlives ``grace_s`` -- except
    agents whose ``nsys profile`` (the ``-<pid>`` of their ``--session-name``) still runs: another session's run
    in progress on a shared machine, not a leftover of ours."""
    import re
    import time

    def leftovers() -> set[str]:
        out = set()
        for cmd in set(agents_running()) - before:
            m = re.search(r"--session-name=profile-\S*-(\d+)\b", cmd)
            if m and os.path.exists(f"/proc/{m.group(1)}"):
                continue
            out.add(cmd)
        return out

    deadline = time.monotonic() + grace_s
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.5)
    left = leftovers()
    assert not left, f"an nsys agent of this run survived: {sorted(left)}"
