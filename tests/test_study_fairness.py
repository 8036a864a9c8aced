"""A fair comparison with the study (issue 12, item 7): which overlaps the pool recipe set, the
two over-refusal sets the study's pool held, and derived subsets kept out of the study-comparable
means. Expected values are counted by hand from the tables below."""

from __future__ import annotations

import polars as pl
import pytest
from synthetic_runs import COPY, decisions, frame, rows_for, run_meta

from guarddiag import analyses
from guarddiag.analyses.overlap_origin import overlap_origins

SUMMARY = {"benchmarks": {
    "advbench": {"n": 10, "n_exact": 4, "n_kept": 6},
    "jbb_benign": {"n": 10, "n_exact": 0, "n_kept": 10},
    "orbench_hard": {"n": 20, "n_exact": 2, "n_kept": 18},
    "strongreject": {"n": 8, "n_exact": 3, "n_kept": 5},
}}
OVERLAP = pl.DataFrame({
    "benchmark": ["advbench"] * 4 + ["orbench_hard"] * 2 + ["strongreject"] * 4,
    "prompt_id": ["a0", "a1", "a2", "a3", "o0", "o1", "s0", "s0", "s1", "s2"],
    "pool_id": ["advbench:1", "advbench:2", "advbench:3", "toxicchat:9",
                "toxicchat:4", "toxicchat:5",
                "advbench:7", "toxicchat:1", "toxicchat:2", "toxicchat:3"]})
# advbench: the pool kept 30 of its 100 rows (a sampled copy); toxicchat: all of it.
SOURCES = {"advbench": {"read": 100, "sampled": 30, "kept": 30},
           "toxicchat": {"read": 50, "sampled": 50, "kept": 50}}


def test_overlap_origin_by_hand():
    cont = analyses.contamination_table(SUMMARY)
    t = {r["benchmark"]: r for r in overlap_origins(cont, OVERLAP, SOURCES).to_frame()
         .iter_rows(named=True)}
    # advbench: 3 of 4 matched prompts match the sampled copy (≥ half) → set by the recipe.
    assert (t["advbench"]["n_exact_sampled"], t["advbench"]["origin"]) == (3, "recipe")
    assert t["advbench"]["sampled_sources"] == "advbench 30/100 (30%)"
    # strongreject: s0 matches the sampled copy (and toxicchat; counted once), s1, s2 only
    # toxicchat → 1 of 3 < half → measured.
    assert (t["strongreject"]["n_exact_sampled"], t["strongreject"]["origin"]) == (1, "measured")
    assert (t["orbench_hard"]["n_exact_sampled"], t["orbench_hard"]["origin"]) == (0, "measured")
    assert t["orbench_hard"]["sampled_sources"] is None
    assert t["jbb_benign"]["origin"] == "measured"          # no overlap at all
    unknown = overlap_origins(cont, None, SOURCES).to_frame()
    assert set(unknown["origin"].to_list()) == {"unknown"}


def _scores():
    """reference and E1 at seeds 42/43/44 on copyright and on a derived subset."""
    derived = "sorrybench__caesar"
    rows = []
    copy = {"reference": (1, 2, 3), "E1": (9, 9, 10)}       # ranges 0.2 and 0.1
    caesar = {"reference": (0, 5, 10), "E1": (1, 5, 9)}     # ranges 1.0 and 0.8
    for branch in ("reference", "E1"):
        for i, seed in enumerate((42, 43, 44)):
            meta = run_meta("micro", branch, seed, policy="A" if branch == "E1" else "B")
            rows += rows_for(meta, COPY, decisions(copy[branch][i], 10))
            rows += rows_for(meta, derived, decisions(caesar[branch][i], 10))
    return analyses.compute_scores(frame(rows), kinds={COPY: "harmful", derived: "harmful"},
                                   n_resamples=50)


def test_study_comparison_states_origin_and_leaves_out_derived_subsets():
    scores = _scores()
    study = analyses.study_comparison(
        scores=scores, load=analyses.benchmark_load(scores), rank=None, correlation=None,
        effect=None, contamination=analyses.contamination_table(SUMMARY), subset="full",
        mapping="loose", overlap=OVERLAP, pool_sources=SOURCES)
    rows = {r["quantity"]: r for r in study.to_frame().iter_rows(named=True)}
    # Median seed floor over copyright only: median(0.2, 0.1) = 0.15 (with the derived subset
    # it would be median(0.1, 0.2, 0.8, 1.0) = 0.5).
    assert rows["median seed floor, all benchmarks"]["here"] == pytest.approx(0.15)
    assert study.excluded_subsets == ("sorrybench__caesar",)
    adv = rows["exact overlap, advbench"]
    assert adv["here"] == pytest.approx(0.4)
    assert adv["here_note"].startswith("set by the pool recipe, not measured: 3 of 4 matches")
    assert rows["exact overlap, orbench_hard"]["here_note"].startswith("measured")
    assert rows["exact overlap, jbb_benign"]["study"] == pytest.approx(0.88)
    notes = " ".join(study.notes)
    assert "Set by the pool recipe, not measured: the exact overlap of advbench (40.0%)" in notes
    assert "JailbreakBench-benign: exact overlap 0.0% here vs 88.0% in the study" in notes
    assert "OR-Bench-hard: exact overlap 10.0% here vs 82.1% in the study" in notes
    assert "sorrybench__caesar" in notes
