"""One table renderer: a DataFrame of analysis numbers (int64 ns, bytes, ratios) -> escaped HTML in human units.

Analyses keep their frames in ns/bytes; this is where a person's table is made. The unit of a column comes
from its name (``*_ns`` duration, ``*_bytes`` size, ``*_ratio``/``*_share`` percent) or from ``units``;
headers lose the suffix and show the unit (``self_device_ns`` -> ``self device (ms)``). Numbers are
right-aligned, there is no index column, every cell is escaped, and placeholders (``-1`` addresses, ``0``
free times of never-freed blocks, NaN) are blank.

>>> import pandas as pd
>>> t = table(pd.DataFrame({"name": ["a<b"], "dur_ns": [1_500_000], "utilization_ratio": [0.97]}))
>>> ">dur (ms)</th>" in t.html and "1.500" in t.html and "97.0%" in t.html and "a&lt;b" in t.html
True
"""

from __future__ import annotations

import html as _html
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..units import fmt_bytes, fmt_flops, fmt_ms, fmt_ns, is_missing

__all__ = ["Table", "table", "use_datatables", "datatables_init_html", "findings_table", "evidence_items", "column_unit", "UNITS"]

#: unit name -> (header suffix, formatter)
UNITS = ("ms", "duration", "bytes", "percent", "count", "flops", "text", "us", "bandwidth")


#: ``compare`` columns: ``self_host_ns_a``/``_b``/``_delta`` are ns columns of side a/b/the change
_SIDE = re.compile(r"(?<=_ns|tes)_(a|b|delta)$")


def column_unit(name: str, series: pd.Series | None = None) -> str:
    """The unit of a column from its name: ``ms`` for ``*_ns``, ``bytes``, ``percent``, ``count`` or ``text``."""
    n = _SIDE.sub("", str(name))
    if n.endswith("_bytes_per_s"):
        return "bandwidth"
    if n.endswith("_ns"):
        return "ms"
    if n.endswith("_bytes") or n == "bytes":
        return "bytes"
    if n.endswith(("_ratio", "_share")) or n == "ratio":
        return "percent"
    if n.endswith("flops"):
        return "flops"
    if series is not None and pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
        return "count"
    if series is not None and series.dtype == object and len(series):
        num = pd.to_numeric(series, errors="coerce")
        if num.notna().all() and not series.map(lambda x: isinstance(x, bool)).any():
            return "count"
    return "text"


def _header(name: str, unit: str) -> str:
    m = _SIDE.search(str(name))
    side = m.group(1) if m else ""
    n = _SIDE.sub("", str(name))
    for suf in ("_bytes_per_s", "_ns", "_bytes", "_ratio", "_share", "_x"):
        if n.endswith(suf):
            n = n[: -len(suf)]
    n = n.replace("_", " ") + (f" {side}" if side else "")
    return {"ms": f"{n} (ms)", "us": f"{n} (µs)", "percent": f"{n} (%)", "bandwidth": f"{n} (GB/s)"}.get(unit, n)


def _cell(v: Any, unit: str) -> str:
    if is_missing(v):
        return ""
    if unit == "ms":
        return fmt_ms(v)
    if unit == "us":
        return f"{float(v) / 1e3:,.2f}"
    if unit == "duration":
        return fmt_ns(v)
    if unit == "bytes":
        return fmt_bytes(v)
    if unit == "percent":
        return f"{100 * float(v):.1f}%"
    if unit == "flops":
        return fmt_flops(v)
    if unit == "bandwidth":
        return f"{float(v) / 1e9:,.2f}"
    if unit == "count":
        f = float(v)
        return f"{int(f):,}" if f == int(f) else f"{f:,.3f}"
    return str(v)


_FALLBACK = re.compile(r'(<div id="itables_[0-9a-f_]+_fallback">).*?(</div><script>document\.getElementById\()', re.S)

#: :func:`use_datatables` switch: ``Table._repr_html_`` gives the sortable itables form (the report's kernel sets it)
_DATATABLES = {"on": False}


def use_datatables(on: bool = True) -> bool:
    """Show every :class:`Table` as a sortable, filterable, downloadable DataTable (itables, offline mode) instead
    of a plain HTML table; returns whether itables is importable (False: tables stay plain).

    The page must load the itables bundle once (:func:`datatables_init_html`; ``nbprof report`` puts it in the
    page's head, as it does BokehJS)."""
    try:
        import itables  # noqa: F401
    except ImportError:
        _DATATABLES["on"] = False
        return False
    _DATATABLES["on"] = bool(on)
    return True


def datatables_init_html() -> str:
    """The itables offline bundle (DataTables + its CSS, base64 inline; no network) that the tables of
    :meth:`Table.datatable_html` wait for; ``""`` when itables is not installed."""
    try:
        from itables.javascript import generate_init_offline_itables_html
        from itables.utils import find_package_file
    except ImportError:
        return ""
    html = str(generate_init_offline_itables_html(find_package_file("html/dt_bundle.js")))
    return re.sub(r"<noscript>.*?</noscript>", "", html, flags=re.S)  # its "is your notebook trusted?" note


class Table:
    """An HTML table (``.html``) with a plain-text form; what notebooks ``display``.

    ``heads``/``cells`` are the shown headers and cell texts, ``raw`` the numbers behind each numeric column
    (``None`` for text columns): :meth:`datatable_html` sorts numeric columns by them.
    """

    def __init__(self, html: str, text: str, rows: int, *, heads: Sequence[str] = (),
                 cells: Sequence[Sequence[str]] = (), raw: Sequence[Sequence[float] | None] = (),
                 caption: str = "") -> None:
        self.html = html
        self.text = text
        self.rows = rows
        self.heads = list(heads)
        self.cells = [list(r) for r in cells]
        self.raw = list(raw)
        self.caption = caption

    def _repr_html_(self) -> str:
        if _DATATABLES["on"] and self.heads:
            return self.datatable_html()
        return self.html

    def datatable_html(self) -> str:
        """The table as an itables DataTable (offline: needs :func:`datatables_init_html` once in the page).

        Cells show the human units of :func:`table`; a numeric column sorts by its raw value (a hidden column
        named in ``orderData``), the CSV/copy buttons export the shown columns. Every cell is escaped by itables
        (``allow_html`` off); the caption is escaped here. Falls back to ``.html`` without itables.
        """
        try:
            from itables import to_html_datatable
        except ImportError:
            return self.html
        n = len(self.heads)
        heads = [h if self.heads.count(h) == 1 else f"{h} ({i + 1})" for i, h in enumerate(self.heads)]
        data: dict[str, list[Any]] = {h: [r[i] for r in self.cells] for i, h in enumerate(heads)}
        numeric = [i for i, r in enumerate(self.raw) if r is not None]
        defs: list[dict[str, Any]] = []
        for k, i in enumerate(numeric):
            col = self.raw[i] or []
            data[f"_sort_{i}"] = [float("-inf") if is_missing(v) else float(v) for v in col]
            defs.append({"targets": i, "orderData": [n + k], "className": "dt-right"})
        text = [i for i in range(n) if i not in numeric]
        if text:  # names and other text read from the left (DataTables would align them by its type guess)
            defs.append({"targets": text, "className": "dt-left"})
        if numeric:
            defs.append({"targets": list(range(n, n + len(numeric))), "visible": False, "searchable": False})
        frame = pd.DataFrame(data)
        buttons = [{"extend": b, "exportOptions": {"columns": ":visible"}} for b in ("copyHtml5", "csvHtml5")]
        html = str(to_html_datatable(
            frame, caption=_html.escape(self.caption) if self.caption else None, connected=False,
            columnDefs=defs, order=[], buttons=buttons, showIndex=False, classes="display compact nbprof-datatable",
            layout={"topStart": "buttons", "topEnd": "search", "bottomStart": "info", "bottomEnd": "paging"},
            style={"caption-side": "top", "margin": "0", "width": "auto", "table-layout": "auto"},  # as table()'s
            pageLength=15 if self.rows > 15 else -1, lengthMenu=[15, 50, -1], display_logo_when_loading=False,
            text_in_header_can_be_selected=False,  # a click anywhere on a header sorts (not only its icon)
        ))
        # without JavaScript the page shows this table's plain form (human units), not itables' preview of the
        # frame it was given (which lists the hidden sort columns)
        return _FALLBACK.sub(lambda m: m.group(1) + self.html + m.group(2), html, count=1)

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


def table(
    df: pd.DataFrame,
    units: Mapping[str, str] | None = None,
    *,
    columns: Sequence[str] | None = None,
    blank: Mapping[str, Any] | None = None,
    max_rows: int = 50,
    caption: str = "",
    empty: str = "(no rows)",
) -> Table:
    """Render ``df`` for people.

    Parameters
    ----------
    df : pandas.DataFrame
    units : mapping, optional
        Column -> one of :data:`UNITS`, overriding the name rule (:func:`column_unit`).
    columns : sequence of str, optional
        Which columns, in order (default all).
    blank : mapping, optional
        Column -> placeholder value shown blank (e.g. ``{"addr": -1, "free_ts_ns": 0}``); ``-1`` in an
        ``*_ns`` column or an ``addr`` column (the source gave no address) is always blank.
    max_rows : int
        Rows shown (the caption says "first N of M").
    caption : str
    empty : str
        Shown instead of a header-only table when ``df`` has no rows.
    """
    e = _html.escape
    cols = list(columns) if columns is not None else [str(c) for c in df.columns]
    if df.empty:
        msg = f"{caption}: {empty}" if caption else empty
        return Table(f"<p><i>{e(msg)}</i></p>", msg, 0)
    sub = df.reset_index(drop=True).loc[:, cols].head(max_rows)
    u = {c: (units or {}).get(c) or column_unit(c, sub[c]) for c in cols}
    bl = dict(blank or {})
    body = []
    text_rows = []
    raw: list[list[float] | None] = [[] if u[c] != "text" else None for c in cols]
    for _, row in sub.iterrows():
        cells: list[str] = []
        tcells = []
        for c in cols:
            v = row[c]
            placeholder = ((u[c] == "ms" or c == "addr") and not is_missing(v) and isinstance(v, (int, np.integer))
                           and v == -1)
            s = "" if (c in bl and not is_missing(v) and v == bl[c]) or placeholder else _cell(v, u[c])
            r = raw[len(cells)]
            if r is not None:
                r.append(_number(v) if s else float("nan"))
            right = u[c] != "text"
            cells.append(f'<td style="text-align:{"right" if right else "left"}">{e(s)}</td>')
            tcells.append(s)
        body.append("<tr>" + "".join(cells) + "</tr>")
        text_rows.append(tcells)
    heads = [_header(c, u[c]) for c in cols]
    th = "".join(f'<th style="text-align:{"left" if u[c] == "text" else "right"}">{e(h)}</th>'
                 for c, h in zip(cols, heads))
    more = f"first {len(sub)} of {len(df)} rows" if len(df) > len(sub) else ""
    cap = " — ".join(x for x in (caption, more) if x)
    html = ('<table class="nbprof-table" style="border-collapse:collapse;font-variant-numeric:tabular-nums">'
            + (f'<caption style="text-align:left">{e(cap)}</caption>' if cap else "")
            + f"<thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>")
    widths = [max([len(h)] + [len(r[i]) for r in text_rows]) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths))]
    lines += ["  ".join(s.rjust(w) if u[c] != "text" else s.ljust(w) for s, w, c in zip(r, widths, cols))
              for r in text_rows]
    text = ((cap + "\n") if cap else "") + "\n".join(lines)
    return Table(html, text, len(sub), heads=heads, cells=text_rows, raw=raw, caption=cap)


def _number(v: Any) -> float:
    """A cell's value as a float for sorting (NaN when it is not a number)."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def findings_table(findings: Sequence[Any], caption: str = "Findings") -> Table:
    """Advisor findings in the given order (the advisor's ranking) as a table: severity, finding, saving, where,
    next step — no evidence dicts."""
    from .verdict import saving_words

    ranked = list(findings)
    df = pd.DataFrame({
        "severity": [str(getattr(f, "severity", "")) for f in ranked],
        "finding": [str(getattr(f, "title", "")) for f in ranked],
        "saving": [saving_words(f) for f in ranked],
        "where": [str(getattr(f, "where", "")) for f in ranked],
        "next step": [str(getattr(f, "next_step", "")) for f in ranked],
    })
    return table(df, {c: "text" for c in df.columns}, caption=caption, empty="nothing flagged")


def evidence_items(evidence: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A finding's evidence as (label, human value) pairs: units from the key names, nested values (dicts, lists of
    dicts such as the ops an efficiency finding names) written out with the same rules (``{"time_ns": 295197}`` ->
    ``time: 0.295 ms``) instead of printed as Python."""
    return [(_header(k, column_unit(k)), _evidence_value(k, v)) for k, v in evidence.items()]


def _evidence_value(key: str, v: Any, depth: int = 0) -> str:
    """One evidence value in human units (``key`` gives the unit); containers at most 2 levels deep, 5/10 items."""
    if isinstance(v, Mapping):
        if depth >= 2:
            return f"{len(v)} fields"
        items = [f"{_evidence_label(kk)}: {_evidence_value(str(kk), vv, depth + 1)}" for kk, vv in list(v.items())[:5]]
        return ", ".join(items) + (", …" if len(v) > 5 else "")
    if isinstance(v, (list, tuple)):
        if depth >= 2:
            return f"{len(v)} items"
        items = [_evidence_value(key, x, depth + 1) for x in v[:10]]
        sep = "; " if any(isinstance(x, Mapping) for x in v[:10]) else ", "
        return sep.join(items) + (sep + "…" if len(v) > 10 else "")
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float, np.integer, np.floating)):
        unit = column_unit(key)
        if unit == "ms" and depth > 0 and not is_missing(v):  # nested: no header carries the unit
            return f"{fmt_ms(float(v))} ms"
        return _cell(v, unit if unit != "text" else "count")
    return str(v)


def _evidence_label(key: Any) -> str:
    """A nested evidence key without its unit suffix (the value carries the unit)."""
    k = str(key)
    for suf in ("_bytes_per_s", "_ns", "_bytes", "_ratio", "_share"):
        if k.endswith(suf):
            k = k[: -len(suf)]
    return k.replace("_", " ")
