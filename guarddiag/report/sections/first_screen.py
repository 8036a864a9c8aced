"""The report's first screen: what was run, the per-benchmark calls as one compact table, and
one sentence on what a reader may cite.

The calls come from the ``calls`` analysis when it is registered (its ``headline()``: one row
per benchmark at the primary cohort, with stability and the study's direction); without it,
from the calibrated load test (:mod:`guarddiag.analyses.loadtest`) at the report's primary
cohort, whose rows carry no stability check and no study direction. Every number shown here is
a cell of this section's table or of the load table it names; the prose quotes those cells.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from guarddiag.report.context import ReportContext
from guarddiag.report.document import Block, Column, Paragraph, Section, Table
from guarddiag.report.jsonable import records
from guarddiag.report.sections.common import cohort_words, pct
from guarddiag.report.sections.provenance import demo_banner

TITLE = "What was run and what it says"

CALL_SCHEMA: dict[str, Any] = {
    "benchmark": pl.String, "call": pl.String, "stable": pl.String, "effect": pl.Float64,
    "effect_low": pl.Float64, "effect_high": pl.Float64, "study_direction": pl.String}
"""The first screen's call table: one row per benchmark."""

CALL_COLUMNS = (
    Column("benchmark", "benchmark"), Column("call", "call"), Column("stable", "stable?"),
    Column("effect", "A-last − B-last (pp)", "pp", low="effect_low", high="effect_high"),
    Column("study_direction", "study's direction"))


def _from_calls(calls: Any) -> pl.DataFrame:
    """The ``calls`` analysis's headline, one row per benchmark."""
    h = calls.headline()

    def stable(r: dict[str, Any]) -> str:
        if r.get("stable") is None:
            return "—"
        return "yes" if r["stable"] else f"no: flips with {r.get('flips') or 'a choice'}"

    rows = [{"benchmark": r["benchmark"], "call": r["call"], "stable": stable(r),
             "effect": r.get("effect"), "effect_low": r.get("effect_low"),
             "effect_high": r.get("effect_high"),
             "study_direction": r.get("study_direction") or "—"}
            for r in h.sort("benchmark").iter_rows(named=True)]
    return pl.DataFrame(rows, schema=CALL_SCHEMA)


def _from_load(ctx: ReportContext) -> pl.DataFrame:
    """The load test's calls at the primary cohort: no stability check, no study direction,
    the A-last − B-last contrast without an interval (the load table gives its q-value)."""
    o = ctx.options
    t = ctx.results.load.table.filter((pl.col("subset") == o.primary_subset)
                                      & (pl.col("mapping") == o.mapping)).sort("benchmark")
    rows = [{"benchmark": r["benchmark"], "call": r["load"], "stable": "not checked",
             "effect": r["contrast"], "effect_low": None, "effect_high": None,
             "study_direction": "—"} for r in t.iter_rows(named=True)]
    return pl.DataFrame(rows, schema=CALL_SCHEMA)


def call_table(ctx: ReportContext) -> tuple[pl.DataFrame, str]:
    """The first screen's call table and its source ('calls' or 'load')."""
    calls = ctx.results.values.get("calls")
    if calls is not None:
        return _from_calls(calls), "calls"
    return _from_load(ctx), "load"


def _what_was_run(ctx: ReportContext) -> str:
    scores = ctx.results.scores.table
    branch = scores.filter(pl.col("guard_kind") == "branch")
    runs = scores.select("run_id", "guard_kind").unique()
    recipes = branch.select("size", "branch", "seed").unique()
    per_recipe = recipes.group_by("size", "branch").len()["len"]
    seeds = sorted(set(branch["seed"].drop_nulls().to_list()))
    sizes = sorted(set(branch["size"].to_list()))
    n_out = runs.filter(pl.col("guard_kind") == "outside").height
    seed_words = (f"{per_recipe.min()}–{per_recipe.max()} seeds per recipe"
                  if per_recipe.len() and per_recipe.min() != per_recipe.max()
                  else f"{per_recipe.max() or 0} seed(s) per recipe")
    text = (f"Run: {runs.height} scored runs — {recipes.select('size', 'branch').unique().height}"
            f" branch recipes at size(s) {', '.join(sizes) or '—'}, {seed_words} (seeds "
            f"{', '.join(str(s) for s in seeds) or '—'}), {n_out} outside guard(s) — on "
            f"{len(ctx.benchmarks)} benchmarks; primary cohort: {cohort_words(ctx)}.")
    c = ctx.results.competence
    if c is None:
        text += " Competence gate: not computed (no reference run on a clear-harm benchmark)."
    else:
        text += (f" Competence gate: {'FAILED' if c.below_floor else 'passed'} — the "
                 f"{c.branch} recipe's lowest mean CAP on clear harm is {pct(c.lowest_mean)} "
                 f"against the {pct(c.floor)} floor.")
    return text


def cite_sentence(ctx: ReportContext, table: pl.DataFrame) -> str:
    """The one sentence on what a reader may cite."""
    prov, c = ctx.results.provenance, ctx.results.competence
    if prov is not None and prov.demo:
        return ("Cite: nothing about guards — these are demo-size models; cite the method and "
                "the table's layout only.")
    citable = table.filter(~pl.col("call").is_in(["undetermined", "uninformative"])
                           & ~pl.col("stable").str.starts_with("no:"))
    if c is not None and c.below_floor:
        content = citable.filter(pl.col("call") == "policy content")["benchmark"].to_list()
        return ("Cite: " + (f"only the stable policy-content call(s) ({', '.join(content)}), "
                            "each with its effect and interval" if content else
                            "no call: none of the policy-content calls is stable")
                + "; the guards failed the competence gate, so no capability call means "
                "detection.")
    if not citable.height:
        return "Cite: no call — none is determined and stable at this cohort."
    support = ("effect and interval" if table["effect_low"].is_not_null().any()
               else "effect and the load table's q-value")
    return (f"Cite: the calls for {', '.join(citable['benchmark'].to_list())}, each with its "
            f"{support} and this cohort; no score difference inside a benchmark's seed floor, "
            "and no call marked unstable or undetermined.")


def section_first_screen(ctx: ReportContext) -> Section:
    table, source = call_table(ctx)
    if source == "calls":
        caption = ("Calls at the primary cohort (calls analysis): stable? = every cell of the "
                   "stability table agrees; effect = the route-matched A-last vs B-last "
                   "contrast with its interval; study's direction = whether the study's effect "
                   "points the same way.")
    else:
        caption = ("Calls of the calibrated load test ('Policy or capability?'), primary "
                   "cohort; no interval, stability or study direction without the calls "
                   "analysis.")
    blocks: list[Block] = list(demo_banner(ctx))
    # The cite sentence before the table: both fit one screen with a demo's ~26 benchmarks.
    blocks += [Paragraph(_what_was_run(ctx)),
               Paragraph(cite_sentence(ctx, table), cite=True),
               Table("first_screen_calls", caption, CALL_COLUMNS, table)]
    payload = {"source": source, "calls": records(table),
               "cite": cite_sentence(ctx, table), "what_was_run": _what_was_run(ctx)}
    return Section("first_screen", TITLE, tuple(blocks), payload)
