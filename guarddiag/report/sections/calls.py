"""The calls that name what was shown (:mod:`guarddiag.analyses.calls`): the headline per
benchmark with its stability across analyst choices, each route's contrast, and where an
outside guard sits between the B-like and A-like branches."""

from __future__ import annotations

import polars as pl

from guarddiag.analyses.calls import (
    PRIMARY_DECONTAM,
    PRIMARY_THRESHOLD,
    CallsResult,
)
from guarddiag.report.context import ReportContext
from guarddiag.report.document import Block, Column, Paragraph, Section, Table
from guarddiag.report.jsonable import records

TITLE = "Policy content, threshold shift or route: the calls"


def section_calls(ctx: ReportContext) -> Section:
    res: CallsResult | None = ctx.results.values.get("calls")
    if res is None:
        note = ctx.results.omitted.get("calls", "no branch predictions with roles")
        return Section.omit("calls", TITLE, note)
    margin, counts, head = f"±{res.margin * 100:g} pp", res.counts(), res.headline()
    n_stable = int(head["stable"].sum()) if head.height else 0
    blocks: list[Block] = [Paragraph(
        f"Thresholds are matched on {res.neutral_rows}. The contrast is route-matched: each "
        "A-last branch minus the runs that took its route with policy-B labels (its control, "
        "or the reference on the distillation route). Calls at level "
        f"α = {res.alpha:g} on the {res.mapping} mapping, exact-decontaminated prompts, "
        "matched threshold: policy content (contrast beyond seed noise at the matched "
        "threshold), threshold shift (beyond it at 0.5 only), route-sensitive (recipes differ, "
        f"not along A/B), capability (equivalence within {margin} shown by TOST), "
        "undetermined (none shown; the reason says why), uninformative (every run alike). "
        "MDE: the effect detected with 80 % power. "
        + ("Counts: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ". " if counts
           else "")
        + f"Stable across mapping × decontamination × threshold: {n_stable} of {head.height}.")]
    blocks.append(Table(
        "calls_headline", "Per benchmark: the call, whether every analyst choice agrees, the "
        "choices that flip it, the route-matched effect (A − B) with its interval, and its "
        "direction beside the study's (the first screen's table, with the flipping choices "
        "as their own column).",
        (Column("benchmark", "benchmark"), Column("call", "call"),
         Column("stable", "stable"), Column("flips", "flipped by"),
         Column("effect", "A − B", "pp", low="effect_low", high="effect_high"),
         Column("study_direction", "vs study")), head, csv_only=True))
    prim = res.primary()
    blocks.append(Table(
        "calls_power", "The primary cohort's tests: p of the contrast, of equivalence and of "
        "the recipes differing; the minimum detectable effect; why a call is undetermined.",
        (Column("benchmark", "benchmark"), Column("call", "call"),
         Column("p_effect", "p (A − B)", "p"), Column("p_equivalence", "p (equiv.)", "p"),
         Column("p_route", "p (recipes)", "p"), Column("mde", "MDE", "pp"),
         Column("n_prompts", "prompts", "int"), Column("routes_agree", "routes agree"),
         Column("reason", "reason")), prim))
    routes = res.routes.filter((pl.col("mapping") == res.mapping)
                               & (pl.col("decontam") == PRIMARY_DECONTAM)
                               & (pl.col("threshold") == PRIMARY_THRESHOLD))
    if routes.height:
        blocks.append(Table(
            "calls_routes", "Each route's own A − B contrast (primary cohort).",
            (Column("benchmark", "benchmark"), Column("route", "route"),
             Column("pairs", "pairs"),
             Column("effect", "A − B", "pp", low="effect_low", high="effect_high")), routes))
    stab = res.stability()
    blocks.append(Table(
        "calls_stability", "The call in every cell: mapping / decontamination / threshold.",
        tuple(Column(c, c) for c in stab.columns), stab, collapsed=True))
    blocks.append(Table(
        "calls_thresholds", "Per run: neutral rows, false-flag rate at 0.5, the reference's "
        "(target), the matched threshold and its false-flag rate.",
        (Column("run_id", "run"), Column("mapping", "mapping"),
         Column("n_neutral", "neutral", "int"), Column("ffr_05", "at 0.5", "pct"),
         Column("target", "target", "pct"), Column("t_matched", "t", "num3"),
         Column("ffr_matched", "at t", "pct")), res.thresholds, csv_only=True))
    blocks.append(Table(
        "calls_scores", "Every run's rate at 0.5 and at its matched threshold, with AUROC "
        "and AUPRC against the neutral rows, per benchmark, mapping and decontamination level.",
        tuple(Column(c, c) for c in res.scores.columns), res.scores, csv_only=True))
    if res.placement.height:
        blocks.append(Table(
            "calls_placement", "Outside guards on the B-to-A axis (0 = like the B-side "
            "branches, 1 = like the A-last ones) where the call is policy content; interval "
            f"from {int(res.placement['draws'][0]):,} seeded draws.",
            (Column("guard", "guard"), Column("benchmark", "benchmark"),
             Column("score", "score", "pct"), Column("threshold", "at"),
             Column("position", "position", "num3", low="position_low",
                    high="position_high")), res.placement))
    if res.notes:
        blocks.append(Paragraph("Notes: " + "; ".join(res.notes) + "."))
    payload = {"headline": records(head), "rows": records(res.table),
               "routes": records(res.routes), "placement": records(res.placement),
               "thresholds": records(res.thresholds), "counts": counts,
               "mapping": res.mapping, "alpha": res.alpha, "margin": res.margin,
               "neutral_rows": res.neutral_rows, "notes": list(res.notes)}
    return Section("calls", TITLE, tuple(blocks), payload)
