"""Table cells as text: the formats of :class:`~guarddiag.report.document.Column` and which cells
hold a column's best value.

Plain text; each renderer escapes it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from guarddiag.report.document import Bullets, Paragraph, Report, Table
from guarddiag.report.glossary import link_first_uses

MAX_COLUMNS = 12
"""No rendered table is wider than this: wider ones are shown in parts (:func:`table_parts`)."""


P_FLOOR = 1e-16
"""Below this a p-value is shown as '< 1e-16': a double cannot hold it reliably (an exact 0
is an underflow, not an impossibility)."""


def p_text(p: float, digits: int = 3) -> str:
    """A p-value as text: ``digits`` significant digits, never a bare 0."""
    return f"< {P_FLOOR:.0e}" if p < P_FLOOR else f"{p:.{digits}g}"


def format_cell(v: Any, fmt: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if fmt in ("pct", "pp"):
        return f"{100 * v:.1f}"
    if fmt == "int":
        return f"{int(v):,}"
    if fmt == "num1":
        return f"{v:.1f}"
    if fmt == "num3":
        return f"{v:.3f}"
    if fmt == "p":
        return p_text(v)
    if fmt == "rho":
        return f"{v:+.2f}"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def table_cells(table: Table) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """Header strings and, per row, (cell text, is best) — plain text, escaped by renderers."""
    headers = [c.header for c in table.columns]
    best: dict[str, Any] = {}
    for c in table.columns:
        if c.best and c.key in table.frame.columns:
            vals = [v for v in table.frame[c.key].to_list() if v is not None]
            if vals:
                best[c.key] = max(vals) if c.best == "max" else min(vals)
    rows = []
    for r in table.frame.iter_rows(named=True):
        cells = []
        for c in table.columns:
            v = r.get(c.key)
            text = format_cell(v, c.fmt)
            if c.low and c.high and v is not None and r.get(c.low) is not None:
                text += f" [{format_cell(r[c.low], c.fmt)}, {format_cell(r[c.high], c.fmt)}]"
            cells.append((text, c.key in best and v is not None and v == best[c.key]))
        rows.append(cells)
    return headers, rows


def table_parts(table: Table, limit: int = MAX_COLUMNS) -> list[Table]:
    """``table`` as shown on screen: itself when it has at most ``limit`` columns, else parts
    of at most ``limit`` columns, each repeating the leading key columns (text or count columns
    without an interval, at most three) and named ``<name>`` then ``<name>--2``, ``--3``…
    Only the display is split: the CSV and LaTeX files keep the whole table."""
    cols = table.columns
    if len(cols) <= limit:
        return [table]
    lead = 0
    while lead < min(3, len(cols) - 1) and cols[lead].fmt in ("text", "int") \
            and cols[lead].low is None:
        lead += 1
    lead = max(lead, 1)
    rest = cols[lead:]
    step = limit - lead
    chunks = [rest[i:i + step] for i in range(0, len(rest), step)]
    head = table.caption.split(". ", 1)[0].rstrip(".")
    parts = []
    for i, chunk in enumerate(chunks, start=1):
        caption = (f"{table.caption} (Part 1 of {len(chunks)}: wider than {limit} columns, "
                   "so shown in parts.)" if i == 1 else f"{head} (part {i} of {len(chunks)}).")
        parts.append(replace(table, name=table.name if i == 1 else f"{table.name}--{i}",
                             caption=caption, columns=(*cols[:lead], *chunk)))
    return parts


def linked_prose(report: Report, escape: Callable[[str], str],
                 link: Callable[[str, str], str]) -> dict[tuple[int, int, int], str]:
    """Escaped prose and captions keyed (section, block, item), the first use of each glossary
    term linked to its definition by ``link(shown, anchor)``: one walk for every renderer."""
    keys, texts = [], []
    for i, s in enumerate(report.sections):
        if s.omitted is not None:
            continue
        for j, b in enumerate(s.blocks):
            items = ([b.text] if isinstance(b, Paragraph) else list(b.items)
                     if isinstance(b, Bullets) else [b.caption]
                     if isinstance(b, Table) and len(table_parts(b)) == 1 else [])
            for k, text in enumerate(items):
                keys.append((i, j, k))
                texts.append(escape(text))
    linked = link_first_uses(texts, escape, link)
    return dict(zip(keys, linked, strict=True))
