"""Reading a pool table for the audit: (ids, texts), every row checked."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import polars as pl

from guarddiag import files
from guarddiag.errors import GuarddiagError, at

__all__ = ["read_pool"]


def read_pool(path: str | Path, *, text_column: str = "text",
              id_column: str | None = "prompt_id") -> tuple[list[str], list[str]]:
    """Read (ids, texts) of a pool table (parquet, CSV/TSV, JSON lines), checking every row.

    ``id_column=None`` numbers rows from 1. One-line errors name the file, the row (1-based data
    row) and the field: missing column, empty or null text, non-UTF-8 bytes, duplicate ids.
    """
    path = Path(path)
    needed = [text_column] + ([id_column] if id_column is not None else [])
    df = files.read_table(path, columns=needed)
    texts = _text_values(df, path, text_column)
    if id_column is None:
        ids = [str(i) for i in range(1, df.height + 1)]
    else:
        ids = _id_values(df, path, id_column)
    if not texts:
        raise GuarddiagError(f"{path}: the pool has no rows")
    return ids, texts


def _text_values(df: pl.DataFrame, path: Path, column: str) -> list[str]:
    series = df.get_column(column)
    if series.dtype == pl.Binary:
        # Parquet "binary" columns arrive undecoded; find the first row that is not UTF-8.
        decoded: list[str | None] = []
        for row, raw in enumerate(series.to_list(), start=1):
            if raw is None:
                decoded.append(None)
                continue
            try:
                decoded.append(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise GuarddiagError(f"{at(path, row=row, field=column)}: not UTF-8 text "
                                     f"(byte {exc.start})") from None
        series = pl.Series(column, decoded, dtype=pl.String)
    elif series.dtype != pl.String:
        raise GuarddiagError(f"{at(path, field=column)}: expected text, found {series.dtype} "
                             "values")
    blank = series.is_null() | (series.str.strip_chars().str.len_chars() == 0)
    if blank.any():
        # arg_max is None only for an empty series, and this one holds a True.
        row = cast(int, blank.arg_max()) + 1
        count = int(blank.sum())
        more = f" ({count} empty rows in all)" if count > 1 else ""
        raise GuarddiagError(f"{at(path, row=row, field=column)}: empty text; every pool row "
                             f"needs a non-empty prompt{more}")
    return series.to_list()


def _id_values(df: pl.DataFrame, path: Path, column: str) -> list[str]:
    series = df.get_column(column)
    if series.dtype not in (pl.String, pl.Int64, pl.Int32, pl.UInt64, pl.UInt32, pl.Int16,
                            pl.Int8, pl.UInt16, pl.UInt8):
        raise GuarddiagError(f"{at(path, field=column)}: expected string or integer ids, found "
                             f"{series.dtype}")
    series = series.cast(pl.String)
    if series.is_null().any():
        row = int(series.is_null().arg_max()) + 1
        raise GuarddiagError(f"{at(path, row=row, field=column)}: missing id")
    dup = series.is_duplicated()
    if dup.any():
        first = int(dup.arg_max())
        value = series[first]
        rows = (pl.arange(1, df.height + 1, eager=True).filter(series == value)).to_list()
        raise GuarddiagError(f"{at(path, row=rows[1], field=column)}: duplicate id {value!r} "
                             f"(also row {rows[0]}); ids must be unique")
    return series.to_list()

