"""Outside guards beside the branches on the same decontaminated prompts (study Table 2).

For each benchmark: every outside guard's score (with its Wilson interval) and every branch
recipe's score (mean over seeds; interval ``seed-range+wilson``, from the lowest to the highest
Wilson bound of its seeds, see :mod:`guarddiag.analyses.intervals`) on the *decontaminated*
prompts, under each binary mapping scored. A guard whose scored prompts differ from the
branches' (it failed on some prompts) keeps its own ``prompt_set``, and the report shows it in
its own column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

from guarddiag.analyses.intervals import WILSON, recipe_interval_aggs
from guarddiag.analyses.load import student_runs
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import ScoresResult

# Keys typed Any: DataFrame.cast takes a mapping keyed by names or selectors.
SCHEMA: dict[Any, PolarsDataType] = {
          "entity": pl.String, "kind": pl.String, "size": pl.String, "benchmark": pl.String,
          "metric_alias": pl.String, "mapping": pl.String, "mapping_applied": pl.String,
          "readout": pl.String,
          "prompt_set": pl.String, "n_scored": pl.Int64, "n_failed": pl.Int64,
          "score": pl.Float64, "low": pl.Float64, "high": pl.Float64,
          "interval": pl.String, "n_runs": pl.Int64}


@dataclass(frozen=True)
class OutsideComparisonResult:
    table: pl.DataFrame = field(repr=False)
    subset: str

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    @property
    def has_guards(self) -> bool:
        return bool(self.table.filter(pl.col("kind") == "outside").height)


def outside_comparison(scores: ScoresResult, *,
                       subset: str = "decontaminated") -> OutsideComparisonResult:
    binary = scores.binary(subset=subset).filter(pl.col("score").is_not_null())
    guards = binary.filter(pl.col("guard_kind") == "outside").select(
        pl.col("branch").alias("entity"), pl.lit("outside").alias("kind"),
        pl.lit(None, dtype=pl.String).alias("size"), "benchmark", "metric_alias", "mapping",
        "mapping_applied", "readout", "prompt_set", "n_scored", "n_failed", "score",
        pl.col("ci_low").alias("low"), pl.col("ci_high").alias("high"),
        pl.lit(WILSON).alias("interval"), pl.lit(1, dtype=pl.Int64).alias("n_runs"))
    branch = student_runs(binary).group_by(
        ["branch", "size", "benchmark", "metric_alias", "mapping", "mapping_applied", "readout",
         "prompt_set", "n_scored", "n_failed"]).agg(*recipe_interval_aggs())
    branch = branch.select(
        pl.col("branch").alias("entity"), pl.lit("branch").alias("kind"), "size", "benchmark",
        "metric_alias", "mapping", "mapping_applied", "readout", "prompt_set", "n_scored",
        "n_failed", "score", "low", "high", "interval", "n_runs")
    table = pl.concat([guards.cast(SCHEMA), branch.cast(SCHEMA)]).sort(
        ["benchmark", "mapping", "kind", "entity", "size"], descending=[False, False, True,
                                                                        False, False],
        nulls_last=True)  # pragma: no mutate(const): only outside rows have a null size and kind sorts first  # noqa: E501
    return OutsideComparisonResult(table=table, subset=subset)


def _outside(ctx: AnalysisContext) -> OutsideComparisonResult:
    return outside_comparison(ctx[SCORES], subset="decontaminated")


OUTSIDE = register_analysis("outside", _outside, result=OutsideComparisonResult,
                            needs=(SCORES,))
