"""JSON lines, read in blocks cut at line ends, each row with its physical address.

A block is parsed by pyarrow's JSON reader when it can (every line an object, one type per
column); otherwise line by line (:func:`guarddiag.files.json_lines_at`), which also finds the
bad lines. Nothing stops at a bad line: a line that is not UTF-8, not JSON or not an object is
a ``malformed`` :class:`~guarddiag.audit.badrows.BadRow` (not a row), a row whose id holds a
value of the wrong type is a ``wrong_type`` one (a row, skipped), and the read goes on. The one
strict text column is the exception: a row without text there is an error, whatever its type
(``--text-field`` skips and counts such rows).

Every row carries its physical line (1-based, blank lines counted, as ``\\n`` counts them) and
the byte offset of that line in the (decompressed) file: :class:`RawBatch`.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import polars as pl

from guarddiag import files
from guarddiag.audit.badrows import BadRow
from guarddiag.audit.fields import replace_surrogates
from guarddiag.errors import GuarddiagError, at

__all__ = ["BLOCK_BYTES", "RawBatch", "ReadCheck", "blocks", "check_utf8", "count_rows",
           "line_start", "nested_hint", "read_jsonl"]

BLOCK_BYTES = 1 << 24
"""Decompressed bytes a text-format reader takes at a time (cut at the last line end)."""
_BLANK_START = np.frombuffer(b" \t\r\x0b\x0c", dtype=np.uint8)
"""Bytes a blank line may start with (a line starting otherwise holds something)."""


@dataclass(frozen=True)
class ReadCheck:
    """How a batch is checked: one strict text column, nested fields, or ids alone."""

    text_column: str | None
    id_column: str | None
    fields: tuple[str, ...] | None = None


@dataclass
class RawBatch:
    """A reader's frame of the needed columns, before the checks of
    :mod:`~guarddiag.audit.shardread`."""

    first_row: int
    frame: pl.DataFrame
    replaced: int = 0
    """Lone surrogates replaced while reading."""
    lines: np.ndarray | None = None
    """Per row, its physical line (numbered as the read numbers lines); None without lines."""
    offsets: np.ndarray | None = None
    """Per row, the byte offset of its line in the (decompressed) file."""
    bad: list[BadRow] = field(default_factory=list)
    """Bad lines and rows met in this batch (rows numbered as ``first_row`` numbers them)."""
    skip: np.ndarray | None = None
    """Per row, True where a value has the wrong type: the row is not audited."""
    lines_read: int = 0
    """Physical lines read so far, through this batch (a task's last batch: all of its)."""


def blocks(path: str, *, start: int = 0, end: int | None = None, line: int = 1
           ) -> Generator[tuple[int, int, bytes], None, None]:
    """Decompressed blocks cut at line ends, with the line number (counted from ``line``) of
    each block's first line and its byte offset in the (decompressed) file. With ``end`` (a
    plain file), only the lines from the one starting at byte ``start`` to the one holding byte
    ``end - 1``."""
    import pyarrow as pa

    offset, carry = start, b""
    with pa.input_stream(path, compression="detect") as fh:
        if start:
            fh.seek(start)      # a plain file (only those are split into ranges)
        while True:
            chunk = fh.read(BLOCK_BYTES)
            data = carry + chunk
            if not data:
                return
            if end is not None and end - 1 - offset < len(data):
                last = data.find(b"\n", max(end - 1 - offset, 0))
                if last >= 0:       # the line holding byte end - 1 ends here
                    yield line, offset, data[:last + 1]
                    return
            cut = data.rfind(b"\n") + 1 if chunk else len(data)
            if cut == 0:        # one line longer than a block: read on
                carry = data
                continue
            block, carry = data[:cut], data[cut:]
            yield line, offset, block
            line += block.count(b"\n")
            offset += len(block)


def check_utf8(path: str, block: bytes, line: int, offset: int, *,
               rows_before: int | None = None) -> None:
    """A block that is not UTF-8 is an error naming the line (and, for JSON lines, where a
    line is a row, the row) of its first bad byte."""
    try:
        block.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = line + block.count(b"\n", 0, exc.start)
        row = ""
        if rows_before is not None:
            before = block[:block.rfind(b"\n", 0, exc.start) + 1]
            row = f" (row {rows_before + count_rows(before) + 1})"
        raise GuarddiagError(f"{path} line {where}{row}: not UTF-8 text (byte "
                             f"{offset + exc.start} of the {_packed(path)}file)") from None


def _packed(path: str) -> str:
    return "decompressed " if path.endswith((".gz", ".zst")) else ""


def read_jsonl(path: str, needed: list[str], blocks: Iterable[tuple[int, int, bytes]], *,
               check: ReadCheck, loose: frozenset[str] = frozenset(), row: int = 1
               ) -> Iterator[RawBatch]:
    """Frames of ``blocks`` (line, byte offset, bytes cut at line ends), the first row being
    number ``row``. The ``loose`` columns (the roots of nested field paths) may hold any JSON
    value and be absent from a block (its rows then miss them). The last batch is yielded even
    when it holds no row, for its :attr:`RawBatch.lines_read`."""
    import pyarrow as pa
    import pyarrow.json as pjson

    lines_read = 0
    for line, offset, block in blocks:
        lines_read = line - 1 + block.count(b"\n") + (not block.endswith(b"\n"))
        raw: RawBatch | None = None
        if _is_utf8(block):
            try:
                table = pjson.read_json(pa.BufferReader(block),
                                        read_options=pjson.ReadOptions(block_size=1 << 22))
            except pa.ArrowInvalid:
                pass    # types that change between rows, or a malformed line: line by line
            else:
                raw = _jsonl_frame(path, block, line, offset, row, table, needed, check, loose)
        if raw is None:
            raw = _jsonl_by_line(path, block, line, offset, row, needed, check, loose)
        raw.lines_read = lines_read
        yield raw
        row += raw.frame.height


def _is_utf8(block: bytes) -> bool:
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _row_starts(block: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(line index within ``block``, byte offset within it) of each of its non-blank lines, in
    order: where the rows of a block pyarrow read come from (it passes over blank lines, as
    :func:`~guarddiag.files.json_lines_at` does)."""
    data = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(data == 10)
    starts = np.concatenate(([0], ends + 1))
    if starts[-1] == len(block):
        starts = starts[:-1]
    stops = np.concatenate((ends, [len(block)]))[:len(starts)]
    lengths = stops - starts
    doubtful = (lengths == 0) | np.isin(data[np.minimum(starts, max(len(block) - 1, 0))],
                                        _BLANK_START)
    held = ~doubtful
    for i in np.flatnonzero(doubtful & (lengths > 0)).tolist():
        held[i] = bool(block[starts[i]:stops[i]].strip())
    index = np.flatnonzero(held)
    return index, starts[index]


def _jsonl_frame(path: str, block: bytes, line: int, offset: int, row: int, table: Any,
                 needed: list[str], check: ReadCheck, loose: frozenset[str]
                 ) -> RawBatch | None:
    """The needed columns of a block pyarrow read as ``table``; None where the block must be
    read line by line instead."""
    import pyarrow as pa

    def typed_wrong(c: str) -> bool:
        kind = table.schema.field(c).type
        if pa.types.is_temporal(kind):
            return True
        if c == check.id_column:
            return not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                        or pa.types.is_integer(kind) or pa.types.is_null(kind))
        return c not in loose and not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                                       or pa.types.is_null(kind))

    if any(c in table.column_names and typed_wrong(c) for c in needed) or any(
            c in table.column_names and _has_temporal(table.schema.field(c).type)
            for c in loose):
        # pyarrow made timestamps of date-like strings, floats of integers past 64 bits, or a
        # column of another type: read the values as written, row by row (a block's extent
        # must not decide whether a row is valid).
        return None
    index, starts = _row_starts(block)
    if len(index) != table.num_rows:
        return None
    if loose:
        present = [c for c in needed if c in table.column_names]
        frame = cast(pl.DataFrame, pl.from_arrow(table.select(present)))
        absent = [c for c in loose if c not in table.column_names]
        if absent:
            frame = frame.with_columns(pl.lit(None).alias(c) for c in absent)
        needed = [c for c in needed if c not in loose or c in table.column_names or c in absent]
    missing = [c for c in needed if c not in table.column_names and c not in loose]
    if missing and table.num_rows:
        raise GuarddiagError(
            f"{at(path, row=row)}: missing column(s) {', '.join(missing)} (line "
            f"{line}); found {', '.join(table.column_names)}{nested_hint(missing)}")
    if not loose:
        frame = (cast(pl.DataFrame, pl.from_arrow(table.select(needed))) if not missing
                 else pl.DataFrame())
    return RawBatch(first_row=row, frame=frame, lines=index + line, offsets=starts + offset)


def _has_temporal(kind: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_temporal(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_has_temporal(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_temporal(kind.value_type)
    return False


def _jsonl_by_line(path: str, block: bytes, first_line: int, offset: int, row: int,
                   needed: list[str], check: ReadCheck, loose: frozenset[str]) -> RawBatch:
    """The needed columns, parsed line by line; lone surrogates in text and ids are replaced
    (and counted), the ``loose`` columns kept as Python values for the field paths. Bad lines
    and wrong-typed values are recorded (module docstring)."""
    columns: dict[str, list[Any]] = {c: [] for c in needed}
    lines: list[int] = []
    starts: list[int] = []
    skip: list[bool] = []
    bad: list[BadRow] = []
    replaced = 0
    seen: set[str] = set()

    def malformed(n: int, start: int, problem: str) -> None:
        if problem.startswith("not UTF-8"):     # the bad byte's offset, in the whole file
            byte = int(problem.rsplit(" ", 1)[1].rstrip(")"))
            problem = f"not UTF-8 text (byte {offset + byte} of the {_packed(path)}file)"
        bad.append(BadRow(kind="malformed", file=path, line=n, byte=offset + start, row=None,
                          message=problem))

    for n, start, doc in files.json_lines_at(block, path, first_line=first_line,
                                             on_bad=malformed):
        if not isinstance(doc, dict):
            malformed(n, start, f"expected a JSON object, found {type(doc).__name__}")
            continue
        if len(seen) < 64:
            seen.update(doc)
        wrong: tuple[str, str] | None = None
        for c in needed:
            value = doc.get(c)
            if c in loose:
                columns[c].append(value)
                continue
            # The text must be text; an id may be text or an integer (mixed ids become text).
            text = c != check.id_column
            allowed = (str,) if text else (str, int)
            if value is not None and (isinstance(value, bool) or not isinstance(value, allowed)):
                hint = (" (name a path into it with --text-field, e.g. "
                        f"{c}[].content)" if text and isinstance(value, list | dict) else "")
                problem = (f"expected {'text' if text else 'text or an integer'}, found "
                           f"{type(value).__name__}{hint}")
                if text:    # the one strict text column: every row holds text, or it is wrong
                    raise GuarddiagError(f'{path} line {n} field "{c}": {problem}')
                wrong = wrong or (c, problem)
                value = None
            if isinstance(value, str):
                value, count = replace_surrogates(value)
                replaced += count
            columns[c].append(None if value is None else str(value))
        if wrong is not None:
            bad.append(BadRow(kind="wrong_type", file=path, line=n, byte=offset + start,
                              row=row + len(lines), field=wrong[0], message=wrong[1]))
        lines.append(n)
        starts.append(offset + start)
        skip.append(wrong is not None)
    absent = [c for c in needed if c not in loose and c not in seen]
    if absent and columns[needed[0]]:
        # As the block reader says it: a column no row of the block holds.
        raise GuarddiagError(f"{path} line {first_line}: missing column(s) {', '.join(absent)}; "
                             f"found {', '.join(sorted(seen))}{nested_hint(absent)}")
    frame = pl.DataFrame({c: pl.Series(c, values, dtype=pl.Object if c in loose else pl.String)
                          for c, values in columns.items()})
    return RawBatch(first_row=row, frame=frame, replaced=replaced,
                    lines=np.asarray(lines, dtype=np.int64),
                    offsets=np.asarray(starts, dtype=np.int64), bad=bad,
                    skip=np.asarray(skip, dtype=bool) if any(skip) else None)


def nested_hint(names: list[str]) -> str:
    nested = [c for c in names if "." in c or "[" in c]
    return (f" ({nested[0]} looks like a nested path: name it with --text-field)"
            if nested else "")


def line_start(path: str, start: int) -> int:
    """Offset of the first line starting at or after ``start``: just after the first line end at
    or after ``start - 1`` (the file's size if there is none)."""
    if start == 0:
        return 0
    with open(path, "rb") as fh:
        fh.seek(start - 1)
        pos = start - 1
        while chunk := fh.read(1 << 16):
            cut = chunk.find(b"\n")
            if cut >= 0:
                return pos + cut + 1
            pos += len(chunk)
    return pos


def count_rows(block: bytes) -> int:
    """JSON lines rows of a block: its lines that are not blank (as :func:`read_jsonl` counts
    them)."""
    return sum(1 for line in block.split(b"\n") if line.strip())
