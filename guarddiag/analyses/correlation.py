"""Does validation accuracy predict policy-load or capability-load benchmark scores?

Spearman's ρ (``scipy.stats.spearmanr``) between the primary VAL (4-class accuracy under
policy A on the English val rows; :mod:`~guarddiag.analyses.valsets` has the other parts) and
the mean share read unsafe over a set of benchmarks (study: +0.74 on policy-load vs +0.34 on
capability-load). How the points are made:

- **One point per recipe** — a student (size, branch) — with VAL and each benchmark score
  averaged over the recipe's seeds. Seed replicates of one recipe are not independent draws of
  "a guard", so they are not separate points: n is the number of recipes.
- **Study benchmarks only** (the 15 subsets of SPEC §5): extra sets and mutated (derived)
  subsets are left out, and listed in ``excluded``.
- **Harmful and benign separately**: a mean that mixes CAP (harmful prompts flagged) with
  OVER-REF (benign prompts flagged) has no single direction, so each set is split by kind, four
  correlations in all. The sets come from the report's calls at the same cohort
  (:meth:`~guarddiag.analyses.calls.CallsResult.groups`): *policy* = the benchmarks called "A
  flags more" or "A flags less", *capability* = those called capability on every route; without
  the calls (no pool) there are no sets.
- Each ρ carries its two-sided p-value and n; ``significant`` is p < ``alpha`` (the protocol's
  α). With about ten recipes only a ρ beyond roughly ±0.6 reaches it, so a ρ that is not
  significant says the data cannot tell, not that there is no relation.

A recipe enters a set's correlation only when it was scored on every benchmark of the set, so
each mean is over the same benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from guarddiag import stats
from guarddiag.analyses.calls import CALLS_ANALYSIS, CallsResult
from guarddiag.analyses.load import student_runs
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import ScoresResult
from guarddiag.labels import branch_order
from guarddiag.protocol import protocol

GROUPS: tuple[tuple[str, str], ...] = (("policy", "harmful"), ("policy", "benign"),
                                       ("capability", "harmful"), ("capability", "benign"))
"""(load, kind) of the four correlations, in report order."""
_METRIC_KIND = {"CAP": "harmful", "OVER-REF": "benign"}


@dataclass(frozen=True)
class SpearmanGroup:
    """One correlation: VAL against the mean score on one (load, kind) set of benchmarks."""

    load: str
    kind: str
    benchmarks: tuple[str, ...]
    result: stats.SpearmanResult
    """ρ, two-sided p-value and n (= recipes)."""
    alpha: float

    @property
    def column(self) -> str:
        return f"{self.load}_{self.kind}"

    @property
    def significant(self) -> bool | None:
        """p < alpha; None where ρ is undefined."""
        p = self.result.p_value
        return None if p is None else p < self.alpha


@dataclass(frozen=True)
class CorrelationResult:
    table: pl.DataFrame = field(repr=False)
    """Per recipe: size, branch, n_seeds, val and the mean score on each (load, kind) set
    (columns ``policy_harmful`` …; null where the recipe misses a benchmark of the set)."""
    groups: tuple[SpearmanGroup, ...]
    excluded: tuple[str, ...]
    """Scored benchmarks left out: not among the study's 15 (extra or mutated subsets)."""
    subset: str
    mapping: str
    alpha: float = field(default_factory=lambda: protocol().alpha)

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def group(self, load: str, kind: str) -> SpearmanGroup:
        return next(g for g in self.groups if (g.load, g.kind) == (load, kind))

    # The study compared policy-load with capability-load benchmarks; its capability-load set
    # was harmful (CAP), so the harmful rows are the ones set beside its numbers.
    @property
    def policy(self) -> stats.SpearmanResult:
        return self.group("policy", "harmful").result

    @property
    def capability(self) -> stats.SpearmanResult:
        return self.group("capability", "harmful").result

    @property
    def policy_benchmarks(self) -> tuple[str, ...]:
        return self.group("policy", "harmful").benchmarks

    @property
    def capability_benchmarks(self) -> tuple[str, ...]:
        return self.group("capability", "harmful").benchmarks

    def summary_frame(self) -> pl.DataFrame:
        return pl.DataFrame({
            "load": [g.load for g in self.groups], "kind": [g.kind for g in self.groups],
            "benchmarks": [", ".join(g.benchmarks) for g in self.groups],
            "n_benchmarks": [len(g.benchmarks) for g in self.groups],
            "n_recipes": [g.result.n for g in self.groups],
            "rho": [g.result.rho for g in self.groups],
            "p_value": [g.result.p_value for g in self.groups],
            "significant": [g.significant for g in self.groups],
        }, schema={"load": pl.String, "kind": pl.String, "benchmarks": pl.String,
                   "n_benchmarks": pl.Int64, "n_recipes": pl.Int64, "rho": pl.Float64,
                   "p_value": pl.Float64, "significant": pl.Boolean})


def val_correlation(scores: ScoresResult, calls: CallsResult | None, *, subset: str,
                    mapping: str, alpha: float | None = None) -> CorrelationResult:
    """ρ(VAL, mean score) per (load, kind) set of study benchmarks, one point per recipe;
    ``alpha`` None: the protocol's α."""
    proto = protocol()
    alpha = proto.alpha if alpha is None else alpha
    study = proto.study_benchmarks
    loads = calls.groups(subset=subset, mapping=mapping) if calls is not None else {}
    binary = student_runs(scores.binary(subset=subset, mapping=mapping)).filter(
        pl.col("score").is_not_null())
    scored = sorted(set(binary["benchmark"].to_list()))
    kind_of = {r["benchmark"]: _METRIC_KIND.get(r["metric"], "") for r in
               binary.select("benchmark", "metric").unique().iter_rows(named=True)}
    sets = {(ld, kd): tuple(b for b in study if loads.get(b) == ld and kind_of.get(b) == kd)
            for ld, kd in GROUPS}
    binary = binary.filter(pl.col("benchmark").is_in(list(study)))
    # Seed means per recipe: VAL and each benchmark score.
    # Means are rounded to 12 decimals: seed means that are equal in exact arithmetic must tie
    # in the ranks whatever order the floats were added in.
    val = student_runs(scores.val()).filter(pl.col("score").is_not_null()).group_by(
        ["size", "branch"]).agg(pl.col("score").mean().round(12).alias("val"),
                                pl.len().cast(pl.Int64).alias("n_seeds"))
    per_bench = binary.group_by(["size", "branch", "benchmark"]).agg(pl.col("score").mean())
    table = val
    for (ld, kd), benches in sets.items():
        part = per_bench.filter(pl.col("benchmark").is_in(list(benches))).group_by(
            ["size", "branch"]).agg(pl.col("score").mean().round(12).alias(f"{ld}_{kd}"),
                                    pl.len().alias("_k"))
        part = part.filter(pl.col("_k") == len(benches)).drop("_k")
        table = table.join(part, on=["size", "branch"], how="left")
    table = table.with_columns(pl.col("branch").map_elements(
        branch_order, return_dtype=pl.Int64).alias("_o")).sort(["size", "_o", "branch"]).drop("_o")
    groups = []
    for (ld, kd), benches in sets.items():
        col = f"{ld}_{kd}"
        have = table.filter(pl.col(col).is_not_null()) if benches else table.clear()
        groups.append(SpearmanGroup(load=ld, kind=kd, benchmarks=benches, alpha=alpha,
                                    result=stats.spearman(have["val"].to_list(),
                                                          have[col].to_list())))
    return CorrelationResult(
        table=table, groups=tuple(groups),
        excluded=tuple(b for b in scored if b not in study), subset=subset,
        mapping=mapping, alpha=alpha)


def _correlation(ctx: AnalysisContext) -> CorrelationResult | None:
    """None where no run scored the pool's val split."""
    scores = ctx[SCORES]
    if not scores.val().height:
        return None
    return val_correlation(scores, ctx.get(CALLS_ANALYSIS), subset=ctx.options.primary_subset,
                           mapping=ctx.options.mapping)


CORRELATION = register_analysis("correlation", _correlation, result=CorrelationResult,
                                needs=(SCORES, CALLS_ANALYSIS))
