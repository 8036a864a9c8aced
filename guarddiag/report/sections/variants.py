"""The distillation-weight sensitivity table: each variant (``E6-a05``) beside its base branch.

The analysis step computed everything (:mod:`guarddiag.analyses.variants`); this builder lays it
out one row per benchmark, three columns per (size, base, variant): the base's seed-mean score,
the variant's, and the difference in points.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from guarddiag.analyses.scored import DISTILL
from guarddiag.report.context import ReportContext
from guarddiag.report.document import Block, Column, Paragraph, Section, Table
from guarddiag.report.jsonable import payload_of
from guarddiag.report.sections.common import cohort_words, hull_words

TITLE = "Distillation-weight sensitivity (variants of E6 and E9)"


def _alpha(recipes: pl.DataFrame, size: str, branch: str) -> str:
    hit = recipes.filter((pl.col("size") == size) & (pl.col("branch") == branch))
    value = hit["distill_weight"][0] if hit.height else None
    return "α ?" if value is None else f"α {value:g}"


def _wide(table: pl.DataFrame, recipes: pl.DataFrame) -> tuple[pl.DataFrame, list[Column]]:
    """Benchmarks × (base, variant, Δ) per (size, base, variant) pair."""
    sizes = sorted(set(table["size"].to_list()))
    pairs = table.select("size", "base", "variant").unique(maintain_order=True).rows()
    benches = table.select("benchmark", "metric_alias").unique(maintain_order=True).rows()
    wide: dict[str, dict[str, Any]] = {b: {"benchmark": b, "metric_alias": a}
                                       for b, a in benches}
    columns = [Column("benchmark", "benchmark"), Column("metric_alias", "metric")]
    for size, base, variant in pairs:
        tag = f"{size}/" if len(sizes) > 1 else ""
        key = f"{size}__{variant}"
        columns += [
            Column(f"{key}__base", f"{tag}{base} ({_alpha(recipes, size, base)})", "pct",
                   low=f"{key}__base_low", high=f"{key}__base_high"),
            Column(f"{key}__variant", f"{tag}{variant} ({_alpha(recipes, size, variant)})",
                   "pct", low=f"{key}__variant_low", high=f"{key}__variant_high"),
            Column(f"{key}__delta", "Δ (pp)", "num1")]
        part = table.filter((pl.col("size") == size) & (pl.col("variant") == variant))
        for r in part.iter_rows(named=True):
            w = wide[r["benchmark"]]
            for side in ("base", "variant"):
                w[f"{key}__{side}"] = r[f"{side}_score"]
                w[f"{key}__{side}_low"], w[f"{key}__{side}_high"] = (r[f"{side}_low"],
                                                                     r[f"{side}_high"])
            w[f"{key}__delta"] = r["delta_pp"]
    keys = [k for c in columns[2:] for k in (c.key, c.low, c.high) if k is not None]
    schema = {"benchmark": pl.String, "metric_alias": pl.String,
              **dict.fromkeys(keys, pl.Float64)}
    frame = pl.DataFrame([{k: w.get(k) for k in schema} for w in wide.values()], schema=schema)
    return frame, columns


def section_distill(ctx: ReportContext) -> Section:
    d = ctx.get(DISTILL)
    if d is None:
        return Section.omit("distill", TITLE, "no sensitivity variants (branches with "
                            "variant_of, e.g. E6-a05) were scored")
    frame, columns = _wide(d.table, d.recipes)
    blocks: list[Block] = [
        Paragraph("Each variant is its base branch with one setting changed — here the weight α "
                  "of the teacher term in the loss α·τ²·KL(teacher‖student) + (1−α)·CE(hard "
                  "labels) — and is reported only here: variants enter neither the ten-branch "
                  "rank test nor Table 1, the span Δb, the load call, the seed floor or the "
                  "correlations. A Δ larger than the seed floor of the benchmark means the "
                  "teacher's weight, not only the hard labels, sets that score. α comes from "
                  f"each run's meta.json. Scores: {cohort_words(ctx, d.subset)}; VAL is the "
                  "primary (English) VAL."),
        Table("distill_sensitivity", f"Base branch vs variant, seed means. "
              f"{hull_words(ctx.options.confidence)}", tuple(columns), frame, collapsed=True),
        Table("distill_sensitivity_all", "Every (size, base, variant, benchmark) row.",
              (Column("size", "size"), Column("base", "base"), Column("variant", "variant"),
               Column("benchmark", "benchmark"),
               Column("base_score", "base", "pct", low="base_low", high="base_high"),
               Column("variant_score", "variant", "pct", low="variant_low",
                      high="variant_high"),
               Column("delta_pp", "Δ (pp)", "num1"),
               Column("n_base_runs", "base runs", "int"),
               Column("n_variant_runs", "variant runs", "int")), d.table, csv_only=True),
    ]
    return Section("distill", TITLE, tuple(blocks), payload_of(d))
