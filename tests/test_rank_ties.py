"""The rank test with its ties made visible (issue 12, item 4).

Oracles: counts of k-subsets worked out by hand (C(n, k) and the subsets reaching the observed
rank sum), and the brute-force walk over all n! orderings (``enumerate_rank_sums``).
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import pytest
from pydantic import ValidationError
from rank_oracle import enumerate_rank_sums
from synthetic_runs import COPY, KINDS, decisions, frame, rows_for, run_meta

from guarddiag import analyses, stats
from guarddiag.analyses.payload import payload_model, payload_of
from guarddiag.analyses.rank import BranchRankResult, rank_test_at

GROUP = ("E1", "E7", "E8", "E10")


def _demo_like() -> dict[str, float]:
    # The demo's copyright scores: the group above 0, the six others all at exactly 0.
    scores = {f"E{i}": 0.0 for i in range(1, 11)}
    scores.update({"E1": 0.462, "E7": 0.587, "E8": 0.453, "E10": 0.822})
    return scores


def test_six_branches_tied_at_zero_below_the_group():
    test = stats.rank_test(_demo_like(), GROUP)
    ties = rank_test_at("micro", test)
    # Ranks: the six zeros share (1 + … + 6)/6 = 3.5; the group holds 7, 8, 9, 10 = 34. Only
    # the one 4-subset {7, 8, 9, 10} of the C(10, 4) = 210 reaches 34.
    assert test.rank_sum == 34.0
    assert ties.p_tie_aware == Fraction(1, comb(10, 4)) == Fraction(1, 210)
    assert ties.p_closed_form == Fraction(1, 210)
    assert ties.n_tied == 6
    assert len(ties.tie_blocks) == 1
    block = ties.tie_blocks[0]
    assert (block.score, block.n_in_group) == (0.0, 0)
    assert block.branches == ("E2", "E3", "E4", "E5", "E6", "E9")  # the specs' order
    assert not ties.tie_straddles_group
    assert ties.extreme_beside_tie
    assert ties.describe_ties() == "0.0%×6"
    note = ties.tie_note
    assert "six of ten branches tie at 0.0%" in note
    assert "come from that tie" in note
    assert "1/210 = 0.00476" in note
    assert "equal to the closed form" in note


def test_a_tie_across_the_group_boundary_raises_p():
    # Five branches at 1.0, four of them in the group: the group's rank sum 4 × 8 = 32 (mid-rank
    # of ranks 6..10) is reached by any 4 of those 5 -> C(5, 4) / C(10, 4) = 5/210 = 1/42.
    scores = {f"E{i}": 0.1 * i for i in range(1, 11)}
    for b in ("E1", "E7", "E8", "E10", "E2"):
        scores[b] = 1.0
    test = stats.rank_test(scores, GROUP)
    ties = rank_test_at("micro", test)
    assert ties.p_tie_aware == Fraction(comb(5, 4), comb(10, 4)) == Fraction(1, 42)
    assert ties.p_closed_form == Fraction(1, 210)
    assert ties.tie_straddles_group
    assert (ties.tie_blocks[0].score, ties.tie_blocks[0].n_in_group) == (1.0, 4)
    note = ties.tie_note
    assert "five of ten branches tie at 100.0%" in note
    assert "four of them in the group" in note
    assert "cannot be told apart" in note
    assert "1/42 = 0.0238" in note


def test_no_ties():
    scores = {f"E{i}": i / 10 for i in range(1, 11)}
    ties = rank_test_at("tiny", stats.rank_test(scores, GROUP))
    assert ties.tie_blocks == ()
    assert ties.n_tied == 0
    assert not ties.tie_straddles_group
    assert not ties.extreme_beside_tie
    assert "no two branches tie" in ties.tie_note


@pytest.mark.parametrize("scores", [
    {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.5, "e": 0.7, "f": 0.7, "g": 0.9},
    {"a": 0.2, "b": 0.2, "c": 0.2, "d": 0.2, "e": 0.1, "f": 0.0, "g": 0.3},
])
def test_tie_aware_p_matches_all_orderings(scores):
    # 7! = 5,040 orderings, counted by brute force.
    group = ("d", "e", "g")
    test = stats.rank_test(scores, group)
    ties = rank_test_at("micro", test)
    oracle = enumerate_rank_sums(list(test.ranks), 3)
    assert ties.p_tie_aware == oracle.p_at_least(test.rank_sum)


def test_seed_means_equal_in_exact_arithmetic_tie():
    # E2's seeds flag 1, 2, 3 of 10 (float mean 0.20000000000000004), E3's 2, 2, 2 (0.2): the
    # same 0.2, so they must share a mid-rank and count as a tie.
    counts = {"E1": (9, 9, 9), "E7": (8, 8, 8), "E8": (7, 7, 7), "E10": (10, 10, 10),
              "E2": (1, 2, 3), "E3": (2, 2, 2), "E4": (0, 0, 0), "E5": (4, 4, 4),
              "E6": (5, 5, 5), "E9": (6, 6, 6)}
    rows = []
    for branch, ks in counts.items():
        for seed, k in zip((42, 43, 44), ks, strict=True):
            rows += rows_for(run_meta("micro", branch, seed), COPY, decisions(k, 10),
                             ids=[f"c{i}" for i in range(10)])
    scores = analyses.compute_scores(frame(rows), kinds=KINDS, n_resamples=10, seed=0)
    res = analyses.branch_rank_test(scores, group=GROUP, benchmark=COPY)
    ties, = res.tests
    assert ties.size == "micro"
    assert ties.n_tied == 2
    assert ties.tie_blocks[0].branches == ("E2", "E3")
    assert ties.p_tie_aware == Fraction(1, 210)  # the group still holds 7..10 outright
    row = res.to_frame().row(0, named=True)
    assert (row["n_tied"], row["tie_blocks"], row["tie_straddles_group"]) == (2, "20.0%×2",
                                                                              False)
    assert row["p_tie_aware"] == pytest.approx(1 / 210)
    assert not row["extreme_beside_tie"]  # E5 (0.4), just below the group, is not tied


def test_the_payload_is_the_result_declared_once():
    # results.json's rank.tests[*] comes from RankTestAtSize's own fields: the exact p's as
    # {value, exact}, the tie blocks as records, the note the report prints; the group of the
    # whole result stays out (each test holds it).
    scores = {f"E{i}": 0.1 * i for i in range(1, 11)}
    for b in ("E1", "E7", "E8", "E10", "E2"):
        scores[b] = 1.0
    at = rank_test_at("micro", stats.rank_test(scores, GROUP))
    res = BranchRankResult(benchmark=COPY, metric="CAP", subset="full", mapping="loose",
                           group=GROUP, tail="top", tests=(at,))
    payload = payload_of(res)
    assert sorted(payload) == ["benchmark", "mapping", "metric", "subset", "tail", "tests"]
    (test,) = payload["tests"]
    assert test["p_tie_aware"] == {"value": 1 / 42, "exact": "1/42"}
    assert test["p_closed_form"] == {"value": 1 / 210, "exact": "1/210"}
    assert test["tie_blocks"] == [{"score": 1.0, "branches": ["E1", "E2", "E7", "E8", "E10"],
                                   "n_in_group": 4}]
    assert test["tie_note"] == at.tie_note
    assert "p_closed_form_of_tail" not in test
    payload_model(BranchRankResult).model_validate(payload)
    with pytest.raises(ValidationError):
        payload_model(BranchRankResult).model_validate({**payload, "group": list(GROUP)})
