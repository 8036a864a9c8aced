"""Sensitivity variants (E6-a05): only in the distillation-weight table, never among the ten
branches; and VAL by part of the val split (English, multilingual, with and without a train
copy), with ρ per part checked against scipy.

Expected numbers come from hand counts on the tables built here, or from scipy.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import scipy.stats
from synthetic_runs import COPY, ORH, STD, frame, rows_for, run_meta, study_like

from guarddiag import files
from guarddiag.analyses import ReportOptions, analyse, load_inputs
from guarddiag.analyses.correlation import CORRELATION
from guarddiag.analyses.load import LOAD
from guarddiag.analyses.rank import RANK
from guarddiag.analyses.scored import DISTILL, SCORES
from guarddiag.analyses.tables import RECIPES
from guarddiag.analyses.valsets import VAL_SETS_ANALYSIS, val_parts, val_sets
from guarddiag.analyses.variants import without_variants


def test_variants_are_known_by_role_not_name():
    table = pl.DataFrame({"guard_kind": ["branch", "branch", "outside", "branch", "branch"],
                          "branch": ["E6", "E6-a05", "E6-a05", None, "alpha_half"],
                          "variant_of": [None, "E6", None, None, "E9"]})
    # By its variant_of role: a renamed variant is one, an outside guard with a variant's
    # name is not.
    assert without_variants(table)["branch"].to_list() == ["E6", "E6-a05", None]


def _write(root: Path, preds: pl.DataFrame, pool: pl.DataFrame) -> ReportOptions:
    files.write_parquet(preds, root / "runs" / "predictions.parquet")
    files.write_parquet(pool, root / "pool" / "pool.parquet")
    return ReportOptions(runs_dir=root / "runs", pool_path=root / "pool" / "pool.parquet",
                           audit_dir=None, n_resamples=50)


def _variant_rows(branch: str, copy_unsafe: int, val_correct: int) -> pl.DataFrame:
    """One seed of a variant: ``copy_unsafe`` of 40 copyright prompts read unsafe, the other
    benchmarks at 10 of 40, and ``val_correct`` of the 15 English val rows right."""
    meta = run_meta("micro", branch, 42, policy="A")
    ids = {b: [f"{b}-{i:03d}" for i in range(40)] for b in (COPY, STD, ORH)}
    decontam = [i % 4 != 0 for i in range(40)]
    rows = []
    for bench, k in ((COPY, copy_unsafe), (STD, 10), (ORH, 10)):
        rows += rows_for(meta, bench, [0.9] * k + [0.1] * (40 - k), ids=ids[bench],
                         decontam=decontam)
    # study_like's val split: 30 rows, English at odd i, gold HARMFUL/GENERIC/BOUNDARY by i % 3.
    gold = [("HARMFUL", "GENERIC_SAFE", "BOUNDARY_SAFE")[i % 3] for i in range(30)]
    english = [i for i in range(30) if i % 2]
    right = set(english[:val_correct])
    pred = [g if (i in right or i % 2 == 0) else ("COMPOUND" if g != "COMPOUND" else "HARMFUL")
            for i, g in enumerate(gold)]
    rows += rows_for(meta, "pool_val", [0.1] * 30, ids=[f"pv-{i:03d}" for i in range(30)],
                     pred_class=pred)
    return frame(rows)


def test_variants_enter_only_the_distillation_table(tmp_path):
    preds, pool, _ = study_like(seed=3, with_guard=False)
    with_variant = pl.concat([preds, _variant_rows("E6-a05", copy_unsafe=12, val_correct=9)])
    plain = analyse(load_inputs(o := _write(tmp_path / "a", preds, pool)), o)
    mixed = analyse(load_inputs(o := _write(tmp_path / "b", with_variant, pool)), o)
    assert plain[DISTILL] is None
    # Every other analysis is exactly what it was without the variant.
    assert mixed[LOAD].table.equals(plain[LOAD].table)
    assert mixed[RANK] is not None
    assert plain[RANK] is not None
    assert mixed[RANK].to_frame().equals(plain[RANK].to_frame())
    assert mixed[SCORES].table.equals(plain[SCORES].table)
    assert mixed[CORRELATION] is not None
    assert plain[CORRELATION] is not None
    assert mixed[CORRELATION].table.equals(plain[CORRELATION].table)
    for subset, result in plain[RECIPES].items():
        assert mixed[RECIPES][subset].table.equals(result.table)
    assert mixed[VAL_SETS_ANALYSIS] is not None
    assert plain[VAL_SETS_ANALYSIS] is not None
    assert mixed[VAL_SETS_ANALYSIS].runs.equals(plain[VAL_SETS_ANALYSIS].runs)
    # The table: E6 (three seeds of study_like) beside the one E6-a05 run.
    d = mixed[DISTILL]
    assert d is not None
    row = d.table.filter(pl.col("benchmark") == COPY).row(0, named=True)
    e6 = plain[SCORES].binary(subset="decontaminated", mapping="loose").filter(
        (pl.col("branch") == "E6") & (pl.col("benchmark") == COPY))
    assert (row["base"], row["variant"], row["n_base_runs"], row["n_variant_runs"]) == (
        "E6", "E6-a05", 3, 1)
    assert row["base_score"] == pytest.approx(e6["score"].mean())
    # Decontaminated copyright prompts: the 30 with i % 4 != 0; of the first 12 (read unsafe)
    # i = 1, 2, 3, 5, 6, 7, 9, 10, 11 survive: 9 of 30.
    assert row["variant_score"] == pytest.approx(9 / 30)
    assert row["delta_pp"] == pytest.approx(100 * (9 / 30 - e6["score"].mean()))
    # The primary VAL is the English rows: 9 of 15 right.
    val = d.table.filter(pl.col("benchmark") == "VAL").row(0, named=True)
    assert val["variant_score"] == pytest.approx(9 / 15)
    assert d.recipes["branch"].to_list() == ["E6", "E6-a05"]
    assert d.recipes["role"].to_list() == ["base", "variant"]


def test_val_parts_counted_by_hand():
    pool = pl.DataFrame({
        "prompt_id": ["v1", "v2", "v3", "v4", "v5", "v6", "t1", "t2", "t3"],
        "text": ["Hello", "Bonjour", "Salut", "Hallo", "Ciao", "Hola",
                 "bonjour!", "HALLO", "something else"],
        "label_a": ["HARMFUL", "GENERIC_SAFE", "HARMFUL", "BOUNDARY_SAFE", "HARMFUL",
                    "GENERIC_SAFE", "GENERIC_SAFE", "BOUNDARY_SAFE", "GENERIC_SAFE"],
        "split": ["val"] * 6 + ["train"] * 3,
        "lang": ["en", "fr", "fr", "de", "it", "es", "fr", "de", "en"]})
    parts = dict(zip(*val_parts(pool).select("prompt_id", "val_set").to_dict().values(),
                     strict=True))
    # "Bonjour" and "Hallo" equal train rows after normalisation (casefold, punctuation).
    assert parts == {"v1": "en", "v2": "multilingual_overlap", "v3": "multilingual_no_overlap",
                     "v4": "multilingual_overlap", "v5": "multilingual_no_overlap",
                     "v6": "multilingual_no_overlap"}
    meta = run_meta("micro", "E2", 42)
    # Right on v1, v2, v5; wrong on v3, v4, v6.
    pred = ["HARMFUL", "GENERIC_SAFE", "GENERIC_SAFE", "HARMFUL", "HARMFUL", "HARMFUL"]
    preds = frame(rows_for(meta, "pool_val", [0.1] * 6, ids=[f"v{i}" for i in range(1, 7)],
                           pred_class=pred))
    got = val_sets(preds, pool, None)
    assert got is not None
    by_part = {r["val_set"]: (r["n_correct"], r["n_scored"])
               for r in got.runs.iter_rows(named=True)}
    assert by_part == {"en": (1, 1), "multilingual": (2, 5), "multilingual_overlap": (1, 2),
                       "multilingual_no_overlap": (1, 3)}
    assert got.rows["n_rows"].to_list() == [1, 5, 2, 3]
    assert got.spearman.height == 0  # no correlation analysis given


def test_val_part_spearman_matches_scipy(tmp_path, monkeypatch):
    from guarddiag.analyses.calls import CallsResult

    # The sets come from the calls; in this fixture every run flags every prompt at its
    # matched threshold (all uninformative), so the sets are fixed by hand here.
    monkeypatch.setattr(CallsResult, "groups", lambda self, *, subset, mapping: {
        COPY: "policy", STD: "policy", ORH: "policy"})
    preds, pool, _ = study_like(seed=11, with_guard=False)
    results = analyse(load_inputs(o := _write(tmp_path, preds, pool)), o)
    parts, corr = results[VAL_SETS_ANALYSIS], results[CORRELATION]
    assert parts is not None
    assert corr is not None
    # study_like: val rows 0-5 have a train copy of their text; English = odd rows, so the
    # overlapping multilingual rows are 0, 2, 4 and the others are the 12 even rows from 6 on.
    assert parts.rows["n_rows"].to_list() == [15, 15, 3, 12]
    recipes = parts.recipes.join(corr.table.select("size", "branch", "policy_harmful"),
                                 on=["size", "branch"])
    for part in ("en", "multilingual", "multilingual_no_overlap"):
        want = scipy.stats.spearmanr(recipes[part].to_list(), recipes["policy_harmful"].to_list())
        row = parts.spearman.filter((pl.col("val_set") == part) & (pl.col("load") == "policy")
                                    & (pl.col("kind") == "harmful")).row(0, named=True)
        assert row["rho"] == pytest.approx(want.statistic)
        assert row["p_value"] == pytest.approx(want.pvalue)
        assert row["n_recipes"] == recipes.height == 11
    # The English part is the primary VAL the correlation analysis uses.
    assert recipes["en"].to_list() == pytest.approx(
        corr.table.join(recipes.select("size", "branch"), on=["size", "branch"])["val"].to_list())
