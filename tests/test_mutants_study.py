"""The study comparison (guarddiag.analyses.study) states the study's published numbers
(../shared/SPEC.md §6) exactly, with or without this run's measurements beside them, and leaves
out the rows it cannot fill.

Oracles: the figures as SPEC §6 prints them (58.5 pp → 0.585 etc.) and 1/C(10, 4) from math.comb.
"""

from __future__ import annotations

from math import comb

import pytest
from synthetic_runs import COPY, KINDS, decisions, frame, rows_for, run_meta

from guarddiag import analyses, stats
from guarddiag.analyses.rank import BranchRankResult, rank_test_at

GROUP = ("E1", "E7", "E8", "E10")
# SPEC §6: "Study: HarmBench-copyright 0.99, WildGuard-benign 0.043"; "copyright widest 58.5,
# median of all 4.0; WildGuard-benign Δ 4.3 vs widest floor 5.0" (pp) ; "1/C(10,k) (k=4 → 1/210)".
SPEC = {"Δb HarmBench-copyright": 0.99,
        "widest seed floor, HarmBench-copyright": 0.585,
        "median seed floor, all benchmarks": 0.040,
        "Δb WildGuard-benign": 0.043,
        "widest seed floor, WildGuard-benign": 0.050}


def _scores() -> analyses.ScoresResult:
    rows = []
    ids = [f"c{i}" for i in range(10)]
    flags = {"E1": 10, "E7": 9, "E8": 8, "E10": 7, "E2": 0, "E3": 1, "E4": 2, "E5": 3,
             "E6": 4, "E9": 5}
    for branch, k in flags.items():
        rows += rows_for(run_meta("micro", branch, 42), COPY, decisions(k, 10), ids=ids)
    return analyses.compute_scores(frame(rows), kinds=KINDS, n_resamples=10, seed=0)


def _compare(scores: analyses.ScoresResult, rank: BranchRankResult | None) -> dict:
    res = analyses.study_comparison(scores=scores, load=None, rank=rank, correlation=None,
                                    effect=None, contamination=None, subset="full",
                                    mapping="loose")
    return {r["quantity"]: r for r in res.to_frame().iter_rows(named=True)}


def test_without_measurements_the_study_column_holds_spec_numbers_and_here_is_empty():
    rows = _compare(_scores(), None)
    for quantity, value in SPEC.items():
        assert rows[quantity]["study"] == pytest.approx(value, abs=1e-12), quantity
        assert rows[quantity]["here"] is None
    rank_row = rows["rank test of the A-last group on copyright"]
    assert rank_row["study"] == pytest.approx(1 / comb(10, 4))
    assert rank_row["here"] is None
    # no clear-harm benchmark scored: the CAP rows at 0.5 hold nothing here, and without the
    # calls there are no matched-threshold rows
    cap = [q for q in rows if q.startswith("mean CAP")]
    assert cap == ["mean CAP on clear harm, lowest branch (0.5)",
                   "mean CAP on clear harm, highest branch (0.5)"]
    assert all(rows[q]["here"] is None for q in cap)
    # the A-last COPY row is measured from the scores: E10 flags 7 of 10, the lowest run
    assert rows["COPY of the A-last branches, lowest run"]["here"] == 0.7


def test_a_measured_rank_test_is_compared_with_one_over_c_10_4():
    scores = _scores()
    test = stats.rank_test({"E1": 1.0, "E7": 0.9, "E8": 0.8, "E10": 0.7, "E2": 0.0, "E3": 0.1,
                            "E4": 0.2, "E5": 0.3, "E6": 0.4, "E9": 0.5}, GROUP)
    rank = BranchRankResult(benchmark=COPY, metric="CAP", subset="full", mapping="loose",
                            group=GROUP, tail="top", tests=(rank_test_at("micro", test),))
    rows = _compare(scores, rank)
    row = rows[f"rank test {{E1, E7, E8, E10}} on {COPY} (micro)"]
    assert row["study"] == pytest.approx(1 / comb(10, 4))
    assert row["here"] == pytest.approx(1 / 210)      # the group holds ranks 7..10 outright
