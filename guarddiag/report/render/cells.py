"""Table cells as text: the formats of :class:`~guarddiag.report.document.Column` and which cells
hold a column's best value. Plain text; each renderer escapes it."""

from __future__ import annotations

import math
from typing import Any

from guarddiag.report.document import Table


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
        return f"{v:.3g}"
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
