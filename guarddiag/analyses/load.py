"""Label-supervision span Δb, seed floor Φb, and which benchmarks measure policy.

SPEC §6, exactly:

- **Δb** = (1/|M|) Σ_{m∈M} [max_a s_b(a, m) − min_a s_b(a, m)], a over the branches, m over the
  model sizes. s_b(a, m) is branch a's score on benchmark b at size m; when a branch has several
  seeds at a size, s_b(a, m) is their mean (so seed noise does not inflate the span). Sizes with
  fewer than two branches do not enter the mean.
- **Φb** (seed floor): for every *seed group* — one recipe (size, branch) trained with at least
  ``min_seeds`` seeds (default 3: the study's triplets 42/43/44) — the range max − min of s_b over
  its seeds. Over all groups: the **median** and the **widest** range.
- The study's rule (column ``load_study``): **policy** where Δb exceeds its widest floor (strictly:
  a saturated benchmark with Δb = Φb = 0 is not policy-load), **capability** where it does not,
  **undetermined** where no seed group (or no span) exists. Kept for comparison with the paper:
  it is not calibrated (under pure seed noise it calls policy about 2 times in 3 with the demo's
  layout).
- The call (column ``load``) is the calibrated test of :mod:`guarddiag.analyses.loadtest`: Δb
  against its seed-noise null, the A-last vs B-last policy contrast, BH q-values; ``policy``,
  ``route-sensitive``, ``capability``, ``uninformative`` or ``undetermined``.

The branches a ranges over are the student branches, read from the runs' roles
(:func:`guarddiag.roles.is_student`: the reference recipe and the study's branches; teachers and
controls left out) — the study's copyright span of 0.99 runs from the reference (policy B) to
the A-last branches. Seed groups come from the same runs. Everything is computed per
(benchmark, subset, mapping) cohort.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from guarddiag.analyses import loadtest
from guarddiag.analyses.defaults import DEFAULT_MIN_SEEDS
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import ScoresResult
from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.labels import branch_order
from guarddiag.protocol import protocol
from guarddiag.roles import check_roles, is_a_last, is_student, names_where

LOADS = loadtest.CALLS
STUDY_LOADS = ("policy", "capability", "undetermined")
_COHORT = ["benchmark", "metric", "metric_alias", "subset", "mapping"]


def student_runs(table: pl.DataFrame, *, branches: Sequence[str] | None = None) -> pl.DataFrame:
    """Score rows of student branch runs by role (:func:`guarddiag.roles.is_student`; teachers,
    controls, baselines and guards left out); ``branches`` restricts them to the named
    branches (unknown names are an error)."""
    check_roles(table, source="scores")
    rows = table.filter(is_student())
    if branches is not None:
        known = sorted(set(rows["branch"].to_list()))
        for b in branches:
            if b not in known:
                raise unknown_name("branch", b, known, "the scored student branches")
        rows = rows.filter(pl.col("branch").is_in(list(branches)))
    return rows


@dataclass(frozen=True)
class BenchmarkLoadResult:
    """Δb beside Φb per benchmark cohort, the study's call and the calibrated call."""

    table: pl.DataFrame = field(repr=False)
    """One row per (benchmark, subset, mapping): delta, floor_median, floor_widest,
    widest_group, n_groups, n_sizes, n_branches, load_study (Δb > widest floor), ratio_widest
    (Δb / widest floor), n_prompts, seed_sd, df, p_span, q_span, contrast (A-last − B-last),
    contrast_se, p_contrast, q_contrast, load (the calibrated call) and load_reason."""
    by_size: pl.DataFrame = field(repr=False)
    """Span per size: the max and min branch and their scores."""
    groups: pl.DataFrame = field(repr=False)
    """One row per seed group and cohort: size, branch, seeds, n_seeds, low, high, range."""
    min_seeds: int
    alpha: float = field(default_factory=lambda: protocol().alpha)
    a_last: tuple[str, ...] = ()
    """The A-last branches of the contrast (read from the runs' roles unless named)."""
    n_draws: int = loadtest.NULL_DRAWS

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def loads(self, *, subset: str, mapping: str, column: str = "load") -> dict[str, str]:
        """Benchmark → call for one cohort (``column="load_study"``: the study's rule)."""
        part = self.table.filter((pl.col("subset") == subset) & (pl.col("mapping") == mapping))
        return dict(zip(part["benchmark"].to_list(), part[column].to_list(), strict=True))


_SIZE_SCHEMA = {**{c: pl.String() for c in [*_COHORT, "size"]}, "n_branches": pl.Int64(),
                "max_branch": pl.String(), "max_score": pl.Float64(),
                "min_branch": pl.String(), "min_score": pl.Float64(), "range": pl.Float64()}
_GROUP_SCHEMA = {**{c: pl.String() for c in [*_COHORT, "size", "branch", "seeds"]},
                 "n_seeds": pl.Int64(), "low": pl.Float64(), "high": pl.Float64(),
                 "range": pl.Float64()}
_TABLE_SCHEMA = {**{c: pl.String() for c in _COHORT}, "delta": pl.Float64(),
                 "n_sizes": pl.Int64(), "n_branches": pl.Int64(), "floor_median": pl.Float64(),
                 "floor_widest": pl.Float64(), "widest_group": pl.String(),
                 "n_groups": pl.Int64(), "load_study": pl.String(),
                 "ratio_widest": pl.Float64(), "n_prompts": pl.Int64(),
                 "seed_sd": pl.Float64(), "df": pl.Int64(), "p_span": pl.Float64(),
                 "q_span": pl.Float64(), "contrast": pl.Float64(),
                 "contrast_se": pl.Float64(), "p_contrast": pl.Float64(),
                 "q_contrast": pl.Float64(), "load": pl.String(), "load_reason": pl.String()}


def _branch_means(rows: pl.DataFrame) -> pl.DataFrame:
    """s_b(a, m) per cohort, size and branch, with the seed-group statistics."""
    # maintain_order: groups in the (sorted) score-table order, so every later float sum over
    # branches or seed groups adds in the same order whatever the input row order.
    return rows.group_by([*_COHORT, "size", "branch"], maintain_order=True).agg(
        pl.col("score").mean().alias("s"), pl.len().alias("n_seeds"),
        pl.col("seed").drop_nulls().sort().alias("seed_list"),
        pl.col("score").min().alias("low"), pl.col("score").max().alias("high"),
        ((pl.col("score") - pl.col("score").mean()) ** 2).sum().alias("ss"))


def _spans(per_branch: pl.DataFrame) -> pl.DataFrame:
    """Range per size; a tie for the highest or lowest score names the branch first in the
    specs' order (:func:`guarddiag.labels.branch_order`), then by name."""
    low = ["s", "_order", "branch"]
    high = [-pl.col("s"), pl.col("_order"), pl.col("branch")]
    return (per_branch.with_columns(
                pl.col("branch").map_elements(branch_order, return_dtype=pl.Int64).alias("_order"))
            .group_by([*_COHORT, "size"])
            .agg(pl.len().alias("n_branches"),
                 pl.col("branch").sort_by(high).first().alias("max_branch"),
                 pl.col("s").sort_by(high).first().alias("max_score"),
                 pl.col("branch").sort_by(low).first().alias("min_branch"),
                 pl.col("s").sort_by(low).first().alias("min_score"))
            .filter(pl.col("n_branches") >= 2)
            .with_columns((pl.col("max_score") - pl.col("min_score")).alias("range"))
            .select(list(_SIZE_SCHEMA)).cast(pl.Schema(_SIZE_SCHEMA)).sort([*_COHORT, "size"]))


def _seed_groups(per_branch: pl.DataFrame, min_seeds: int) -> pl.DataFrame:
    return (per_branch.filter(pl.col("seed_list").list.len() >= min_seeds)
            .with_columns(pl.col("seed_list").list.len().alias("n_seeds"),
                          pl.col("seed_list").cast(pl.List(pl.String)).list.join(",")
                          .alias("seeds"),
                          (pl.col("high") - pl.col("low")).alias("range")))


def _cohort_row(cohort: dict[str, Any], spans: pl.DataFrame | None,
                floors: pl.DataFrame | None) -> dict[str, Any]:
    delta = float(spans["range"].mean()) if spans is not None else None  # type: ignore[arg-type]
    # The widest group: ties go to the first size, then the first branch in the specs' order.
    floors = (floors.with_columns(pl.col("branch").map_elements(
        branch_order, return_dtype=pl.Int64).alias("_order"))
        .sort(["range", "size", "_order", "branch"], descending=[True, False, False, False])
        if floors is not None else None)
    ranges = sorted(floors["range"].to_list()) if floors is not None else []
    widest = max(ranges) if ranges else None
    widest_row = floors.row(0, named=True) if floors is not None else None
    if delta is None or widest is None:
        study = "undetermined"
    else:
        study = "policy" if delta > widest else "capability"
    return {**cohort, "delta": delta, "n_sizes": spans.height if spans is not None else 0,
            "n_branches": int(spans["n_branches"].max()) if spans is not None else 0,  # type: ignore[arg-type]
            "floor_median": statistics.median(ranges) if ranges else None,
            "floor_widest": widest,
            "widest_group": (f"{widest_row['size']}/{widest_row['branch']}"
                             if widest_row else None),
            "n_groups": len(ranges), "load_study": study,
            "ratio_widest": (delta / widest if delta is not None and widest else None)}


def _cohort_input(row: dict[str, Any], means: pl.DataFrame | None,
                  groups: pl.DataFrame | None, runs: pl.DataFrame) -> loadtest.CohortInput:
    scores = runs["score"]
    return loadtest.CohortInput(
        delta=row["delta"],
        means=tuple(loadtest.BranchMean(r["size"], r["branch"], r["s"], r["n_seeds"])
                    for r in (means.iter_rows(named=True) if means is not None else ())),
        group_ss=tuple((r["ss"], r["n_seeds"])
                       for r in (groups.iter_rows(named=True) if groups is not None else ())),
        n_prompts=int(runs["n_scored"].min()),  # type: ignore[arg-type]
        all_same=scores.len() >= 2 and scores.n_unique() == 1)


def benchmark_load(scores: ScoresResult, *, min_seeds: int = DEFAULT_MIN_SEEDS,
                   branches: Sequence[str] | None = None,
                   alpha: float | None = None,
                   a_last: Sequence[str] | None = None, seed: int = 0,
                   n_draws: int = loadtest.NULL_DRAWS) -> BenchmarkLoadResult:
    """Δb, Φb, the study's call and the calibrated call for every (benchmark, subset, mapping)
    cohort of ``scores``; ``seed`` keys the Monte-Carlo null of the span test. ``a_last``:
    the A-last side of the policy contrast; None = the students whose last policy signal is
    A (:func:`guarddiag.roles.is_a_last`); ``alpha`` None: the protocol's."""
    alpha = protocol().alpha if alpha is None else alpha
    if isinstance(min_seeds, bool) or not isinstance(min_seeds, int) or min_seeds < 2:
        raise GuarddiagError(f"min_seeds: expected an integer >= 2, got {min_seeds!r}")
    if not 0.0 < alpha < 1.0:
        raise GuarddiagError(f"alpha: expected a level in (0, 1), got {alpha!r}")
    rows = student_runs(scores.binary(), branches=branches).filter(pl.col("score").is_not_null())
    a_last = tuple(a_last) if a_last is not None else names_where(rows, is_a_last())
    per_branch = _branch_means(rows)
    by_size_df = _spans(per_branch)
    groups_all = _seed_groups(per_branch, min_seeds)
    groups_df = (groups_all.select(list(_GROUP_SCHEMA)).cast(pl.Schema(_GROUP_SCHEMA))
                 .sort([*_COHORT, "size", "branch"]))

    def parts(df: pl.DataFrame) -> dict[tuple[Any, ...], pl.DataFrame]:
        return df.partition_by(_COHORT, as_dict=True, maintain_order=True)

    spans, floors, means = parts(by_size_df), parts(groups_all), parts(per_branch)
    run_parts = parts(rows)
    cohorts = rows.select(_COHORT).unique().sort(_COHORT)
    out, inputs, families = [], [], []
    for cohort in cohorts.iter_rows(named=True):
        key = tuple(cohort[c] for c in _COHORT)
        row = _cohort_row(cohort, spans.get(key), floors.get(key))
        out.append(row)
        inputs.append(_cohort_input(row, means.get(key), floors.get(key), run_parts[key]))
        families.append((cohort["subset"], cohort["mapping"]))
    tests = loadtest.run_load_tests(inputs, families, a_last=a_last, alpha=alpha, seed=seed,
                                    n_draws=n_draws, min_groups=2)
    for row, test in zip(out, tests, strict=True):
        row.update({k: test[k] for k in ("n_prompts", "seed_sd", "df", "p_span", "q_span",
                                         "contrast", "contrast_se", "p_contrast",
                                         "q_contrast", "load")})
        row["load_reason"] = test["reason"]
    return BenchmarkLoadResult(table=pl.DataFrame(out, schema=_TABLE_SCHEMA),
                               by_size=by_size_df, groups=groups_df, min_seeds=min_seeds,
                               alpha=alpha, a_last=tuple(a_last), n_draws=n_draws)


def _load(ctx: AnalysisContext) -> BenchmarkLoadResult:
    o = ctx.options
    return benchmark_load(ctx[SCORES], min_seeds=o.min_seeds, alpha=o.alpha, seed=o.seed)


LOAD = register_analysis("load", _load, result=BenchmarkLoadResult, needs=(SCORES,))
