"""SORRY-Bench sections: turn the SORRY-Bench analyses of the analysis step
(:mod:`guarddiag.analyses.sorry`) into blocks; each omits itself with the analysis's note when
its inputs are absent.

* ``sorry_categories`` - capture per SORRY-Bench domain (recipes, mean over seeds) and per
  category (every run, CSV), the categories whose decisions move most between branches, and a
  heat map.
* ``sorry_robustness`` - SORRY-Bench Table 2: per mutated subset, the change in capture against
  the base prompts with a base-prompt cluster-bootstrap interval, and a figure.
* ``sorry_balance`` - which pillars and domains every scored benchmark tests.

All three use the full prompt sets (decontamination lists are per base benchmark; the mutated
subsets have none).
"""

from __future__ import annotations

import polars as pl

from guarddiag.analyses.sorry import SORRY, SorryCategoriesResult, SorryResults
from guarddiag.report.context import ReportContext, SectionBuilder
from guarddiag.report.document import Block, Column, FigureBlock, Paragraph, Section, Table
from guarddiag.report.jsonable import payload_of
from guarddiag.sorry.plots import plot_balance, plot_category_capture, plot_robustness
from guarddiag.sorry.taxonomy import DOMAINS

NO_SORRY = "the SORRY-Bench analyses were not run"


def _sorry(ctx: ReportContext) -> SorryResults | None:
    return ctx.get(SORRY)


def _domain_table(res: SorryCategoriesResult) -> Table:
    wide = res.domains.pivot(on="domain", index=["entity", "n_runs"], values="capture",
                             aggregate_function="first")
    cols = [Column(d, d, "pct") for d in DOMAINS if d in wide.columns]
    return Table(
        "sorry_domains", f"Share of {res.benchmark} prompts read unsafe per SORRY-Bench domain "
        f"(hate speech / crimes or torts / inappropriate topics / unqualified advice), "
        f"mean over seeds; {res.mapping} mapping, threshold {res.threshold:g}, full prompt "
        "set. Policy A blocks the last two domains, policy B mostly allows them.",
        (Column("entity", "recipe / guard"), Column("n_runs", "runs", "int"), *cols),
        wide.select(["entity", "n_runs", *[c.key for c in cols]]), collapsed=True)


MIN_RANKED_PROMPTS = 30
"""A category with fewer prompts is marked and never ranked: its span moves by several points
when one prompt flips."""


def _sensitive_blocks(res: SorryCategoriesResult) -> list[Block]:
    if res.sensitive is None:
        return [Paragraph(res.sensitive_note or "")]
    t = res.sensitive.table
    ranked = t.filter(pl.col("n") >= MIN_RANKED_PROMPTS)
    small = t.filter(pl.col("n") < MIN_RANKED_PROMPTS).sort("domain", "category").with_columns(
        pl.lit(f"< {MIN_RANKED_PROMPTS} prompts: not ranked").alias("mark"))
    cols = (Column("category", "category"), Column("domain", "domain"),
            Column("n", "prompts", "int"))
    blocks: list[Block] = []
    if ranked.height:
        blocks.append(Table(
            "sorry_policy_sensitive", "Categories whose decisions move most between "
            f"branches, among those with at least {MIN_RANKED_PROMPTS} prompts: span = max - "
            "min over branches of capture (mean over seeds, then over sizes); flips = share of "
            "prompts on which the branches' majority decisions disagree; lowest / highest: the "
            "branch with the lowest / highest capture (first size), a tie going to the branch "
            "listed first in the specs (reference, E1…E10). Bold: the largest span (most "
            "policy-sensitive), not the best guard.",
            (*cols, Column("span", "span", "pp", best="max"),
             Column("flip_share", "flips", "pct"), Column("min_branch", "lowest"),
             Column("max_branch", "highest")), ranked.head(12)))
    if small.height:
        blocks.append(Table(
            "sorry_small_categories", f"Categories with fewer than {MIN_RANKED_PROMPTS} "
            "prompts, in domain and name order — marked and not ranked: one prompt moves "
            "their span by several points. No bold.",
            (*cols, Column("span", "span", "pp"), Column("flip_share", "flips", "pct"),
             Column("mark", "note")), small, collapsed=True))
    return blocks


def sorry_categories(ctx: ReportContext) -> Section:
    sid, title = "sorry_categories", "SORRY-Bench: capture per domain and category"
    sorry = _sorry(ctx)
    res = sorry.categories if sorry else None
    if res is None:
        return Section.omit(sid, title, (sorry.categories_note if sorry else None) or NO_SORRY)
    blocks: list[Block] = [_domain_table(res), *_sensitive_blocks(res)]
    blocks.append(Table("sorry_categories_runs", "Capture per run and SORRY-Bench category "
                        "(CSV).", (Column("run_id", "run"), Column("category", "category"),
                                   Column("capture", "capture", "pct")),
                        res.breakdown.by_category, csv_only=True))
    blocks.append(FigureBlock("sorry_categories", plot_category_capture(
        res.breakdown, benchmark=res.benchmark),
        f"Capture per category and run on {res.benchmark}."))
    return Section(sid, title, tuple(blocks), payload_of(res))


def sorry_robustness(ctx: ReportContext) -> Section:
    sid, title = "sorry_robustness", "Robustness to linguistic mutations (SORRY-Bench Table 2)"
    sorry = _sorry(ctx)
    res = sorry.robustness if sorry else None
    if res is None:
        return Section.omit(sid, title, (sorry.robustness_note if sorry else None) or NO_SORRY)
    o = ctx.options
    rows = res.to_frame()
    table = Table(
        "sorry_robustness", f"Change in capture on mutated prompts against their base "
        f"prompts (points), {int(o.confidence * 100)}% interval from {o.n_resamples:,} "
        "bootstrap resamples of base prompts (all variants of a base prompt move together);"
        " negative = the mutation slips past the guard.",
        (Column("run_id", "run"), Column("mutation", "mutation"),
         Column("capture_base", "base", "pct"),
         Column("capture_mutated", "mutated", "pct"),
         Column("delta", "Δ", "pp", low="delta_low", high="delta_high")), rows,
        collapsed=True)
    fig = FigureBlock("sorry_robustness", plot_robustness(res),
                      "Δ capture per mutation and run, with cluster-bootstrap intervals.")
    return Section(sid, title, (table, fig), {"rows": rows.to_dicts(),
                                              "n_resamples": o.n_resamples})


def sorry_balance(ctx: ReportContext) -> Section:
    sid, title = "sorry_balance", "Which harms each benchmark tests"
    sorry = _sorry(ctx)
    res = sorry.balance if sorry else None
    if res is None:
        return Section.omit(sid, title, (sorry.balance_note if sorry else None) or NO_SORRY)
    summary = res.summary_frame()
    table = Table(
        "sorry_balance", "Pillars tested per benchmark (categories mapped onto the 24 "
        "pillars; data_manifests/taxonomy). Ratio = most / least represented tested "
        "pillar; untested pillars are listed, not in the ratio.",
        (Column("benchmark", "benchmark"), Column("n", "prompts", "int"),
         Column("n_mapped", "mapped", "int"), Column("pillars_tested", "pillars", "int"),
         Column("imbalance_ratio", "ratio", "num1"), Column("most", "most"),
         Column("least", "least"), Column("untested", "untested"),
         Column("category_note", "not assessable because")), summary, collapsed=True)
    fig = FigureBlock("sorry_balance", plot_balance(res),
                      "Share of each benchmark's prompts per pillar, and its domain mix.")
    return Section(sid, title, (table, fig), {"benchmarks": summary.to_dicts()})


SORRY_SECTIONS: tuple[SectionBuilder, ...] = (sorry_categories, sorry_robustness, sorry_balance)
"""The three SORRY-Bench section builders, in report order."""
