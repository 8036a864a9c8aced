"""Spearman ρ between VAL and benchmark scores, done per recipe (issue 12, item 3).

One point per recipe (size, branch) with VAL and scores averaged over its seeds; study benchmarks
only (an extra set is left out); harmful and benign benchmarks apart; ρ, p and n from
``scipy.stats.spearmanr`` on seed means worked out here with exact fractions.
"""

from __future__ import annotations

from fractions import Fraction

import polars as pl
import pytest
import scipy.stats
from synthetic_runs import COPY, ORH, STD, decisions, frame, rows_for, run_meta

from guarddiag import analyses
from guarddiag.report.sections.ranks import correlation_blocks

EXTRA = "xstest_unsafe"        # harmful, but not one of the study's 15 subsets
KINDS = {COPY: "harmful", STD: "harmful", ORH: "benign", EXTRA: "harmful"}
N = 10
# Per recipe: correct VAL answers (of 10) and prompts flagged per benchmark, per seed.
RECIPES: dict[str, dict[str, tuple[int, ...]]] = {
    "reference": {"val": (5, 5, 6), COPY: (0, 1, 0), STD: (7, 9, 8), ORH: (1, 1, 1),
                  EXTRA: (9, 9, 9)},
    "E1": {"val": (8, 8, 8), COPY: (9, 9, 8), STD: (9, 7, 8), ORH: (4, 3, 3),
           EXTRA: (0, 0, 0)},
    "E2": {"val": (6, 6, 6), COPY: (3, 3, 2), STD: (6, 6, 6), ORH: (2, 2, 1),
           EXTRA: (5, 5, 5)},
    "E3": {"val": (7, 6, 7), COPY: (5, 6, 5), STD: (9, 9, 9), ORH: (1, 2, 2),
           EXTRA: (1, 1, 1)},
    "E4": {"val": (9, 9, 9), COPY: (10, 10, 10), STD: (7, 7, 8), ORH: (5, 5, 4),
           EXTRA: (3, 3, 3)},
    "E5": {"val": (4,), COPY: (1,), STD: (8,), ORH: (0,), EXTRA: (7,)},  # one seed only
}
GOLD = ["HARMFUL"] * N


class _Loads:
    """The calls' sets fixed by hand, so the correlation is tested on its own."""

    def groups(self, *, subset: str, mapping: str) -> dict[str, str]:
        return {COPY: "policy", STD: "capability", ORH: "policy", EXTRA: "policy"}


def _setup():
    rows = []
    val_ids = [f"v{i}" for i in range(N)]
    for branch, per in RECIPES.items():
        for i, seed in enumerate((42, 43, 44)[:len(per["val"])]):
            meta = run_meta("micro", branch, seed)
            for bench in (COPY, STD, ORH, EXTRA):
                rows += rows_for(meta, bench, decisions(per[bench][i], N),
                                 ids=[f"{bench}-{j}" for j in range(N)])
            correct = per["val"][i]
            rows += rows_for(meta, "pool_val", [0.1] * N, ids=val_ids,
                             pred_class=["HARMFUL"] * correct + ["GENERIC_SAFE"] * (N - correct))
    pool = pl.DataFrame({"prompt_id": val_ids, "label_a": GOLD, "split": ["val"] * N,
                         "lang": ["en"] * N})
    scores = analyses.compute_scores(frame(rows), kinds=KINDS, pool=pool, n_resamples=10,
                                     seed=0)
    return analyses.val_correlation(scores, _Loads(), subset="full", mapping="loose")


def _mean(xs: tuple[int, ...]) -> float:
    return float(sum(Fraction(x, N) for x in xs) / len(xs))


def _expected(bench: str):
    names = list(RECIPES)
    return scipy.stats.spearmanr([_mean(RECIPES[b]["val"]) for b in names],
                                 [_mean(RECIPES[b][bench]) for b in names])


def test_one_point_per_recipe_study_benchmarks_only():
    corr = _setup()
    # 16 runs, but 6 recipes: n counts recipes.
    assert corr.policy.n == corr.capability.n == 6
    assert corr.table["branch"].to_list() == ["reference", "E1", "E2", "E3", "E4", "E5"]
    assert corr.table["n_seeds"].to_list() == [3, 3, 3, 3, 3, 1]
    # The extra set is policy-load too, but left out of every mean.
    assert corr.excluded == (EXTRA,)
    assert corr.policy.benchmarks == (COPY,)
    assert corr.capability.benchmarks == (STD,)
    assert corr.group("policy", "benign").benchmarks == (ORH,)
    assert corr.group("capability", "benign").benchmarks == ()
    for (load, kind), bench in {("policy", "harmful"): COPY, ("capability", "harmful"): STD,
                                ("policy", "benign"): ORH}.items():
        g = corr.group(load, kind)
        want = _expected(bench)
        assert g.rho == pytest.approx(want.statistic), (load, kind)
        assert g.p_value == pytest.approx(want.pvalue), (load, kind)
        assert g.significant == (want.pvalue < 0.05)
    empty = corr.group("capability", "benign")
    assert (empty.rho, empty.p_value, empty.significant) == (None, None, None)


def test_the_text_says_when_rho_is_not_significant():
    corr = _setup()
    copy_p = _expected(COPY).pvalue
    std_p = _expected(STD).pvalue
    assert copy_p < 0.05 < std_p  # by construction of RECIPES
    frame_ = corr.summary_frame()
    assert frame_.select("load", "kind", "significant").rows() == [
        ("policy", "harmful", True), ("policy", "benign", corr.group("policy", "benign")
                                      .significant), ("capability", "harmful", False),
        ("capability", "benign", None)]
    text = " ".join(b.text for b in correlation_blocks(corr, "full prompts")
                    if hasattr(b, "text"))
    assert "called capability, harmful: ρ = " in text
    assert f"(p = {std_p:.3g}, n = 6 recipes), not significant at 0.05" in text
    assert f"(p = {copy_p:.3g}, n = 6 recipes), significant at 0.05" in text
    assert "cannot be told from 0" in text
    assert "called capability, benign: ρ undefined (no benchmark in this set)" in text
    assert EXTRA in text
