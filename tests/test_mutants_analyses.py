"""Analyses at their edges (guarddiag.analyses.*): the competence gate's floor, contamination
entries, rank ties from rounding in the VAL correlation, the disclosure card's mapping, the
outside-guard table's order, overlap origins of unknown benchmarks, the paired families, pool
statistics with absent classes and undefined κ, runs with no scored prompt, and the recipe
table's row order.

Small tables built here; every expected value is counted or computed by hand (or with scipy)
in the comments.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
import scipy.stats
from synthetic_runs import COPY, ORH, STD, decisions, frame, rows_for, run_meta

from guarddiag import analyses
from guarddiag.analyses.overlap_origin import overlap_origins
from guarddiag.analyses.paired import outside_vs_reference, paired_comparisons
from guarddiag.analyses.scores import SCORE_SCHEMA, ScoresResult
from guarddiag.errors import GuarddiagError
from guarddiag.labels import LOOSE

ADV = "advbench"
KINDS = {COPY: "harmful", STD: "harmful", ORH: "benign", ADV: "harmful"}
U, S = 0.9, 0.1


def _compute(rows: list[dict[str, Any]], **kw: Any) -> ScoresResult:
    return analyses.compute_scores(frame(rows), kinds=KINDS, n_resamples=10, seed=0, **kw)


# ─── competence ────────────────────────────────────────────────────────────────────────────────

def _competence_scores() -> ScoresResult:
    # One reference seed per size. "a": STD 6/10, ADV 4/10 -> mean CAP (0.6 + 0.4) / 2 = 0.5;
    # "b": STD 9/10, ADV 9/10 -> 0.9.
    rows = []
    for size, flags in (("a", {STD: 6, ADV: 4}), ("b", {STD: 9, ADV: 9})):
        for bench, k in flags.items():
            rows += rows_for(run_meta(size, "reference", 42), bench, decisions(k, 10),
                             ids=[f"{bench}-{j}" for j in range(10)])
    return _compute(rows)


def test_competence_gate_fails_when_any_size_is_below_the_floor():
    res = analyses.competence_gate(_competence_scores(), kinds=KINDS, subset="full", floor=0.6)
    assert res.sizes["mean_cap"].to_list() == pytest.approx([0.5, 0.9])
    assert res.sizes["below_floor"].to_list() == [True, False]
    assert res.below_floor                      # one size of two is enough
    assert res.lowest_mean == pytest.approx(0.5)


def test_a_mean_exactly_at_the_floor_passes():
    res = analyses.competence_gate(_competence_scores(), kinds=KINDS, subset="full", floor=0.5)
    assert res.sizes["below_floor"].to_list() == [False, False]
    assert not res.below_floor


@pytest.mark.parametrize("floor", [1.5, -0.1, True, "0.5"])
def test_the_competence_floor_is_a_share(floor):
    with pytest.raises(GuarddiagError, match="competence floor: expected a share in"):
        analyses.competence_gate(_competence_scores(), kinds=KINDS, subset="full", floor=floor)
    assert analyses.competence_gate(_competence_scores(), kinds=KINDS, subset="full",
                                    floor=1.0).below_floor


# ─── contamination summary ─────────────────────────────────────────────────────────────────────

def test_contamination_entries_must_be_mappings_and_keep_their_near_count():
    with pytest.raises(GuarddiagError, match=r'field "benchmarks.b": missing or not a mapping'):
        analyses.contamination_table({"benchmarks": {"b": 5}})
    res = analyses.contamination_table({"benchmarks": {
        "b": {"n": 8, "n_exact": 2, "n_near": 3, "n_kept": 6},
        "c": {"n": 4, "n_exact": 0, "n_kept": 4}}})
    rows = {r["benchmark"]: r for r in res.to_frame().iter_rows(named=True)}
    assert (rows["b"]["n_near"], rows["b"]["share_near"]) == (3, 3 / 8)
    assert (rows["c"]["n_near"], rows["c"]["share_near"]) == (None, None)


# ─── VAL correlation: seed means rounded to 12 decimals ───────────────────────────────────────

def _score_row(branch: str, benchmark: str, metric: str, score: float) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(SCORE_SCHEMA)
    row.update(run_id=f"micro/{branch}/seed=42", guard_kind="branch", branch=branch,
               size="micro", seed=42, role="student", route="distill", last_policy="B",
               benchmark=benchmark, metric=metric, subset="full",
               lang="all", mapping="loose" if metric != "VAL" else None, score=score)
    return row


class _Loads:
    def groups(self, *, subset: str, mapping: str) -> dict[str, str]:
        return {COPY: "policy", STD: "capability"}


def _correlation(val: dict[str, float], copy: dict[str, float], std: dict[str, float]):
    rows = [_score_row(b, "pool_val", "VAL", v) for b, v in val.items()]
    rows += [_score_row(b, COPY, "CAP", v) for b, v in copy.items()]
    rows += [_score_row(b, STD, "CAP", v) for b, v in std.items()]
    scores = ScoresResult(table=pl.DataFrame(rows, schema=SCORE_SCHEMA), mappings=("loose",),
                          threshold=0.5, n_resamples=10, confidence=0.95, seed=0)
    return analyses.val_correlation(scores, _Loads(), subset="full", mapping="loose")


def test_means_closer_than_5e_13_tie_in_the_correlation_ranks():
    # E1 and E2 differ by 2e-13: after rounding to 12 decimals they are one value, so the
    # ranks (and ρ) are those of the tied lists below (scipy).
    val = {"E1": 0.5, "E2": 0.5 + 2e-13, "E3": 0.7, "E4": 0.9}
    copy = {"E1": 0.3, "E2": 0.2, "E3": 0.6, "E4": 0.8}
    std = {"E1": 0.4, "E2": 0.4 + 2e-13, "E3": 0.1, "E4": 0.6}
    corr = _correlation(val, copy, std)
    rho_val_tie = scipy.stats.spearmanr([0.5, 0.5, 0.7, 0.9], [0.3, 0.2, 0.6, 0.8]).statistic
    rho_std_tie = scipy.stats.spearmanr([0.5, 0.5, 0.7, 0.9], [0.4, 0.4, 0.1, 0.6]).statistic
    assert corr.policy.rho == pytest.approx(rho_val_tie)
    assert corr.capability.rho == pytest.approx(rho_std_tie)
    # and without the tie ρ would differ (the test can tell the two apart)
    assert rho_val_tie != pytest.approx(
        scipy.stats.spearmanr([1, 2, 3, 4], [0.3, 0.2, 0.6, 0.8]).statistic)


# ─── disclosure card ───────────────────────────────────────────────────────────────────────────

def test_the_disclosure_card_reads_the_asked_mapping():
    table = pl.DataFrame({"benchmark": [COPY, COPY], "subset": ["full", "full"],
                          "mapping": ["loose", "strict"], "floor_median": [0.1, 0.2],
                          "floor_widest": [0.3, 0.4], "n_groups": [2, 3], "delta": [0.5, 0.6],
                          "q_contrast": [0.01, 0.9], "load": ["policy", "capability"],
                          "load_study": ["policy", "capability"]})
    for mapping, delta, beyond in (("loose", 0.5, True), ("strict", 0.6, True)):
        card = analyses.disclosure_card(load=SimpleNamespace(table=table), contamination=None,
                                        subset="full", mapping=mapping, threshold=0.5,
                                        benchmarks=[COPY])
        row = card.to_frame().row(0, named=True)
        assert (row["delta"], row["span_beyond_floor"]) == (delta, beyond)
    narrow = table.with_columns(pl.Series("delta", [0.2, 0.6]))
    card = analyses.disclosure_card(load=SimpleNamespace(table=narrow), contamination=None,
                                    subset="full", mapping="loose", threshold=0.5,
                                    benchmarks=[COPY])
    assert card.to_frame()["span_beyond_floor"].to_list() == [False]   # 0.2 ≤ widest 0.3


# ─── outside guards beside the recipes ─────────────────────────────────────────────────────────

def test_the_outside_table_runs_benchmark_then_mapping_then_guards_first():
    rows = []
    for bench in (STD, COPY):            # input order is not the output order
        rows += rows_for(run_meta("micro", "reference", 42), bench, decisions(3, 10))
        rows += rows_for(run_meta("x", "toyguard", None, kind="outside"), bench,
                         decisions(5, 10))
    table = analyses.outside_comparison(_compute(rows), subset="full").to_frame()
    assert list(zip(table["benchmark"], table["mapping"], table["kind"], strict=True)) == [
        (COPY, "loose", "outside"), (COPY, "loose", "branch"),
        (COPY, "strict", "outside"), (COPY, "strict", "branch"),
        (STD, "loose", "outside"), (STD, "loose", "branch"),
        (STD, "strict", "outside"), (STD, "strict", "branch")]


# ─── overlap origins ───────────────────────────────────────────────────────────────────────────

def test_the_origin_of_an_unaudited_benchmark_is_none():
    cont = analyses.contamination_table({"benchmarks": {
        "advbench": {"n": 10, "n_exact": 0, "n_kept": 10}}})
    origins = overlap_origins(cont, None, {})
    assert origins.origin("advbench")["origin"] == "unknown"
    assert origins.origin("not_audited") is None


# ─── paired families ───────────────────────────────────────────────────────────────────────────

def test_an_outside_guard_is_paired_with_the_reference_recipe_only():
    # reference reads 10 prompts safe, E1 reads them unsafe, the guard reads 4 of 10 unsafe:
    # against the reference n = 10 pairs, 4 guard-only; E1 must not enter the pairs.
    rows = rows_for(run_meta("micro", "reference", 42), COPY, [S] * 10)
    rows += rows_for(run_meta("micro", "E1", 42), COPY, [U] * 10)
    rows += rows_for(run_meta("x", "toyguard", None, kind="outside"), COPY,
                     [U] * 4 + [S] * 6, classes=False)
    res = outside_vs_reference(frame(rows), mapping=LOOSE, threshold=0.5, aliases={})
    (r,) = res.to_frame().iter_rows(named=True)
    assert (r["second"], r["n"], r["n_first_only"], r["n_second_only"]) == (
        "micro/reference", 10, 4, 0)


def test_the_mapping_family_needs_both_loose_and_strict():
    rows = rows_for(run_meta("micro", "reference", 42), COPY, [S] * 10)
    rows += rows_for(run_meta("micro", "E1", 42), COPY, [U] * 10)
    res = paired_comparisons(frame(rows), mappings={"loose": LOOSE}, primary="loose",
                             threshold=0.5, subset="full", aliases={}, has_outside=False)
    assert res.mapping is None
    assert res.recipes is not None
    assert res.recipes.n_comparisons == 1


# ─── pool statistics ───────────────────────────────────────────────────────────────────────────

POOL = pl.DataFrame({
    "label_a": ["HARMFUL", "HARMFUL", "GENERIC_SAFE", "HARMFUL", "GENERIC_SAFE"],
    "label_b": ["HARMFUL", "BOUNDARY_SAFE", "GENERIC_SAFE", "HARMFUL", "GENERIC_SAFE"],
    "split": ["train", "train", "train", "val", "val"]})


def test_class_counts_per_split_and_absent_classes_count_zero():
    res = analyses.pool_statistics(POOL)
    counts = {(r["policy"], r["split"], r["class"]): r["n"]
              for r in res.class_counts.iter_rows(named=True)}
    assert counts[("A", "all", "HARMFUL")] == 3
    assert counts[("A", "train", "HARMFUL")] == 2
    assert counts[("A", "val", "HARMFUL")] == 1
    assert counts[("B", "train", "BOUNDARY_SAFE")] == 1
    assert counts[("B", "val", "BOUNDARY_SAFE")] == 0
    assert counts[("A", "all", "COMPOUND")] == 0
    assert res.class_counts.height == 2 * 3 * 4          # policies × splits × classes
    confusion = {r["label_a"]: r for r in res.confusion.iter_rows(named=True)}
    assert confusion["HARMFUL"]["HARMFUL"] == 2
    assert confusion["HARMFUL"]["BOUNDARY_SAFE"] == 1
    assert confusion["GENERIC_SAFE"]["GENERIC_SAFE"] == 2
    assert confusion["COMPOUND"]["COMPOUND"] == 0
    assert sum(sum(v for k, v in r.items() if k != "label_a") for r in confusion.values()) == 5


def test_undefined_kappa_is_none():
    # val: both policies give HARMFUL then GENERIC_SAFE -> κ_coarse = 1; a split where every
    # label is one class has p_e = 1: κ undefined -> None (not NaN).
    pool = pl.DataFrame({"label_a": ["HARMFUL", "HARMFUL"], "label_b": ["HARMFUL", "HARMFUL"],
                         "split": ["train", "train"]})
    row = analyses.pool_statistics(pool).agreement.row(0, named=True)
    assert row["kappa_coarse"] is None
    assert row["kappa_binary"] is None
    val = analyses.pool_statistics(POOL).agreement.filter(pl.col("split") == "val")
    assert val["kappa_coarse"].to_list() == [1.0]


# ─── scores ────────────────────────────────────────────────────────────────────────────────────

def test_a_run_with_every_prompt_failed_reads_out_none():
    rows = rows_for(run_meta("micro", "reference", 42), COPY, [S] * 4)
    rows += rows_for(run_meta("x", "toyguard", None, kind="outside"), COPY, [U] * 4,
                     classes=False, status=["failed"] * 4)
    table = _compute(rows).binary(subset="full", mapping="loose")
    guard = table.filter(pl.col("branch") == "toyguard").row(0, named=True)
    assert (guard["readout"], guard["n_scored"], guard["n_failed"], guard["score"]) == (
        "none", 0, 4, None)
    ref = table.filter(pl.col("branch") == "reference").row(0, named=True)
    assert ref["readout"] == "class_probs"


def test_val_needs_the_pool_language_column():
    rows = rows_for(run_meta("micro", "reference", 42), "pool_val", [S] * 2, ids=["v1", "v2"])
    pool = pl.DataFrame({"prompt_id": ["v1", "v2"], "label_a": ["HARMFUL", "GENERIC_SAFE"],
                         "split": ["val", "val"]})
    with pytest.raises(GuarddiagError, match=r"pool: missing column\(s\) lang needed for VAL"):
        _compute(rows, pool=pool)


# ─── recipe table ──────────────────────────────────────────────────────────────────────────────

def test_recipe_table_lists_branches_then_baselines_then_outside_guards():
    # Names and sizes chosen so that only the kind order puts the baseline before the guard
    # ("aaa_guard" < "zz_baseline" by name, and both are "other" branches).
    rows = rows_for(run_meta("micro", "reference", 42), COPY, [S] * 4)
    rows += rows_for(run_meta("micro", "zz_baseline", 42, kind="baseline"), COPY, [S] * 4)
    rows += rows_for(run_meta("micro", "aaa_guard", None, kind="outside"), COPY, [U] * 4,
                     classes=False)
    table = analyses.recipe_table(_compute(rows), subset="full", mapping="loose").to_frame()
    assert table["guard_kind"].to_list() == ["branch", "baseline", "outside"]
    assert table["entity"].to_list() == ["micro/reference", "micro/zz_baseline", "aaa_guard"]
