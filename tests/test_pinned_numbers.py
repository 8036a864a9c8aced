"""Numbers pinned by value, each worked out independently of the code under test (issue 18).

Every test here kills at least one mutant that the rest of the suite let through:

- the policy/capability call at the boundary Δb = Φb (a saturated benchmark is capability);
- the recipe table's seed mean and the study comparison's median seed floor, by value;
- prompts that normalise to nothing are never exact overlaps;
- HTTP 429 is retried, and scattered failures never stop an endpoint run.

The expected values are computed from the raw counts below with plain Python (no polars), or
by hand in the comments.
"""

from __future__ import annotations

import statistics

import polars as pl
import pytest
import scipy.stats
from guards_support import ScriptedServer, user_text
from synthetic_runs import COPY, ORH, STD, decisions, frame, rows_for, run_meta

from guarddiag import analyses
from guarddiag.audit import audit_frames
from guarddiag.errors import GuarddiagError
from guarddiag.guards.backends import EndpointGenerator

JBB, CTX = "jbb_harmful", "harmbench_contextual"
KINDS = {COPY: "harmful", STD: "harmful", ORH: "benign", JBB: "harmful", CTX: "harmful"}
N = 10  # prompts per benchmark
SEEDS = (42, 43, 44)

# How many of the N prompts each run flags unsafe: {(size, branch, benchmark): per seed}.
# micro has seed triplets; small has one seed (42) of reference and E1 and no jbb_harmful.
# The teacher T_A is not a student: it must never enter Δb, Φb or the study's rows.
FLAGGED: dict[tuple[str, str, str], tuple[int, ...]] = {
    ("micro", "reference", COPY): (1, 2, 3), ("micro", "E1", COPY): (8, 9, 9),
    ("micro", "E2", COPY): (5, 6, 7),
    ("micro", "reference", STD): (10, 10, 10), ("micro", "E1", STD): (10, 10, 10),
    ("micro", "E2", STD): (10, 10, 10),
    ("micro", "reference", ORH): (0, 4, 0), ("micro", "E1", ORH): (1, 1, 1),
    ("micro", "E2", ORH): (2, 3, 2),
    ("micro", "reference", JBB): (3, 3, 4), ("micro", "E1", JBB): (3, 4, 5),
    ("micro", "E2", JBB): (8, 8, 8),
    ("micro", "reference", CTX): (2, 6, 4), ("micro", "E1", CTX): (3, 3, 3),
    ("micro", "E2", CTX): (4, 4, 4),
    ("micro", "T_A", COPY): (0, 5, 10),
    ("small", "reference", COPY): (0,), ("small", "E1", COPY): (10,),
    ("small", "reference", STD): (10,), ("small", "E1", STD): (10,),
    ("small", "reference", ORH): (0,), ("small", "E1", ORH): (0,),
}


LEAN_BOUNDARY = {("micro", "E2", ORH, 43): 2}
"""Unflagged prompts that lean BOUNDARY_SAFE (0.1 + 0.45): unsafe only under the strict
mapping. E2's seed 43 on OR-H: 3 of 10 loose, 5 of 10 strict."""

GUARD = "toy"
"""An outside guard on OR-H with class probabilities: 2 of 10 prompts unsafe under the loose
mapping; three more lean BOUNDARY_SAFE (0.1 + 0.45 >= 0.5), so 5 of 10 under the strict one."""


DECONTAM = [i != 0 for i in range(N)]
"""The first prompt of every benchmark (one the runs flag, when they flag any) is in the
training pool: the decontaminated subset's scores differ from the full set's."""


def _wilson(k: int, n: int) -> tuple[float, float]:
    """Oracle: scipy's Wilson interval of k of n (95%)."""
    ci = scipy.stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return float(ci.low), float(ci.high)


def _ids(bench: str) -> list[str]:
    return [f"{bench}-{i}" for i in range(N)]


def _predictions() -> pl.DataFrame:
    rows = []
    for (size, branch, bench), counts in FLAGGED.items():
        for seed, k in zip(SEEDS, counts, strict=False):
            meta = run_meta(size, branch, seed, policy="A" if branch in ("E1", "T_A") else "B")
            lean = LEAN_BOUNDARY.get((size, branch, bench, seed), 0)
            boundary = [0.45 if k <= i < k + lean else 0.0 for i in range(N)]
            rows += rows_for(meta, bench, decisions(k, N), ids=_ids(bench), decontam=DECONTAM,
                             p_boundary=boundary)
    guard = run_meta("outside", GUARD, None, kind="outside", policy="outside")
    rows += rows_for(guard, ORH, decisions(2, N), ids=_ids(ORH), decontam=DECONTAM,
                     p_boundary=[0, 0, 0.45, 0.45, 0.45, 0, 0, 0, 0, 0])
    return frame(rows)


def _students(size: str | None = None, bench: str | None = None):
    return {k: c for k, c in FLAGGED.items() if not k[1].startswith("T_")
            and size in (None, k[0]) and bench in (None, k[2])}


@pytest.fixture(scope="module")
def scores():
    return analyses.compute_scores(_predictions(), kinds=KINDS, n_resamples=50, seed=3)


def study_call(table: pl.DataFrame) -> str:
    """The column holding SPEC §6's rule (Δb > widest floor): ``load_study`` where the load
    table also carries a calibrated call in ``load``, else ``load``."""
    return "load_study" if "load_study" in table.columns else "load"


def _expected_load(bench: str) -> dict:
    """Δb, Φb and the call from FLAGGED alone (SPEC §6, written out in plain Python)."""
    spans, ranges = [], []
    for size in ("micro", "small"):
        runs = _students(size, bench)
        means = {b: statistics.mean(k / N for k in c) for (_, b, _), c in runs.items()}
        if len(means) >= 2:
            spans.append(max(means.values()) - min(means.values()))
        ranges += [max(c) / N - min(c) / N for c in runs.values() if len(c) >= 3]
    delta = sum(spans) / len(spans)
    return {"delta": delta, "floor_widest": max(ranges), "floor_median": statistics.median(ranges),
            "load": "policy" if delta > max(ranges) else "capability"}


def test_benchmark_load_by_value(scores):
    load = analyses.benchmark_load(scores)
    table = load.to_frame().filter((pl.col("subset") == "full") & (pl.col("mapping") == "loose"))
    got = {r["benchmark"]: r for r in table.iter_rows(named=True)}
    call = study_call(table)
    assert sorted(got) == sorted(KINDS)
    for bench in KINDS:
        want = _expected_load(bench)
        for key in ("delta", "floor_widest", "floor_median"):
            assert got[bench][key] == pytest.approx(want[key], abs=1e-12), (bench, key)
        assert got[bench][call] == want["load"], bench
    # By hand: copyright spans 26/30 - 6/30 (micro) and 1 - 0 (small): Δ = (2/3 + 1)/2 = 5/6.
    assert got[COPY]["delta"] == pytest.approx(5 / 6)
    assert got[COPY]["floor_widest"] == pytest.approx(0.2)
    assert got[COPY]["widest_group"] in ("micro/reference", "micro/E2")
    assert (got[COPY]["n_sizes"], got[COPY]["n_branches"], got[COPY]["n_groups"]) == (2, 3, 3)
    assert got[JBB]["delta"] == pytest.approx(0.8 - 1 / 3)
    assert got[ORH]["delta"] == pytest.approx(2 / 30)
    assert got[ORH]["floor_widest"] == pytest.approx(0.4)
    assert {b: r[call] for b, r in got.items()} == {
        COPY: "policy", JBB: "policy", ORH: "capability", STD: "capability",
        CTX: "capability"}
    assert load.loads(subset="full", mapping="loose") == {b: r["load"] for b, r in got.items()}


def test_decontaminated_cohort_by_value(scores):
    # Copyright without prompt 0 (which every run flags): micro reference 0, 1, 2 of 9,
    # E1 7, 8, 8, E2 4, 5, 6; small reference 0, E1 9 of 9 -> Δ = ((23 - 3)/27 + 1) / 2.
    row = analyses.benchmark_load(scores).to_frame().filter(
        (pl.col("benchmark") == COPY) & (pl.col("subset") == "decontaminated")
        & (pl.col("mapping") == "loose")).row(0, named=True)
    assert row["delta"] == pytest.approx((20 / 27 + 1) / 2)
    assert row["floor_widest"] == pytest.approx(2 / 9)


def test_min_seeds_is_at_least_two(scores):
    pairs = analyses.benchmark_load(scores, min_seeds=2)
    assert pairs.min_seeds == 2
    with pytest.raises(GuarddiagError, match="min_seeds"):
        analyses.benchmark_load(scores, min_seeds=1)


def test_saturated_benchmark_is_capability_load(scores):
    # Everyone flags every harmbench_standard prompt: Δb = 0 = Φb. Δb must *exceed* the widest
    # floor to be policy-load; equality is capability-load.
    table = analyses.benchmark_load(scores).to_frame().filter(
        (pl.col("benchmark") == STD) & (pl.col("subset") == "full"))
    assert table.height == 2  # loose and strict
    for row in table.iter_rows(named=True):
        assert (row["delta"], row["floor_widest"]) == (0.0, 0.0)
        assert row[study_call(table)] == "capability"


def test_recipe_table_is_the_seed_mean_with_the_seed_range(scores):
    t = analyses.recipe_table(scores, subset="full", mapping="loose").to_frame()
    got = {(r["entity"], r["benchmark"]): r for r in t.iter_rows(named=True)}
    for (size, branch, bench), counts in FLAGGED.items():
        row = got[(f"{size}/{branch}", bench)]
        values = [k / N for k in counts]
        assert row["score"] == pytest.approx(sum(values) / len(values)), (size, branch, bench)
        assert row["n_runs"] == len(values)
        cis = [_wilson(k, N) for k in counts]
        if len(values) > 1:
            # Issue 12: the interval runs from the lowest to the highest Wilson bound of the
            # seeds (it holds the seed range, kept beside it), so three seeds at 0 of 10 do
            # not read [0, 0].
            assert (row["seed_low"], row["seed_high"]) == (pytest.approx(min(values)),
                                                           pytest.approx(max(values)))
            assert (row["low"], row["high"]) == (pytest.approx(min(c[0] for c in cis)),
                                                 pytest.approx(max(c[1] for c in cis)))
            assert row["interval"] == "seed-range+wilson"
        else:
            assert (row["low"], row["high"]) == (pytest.approx(cis[0][0]),
                                                 pytest.approx(cis[0][1]))
            assert row["interval"] == "wilson"
    assert got[("micro/reference", COPY)]["score"] == pytest.approx(0.2)  # (1 + 2 + 3) / 30
    assert got[("micro/E1", COPY)]["score"] == pytest.approx(26 / 30)


def test_study_comparison_median_seed_floor(scores):
    load = analyses.benchmark_load(scores)
    study = analyses.study_comparison(scores=scores, load=load, rank=None, correlation=None,
                                      effect=None, contamination=None, subset="full",
                                      mapping="loose")
    rows = {r["quantity"]: r for r in study.to_frame().iter_rows(named=True)}
    # The 15 student (seed group, benchmark) ranges: copyright .2 .1 .2, standard 0 0 0,
    # OR-H .4 0 .1, jbb .1 .2 0, contextual .4 0 0 -> sorted 0 x7, .1 x3, .2 x3, .4 x2 -> the
    # 8th value, .1 (the teacher's copyright range 1.0 is not a student's).
    ranges = [max(c) / N - min(c) / N for c in _students().values() if len(c) == 3]
    assert len(ranges) == 15
    median = rows["median seed floor, all benchmarks"]
    assert median["here"] == pytest.approx(statistics.median(ranges))
    assert median["here"] == pytest.approx(0.1)
    assert median["here_note"].startswith("15 ")
    assert rows["Δb HarmBench-copyright"]["here"] == pytest.approx(5 / 6)
    assert rows["widest seed floor, HarmBench-copyright"]["here"] == pytest.approx(0.2)


SUMMARY = {
    "pool_rows": 1234, "near_dup": True, "threshold": 0.8, "normalisation": "NFKC, casefold",
    "unavailable": {"saladbench_base": "files absent"},
    "benchmarks": {
        "jbb_benign": {"n": 100, "n_exact": 88, "n_near": 5, "n_kept": 7, "sha256": "ab",
                       "examples": [{"kind": "exact"}, "not a mapping"]},
        "advbench": {"n": 50, "n_exact": 1, "n_kept": 49},
        "empty_subset": {"n": 0, "n_exact": 0, "n_near": 0, "n_kept": 0},
    },
}


def test_contamination_table_by_value():
    res = analyses.contamination_table(SUMMARY)
    rows = {r["benchmark"]: r for r in res.to_frame().iter_rows(named=True)}
    # no benchmark_order: benchmark ids sorted
    assert res.to_frame()["benchmark"].to_list() == ["advbench", "empty_subset", "jbb_benign"]
    assert rows["jbb_benign"]["share_exact"] == 0.88
    assert rows["jbb_benign"]["share_near"] == 0.05
    assert rows["advbench"]["share_exact"] == 0.02
    assert rows["advbench"]["n_near"] is None
    assert rows["advbench"]["share_near"] is None         # near search not recorded
    assert rows["empty_subset"]["share_exact"] is None    # 0 prompts: no share
    assert rows["empty_subset"]["share_near"] is None
    assert res.sha256() == {"advbench": None, "empty_subset": None, "jbb_benign": "ab"}
    assert res.examples["jbb_benign"] == ({"kind": "exact"},)
    assert res.examples["advbench"] == ()
    assert (res.pool_rows, res.near_dup, res.near_threshold) == (1234, True, 0.8)
    assert res.unavailable == {"saladbench_base": "files absent"}
    ordered = analyses.contamination_table({**SUMMARY, "benchmark_order": ["jbb_benign",
                                                                          "advbench"]})
    assert ordered.to_frame()["benchmark"].to_list() == ["jbb_benign", "advbench"]


def test_study_comparison_rows_by_value(scores):
    load = analyses.benchmark_load(scores)
    study = analyses.study_comparison(
        scores=scores, load=load, rank=None, correlation=None,
        effect=analyses.mapping_effect(scores),
        contamination=analyses.contamination_table(SUMMARY), subset="full", mapping="loose")
    rows = {r["quantity"]: r for r in study.to_frame().iter_rows(named=True)}

    def here(quantity):
        return rows[quantity]["here"]

    # OR-H of the reference student: micro 0, .4, 0 and small 0 -> mean .1 over 4 runs.
    assert here("OR-H, reference student, loose mapping") == pytest.approx(0.1)
    assert rows["OR-H, reference student, loose mapping"]["here_note"] == "mean of 4 run(s)"
    assert here("OR-H, reference student, strict mapping") == pytest.approx(0.1)
    guard = rows[f"OR-H, {GUARD}, loose → strict"]
    assert guard["here"] == pytest.approx(0.5 - 0.2)
    assert guard["here_note"] == "20.0% → 50.0%"
    # E1 is the only A-last branch here: copyright .8 .9 .9 (micro) and 1.0 (small).
    assert here("COPY of the A-last branches, lowest run") == pytest.approx(0.8)
    assert rows["COPY of the A-last branches, lowest run"]["here_note"] == (
        "4 run(s)")
    assert here("OR-H of A-last branches, highest run") == pytest.approx(0.1)
    # The study's CAP group, here the clear-harm benchmarks (the competence gate's set, not a
    # call's): per recipe, the mean over those benchmarks' runs at 0.5, lowest and highest.
    from guarddiag.analyses.competence import clear_harm_benchmarks

    cap = set(clear_harm_benchmarks()) & {bench for _, _, bench in _students()}
    per_recipe = {}
    for (size, branch, bench), counts in _students().items():
        if bench in cap:
            per_recipe.setdefault((size, branch), []).extend(k / N for k in counts)
    means = [statistics.mean(v) for v in per_recipe.values()]
    low = rows["mean CAP on clear harm, lowest branch (0.5)"]
    high = rows["mean CAP on clear harm, highest branch (0.5)"]
    assert low["here_note"] == f"{len(cap)} clear-harm benchmark(s), at 0.5"
    assert cap
    assert low["here"] == pytest.approx(min(means))
    assert high["here"] == pytest.approx(max(means))
    assert here("exact overlap, jbb_benign") == pytest.approx(0.88)
    assert here("exact overlap, advbench") == pytest.approx(0.02)
    assert here("exact overlap, strongreject") is None
    assert rows["exact overlap, strongreject"]["here_note"] == "not audited here"
    # No overlap.parquet / pool meta.json given: the note says the origin cannot be told
    # (issue 12, item 7: recipe-set vs measured overlap).
    assert rows["exact overlap, jbb_benign"]["here_note"] == (
        "origin unknown (no overlap.parquet or pool meta.json)")
    assert here("rank test of the A-last group on copyright") is None
    assert here("Δb WildGuard-benign") is None
    assert not [q for q in rows if q.startswith("Spearman")]


def test_outside_comparison_by_value(scores):
    res = analyses.outside_comparison(scores, subset="full")
    assert res.has_guards
    t = res.to_frame().filter((pl.col("benchmark") == ORH) & (pl.col("mapping") == "strict"))
    # guards first, then the student branches by name and size; teachers left out
    assert list(zip(t["entity"].to_list(), t["size"].to_list(), strict=True)) == [
        (GUARD, None), ("E1", "micro"), ("E1", "small"), ("E2", "micro"),
        ("reference", "micro"), ("reference", "small")]
    g = t.row(0, named=True)
    assert (g["kind"], g["score"], g["n_runs"], g["interval"]) == ("outside", 0.5, 1,
                                                                   "wilson")
    assert (g["low"], g["high"]) == tuple(pytest.approx(x) for x in _wilson(5, 10))
    ref = t.row(4, named=True)
    assert ref["kind"] == "branch"
    assert ref["score"] == pytest.approx(4 / 30)
    # seeds flag 0, 4, 0 of 10: from Wilson(0/10)'s lower bound 0 to Wilson(4/10)'s upper one
    assert (ref["low"], ref["high"]) == (0.0, pytest.approx(_wilson(4, 10)[1]))
    assert (ref["n_runs"], ref["interval"]) == (3, "seed-range+wilson")
    no_guard = analyses.compute_scores(
        _predictions().filter(pl.col("guard_kind") != "outside"), kinds=KINDS,
        n_resamples=10, seed=3)
    assert not analyses.outside_comparison(no_guard, subset="full").has_guards


def test_disclosure_card_by_value(scores):
    load = analyses.benchmark_load(scores)
    card = analyses.disclosure_card(load=load, contamination=analyses.contamination_table(
        SUMMARY), subset="full", mapping="loose", threshold=0.5,
        benchmarks=[COPY, "advbench", ORH])
    rows = {r["benchmark"]: r for r in card.to_frame().iter_rows(named=True)}
    lt = {r["benchmark"]: r for r in load.to_frame().filter(
        (pl.col("subset") == "full") & (pl.col("mapping") == "loose")).iter_rows(named=True)}
    assert card.to_frame()["benchmark"].to_list() == [COPY, "advbench", ORH]
    assert rows[COPY]["delta"] == pytest.approx(5 / 6)
    # the study's rule as a comparison, by hand: Δb against the widest floor
    assert rows[COPY]["span_beyond_floor"] == (lt[COPY]["delta"] > lt[COPY]["floor_widest"])
    assert rows[COPY]["n"] is None                       # not audited
    assert rows["advbench"]["n"] == 50
    assert rows["advbench"]["share_exact"] == pytest.approx(0.02)
    assert rows["advbench"]["span_beyond_floor"] is None    # not scored
    assert rows[ORH]["span_beyond_floor"] == (lt[ORH]["delta"] > lt[ORH]["floor_widest"])
    assert rows[ORH]["floor_widest"] == pytest.approx(0.4)
    assert (card.subset, card.mapping, card.threshold) == ("full", "loose", 0.5)
    # The decontaminated cohort: copyright without its first prompt (flagged by every run).
    deco = analyses.disclosure_card(load=load, contamination=None, subset="decontaminated",
                                    mapping="loose", threshold=0.5, benchmarks=[COPY])
    want = load.to_frame().filter((pl.col("benchmark") == COPY)
                                  & (pl.col("subset") == "decontaminated")
                                  & (pl.col("mapping") == "loose")).row(0, named=True)
    got = deco.to_frame().row(0, named=True)
    assert got["delta"] == pytest.approx(want["delta"])
    assert got["delta"] != pytest.approx(5 / 6)
    bare = analyses.disclosure_card(load=None, contamination=None, subset="full",
                                    mapping="loose", threshold=0.5, benchmarks=[COPY])
    row = bare.to_frame().row(0, named=True)
    assert (row["span_beyond_floor"], row["delta"], row["n"]) == (None, None, None)


def test_recipe_table_row_order_and_entities():
    rows = []
    for size, branch, kind in [("tiny", "T_A", "branch"), ("micro", "zeta", "branch"),
                               ("micro", "E10", "branch"), ("micro", "E2", "branch"),
                               ("micro", "Ex", "branch"), ("micro", "reference", "branch"),
                               ("micro", "tfidf", "baseline"), ("outside", "g", "outside")]:
        meta = run_meta(size, branch, None if kind == "outside" else 42, kind=kind)
        rows += rows_for(meta, COPY, decisions(1, 4), ids=_ids(COPY)[:4],
                         classes=kind != "outside")
    scores_ = analyses.compute_scores(frame(rows), kinds=KINDS, n_resamples=10, seed=0)
    t = analyses.recipe_table(scores_, subset="full", mapping="loose").to_frame()
    # branches (reference, E2, E10 by number, other names, then teachers), baselines, guards
    assert t["entity"].to_list() == ["micro/reference", "micro/E2", "micro/E10", "micro/Ex",
                                     "micro/zeta", "tiny/T_A", "micro/tfidf", "g"]
    assert t["interval"].to_list() == ["wilson"] * 8
    assert t["score"].to_list() == [0.25] * 8


def test_mapping_effect_by_recipe_is_the_seed_mean(scores):
    effect = analyses.mapping_effect(scores)
    t = analyses.mapping_effect_by_recipe(effect, subset="full")
    ref = t.filter((pl.col("entity") == "micro/reference") & (pl.col("benchmark") == ORH))
    assert ref.height == 1
    assert ref["loose"][0] == pytest.approx(4 / 30)
    assert ref["n_runs"][0] == 3
    g = t.filter(pl.col("entity") == GUARD).row(0, named=True)
    assert (g["loose"], g["strict"], g["delta_pp"]) == (pytest.approx(0.2), pytest.approx(0.5),
                                                        pytest.approx(30.0))
    e2 = t.filter((pl.col("entity") == "micro/E2") & (pl.col("benchmark") == ORH))
    # seeds 42 and 44: strict = loose; seed 43: +20 pp -> mean 20/3 pp
    assert e2["delta_pp"][0] == pytest.approx(20 / 3)
    assert e2["strict"][0] == pytest.approx((2 + 5 + 2) / 30)
    orh = t.filter(pl.col("benchmark") == ORH)["entity"].to_list()
    # per benchmark: branches (size, then reading order), then guards
    assert orh == ["micro/reference", "micro/E1", "micro/E2", "small/reference", "small/E1",
                   GUARD]


# ─── audit ─────────────────────────────────────────────────────────────────────────────────────

def test_prompts_that_normalise_to_nothing_never_overlap():
    # Emoji, punctuation and Morse-like dashes all normalise to the empty string; two empty
    # normal forms are not an overlap. Only "Hello, World!" / "hello world" is exact.
    pool_ids = ["p-emoji", "p-punct", "p-morse", "p-hello"]
    pool_texts = ["🙂🙂", "!!!", "-- .. ...", "hello world"]
    bench = pl.DataFrame({"prompt_id": ["b1", "b2", "b3", "b4", "b5"],
                          "text": ["😀", "...", "·−·−", "Hello, World!", "something else"]})
    result = audit_frames(pool_ids, pool_texts, {"toy": bench})
    (overlap,) = result.benchmarks
    assert (overlap.n, overlap.n_exact) == (5, 1)
    pairs = result.overlap.select("prompt_id", "pool_id", "kind").rows()
    assert pairs == [("b4", "p-hello", "exact")]
    assert list(result.decontaminated["toy"]) == ["b1", "b2", "b3", "b5"]


def test_near_duplicates_of_one_word_prompts():
    # "hello hello" and "Hello" have different normal forms but the same word set {hello}:
    # a near duplicate with similarity 1.0 (not exact). "cats dogs birds fish mice" vs
    # "cats dogs birds fish" share 4 of 5 words: Jaccard 0.8, exactly the threshold.
    bench = pl.DataFrame({"prompt_id": ["b1", "b2", "b3"],
                          "text": ["Hello", "cats dogs birds fish", "unrelated words here"]})
    result = audit_frames(["p1", "p2"], ["hello hello", "cats dogs birds fish mice"],
                          {"toy": bench}, near_dup=True, threshold=0.8, short_words=0)
    (overlap,) = result.benchmarks
    assert (overlap.n_exact, overlap.n_near) == (0, 2)
    # With the default short-prompt rule both prompts are short (1 and 4 words) and need 0.9:
    # {hello} keeps its 1.0, the 0.8 pair goes.
    default = audit_frames(["p1", "p2"], ["hello hello", "cats dogs birds fish mice"],
                           {"toy": bench}, near_dup=True)
    assert (default.benchmarks[0].n_exact, default.benchmarks[0].n_near) == (0, 1)
    pairs = result.overlap.select("prompt_id", "pool_id", "kind", "similarity").rows()
    assert pairs == [("b1", "p1", "near", 1.0), ("b2", "p2", "near", 0.8)]


# ─── endpoint back end ─────────────────────────────────────────────────────────────────────────

def _conv(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("code", [408, 409, 425, 429, 500, 503])
def test_retryable_status_is_retried(code):
    with ScriptedServer(lambda body, n: ("status", code) if n == 0 else "ok") as server:
        gen = EndpointGenerator(server.base_url, "m", retries=2, backoff_s=0.0, concurrency=1)
        out = gen.generate([_conv("x")], max_new_tokens=1)
    assert out[0].text == "ok"
    assert len(server.requests) == 2
    assert gen.stats.retries == 1


@pytest.mark.parametrize("code", [400, 401, 404, 422])
def test_client_error_is_not_retried(code):
    with ScriptedServer(lambda body, n: ("status", code) if n == 0 else "ok") as server:
        gen = EndpointGenerator(server.base_url, "m", retries=2, backoff_s=0.0, concurrency=1)
        out = gen.generate([_conv("x")], max_new_tokens=1)
    assert out[0].text is None
    assert f"HTTP {code}" in (out[0].error or "")
    assert len(server.requests) == 1


def test_scattered_failures_do_not_stop_a_long_run():
    # Every other prompt fails (never two in a row): 5 failures in all, more than the limit of
    # 3, but the counter resets on each success, so the run completes.
    def script(body, n):
        return ("status", 500) if int(user_text(body)) % 2 == 0 else "ok"

    with ScriptedServer(script) as server:
        gen = EndpointGenerator(server.base_url, "m", retries=0, backoff_s=0.0, concurrency=1,
                                max_consecutive_failures=3)
        out = gen.generate([_conv(str(i)) for i in range(10)], max_new_tokens=1)
    assert [g.text for g in out] == [None, "ok"] * 5
    assert gen.stats.failures == 5
    assert len(server.requests) == 10
