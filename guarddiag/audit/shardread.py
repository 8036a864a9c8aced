"""Reading one :class:`~guarddiag.audit.stream.Task` in checked batches of (texts, ids).

Every format is read as a stream (parquet by polars, a run of rows at a time; Arrow IPC and CSV
by pyarrow; JSON lines in blocks cut at line ends), so a worker holds one batch at a time. Each
batch is checked as :func:`guarddiag.audit.read_pool` checks a whole file; a bad row is reported
with its shard and its row (or, for bytes that are not UTF-8 in a text format, its line) within
the shard. Duplicate ids span shards, so the engine checks those over the whole pool.

A byte-range task of a JSON lines shard starts at the first line that starts in its range and
numbers its rows from 1. A bad row there is reported as the whole shard's read reports it (the
read is redone, on the error path only, from the whole read's block holding the range's first
line, after counting the rows before it): the shard's own line, row and byte.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, cast

import polars as pl

from guarddiag import files
from guarddiag.audit.fields import extract, parse_field, replace_surrogates
from guarddiag.audit.stream import BATCH_ROWS, Task
from guarddiag.errors import GuarddiagError, at

__all__ = ["PoolBatch", "arrow_allocator", "check_batch", "read_task"]

_BLOCK_BYTES = 1 << 24
"""Decompressed bytes a text-format reader takes at a time (cut at the last line end)."""
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


Raw = Iterator[tuple[int, pl.DataFrame, int]]
"""(first row, frame of the needed columns, lone surrogates replaced while reading)."""


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
    check = _Check(text_column=None if ids_only or fields else text_column,
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
        raw = _jsonl(task.path, needed, _blocks(task.path), check=check, loose=loose)
    else:
        raw = iter([(1, files.read_table(task.path, columns=needed), 0)])
    yield from _checked(raw, task.path, check)


@dataclass(frozen=True)
class _Check:
    """How a batch is checked: one strict text column, nested fields, or ids alone."""

    text_column: str | None
    id_column: str | None
    fields: tuple[str, ...] | None = None


def _checked(raw: Iterable[tuple[int, pl.DataFrame, int]], path: str, check: _Check
             ) -> Iterator[PoolBatch]:
    for first_row, frame, replaced in raw:
        if frame.height:
            yield _batch(frame, path, first_row, check, replaced)


def _batch(frame: pl.DataFrame, path: str, first_row: int, check: _Check, replaced: int
           ) -> PoolBatch:
    ids = None
    if check.id_column is not None:
        ids = _ids(frame.get_column(check.id_column), path, first_row, check.id_column)
    if check.fields:
        return _field_batch(frame, path, first_row, check.fields, ids, replaced)
    if check.text_column is None:
        return PoolBatch(first_row=first_row, texts=pl.Series("text", [], dtype=pl.String),
                         ids=ids, n_rows=frame.height, surrogates=replaced)
    texts = _texts(frame.get_column(check.text_column), path, first_row, check.text_column)
    return PoolBatch(first_row=first_row, texts=texts, ids=ids, n_rows=frame.height,
                     surrogates=replaced)


def _field_batch(frame: pl.DataFrame, path: str, first_row: int, fields: tuple[str, ...],
                 ids: pl.Series | None, replaced: int) -> PoolBatch:
    """Every text the field paths reach, row by row, and the rows missing or empty per
    field."""
    parsed = [parse_field(f) for f in fields]
    values = {p.root: frame.get_column(p.root).to_list() if p.root in frame.columns
              else [None] * frame.height for p in parsed}
    texts: list[str] = []
    rows: list[int] = []
    paths: list[str] = []
    missing = dict.fromkeys(fields, 0)
    empty = dict.fromkeys(fields, 0)
    first_gap: dict[str, int] = {}
    for i in range(frame.height):
        where = f"{path} row {first_row + i}"
        for spec in parsed:
            found = extract(spec, values[spec.root][i], where=where)
            replaced += found.surrogates
            if found.status != "ok":
                (missing if found.status == "missing" else empty)[spec.text] += 1
                first_gap.setdefault(spec.text, i)
            for concrete, text in found.texts:
                texts.append(text)
                rows.append(i)
                paths.append(concrete)
    return PoolBatch(first_row=first_row, texts=pl.Series("text", texts, dtype=pl.String),
                     ids=ids, n_rows=frame.height,
                     rows=pl.Series("row", rows, dtype=pl.Int64),
                     paths=pl.Series("field", paths, dtype=pl.String), missing=missing,
                     empty=empty, surrogates=replaced, first_gap=first_gap)


def _require(path: str, found: list[str], needed: list[str]) -> None:
    missing = [c for c in needed if c not in found]
    if missing:
        raise GuarddiagError(f"{path}: missing column(s) {', '.join(missing)}; found "
                             f"{', '.join(found)}{_nested_hint(missing)}")


def _cannot(path: str, fmt: str, exc: BaseException) -> GuarddiagError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return GuarddiagError(f"{path}: cannot read as {fmt} ({first})")


@contextlib.contextmanager
def arrow_allocator() -> Iterator[None]:
    """While the block runs, the tables pyarrow's readers build (Arrow IPC, CSV, JSON lines) are
    allocated from jemalloc, unless ``ARROW_DEFAULT_MEMORY_POOL`` names a pool. pyarrow's
    default on Linux, mimalloc, asks for transparent huge pages, and where the kernel's THP mode
    is ``madvise`` zeroing fresh ones cost some audits 0.3-0.5 s of system time (perf:
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
            yield row, frame, 0
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
                yield row, cast(pl.DataFrame, pl.from_arrow(pa.Table.from_batches(pending))), 0
                row, pending, count = row + count, [], 0
        if pending:
            yield row, cast(pl.DataFrame, pl.from_arrow(pa.Table.from_batches(pending))), 0
    except (OSError, pa.ArrowException) as exc:
        raise _cannot(path, "arrow", exc) from None


def _blocks(path: str, *, start: int = 0, end: int | None = None, line: int = 1
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
            chunk = fh.read(_BLOCK_BYTES)
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


def _check_utf8(path: str, block: bytes, line: int, offset: int, *,
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
            row = f" (row {rows_before + _count_rows(before) + 1})"
        packed = "decompressed " if path.endswith((".gz", ".zst")) else ""
        raise GuarddiagError(f"{path} line {where}{row}: not UTF-8 text (byte "
                             f"{offset + exc.start} of the {packed}file)") from None


def _csv(path: str, needed: list[str], *, tab: bool) -> Raw:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    # A first pass checks the bytes (a quoted field may hold line ends, so the parser's rows are
    # not lines; the line of a bad byte is only known from the raw bytes).
    header: list[str] | None = None
    for line, offset, block in _blocks(path):
        _check_utf8(path, block, line, offset)
        if header is None:
            header = _csv_header(block, tab=tab)
    _require(path, header or [], needed)
    delimiter = "\t" if tab else ","
    try:
        reader = pcsv.open_csv(
            pa.input_stream(path, compression="detect"),
            read_options=pcsv.ReadOptions(block_size=_BLOCK_BYTES),
            parse_options=pcsv.ParseOptions(delimiter=delimiter, quote_char='"',
                                            newlines_in_values=True),
            convert_options=pcsv.ConvertOptions(
                include_columns=needed, column_types={c: pa.string() for c in needed},
                quoted_strings_can_be_null=False))
        row = 1
        for batch in reader:
            yield row, cast(pl.DataFrame, pl.from_arrow(batch)), 0
            row += batch.num_rows
    except (OSError, pa.ArrowException) as exc:
        raise _cannot(path, "tsv" if tab else "csv", exc) from None


def _csv_header(block: bytes, *, tab: bool) -> list[str]:
    import csv

    first = block.split(b"\n", 1)[0].decode("utf-8").lstrip("\ufeff").rstrip("\r")
    return next(csv.reader([first], delimiter="\t" if tab else ","), [])


def _jsonl(path: str, needed: list[str], blocks: Iterable[tuple[int, int, bytes]], *,
           check: _Check, loose: frozenset[str] = frozenset(), row: int = 1) -> Raw:
    """Frames of ``blocks`` (line, byte offset, bytes cut at line ends), the first row being
    number ``row``. The ``loose`` columns (the roots of nested field paths) may hold any JSON
    value and be absent from a block (its rows then miss them)."""
    import pyarrow as pa
    import pyarrow.json as pjson

    for line, offset, block in blocks:
        _check_utf8(path, block, line, offset, rows_before=row - 1)
        try:
            table = pjson.read_json(pa.BufferReader(block),
                                    read_options=pjson.ReadOptions(block_size=1 << 22))
        except pa.ArrowInvalid:
            # Types that change between rows, or malformed JSON: parse line by line, which
            # also names the line of a malformed one.
            frame, replaced = _jsonl_by_line(path, block, line, needed, check, loose)
        else:
            frame, replaced = _jsonl_frame(path, block, line, row, table, needed, check, loose)
        yield row, frame, replaced
        row += frame.height


def _jsonl_frame(path: str, block: bytes, line: int, row: int, table: Any,
                 needed: list[str], check: _Check, loose: frozenset[str]
                 ) -> tuple[pl.DataFrame, int]:
    """The needed columns of a block pyarrow read as ``table``."""
    import pyarrow as pa

    retyped = [c for c in needed if c in table.column_names and (
        pa.types.is_temporal(t := table.schema.field(c).type)
        or (c == check.id_column and pa.types.is_floating(t)))]
    if retyped or any(c in table.column_names and _has_temporal(table.schema.field(c).type)
                      for c in loose):
        # pyarrow made timestamps of date-like strings, or floats of integers past 64 bits,
        # when every value of the block was one: read the values as written (a block's extent
        # must not decide whether a row is valid).
        return _jsonl_by_line(path, block, line, needed, check, loose)
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
            f"{line}); found {', '.join(table.column_names)}{_nested_hint(missing)}")
    if loose:
        return frame, 0
    return (cast(pl.DataFrame, pl.from_arrow(table.select(needed))) if not missing
            else pl.DataFrame()), 0


def _has_temporal(kind: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_temporal(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_has_temporal(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_temporal(kind.value_type)
    return False


def _jsonl_by_line(path: str, block: bytes, first_line: int, needed: list[str], check: _Check,
                   loose: frozenset[str]) -> tuple[pl.DataFrame, int]:
    """The needed columns, parsed line by line; lone surrogates in text and ids are replaced
    (and counted), the ``loose`` columns kept as Python values for the field paths."""
    columns: dict[str, list[Any]] = {c: [] for c in needed}
    replaced = 0
    seen: set[str] = set()
    for n, doc in files.json_lines(block, path, first_line=first_line):
        if not isinstance(doc, dict):
            raise GuarddiagError(f"{path} line {n}: expected a JSON object")
        if len(seen) < 64:
            seen.update(doc)
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
                raise GuarddiagError(f"{path} line {n} field \"{c}\": expected "
                                     f"{'text' if text else 'text or an integer'}, found "
                                     f"{type(value).__name__}{hint}")
            if isinstance(value, str):
                value, count = replace_surrogates(value)
                replaced += count
            columns[c].append(None if value is None else str(value))
    absent = [c for c in needed if c not in loose and c not in seen]
    if absent and columns[needed[0]]:
        # As the block reader says it: a column no row of the block holds.
        raise GuarddiagError(f"{path} line {first_line}: missing column(s) {', '.join(absent)}; "
                             f"found {', '.join(sorted(seen))}{_nested_hint(absent)}")
    return pl.DataFrame({c: pl.Series(c, values, dtype=pl.Object if c in loose else pl.String)
                         for c, values in columns.items()}), replaced


def _nested_hint(names: list[str]) -> str:
    nested = [c for c in names if "." in c or "[" in c]
    return (f" ({nested[0]} looks like a nested path: name it with --text-field)"
            if nested else "")


# ─── byte ranges of JSON lines ──────────────────────────────────────────────────────────────────

def _jsonl_range(path: str, byte_range: tuple[int, int], needed: list[str], check: _Check,
                 loose: frozenset[str]) -> Iterator[PoolBatch]:
    """The rows of the lines that start in ``byte_range``, numbered from 1; a bad row raises the
    whole shard's read's error (module docstring)."""
    start, end = byte_range
    first = _line_start(path, start)
    if first >= end:
        return      # no line starts in this range (it lies inside a longer line)
    try:
        yield from _checked(_jsonl(path, needed, _blocks(path, start=first, end=end),
                                   check=check, loose=loose), path, check)
    except GuarddiagError as exc:
        _raise_as_whole_read(path, first, end, needed, check, loose)
        raise exc from None     # not reached unless the whole read found no error (see there)


def _line_start(path: str, start: int) -> int:
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


def _count_rows(block: bytes) -> int:
    """JSON lines rows of a block: its lines that are not blank (as :func:`_jsonl_by_line`
    and :func:`_check_utf8` count them; ~500 MB/s)."""
    return sum(1 for line in block.splitlines() if line.strip())


def _raise_as_whole_read(path: str, first: int, end: int, needed: list[str], check: _Check,
                         loose: frozenset[str]) -> None:
    """Raise the error the whole shard's read gives for the range starting at line start
    ``first``: that read's blocks before the one holding ``first`` are only counted (their rows
    belong to earlier tasks), and from there on it is redone, batches discarded, up to the
    range's end. Returns if it raised nothing there."""
    row = 1
    with contextlib.closing(_blocks(path)) as blocks:
        for found in blocks:
            if found[1] + len(found[2]) > first:
                break
            row += _count_rows(found[2])
        else:
            return
        covering = itertools.takewhile(lambda b: b[1] < end, itertools.chain([found], blocks))
        for _ in _checked(_jsonl(path, needed, covering, check=check, loose=loose, row=row),
                          path, check):
            pass
    line, offset, block = found
    # The whole read's blocks passed (which only a difference in pyarrow's typing of a smaller
    # block could cause): raise the range's own error with the shard's numbers.
    head = block[:first - offset]
    ranged = _blocks(path, start=first, end=end, line=line + head.count(b"\n"))
    for _ in _checked(_jsonl(path, needed, ranged, check=check, loose=loose,
                             row=row + _count_rows(head)), path, check):
        pass


# ─── checks ────────────────────────────────────────────────────────────────────────────────────

def check_batch(frame: pl.DataFrame, path: str, first_row: int, *, text_column: str,
                id_column: str | None) -> tuple[pl.Series, pl.Series | None]:
    """Texts (non-empty UTF-8 strings) and ids (strings, none missing) of one batch, with the
    errors of :func:`guarddiag.audit.read_pool` naming the shard's own row numbers."""
    batch = _batch(frame, path, first_row, _Check(text_column, id_column), 0)
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
    series = series.cast(pl.String)
    if series.is_null().any():
        row = cast(int, series.is_null().arg_max()) + first_row
        raise GuarddiagError(f"{at(path, row=row, field=column)}: missing id")
    return series
