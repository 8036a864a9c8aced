"""The labelled pool as training reads it (``pool.parquet``), and its hash-ordered samples.

:func:`read_pool` checks the columns, classes and splits with one-line errors. Samples and
label mixes are drawn in *hash order* (sha256 of a salt and the prompt id), so they are stable
across runs, machines and row order, and nested: the first 1,000 rows of a split are a subset of
its first 2,000, and a 25% policy mix is a subset of a 50% one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.files import read_table, sha256_file
from guarddiag.labels import CLASSES
from guarddiag.text import normalise

POOL_COLUMNS = ("prompt_id", "text", "label_a", "label_b", "pillars_a", "pillars_b",
                "span_start", "span_end", "split")


@dataclass(frozen=True)
class Pool:
    """The labelled pool (``pool.parquet``) and its sha256."""

    frame: pl.DataFrame
    path: Path
    sha256: str

    def split(self, name: str) -> pl.DataFrame:
        return self.frame.filter(pl.col("split") == name)


def read_pool(path: str | Path) -> Pool:
    """Read and check ``pool.parquet`` (columns, classes, splits) with one-line errors."""
    path = Path(path)
    if not path.is_file():
        raise GuarddiagError(f"{path}: pool file not found; build it with `guarddiag pool build`"
                             f" or pass --pool")
    frame = read_table(path, columns=list(POOL_COLUMNS))
    for col in ("label_a", "label_b"):
        bad = frame.filter(~pl.col(col).is_in(list(CLASSES)))
        if bad.height:
            raise GuarddiagError(f'{path} field "{col}": class {bad[col][0]!r} (prompt '
                                 f'{bad["prompt_id"][0]!r}) is not one of {", ".join(CLASSES)}')
    if frame["prompt_id"].n_unique() != frame.height:
        raise GuarddiagError(f'{path} field "prompt_id": ids are not unique')
    empty = frame.filter(pl.col("text").is_null() | (pl.col("text").str.strip_chars() == ""))
    if empty.height:
        raise GuarddiagError(f'{path} field "text": empty text (prompt '
                             f'{empty["prompt_id"][0]!r})')
    for split in ("train", "val"):
        if frame.filter(pl.col("split") == split).height == 0:
            raise GuarddiagError(f'{path} field "split": no rows in split {split!r}')
    frame = frame.with_columns(pl.col("prompt_id").cast(pl.String))
    return Pool(frame, path, sha256_file(path))


def seen_in_train(pool: pl.DataFrame) -> pl.Series:
    """Per row of ``pool`` (with ``text`` and ``split``): whether its normalised text
    (:func:`guarddiag.text.normalise`) is also a train row's. True for every train row and for
    a val row the pool recipe copied into train (``splits.multilingual_train_overlap``): a
    model may have learnt that row's label from its copy."""
    for col in ("text", "split"):
        if col not in pool.columns:
            raise GuarddiagError(f"pool: missing column {col!r} (needed to tell rows with a "
                                 f"copy in the train split)")
    normal = [normalise(t) for t in pool["text"].to_list()]   # each text once
    train = {n for n, split in zip(normal, pool["split"].to_list(), strict=True)
             if split == "train"}
    return pl.Series("seen_in_train", [n in train for n in normal], dtype=pl.Boolean)


def hash_unit(ids: Sequence[str], salt: str) -> np.ndarray:
    """A uniform number in [0, 1) per id from sha256(salt, id): stable across runs, machines
    and row order, so samples and label mixes are nested (a 25% mix ⊂ a 50% mix)."""
    out = np.empty(len(ids), dtype=np.float64)
    prefix = f"{salt}\x1f".encode()
    for i, pid in enumerate(ids):
        digest = hashlib.sha256(prefix + str(pid).encode()).digest()
        out[i] = int.from_bytes(digest[:7], "big") / float(1 << 56)
    return out


def hash_order(frame: pl.DataFrame, salt: str) -> pl.DataFrame:
    """The rows of ``frame`` sorted by :func:`hash_unit` of their prompt ids."""
    u = hash_unit(frame["prompt_id"].to_list(), salt)
    return frame.with_columns(pl.Series("_u", u)).sort("_u", "prompt_id").drop("_u")


def sample_split(pool: Pool, split: str, n: int | None, *, salt: str = "sample") -> pl.DataFrame:
    """The first ``n`` rows of a split in hash order (all rows when ``n`` is None)."""
    rows = hash_order(pool.split(split), f"{salt}:{split}")
    return rows if n is None else rows.head(n)


SELECTION_LANG = "en"
"""Language of the val rows that choose the kept checkpoint (the primary VAL)."""


def selection_split(pool: Pool, n: int | None, *, salt: str = "sample") -> pl.DataFrame:
    """The val rows that choose a run's kept checkpoint: the first ``n`` *English* val rows in
    hash order (every val row where the pool has no ``lang`` column).

    Multilingual val rows are reported per language but never choose weights: the tokenizer
    and most training text are English, and where the pool copies some of them into train
    (``splits.multilingual_train_overlap``) they would reward memorising those copies.
    """
    val = pool.split("val")
    if "lang" in val.columns:
        val = val.filter(pl.col("lang") == SELECTION_LANG)
        if val.height == 0:
            raise GuarddiagError(f'{pool.path} field "lang": no {SELECTION_LANG!r} rows in the '
                                 "val split to choose checkpoints on")
    rows = hash_order(val, f"{salt}:val")
    return rows if n is None else rows.head(n)
