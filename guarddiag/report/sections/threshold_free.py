"""Threshold-free metrics per run on the paired harmful/benign sets: F1 at the report's
threshold, AUPRC and over-refusal at 95 % capture (:mod:`guarddiag.analyses.threshold_free`)."""

from __future__ import annotations

import polars as pl

from guarddiag.analyses.threshold_free import THRESHOLD_FREE
from guarddiag.report.context import ReportContext
from guarddiag.report.document import Block, Column, Paragraph, Section, Table
from guarddiag.report.jsonable import payload_of
from guarddiag.report.sections.common import single_seed_note

TITLE = "Threshold-free metrics on the paired harmful/benign sets"


def section_threshold_free(ctx: ReportContext) -> Section:
    tf = ctx.get(THRESHOLD_FREE)
    if tf is None or not tf.table.height:
        note = "; ".join(tf.missing) if tf is not None and tf.missing else \
            "no predictions on any harmful/benign pair"
        return Section.omit("threshold_free", TITLE, note)
    conf = int(tf.confidence * 100)
    blocks: list[Block] = [Paragraph(
        "Guard teams compare guards on a harmful set and its benign twin with metrics that do "
        "not hang on one threshold (as GuardBench reports). Harmful prompts are positives, "
        f"benign ones negatives, scored by P(unsafe) under the {tf.mapping} mapping on the "
        f"{tf.subset} prompts. F1: at the report's threshold ({tf.threshold:g}). AUPRC: "
        "average precision over every threshold (a guard ranking at random scores the share "
        "of harmful prompts, column 'base rate', not 0.5). OR@95: the share of benign prompts "
        f"flagged at the highest threshold that still flags {tf.capture:.0%} of the harmful "
        f"ones (that threshold: column 't@95'). Every interval: {conf}% seeded prompt "
        f"bootstrap ('bootstrap-percentile', B = {tf.n_resamples:,}, seed {tf.seed}; each run "
        "of a pair sees the same resamples). One row per run; no bold.")]
    cols = (Column("run_id", "run"), Column("label_policy", "labels"),
            Column("n_harmful", "harmful", "int"), Column("n_benign", "benign", "int"),
            Column("base_rate", "base rate", "num3"),
            Column("f1", "F1", "num3", low="f1_low", high="f1_high"),
            Column("auprc", "AUPRC", "num3", low="auprc_low", high="auprc_high"),
            Column("over_refusal_at_capture", "OR@95 %", "pct",
                   low="over_refusal_at_capture_low", high="over_refusal_at_capture_high"),
            Column("threshold_at_capture", "t@95", "num3"))
    for name, harmful, benign in tf.pairs:
        part = tf.table.filter(pl.col("pair") == name)
        if part.height:
            blocks.append(Table(f"threshold_free_{name}",
                                f"{name}: {harmful} (harmful) vs {benign} (benign) — F1, "
                                f"AUPRC, OR@95 with {conf}% bootstrap-percentile intervals.",
                                cols, part, collapsed=True))
    blocks.append(Paragraph(single_seed_note(ctx, subset=tf.subset, mapping=tf.mapping)))
    if tf.missing:
        blocks.append(Paragraph("Pairs left out: " + "; ".join(tf.missing) + "."))
    return Section("threshold_free", TITLE, tuple(blocks), payload_of(tf))
