"""Reading one benchmark file into rows, and reducing them to the record shape.

:func:`read_file_rows` reads any manifest format (csv, parquet, json, jsonl, jsonl.gz, lines,
json_tree) with one-line errors naming the file and line; :func:`normalise_file` applies the
manifest's row filter (``filter_field``/``filter_values``, ``flags``/``flagged``), joins the text
fields and checks every prompt has text and an id.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag.data.manifest import BenchmarkFile, BenchmarkManifest
from guarddiag.errors import GuarddiagError

ROW = "__row"
"""Column holding each row's 1-based data-row number while a file is being checked."""
FILE = "__file"
"""Column holding the file a row came from while a subset is being checked."""

def _decode(path: Path, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise GuarddiagError(f"{path} line {line}: not UTF-8 text (byte offset {exc.start}, "
                             f"expected UTF-8)") from None
    return text.removeprefix("\ufeff")


def _records_frame(records: list[Any], path: Path) -> pl.DataFrame:
    keys: dict[str, None] = {}
    for i, rec in enumerate(records, start=1):
        if not isinstance(rec, dict):
            raise GuarddiagError(f"{path} row {i}: expected a JSON object, got "
                                 f"{type(rec).__name__}")
        keys.update(dict.fromkeys(rec))
    columns = {k: pl.Series(k, [r.get(k) for r in records], strict=False) for k in keys}
    return pl.DataFrame(columns, height=len(records))


def _tree_rows(doc: Any, levels: tuple[str, ...], path: Path) -> pl.DataFrame:
    rows: list[tuple[Any, ...]] = []

    def walk(node: Any, trail: tuple[str, ...]) -> None:
        if len(trail) == len(levels):
            if not isinstance(node, list):
                raise GuarddiagError(f"{path} at {'/'.join(trail)}: expected a list of prompts "
                                     f"after {len(levels)} levels, got {type(node).__name__}")
            for leaf in node:
                rows.append((*trail, leaf))
            return
        if not isinstance(node, dict):
            raise GuarddiagError(f"{path} at {'/'.join(trail) or 'top level'}: expected a "
                                 f"mapping for level {levels[len(trail)]!r}, got "
                                 f"{type(node).__name__}")
        for key, child in node.items():
            walk(child, (*trail, str(key)))

    walk(doc, ())
    names = [*levels, "text"]
    return pl.DataFrame({n: pl.Series(n, [r[i] for r in rows], strict=False)
                         for i, n in enumerate(names)}, height=len(rows))


def read_file_rows(path: Path, entry: BenchmarkFile) -> pl.DataFrame:
    """All data rows of one file as a frame (plus ``__row``, the 1-based data-row number)."""
    fmt = entry.format
    try:
        if fmt == "parquet":
            df = pl.read_parquet(path)
        else:
            data = path.read_bytes()
            if fmt == "jsonl.gz":
                try:
                    data = gzip.decompress(data)
                except (OSError, EOFError) as exc:
                    raise GuarddiagError(f"{path}: not a gzip file ({exc})") from None
            df = _parse_text(_decode(path, data), path, entry)
    except GuarddiagError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GuarddiagError(f"{path}: cannot read as {fmt} ({first})") from None
    return df.with_row_index(ROW, offset=1)


def _parse_text(text: str, path: Path, entry: BenchmarkFile) -> pl.DataFrame:
    fmt = entry.format
    if fmt == "csv":
        return pl.read_csv(io.StringIO(text), infer_schema_length=0, quote_char='"')
    if fmt == "lines":
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # a final newline ends the last line; it is not a row
        return pl.DataFrame({"text": [ln.removesuffix("\r") for ln in lines]},
                            schema={"text": pl.String()})
    if fmt in ("jsonl", "jsonl.gz"):
        records = []
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise GuarddiagError(f"{path} line {lineno}: malformed JSON "
                                     f"({exc.msg})") from None
        return _records_frame(records, path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GuarddiagError(f"{path} line {exc.lineno}: malformed JSON ({exc.msg})") from None
    if fmt == "json_tree":
        return _tree_rows(doc, entry.tree_levels, path)
    if not isinstance(doc, list):
        raise GuarddiagError(f"{path}: expected a JSON array of records, got "
                             f"{type(doc).__name__}")
    return _records_frame(doc, path)


def _first_bad_row(df: pl.DataFrame, mask: pl.Expr) -> int | None:
    hit = df.filter(mask).select(pl.col(ROW).first()).item()
    return None if hit is None else int(hit)


def as_text(df: pl.DataFrame, column: str) -> pl.Expr:
    """``column`` as the text ids, categories and row filters are compared as."""
    dtype = df.schema[column]
    if dtype == pl.String:
        return pl.col(column)
    if dtype == pl.Null:
        return pl.col(column).cast(pl.String)
    if dtype.is_integer() or dtype == pl.Boolean:
        return pl.col(column).cast(pl.String)
    if dtype.is_float():
        # Ids stored as floats (1.0) read back as the integer they are.
        return pl.col(column).cast(pl.Int64, strict=False).cast(pl.String)
    return pl.col(column).cast(pl.String, strict=False)



def normalise_file(manifest: BenchmarkManifest, entry: BenchmarkFile, path: Path,
                   df: pl.DataFrame) -> pl.DataFrame:
    """Filter and reduce one file's rows to the record shape, checking every field."""
    text_fields = entry.text_fields or manifest.text_fields
    _check_columns(manifest, text_fields, path, df)
    if manifest.filter_field:
        df = df.filter(as_text(df, manifest.filter_field).is_in(list(manifest.filter_values)))
    df, flag_category = _apply_flags(manifest, df)
    text = _text_expr(manifest, text_fields, path, df)
    pid = _id_expr(manifest, entry, path, df)
    if manifest.category_field:
        category = as_text(df, manifest.category_field)
    elif flag_category is not None:
        category = flag_category
    else:
        category = pl.lit(None, dtype=pl.String)
    columns = [
        pl.lit(manifest.id).alias("benchmark"), pid.alias("prompt_id"), text.alias("text"),
        pl.lit(manifest.kind).alias("label_kind"), category.cast(pl.String).alias("category"),
        pl.col(ROW),
    ]
    if manifest.derived:
        columns += [as_text(df, "base_prompt_id").alias("base_prompt_id"),
                    as_text(df, "mutation").alias("mutation")]
    return df.select(columns).with_columns(pl.lit(str(path)).alias(FILE))


def _check_columns(manifest: BenchmarkManifest, text_fields: tuple[str, ...], path: Path,
                   df: pl.DataFrame) -> None:
    needed = [*text_fields]
    for extra in (manifest.id_field, manifest.category_field, manifest.filter_field):
        if extra:
            needed.append(extra)
    needed += list(manifest.flags)
    if manifest.derived:
        needed += ["base_prompt_id", "mutation"]
    for column in needed:
        if column not in df.columns:
            found = ", ".join(c for c in df.columns if c != ROW) or "none"
            raise GuarddiagError(f'{path}: missing column "{column}" needed by '
                                 f"{manifest.manifest_path.name} (found: {found})")


def _apply_flags(manifest: BenchmarkManifest, df: pl.DataFrame
                 ) -> tuple[pl.DataFrame, pl.Expr | None]:
    """Keep the rows ``flags``/``flagged`` select; without a category field, the set flags
    joined by ``,`` become the category."""
    if not manifest.flags:
        return df, None
    set_flags = [pl.col(f).cast(pl.Int64, strict=False).fill_null(0) == 1
                 for f in manifest.flags]
    any_set = pl.any_horizontal(set_flags)
    df = df.filter(any_set if manifest.flagged else ~any_set)
    if manifest.category_field:
        return df, None
    flag_category = pl.concat_str(
        [pl.when(s).then(pl.lit(f)) for f, s in zip(manifest.flags, set_flags, strict=True)],
        separator=",", ignore_nulls=True)
    return df, pl.when(flag_category == "").then(None).otherwise(flag_category)


def _text_expr(manifest: BenchmarkManifest, text_fields: tuple[str, ...], path: Path,
               df: pl.DataFrame) -> pl.Expr:
    for column in text_fields:
        dtype = df.schema[column]
        if dtype not in (pl.String, pl.Null):
            bad = _first_bad_row(df, pl.lit(True))
            raise GuarddiagError(f'{path} row {bad} field "{column}": expected text, got '
                                 f"{dtype}")
        bad = _first_bad_row(df, pl.col(column).is_null()
                             | (pl.col(column).str.strip_chars() == ""))
        if bad is not None:
            raise GuarddiagError(f'{path} row {bad} field "{column}": empty text (every prompt '
                                 f"needs non-empty text)")
    if len(text_fields) == 1:
        return pl.col(text_fields[0])
    return pl.concat_str([pl.col(c) for c in text_fields], separator=manifest.text_joiner)


def _id_expr(manifest: BenchmarkManifest, entry: BenchmarkFile, path: Path,
             df: pl.DataFrame) -> pl.Expr:
    if manifest.id_field:
        bad = _first_bad_row(df, pl.col(manifest.id_field).is_null()
                             | (as_text(df, manifest.id_field).str.strip_chars() == ""))
        if bad is not None:
            raise GuarddiagError(f'{path} row {bad} field "{manifest.id_field}": empty id')
        pid = as_text(df, manifest.id_field)
    else:
        pid = pl.col(ROW).cast(pl.String)
    if entry.id_prefix:
        pid = pl.lit(entry.id_prefix) + pid
    return pid
