"""Rows the audit could not read as they are: found all in one pass, listed in
``bad_rows.jsonl``, and either the audit's error after the whole scan (``--bad-rows fail``, the
default) or passed over and counted (``--bad-rows skip``).

Kinds (:data:`BAD_KINDS`):

* ``malformed``: a JSON-lines line that is not JSON, not UTF-8 or not an object. It is not a
  row: it is not numbered, and nothing in it is audited;
* ``wrong_type``: a row whose text field (``--text-field``) or id holds a value of the wrong
  type (a number where text is expected, an object where a list is). The row is numbered but
  *skipped*: none of its texts is audited. (The one strict ``--text-column`` is no such case:
  a row without text there is an error at once, as every row must hold text there);
* ``missing_id``: a row without an id (absent or null), and ``repeated_id``: a row whose id
  another row holds too (every holder is listed). These rows are audited, under their physical
  address instead of the id (``corpus.jsonl line 4``), so that rows_to_remove names each one
  unambiguously.

Every bad row carries its file, its physical line (1-based, blank lines counted) and the byte
offset where that line starts in the (decompressed) file, when the format has lines (JSON
lines); its row (1-based within its file, as errors name rows) when it is a row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

import polars as pl

from guarddiag import files

__all__ = ["BAD_KINDS", "BAD_ROWS_FILE", "SKIPPED_KINDS", "Address", "BadRow", "address",
           "bad_counts", "bad_rows_failure", "describe_counts", "read_bad_rows",
           "write_bad_rows"]

BAD_KINDS = ("malformed", "wrong_type", "missing_id", "repeated_id")
SKIPPED_KINDS = ("malformed", "wrong_type")
"""The kinds whose rows are not audited at all (the others are, under their address)."""
BAD_ROWS_FILE = "bad_rows.jsonl"

Address = tuple[str, int, "int | None", "int | None"]
"""A pool row's physical address: (file, row within the file from 1, physical line from 1 or
None, byte offset of the line or None)."""

BadKind = Literal["malformed", "wrong_type", "missing_id", "repeated_id"]


@dataclass(frozen=True)
class BadRow:
    """One row (or line) the audit could not take as it is."""

    kind: BadKind
    file: str
    line: int | None
    """Physical line, 1-based, blank lines counted; None where the format has no lines."""
    byte: int | None
    """Offset of the line's first byte in the (decompressed) file."""
    row: int | None
    """Row within the file, 1-based; None for a line that is not a row (``malformed``)."""
    message: str
    """What is wrong, in a few words (``malformed JSON (Extra data)``)."""
    field: str | None = None
    id: str | None = None
    """The repeated id (``repeated_id``)."""

    def shifted(self, *, lines: int, rows: int) -> BadRow:
        """The same row with its line and row moved on by the lines and rows before its task
        (a byte-range task numbers from 1; :class:`~guarddiag.audit.stream.Task`)."""
        return replace(self, line=None if self.line is None else self.line + lines,
                       row=None if self.row is None else self.row + rows)

    @property
    def where(self) -> str:
        """``file line N`` (or ``file row N``): the address a row's id falls back to."""
        return address(self.file, line=self.line, row=self.row)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def address(file: str, *, line: int | None, row: int | None) -> str:
    """A row's physical address as one string: ``corpus.jsonl line 4`` where the format has
    lines, ``pool.parquet row 17`` otherwise."""
    return f"{file} line {line}" if line is not None else f"{file} row {row}"


def bad_counts(bad: Iterable[BadRow]) -> dict[str, int]:
    """Bad rows per kind, every kind present (0 if none), in :data:`BAD_KINDS` order."""
    counted = Counter(str(b.kind) for b in bad)
    return {kind: counted.get(kind, 0) for kind in BAD_KINDS}


_SCHEMA = {"kind": pl.String, "file": pl.String, "line": pl.Int64, "byte": pl.Int64,
           "row": pl.Int64, "message": pl.String, "field": pl.String, "id": pl.String}


def read_bad_rows(path: Path) -> list[BadRow]:
    """The bad rows a finished audit listed in ``path`` (``bad_rows.jsonl``)."""
    frame = pl.read_ndjson(path, schema=_SCHEMA)
    return [BadRow(**row) for row in frame.to_dicts()]


def write_bad_rows(bad: Sequence[BadRow], path: Path) -> Path | None:
    """``bad_rows.jsonl``: one line per bad row, in pool order (file order, then line or row),
    keys sorted; removed (None returned) when there is none, so that a folder never shows the
    bad rows of an earlier run."""
    if not bad:
        path.unlink(missing_ok=True)
        return None
    return files.write_jsonl(pl.DataFrame([b.to_dict() for b in bad], schema=_SCHEMA), path)


_NAMES = {"malformed": "malformed", "wrong_type": "wrong-typed", "missing_id": "without an id",
          "repeated_id": "with a repeated id"}


def describe_counts(counts: dict[str, int]) -> str:
    """``2 malformed, 1 wrong-typed, 24 with a repeated id`` (kinds with none left out)."""
    return ", ".join(f"{n:,} {_NAMES[k]}" for k, n in counts.items() if n)


def bad_rows_failure(bad: Sequence[BadRow], listed: Path) -> str:
    """The one-line error of ``--bad-rows fail`` after the whole scan: how many of each kind,
    the first three with their addresses, where all of them are listed and what to do."""
    first = "; ".join(_one_line(b) for b in bad[:3])
    return (f"{len(bad):,} bad rows in the pool ({describe_counts(bad_counts(bad))}), all listed "
            f"in {listed}; first: {first}. Fix them, or pass --bad-rows skip to audit the rest "
            "(malformed and wrong-typed rows are skipped, rows without a unique id are audited "
            "under their address)")


def _one_line(bad: BadRow) -> str:
    row = f" (row {bad.row})" if bad.row is not None and bad.line is not None else ""
    field = f' field "{bad.field}"' if bad.field is not None else ""
    return f"{bad.where}{row}{field}: {bad.message}"
