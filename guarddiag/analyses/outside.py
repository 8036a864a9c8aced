"""Outside guards beside the branches on the same decontaminated prompts (study Table 2).

For each benchmark: every outside guard's score (with its Wilson interval) and every branch
recipe's score (mean over seeds; interval ``seed-range+wilson``, from the lowest to the highest
Wilson bound of its seeds, see :mod:`guarddiag.analyses.intervals`) on the *decontaminated*
prompts, under each binary mapping scored. A guard whose scored prompts differ from the
branches' (it failed on some prompts) keeps its own ``prompt_set``, and the report shows it in
its own column.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

from guarddiag import stats
from guarddiag.analyses.intervals import WILSON, recipe_interval_aggs
from guarddiag.analyses.load import student_runs
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import METRIC_OF_KIND, ScoresResult
from guarddiag.predictions import OWN_DECONTAM

# Keys typed Any: DataFrame.cast takes a mapping keyed by names or selectors.
SCHEMA: dict[Any, PolarsDataType] = {
          "entity": pl.String, "kind": pl.String, "size": pl.String, "benchmark": pl.String,
          "metric_alias": pl.String, "mapping": pl.String, "mapping_applied": pl.String,
          "readout": pl.String,
          "prompt_set": pl.String, "n_scored": pl.Int64, "n_failed": pl.Int64,
          "score": pl.Float64, "low": pl.Float64, "high": pl.Float64,
          "interval": pl.String, "n_runs": pl.Int64}


OWN_SCHEMA: dict[Any, PolarsDataType] = {
    "entity": pl.String, "benchmark": pl.String, "metric": pl.String, "prompts": pl.String,
    "n_scored": pl.Int64, "n_unsafe": pl.Int64, "score": pl.Float64, "low": pl.Float64,
    "high": pl.Float64}
OWN_PROMPTS = ("pool-decontaminated", "own-decontaminated", "both")
"""Which prompts a row of :func:`own_decontam_table` counts: those surviving the pool audit
(``survives_decontam``, the branches' training pool), those surviving the audit of the guard's
own training data (``survives_own_decontam``), and those surviving both."""


@dataclass(frozen=True)
class OutsideComparisonResult:
    table: pl.DataFrame = field(repr=False)
    subset: str
    own_decontam: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=OWN_SCHEMA),
                                       repr=False)
    """Guards audited against their own training data (:func:`own_decontam_table`)."""

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    @property
    def has_guards(self) -> bool:
        return bool(self.table.filter(pl.col("kind") == "outside").height)


def own_decontam_table(predictions: pl.DataFrame, own: pl.DataFrame | None, *,
                       kinds: Mapping[str, str], threshold: float,
                       confidence: float = stats.DEFAULT_CONFIDENCE) -> pl.DataFrame:
    """Per outside guard with own-decontamination flags and benchmark: the share of prompts
    called unsafe (loose P(unsafe) ≥ ``threshold``; CAP on harmful, OVER-REF on benign
    benchmarks) with its Wilson interval, on each of :data:`OWN_PROMPTS`. Failed prompts are
    left out, as everywhere."""
    if own is None or own.height == 0:
        return pl.DataFrame(schema=OWN_SCHEMA)
    df = predictions.filter(pl.col("guard_kind") == "outside").join(
        own, on=["run_id", "benchmark", "prompt_id"], how="inner")
    df = df.filter(pl.col("status") == "ok").with_columns(
        (pl.col("p_unsafe") >= threshold).alias("_unsafe"))
    rows = []
    for (entity, bench), part in df.sort("branch", "benchmark").group_by(
            ["branch", "benchmark"], maintain_order=True):
        if bench not in kinds:
            continue
        masks = {"pool-decontaminated": part["survives_decontam"],
                 "own-decontaminated": part[OWN_DECONTAM],
                 "both": part["survives_decontam"] & part[OWN_DECONTAM]}
        for prompts in OWN_PROMPTS:
            sub = part.filter(masks[prompts])
            n, k = sub.height, int(sub["_unsafe"].sum())
            low, high = stats.wilson_interval(k, n, confidence) if n else (None, None)
            rows.append({"entity": entity, "benchmark": bench,
                         "metric": METRIC_OF_KIND[kinds[bench]], "prompts": prompts,
                         "n_scored": n, "n_unsafe": k, "score": k / n if n else None,
                         "low": low, "high": high})
    return pl.DataFrame(rows, schema=OWN_SCHEMA)


def outside_comparison(scores: ScoresResult, *,
                       subset: str = "decontaminated",
                       own_decontam: pl.DataFrame | None = None) -> OutsideComparisonResult:
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
    return OutsideComparisonResult(table=table, subset=subset,
                                   own_decontam=own_decontam if own_decontam is not None
                                   else pl.DataFrame(schema=OWN_SCHEMA))


def _outside(ctx: AnalysisContext) -> OutsideComparisonResult:
    o, inputs = ctx.options, ctx.inputs
    own = own_decontam_table(inputs.predictions, inputs.outside_own, kinds=inputs.kinds,
                             threshold=o.threshold, confidence=o.confidence)
    return outside_comparison(ctx[SCORES], subset="decontaminated", own_decontam=own)


OUTSIDE = register_analysis("outside", _outside, result=OutsideComparisonResult,
                            needs=(SCORES,))
