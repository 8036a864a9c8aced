"""guarddiag.stats at its edges: the point probability of a rank sum, Cohen's κ without labels,
p-values of exactly 0 and 1 in the multiplicity adjustments.

Oracles: subsets counted by hand (itertools.combinations) and the adjustment formulas worked
out by hand.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import pytest

from guarddiag import stats
from guarddiag.errors import GuarddiagError


def test_point_probability_of_a_rank_sum_counts_subsets():
    # ranks 1..5, k = 2: the C(5, 2) = 10 pairs; sum 5 from {1,4} and {2,3}, sum 9 from {4,5}.
    dist = stats.rank_sum_distribution([1, 2, 3, 4, 5], 2)
    by_hand = {s: Fraction(sum(a + b == s for a, b in combinations(range(1, 6), 2)), 10)
               for s in range(3, 10)}
    assert dist.probability(5) == Fraction(2, 10) == by_hand[5]
    assert dist.probability(9.0) == Fraction(1, 10)
    assert dist.probability(2) == 0                      # below the smallest sum
    assert {s: dist.probability(s) for s in range(3, 10)} == by_hand
    # mid-ranks: 1.5, 1.5, 3 and k = 1 -> P(S = 1.5) = 2/3
    assert stats.rank_sum_distribution([1.5, 1.5, 3], 1).probability(1.5) == Fraction(2, 3)


def test_cohen_kappa_needs_labels():
    with pytest.raises(GuarddiagError, match="cohen_kappa: no labels"):
        stats.cohen_kappa([], [])
    # one label each: p_o = 1, p_e = 1 -> undefined (NaN), not an error
    kappa = stats.cohen_kappa(["A"], ["A"])
    assert kappa != kappa
    # two raters, four items, agreement 2/4; marginals A:2,B:2 vs A:2,B:2 -> p_e = 1/2 -> κ = 0
    assert stats.cohen_kappa(["A", "A", "B", "B"], ["A", "B", "A", "B"]) == 0.0


def test_adjustments_accept_p_values_of_exactly_zero_and_one():
    # BH, m = 3, sorted 0, 0.5, 1: q = min over j >= i of m p_(j) / j -> 0, 0.75, 1.
    assert stats.benjamini_hochberg([1.0, 0.0, 0.5]) == [1.0, 0.0, 0.75]
    # Holm, m = 3: 3·0 = 0, max(0, 2·0.5) = 1, max(1, 1·1) = 1.
    assert stats.holm([1.0, 0.0, 0.5]) == [1.0, 0.0, 1.0]
    for bad in (-0.01, 1.01):
        with pytest.raises(GuarddiagError, match=r"must lie in \[0, 1\]"):
            stats.benjamini_hochberg([0.5, bad])
        with pytest.raises(GuarddiagError, match=r"must lie in \[0, 1\]"):
            stats.holm([bad])
