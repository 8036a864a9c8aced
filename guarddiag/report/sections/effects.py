"""Sections on what moves the scores: the exact rank test, the binary-mapping effect (Table 2),
and whether validation accuracy predicts benchmark scores."""

from __future__ import annotations

import polars as pl

from guarddiag import plots
from guarddiag.analyses.correlation import CORRELATION
from guarddiag.analyses.mapping import EFFECT
from guarddiag.analyses.paired import PAIRED
from guarddiag.analyses.rank import RANK
from guarddiag.analyses.tables import EFFECT_BY_RECIPE
from guarddiag.report.context import ReportContext
from guarddiag.report.document import (
    Block,
    Column,
    FigureBlock,
    Paragraph,
    Section,
    Table,
)
from guarddiag.report.jsonable import payload_of, records
from guarddiag.report.sections.common import BOLD_RULE, capability_benchmarks, cohort_words
from guarddiag.report.sections.paired import paired_blocks, paired_payload
from guarddiag.report.sections.ranks import (
    correlation_blocks,
    rank_tie_blocks,
)


def section_rank(ctx: ReportContext) -> Section:
    title = "Exact permutation rank test"
    r = ctx.get(RANK)
    if r is None:
        return Section.omit("rank", title, ctx.results.rank_note or "no rank test")
    frame = r.to_frame()
    cols = (Column("size", "size"), Column("group", "group"), Column("n", "n", "int"),
            Column("k", "k", "int"), Column("rank_sum", "rank sum", "num1"),
            Column("max_rank_sum", "max", "num1"), Column("ties", "ties"),
            Column("p_closed_form", "1/C(n,k)", "p"), Column("p_upper", "P(S≥s)", "p"),
            Column("p_lower", "P(S≤s)", "p"), Column("p_two_sided", "two-sided", "p"),
            Column("p_value", f"p ({r.tail})", "p"), Column("n_tied", "tied", "int"),
            Column("p_tie_aware", "tie-aware p", "p"))
    blocks: list[Block] = [
        Paragraph(f"Under exchangeable branches, how likely is it that the named group "
                  f"{{{', '.join(r.group)}}} ranks where it does on {r.benchmark} "
                  f"({r.metric}; {cohort_words(ctx, r.subset)})? Branch score = mean over "
                  "seeds. The closed form 1/C(n,k) is the chance that the group holds the k "
                  "extreme ranks; the exact rank-sum distribution (counted over all C(n,k) "
                  "subsets, equivalent to enumerating all n! orderings) gives a p-value for any "
                  "position, with tied scores sharing mid-ranks and the null taken over the "
                  f"observed tied ranks. The report's p-value is the pre-declared '{r.tail}' "
                  "tail."),
        Table("rank_test", f"Rank test of {{{', '.join(r.group)}}} on {r.benchmark}: exact "
              "p-values, no interval; 'tied' = branches sharing their score with another, "
              "'tie-aware p' = the declared tail's exact p over the observed mid-ranks.", cols,
              frame),
        *rank_tie_blocks(r),
        FigureBlock("rank_test", plots.rank_plot(r),
                    "Branches in rank order; the named group highlighted."),
        Table("rank_branches", "Branch scores and mid-ranks behind the test.",
              (Column("size", "size"), Column("branch", "branch"),
               Column("score", "score", "pct"), Column("rank", "mid-rank", "num1"),
               Column("in_group", "in group")), r.branch_frame(), collapsed=True),
    ]
    return Section("rank", title, tuple(blocks), payload_of(r))


def section_mapping(ctx: ReportContext) -> Section:
    o = ctx.options
    by_recipe = ctx.result(EFFECT_BY_RECIPE)
    benign = sorted(set(by_recipe.filter(pl.col("metric_alias").is_in(["OVER-REF", "OR-H"]))
                        ["benchmark"].to_list()))
    shown = benign or sorted(set(by_recipe["benchmark"].to_list()))
    # One row per recipe/guard re-read under both mappings; per benchmark the loose, strict and
    # Δ columns hold only the prompt set most rows share (a guard that failed on some prompts,
    # or gives no class probabilities, is in the CSV, not in these columns).
    mapped = by_recipe.filter((pl.col("strict_applied") == "strict")
                              & pl.col("benchmark").is_in(shown))
    entities = list(dict.fromkeys(mapped["entity"].to_list()))
    wide = {e: {"entity": e} for e in entities}
    cols: list[Column] = [Column("entity", "recipe / guard")]
    left_out: set[str] = set(by_recipe.filter(pl.col("strict_applied") != "strict")["entity"]
                             .to_list())
    for bench in shown:
        part = mapped.filter(pl.col("benchmark") == bench)
        if part.height == 0:  # no run re-read under strict on it: nothing to show
            continue
        main = part.group_by("prompt_set").len().sort(["len", "prompt_set"],
                                                      descending=[True, False])["prompt_set"][0]
        left_out |= set(part.filter(pl.col("prompt_set") != main)["entity"].to_list())
        alias = part["metric_alias"][0]
        best = "min" if alias in ("OVER-REF", "OR-H") else "max"
        # Each column is bolded by the call of its own mapping (and this table's subset).
        best_of = {m: best if bench in capability_benchmarks(ctx, subset=o.primary_subset,
                                                             mapping=m) else None
                   for m in ("loose", "strict")}
        for r in part.filter(pl.col("prompt_set") == main).iter_rows(named=True):
            w = wide[r["entity"]]
            w[f"{bench}__loose"], w[f"{bench}__strict"] = r["loose"], r["strict"]
            w[f"{bench}__delta_pp"] = r["delta_pp"]
        cols += [Column(f"{bench}__loose", f"{bench} loose %", "pct", best=best_of["loose"]),
                 Column(f"{bench}__strict", f"{bench} strict %", "pct",
                        best=best_of["strict"]),
                 Column(f"{bench}__delta_pp", "Δ (pp)", "num1")]
    schema = {"entity": pl.String, **{c.key: pl.Float64 for c in cols[1:]}}
    frame = pl.DataFrame([{k: wide[e].get(k) for k in schema} for e in entities], schema=schema)
    kinds = "benign benchmarks (OVER-REF)" if benign else "benchmarks"
    blocks: list[Block] = [
        Paragraph("The same predictions read out twice: loose counts BOUNDARY_SAFE as safe, "
                  "strict counts it as unsafe (study: the student's OR-H went from 5.7% to "
                  f"96.0%). Mean over seeds, {o.primary_subset} prompts, threshold "
                  f"{o.threshold:g}; {kinds} below, every benchmark in the CSV."),
        Table(f"mapping_effect_{o.primary_subset}",
              f"Loose vs strict binary mapping on the {kinds} (study Table 2); means over "
              f"seeds, no intervals. {BOLD_RULE}", tuple(cols),
              frame, collapsed=True),
    ]
    if left_out:
        blocks.append(Paragraph(
            "Not in the columns above (a guard with only a binary verdict cannot be re-read "
            "under another mapping, or it was scored on other prompts): "
            f"{', '.join(sorted(left_out))}; see tables/mapping_effect_all.csv."))
    for bench in benign:
        blocks.append(FigureBlock(f"mapping_effect_{bench}",
                                  plots.mapping_effect_plot(mapped, benchmark=bench),
                                  f"Loose vs strict read-out on {bench}."))
    blocks.append(Table("mapping_effect_all", "Every recipe/guard and benchmark (seed means).",
                        (Column("entity", "recipe / guard"), Column("benchmark", "benchmark"),
                         Column("loose", "loose", "pct"), Column("strict", "strict", "pct"),
                         Column("delta_pp", "Δ (pp)", "num1"),
                         Column("strict_applied", "strict read-out")), by_recipe,
                        csv_only=True))
    full = ctx.result(EFFECT).table
    blocks.append(Table("mapping_effect_runs", "Per run, both subsets, with 95% Wilson intervals.",
                        (Column("run_id", "run"), Column("benchmark", "benchmark"),
                         Column("subset", "subset"),
                         Column("loose", "loose", "pct", low="loose_low", high="loose_high"),
                         Column("strict", "strict", "pct", low="strict_low",
                                high="strict_high"),
                         Column("delta_pp", "Δ (pp)", "num1")), full, csv_only=True))
    paired = by_mapping.mapping if (by_mapping := ctx.get(PAIRED)) else None
    blocks += paired_blocks(paired, f"paired_mapping_{o.primary_subset}")
    return Section("mapping", "Binary-mapping effect: BOUNDARY_SAFE as safe or unsafe",
                   tuple(blocks), {"effects": records(full), "paired": paired_payload(paired),
                                   "by_recipe": records(by_recipe)})


def section_correlation(ctx: ReportContext) -> Section:
    title = "Does validation accuracy predict benchmark scores?"
    c = ctx.get(CORRELATION)
    if c is None:
        return Section.omit("correlation", title,
                            "no VAL scores (no pool.parquet or no pool_val predictions)")
    blocks = correlation_blocks(c, cohort_words(ctx, c.subset))
    return Section("correlation", title, tuple(blocks), payload_of(c))
