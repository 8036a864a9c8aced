"""Paired tests of two guards on the same prompts: exact McNemar, Holm, and the three families
(issue 12, item 6). Golden numbers are hand arithmetic or scipy.stats.binomtest."""

from __future__ import annotations

import polars as pl
import pytest
import scipy.stats
from synthetic_runs import COPY, ORH, frame, rows_for, run_meta

from guarddiag.analyses.paired import (
    outside_vs_reference,
    paired_comparisons,
    recipes_vs_reference,
    strict_vs_loose,
)
from guarddiag.errors import GuarddiagError
from guarddiag.labels import LOOSE, MAPPINGS, STRICT
from guarddiag.stats import holm, mcnemar_exact

U, S = 0.9, 0.1  # P(unsafe) of a prompt read unsafe / safe


# ─── primitives ────────────────────────────────────────────────────────────────────────────────

def test_mcnemar_exact_by_hand():
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 2**5)            # 2 · P(X ≤ 0), n = 5
    assert mcnemar_exact(6, 1) == pytest.approx(2 * (1 + 7) / 2**7)  # 2 · P(X ≤ 1), n = 7
    assert mcnemar_exact(3, 3) == 1.0                                 # capped at 1
    assert mcnemar_exact(0, 0) == 1.0                                 # no discordant prompt


@pytest.mark.parametrize(("b", "c"), [(0, 1), (2, 9), (10, 2), (17, 17), (40, 61), (0, 30),
                                      (120, 80)])
def test_mcnemar_exact_matches_scipy_binomtest(b, c):
    expected = scipy.stats.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(GuarddiagError, match="b must be a count"):
        mcnemar_exact(-1, 3)


def test_holm_by_hand():
    # Sorted: 0.005·4 = 0.02; 0.01·3 = 0.03; 0.03·2 = 0.06; 0.04·1 = 0.04 → max(0.06, 0.04).
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])                # 0.5·2 capped at 1
    assert holm([0.02]) == pytest.approx([0.02])
    assert holm([]) == []
    # Ties: both 0.01 → 0.01·3 = 0.03 and max(0.03, 0.01·2) = 0.03; 0.2·1 → 0.2.
    assert holm([0.01, 0.2, 0.01]) == pytest.approx([0.03, 0.2, 0.03])


# ─── the families ──────────────────────────────────────────────────────────────────────────────

def _recipes() -> pl.DataFrame:
    """Ten copyright prompts. reference at seeds 42/43/44, E1 and E2 at seed 42."""
    rows = []
    ref = {42: [U] * 2 + [S] * 8, 43: [U] * 3 + [S] * 7, 44: [U] * 1 + [S] * 9}
    for seed, p in ref.items():
        rows += rows_for(run_meta("micro", "reference", seed), COPY, p)
    # Reference majority: prompt 0 (3 of 3), 1 (2 of 3) unsafe; 2 only at seed 43 → safe.
    rows += rows_for(run_meta("micro", "E1", 42, policy="A"), COPY, [U] * 10)
    rows += rows_for(run_meta("micro", "E2", 42), COPY, [S, U] + [S] * 8)
    return frame(rows)


def test_recipes_vs_reference_counts_and_p_by_hand():
    res = recipes_vs_reference(_recipes(), mapping=LOOSE, threshold=0.5, subset="full",
                               aliases={COPY: "COPY"})
    t = {r["first"]: r for r in res.to_frame().iter_rows(named=True)}
    assert list(t) == ["E1", "E2"]                     # branch order
    e1, e2 = t["E1"], t["E2"]
    # E1 reads all 10 unsafe, the reference majority 2 → b = 8, c = 0.
    assert (e1["n"], e1["n_first_only"], e1["n_second_only"]) == (10, 8, 0)
    assert (e1["share_first"], e1["share_second"], e1["delta"]) == (1.0, 0.2, pytest.approx(0.8))
    assert e1["p_value"] == pytest.approx(2 / 2**8)
    # E2 reads prompt 1 only; the reference 0 and 1 → b = 0, c = 1, p = 1.
    assert (e2["n_first_only"], e2["n_second_only"], e2["p_value"]) == (0, 1, 1.0)
    # Holm over the two: 2 · 2/256 = 1/64; max(1/64, 1 · 1) = 1.
    assert e1["p_holm"] == pytest.approx(1 / 64)
    assert e2["p_holm"] == 1.0
    assert e1["significant"]
    assert not e2["significant"]
    assert (e1["second"], e1["metric_alias"]) == ("reference", "COPY")


def test_recipe_decisions_do_not_depend_on_row_order():
    preds = _recipes()
    a = recipes_vs_reference(preds, mapping=LOOSE, threshold=0.5, subset="full", aliases={})
    b = recipes_vs_reference(preds.sample(fraction=1.0, shuffle=True, seed=5), mapping=LOOSE,
                             threshold=0.5, subset="full", aliases={})
    assert a.to_frame().equals(b.to_frame())


def test_decontaminated_subset_drops_prompts():
    rows = []
    keep = [True] * 6 + [False] * 4
    rows += rows_for(run_meta("micro", "reference", 42), COPY, [S] * 10, decontam=keep)
    rows += rows_for(run_meta("micro", "E1", 42), COPY, [U] * 10, decontam=keep)
    res = recipes_vs_reference(frame(rows), mapping=LOOSE, threshold=0.5,
                               subset="decontaminated", aliases={})
    r = res.to_frame().row(0, named=True)
    assert (r["n"], r["n_first_only"], r["p_value"]) == (6, 6, pytest.approx(2 / 2**6))


def test_strict_vs_loose_counts_the_boundary_prompts():
    # 8 OR-Bench-hard prompts: P(HARMFUL) 0.1 everywhere; P(BOUNDARY_SAFE) 0.6 on the first 5.
    rows = rows_for(run_meta("micro", "reference", 42), ORH, [0.1] * 8,
                    p_boundary=[0.6] * 5 + [0.0] * 3)
    res = strict_vs_loose(frame(rows), loose=LOOSE, strict=STRICT, threshold=0.5,
                          subset="full", aliases={ORH: "OR-H"})
    r = res.to_frame().row(0, named=True)
    # Strict reads 5 unsafe, loose none: b = 5, c = 0, p = 2 / 2^5.
    assert (r["n"], r["n_first_only"], r["n_second_only"]) == (8, 5, 0)
    assert r["delta"] == pytest.approx(5 / 8)
    assert (r["p_value"], r["p_holm"]) == (pytest.approx(2 / 32), pytest.approx(2 / 32))
    assert r["mapping"] == "strict vs loose"
    assert r["first"] == r["second"]


def test_outside_guard_failed_prompts_are_left_out():
    rows = rows_for(run_meta("micro", "reference", 42), COPY, [S] * 10)
    rows += rows_for(run_meta("x", "toyguard", None, kind="outside"), COPY, [U] * 10,
                     classes=False, status=["failed"] * 3 + ["ok"] * 7)
    res = outside_vs_reference(frame(rows), mapping=LOOSE, threshold=0.5, aliases={})
    r = res.to_frame().row(0, named=True)
    assert (r["first"], r["second"], r["n"], r["n_first_only"]) == ("toyguard",
                                                                     "micro/reference", 7, 7)
    assert r["family"] == "outside:loose"


def test_paired_comparisons_families():
    rows = _recipes().to_dicts()
    rows += rows_for(run_meta("x", "toyguard", None, kind="outside"), COPY, [U] * 10,
                     classes=False)
    res = paired_comparisons(frame(rows), mappings=MAPPINGS, primary="loose", threshold=0.5,
                             subset="full", aliases={}, has_outside=True)
    assert res.recipes is not None
    assert res.recipes.n_comparisons == 2
    assert [o.family for o in res.outside] == ["outside:loose", "outside:strict"]
    # 6 runs (3 reference, E1, E2, the guard) × 1 benchmark under strict vs loose.
    assert res.mapping is not None
    assert res.mapping.n_comparisons == 6
    assert res.mapping.significant().height == 0  # no boundary mass: nothing flips
