"""The calibrated load test (guarddiag.analyses.loadtest) at its edges: the pooled seed SD's
degrees of freedom, sizes holding only one side of the A/B contrast, cohorts it cannot test,
seeds that agree exactly, the α boundary of the call and the default seed.

Expected values are worked out by hand in the comments (written against surviving mutants of
issue 18's mutation run; each test pins behaviour, not code text).
"""

from __future__ import annotations

import math

import pytest
from synthetic_runs import COPY, KINDS, decisions, frame, rows_for, run_meta

from guarddiag import analyses
from guarddiag.analyses.loadtest import (
    BranchMean,
    CohortInput,
    call_load,
    policy_contrast,
    pooled_seed_sd,
    run_load_tests,
)

FAMILY = ("full", "loose")


def test_one_group_of_two_seeds_gives_one_degree_of_freedom():
    # One recipe with two seeds 0.2 and 0.4: Σ (x − x̄)² = 0.01 + 0.01 = 0.02 on df = 1,
    # so s = sqrt(0.02 / 1).
    sd, df = pooled_seed_sd([(0.02, 2)])
    assert df == 1
    assert sd == pytest.approx(math.sqrt(0.02))
    # Two groups: (3 − 1) + (2 − 1) = 3 df, s² = (0.5 + 1.0) / 3.
    sd, df = pooled_seed_sd([(0.5, 3), (1.0, 2)])
    assert df == 3
    assert sd == pytest.approx(math.sqrt(0.5))
    # Single-seed groups carry no seed noise at all: no SD.
    assert pooled_seed_sd([(0.0, 1), (0.0, 1)]) == (None, 0)


def test_a_size_with_only_b_last_branches_does_not_enter_the_contrast():
    # size "a": two B-last branches only (no A-last one) -> skipped; size "b": E1 (0.8, 3 seeds)
    # against reference (0.2, 1 seed) -> D = 0.6, c = 1/3 + 1/1 over one size.
    means = [BranchMean("a", "reference", 0.5, 1), BranchMean("a", "E2", 0.1, 1),
             BranchMean("b", "E1", 0.8, 3), BranchMean("b", "reference", 0.2, 1)]
    d, c = policy_contrast(means, ("E1",))
    assert d == pytest.approx(0.6)
    assert c == pytest.approx(1 / 3 + 1)
    # and a size with only A-last branches is skipped the same way
    means_a = [*means[2:], BranchMean("c", "E1", 0.9, 1), BranchMean("c", "E7", 0.1, 1)]
    assert policy_contrast(means_a, ("E1", "E7")) == pytest.approx((0.6, 1 / 3 + 1))
    # no size with both sides: no contrast
    assert policy_contrast(means[:2], ("E1",)) is None


def _cohort(*, delta: float | None, means: tuple[BranchMean, ...],
            group_ss: tuple[tuple[float, int], ...] = ((0.02, 3), (0.04, 3)),
            n_prompts: int = 40) -> CohortInput:
    return CohortInput(delta=delta, means=means, group_ss=group_ss, n_prompts=n_prompts,
                       all_same=False)


TWO_BRANCHES = (BranchMean("micro", "E1", 0.6, 3), BranchMean("micro", "E2", 0.2, 3))


def test_cohorts_without_a_span_or_without_a_size_of_two_are_undetermined():
    no_delta = _cohort(delta=None, means=TWO_BRANCHES)
    one_per_size = _cohort(delta=0.4, means=(BranchMean("micro", "E1", 0.6, 3),
                                             BranchMean("small", "E2", 0.2, 3)))
    rows = run_load_tests([no_delta, one_per_size], [FAMILY, FAMILY], a_last=("E1",),
                          n_draws=99)
    for row in rows:
        assert row["reason"] == "no size with two branches"
        assert row["load"] == "undetermined"
        assert row["p_span"] is None
        assert row["p_contrast"] is None


def test_seeds_that_agree_exactly_make_any_contrast_significant():
    # s = 0 (both seed groups have zero spread): the contrast D = 0.6 − 0.2 = 0.4 has SE 0, so
    # p_contrast = 0 (any difference beats zero noise); the span's p is the smallest the
    # Monte-Carlo null can give, 1 / (1 + 99).
    row, = run_load_tests([_cohort(delta=0.4, means=TWO_BRANCHES, group_ss=((0.0, 3), (0.0, 3)))],
                          [FAMILY], a_last=("E1",), n_draws=99)
    assert row["seed_sd"] == 0.0
    assert row["contrast"] == pytest.approx(0.4)
    assert row["contrast_se"] == 0.0
    assert row["p_contrast"] == 0.0
    assert row["p_span"] == pytest.approx(1 / 100)
    assert row["load"] == "policy"
    # ... and an exactly zero contrast at zero noise is no evidence at all: p = 1
    flat = (BranchMean("micro", "E1", 0.4, 3), BranchMean("micro", "E2", 0.4, 3))
    row, = run_load_tests([_cohort(delta=0.0, means=flat, group_ss=((0.0, 3), (0.0, 3)))],
                          [FAMILY], a_last=("E1",), n_draws=99)
    assert row["p_contrast"] == 1.0
    assert row["p_span"] == 1.0
    assert row["load"] == "capability"


def _tested(q_contrast: float | None, q_span: float | None) -> dict[str, object]:
    return {"reason": None, "q_contrast": q_contrast, "q_span": q_span}


def test_the_call_needs_q_strictly_below_alpha():
    # q exactly at α is not significant (the rule is q < α).
    assert call_load(_tested(0.05, 0.05), 0.05) == "capability"
    assert call_load(_tested(0.049, 0.5), 0.05) == "policy"
    assert call_load(_tested(0.5, 0.049), 0.05) == "route-sensitive"
    assert call_load(_tested(0.5, 0.5), 0.05) == "capability"
    # an untested span (q None) is never route-sensitive
    assert call_load(_tested(None, None), 0.05) == "capability"
    assert call_load(_tested(0.5, None), 0.05) == "capability"


def test_the_default_null_seed_is_zero():
    # The span's p is Monte Carlo: seeds 0 and 1 draw different nulls, and the default must be
    # the report's default seed 0 (same inputs, same bytes).
    means = (BranchMean("micro", "E1", 0.5, 3), BranchMean("micro", "E2", 0.45, 3),
             BranchMean("micro", "E3", 0.4, 1))
    cohort = _cohort(delta=0.1, means=means, group_ss=((0.02, 3), (0.03, 3)))
    p = {seed: run_load_tests([cohort], [FAMILY], a_last=("E1",), seed=seed,
                              n_draws=2000)[0]["p_span"]
         for seed in (0, 1)}
    assert p[0] != p[1]
    assert run_load_tests([cohort], [FAMILY], a_last=("E1",), n_draws=2000)[0]["p_span"] == p[0]


def test_a_cohort_counts_the_prompts_of_its_least_scored_run():
    # 25 prompts; one E2 run fails on 2 of them, so that run scores 23: the cohort's n_prompts
    # is the smallest number any run scored (23), not the largest (25).
    ids = [f"c{i:02d}" for i in range(25)]
    rows = []
    for branch, unsafe in (("E1", 20), ("E2", 5), ("reference", 6)):
        for seed in (42, 43, 44):
            status = ["failed"] * 2 + ["ok"] * 23 if (branch, seed) == ("E2", 43) else None
            rows += rows_for(run_meta("micro", branch, seed), COPY, decisions(unsafe, 25),
                             ids=ids, status=status)
    scores = analyses.compute_scores(frame(rows), kinds=KINDS, n_resamples=10, seed=0)
    table = analyses.benchmark_load(scores, n_draws=99).table
    row = table.filter((table["subset"] == "full") & (table["mapping"] == "loose")).row(
        0, named=True)
    assert row["n_prompts"] == 23
