"""Reading one :class:`~guarddiag.audit.stream.Task` in checked batches of (texts, ids).

Every format is read as a stream (parquet by polars, a run of rows at a time; Arrow IPC and CSV
by pyarrow; JSON lines in blocks cut at line ends, :mod:`~guarddiag.audit.jsonlread`), so a
worker holds one batch at a time. Each batch is checked as :func:`guarddiag.audit.read_pool`
checks a whole file. A problem of the file (a missing column, a CSV it cannot parse, bytes that
are not UTF-8 in a typed column) is an error naming the shard and its row (or, for bytes that
are not UTF-8 in a text format, its line). A problem of one row is a
:class:`~guarddiag.audit.badrows.BadRow` carried by its batch, and the read goes on: a
malformed JSON line, a value of the wrong type (the row is skipped), a missing id (the row is
audited under its address). Duplicate ids span shards, so the engine checks those over the
whole pool.

A byte-range task of a JSON lines shard starts at the first line that starts in its range and
numbers its rows and lines from 1 (the scan store moves them on by the tasks before it). An
error there is reported as the whole shard's read reports it (the read is redone, on the error
path only, from the whole read's block holding the range's first line, after counting the rows
before it): the shard's own line, row and byte.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, cast

import numpy as np
import polars as pl

from guarddiag import files
from guarddiag.audit import jsonlread
from guarddiag.audit.badrows import BadRow
from guarddiag.audit.fields import WrongTypeError, extract, parse_field
from guarddiag.audit.jsonlread import RawBatch, ReadCheck, nested_hint, read_jsonl
from guarddiag.audit.stream import BATCH_ROWS, Task
from guarddiag.errors import GuarddiagError, at

__all__ = ["PoolBatch", "arrow_allocator", "check_batch", "read_task"]

_ID_TYPES = (pl.String, pl.Int64, pl.Int32, pl.UInt64, pl.UInt32, pl.Int16, pl.Int8, pl.UInt16,
             pl.UInt8)


@dataclass(frozen=True)
class PoolBatch:
    """Checked rows of one shard: non-empty texts and, unless rows are numbered, their ids."""

    first_row: int
    """1-based row number, within the shard, of ``texts[0]``; within the task for a task with
    a ``byte_range`` (:class:`~guarddiag.audit.stream.Task`)."""
    texts: pl.Series
    ids: pl.Series | None
    """One id per row (not per text)."""
    n_rows: int = -1
    """Rows the batch read (``texts.len()`` unless texts come from ``fields``)."""
    rows: pl.Series | None = None
    """With ``fields``: the row (0-based, within the batch) of each text."""
    paths: pl.Series | None = None
    """With ``fields``: the concrete field path of each text (``messages[2].content``)."""
    missing: dict[str, int] = dc_field(default_factory=dict)
    """With ``fields``: rows where each field is missing (absent or null)."""
    empty: dict[str, int] = dc_field(default_factory=dict)
    """With ``fields``: rows where each field holds only blank text."""
    surrogates: int = 0
    """Lone UTF-16 surrogates replaced by U+FFFD."""
    first_gap: dict[str, int] = dc_field(default_factory=dict)
    """With ``fields``: the first row (0-based, within the batch) missing or empty in each
    field that has one."""
    non_text: dict[str, int] = dc_field(default_factory=dict)
    """With ``fields``: content parts of another type than text (images), per field."""
    lines: np.ndarray | None = None
    """Per row, its physical line (JSON lines; numbered within the task); else None."""
    offsets: np.ndarray | None = None
    """Per row, the byte offset of its line in the (decompressed) file."""
    bad: tuple[BadRow, ...] = ()
    """Bad lines and rows of the batch, rows numbered within the task from 1."""
    lines_read: int = 0
    """Physical lines the task has read through this batch (JSON lines)."""


Raw = Iterator[RawBatch]


def read_task(task: Task, *, text_column: str, id_column: str | None,
              fields: tuple[str, ...] | None = None, ids_only: bool = False,
              batch_rows: int = BATCH_ROWS) -> Iterator[PoolBatch]:
    """The task's rows in checked batches, in order. With ``fields`` (nested paths,
    :mod:`guarddiag.audit.fields`) the texts are every text the paths reach, missing and empty
    ones counted per field; ``ids_only`` reads and checks only the ids (empty texts)."""
    roots = [] if ids_only else (list(dict.fromkeys(parse_field(f).root for f in fields))
                                 if fields else [text_column])
    needed = roots + ([id_column] if id_column is not None else [])
    loose = frozenset(roots) if fields else frozenset()
    check = ReadCheck(text_column=None if ids_only or fields else text_column,
                      id_column=id_column, fields=None if ids_only else fields)
    if task.byte_range is not None:
        yield from _jsonl_range(task.path, task.byte_range, needed, check, loose)
        return
    raw: Raw
    if task.fmt == "parquet":
        raw = _parquet(task, needed, batch_rows)
    elif task.fmt == "arrow":
        raw = _arrow(task.path, needed, batch_rows)
    elif task.fmt in ("csv", "tsv"):
        raw = _csv(task.path, needed, tab=task.fmt == "tsv")
    elif task.fmt == "jsonl":
        raw = read_jsonl(task.path, needed, jsonlread.blocks(task.path), check=check,
                         loose=loose)
    else:
        raw = iter([RawBatch(1, files.read_table(task.path, columns=needed))])
    yield from _checked(raw, task.path, check)


def _checked(raw: Iterable[RawBatch], path: str, check: ReadCheck) -> Iterator[PoolBatch]:
    for one in raw:
        if one.frame.height or one.bad or one.lines_read:
            yield _batch(one, path, check)


def _batch(raw: RawBatch, path: str, check: ReadCheck) -> PoolBatch:
    frame, first_row = raw.frame, raw.first_row
    address: dict[str, Any] = {"lines": raw.lines, "offsets": raw.offsets,
                               "lines_read": raw.lines_read}
    if not frame.height:    # only bad lines, or only the count of lines read
        return PoolBatch(first_row=first_row, texts=pl.Series("text", [], dtype=pl.String),
                         ids=None if check.id_column is None else pl.Series([], dtype=pl.String),
                         n_rows=0, bad=tuple(raw.bad), missing=dict.fromkeys(
                             check.fields or (), 0), empty=dict.fromkeys(check.fields or (), 0),
                         rows=None if not check.fields else pl.Series([], dtype=pl.Int64),
                         **address)
    ids = None
    bad = list(raw.bad)
    if check.id_column is not None:
        ids = _ids(frame.get_column(check.id_column), path, first_row, check.id_column)
        bad += _missing_ids(ids, raw, path, check.id_column)
    if check.fields:
        return _field_batch(raw, path, check.fields, ids, bad, address)
    if check.text_column is None:
        return PoolBatch(first_row=first_row, texts=pl.Series("text", [], dtype=pl.String),
                         ids=ids, n_rows=frame.height, surrogates=raw.replaced,
                         bad=tuple(bad), **address)
    texts = frame.get_column(check.text_column)
    rows = None
    if raw.skip is not None:    # rows holding a wrong-typed value: not audited
        kept = pl.Series(~raw.skip)
        rows = pl.Series("row", np.flatnonzero(~raw.skip), dtype=pl.Int64)
        texts = texts.filter(kept)
    texts = _texts(texts, path, first_row, check.text_column)
    return PoolBatch(first_row=first_row, texts=texts, ids=ids, n_rows=frame.height,
                     surrogates=raw.replaced, rows=rows, bad=tuple(bad), **address)


def _missing_ids(ids: pl.Series, raw: RawBatch, path: str, column: str) -> list[BadRow]:
    """A ``missing_id`` bad row per row without an id (not counting rows already skipped)."""
    absent = ids.is_null().to_numpy().copy()
    if raw.skip is not None:
        absent &= ~raw.skip
    return [BadRow(kind="missing_id", file=path, row=raw.first_row + i, field=column,
                   line=None if raw.lines is None else int(raw.lines[i]),
                   byte=None if raw.offsets is None else int(raw.offsets[i]),
                   message="missing id (absent or null)")
            for i in np.flatnonzero(absent).tolist()]


def _field_batch(raw: RawBatch, path: str, fields: tuple[str, ...], ids: pl.Series | None,
                 bad: list[BadRow], address: dict[str, Any]) -> PoolBatch:
    """Every text the field paths reach, row by row, and the rows missing or empty per
    field; a row where a path meets a value of the wrong type is a ``wrong_type`` bad row
    and none of its texts is audited."""
    frame, first_row, replaced = raw.frame, raw.first_row, raw.replaced
    parsed = [parse_field(f) for f in fields]
    values = {p.root: frame.get_column(p.root).to_list() if p.root in frame.columns
              else [None] * frame.height for p in parsed}
    texts: list[str] = []
    rows: list[int] = []
    paths: list[str] = []
    missing = dict.fromkeys(fields, 0)
    empty = dict.fromkeys(fields, 0)
    non_text = dict.fromkeys(fields, 0)
    first_gap: dict[str, int] = {}
    for i in range(frame.height):
        if raw.skip is not None and raw.skip[i]:
            continue
        where = (f"{path} line {raw.lines[i]}" if raw.lines is not None
                 else f"{path} row {first_row + i}")
        try:
            found = [extract(spec, values[spec.root][i], where=where) for spec in parsed]
        except WrongTypeError as exc:
            bad.append(BadRow(kind="wrong_type", file=path, row=first_row + i,
                              line=None if raw.lines is None else int(raw.lines[i]),
                              byte=None if raw.offsets is None else int(raw.offsets[i]),
                              field=exc.path, message=exc.problem))
            continue
        for spec, one in zip(parsed, found, strict=True):
            replaced += one.surrogates
            non_text[spec.text] += one.non_text
            if one.status != "ok":
                (missing if one.status == "missing" else empty)[spec.text] += 1
                first_gap.setdefault(spec.text, i)
            for concrete, text in one.texts:
                texts.append(text)
                rows.append(i)
                paths.append(concrete)
    return PoolBatch(first_row=first_row, texts=pl.Series("text", texts, dtype=pl.String),
                     ids=ids, n_rows=frame.height,
                     rows=pl.Series("row", rows, dtype=pl.Int64),
                     paths=pl.Series("field", paths, dtype=pl.String), missing=missing,
                     empty=empty, surrogates=replaced, first_gap=first_gap,
                     non_text=non_text, bad=tuple(bad), **address)


def _require(path: str, found: list[str], needed: list[str]) -> None:
    missing = [c for c in needed if c not in found]
    if missing:
        raise GuarddiagError(f"{path}: missing column(s) {', '.join(missing)}; found "
                             f"{', '.join(found)}{nested_hint(missing)}")


def _cannot(path: str, fmt: str, exc: BaseException) -> GuarddiagError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return GuarddiagError(f"{path}: cannot read as {fmt} ({first})")


@contextlib.contextmanager
def arrow_allocator() -> Iterator[None]:
    """While the block runs, the tables pyarrow's readers build (Arrow IPC, CSV, JSON lines) are
    allocated from jemalloc, unless ``ARROW_DEFAULT_MEMORY_POOL`` names a pool. pyarrow's
    default on Linux, mimalloc, asks for transparent huge pages, and where the kernel's THP mode
    is ``madvise`` zeroing fresh ones cost some audits system time
    (docs/decisions.md#2026-12-05-the-audits-memory-and-threads; perf:
    ``clear_page_erms`` under ``do_huge_pmd_anonymous_page``, when pyarrow read parquet). The
    pool is the process's; the one it had is put back afterwards."""
    import pyarrow as pa

    previous = pool = pa.default_memory_pool()
    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        # NotImplementedError: a pyarrow built without jemalloc (Windows) keeps its default.
        with contextlib.suppress(NotImplementedError):
            pool = pa.jemalloc_memory_pool()
    pa.set_memory_pool(pool)
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


# ─── formats ───────────────────────────────────────────────────────────────────────────────────

def _parquet(task: Task, needed: list[str], batch_rows: int) -> Raw:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(task.path)
        _require(task.path, parquet.schema_arrow.names, needed)
        if not task.row_groups:
            return
        # A task's row groups are one run of rows; polars decodes only the pages a slice needs
        # (0.22 CPU-s per million synthetic rows, pyarrow's read_row_group + from_arrow 0.41).
        start = task.first_row - 1
        end = start + sum(parquet.metadata.row_group(g).num_rows for g in task.row_groups)
        lazy = pl.scan_parquet(task.path, glob=False, hive_partitioning=False).select(needed)
        for first in range(start, end, batch_rows):
            rows, row = min(batch_rows, end - first), first + 1
            try:
                # No columns (a count of rows): polars would give a frame of height 0.
                frame = lazy.slice(first, rows).collect() if needed else pl.DataFrame(height=rows)
            except pl.exceptions.PolarsError as exc:
                raise (_parquet_not_utf8(parquet, task, needed, first - start, rows)
                       or _cannot(task.path, "parquet", exc)) from None
            yield RawBatch(row, frame)
    except (OSError, pa.ArrowException, pl.exceptions.PolarsError) as exc:
        raise _cannot(task.path, "parquet", exc) from None


def _parquet_not_utf8(parquet: Any, task: Task, needed: list[str], offset: int, rows: int
                      ) -> GuarddiagError | None:
    """The first of a task's ``rows`` rows from ``offset`` on whose text in a string column is
    not UTF-8: polars refuses such a column, pyarrow (``parquet``) reads it as it is."""
    import pyarrow as pa

    batch = parquet.read_row_groups(task.row_groups, columns=needed).slice(offset, rows)
    texts = [n for n in needed if batch.schema.field(n).type in (pa.string(), pa.large_string())]
    found = (_not_utf8(batch.column(n).cast(pa.large_binary()).to_pylist(), task.path,
                       task.first_row + offset, n) for n in texts)
    return next(filter(None, found), None)


def _not_utf8(values: list[bytes | None], path: str, first_row: int, column: str
              ) -> GuarddiagError | None:
    """The error naming the first of ``values`` that is not UTF-8, or ``None``."""
    for row, raw in enumerate(values, start=first_row):
        try:
            raw is None or raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return GuarddiagError(f"{at(path, row=row, field=column)}: not UTF-8 text "
                                  f"(byte {exc.start})")
    return None


def _arrow(path: str, needed: list[str], batch_rows: int) -> Raw:
    # datasets' save_to_disk writes Arrow IPC *streams* of ~1,000-row batches; gather them into
    # batches of batch_rows so the per-batch work is not dominated by overhead.
    import pyarrow as pa

    try:
        source = pa.memory_map(path)
        try:
            file_reader = pa.ipc.open_file(source)
            batches: Any = (file_reader.get_batch(i)
                            for i in range(file_reader.num_record_batches))
            schema = file_reader.schema
        except pa.ArrowInvalid:
            source.seek(0)
            stream = pa.ipc.open_stream(source)
            batches, schema = stream, stream.schema
        _require(path, schema.names, needed)
        row, pending, count = 1, [], 0
        for batch in batches:
            pending.append(batch.select(needed))
            count += batch.num_rows
            if count >= batch_rows:
                yield RawBatch(row, cast(pl.DataFrame,
                                         pl.from_arrow(pa.Table.from_batches(pending))))
                row, pending, count = row + count, [], 0
        if pending:
            yield RawBatch(row, cast(pl.DataFrame,
                                     pl.from_arrow(pa.Table.from_batches(pending))))
    except (OSError, pa.ArrowException) as exc:
        raise _cannot(path, "arrow", exc) from None


def _csv(path: str, needed: list[str], *, tab: bool) -> Raw:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    # A first pass checks the bytes (a quoted field may hold line ends, so the parser's rows are
    # not lines; the line of a bad byte is only known from the raw bytes).
    header: list[str] | None = None
    for line, offset, block in jsonlread.blocks(path):
        jsonlread.check_utf8(path, block, line, offset)
        if header is None:
            header = _csv_header(block, tab=tab)
    _require(path, header or [], needed)
    delimiter = "\t" if tab else ","
    try:
        reader = pcsv.open_csv(
            pa.input_stream(path, compression="detect"),
            read_options=pcsv.ReadOptions(block_size=jsonlread.BLOCK_BYTES),
            parse_options=pcsv.ParseOptions(delimiter=delimiter, quote_char='"',
                                            newlines_in_values=True),
            convert_options=pcsv.ConvertOptions(
                include_columns=needed, column_types={c: pa.string() for c in needed},
                quoted_strings_can_be_null=False))
        row = 1
        for batch in reader:
            yield RawBatch(row, cast(pl.DataFrame, pl.from_arrow(batch)))
            row += batch.num_rows
    except (OSError, pa.ArrowException) as exc:
        raise _cannot(path, "tsv" if tab else "csv", exc) from None


def _csv_header(block: bytes, *, tab: bool) -> list[str]:
    import csv

    first = block.split(b"\n", 1)[0].decode("utf-8").lstrip("\ufeff").rstrip("\r")
    return next(csv.reader([first], delimiter="\t" if tab else ","), [])


# ─── byte ranges of JSON lines ──────────────────────────────────────────────────────────────────

def _jsonl_range(path: str, byte_range: tuple[int, int], needed: list[str], check: ReadCheck,
                 loose: frozenset[str]) -> Iterator[PoolBatch]:
    """The rows of the lines that start in ``byte_range``, rows and lines numbered from 1; an
    error raises the whole shard's read's error (module docstring)."""
    start, end = byte_range
    first = jsonlread.line_start(path, start)
    if first >= end:
        return      # no line starts in this range (it lies inside a longer line)
    try:
        yield from _checked(read_jsonl(path, needed, jsonlread.blocks(path, start=first,
                                                                      end=end),
                                       check=check, loose=loose), path, check)
    except GuarddiagError as exc:
        _raise_as_whole_read(path, first, end, needed, check, loose)
        raise exc from None     # not reached unless the whole read found no error (see there)


def _raise_as_whole_read(path: str, first: int, end: int, needed: list[str], check: ReadCheck,
                         loose: frozenset[str]) -> None:
    """Raise the error the whole shard's read gives for the range starting at line start
    ``first``: that read's blocks before the one holding ``first`` are only counted (their rows
    belong to earlier tasks; a malformed line there counts as a row), and from there on it is
    redone, batches discarded, up to the range's end. Returns if it raised nothing there."""
    row = 1
    with contextlib.closing(jsonlread.blocks(path)) as blocks:
        for found in blocks:
            if found[1] + len(found[2]) > first:
                break
            row += jsonlread.count_rows(found[2])
        else:
            return
        covering = itertools.takewhile(lambda b: b[1] < end, itertools.chain([found], blocks))
        for _ in _checked(read_jsonl(path, needed, covering, check=check, loose=loose, row=row),
                          path, check):
            pass
    line, offset, block = found
    # The whole read's blocks passed (which only a difference in pyarrow's typing of a smaller
    # block could cause): raise the range's own error with the shard's numbers.
    head = block[:first - offset]
    ranged = jsonlread.blocks(path, start=first, end=end, line=line + head.count(b"\n"))
    for _ in _checked(read_jsonl(path, needed, ranged, check=check, loose=loose,
                                 row=row + jsonlread.count_rows(head)), path, check):
        pass


# ─── checks ────────────────────────────────────────────────────────────────────────────────────

def check_batch(frame: pl.DataFrame, path: str, first_row: int, *, text_column: str,
                id_column: str | None) -> tuple[pl.Series, pl.Series | None]:
    """Texts (non-empty UTF-8 strings) and ids (strings, none missing) of one batch, with the
    errors of :func:`guarddiag.audit.read_pool` naming the shard's own row numbers."""
    batch = _batch(RawBatch(first_row, frame), path, ReadCheck(text_column, id_column))
    return batch.texts, batch.ids


def _texts(series: pl.Series, path: str, first_row: int, column: str) -> pl.Series:
    if series.dtype == pl.Binary:
        try:
            series = series.cast(pl.String, strict=True)
        except pl.exceptions.PolarsError as exc:
            raise _not_utf8(series.to_list(), path, first_row, column) or exc from None
    elif series.dtype in (pl.Categorical, pl.Null):
        series = series.cast(pl.String)
    elif series.dtype != pl.String:
        raise GuarddiagError(f"{at(path, field=column)}: expected text, found {series.dtype} "
                             "values")
    null = series.is_null()
    # Blank when nothing is left after its leading white space: half the cost of a strip at
    # both ends and a count of characters.
    blank = null | (series.str.strip_chars_start().str.len_bytes() == 0)
    if blank.any():
        # arg_max is None only for an empty series, and this one holds a True.
        row = cast(int, blank.arg_max()) + first_row
        count = int(blank.sum())
        nulls = int(null.sum())
        last = first_row + series.len() - 1
        what = "missing text (absent or null)" if null[row - first_row] else "empty text"
        split = f"{nulls} missing, {count - nulls} empty"
        more = (f" ({split} rows in all)" if count > 1 and first_row == 1 and
                series.len() < BATCH_ROWS else
                f" ({split} in rows {first_row}-{last})" if count > 1 else "")
        raise GuarddiagError(f"{at(path, row=row, field=column)}: {what}; every pool row "
                             f"needs a non-empty prompt{more} (--text-field skips and counts "
                             "rows without one)")
    return series


def _ids(series: pl.Series, path: str, first_row: int, column: str) -> pl.Series:
    if series.dtype == pl.Null:
        series = series.cast(pl.String)
    if series.dtype not in _ID_TYPES:
        raise GuarddiagError(f"{at(path, field=column)}: expected string or integer ids, found "
                             f"{series.dtype}")
    # A missing id is a bad row (_missing_ids): the row is audited under its address.
    return series.cast(pl.String)
