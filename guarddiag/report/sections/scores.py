"""Score sections: benchmark scores (Table 1), span vs seed floor (Table 4), and outside guards
beside the branches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from guarddiag import plots
from guarddiag.analyses.callwords import at_cutoff
from guarddiag.analyses.contamination import copy_items
from guarddiag.analyses.intervals import SEED_WILSON
from guarddiag.analyses.load import LOAD
from guarddiag.analyses.outside import OUTSIDE
from guarddiag.analyses.paired import PAIRED
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import SUBSETS
from guarddiag.analyses.tables import RECIPES
from guarddiag.labels import get_mapping
from guarddiag.protocol import protocol
from guarddiag.report.context import ReportContext
from guarddiag.report.document import (
    Block,
    Bullets,
    Column,
    FigureBlock,
    Paragraph,
    Section,
    Table,
)
from guarddiag.report.jsonable import jsonable, records
from guarddiag.report.sections.common import (
    BOLD_RULE,
    capability_benchmarks,
    cohort_words,
    hull_words,
    missing_steps_sentence,
    one_interval_kind,
    pivot_by_cohort,
    single_seed_note,
)
from guarddiag.report.sections.first_screen import NO_CALL, benchmark_calls
from guarddiag.report.sections.paired import paired_blocks, paired_payload
from guarddiag.roles import is_reference, names_where


def _score_records(ctx: ReportContext) -> list[dict[str, Any]]:
    floors = {(r["benchmark"], r["subset"], r["mapping"]): r
              for r in ctx.result(LOAD).table.iter_rows(named=True)}
    out = []
    for r in ctx.result(SCORES).table.iter_rows(named=True):
        f = floors.get((r["benchmark"], r["subset"], r["mapping"]))
        floor = ({"median": f["floor_median"], "widest": f["floor_widest"],
                  "n_groups": f["n_groups"]} if f and f["n_groups"] else None)
        out.append(jsonable({
            "run": {k: r[k] for k in ("run_id", "guard_kind", "branch", "size", "seed",
                                      "label_policy")},
            "cohort": {"benchmark": r["benchmark"], "benchmark_sha256": r["benchmark_sha256"],
                       "subset": r["subset"], "mapping": r["mapping"],
                       "mapping_applied": r["mapping_applied"], "threshold": r["threshold"],
                       "readout": r["readout"], "prompt_set": r["prompt_set"],
                       "label_policy": r["label_policy"], "lang": r["lang"],
                       "seed_floor": floor},
            "metric": r["metric"], "metric_alias": r["metric_alias"], "value": r["score"],
            "ci_low": r["ci_low"], "ci_high": r["ci_high"], "confidence": r["confidence"],
            "interval": r["interval"],
            "n_resamples": r["n_resamples"], "n": r["n"], "n_failed": r["n_failed"],
            "n_scored": r["n_scored"], "n_positive": r["n_positive"]}))
    return out


def section_scores(ctx: ReportContext) -> Section:
    o = ctx.options
    blocks: list[Block] = []
    for subset in (o.primary_subset, *(s for s in SUBSETS
                                       if s != o.primary_subset)):
        recipes = ctx.result(RECIPES)[subset]
        # 'interval' stays in the CSV (one value: the kind every cell carries), not on screen.
        frame, cols = pivot_by_cohort(one_interval_kind(recipes.table),
                                      entity_cols=["entity", "label_policy", "n_runs",
                                                   "interval"],
                                      bold=capability_benchmarks(ctx, subset=subset))
        name = f"scores_{subset}_{o.mapping}"
        blocks.append(Table(
            name, f"Share read unsafe (%) per recipe and benchmark — {cohort_words(ctx, subset)}."
            f" {hull_words(o.confidence)} {BOLD_RULE}",
            (Column("entity", "recipe / guard"), Column("label_policy", "labels"),
             Column("n_runs", "runs", "int"), *cols), frame,
            collapsed=subset != o.primary_subset))
        if (recipes.table["n_runs"] == 1).any():
            blocks.append(Paragraph(single_seed_note(ctx, subset=subset)))
        if subset == o.primary_subset and recipes.table.height:
            blocks.append(FigureBlock(f"heatmap_{subset}_{o.mapping}",
                                      plots.score_heatmap(recipes),
                                      f"Share read unsafe per recipe and benchmark "
                                      f"({cohort_words(ctx, subset)}); study Table 1. Left: "
                                      "capture on the harmful benchmarks; right: "
                                      "over-refusal on the benign ones, each on its own "
                                      "colour scale."))
            paired = ctx.get(PAIRED)
            blocks += paired_blocks(paired.recipes if paired else None,
                                    f"paired_recipes_{subset}_{o.mapping}")
    runs = ctx.result(SCORES).binary(subset=o.primary_subset, mapping=o.mapping).with_columns(
        pl.col("ci_low").alias("low"), pl.col("ci_high").alias("high"))
    frame, cols = pivot_by_cohort(runs, entity_cols=["run_id", "label_policy"],
                                  bold=capability_benchmarks(ctx))
    blocks.append(Table(
        f"scores_runs_{o.primary_subset}_{o.mapping}",
        f"Every run with its {int(o.confidence * 100)}% Wilson interval — "
        f"{cohort_words(ctx)}. {BOLD_RULE}",
        (Column("run_id", "run"), Column("label_policy", "labels"), *cols), frame,
        collapsed=True))
    blocks.append(Paragraph(single_seed_note(ctx)))
    failed = ctx.result(SCORES).table.filter(pl.col("n_failed") > 0)
    if failed.height:
        blocks.append(Bullets(tuple(
            f"{r['run_id']} on {r['benchmark']} ({r['subset']}): {r['n_failed']} of {r['n']} "
            "prompts failed (output not parsed); the score covers the others and sits in its "
            "own column" for r in failed.filter(pl.col("mapping") == o.mapping)
            .iter_rows(named=True))))
    long = ctx.result(SCORES).table
    blocks.append(Table("scores_long", "All scores in long form, one row per cohort, with "
                        f"the {int(o.confidence * 100)}% Wilson interval of each run (CSV).",
                        (Column("run_id", "run"), Column("benchmark", "benchmark"),
                         Column("subset", "subset"), Column("mapping_applied", "mapping"),
                         Column("lang", "lang"), Column("metric_alias", "metric"),
                         Column("score", "score", "pct", low="ci_low", high="ci_high")),
                        long, csv_only=True))
    paired = ctx.get(PAIRED)
    recipes = ctx.result(RECIPES)[o.primary_subset]
    payload: dict[str, Any] = {
        "scores": _score_records(ctx),
        "paired": paired_payload(paired.recipes if paired else None),
        "recipes": {"interval": SEED_WILSON, "subset": o.primary_subset, "mapping": o.mapping,
                    "bold": sorted(capability_benchmarks(ctx)),
                    "rows": records(one_interval_kind(recipes.table))}}
    items = copy_items(ctx.results.inputs.predictions, mapping=get_mapping(o.mapping),
                       threshold=o.threshold, confidence=o.confidence, subset=o.primary_subset)
    if items is not None and items.height:
        frame, cols = pivot_by_cohort(items.with_columns(pl.col("ci_low").alias("low"),
                                                         pl.col("ci_high").alias("high")),
                                      entity_cols=["run_id", "label_policy"], bold=())
        blocks.insert(-1, Table(
            f"copy_items_{o.primary_subset}_{o.mapping}",
            "COPY by item kind: HarmBench-copyright's song lyrics and book passages are two "
            "request templates, scored apart (prompt-id prefix lyrics_ / passage_) — "
            f"{cohort_words(ctx)}, {int(o.confidence * 100)}% Wilson intervals.",
            (Column("run_id", "run"), Column("label_policy", "labels"), *cols), frame,
            collapsed=True))
        payload["copy_items"] = records(items)
    return Section("scores", "Benchmark scores (Table 1)", tuple(blocks), payload)


def _span_rows(ctx: ReportContext, t: pl.DataFrame) -> pl.DataFrame:
    """The span test's rows with its statistics only: whether Δb passes the widest floor (the
    study's rule, a comparison, not a call) and the first screen's call, never the span test's
    own labels (it cannot tell policy content from a moved threshold)."""
    calls = benchmark_calls(ctx)
    return t.with_columns(
        pl.when(pl.col("delta").is_null() | pl.col("floor_widest").is_null()).then(None)
        .otherwise(pl.col("delta") > pl.col("floor_widest")).alias("span_beyond_floor"),
        pl.col("benchmark").replace_strict(calls, default=NO_CALL).alias("call"),
    ).drop("load", "load_study")


def section_load(ctx: ReportContext) -> Section:
    cut = at_cutoff()
    o, load = ctx.options, ctx.result(LOAD)
    t = _span_rows(ctx, load.table.filter((pl.col("subset") == o.primary_subset)
                                          & (pl.col("mapping") == o.mapping)).sort("benchmark"))
    # On screen, the span test's statistics and the first screen's call (twelve columns at
    # most); the CSV has every column (median Φb, Δb / widest Φb, widest group, df, p-values).
    cols = (Column("benchmark", "benchmark"), Column("metric_alias", "metric"),
            Column("delta", "Δb (pp)", "pp"), Column("floor_widest", "widest Φb (pp)", "pp"),
            Column("span_beyond_floor", "Δb > widest Φb"),
            Column("n_groups", "seed groups", "int"),
            Column("seed_sd", "seed SD (pp)", "pp"), Column("q_span", "q (span)", "p"),
            Column("contrast", f"A-last − B-last at {cut} (pp)", "pp"),
            Column("q_contrast", "q (contrast)", "p"), Column("call", "call (first screen)"))
    a_last = ", ".join(load.a_last)
    blocks: list[Block] = [
        Paragraph("Δb, the label-supervision span, is the mean over model sizes of the range of "
                  "branch scores (each branch averaged over its seeds; teachers excluded). Φb, "
                  f"the seed floor, is the range over the seeds of one recipe (≥ {o.min_seeds} "
                  "seeds); its median and widest value over all recipes are shown. The study "
                  "called a benchmark policy-load where Δb exceeds its widest floor (column "
                  "'Δb > widest Φb', kept for comparison with the paper); that rule is not "
                  "calibrated: under pure seed noise it fires about 2 times in 3 with the "
                  "demo's layout (one size, 11 branches, 3 seed triplets)."),
        Paragraph("The span test's statistics, against seed noise. The seed SD is the pooled "
                  f"within-recipe SD of the seed groups, on df = Σ (seeds − 1). p (span): "
                  "Δb / seed SD against its null distribution when branches differ only by seed "
                  f"noise (Monte Carlo, {load.n_draws:,} draws at this cohort's layout: each "
                  "branch mean with its own variance σ²/seeds). A-last − B-last: the mean of "
                  f"the A-last branches ({a_last}: last policy signal A) minus the mean of the "
                  f"other student branches at P(unsafe) ≥ {cut}, tested with an exact t test on "
                  "the same seed SD; q: Benjamini–Hochberg over this table's benchmarks. This "
                  "test makes no call: a guard that flags more of everything passes it as well "
                  "as policy content does, and it mixes routes. The call column is the first "
                  "screen's (route-matched, at matched thresholds)."),
        Table(f"span_floor_{o.primary_subset}_{o.mapping}",
              f"Δb beside Φb, the study's rule and the span test's statistics per benchmark, "
              f"with the first screen's call — {cohort_words(ctx)} (study Table 4). No "
              "intervals: q are the tests' BH q-values; median Φb, Δb / widest Φb, the widest "
              "group, df and the raw p-values are in the table's CSV.", cols, t,
              collapsed=True),
        FigureBlock(f"span_floor_{o.primary_subset}_{o.mapping}",
                    plots.span_vs_floor(load, subset=o.primary_subset, mapping=o.mapping,
                                        calls=benchmark_calls(ctx)),
                    "Label-supervision span Δb against the seed floor Φb per benchmark, each "
                    "labelled with its first-screen call."),
        Table("span_by_size", "Span per model size: the highest and lowest branch (all "
              "cohorts).", (Column("benchmark", "benchmark"), Column("subset", "subset"),
                            Column("mapping", "mapping"), Column("size", "size"),
                            Column("max_branch", "max"), Column("max_score", "", "pct"),
                            Column("min_branch", "min"), Column("min_score", "", "pct"),
                            Column("range", "range (pp)", "pp")),
              load.by_size, collapsed=True),
        Table("seed_groups", "Seed groups behind the floor (all cohorts).",
              (Column("benchmark", "benchmark"), Column("subset", "subset"),
               Column("mapping", "mapping"), Column("size", "size"),
               Column("branch", "branch"), Column("seeds", "seeds"),
               Column("low", "low", "pct"), Column("high", "high", "pct"),
               Column("range", "range (pp)", "pp")), load.groups, collapsed=True),
    ]
    reasons = t.filter(pl.col("load_reason").is_not_null())
    if reasons.height:
        blocks.insert(3, Bullets(tuple(f"{r['benchmark']}: span test not computed — "
                                       f"{r['load_reason']}"
                                       for r in reasons.iter_rows(named=True))))
    payload = {"benchmarks": records(_span_rows(ctx, load.table)),
               "by_size": records(load.by_size),
               "seed_groups": records(load.groups), "min_seeds": load.min_seeds,
               "subset": o.primary_subset, "mapping": o.mapping, "alpha": load.alpha,
               "a_last": list(load.a_last), "n_draws": load.n_draws,
               "min_prompts": protocol().min_prompts}
    return Section("load", "Policy or capability? Span Δb vs seed floor Φb", tuple(blocks),
                   payload)


def section_outside(ctx: ReportContext) -> Section:
    title = "Outside guards beside the branches (decontaminated prompts)"
    if not ctx.result(OUTSIDE).has_guards:
        return Section.omit("outside", title, "no outside-guard predictions (runs/outside/)")
    by_guard = found.outside if (found := ctx.get(PAIRED)) else ()
    t = one_interval_kind(ctx.result(OUTSIDE).table).with_columns(
        pl.when(pl.col("kind") == "outside").then(pl.col("entity"))
        .otherwise(pl.concat_str([pl.col("size"), pl.col("entity")], separator="/"))
        .alias("who"))
    blocks: list[Block] = [Paragraph(
        f"{hull_words(ctx.options.confidence)} An outside guard is one run. {BOLD_RULE} "
        "One table per binary mapping; a guard whose read-out could not follow the mapping "
        "(binary verdict only) or whose prompt set differs gets its own column."),
        Paragraph(single_seed_note(ctx, subset=ctx.result(OUTSIDE).subset))]
    missing = missing_steps_sentence(ctx)
    if missing:
        blocks.append(Paragraph(missing))
    definitions = ctx.results.inputs.outside_definitions
    if definitions:
        blocks.append(Paragraph("What \"unsafe\" means for each outside guard (its operational "
                                "definition; a score measures that, not harm in general):"))
        blocks.append(Bullets(tuple(f"{run_id.removeprefix('guard/')}: {text}"
                                    for run_id, text in definitions.items())))
    answers = {run: a for run, a in ctx.results.inputs.outside_answers.items()
               if run.removeprefix("guard/") in set(t["entity"].to_list())}
    if answers:
        blocks.append(Paragraph("When and from which identity each outside guard's answers "
                                "were computed (answers are reused only under the same "
                                "identity; `guards score --rescore` asks again):"))
        blocks.append(Bullets(tuple(_answers_line(run, a) for run, a in answers.items())))
    blocks += _own_decontam_blocks(ctx, answers)
    # On screen the outside guards beside the reference recipe they are tested against (every
    # branch is in Table 1); the _all CSV holds every row.
    refs = names_where(ctx.results.inputs.predictions, is_reference())
    for m in sorted(set(t["mapping"].to_list())):
        frame, cols = pivot_by_cohort(t.filter(pl.col("mapping") == m),
                                      entity_cols=["who", "kind", "interval"],
                                      cohort=("mapping_applied", "prompt_set"),
                                      bold=capability_benchmarks(
                                          ctx, subset=ctx.result(OUTSIDE).subset, mapping=m))
        shown = frame.filter((pl.col("kind") != "branch")
                             | pl.col("who").str.split("/").list.last().is_in(list(refs)))
        blocks.append(Table(f"outside_{m}", f"Outside guards beside the reference recipe — "
                            f"decontaminated prompts, {m} mapping, threshold "
                            f"{ctx.options.threshold:g}; every branch recipe is in Table 1 and "
                            f"tables/outside_{m}_all.csv.",
                            (Column("who", "guard / recipe"), Column("kind", "kind"), *cols),
                            shown, collapsed=m != ctx.options.mapping))
        blocks.append(Table(f"outside_{m}_all", f"Outside guards and every branch recipe — "
                            f"decontaminated prompts, {m} mapping.",
                            (Column("who", "guard / recipe"), Column("kind", "kind"), *cols),
                            frame, csv_only=True))
        for res in by_guard:
            if res.family == f"outside:{m}":
                blocks += paired_blocks(res, f"paired_outside_{m}")
    paired = [paired_payload(r) for r in by_guard]
    return Section("outside", title, tuple(blocks),
                   {"rows": records(one_interval_kind(ctx.result(OUTSIDE).table)),
                    "paired": paired, "definitions": dict(definitions),
                    "answers": {run: dict(a) for run, a in answers.items()},
                    "own_decontam": records(ctx.result(OUTSIDE).own_decontam)})


def _own_decontam_blocks(ctx: ReportContext, answers: Mapping[str, Mapping[str, Any]]
                         ) -> list[Block]:
    """The guards audited against their own training data, beside the pool-decontaminated
    numbers every other table uses."""
    own = ctx.result(OUTSIDE).own_decontam
    if own.height == 0:
        return []
    trained = [f"{run.removeprefix('guard/')}: {a['training_rows']} prompts of "
               f"{a['training_data']}" for run, a in answers.items() if a.get("training_data")]
    return [
        Paragraph("Which prompts are \"decontaminated\". Pool-decontaminated: the prompts that "
                  "survive the audit of the branches' training pool (every other table uses "
                  "these). Own-decontaminated: the prompts that survive the audit of the "
                  "guard's own training data. Both: the prompts that survive both. Loose "
                  f"read-out, P(unsafe) ≥ {ctx.options.threshold:g}, Wilson intervals."
                  + (" Training data audited: " + "; ".join(trained) + "." if trained else "")),
        Table("outside_own_decontam", "Outside guards on their own decontaminated prompts",
              (Column("entity", "guard"), Column("benchmark", "benchmark"),
               Column("metric", "metric"), Column("prompts", "prompts"),
               Column("n_scored", "n"), Column("score", "score", "pct"),
               Column("low", "low", "pct"), Column("high", "high", "pct")), own)]


def _answers_line(run_id: str, a: Mapping[str, Any]) -> str:
    when = (a.get("first") or "unknown time") if a.get("first") == a.get("last") \
        else f"{a.get('first')} – {a.get('last')}"
    parts = [f"identity {a.get('fingerprint') or '?'}"]
    if a.get("version"):
        parts.append(f"version {a['version']}")
    if a.get("source"):
        parts.append(f"{a.get('adapter')} {a['source']}")
    if a.get("model_sha256"):
        parts.append(f"file sha256 {str(a['model_sha256'])[:16]}")
    return f"{run_id.removeprefix('guard/')}: computed {when} (UTC); {', '.join(parts)}"
