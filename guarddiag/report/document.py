"""The report's document model: blocks (paragraphs, bullets, tables, figures, verbatim examples),
sections, and the finished report.

Renderers turn these into HTML, Markdown, LaTeX and CSV."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl


@dataclass(frozen=True)
class Paragraph:
    text: str
    banner: bool = False
    """A warning the reader must not miss (boxed in HTML, a bold quote in Markdown)."""
    cite: bool = False
    """The sentence saying what a reader may cite (framed in HTML, bold in Markdown)."""


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Column:
    """One displayed column: ``key`` in the table's frame, how to format it, and optionally the
    frame columns holding its interval and which value counts as best (bold)."""

    key: str
    header: str
    fmt: str = "text"
    """text | int | pct (fraction shown as %) | pp (fraction shown as points) | num1 | num3 |
    p | rho"""
    low: str | None = None
    high: str | None = None
    best: str | None = None
    """``max`` or ``min``: bold the best value of the column (ties all bold)."""


MAX_ROWS = 30
"""Tables longer than this are folded (:attr:`Table.folded`): report.md stays a ten-minute read."""


@dataclass(frozen=True)
class Table:
    name: str
    """File stem under tables/ (and the anchor in HTML)."""
    caption: str
    columns: tuple[Column, ...]
    frame: pl.DataFrame = field(repr=False)
    """Raw values; the CSV is this frame as it is."""
    collapsed: bool = False
    """Shown folded (``<details>``) in HTML: long appendix tables."""
    csv_only: bool = False
    """Machine-readable long tables: written as CSV only and pointed to from HTML/Markdown."""

    @property
    def folded(self) -> bool:
        """Shown folded in HTML and as a link to its CSV in Markdown: marked ``collapsed``, or
        longer than :data:`MAX_ROWS` rows (a per-run listing is looked up, not read)."""
        return self.collapsed or self.frame.height > MAX_ROWS


@dataclass(frozen=True)
class FigureBlock:
    name: str
    figure: Any = field(repr=False)
    caption: str


@dataclass(frozen=True)
class Examples:
    """Verbatim texts (benchmark prompts, pool rows): always escaped, shown as preformatted."""

    caption: str
    items: tuple[tuple[str, str], ...]
    """(label, text) pairs."""


@dataclass(frozen=True)
class Definitions:
    """Terms and their meanings (the glossary): each term is an anchor the renderers link the
    term's first use to (:mod:`guarddiag.report.glossary`)."""

    items: tuple[tuple[str, str], ...]


Block = Paragraph | Bullets | Table | FigureBlock | Examples | Definitions


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Block, ...] = ()
    results: Any = None
    """JSON-able payload stored under results.json ``results[id]``."""
    omitted: str | None = None

    @classmethod
    def omit(cls, id: str, title: str, note: str) -> Section:
        return cls(id=id, title=title, omitted=note)


@dataclass(frozen=True)
class Report:
    title: str
    sections: tuple[Section, ...]
    results: Mapping[str, Any] = field(repr=False)
    notes: tuple[str, ...] = ()
