"""Sensitivity variants of a branch (``E6-a05``) and the distillation-weight table.

A *variant* is a branch spec with ``variant_of`` (branches/E6-a05.yaml: E6 with the distillation
weight α at one half). It trains and is scored like any branch, but it is a second setting of one of
the ten recipes, not an eleventh recipe: the analysis step takes its runs out of every other
analysis (the rank test, Table 1, the span Δb, the load call, the seed floor, the correlations)
with :func:`without_variants`, and reports them only in :func:`distill_sensitivity`'s table.

A variant is known by its role column ``variant_of`` (:mod:`guarddiag.roles`), which its spec
declares and the run meta and predictions table carry, so predictions copied without their run
folders are still split correctly.

:func:`distill_sensitivity`: per model size, every variant beside its base branch — seed-mean
score (interval ``seed-range+wilson``, a single run's own Wilson interval) on each scored
benchmark and the primary VAL, the difference in percentage points, and each run's α from its
``meta.json`` (null where the run folder is absent).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from guarddiag.analyses.intervals import recipe_interval_aggs
from guarddiag.analyses.payload import json_key
from guarddiag.analyses.scores import ScoresResult
from guarddiag.roles import is_variant


def without_variants(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of a predictions or scores frame that are not variant runs (by role)."""
    return frame.filter(~is_variant())


@dataclass(frozen=True)
class DistillSensitivityResult:
    """Variants beside their base branches, per size."""

    table: pl.DataFrame = field(repr=False, metadata=json_key("rows"))
    """One row per (size, base, benchmark): benchmark, metric_alias, base_score/low/high,
    variant, variant_score/low/high, delta_pp (variant − base), n_base_runs, n_variant_runs.
    The primary VAL is the row with benchmark ``VAL``."""
    recipes: pl.DataFrame = field(repr=False)
    """One row per (size, branch) in the table: role (base or variant), base, distill_weight
    (from the runs' meta.json; null where absent), n_runs."""
    subset: str
    mapping: str

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()


_KEYS = ["size", "branch", "benchmark", "metric_alias"]


def _recipe_scores(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.filter(pl.col("score").is_not_null()).group_by(_KEYS).agg(
        *recipe_interval_aggs())


def distill_sensitivity(all_scores: ScoresResult, *, subset: str, mapping: str,
                        run_meta: pl.DataFrame | None = None
                        ) -> DistillSensitivityResult | None:
    """Every variant's seed-mean scores beside its base branch's (None without variants).

    ``all_scores`` must still hold the variant runs (the analysis step scores every run, then
    takes the variants out of the other analyses). Bases and variants are compared only at a
    size where both were scored, on the benchmarks both were scored on.
    """
    students = all_scores.table.filter(pl.col("guard_kind") == "branch")
    pairs = sorted(set(students.filter(is_variant()).select("branch", "variant_of")
                       .iter_rows()))
    if not pairs:
        return None
    binary = all_scores.binary(subset=subset, mapping=mapping)
    val = all_scores.val().with_columns(pl.lit("VAL").alias("benchmark"))
    rows = pl.concat([binary.select(*_KEYS, "score", "ci_low", "ci_high"),
                      val.select(*_KEYS, "score", "ci_low", "ci_high")])
    rows = rows.filter(pl.col("branch").is_in([b for pair in pairs for b in pair]))
    means = _recipe_scores(rows)
    out = []
    for variant, base in pairs:
        b = means.filter(pl.col("branch") == base).drop("branch")
        v = means.filter(pl.col("branch") == variant).drop("branch")
        joined = b.join(v, on=["size", "benchmark", "metric_alias"], suffix="_v")
        out.append(joined.select(
            "size", pl.lit(base).alias("base"), "benchmark", "metric_alias",
            pl.col("score").alias("base_score"), pl.col("low").alias("base_low"),
            pl.col("high").alias("base_high"), pl.lit(variant).alias("variant"),
            pl.col("score_v").alias("variant_score"), pl.col("low_v").alias("variant_low"),
            pl.col("high_v").alias("variant_high"),
            ((pl.col("score_v") - pl.col("score")) * 100).alias("delta_pp"),
            pl.col("n_runs").alias("n_base_runs"), pl.col("n_runs_v").alias("n_variant_runs")))
    table = pl.concat(out).with_columns(
        (pl.col("benchmark") == "VAL").alias("_val")).sort(
        ["size", "base", "variant", "_val", "benchmark"]).drop("_val")
    return DistillSensitivityResult(table=table, recipes=_recipes(pairs, students, run_meta),
                                    subset=subset, mapping=mapping)


def _recipes(pairs: list[tuple[str, str]], students: pl.DataFrame,
             run_meta: pl.DataFrame | None) -> pl.DataFrame:
    """Per (size, branch) of the table: its role, base, α and number of runs."""
    alpha: dict[tuple[str, str], float | None] = {}
    if run_meta is not None and "distill_weight" in run_meta.columns:
        for r in run_meta.iter_rows(named=True):
            alpha.setdefault((str(r["size"]), str(r["branch"])), r["distill_weight"])
    rows = []
    roles = {base: ("base", base) for _, base in pairs} | {v: ("variant", base)
                                                           for v, base in pairs}
    runs = students.filter(pl.col("branch").is_in(list(roles))).select(
        "size", "branch", "run_id").unique().group_by(["size", "branch"]).len()
    for size, branch, n in runs.sort(["size", "branch"]).iter_rows():
        role, base = roles[branch]
        rows.append({"size": size, "branch": branch, "role": role, "base": base,
                     "distill_weight": alpha.get((size, branch)), "n_runs": int(n)})
    return pl.DataFrame(rows, schema={"size": pl.String, "branch": pl.String,
                                      "role": pl.String, "base": pl.String,
                                      "distill_weight": pl.Float64, "n_runs": pl.Int64})
