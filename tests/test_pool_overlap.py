"""The pool recipe's multilingual train-overlap switch and the English checkpoint-selection set.

Counts are by hand (round(share × rows per language)); which rows get a copy comes from an
oracle written again here (sha256 of salt, seed and prompt id).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest

from guarddiag.errors import GuarddiagError
from guarddiag.paths import manifests_dir
from guarddiag.pool.recipe import load_recipe
from guarddiag.pool.rows import PoolRow
from guarddiag.pool.splits import overlap_copies
from guarddiag.pool.table import Pool, hash_order, selection_split


def _row(pid: str, lang: str, split: str) -> PoolRow:
    return PoolRow(prompt_id=pid, text=f"text of {pid}", source="src", category="c", lang=lang,
                   span=None, labels={"A": "HARMFUL", "B": "BOUNDARY_SAFE"},
                   pillars={"A": ("copyright",), "B": ()}, split=split)


def _oracle(seed: int, pid: str) -> bytes:
    return hashlib.sha256(f"multilingual-train-overlap\x1f{seed}\x1f{pid}".encode()).digest()


ROWS = ([_row(f"de{i}", "de", "val") for i in range(10)]
        + [_row(f"fr{i}", "fr", "val") for i in range(5)]
        + [_row(f"en{i}", "en", "val") for i in range(4)]
        + [_row(f"tr{i}", "de", "train") for i in range(3)])


def test_copies_per_language_counted_by_hand():
    copies = overlap_copies(ROWS, 0.6, seed=7)
    by_lang: dict[str, list[str]] = {}
    for c in copies:
        by_lang.setdefault(c.lang, []).append(c.prompt_id)
    # round(0.6 × 10) = 6 German, round(0.6 × 5) = 3 French; English val and train rows: none.
    assert {k: len(v) for k, v in by_lang.items()} == {"de": 6, "fr": 3}
    want_de = sorted((f"de{i}" for i in range(10)), key=lambda p: (_oracle(7, p), p))[:6]
    assert by_lang["de"] == [p + "@train-copy" for p in want_de]
    for c in copies:
        base = next(r for r in ROWS if r.prompt_id + "@train-copy" == c.prompt_id)
        assert (c.split, c.text, c.labels, c.pillars, c.source) == (
            "train", base.text, base.labels, base.pillars, base.source)
    # Another seed picks other rows; share 0 copies nothing; share 1 copies all 15.
    assert {c.prompt_id for c in overlap_copies(ROWS, 0.6, seed=8)} != {
        c.prompt_id for c in copies}
    assert overlap_copies(ROWS, 0.0, seed=7) == []
    assert len(overlap_copies(ROWS, 1.0, seed=7)) == 15


def _recipe_copy(tmp_path: Path, line: str | None) -> Path:
    text = (manifests_dir() / "pools" / "default.yaml").read_text(encoding="utf-8")
    old = "  multilingual_train_overlap: 0.693\n"
    assert old in text
    out = tmp_path / "recipe.yaml"
    out.write_text(text.replace(old, "" if line is None else line), encoding="utf-8")
    return out


def test_recipe_switch_default_zero_and_range(tmp_path):
    assert load_recipe().multilingual_train_overlap == 0.693  # the default recipe mirrors it
    assert load_recipe(_recipe_copy(tmp_path, None)).multilingual_train_overlap == 0.0
    with pytest.raises(GuarddiagError, match="multilingual_train_overlap"):
        load_recipe(_recipe_copy(tmp_path, "  multilingual_train_overlap: 1.5\n"))


def _pool(val_langs: list[str] | None) -> Pool:
    n = 40
    data = {"prompt_id": [f"v{i}" for i in range(n)], "split": ["val"] * n,
            "text": ["t"] * n}
    if val_langs is not None:
        data["lang"] = [val_langs[i % len(val_langs)] for i in range(n)]
    return Pool(pl.DataFrame(data), Path("pool.parquet"), "0" * 64)


def test_checkpoints_are_chosen_on_english_val_rows_only():
    pool = _pool(["en", "de", "zh", "en"])  # 20 of 40 rows English
    got = selection_split(pool, 12)
    english = pool.frame.filter(pl.col("lang") == "en")
    assert got["prompt_id"].to_list() == hash_order(english, "sample:val").head(12)[
        "prompt_id"].to_list()
    assert set(got["lang"]) == {"en"}
    assert selection_split(pool, None).height == 20
    # A pool without languages: every val row, in the same hash order as before.
    plain = _pool(None)
    assert selection_split(plain, 12).equals(hash_order(plain.frame, "sample:val").head(12))
    with pytest.raises(GuarddiagError, match="no 'en' rows"):
        selection_split(_pool(["de"]), 5)
