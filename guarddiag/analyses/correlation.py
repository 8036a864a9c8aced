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
from typing import Literal

import polars as pl

from guarddiag import stats
from guarddiag.analyses.calls import CALLS_ANALYSIS, CallsResult
from guarddiag.analyses.load import student_runs
from guarddiag.analyses.payload import json_key
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import ScoresResult
from guarddiag.labels import branch_order
from guarddiag.protocol import protocol

Load = Literal["policy", "capability"]
Kind = Literal["harmful", "benign"]
GROUPS: tuple[tuple[Load, Kind], ...] = (("policy", "harmful"), ("policy", "benign"),
                                       ("capability", "harmful"), ("capability", "benign"))
"""(load, kind) of the four correlations, in report order."""
_METRIC_KIND = {"CAP": "harmful", "OVER-REF": "benign"}


@dataclass(frozen=True)
class SpearmanSet:
    """VAL against the mean score on one set of benchmarks: Spearman's ρ and whether it is
    significant."""

    rho: float | None
    """None where undefined (fewer than 3 recipes or a constant input)."""
    p_value: float | None
    """Two-sided (scipy.stats.spearmanr); no interval."""
    n: int
    """Recipes (one point per (size, branch), seed means)."""
    benchmarks: tuple[str, ...]
    significant: bool | None
    """p < alpha; None where ρ is undefined."""


@dataclass(frozen=True)
class SpearmanGroup(SpearmanSet):
    """One correlation: VAL against the mean score on one (load, kind) set of benchmarks."""

    load: Literal["policy", "capability"]
    kind: Literal["harmful", "benign"]

    @property
    def column(self) -> str:
        return f"{self.load}_{self.kind}"


def spearman_group(load: Load, kind: Kind, benchmarks: tuple[str, ...], val: list[float],
                   score: list[float], *, alpha: float) -> SpearmanGroup:
    """ρ(``val``, ``score``) on the (``load``, ``kind``) set, significant where p < ``alpha``."""
    r = stats.spearman(val, score)
    return SpearmanGroup(rho=r.rho, p_value=r.p_value, n=r.n, benchmarks=benchmarks,
                         significant=None if r.p_value is None else r.p_value < alpha,
                         load=load, kind=kind)


@dataclass(frozen=True)
class CorrelationResult:
    """Spearman ρ between VAL and the share read unsafe, per (load, kind) set of study
    benchmarks, one point per recipe."""

    table: pl.DataFrame = field(repr=False, metadata=json_key("recipes"))
    """size, branch, n_seeds, val, policy_harmful, policy_benign, capability_harmful,
    capability_benign (seed means; null where the recipe misses a benchmark of the set; no
    interval)."""
    groups: tuple[SpearmanGroup, ...]
    excluded: tuple[str, ...]
    """Scored benchmarks not among the study's 15 (extra or mutated subsets), left out."""
    subset: str
    mapping: str
    alpha: float = field(default_factory=lambda: protocol().alpha)
    unit: Literal["recipe"] = "recipe"
    """What one point is: a recipe (size, branch), its seeds averaged."""
    # The study compared policy-load with capability-load benchmarks; its capability-load set
    # was harmful (CAP), so the harmful rows are the ones set beside its numbers.
    policy: SpearmanSet = field(init=False)
    """The harmful (CAP) sets the first screen calls A flags more or less (``policy``) and
    capability (``capability``), beside the study's +0.74 and +0.34."""
    capability: SpearmanSet = field(init=False)

    def __post_init__(self) -> None:
        for load in ("policy", "capability"):
            g = self.group(load, "harmful")
            object.__setattr__(self, load, SpearmanSet(
                rho=g.rho, p_value=g.p_value, n=g.n, benchmarks=g.benchmarks,
                significant=g.significant))

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def group(self, load: str, kind: str) -> SpearmanGroup:
        return next(g for g in self.groups if (g.load, g.kind) == (load, kind))

    def summary_frame(self) -> pl.DataFrame:
        return pl.DataFrame({
            "load": [g.load for g in self.groups], "kind": [g.kind for g in self.groups],
            "benchmarks": [", ".join(g.benchmarks) for g in self.groups],
            "n_benchmarks": [len(g.benchmarks) for g in self.groups],
            "n_recipes": [g.n for g in self.groups],
            "rho": [g.rho for g in self.groups],
            "p_value": [g.p_value for g in self.groups],
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
        groups.append(spearman_group(ld, kd, benches, have["val"].to_list(),
                                     have[col].to_list(), alpha=alpha))
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
