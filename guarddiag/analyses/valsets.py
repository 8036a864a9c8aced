"""VAL on named parts of the val split, and whether train overlap makes VAL track policy.

The study's VAL (4-class accuracy under policy A on a multilingual val split) tracked the
policy-load scores (Spearman +0.74) while 69.3% of those val rows also sat in policy-A training
files. Here the primary VAL is English (no train overlap; it alone chooses checkpoints), and the
pool recipe's ``splits.multilingual_train_overlap`` can copy a share of the non-English val rows
into train. :func:`val_sets` measures each student run on four parts of the val split:

- ``en``: the English rows (the primary VAL);
- ``multilingual``: every other row;
- ``multilingual_overlap``: the non-English rows whose normalised text
  (:func:`guarddiag.text.normalise`) is also a train row;
- ``multilingual_no_overlap``: the other non-English rows.

Each run's accuracy on a part carries its Wilson interval (k correct of n scored). Per recipe
(size, branch; seed means, as :mod:`~guarddiag.analyses.correlation` makes its points) the
Spearman ρ of each part's VAL against the mean score on each (load, kind) set of benchmarks of
the correlation analysis: ρ with the overlapping rows (``multilingual``) beside ρ without them
(``multilingual_no_overlap``) is the ablation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from guarddiag import stats
from guarddiag.analyses.correlation import CORRELATION, CorrelationResult
from guarddiag.analyses.load import student_runs
from guarddiag.analyses.payload import not_in_payload
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scores import PRIMARY_VAL_LANG, VAL_BENCHMARK
from guarddiag.errors import GuarddiagError
from guarddiag.labels import branch_order
from guarddiag.pool.table import seen_in_train

VAL_SETS: tuple[str, ...] = ("en", "multilingual", "multilingual_overlap",
                             "multilingual_no_overlap")
"""The parts of the val split, in report order."""


@dataclass(frozen=True)
class ValSetsResult:
    runs: pl.DataFrame = field(repr=False)
    """Per student run and part: run_id, size, branch, seed, label_policy, val_set, n_scored,
    n_correct, score, ci_low, ci_high (Wilson)."""
    recipes: pl.DataFrame = field(repr=False)
    """Per recipe (size, branch): n_seeds and the seed-mean VAL of each part (column = part)."""
    spearman: pl.DataFrame = field(repr=False)
    """Per part and (load, kind) set: val_set, load, kind, n_benchmarks, n_recipes, rho,
    p_value."""
    rows: pl.DataFrame = field(repr=False)
    """Val rows per part: val_set, n_rows (in the pool's val split)."""
    confidence: float = field(metadata=not_in_payload())

    def to_frame(self) -> pl.DataFrame:
        return self.runs.clone()


def val_parts(pool: pl.DataFrame) -> pl.DataFrame:
    """prompt_id, gold (label_a) and val_set of every val row (``en`` or one of the two
    multilingual parts, by whether its normalised text is a train row)."""
    missing = [c for c in ("prompt_id", "text", "label_a", "split", "lang")
               if c not in pool.columns]
    if missing:
        raise GuarddiagError(f"pool: missing column(s) {', '.join(missing)} needed for VAL parts")
    val = pool.with_columns(seen_in_train(pool)).filter(pl.col("split") == "val")
    parts = []
    for seen, lang in zip(val["seen_in_train"].to_list(), val["lang"].to_list(), strict=True):
        if lang == PRIMARY_VAL_LANG:
            parts.append("en")
        else:
            parts.append("multilingual_overlap" if seen else "multilingual_no_overlap")
    return val.select(pl.col("prompt_id").cast(pl.String), pl.col("label_a").alias("gold"),
                      pl.Series("val_set", parts, dtype=pl.String))


def val_sets(predictions: pl.DataFrame, pool: pl.DataFrame,
             correlation: CorrelationResult | None, *,
             confidence: float = stats.DEFAULT_CONFIDENCE) -> ValSetsResult | None:
    """VAL of every student run on each part of the val split, and ρ per part (None where no
    student run scored the val split)."""
    preds = student_runs(predictions.filter(pl.col("benchmark") == VAL_BENCHMARK))
    if preds.height == 0:
        return None
    parts = val_parts(pool)
    joined = preds.join(parts, on="prompt_id", how="inner").filter(
        (pl.col("status") == "ok") & pl.col("pred_class").is_not_null()).with_columns(
        (pl.col("pred_class") == pl.col("gold")).alias("correct"))
    multi = joined.filter(pl.col("val_set") != "en").with_columns(
        pl.lit("multilingual").alias("val_set"))
    keys = ["run_id", "size", "branch", "seed", "label_policy", "val_set"]
    runs = pl.concat([joined, multi]).group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("n_scored"),
        pl.col("correct").sum().cast(pl.Int64).alias("n_correct"))
    bounds = [stats.wilson_interval(k, n, confidence)
              for k, n in zip(runs["n_correct"].to_list(), runs["n_scored"].to_list(),
                              strict=True)]
    runs = runs.with_columns(
        (pl.col("n_correct") / pl.col("n_scored")).alias("score"),
        pl.Series("ci_low", [b[0] for b in bounds], dtype=pl.Float64),
        pl.Series("ci_high", [b[1] for b in bounds], dtype=pl.Float64),
        pl.col("val_set").replace_strict({s: i for i, s in enumerate(VAL_SETS)}).alias("_s"),
        pl.col("branch").map_elements(branch_order, return_dtype=pl.Int64).alias("_b"),
    ).sort(["size", "_b", "branch", "seed", "_s"]).drop("_s", "_b")
    recipes = _recipe_means(runs)
    n_rows = parts.group_by("val_set").len()
    counts = dict(zip(n_rows["val_set"].to_list(), n_rows["len"].to_list(), strict=True))
    counts["multilingual"] = sum(v for k, v in counts.items() if k != "en")
    rows = pl.DataFrame({"val_set": list(VAL_SETS),
                         "n_rows": [int(counts.get(s, 0)) for s in VAL_SETS]})
    return ValSetsResult(runs=runs, recipes=recipes, spearman=_spearman(recipes, correlation),
                         rows=rows, confidence=confidence)


def _recipe_means(runs: pl.DataFrame) -> pl.DataFrame:
    """One row per recipe: n_seeds and the seed mean of each part (12 decimals, as the
    correlation rounds, so equal means tie in the ranks)."""
    means = runs.group_by(["size", "branch", "val_set"]).agg(
        pl.col("score").mean().round(12).alias("score"),
        pl.col("seed").n_unique().cast(pl.Int64).alias("n_seeds"))
    wide = means.pivot(on="val_set", index=["size", "branch"], values="score")
    seeds = means.group_by(["size", "branch"]).agg(pl.col("n_seeds").max())
    wide = seeds.join(wide, on=["size", "branch"], how="left")
    for s in VAL_SETS:
        if s not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(s))
    return wide.with_columns(pl.col("branch").map_elements(
        branch_order, return_dtype=pl.Int64).alias("_b")).sort(["size", "_b", "branch"]).select(
        "size", "branch", "n_seeds", *VAL_SETS)


def _spearman(recipes: pl.DataFrame, correlation: CorrelationResult | None) -> pl.DataFrame:
    schema = {"val_set": pl.String, "load": pl.String, "kind": pl.String,
              "n_benchmarks": pl.Int64, "n_recipes": pl.Int64, "rho": pl.Float64,
              "p_value": pl.Float64}
    if correlation is None:
        return pl.DataFrame(schema=schema)
    loads = correlation.table.select("size", "branch", *(g.column for g in correlation.groups))
    table = recipes.join(loads, on=["size", "branch"], how="inner")
    out = []
    for part in VAL_SETS:
        for g in correlation.groups:
            have = table.filter(pl.col(part).is_not_null() & pl.col(g.column).is_not_null())
            r = stats.spearman(have[part].to_list(), have[g.column].to_list())
            out.append({"val_set": part, "load": g.load, "kind": g.kind,
                        "n_benchmarks": len(g.benchmarks), "n_recipes": r.n, "rho": r.rho,
                        "p_value": r.p_value})
    return pl.DataFrame(out, schema=schema)


def _val_sets(ctx: AnalysisContext) -> ValSetsResult | None:
    """None without a pool."""
    i = ctx.inputs
    if i.pool is None:
        return None
    return val_sets(i.predictions, i.pool, ctx.get(CORRELATION),
                    confidence=ctx.options.confidence)


VAL_SETS_ANALYSIS = register_analysis("val_sets", _val_sets, result=ValSetsResult,
                                      needs=(CORRELATION,))
