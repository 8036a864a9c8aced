"""Analyses on hand-built tables: every expected number is worked out by hand in the test."""

from __future__ import annotations

import statistics
from fractions import Fraction
from types import SimpleNamespace

import polars as pl
import pytest
import scipy.stats
from synthetic_runs import COPY, KINDS, ORH, STD, decisions, frame, rows_for, run_meta, study_like

from guarddiag import analyses
from guarddiag.errors import GuarddiagError
from guarddiag.labels import LOOSE, STRICT


def _score(result, run_id, bench, *, subset="full", mapping="loose", lang="all"):
    t = result.to_frame().filter(
        (pl.col("run_id") == run_id) & (pl.col("benchmark") == bench)
        & (pl.col("subset") == subset) & (pl.col("lang") == lang)
        & (pl.col("mapping").is_null() if mapping is None else pl.col("mapping") == mapping))
    assert t.height == 1, t
    return t.row(0, named=True)


# ─── scores ────────────────────────────────────────────────────────────────────────────────────

def _small_table():
    e1 = run_meta("micro", "E1", 42, policy="A")
    ref = run_meta("micro", "reference", 42)
    guard = run_meta("outside", "g", None, kind="outside", policy="outside")
    ids = ["a", "b", "c", "d", "e"]
    deco = [True, True, False, True, False]
    rows = []
    # E1 on copyright: P(unsafe) 0.9, 0.5 (exactly at threshold -> unsafe), 0.49, 0.1, 0.6;
    # BOUNDARY 0 / 0 / 0.5 / 0.85 / 0: strict adds c (0.49 + 0.5) and d (0.1 + 0.85).
    rows += rows_for(e1, COPY, [0.9, 0.5, 0.49, 0.1, 0.6],
                     p_boundary=[0, 0, 0.5, 0.85, 0], ids=ids, decontam=deco)
    rows += rows_for(ref, COPY, [0.1, 0.1, 0.1, 0.1, 0.9], ids=ids, decontam=deco)
    # benign set: E1 flags 1 of 4, reference 0 of 4
    rows += rows_for(e1, ORH, [0.7, 0.2, 0.2, 0.2], ids=list("wxyz"))
    rows += rows_for(ref, ORH, [0.2, 0.2, 0.2, 0.2], ids=list("wxyz"))
    # the guard: binary only, on the decontaminated copyright prompts, one failed
    rows += rows_for(guard, COPY, [0.9, 0.0, 0.2], ids=["a", "b", "d"], classes=False,
                     status=["ok", "failed", "ok"])
    return frame(rows)


def test_cap_overref_and_mappings_by_hand():
    res = analyses.compute_scores(_small_table(), kinds=KINDS, n_resamples=200, seed=1,
                                  benchmark_sha256={COPY: "ab" * 32})
    e1 = "micro/E1/seed=42"
    row = _score(res, e1, COPY)
    assert (row["n_positive"], row["n_scored"], row["score"]) == (3, 5, 3 / 5)  # a, b, e
    assert row["metric"] == "CAP"
    assert row["metric_alias"] == "COPY"
    assert row["readout"] == "class_probs"
    assert row["threshold"] == 0.5
    assert row["benchmark_sha256"] == "ab" * 32
    assert row["label_policy"] == "A"
    assert _score(res, e1, COPY, mapping="strict")["score"] == 5 / 5
    # decontaminated: a, b, d survive -> loose a, b = 2/3; strict a, b, d = 3/3
    assert _score(res, e1, COPY, subset="decontaminated")["score"] == 2 / 3
    assert _score(res, e1, COPY, subset="decontaminated", mapping="strict")["score"] == 1
    over = _score(res, e1, ORH)
    assert (over["metric"], over["metric_alias"], over["score"]) == ("OVER-REF", "OR-H",
                                                                     1 / 4)
    assert _score(res, "micro/reference/seed=42", COPY)["score"] == 1 / 5


def test_failed_rows_are_counted_never_read_as_safe():
    res = analyses.compute_scores(_small_table(), kinds=KINDS, n_resamples=100, seed=1)
    g = _score(res, "guard/g", COPY, subset="decontaminated")
    # 3 rows, 1 failed: score over the 2 parsed rows (a unsafe, d safe) = 1/2, not 1/3.
    assert (g["n"], g["n_failed"], g["n_scored"], g["score"]) == (3, 1, 2, 1 / 2)
    assert g["readout"] == "p_unsafe"
    branch = _score(res, "micro/E1/seed=42", COPY, subset="decontaminated")
    assert g["prompt_set"] != branch["prompt_set"]  # never one column with the branches
    # binary-only guard: the strict mapping cannot change its read-out, and says so
    gs = _score(res, "guard/g", COPY, subset="decontaminated", mapping="strict")
    assert gs["score"] == g["score"]
    assert gs["readout"] == "p_unsafe"


def test_score_interval_is_the_wilson_interval():
    # Issue 12: a single run's rate carries the Wilson score interval, not a percentile
    # bootstrap (which collapses to [0, 0] at a score of 0).
    res = analyses.compute_scores(_small_table(), kinds=KINDS, n_resamples=300, seed=4)
    row = _score(res, "micro/E1/seed=42", COPY)
    assert (row["n_positive"], row["n_scored"]) == (3, 5)
    ci = scipy.stats.binomtest(3, 5).proportion_ci(0.95, method="wilson")
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert row["interval"] == "wilson"
    assert row["confidence"] == 0.95
    # The reference flags none of the 3 decontaminated copyright prompts: 0 of 3 is [0, z²/(3+z²)],
    # never the zero-width [0, 0].
    ref = _score(res, "micro/reference/seed=42", COPY, subset="decontaminated")
    z2 = scipy.stats.norm.ppf(0.975) ** 2
    assert (ref["n_positive"], ref["n_scored"]) == (0, 3)
    assert (ref["ci_low"], ref["ci_high"]) == (0.0, pytest.approx(z2 / (3 + z2)))


def test_adding_a_run_does_not_change_other_intervals():
    base = _small_table()
    extra = frame(rows_for(run_meta("micro", "E2", 42), COPY, [0.9, 0.9, 0.1, 0.1, 0.1],
                           ids=["a", "b", "c", "d", "e"],
                           decontam=[True, True, False, True, False]))
    a = analyses.compute_scores(base, kinds=KINDS, n_resamples=200, seed=2)
    b = analyses.compute_scores(pl.concat([base, extra]), kinds=KINDS, n_resamples=200, seed=2)
    ra, rb = (_score(r, "micro/E1/seed=42", COPY) for r in (a, b))
    assert (ra["ci_low"], ra["ci_high"]) == (rb["ci_low"], rb["ci_high"])


def test_val_accuracy_per_language():
    meta = run_meta("micro", "E1", 42, policy="A")
    rows = rows_for(meta, "pool_val", [0.1, 0.1, 0.1, 0.1], ids=["v1", "v2", "v3", "v4"],
                    pred_class=["HARMFUL", "GENERIC_SAFE", "COMPOUND", "BOUNDARY_SAFE"])
    pool = pl.DataFrame({"prompt_id": ["v1", "v2", "v3", "v4", "t1"],
                         "label_a": ["HARMFUL", "HARMFUL", "COMPOUND", "GENERIC_SAFE",
                                     "HARMFUL"],
                         "split": ["val", "val", "val", "val", "train"],
                         "lang": ["en", "en", "zh", "zh", "en"]})
    res = analyses.compute_scores(frame(rows), kinds=KINDS, pool=pool, n_resamples=100, seed=0)
    run = "micro/E1/seed=42"
    overall = _score(res, run, "pool_val", mapping=None)
    assert (overall["n_positive"], overall["n_scored"]) == (2, 4)  # v1, v3 correct
    assert overall["metric"] == "VAL"
    assert overall["threshold"] is None
    assert _score(res, run, "pool_val", mapping=None, lang="en")["score"] == 1 / 2
    assert _score(res, run, "pool_val", mapping=None, lang="zh")["score"] == 1 / 2
    bad_pool = pool.with_columns(pl.Series("split", ["val", "train", "val", "val", "train"]))
    with pytest.raises(GuarddiagError, match=r"not in the pool's val split, first 'v2'"):
        analyses.compute_scores(frame(rows), kinds=KINDS, pool=bad_pool, n_resamples=10)


# ─── bad input ─────────────────────────────────────────────────────────────────────────────────

def test_bad_predictions_give_one_line_errors():
    df = _small_table()
    cases = [
        (df.drop("p_unsafe"), r"missing column\(s\) p_unsafe"),
        (pl.concat([df, df.head(1)]), "duplicate key"),
        (df.with_columns(pl.when(pl.col("prompt_id") == "a").then(1.5)
                         .otherwise(pl.col("p_unsafe")).alias("p_unsafe")),
         r"p_unsafe: \d+ value\(s\) outside \[0, 1\]"),
        (df.filter(~((pl.col("branch") == "reference") & (pl.col("prompt_id") == "e"))),
         "runs cover different prompt sets of benchmark 'harmbench_copyright'"),
        (df.filter(~((pl.col("branch") == "g") & (pl.col("prompt_id") == "d"))),
         r"runs cover different prompt sets of benchmark 'harmbench_copyright' \('guard/g' has 2"),
        (df.with_columns(pl.when((pl.col("branch") == "reference") & (pl.col("prompt_id") == "c"))
                         .then(True).otherwise(pl.col("survives_decontam"))
                         .alias("survives_decontam")), "survives decontamination"),
    ]
    for bad, needle in cases:
        with pytest.raises(GuarddiagError, match=needle) as info:
            analyses.compute_scores(bad, kinds=KINDS, n_resamples=10)
        assert "\n" not in str(info.value)
    with pytest.raises(GuarddiagError, match="benchmark 'orbench_hard' has no kind"):
        analyses.compute_scores(df, kinds={COPY: "harmful"}, n_resamples=10)
    with pytest.raises(GuarddiagError, match="threshold"):
        analyses.compute_scores(df, kinds=KINDS, threshold=1.5)


# ─── Δb, Φb, load ──────────────────────────────────────────────────────────────────────────────

def _span_table():
    """Two sizes; reference and E1 with seed triplets, E2 with one seed; 4 prompts each.

    harmbench_copyright unsafe counts (of 4):            harmbench_standard unsafe counts (of 4):
      size s1: ref 0,1,0  E1 4,3,4  E2 2       s1: ref 3,4,2  E1 3,3,3  E2 4
      size s2: ref 0,0,0  E1 4,4,4  E2 1       s2: ref 3,3,3  E1 3,2,3  E2 3
    """
    counts = {
        ("s1", "reference"): ([0, 1, 0], [3, 4, 2]),
        ("s1", "E1"): ([4, 3, 4], [3, 3, 3]),
        ("s1", "E2"): ([2], [4]),
        ("s2", "reference"): ([0, 0, 0], [3, 3, 3]),
        ("s2", "E1"): ([4, 4, 4], [3, 2, 3]),
        ("s2", "E2"): ([1], [3]),
        ("s1", "T_A"): ([0], [0]),  # a teacher: never in the span
    }
    rows = []
    for (size, branch), (copy, std) in counts.items():
        for i, (c, s) in enumerate(zip(copy, std, strict=True)):
            meta = run_meta(size, branch, 42 + i)
            rows += rows_for(meta, COPY, decisions(c, 4), ids=list("abcd"))
            rows += rows_for(meta, STD, decisions(s, 4), ids=list("abcd"))
    return frame(rows)


def test_span_and_seed_floor_by_hand():
    scores = analyses.compute_scores(_span_table(), kinds=KINDS, n_resamples=20,
                                     mappings=(LOOSE,))
    load = analyses.benchmark_load(scores)
    t = {r["benchmark"]: r for r in load.to_frame().filter(pl.col("subset") == "full")
         .iter_rows(named=True)}
    # harmbench_copyright, s1: means ref 1/12, E1 11/12, E2 2/4 -> range 11/12 - 1/12 = 10/12
    #          s2: ref 0, E1 1, E2 1/4 -> range 1.  Δ = (10/12 + 1) / 2 = 11/12
    assert t[COPY]["delta"] == pytest.approx(11 / 12)
    # floors (triplets only): s1 ref 1/4, s1 E1 1/4, s2 ref 0, s2 E1 0 -> median 1/8, widest 1/4
    assert t[COPY]["floor_median"] == pytest.approx(statistics.median([.25, .25, 0, 0]))
    assert t[COPY]["floor_widest"] == pytest.approx(0.25)
    assert t[COPY]["n_groups"] == 4
    assert t[COPY]["load_study"] == "policy"   # the study's rule: 11/12 > 1/4
    # The calibrated call needs MIN_PROMPTS (20) prompts; these cohorts have 4.
    assert t[COPY]["load"] == "undetermined"
    assert t[COPY]["load_reason"] == "4 prompts; the test needs 20"
    # Pooled seed SD over the four triplets: sums of squares (1/4)^2 * 2/3 twice, 0 twice,
    # on df = 4 x 2 = 8.
    assert t[COPY]["df"] == 8
    assert t[COPY]["seed_sd"] == pytest.approx(((2 * (1 / 16) * (2 / 3)) / 8) ** 0.5)
    assert t[COPY]["ratio_widest"] == pytest.approx((11 / 12) / 0.25)
    # standard, s1: ref 9/12, E1 9/12, E2 1 -> 3/12; s2: ref 9/12, E1 8/12, E2 9/12 -> 1/12
    # Δ = (3/12 + 1/12) / 2 = 1/6; floors s1 ref 2/4, E1 0, s2 ref 0, E1 1/4 -> widest 1/2
    assert t[STD]["delta"] == pytest.approx(1 / 6)
    assert t[STD]["floor_widest"] == pytest.approx(0.5)
    assert t[STD]["widest_group"] == "s1/reference"
    assert t[STD]["load_study"] == "capability"
    assert t[STD]["n_sizes"] == 2
    assert t[STD]["n_branches"] == 3
    assert load.loads(subset="full", mapping="loose", column="load_study") == {
        COPY: "policy", STD: "capability"}
    assert load.loads(subset="full", mapping="loose") == {COPY: "undetermined",
                                                          STD: "undetermined"}
    by_size = load.by_size.filter((pl.col("benchmark") == COPY)
                                  & (pl.col("subset") == "full") & (pl.col("size") == "s1"))
    assert by_size["max_branch"].to_list() == ["E1"]
    assert by_size["min_branch"].to_list() == ["reference"]


def test_no_seed_group_means_undetermined():
    scores = analyses.compute_scores(_span_table(), kinds=KINDS, n_resamples=20,
                                     mappings=(LOOSE,))
    load = analyses.benchmark_load(scores, min_seeds=4)
    assert set(load.to_frame()["load"].to_list()) == {"undetermined"}
    assert load.to_frame()["floor_widest"].null_count() == load.to_frame().height
    with pytest.raises(GuarddiagError, match="unknown branch 'E99'"):
        analyses.benchmark_load(scores, branches=["E1", "E99"])


# ─── rank test ─────────────────────────────────────────────────────────────────────────────────

def test_branch_rank_test_on_study_like_runs():
    preds, _, _ = study_like(seed=3, seeds=(42,), with_guard=False)
    scores = analyses.compute_scores(preds, kinds=KINDS, n_resamples=20, mappings=(LOOSE,))
    res = analyses.branch_rank_test(scores, group=["E1", "E7", "E8", "E10"],
                                    benchmark=COPY)
    test, = res.tests
    assert test.size == "micro"
    assert test.n == 10  # E1..E10; the reference and the teachers are not ranked
    assert test.k == 4
    # The A-last branches capture ~95% of copyright prompts, the rest ~10%: they hold the top
    # four ranks (ties inside the group do not matter), so p = 1/C(10, 4) = 1/210.
    assert set(test.branches[:4]) == {"E1", "E7", "E8", "E10"}
    assert min(test.scores[:4]) > max(test.scores[4:])
    assert test.group_holds_top
    assert test.p_value == Fraction(1, 210)
    frame_ = res.to_frame()
    assert frame_["p_closed_form"].to_list() == [1 / 210]
    with pytest.raises(GuarddiagError, match=r"unknown branch 'E11' in the rank-test group"):
        analyses.branch_rank_test(scores, group=["E1", "E11"], benchmark=COPY)
    with pytest.raises(GuarddiagError, match="unknown benchmark 'nope'"):
        analyses.branch_rank_test(scores, group=["E1"], benchmark="nope")


def test_branch_rank_test_uses_seed_means():
    rows = []
    # 4 branches, 2 seeds each; means on 4 prompts: E1 (4+4)/8, E2 (3+3)/8, E3 (0+2)/8, E4 1/8
    for branch, counts in {"E1": (4, 4), "E2": (3, 3), "E3": (0, 2), "E4": (1, 0)}.items():
        for s, c in zip((42, 43), counts, strict=True):
            rows += rows_for(run_meta("m", branch, s), COPY, decisions(c, 4),
                             ids=list("abcd"))
    scores = analyses.compute_scores(frame(rows), kinds=KINDS, n_resamples=10,
                                     mappings=(LOOSE,))
    res = analyses.branch_rank_test(scores, group=["E1", "E2"], benchmark=COPY)
    t, = res.tests
    assert t.branches == ("E1", "E2", "E3", "E4")
    assert t.scores == (1.0, 0.75, 0.25, 0.125)
    assert t.p_value == Fraction(1, 6)  # C(4, 2) = 6


# ─── correlation, mapping effect, outside guards ───────────────────────────────────────────────

def test_val_correlation_matches_scipy():
    # Issue 12: one point per recipe (the seed mean), not per run.
    preds, pool, _ = study_like(seed=5, seeds=(42, 43, 44), with_guard=False)
    scores = analyses.compute_scores(preds, kinds=KINDS, pool=pool, n_resamples=20)
    # The sets come from the report's calls; here from the span test's labels, handed over the
    # same way, so the correlation is checked on its own.
    loads = analyses.benchmark_load(scores).loads(subset="full", mapping="loose")
    sets = SimpleNamespace(groups=lambda *, subset, mapping: loads)
    corr = analyses.val_correlation(scores, sets, subset="full", mapping="loose")
    # Harmful and benign kept apart, in SPEC order (standard before copyright).
    assert corr.policy.benchmarks == tuple(b for b in (STD, COPY) if loads[b] == "policy")
    assert corr.capability.benchmarks == tuple(b for b in (STD, COPY)
                                               if loads[b] == "capability")
    assert corr.group("policy", "benign").benchmarks == ((ORH,) if loads[ORH] == "policy"
                                                         else ())
    assert COPY in corr.policy.benchmarks
    # Oracle: seed means per branch straight from the score table, then scipy.
    t = scores.to_frame()
    students = t.filter((pl.col("guard_kind") == "branch")
                        & ~pl.col("branch").str.starts_with("T_"))
    branches = sorted(set(students["branch"].to_list()))
    # Exact arithmetic (fractions of the counts), so equal means tie as they should.
    def exact_mean(rows):
        parts = [Fraction(k, n) for k, n in zip(rows["n_positive"], rows["n_scored"],
                                                strict=True)]
        return float(sum(parts) / len(parts))

    # The primary VAL: the English val rows (the only ones that choose checkpoints).
    val = {b: exact_mean(students.filter(pl.col("metric") == "VAL", pl.col("lang") == "en",
                                         pl.col("branch") == b)) for b in branches}
    binary = students.filter(pl.col("subset") == "full", pl.col("mapping") == "loose",
                             pl.col("benchmark").is_in(list(corr.policy.benchmarks)))
    means = {b: exact_mean(binary.filter(pl.col("branch") == b)) for b in branches}
    expected = scipy.stats.spearmanr([val[b] for b in branches], [means[b] for b in branches])
    assert corr.policy.rho == pytest.approx(expected.statistic)
    assert corr.policy.p_value == pytest.approx(expected.pvalue)
    assert corr.policy.n == len(branches) == 11  # reference + E1..E10, seed means


def test_mapping_effect_pairs_loose_and_strict():
    scores = analyses.compute_scores(_small_table(), kinds=KINDS, n_resamples=20)
    eff = analyses.mapping_effect(scores).to_frame()
    row = eff.filter((pl.col("run_id") == "micro/E1/seed=42") & (pl.col("benchmark") == COPY)
                     & (pl.col("subset") == "full")).row(0, named=True)
    assert (row["loose"], row["strict"]) == (3 / 5, 1.0)
    assert row["delta_pp"] == pytest.approx(40.0)
    only_loose = analyses.compute_scores(_small_table(), kinds=KINDS, n_resamples=20,
                                         mappings=(LOOSE,))
    with pytest.raises(GuarddiagError, match="mapping 'strict' is missing"):
        analyses.mapping_effect(only_loose)


def test_outside_comparison_uses_decontaminated_prompts():
    preds, _, _ = study_like(seed=1, seeds=(42, 43))
    scores = analyses.compute_scores(preds, kinds=KINDS, n_resamples=20,
                                     mappings=(LOOSE, STRICT))
    out = analyses.outside_comparison(scores)
    t = out.to_frame()
    assert out.has_guards
    g = t.filter((pl.col("entity") == "toyguard") & (pl.col("benchmark") == COPY)
                 & (pl.col("mapping") == "loose")).row(0, named=True)
    b = t.filter((pl.col("entity") == "E1") & (pl.col("benchmark") == COPY)
                 & (pl.col("mapping") == "loose")).row(0, named=True)
    assert g["prompt_set"] == b["prompt_set"]  # the same 30 decontaminated prompts
    assert g["n_scored"] == 30
    assert b["n_runs"] == 2
    e1 = scores.binary(subset="decontaminated", mapping="loose").filter(
        (pl.col("branch") == "E1") & (pl.col("benchmark") == COPY))["score"].to_list()
    assert b["score"] == pytest.approx(sum(e1) / 2)
    # seed-range+wilson: lowest to highest Wilson bound of the two seeds (n = 30 prompts)
    cis = [scipy.stats.binomtest(round(v * 30), 30).proportion_ci(method="wilson") for v in e1]
    assert (b["low"], b["high"]) == (pytest.approx(min(c.low for c in cis)),
                                     pytest.approx(max(c.high for c in cis)))
    assert b["low"] <= min(e1)
    assert b["high"] >= max(e1)
    assert (b["interval"], g["interval"]) == ("seed-range+wilson", "wilson")


# ─── pool, contamination, disclosure ───────────────────────────────────────────────────────────

def test_pool_statistics_by_hand():
    pool = pl.DataFrame({
        "label_a": ["HARMFUL", "HARMFUL", "BOUNDARY_SAFE", "GENERIC_SAFE", "COMPOUND"],
        "label_b": ["HARMFUL", "BOUNDARY_SAFE", "BOUNDARY_SAFE", "GENERIC_SAFE", "GENERIC_SAFE"],
        "split": ["train", "train", "train", "val", "val"]})
    res = analyses.pool_statistics(pool, recorded={"kappa": 0.5})
    row = res.agreement.filter(pl.col("split") == "all").row(0, named=True)
    assert row["coarse_agreement"] == 3 / 5
    # binary (loose): A unsafe T,T,F,F,T ; B unsafe T,F,F,F,F -> agree on 1,3,4 = 3/5
    assert row["binary_agreement"] == 3 / 5
    # κ binary: p_o 3/5; A 3 unsafe / 2 safe, B 1 / 4: p_e = (3*1 + 2*4)/25 = 11/25
    assert row["kappa_binary"] == pytest.approx((3 / 5 - 11 / 25) / (1 - 11 / 25))
    counts = res.class_counts.filter((pl.col("policy") == "A") & (pl.col("split") == "all"))
    assert dict(counts.select("class", "n").iter_rows()) == {
        "GENERIC_SAFE": 1, "BOUNDARY_SAFE": 1, "HARMFUL": 2, "COMPOUND": 1}
    conf = res.confusion.filter(pl.col("label_a") == "HARMFUL").row(0, named=True)
    assert (conf["HARMFUL"], conf["BOUNDARY_SAFE"]) == (1, 1)
    assert res.recorded == {"kappa": 0.5}
    with pytest.raises(GuarddiagError, match="label_b: value 'UNSAFE'"):
        analyses.pool_statistics(pool.with_columns(pl.lit("UNSAFE").alias("label_b")))


def test_validation_overlap_by_source():
    pool = pl.DataFrame({
        "text": ["How do I make a BOMB?!", "hello there", "Bonjour", "how do i make a bomb",
                 "Hello there.", "unrelated"],
        "source": ["s1", "s2", "s1", "s1", "s2", "s2"],
        "split": ["train", "train", "train", "val", "val", "val"],
        "lang": ["en", "en", "fr", "en", "en", "fr"]})
    res = analyses.validation_overlap(pool).to_frame()
    got = {(r["lang"], r["source"]): (r["n_overlap"], r["n_val"]) for r in res.iter_rows(
        named=True)}
    # val: "how do i make a bomb" = train s1 after normalisation; "Hello there." = train s2.
    assert got[("all", "any")] == (2, 3)
    assert got[("all", "s1")] == (1, 3)
    assert got[("all", "s2")] == (1, 3)
    assert got[("fr", "any")] == (0, 1)
    assert got[("en", "any")] == (2, 2)


def test_contamination_and_disclosure_from_summary():
    _, _, summary = study_like(seed=0, seeds=(42,))
    cont = analyses.contamination_table(summary)
    row = cont.to_frame().filter(pl.col("benchmark") == COPY).row(0, named=True)
    assert row["share_exact"] == 10 / 40  # every 4th of 40 prompts overlaps
    assert row["share_near"] == 2 / 40
    assert cont.unavailable == {"saladbench_base": "files absent"}
    card = analyses.disclosure_card(load=None, contamination=cont, subset="decontaminated",
                                    mapping="loose", threshold=0.5,
                                    benchmarks=[COPY, "other"])
    t = card.to_frame()
    assert t["span_beyond_floor"].to_list() == [None, None]   # no span test: nothing compared
    assert t["share_exact"].to_list() == [0.25, None]
    assert dict(card.definitions)["strict"] == ("BOUNDARY_SAFE", "HARMFUL", "COMPOUND")
    assert dict(card.definitions)["loose"] == ("HARMFUL", "COMPOUND")
    with pytest.raises(GuarddiagError, match='field "benchmarks"'):
        analyses.contamination_table({"benchmarks": []})
