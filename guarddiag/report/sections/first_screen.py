"""The report's first screen: what was run and on what guards, the per-benchmark calls as one
compact table, where this run stands beside the study, and one sentence on what a reader may
cite.

The calls come from the ``calls`` analysis (:mod:`guarddiag.analyses.calls`): one row per
benchmark at the primary cohort, each route's call beside the benchmark's, stability across
analyst choices, and the route-matched effect at the matched threshold and at the cut-off. This
table is the report's one verdict: every other section, figure, results.json's summary, the
disclosure card and the terminal headline read their labels from :func:`benchmark_calls`.
Without policy-neutral rows (no pool) there is no A/B call at all, and the screen says how to
give them; it never falls back to the span test's labels.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from guarddiag.analyses.calls import CALLS_ANALYSIS, LESS, MORE, CallsResult
from guarddiag.analyses.callwords import at_cutoff
from guarddiag.analyses.competence import COMPETENCE
from guarddiag.analyses.provenance import PROVENANCE
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.study_calls import contradictions
from guarddiag.report.context import ReportContext
from guarddiag.report.document import Block, Column, Paragraph, Section, Table
from guarddiag.report.jsonable import records
from guarddiag.report.sections.common import cohort_words, pct
from guarddiag.report.sections.provenance import demo_banner

TITLE = "What was run and what it says"
NO_CALL = "no call"
"""Every benchmark's call where the report has no policy-neutral rows to match thresholds on."""
NO_NEUTRAL = ("No A/B call: the calls read every run at the threshold that gives it the "
              "reference's false-flag rate on policy-neutral rows (the pool's val rows both "
              "policies label safe), and this report has no pool. Give it one: guarddiag "
              "report --pool work/pool/pool.parquet (or report(..., pool=...)). Without it a "
              "guard that simply flags more of everything is indistinguishable from policy "
              "content, so nothing here is called policy or capability.")

CALL_SCHEMA: dict[str, Any] = {
    "benchmark": pl.String, "call": pl.String, "routes": pl.String, "stable": pl.String,
    "effect": pl.Float64, "effect_low": pl.Float64, "effect_high": pl.Float64,
    "effect_05": pl.Float64, "effect_05_low": pl.Float64, "effect_05_high": pl.Float64,
    "study": pl.String}
"""The first screen's call table: one row per benchmark."""

def call_columns() -> tuple[Column, ...]:
    """The first screen's call table's columns (its effect read at the protocol's cut-off)."""
    return (
        Column("benchmark", "benchmark"), Column("call", "call"),
        Column("routes", "each route's call"), Column("stable", "stable?"),
        Column("effect", "A − B, matched (pp)", "pp", low="effect_low", high="effect_high"),
        Column("effect_05", f"A − B at {at_cutoff()} (pp)", "pp", low="effect_05_low",
               high="effect_05_high"),
        Column("study", "vs the study"))


def shown_call(call: str, carried_by: str | None) -> str:
    """A call as the report writes it: "A flags more (distill only)" where only some routes
    carry it."""
    return f"{call} ({carried_by} only)" if carried_by else call


def _from_calls(calls: CallsResult) -> pl.DataFrame:
    h = calls.headline()
    study = {r["benchmark"]: f"matched: {r['verdict']}; {at_cutoff()}: {r['verdict_05']}"
             for r in calls.study.iter_rows(named=True)} if calls.study.height else {}

    def stable(r: dict[str, Any]) -> str:
        return "yes" if r["stable"] else f"no: flips with {r.get('flips') or 'a route'}"

    rows = [{"benchmark": r["benchmark"], "call": shown_call(r["call"], r["carried_by"]),
             "routes": r["route_calls"] or "—", "stable": stable(r),
             **{k: r[k] for k in ("effect", "effect_low", "effect_high", "effect_05",
                                  "effect_05_low", "effect_05_high")},
             "study": study.get(r["benchmark"], "—")}
            for r in h.sort("benchmark").iter_rows(named=True)]
    return pl.DataFrame(rows, schema=CALL_SCHEMA)


def _no_calls(ctx: ReportContext) -> pl.DataFrame:
    rows = [{"benchmark": b, "call": NO_CALL, "routes": "—", "stable": "—", "study": "—"}
            for b in sorted(ctx.benchmarks)]
    return pl.DataFrame(rows, schema=CALL_SCHEMA)


def call_table(ctx: ReportContext) -> tuple[pl.DataFrame, str]:
    """The first screen's call table and its source ('calls', or 'none' without one)."""
    calls = ctx.get(CALLS_ANALYSIS)
    if calls is not None:
        return _from_calls(calls), "calls"
    return _no_calls(ctx), "none"


def benchmark_calls(ctx: ReportContext) -> dict[str, str]:
    """Benchmark → its call as the first screen shows it: the one label every section uses."""
    table, _ = call_table(ctx)
    return dict(table.select("benchmark", "call").iter_rows())


def is_ab_call(call: str) -> bool:
    """Whether a first-screen call says the A-last branches flag more or less (any route)."""
    return call.startswith((MORE, LESS))


def _what_was_run(ctx: ReportContext) -> str:
    scores = ctx.result(SCORES).table
    branch = scores.filter(pl.col("guard_kind") == "branch")
    runs = scores.select("run_id", "guard_kind").unique()
    recipes = branch.select("size", "branch", "seed").unique()
    per_recipe: list[int] = recipes.group_by("size", "branch").len()["len"].to_list()
    seeds = sorted(set(branch["seed"].drop_nulls().to_list()))
    sizes = sorted(set(branch["size"].to_list()))
    n_out = runs.filter(pl.col("guard_kind") == "outside").height
    seed_words = (f"{min(per_recipe)}–{max(per_recipe)} seeds per recipe"
                  if per_recipe and min(per_recipe) != max(per_recipe)
                  else f"{max(per_recipe, default=0)} seed(s) per recipe")
    text = (f"Run: {runs.height} scored runs — {recipes.select('size', 'branch').unique().height}"
            f" branch recipes at size(s) {', '.join(sizes) or '—'}, {seed_words} (seeds "
            f"{', '.join(str(s) for s in seeds) or '—'}), {n_out} outside guard(s) — on "
            f"{len(ctx.benchmarks)} benchmarks; prompts: {cohort_words(ctx, threshold=False)}.")
    prov, c = ctx.get(PROVENANCE), ctx.get(COMPETENCE)
    if prov is not None and prov.table.height:
        text += f" The guards: {prov.sentence}."
    if c is None:
        text += " Competence gate: not computed (no reference run on a clear-harm benchmark)."
    else:
        text += (f" Competence gate: {'FAILED' if c.below_floor else 'passed'} — the "
                 f"{c.branch} recipe's lowest mean CAP on clear harm is {pct(c.lowest_mean)} "
                 f"against the {pct(c.floor)} floor"
                 + ("; every number below describes these guards, not the study's." if
                    c.below_floor else "."))
    return text


def _operating_point(calls: CallsResult) -> str:
    """Where the effects are read, named with its numbers."""
    cut = at_cutoff()
    ref = calls.reference_thresholds()
    target = ref["target"].drop_nulls()
    n = ref["n_neutral"].drop_nulls()
    at = (f"the reference's false-flag rate of {pct(float(target.mean()))} on "  # type: ignore[arg-type]
          f"{int(n.max()):,} policy-neutral val rows" if target.len() and n.len()  # type: ignore[arg-type]
          else "the reference's false-flag rate on the policy-neutral val rows")
    text = (f"Effects are A-last − B-last (route-matched), read at each run's matched threshold: "
            f"the threshold that gives it {at} ({calls.mapping} mapping); the raw contrast at "
            f"P(unsafe) ≥ {cut} sits beside it.")
    bad = calls.degenerate()
    if bad.height:
        by_branch: dict[str, list[str]] = {}
        for r in bad.iter_rows(named=True):
            by_branch.setdefault(f"{r['size']}/{r['branch']}", []).append(
                r["run_id"].rsplit("seed=", 1)[-1])
        runs = "; ".join(f"{b} (seed {', '.join(seeds)})" for b, seeds in by_branch.items())
        edge = int(bad["degenerate"].str.contains("matched threshold").sum())
        weak = int(bad["degenerate"].str.contains("below TF-IDF").sum())
        text += (f" Degenerate runs, left out of every contrast they belong to: {runs} — "
                 f"{edge} with a matched threshold within 0.001 of 0 or 1, {weak} catching less "
                 "clear harm than TF-IDF (each reason in the calls section).")
    return text


def cite_sentence(ctx: ReportContext, table: pl.DataFrame) -> str:
    """The one sentence on what a reader may cite."""
    prov, c = ctx.get(PROVENANCE), ctx.get(COMPETENCE)
    if prov is not None and prov.demo:
        return ("Cite: nothing about guards — these are demo-size models; cite the method and "
                "the table's layout only.")
    if table["call"].eq(NO_CALL).all():
        return "Cite: no call — the report has no policy-neutral rows (see above)."
    citable = table.filter(~pl.col("call").str.starts_with("undetermined")
                           & ~pl.col("call").is_in(["uninformative", "routes disagree"])
                           & (pl.col("stable") == "yes"))
    if c is not None and c.below_floor:
        more = citable.filter(pl.col("call").str.starts_with(MORE))
        named = ", ".join(f"{r['benchmark']} ({r['call']})" for r in more.iter_rows(named=True))
        return ("Cite: " + (f"only the stable 'A flags more' call(s) — {named} — each with its "
                            "effect, interval and the routes that carry it" if named else
                            "no call: no 'A flags more' call is stable")
                + "; the guards failed the competence gate, so no other call means detection "
                "or its absence.")
    if not citable.height:
        return "Cite: no call — none is determined and stable at this cohort."
    return (f"Cite: the calls for {', '.join(citable['benchmark'].to_list())}, each with its "
            "effect, interval, the routes that carry it and this cohort; no call marked "
            "unstable, undetermined or 'routes disagree'.")


def section_first_screen(ctx: ReportContext) -> Section:
    cut = at_cutoff()
    table, source = call_table(ctx)
    calls: CallsResult | None = ctx.get(CALLS_ANALYSIS)
    blocks: list[Block] = list(demo_banner(ctx))
    # The cite sentence before the table: both fit one screen with a demo's ~26 benchmarks.
    blocks += [Paragraph(_what_was_run(ctx)), Paragraph(cite_sentence(ctx, table), cite=True)]
    if calls is None:
        blocks.append(Paragraph(NO_NEUTRAL))
        caption = "No A/B call without policy-neutral rows (above)."
    else:
        blocks.append(Paragraph(_operating_point(calls)))
        against = contradictions(calls.study)
        if against:
            blocks.append(Paragraph(against))
        caption = ("Calls at the primary cohort (calls analysis): call = the benchmark's, from "
                   "its routes' (\"distill only\": the other route showed nothing); stable? = "
                   "the benchmark's and every route's call agree in every cell of the "
                   "stability table; A − B = the route-matched A-last vs B-last contrast of "
                   f"the routes that carry the call, at the matched threshold and at {cut}, with "
                   "its interval; vs the study = same / opposite / not shown here beside the "
                   "study's direction.")
    blocks.append(Table("first_screen_calls", caption, call_columns(), table))
    payload = {"source": source, "calls": records(table),
               "cite": cite_sentence(ctx, table), "what_was_run": _what_was_run(ctx),
               "operating_point": _operating_point(calls) if calls is not None else NO_NEUTRAL,
               "contradictions": contradictions(calls.study) if calls is not None else ""}
    return Section("first_screen", TITLE, tuple(blocks), payload)
