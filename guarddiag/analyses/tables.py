"""Seed-averaged views of the scores: one row per recipe (size, branch) or outside guard.

A recipe's score is the mean over its seeds; its interval (``interval``, see
:mod:`guarddiag.analyses.intervals`) is ``seed-range+wilson`` — from the lowest to the highest
Wilson bound of its seeds, which holds the seed range (kept as ``seed_low``/``seed_high``) — and
a run without siblings (an outside guard, a single-seed recipe) keeps its own Wilson
interval (``wilson``). Rows keep their cohort columns
(``prompt_set``, ``readout``) so the report can refuse to put different cohorts in one column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from guarddiag.analyses.intervals import recipe_interval_aggs
from guarddiag.analyses.mapping import EFFECT, MappingEffectResult
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import SUBSETS, ScoresResult
from guarddiag.labels import branch_order

KIND_ORDER = {"branch": 0, "baseline": 1, "outside": 2}  # pragma: no mutate(const@53): outside is last at 2 or 3 (_k only sorts)  # noqa: E501
_GROUP = ["guard_kind", "size", "branch", "label_policy", "benchmark", "metric_alias", "subset",
          "mapping", "mapping_applied", "threshold", "readout", "prompt_set", "n_scored",
          "n_failed"]


def _order_columns() -> list[pl.Expr]:
    return [pl.col("guard_kind").replace_strict(KIND_ORDER, default=9).alias("_k"),  # pragma: no mutate(const): any default above 2 sorts other kinds last  # noqa: E501
            pl.col("branch").map_elements(branch_order, return_dtype=pl.Int64).alias("_b")]


def _entity(kind: str, size: str, branch: str) -> str:
    return branch if kind == "outside" else f"{size}/{branch}"


@dataclass(frozen=True)
class RecipeTableResult:
    table: pl.DataFrame = field(repr=False)
    """entity, guard_kind, size, branch, label_policy, benchmark, metric_alias, subset, mapping,
    mapping_applied, threshold, readout, prompt_set, n_scored, n_failed, score, low, high,
    interval, n_runs, seed_low, seed_high."""
    subset: str
    mapping: str

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()


def recipe_table(scores: ScoresResult, *, subset: str, mapping: str) -> RecipeTableResult:
    rows = scores.binary(subset=subset, mapping=mapping).filter(pl.col("score").is_not_null())
    agg = rows.group_by(_GROUP).agg(*recipe_interval_aggs())
    table = agg.with_columns(
        pl.struct("guard_kind", "size", "branch").map_elements(
            lambda s: _entity(s["guard_kind"], s["size"], s["branch"]),
            return_dtype=pl.String).alias("entity"),
        *_order_columns(),
    ).sort(["_k", "size", "_b", "branch", "benchmark"]).select(
        "entity", *_GROUP, "score", "low", "high", "interval", "n_runs", "seed_low",
        "seed_high")
    return RecipeTableResult(table=table, subset=subset, mapping=mapping)


def mapping_effect_by_recipe(effect: MappingEffectResult, *, subset: str) -> pl.DataFrame:
    """Seed means of the loose and strict scores per recipe (or guard) and benchmark."""
    t = effect.table.filter(pl.col("subset") == subset)
    return t.group_by(["guard_kind", "size", "branch", "benchmark", "metric_alias", "readout",
                       "strict_applied", "prompt_set"]).agg(
        pl.col("loose").mean(), pl.col("strict").mean(), pl.col("delta_pp").mean(),
        pl.len().cast(pl.Int64).alias("n_runs")).with_columns(
        pl.struct("guard_kind", "size", "branch").map_elements(
            lambda s: _entity(s["guard_kind"], s["size"], s["branch"]),
            return_dtype=pl.String).alias("entity"),
        *_order_columns(),
    ).sort(["benchmark", "_k", "size", "_b", "branch"]).drop("_k", "_b")


def _recipes(ctx: AnalysisContext) -> dict[str, RecipeTableResult]:
    """Recipe table per prompt subset (the primary one first), under the primary mapping."""
    o = ctx.options
    return {s: recipe_table(ctx[SCORES], subset=s, mapping=o.mapping)
            for s in (o.primary_subset, *(s for s in SUBSETS if s != o.primary_subset))}


def _effect_by_recipe(ctx: AnalysisContext) -> pl.DataFrame:
    """The mapping effect per recipe on the primary subset."""
    return mapping_effect_by_recipe(ctx[EFFECT], subset=ctx.options.primary_subset)


RECIPES = register_analysis("recipes", _recipes, result=dict, needs=(SCORES,))
EFFECT_BY_RECIPE = register_analysis("effect_by_recipe", _effect_by_recipe,
                                     result=pl.DataFrame, needs=(EFFECT,))
