"""Wilson score intervals for single-run rates (issue 12, item 2).

Oracles: the closed form written out by hand below, and scipy's
``binomtest(k, n).proportion_ci(method="wilson")`` — neither calls the code under test.
"""

from __future__ import annotations

import math

import polars as pl
import pytest
import scipy.stats
from synthetic_runs import COPY, KINDS, decisions, frame, rows_for, run_meta

from guarddiag import analyses, stats
from guarddiag.errors import GuarddiagError

Z95 = 1.959963984540054  # the 0.975 normal quantile


def test_zero_of_seventy_five_by_hand():
    # k = 0: the lower bound is 0 and the upper z²/(n + z²) = 3.8415 / 78.8415 = 0.04872.
    low, high = stats.wilson_interval(0, 75)
    assert low == 0.0
    assert high == pytest.approx(Z95**2 / (75 + Z95**2), rel=1e-12)
    assert round(high, 5) == 0.04872


def test_three_of_ten_by_hand():
    # p = .3, z² = 3.8415: centre (.3 + .19207) / 1.38415 = .35557,
    # half 1.95996 * sqrt(.021 + .0096036) / 1.38415 = .24778 -> [.10779, .60322].
    n, p, z2 = 10, 0.3, Z95**2
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low, high = stats.wilson_interval(3, 10)
    assert (low, high) == (pytest.approx(centre - half), pytest.approx(centre + half))
    assert (round(low, 4), round(high, 4)) == (0.1078, 0.6032)


@pytest.mark.parametrize(("k", "n", "confidence"), [
    (0, 1, 0.95), (1, 1, 0.95), (0, 3, 0.95), (2, 7, 0.9), (50, 100, 0.95), (99, 100, 0.99),
    (100, 100, 0.95), (1, 21318, 0.95), (17, 75, 0.8)])
def test_matches_scipy(k, n, confidence):
    ci = scipy.stats.binomtest(k, n).proportion_ci(confidence, method="wilson")
    low, high = stats.wilson_interval(k, n, confidence)
    assert low == pytest.approx(ci.low, abs=1e-12)
    assert high == pytest.approx(ci.high, abs=1e-12)
    assert 0.0 <= low <= k / n <= high <= 1.0


def test_never_zero_width_and_symmetric():
    for n in (1, 5, 75, 1000):
        for k in (0, n):
            low, high = stats.wilson_interval(k, n)
            assert high - low > 0
        for k in range(0, n + 1, max(1, n // 7)):
            low, high = stats.wilson_interval(k, n)
            mlow, mhigh = stats.wilson_interval(n - k, n)
            assert low == pytest.approx(1 - mhigh, abs=1e-12)
            assert high == pytest.approx(1 - mlow, abs=1e-12)
    assert stats.wilson_interval(75, 75)[1] == 1.0


@pytest.mark.parametrize(("k", "n", "confidence", "match"), [
    (0, 0, 0.95, "n >= 1"), (4, 3, 0.95, "k <= n"), (-1, 3, 0.95, "count >= 0"),
    (True, 3, 0.95, "count >= 0"), (1, 3, 1.0, "confidence"), (1, 3, 0.0, "confidence")])
def test_bad_input_is_one_clear_error(k, n, confidence, match):
    with pytest.raises(GuarddiagError, match=match):
        stats.wilson_interval(k, n, confidence)


def test_scores_at_zero_do_not_collapse():
    # A run that flags none of 8 prompts: [0, z²/(8 + z²)] = [0, 32.4%], named 'wilson'; the
    # recipe of three such seeds shows the same span, never [0, 0].
    rows = []
    for seed in (42, 43, 44):
        rows += rows_for(run_meta("micro", "reference", seed), COPY, decisions(0, 8),
                         ids=[f"c{i}" for i in range(8)])
    rows += rows_for(run_meta("micro", "E2", 42), COPY, decisions(0, 8),
                     ids=[f"c{i}" for i in range(8)])
    scores = analyses.compute_scores(frame(rows), kinds=KINDS, n_resamples=10, seed=0)
    upper = Z95**2 / (8 + Z95**2)
    for r in scores.binary().iter_rows(named=True):
        assert r["score"] == 0.0
        assert (r["ci_low"], r["ci_high"], r["interval"]) == (0.0, pytest.approx(upper),
                                                              "wilson")
    t = analyses.recipe_table(scores, subset="full", mapping="loose").to_frame()
    rows_by = {r["entity"]: r for r in t.iter_rows(named=True)}
    ref, e2 = rows_by["micro/reference"], rows_by["micro/E2"]
    assert (ref["interval"], ref["n_runs"]) == ("seed-range+wilson", 3)
    assert (ref["seed_low"], ref["seed_high"]) == (0.0, 0.0)
    assert (ref["low"], ref["high"]) == (0.0, pytest.approx(upper))
    assert (e2["interval"], e2["low"], e2["high"]) == ("wilson", 0.0, pytest.approx(upper))
    assert t.filter(pl.col("high") <= pl.col("low")).height == 0
