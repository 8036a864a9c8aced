"""Sections on the data: training-pool overlap (contamination), the validation split, and the
dual-policy pool."""

from __future__ import annotations

from typing import Any

import polars as pl

from guarddiag import plots
from guarddiag.analyses.contamination import CONTAMINATION
from guarddiag.analyses.pool import POOL_STATS, VAL_OVERLAP
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.valsets import VAL_SETS_ANALYSIS
from guarddiag.audit.provenance import compared_of, describe_source
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
from guarddiag.report.jsonable import payload_of, records
from guarddiag.report.sections.common import decontam_level, pivot_by_cohort
from guarddiag.report.sections.valparts import val_part_blocks


def section_contamination(ctx: ReportContext) -> Section:
    title = "Training-pool overlap (contamination audit)"
    c = ctx.get(CONTAMINATION)
    flags, flag_table = flag_source_blocks(ctx)
    if c is None:
        said = "".join(f". {b.text}" for b in flags if isinstance(b, Paragraph))
        return Section.omit("contamination", title, f"no audit summary.json was found{said}")
    t = c.table
    short = ("" if c.short_words is None or c.short_threshold is None else
             f"; ≥ {c.short_threshold:g} for prompts of fewer than {c.short_words} distinct "
             "words, where one changed word can flip the meaning")
    near = (f"near duplicates (word-set Jaccard ≥ {c.near_threshold:g}{short}; no exact "
            "overlap) are a separate column. A near pair of Jaccard 1.0 has the same words in "
            "another order" if c.near_dup else "near-duplicate search was not run")
    t, leak, contrast = _with_contrast(c)
    columns = (Column("benchmark", "benchmark"), Column("n", "n", "int"),
               Column("n_exact", "exact", "int"), Column("share_exact", "exact %", "pct"),
               Column(f"n_near{leak}", "near", "int"),
               Column(f"share_near{leak}", "near %", "pct"),
               *((Column(f"n_template{leak}", "template", "int"),
                  Column(f"share_template{leak}", "template %", "pct")) if c.templates else ()),
               *((Column(f"n_contained{leak}", "contained", "int"),
                  Column(f"share_contained{leak}", "contained %", "pct")) if c.containment
                 else ()),
               *((Column("n_contrast", "contrast pair", "int"),) if leak else ()),
               Column("n_kept", "kept", "int"))
    level = decontam_level(ctx)
    kept = (f" Kept = the prompts left in the benchmark's decontaminated subset, the ones every "
            f"'decontaminated' table scores: here the audit removed "
            f"{level + ' overlaps' if level else 'what its summary says'}"
            + ("; the other kinds are counted but stay in the decontaminated subset"
               if level == "exact" else "") + ".")
    template = ("" if not c.templates else
                " Template overlaps (a separate column, no exact overlap) are pool rows that ask "
                "the prompt's sentence about other titles or names: quoted spans and capitalised "
                "names after 'by', 'from' or 'of' are masked before comparing "
                f"({c.template_definition or 'see audit'}).")
    contained = ("" if not c.containment else
                 " Contained overlaps (a separate column, no exact overlap) are pool rows that "
                 "hold most of the prompt's three-word runs, whatever the row's length: a "
                 "jailbreak wrapper or a post quoting the prompt "
                 f"({c.containment_definition or 'see audit'}).")
    blocks: list[Block] = [
        Paragraph(f"Exact overlap = equal after normalisation ({c.normalisation or 'see audit'}"
                  f"); {near}. Pool: {c.pool_rows or 0:,} rows.{template}{contained}{kept}"
                  f"{contrast}"),
        Table("overlap", "Benchmark prompts found in the training pool", columns, t),
        FigureBlock("overlap", plots.overlap_bars(c),
                    "Share of each benchmark's prompts found in the training pool "
                    "(study Fig. 2a)."),
    ]
    blocks += flags
    if c.unavailable:
        blocks.append(Bullets(tuple(f"{k}: unavailable ({v})"
                                    for k, v in sorted(c.unavailable.items()))))
    blocks += example_blocks(c.examples, t["benchmark"].to_list())
    payload: dict[str, Any] = {"benchmarks": records(t), "pool_rows": c.pool_rows,
               "near_threshold": c.near_threshold, "near_dup": c.near_dup,
               "short_words": c.short_words, "short_threshold": c.short_threshold,
               "unavailable": dict(c.unavailable)}
    if flag_table is not None:
        payload |= {"flag_sources": records(flag_table)}
    if c.templates:
        payload |= {"templates": True, "template_definition": c.template_definition}
    if c.containment:
        payload |= {"containment": True, "containment_definition": c.containment_definition}
    return Section("contamination", title, tuple(blocks), payload)


FLAG_SOURCE_SCHEMA = {"benchmark": pl.String, "audit_dir": pl.String, "audit_id": pl.String,
                      "pool_sha256": pl.String, "pool_rows": pl.Int64, "compared": pl.String,
                      "drops": pl.String,
                      "n": pl.Int64, "n_kept": pl.Int64, "via": pl.String}


def flag_source_blocks(ctx: ReportContext) -> tuple[list[Block], pl.DataFrame | None]:
    """The audit each scored benchmark's decontamination flags came from: one sentence per
    audit naming its benchmarks, and the table (None where no predictions file records one)."""
    inputs = ctx.results.inputs
    sources = {b: s for b, s in inputs.flag_sources.items() if b in ctx.benchmarks}
    blocks: list[Block] = []
    unrecorded = ("" if not inputs.unrecorded_flag_files else
                  f" {', '.join(inputs.unrecorded_flag_files)} record no audit for their flags "
                  "(written before these records, or by a tool that keeps none).")
    if not sources:
        # No table records its audit (all written before these records): as before them.
        return blocks, None
    by_audit: dict[str, list[str]] = {}
    for bench, source in sorted(sources.items()):
        by_audit.setdefault(describe_source(source), []).append(bench)
    named = "; ".join(f"{audit} for {', '.join(benches)}" for audit, benches in by_audit.items())
    blocks.append(Paragraph(
        f"Which prompts count as decontaminated (survives_decontam) comes, per benchmark, from "
        f"the audit that covered it — {len(by_audit)} audit(s): {named}. A benchmark's flags "
        f"change only with its own audit.{unrecorded}"))
    frame = pl.DataFrame(
        [{"benchmark": b, "audit_dir": s.audit_dir, "audit_id": s.audit_id,
          "pool_sha256": s.pool_sha256, "pool_rows": s.pool_rows,
          "compared": compared_of(s.options), "drops": s.drops,
          "n": s.n, "n_kept": s.n_kept, "via": s.via} for b, s in sorted(sources.items())],
        schema=FLAG_SOURCE_SCHEMA)
    columns = (Column("benchmark", "benchmark"), Column("audit_dir", "audit folder"),
               Column("audit_id", "audit"), Column("compared", "compared"),
               Column("drops", "drops"),
               Column("n", "audited n", "int"), Column("n_kept", "kept", "int"),
               Column("via", "inherited from"))
    blocks.append(Table("flag_sources", "The audit each benchmark's decontamination flags "
                        "come from", columns, frame, collapsed=True))
    return blocks, frame


def _with_contrast(c: Any) -> tuple[pl.DataFrame, str, str]:
    """The overlap table with its contrast pairs: near / template / contained counted as leaks
    only (``<column>_leak``: the kind's count less its contrast pairs) and ``n_contrast``;
    returns (table, column suffix, sentence). Without contrast pairs: the table as it is."""
    if c.contrast is None:
        return (c.table, "", " Opposite-label contrast pairs could not be told apart (no "
                "overlap.parquet or pool labels), so every near, template and contained "
                "overlap is counted as a leak.")
    t = c.table.join(c.contrast, on="benchmark", how="left").with_columns(
        pl.col("^n_contrast.*$").fill_null(0))
    for k in ("near", "template", "contained"):
        if f"n_{k}" in t.columns:
            t = t.with_columns((pl.col(f"n_{k}") - pl.col(f"n_contrast_{k}")).alias(
                f"n_{k}_leak")).with_columns(
                (pl.col(f"n_{k}_leak") / pl.col("n")).alias(f"share_{k}_leak"))
    return (t, "_leak", " Near, template and contained count leaks only: a match whose pool "
            "row is labelled, under both policies, on the other side of the benchmark's kind "
            "(a benign rewrite of a harmful prompt, or the reverse) is an opposite-label "
            "contrast pair, not a leak of the prompt's label, and its prompt is counted under "
            "'contrast pair' (prompts all of whose matches are such rows); the CSV keeps the "
            "audit's raw counts.")


EXAMPLES_SHOWN = 3
"""Overlap examples shown per benchmark and kind; every example is in overlap_examples_all.csv."""
_EXAMPLE_CHARS = 100
_EXAMPLE_SCHEMA: dict[str, Any] = {
    "benchmark": pl.String, "kind": pl.String, "note": pl.String, "prompt_id": pl.String,
    "pool_id": pl.String, "similarity": pl.Float64, "benchmark_text": pl.String,
    "pool_text": pl.String}


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXAMPLE_CHARS else text[:_EXAMPLE_CHARS - 1] + "…"


def example_blocks(examples: Any, benchmarks: list[str]) -> list[Block]:
    """The audit's overlap examples as one table, at most :data:`EXAMPLES_SHOWN` per benchmark
    and kind with their texts cut to one line, and every example whole in a CSV."""
    rows = []
    for bench in benchmarks:
        for e in examples.get(bench) or ():
            sim = e.get("similarity")
            rows.append({"benchmark": bench, "kind": str(e.get("kind", "")),
                         "note": e.get("note") or None, "prompt_id": str(e.get("prompt_id", "")),
                         "pool_id": str(e.get("pool_id", "")),
                         "similarity": float(sim) if isinstance(sim, (int, float)) else None,
                         "benchmark_text": str(e.get("benchmark_text", "")),
                         "pool_text": str(e.get("pool_text", ""))})
    if not rows:
        return []
    every = pl.DataFrame(rows, schema=_EXAMPLE_SCHEMA)
    shown = every.with_columns(pl.int_range(pl.len()).over("benchmark", "kind").alias("_i")) \
        .filter(pl.col("_i") < EXAMPLES_SHOWN).drop("_i").with_columns(
            pl.col("benchmark_text").map_elements(_short, return_dtype=pl.String)
            .alias("benchmark_short"),
            pl.col("pool_text").map_elements(_short, return_dtype=pl.String).alias("pool_short"))
    cols = (Column("benchmark", "benchmark"), Column("kind", "kind"),
            Column("prompt_id", "prompt"), Column("benchmark_short", "benchmark text"),
            Column("pool_id", "pool row"), Column("similarity", "similarity", "num3"),
            Column("pool_short", "pool text"))
    return [Table("overlap_examples", f"Example overlaps: at most {EXAMPLES_SHOWN} per "
                  f"benchmark and kind ({shown.height} of {every.height}), texts cut to "
                  f"{_EXAMPLE_CHARS} characters; every example, whole, is in "
                  "tables/overlap_examples_all.csv.", cols, shown, collapsed=True),
            Table("overlap_examples_all", "Every overlap example of the audit, texts whole.",
                  (*cols[:3], Column("benchmark_text", "benchmark text"), *cols[4:6],
                   Column("pool_text", "pool text"), Column("note", "note")), every,
                  csv_only=True)]


def section_val(ctx: ReportContext) -> Section:
    title = "Validation split: accuracy and overlap with training"
    if ctx.get(VAL_OVERLAP) is None:
        return Section.omit("val", title, "no pool.parquet")
    blocks: list[Block] = [Paragraph(
        "The primary VAL is 4-class accuracy under policy A on the English val rows, the only "
        "rows that choose each run's kept checkpoint. Other languages are reported one by one "
        "below and never choose weights.")]
    val = ctx.result(SCORES).table.filter(pl.col("metric") == "VAL").with_columns(
        pl.col("ci_low").alias("low"), pl.col("ci_high").alias("high"),
        pl.concat_str([pl.lit("VAL lang="), pl.col("lang")]).alias("benchmark"))
    if val.height:
        frame, cols = pivot_by_cohort(val, entity_cols=["run_id", "label_policy"],
                             cohort=("subset", "prompt_set"))
        blocks.append(Table("val_accuracy", "4-class accuracy under policy A on the pool's val "
                            "split, per language, with Wilson intervals. Bold: the highest "
                            "accuracy per column (not a significant difference).",
                            (Column("run_id", "run"), Column("label_policy", "labels"), *cols),
                            frame))
    overlap = ctx.result(VAL_OVERLAP).table
    overlap_cols = (Column("lang", "lang"), Column("source", "training source"),
            Column("n_val", "val rows", "int"), Column("n_overlap", "in train", "int"),
            Column("share", "share", "pct"))
    blocks.append(Table("val_overlap", "Val rows whose normalised text is also a train row "
                        "('any' source, and each source with any overlap; study: multilingual "
                        "val 69.3% in policy-A training files, monolingual 0.2%).", overlap_cols,
                        overlap.filter((pl.col("source") == "any") | (pl.col("n_overlap") > 0)),
                        collapsed=True))
    blocks.append(Table("val_overlap_all", "Val overlap with every training source.",
                        overlap_cols,
                        overlap, csv_only=True))
    payload: dict[str, Any] = {"overlap": records(ctx.result(VAL_OVERLAP).table)}
    parts = ctx.get(VAL_SETS_ANALYSIS)
    if parts is not None:
        blocks += val_part_blocks(parts)
        payload["parts"] = payload_of(parts)
    return Section("val", title, tuple(blocks), payload)


def section_pool(ctx: ReportContext) -> Section:
    title = "The dual-policy pool"
    p = ctx.get(POOL_STATS)
    if p is None:
        return Section.omit("pool", title, "no pool.parquet")
    counts = p.class_counts.pivot(on="class", index=["policy", "split"], values="n",
                                  sort_columns=False)
    blocks: list[Block] = [
        Table("pool_agreement", f"Policy A vs B agreement ({p.n_rows:,} rows).",
              (Column("split", "split"), Column("n", "rows", "int"),
               Column("coarse_agreement", "4-class agreement", "pct"),
               Column("binary_agreement", "binary agreement", "pct"),
               Column("kappa_coarse", "κ 4-class", "num3"),
               Column("kappa_binary", "κ binary", "num3")), p.agreement),
        Table("pool_classes", "Class counts per policy and split.",
              tuple(Column(c, c, "text" if c in ("policy", "split") else "int")
                    for c in counts.columns), counts),
        Table("pool_confusion", "A × B confusion (rows: policy A, columns: policy B).",
              tuple(Column(c, c, "text" if c == "label_a" else "int")
                    for c in p.confusion.columns), p.confusion),
    ]
    return Section("pool", title, tuple(blocks), payload_of(p))
