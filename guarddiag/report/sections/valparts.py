"""The validation split in parts: English (the primary VAL), multilingual, and the multilingual
rows with and without a copy in train, with ρ against the benchmark sets per part
(:mod:`guarddiag.analyses.valsets`)."""

from __future__ import annotations

import polars as pl

from guarddiag.analyses.valsets import VAL_SETS, ValSetsResult
from guarddiag.report.document import Block, Column, Paragraph, Table

PART_HEADERS = {"en": "English (primary)", "multilingual": "multilingual, all",
                "multilingual_overlap": "multilingual, copy in train",
                "multilingual_no_overlap": "multilingual, no copy in train"}


def _rho_text(spearman: pl.DataFrame, part: str) -> str:
    hit = spearman.filter((pl.col("val_set") == part) & (pl.col("load") == "policy")
                          & (pl.col("kind") == "harmful"))
    if hit.height == 0 or hit["rho"][0] is None:
        return "undefined"
    return f"{hit['rho'][0]:+.2f} (p = {hit['p_value'][0]:.3g}, n = {hit['n_recipes'][0]})"


def val_part_blocks(parts: ValSetsResult) -> list[Block]:
    """The parts' row counts, per-recipe VAL, per-run VAL and ρ per part."""
    n = dict(zip(parts.rows["val_set"].to_list(), parts.rows["n_rows"].to_list(), strict=True))
    s = parts.spearman
    blocks: list[Block] = [
        Paragraph(
            f"VAL by part of the val split: English {n.get('en', 0):,} rows; multilingual "
            f"{n.get('multilingual', 0):,}, of which {n.get('multilingual_overlap', 0):,} have "
            "a copy in the train split (pool recipe splits.multilingual_train_overlap; the "
            "study's multilingual val sat 69.3% in policy-A training files) and "
            f"{n.get('multilingual_no_overlap', 0):,} do not. Each branch labels the copies by "
            "its own policy mix, so a branch trained on more policy-A labels has seen more of "
            "the overlapping rows' VAL answers. Spearman ρ of VAL against the mean score on "
            f"the harmful benchmarks with an A/B call: English {_rho_text(s, 'en')}; multilingual "
            f"with the overlapping rows {_rho_text(s, 'multilingual')}, without them "
            f"{_rho_text(s, 'multilingual_no_overlap')} (study: +0.74).")]
    blocks.append(Table(
        "val_parts", "Per recipe (size, branch): seed-mean 4-class accuracy under policy A on "
        "each part (no interval; per-run Wilson intervals in val_parts_runs.csv).",
        (Column("size", "size"), Column("branch", "branch"), Column("n_seeds", "seeds", "int"),
         *(Column(p, PART_HEADERS[p], "pct") for p in VAL_SETS)), parts.recipes))
    blocks.append(Table(
        "val_parts_spearman", "Spearman ρ (scipy.stats.spearmanr) between each part's VAL and "
        "the mean score on each (load, kind) set of the correlation section; n = recipes; "
        "two-sided p; no interval.",
        (Column("val_set", "VAL part"), Column("load", "load"), Column("kind", "kind"),
         Column("n_benchmarks", "benchmarks", "int"), Column("n_recipes", "recipes", "int"),
         Column("rho", "ρ", "rho"), Column("p_value", "p", "p")), s, collapsed=True))
    blocks.append(Table(
        "val_parts_runs", "Per run and part, with 95% Wilson intervals.",
        (Column("run_id", "run"), Column("label_policy", "labels"), Column("val_set", "part"),
         Column("n_scored", "rows", "int"), Column("n_correct", "correct", "int"),
         Column("score", "VAL", "pct", low="ci_low", high="ci_high")), parts.runs,
        csv_only=True))
    return blocks
