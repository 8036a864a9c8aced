"""Calibration of the policy/capability call, by simulation through the real load code.

Branches that differ only by seed noise must be called "policy" at most 7 % of the time at a
nominal 5 %; with the A-last group shifted by 3 seed SDs, "policy" at least 80 % of the time.
Score tables are built at the level :func:`guarddiag.analyses.benchmark_load` consumes (a
:class:`~guarddiag.analyses.ScoresResult`, one row per run and benchmark) and go through
benchmark_load → :func:`guarddiag.analyses.loadtest.run_load_tests` unchanged.

Layouts:

- demo: one size; reference and E1–E10 at seed 42, reference, E1 and E10 also at 43 and 44
  (17 runs; 3 seed triplets, df = 6).
- study_issue: the reading behind the issue's figures (ten single-seed branches at two sizes;
  37 triplets outside the span, df = 74); see :func:`study_issue_layout`.
- study: SPEC §6 counts 37 seed triplets (111 runs) over the study's branches, two model sizes
  per study. Ten branches at two sizes give at most 20 triplets, so the 37 are read as two
  studies × two sizes = 4 size cells × E1–E10 = 40 recipes, 37 of them trained as triplets
  (111 runs) and 3 absent (df = 74). The A-last group (E1, E7, E8, E10) is present in every
  cell.

Scores are the run's recipe mean plus N(0, σ²) seed noise (σ = 0.03 around 0.5, so no rate
leaves [0, 1]). Benchmarks come in families of 15 (one BH family = one (subset, mapping), as
the study's 15 subsets), 1,005 benchmarks per layout and condition.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from guarddiag import analyses
from guarddiag.analyses import loadtest
from guarddiag.analyses.scores import SCORE_SCHEMA, ScoresResult
from guarddiag.protocol import protocol

SIGMA = 0.03
FAMILY = 15
N_BENCH = 1005
A_LAST = ("E1", "E7", "E8", "E10")
E_BRANCHES = tuple(f"E{i}" for i in range(1, 11))


def demo_layout() -> list[tuple[str, str, int]]:
    """(size, branch, seed) of every run."""
    runs = [("micro", b, 42) for b in ("reference", *E_BRANCHES)]
    runs += [("micro", b, s) for s in (43, 44) for b in ("reference", "E1", "E10")]
    return runs


STUDY_ABSENT = {("s3", "E9"), ("s4", "E2"), ("s4", "E9")}


def study_layout() -> list[tuple[str, str, int]]:
    return [(size, b, s) for size in ("s1", "s2", "s3", "s4") for b in E_BRANCHES
            if (size, b) not in STUDY_ABSENT for s in (42, 43, 44)]


def test_layouts_match_the_issue():
    demo = demo_layout()
    assert len(demo) == 17
    study = study_layout()
    assert len(study) == 111                      # 37 triplets
    assert len({(s, b) for s, b, _ in study}) == 37


def scores_table(layout: list[tuple[str, str, int]], n_bench: int, *, shift: float,
                 rng: np.random.Generator, n_prompts: int = 200) -> ScoresResult:
    """One CAP score per run and benchmark: benchmark mean + (shift·σ for A-last) + noise."""
    n_runs = len(layout)
    base = rng.uniform(0.4, 0.6, size=(n_bench, 1))
    a_last = np.array([b in A_LAST for _, b, _ in layout])
    score = base + SIGMA * rng.standard_normal((n_bench, n_runs)) + shift * SIGMA * a_last
    size, branch, seed = zip(*layout, strict=True)
    bench = np.repeat(np.arange(n_bench), n_runs)
    df = pl.DataFrame({
        "run_id": [f"{s}/{b}/seed={d}" for s, b, d in layout] * n_bench,
        "guard_kind": "branch", "branch": list(branch) * n_bench, "size": list(size) * n_bench,
        "seed": list(seed) * n_bench, "label_policy": "B",
        # Roles: every run a student; the A-last group is read from last_policy.
        "role": "student", "route": "hard_labels",
        "last_policy": [("A" if b in A_LAST else "B") for b in branch] * n_bench,
        "benchmark": [f"b{i:04d}" for i in bench], "metric": "CAP",
        "metric_alias": "CAP", "subset": [f"family{i // FAMILY:03d}" for i in bench],
        "mapping": "loose", "n_scored": n_prompts, "score": score.ravel()})
    df = df.with_columns(pl.lit(None).cast(t).alias(c) for c, t in SCORE_SCHEMA.items()
                         if c not in df.columns).select(list(SCORE_SCHEMA)).cast(SCORE_SCHEMA)
    return ScoresResult(table=df, mappings=("loose",), threshold=0.5, n_resamples=0,
                        confidence=0.95, seed=0)


def call_rates(layout, *, shift: float, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    load = analyses.benchmark_load(scores_table(layout, N_BENCH, shift=shift, rng=rng))
    t = load.table
    assert t.height == N_BENCH
    return {
        "new": float((t["load"] == "policy").mean()),
        "study": float((t["load_study"] == "policy").mean()),
        "span_and_contrast": float(((t["q_span"] < 0.05) & (t["q_contrast"] < 0.05)).mean()),
        "raw_contrast": float((t["p_contrast"] < 0.05).mean()),
        "raw_span": float((t["p_span"] < 0.05).mean()),
    }


def study_issue_layout() -> list[tuple[str, str, int]]:
    """The layout behind the issue's "about 1 time in 5" for the study's rule: the span over
    ten single-seed branches (E1–E10, seed 42) at two sizes, the floor and the noise from 37
    seed triplets that do not enter the span (each recipe alone at its own cell: sizes with
    fewer than two branches do not enter Δb)."""
    span = [(size, b, 42) for size in ("s1", "s2") for b in E_BRANCHES]
    floor = [(f"t{i:02d}", E_BRANCHES[i % 10], s) for i in range(37) for s in (42, 43, 44)]
    return span + floor


LAYOUTS = {"demo": demo_layout, "study": study_layout, "study_issue": study_issue_layout}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_policy_call_is_calibrated_under_seed_noise(name):
    rates = call_rates(LAYOUTS[name](), shift=0.0, seed=20261203)
    print(f"{name} null: {rates}")
    assert rates["new"] <= 0.07
    # The span test alone holds its level too (Monte-Carlo null at the layout's own n_am).
    assert rates["raw_span"] <= 0.07
    assert rates["raw_contrast"] <= 0.07


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_policy_call_finds_a_three_sd_a_last_shift(name):
    rates = call_rates(LAYOUTS[name](), shift=3.0, seed=20261204)
    print(f"{name} shift 3 SD: {rates}")
    assert rates["new"] >= 0.80


def test_old_rule_is_not_calibrated_with_the_demo_layout():
    # The reason for the new test: the study's rule calls "policy" far above 5 % under noise.
    assert call_rates(demo_layout(), shift=0.0, seed=7)["study"] > 0.3


def test_span_null_matches_the_studentized_range_where_it_is_exact():
    # One size, equal n: T = range / s follows scipy's studentized range (k, df).
    import scipy.stats

    null = analyses.loadtest.SpanNulls(seed=1, n_draws=100_000).get(((1,) * 6,), 12)
    for q in (0.5, 0.9, 0.95):
        assert np.quantile(null, q) == pytest.approx(
            scipy.stats.studentized_range.ppf(q, 6, 12), rel=0.02)


# ─── bad input gets a stated call, never an exception ─────────────────────────────────────────

def _one(layout, values, *, n_prompts: int = 200) -> dict:
    rng = np.random.default_rng(0)
    s = scores_table(layout, 1, shift=0.0, rng=rng, n_prompts=n_prompts)
    if values is not None:
        s = ScoresResult(table=s.table.with_columns(pl.Series("score", values, pl.Float64)),
                         mappings=s.mappings, threshold=0.5, n_resamples=0, confidence=0.95,
                         seed=0)
    return analyses.benchmark_load(s).table.row(0, named=True)


def test_single_seed_group_is_undetermined():
    layout = [r for r in demo_layout() if r[2] == 42 or r[1] == "E1"]
    row = _one(layout, None)
    assert (row["n_groups"], row["load"]) == (1, "undetermined")
    assert row["load_reason"] == "1 seed group(s); the test needs 2"


def test_all_zero_scores_are_uninformative():
    row = _one(demo_layout(), [0.0] * 17)
    assert (row["delta"], row["floor_widest"]) == (0.0, 0.0)
    assert row["load"] == "uninformative"
    assert row["load_study"] == "capability"          # the study's rule: 0 > 0 is false
    assert row["p_span"] is None
    assert row["q_contrast"] is None


def test_too_few_prompts_is_undetermined():
    row = _one(demo_layout(), None, n_prompts=protocol().min_prompts - 1)
    assert row["load"] == "undetermined"
    assert row["load_reason"] == f"19 prompts; the test needs {protocol().min_prompts}"
    assert _one(demo_layout(), None, n_prompts=protocol().min_prompts)["load_reason"] is None


def test_identical_seeds_with_a_span_and_no_contrast_is_route_sensitive():
    # Every seed agrees (s = 0); E7 alone (A-last) sits apart, the other A-last branches with
    # the B-last ones: the span beats the noise, but the A-last mean minus the B-last mean is
    # (0.9 + 3 × 0.5)/4 − 0.5 = 0.1 > 0 with se = 0 → policy. Move E8 down to balance it:
    # A-last (0.9 + 0.1 + 0.5 + 0.5)/4 = 0.5 = B-last mean → contrast 0 → route-sensitive.
    layout = demo_layout()
    values = [0.9 if b == "E7" else 0.1 if b == "E8" else 0.5 for _, b, _ in layout]
    row = _one(layout, values)
    assert row["seed_sd"] == 0.0
    assert row["contrast"] == pytest.approx(0.0, abs=1e-12)
    assert row["load"] == "route-sensitive"


def test_contrast_by_hand():
    # demo layout, one size: A-last = E1 (3 seeds), E7, E8 (1), E10 (3); B-last = reference (3)
    # and E2–E6, E9 (1). Var(D)/σ² = (1/3 + 1 + 1 + 1/3)/16 + (1/3 + 6)/49.
    means = [loadtest.BranchMean("m", b, 0.0, 3 if b in ("reference", "E1", "E10") else 1)
             for b in ("reference", *E_BRANCHES)]
    d, var = loadtest.policy_contrast(means, A_LAST)
    assert d == 0.0
    assert var == pytest.approx((2 / 3 + 2) / 16 + (1 / 3 + 6) / 49)


def test_contrast_and_seed_sd_match_an_independent_t_test():
    # Through predictions → compute_scores → benchmark_load on the study-shaped fixture
    # (reference + E1..E10, three seeds each, one size), against numpy/scipy by hand.
    import scipy.stats
    from synthetic_runs import KINDS, STD, study_like

    preds, _, _ = study_like(seed=5)
    scores = analyses.compute_scores(preds, kinds=KINDS, n_resamples=20)
    row = analyses.benchmark_load(scores).table.filter(
        (pl.col("benchmark") == STD) & (pl.col("subset") == "decontaminated")
        & (pl.col("mapping") == "loose")).row(0, named=True)
    runs = scores.binary(subset="decontaminated", mapping="loose").filter(
        (pl.col("benchmark") == STD) & (pl.col("guard_kind") == "branch")
        & ~pl.col("branch").str.starts_with("T_"))
    by_branch = {b: np.array(runs.filter(pl.col("branch") == b)["score"].to_list())
                 for b in sorted(set(runs["branch"].to_list()))}
    assert len(by_branch) == 11
    ss = sum(((x - x.mean()) ** 2).sum() for x in by_branch.values())
    df = sum(len(x) - 1 for x in by_branch.values())
    sd = np.sqrt(ss / df)
    a = [x.mean() for b, x in by_branch.items() if b in A_LAST]
    b = [x.mean() for b, x in by_branch.items() if b not in A_LAST]
    d = np.mean(a) - np.mean(b)
    se = sd * np.sqrt(1 / (3 * 4) + 1 / (3 * 7))   # means of 4 and 7 three-seed means
    assert (row["df"], row["seed_sd"]) == (22, pytest.approx(sd))
    assert row["contrast"] == pytest.approx(d)
    assert row["p_contrast"] == pytest.approx(2 * scipy.stats.t.sf(abs(d) / se, 22))
    assert row["ratio_widest"] == pytest.approx(row["delta"] / row["floor_widest"])


def test_alpha_is_configurable_and_checked():
    from guarddiag.cli import build_parser
    from guarddiag.errors import GuarddiagError

    s = scores_table(demo_layout(), 15, shift=3.0, rng=np.random.default_rng(1))
    loose = analyses.benchmark_load(s)
    strict = analyses.benchmark_load(s, alpha=1e-12)
    assert loose.alpha == 0.05
    assert (loose.table["load"] == "policy").sum() > 10
    assert set(strict.table["load"].to_list()) <= {"route-sensitive", "capability"}
    # the q-values do not depend on the level, only the calls do
    assert strict.table["q_contrast"].to_list() == loose.table["q_contrast"].to_list()
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(GuarddiagError, match="alpha"):
            analyses.benchmark_load(s, alpha=bad)
    args = build_parser().parse_args(["report", "--alpha", "0.01"])
    assert args.alpha == 0.01
    assert analyses.ReportOptions(alpha=0.01).alpha == 0.01


def test_a_single_run_or_no_student_run_never_raises():
    s = scores_table(demo_layout(), 2, shift=0.0, rng=np.random.default_rng(0))

    def only(expr) -> ScoresResult:
        return ScoresResult(table=s.table.filter(expr), mappings=("loose",), threshold=0.5,
                            n_resamples=0, confidence=0.95, seed=0)

    one = analyses.benchmark_load(only(pl.col("run_id") == "micro/E1/seed=42")).table
    assert one["load"].to_list() == ["undetermined", "undetermined"]
    assert one["load_reason"].to_list() == ["0 seed group(s); the test needs 2"] * 2
    assert analyses.benchmark_load(only(pl.col("branch") == "none")).table.height == 0
