"""Golden tests for guarddiag.stats: every expected value is computed independently (hand
arithmetic, brute-force enumeration, scipy or scikit-learn) — never by the code under test."""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb

import numpy as np
import pytest
import scipy.stats
from rank_oracle import enumerate_rank_sums
from sklearn.metrics import cohen_kappa_score

from guarddiag import stats
from guarddiag.errors import GuarddiagError

# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_matches_a_hand_rolled_loop():
    values = np.array([0, 1, 1, 0, 1, 1, 1], dtype=float)
    b = 500
    got = stats.bootstrap_distribution(values, n_resamples=b, rng=np.random.default_rng(7))
    # Oracle: the textbook loop, one resample at a time, from the same generator state.
    rng = np.random.default_rng(7)
    loop = np.array([values[rng.integers(0, values.size, size=values.size)].mean()
                     for _ in range(b)])
    np.testing.assert_array_equal(got[:, 0], loop)
    res = stats.bootstrap_means(values, n_resamples=b, rng=np.random.default_rng(7))
    assert res.estimate[0] == 5 / 7
    assert res.low[0] == np.quantile(loop, 0.025)
    assert res.high[0] == np.quantile(loop, 0.975)
    assert res.n_resamples == b
    assert res.n == 7


def test_bootstrap_blocks_do_not_change_the_stream(monkeypatch):
    values = np.arange(6, dtype=float) % 2
    whole = stats.bootstrap_distribution(values, n_resamples=50, seed=3)
    monkeypatch.setattr(stats, "_BLOCK_DRAWS", 13)  # 2 resamples per block
    blocked = stats.bootstrap_distribution(values, n_resamples=50, seed=3)
    np.testing.assert_array_equal(whole, blocked)


def test_bootstrap_columns_share_prompt_draws():
    # Paired resampling: column 2 = 1 - column 1, so every resampled mean pair sums to 1.
    col = np.array([1, 0, 0, 1, 1], dtype=float)
    dist = stats.bootstrap_distribution(np.stack([col, 1 - col], axis=1), n_resamples=300,
                                        seed=11)
    np.testing.assert_allclose(dist.sum(axis=1), 1.0, rtol=0, atol=1e-15)


def test_bootstrap_quantiles_converge_to_the_exact_bootstrap_distribution():
    # Tiny case where the bootstrap distribution is known exactly: values (0, 0, 1), n = 3.
    # A resample mean is X/3 with X ~ Binomial(3, 1/3): P = 8/27, 12/27, 6/27, 1/27.
    dist = stats.bootstrap_distribution([0.0, 0.0, 1.0], n_resamples=200_000, seed=1)[:, 0]
    freqs = [np.mean(np.isclose(dist, x / 3)) for x in range(4)]
    np.testing.assert_allclose(freqs, [8 / 27, 12 / 27, 6 / 27, 1 / 27], atol=0.005)


def test_bootstrap_is_reproducible_and_seed_sensitive():
    v = np.random.default_rng(0).integers(0, 2, size=40).astype(float)
    a = stats.bootstrap_means(v, seed=5)
    b = stats.bootstrap_means(v, seed=5)
    c = stats.bootstrap_means(v, seed=6)
    assert (a.low, a.high) == (b.low, b.high)
    assert a.n_resamples == stats.DEFAULT_RESAMPLES == 2000
    assert c.n_resamples == 2000
    assert not np.array_equal(stats.bootstrap_distribution(v, n_resamples=20, seed=5),
                              stats.bootstrap_distribution(v, n_resamples=20, seed=6))


def test_derive_rng_is_keyed():
    a = stats.derive_rng(0, "advbench", "full").integers(0, 10**9, size=4)
    b = stats.derive_rng(0, "advbench", "full").integers(0, 10**9, size=4)
    c = stats.derive_rng(0, "advbench", "decontaminated").integers(0, 10**9, size=4)
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"values": [], "seed": 0}, "empty"),
    ({"values": [0.0, float("nan")], "seed": 0}, "finite"),
    ({"values": [1.0], "seed": 0, "n_resamples": 0}, "n_resamples"),
    ({"values": [1.0]}, "exactly one"),
    ({"values": [1.0], "seed": -1}, "seed"),
])
def test_bootstrap_bad_input(kwargs, needle):
    kwargs = dict(kwargs)  # the parameter is shared by reruns in one process (mutmut)
    values = kwargs.pop("values")
    with pytest.raises(GuarddiagError, match=needle):
        stats.bootstrap_means(values, **kwargs)


# --------------------------------------------------------------------------- exact rank tests


def test_extreme_rank_probability_closed_form():
    # k = 4 of n = 10: C(10, 4) = 10*9*8*7 / (4*3*2*1) = 210.
    assert stats.extreme_rank_probability(10, 4) == Fraction(1, 210)
    assert stats.extreme_rank_probability(10, 4, tail="bottom") == Fraction(1, 210)
    assert stats.extreme_rank_probability(10, 4, tail="either") == Fraction(2, 210)
    assert stats.extreme_rank_probability(5, 2) == Fraction(1, 10)  # C(5,2) = 10
    assert stats.extreme_rank_probability(3, 3, tail="either") == 1
    with pytest.raises(GuarddiagError, match="k <= n"):
        stats.extreme_rank_probability(3, 4)


def test_rank_sum_distribution_small_case_by_hand():
    # n = 4, k = 2: the 6 pairs of {1,2,3,4} have sums 3,4,5,5,6,7.
    dist = stats.rank_sum_distribution([1, 2, 3, 4], 2)
    assert dist.total == 6
    assert dist.probabilities() == {3: Fraction(1, 6), 4: Fraction(1, 6), 5: Fraction(2, 6),
                                    6: Fraction(1, 6), 7: Fraction(1, 6)}
    assert dist.p_at_least(6) == Fraction(2, 6)
    assert dist.p_at_most(4) == Fraction(2, 6)
    assert dist.mean == 5.0  # k (n + 1) / 2 = 2 * 5 / 2
    assert dist.p_as_extreme(7) == Fraction(2, 6)  # |s - 5| >= 2: sums 3 and 7


def test_rank_sum_distribution_with_ties_by_hand():
    # Mid-ranks of scores (1, 2, 2, 3): 1, 2.5, 2.5, 4. Pairs of positions (6 equally likely):
    # 1+2.5, 1+2.5, 1+4, 2.5+2.5, 2.5+4, 2.5+4 -> 3.5 (2), 5 (1), 5 (1), 6.5 (2).
    dist = stats.rank_sum_distribution([1, 2.5, 2.5, 4], 2)
    assert dist.probabilities() == {3.5: Fraction(2, 6), 5.0: Fraction(2, 6),
                                    6.5: Fraction(2, 6)}


@pytest.mark.parametrize(("ranks", "k"), [
    ([1, 2, 3, 4, 5, 6], 3),
    ([1, 2, 3, 4, 5, 6, 7], 2),
    ([1.5, 1.5, 3, 5, 5, 5, 7], 3),
    ([2, 2, 2, 5, 5, 5], 4),
    ([1, 2, 3, 4, 5, 6, 7, 8], 1),
])
def test_rank_sum_dp_matches_brute_force_enumeration(ranks, k):
    dp = stats.rank_sum_distribution(ranks, k)
    brute = enumerate_rank_sums(ranks, k)
    assert brute.total == np.prod(range(1, len(ranks) + 1))
    assert dp.probabilities() == brute.probabilities()


@pytest.mark.slow
def test_rank_sum_dp_equals_enumerating_all_ten_factorial_orderings():
    # The study's setting: n = 10, k = 4 -> 10! = 3,628,800 orderings, enumerated one by one
    # here (independently of both stats functions) and tallied by the group's rank sum.
    tally: dict[int, int] = {}
    for perm in itertools.permutations(range(1, 11)):
        s = perm[0] + perm[1] + perm[2] + perm[3]
        tally[s] = tally.get(s, 0) + 1
    assert sum(tally.values()) == 3_628_800
    dp = stats.rank_sum_distribution(list(range(1, 11)), 4)
    assert dp.probabilities() == {float(s): Fraction(c, 3_628_800) for s, c in tally.items()}
    # The top four ranks 7+8+9+10 = 34 happen in 4! * 6! orderings: 1/210.
    assert tally[34] == 24 * 720
    assert dp.p_at_least(34) == Fraction(1, 210)


def test_rank_test_group_at_top_gives_one_over_c():
    scores = {f"E{i}": float(i) for i in range(1, 11)}  # E10 highest ... E1 lowest
    res = stats.rank_test(scores, ["E7", "E8", "E9", "E10"])
    assert res.group_holds_top
    assert not res.ties
    assert res.rank_sum == 7 + 8 + 9 + 10
    assert res.p_upper == Fraction(1, 210) == res.p_extreme_top
    assert res.p_value == res.p_upper
    assert res.p_two_sided == Fraction(2, 210)
    assert res.branches[0] == "E10"


def test_rank_test_not_extreme_group_by_enumeration():
    # n = 6, the group holds ranks 6 and 4 (sum 10). Of the C(6,2) = 15 pairs of 1..6 only
    # 4+6 = 10 and 5+6 = 11 reach 10, so P(S >= 10) = 2/15.
    scores = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0, "f": 6.0}
    res = stats.rank_test(scores, ["f", "d"])
    oracle = Fraction(sum(1 for p in itertools.combinations(range(1, 7), 2) if sum(p) >= 10),
                      comb(6, 2))
    assert oracle == Fraction(2, 15)
    assert res.p_upper == oracle
    assert res.rank_sum == 10
    assert not res.group_holds_top


def test_rank_test_ties_at_the_boundary():
    # Five branches tie at 100 and the group holds four of them: exact p = C(5,4)/C(10,4).
    scores = {f"E{i}": (1.0 if i <= 5 else i / 100) for i in range(1, 11)}
    res = stats.rank_test(scores, ["E1", "E2", "E3", "E4"])
    assert res.ties
    assert res.ranks[:5] == (8.0,) * 5  # mid-rank of ranks 6..10
    assert res.group_holds_top
    assert res.p_upper == Fraction(comb(5, 4), comb(10, 4)) == Fraction(5, 210)
    assert res.p_extreme_top == Fraction(1, 210)  # closed form, not valid under these ties


def test_rank_test_bottom_tail():
    scores = {"a": 0.1, "b": 0.2, "c": 0.9, "d": 0.8}
    res = stats.rank_test(scores, ["a", "b"], tail="bottom")
    assert res.group_holds_bottom
    assert res.p_value == Fraction(1, comb(4, 2))


def test_rank_test_errors():
    scores = {"E1": 1.0, "E2": 2.0, "E3": 3.0}
    with pytest.raises(GuarddiagError, match=r"unknown branch 'E9'.*rank-test group"):
        stats.rank_test(scores, ["E1", "E9"])
    with pytest.raises(GuarddiagError, match="twice"):
        stats.rank_test(scores, ["E1", "E1"])
    with pytest.raises(GuarddiagError, match="fewer than all"):
        stats.rank_test(scores, ["E1", "E2", "E3"])
    with pytest.raises(GuarddiagError, match="tail"):
        stats.rank_test(scores, ["E1"], tail="up")


def test_mann_whitney_agrees_with_rank_sum_without_ties():
    # scipy oracle: the exact Mann-Whitney U test of the group vs the rest is the same
    # permutation test as the rank sum (U = S - k(k+1)/2).
    scores = {"g1": 9.0, "g2": 7.0, "g3": 4.0, "r1": 8.0, "r2": 1.0, "r3": 2.0, "r4": 3.0,
              "r5": 5.0}
    group = ["g1", "g2", "g3"]
    res = stats.rank_test(scores, group)
    rest = [v for k, v in scores.items() if k not in group]
    mw = scipy.stats.mannwhitneyu([scores[g] for g in group], rest, alternative="greater",
                                  method="exact")
    assert float(res.p_upper) == pytest.approx(mw.pvalue, abs=1e-12)


# --------------------------------------------------------------------------- kappa, spearman


def test_cohen_kappa_by_hand_and_against_sklearn():
    # 10 items: agree on 7. Rater a: 6 X, 4 Y; rater b: 5 X, 5 Y.
    a = ["X"] * 6 + ["Y"] * 4
    b = ["X"] * 4 + ["Y"] * 2 + ["Y"] * 3 + ["X"]
    p_o = 7 / 10
    p_e = (6 * 5 + 4 * 5) / 100
    assert stats.cohen_kappa(a, b) == pytest.approx((p_o - p_e) / (1 - p_e))
    rng = np.random.default_rng(3)
    classes = ["GENERIC_SAFE", "BOUNDARY_SAFE", "HARMFUL", "COMPOUND"]
    x = rng.choice(classes, size=300).tolist()
    y = [c if rng.random() < 0.7 else rng.choice(classes) for c in x]
    assert stats.cohen_kappa(x, y) == pytest.approx(cohen_kappa_score(x, y), abs=1e-12)
    assert np.isnan(stats.cohen_kappa(["X", "X"], ["X", "X"]))
    with pytest.raises(GuarddiagError, match="length"):
        stats.cohen_kappa(["X"], ["X", "Y"])


def test_cohen_kappa_over_a_declared_label_set():
    # A label set with a class neither rater used leaves κ unchanged: 3 items, agree on 2,
    # a = X X Y, b = X Y Y: p_o = 2/3, p_e = (2·1 + 1·2)/9 = 4/9 -> κ = (2/9)/(5/9) = 0.4.
    a, b = ["X", "X", "Y"], ["X", "Y", "Y"]
    assert stats.cohen_kappa(a, b, ("X", "Y", "Z")) == pytest.approx(0.4, abs=1e-12)
    assert stats.cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-12)
    # A label outside the declared set is an error, not an item silently dropped.
    with pytest.raises(GuarddiagError, match="label.s. Z not among X, Y"):
        stats.cohen_kappa(["X", "Z"], ["X", "Y"], ("X", "Y"))


def test_spearman_by_hand_and_against_scipy():
    x = [1, 2, 3, 4, 5]
    y = [2, 1, 4, 3, 5]
    # d = (-1, 1, -1, 1, 0): rho = 1 - 6 * 4 / (5 * 24) = 0.8
    res = stats.spearman(x, y)
    assert res.rho == pytest.approx(0.8)
    assert res.p_value == pytest.approx(scipy.stats.spearmanr(x, y).pvalue)
    assert res.n == 5
    assert stats.spearman([1, 2], [1, 2]).rho is None
    assert stats.spearman([1, 1, 1], [1, 2, 3]).rho is None
