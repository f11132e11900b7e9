"""Trace documents changed the way a real producer could write them, for the loaders' and analyses' tests."""

from __future__ import annotations


def ids_above_2_63(doc: dict) -> dict:
    """``doc`` (a Chrome trace dict, changed in place and returned) with every positive ``correlation`` /
    ``External id`` and every flow id moved by 2**63: the values a CUPTI writing unsigned 64-bit ids past
    2**63 would give (External id 0, the root, left as it is)."""
    for e in doc["traceEvents"]:
        a = e.get("args") or {}
        for k in ("correlation", "External id"):
            if isinstance(a.get(k), int) and a[k] > 0:
                a[k] += 2**63
        if e.get("ph") in ("s", "f"):
            e["id"] += 2**63
    return doc
