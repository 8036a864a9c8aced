"""The calls route by route (:mod:`guarddiag.analyses.calls`): each route's contrast and call,
the benchmark's call with its stability across analyst choices, the degenerate runs left out,
the study beside this run, and where an outside guard sits between the B-like and A-like
branches at the same operating point."""

from __future__ import annotations

import polars as pl

from guarddiag.analyses.calls import CALLS_ANALYSIS, CallsResult
from guarddiag.analyses.callwords import at_cutoff
from guarddiag.analyses.placement import unplaced_guards
from guarddiag.protocol import protocol
from guarddiag.report.context import ReportContext
from guarddiag.report.document import Block, Bullets, Column, Paragraph, Section, Table
from guarddiag.report.jsonable import records
from guarddiag.report.sections.common import pct

TITLE = "The calls, route by route"


def _by_language(res: CallsResult) -> str:
    """Where the reference's matched false flags fall: on the neutral rows in the benchmarks'
    language or in the others. An encoder that reads only the first cannot tell harm in the
    rest; at a lower threshold than the cut-off its false flags gather there (the frozen MiniLM
    sizes at 5 %: docs/guide/study.md, "Where the false flags go")."""
    ref = res.reference_thresholds()
    n_all, n_lang = ref["n_neutral"].drop_nulls(), ref["n_neutral_lang"].drop_nulls()
    mine, rest = ref["ffr_matched_lang"].drop_nulls(), ref["ffr_matched_other"].drop_nulls()
    if not (n_all.len() and n_lang.len() and mine.len() and rest.len()):
        return ""
    n_mine, n_rest = int(n_lang.max()), int(n_all.max()) - int(n_lang.max())  # type: ignore[arg-type]
    return (f" Of those rows {n_mine:,} are in the benchmarks' language "
            f"({protocol().benchmark_lang}) and {n_rest:,} in others; at its matched threshold "
            f"the reference flags {pct(float(mine.mean()))} of the first and "  # type: ignore[arg-type]
            f"{pct(float(rest.mean()))} of the others (seed mean).")  # type: ignore[arg-type]


def _intro(res: CallsResult) -> Paragraph:
    margin, counts, head = f"±{res.margin * 100:g} pp", res.counts(), res.headline()
    cut = at_cutoff()
    n_stable = int(head["stable"].sum()) if head.height else 0
    return Paragraph(
        f"Thresholds are matched on {res.neutral_rows}.{_by_language(res)} Each route is "
        "tested on its own: the "
        "distillation route (E8, distilled from T_A, minus the reference, distilled from T_B) "
        "and the head-only route (E1, E7, E10 each minus its control, which recalibrates the "
        "same heads on as many rows with the same class balance, taken where the policies "
        f"agree). Calls at level α = {res.alpha:g} on the {res.mapping} mapping, exact-"
        "decontaminated prompts, matched threshold, per route: A flags more / A flags less "
        "(the route's A − B contrast beyond seed noise, with its sign), threshold shift "
        f"(beyond it at {cut} only), capability (equivalence within "
        f"{margin} shown by TOST), undetermined (none shown; the reason says why). The "
        "benchmark's call is the routes' where they agree ('distill only' where the other "
        "route showed nothing), routes disagree where they differ, route-sensitive where no "
        "route shows an A/B contrast but the recipes differ, uninformative where every run "
        "scores the same. A pair with a degenerate run (matched threshold within 0.001 of 0 "
        "or 1, or clear-harm capture below TF-IDF's) is left out, and named. MDE: the effect "
        "detected with 80 % power. "
        + ("Counts: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ". " if counts
           else "")
        + f"Stable across mapping × decontamination × threshold, every route included: "
        f"{n_stable} of {head.height}.")


def section_calls(ctx: ReportContext) -> Section:
    res: CallsResult | None = ctx.get(CALLS_ANALYSIS)
    if res is None:
        note = ctx.results.omitted.get("calls", "no branch predictions with roles")
        return Section.omit("calls", TITLE, note)
    head, cut = res.headline(), at_cutoff()
    blocks: list[Block] = [_intro(res)]
    bad = res.degenerate()
    if bad.height:
        blocks.append(Bullets(tuple(f"Degenerate: {r['run_id']} — {r['degenerate']}"
                                    for r in bad.iter_rows(named=True))))
    blocks.append(Table(
        "calls_routes", "Each route's own A − B contrast and call (primary cohort): the pairs "
        "it rests on, those left out with the degenerate run that put them out, and why a call "
        "is undetermined.",
        (Column("benchmark", "benchmark"), Column("route", "route"), Column("call", "call"),
         Column("effect", "A − B", "pp", low="effect_low", high="effect_high"),
         Column("p_effect", "p (A − B)", "p"), Column("p_equivalence", "p (equiv.)", "p"),
         Column("mde", "MDE", "pp"), Column("pairs", "pairs"), Column("left_out", "left out"),
         Column("reason", "reason")), res.primary_routes()))
    blocks.append(Table(
        "calls_headline", "Per benchmark: the call and the routes that carry it, whether it and "
        "every route's call hold in every cell, the choices that flip it, and the effect at the "
        f"matched threshold and at {cut} (the first screen's table, with the flipping choices as "
        "their own column).",
        (Column("benchmark", "benchmark"), Column("call", "call"),
         Column("carried_by", "carried by"), Column("stable", "stable"),
         Column("flips", "flipped by"),
         Column("effect", "A − B, matched", "pp", low="effect_low", high="effect_high"),
         Column("effect_05", f"A − B at {cut}", "pp", low="effect_05_low",
                high="effect_05_high")), head, csv_only=True))
    blocks.append(Table(
        "calls_power", "The primary cohort's tests over the routes that carry the call: p of "
        "the contrast, of equivalence and of the recipes differing; the minimum detectable "
        "effect; why a call is undetermined.",
        (Column("benchmark", "benchmark"), Column("call", "call"),
         Column("p_effect", "p (A − B)", "p"), Column("p_equivalence", "p (equiv.)", "p"),
         Column("p_route", "p (recipes)", "p"), Column("mde", "MDE", "pp"),
         Column("n_prompts", "prompts", "int"), Column("routes_agree", "routes agree"),
         Column("reason", "reason")), res.primary(), csv_only=True))
    if res.study.height:
        blocks.append(Table(
            "calls_study", "Beside the study, benchmark by benchmark: its A-last and B-last "
            "figures and difference, this run's route-matched A − B at the matched threshold "
            f"and at {cut}, and whether each points the study's way.",
            (Column("benchmark", "benchmark"), Column("study_a_last", "study: A-last"),
             Column("study_b_last", "study: B-last"),
             Column("study_difference", "study: A − B"),
             Column("effect", "here, matched", "pp", low="effect_low", high="effect_high"),
             Column("verdict", "matched"),
             Column("effect_05", f"here at {cut}", "pp", low="effect_05_low",
                    high="effect_05_high"), Column("verdict_05", f"at {cut}")), res.study))
    stab = res.stability()
    blocks.append(Table(
        "calls_stability", "The call in every cell: mapping / decontamination / threshold.",
        tuple(Column(c, c) for c in stab.columns), stab, collapsed=True))
    blocks.append(Table(
        "calls_thresholds", f"Per run: neutral rows, false-flag rate at {cut}, the reference's "
        "(target), the matched threshold, its false-flag rate, and why it is degenerate.",
        (Column("run_id", "run"), Column("mapping", "mapping"),
         Column("n_neutral", "neutral", "int"), Column("ffr_05", f"at {cut}", "pct"),
         Column("target", "target", "pct"), Column("t_matched", "t", "num3"),
         Column("ffr_matched", "at t", "pct"),
         Column("n_neutral_lang", "neutral in the benchmarks' language", "int"),
         Column("ffr_matched_lang", "at t, that language", "pct"),
         Column("ffr_matched_other", "at t, other languages", "pct"),
         Column("degenerate", "degenerate")),
        res.thresholds, csv_only=True))
    blocks.append(Table(
        "calls_scores", f"Every run's rate at {cut} and at its matched threshold, with AUROC "
        "and AUPRC against the neutral rows, per benchmark, mapping and decontamination level.",
        tuple(Column(c, c) for c in res.scores.columns), res.scores, csv_only=True))
    blocks += _placement_blocks(res)
    if res.notes:
        blocks.append(Paragraph("Notes: " + "; ".join(res.notes) + "."))
    payload = {"headline": records(head), "rows": records(res.table),
               "routes": records(res.routes), "placement": records(res.placement),
               "unplaced": records(_unplaced(res)),
               "thresholds": records(res.thresholds), "study": records(res.study),
               "counts": res.counts(), "mapping": res.mapping, "alpha": res.alpha,
               "margin": res.margin, "neutral_rows": res.neutral_rows,
               "notes": list(res.notes)}
    return Section("calls", TITLE, tuple(blocks), payload)


def _unplaced(res: CallsResult) -> pl.DataFrame:
    return unplaced_guards(scores=res.scores, thresholds=res.thresholds,
                           placement=res.placement, mapping=res.mapping,
                           clear_harm=res.clear_harm)


def _placement_blocks(res: CallsResult) -> list[Block]:
    out: list[Block] = []
    if res.placement.height:
        out.append(Table(
            "calls_placement", "Outside guards on the B-to-A axis at the matched threshold (0 = "
            "like the B-side branches, 1 = like the A-last ones), on benchmarks with an A/B "
            "call whose ends differ by more than the seed floor; only guards that pass the "
            "competence gate; interval from "
            f"{int(res.placement['draws'][0]):,} draws seeded by the scores, not the name.",
            (Column("guard", "guard"), Column("benchmark", "benchmark"),
             Column("call", "call"), Column("stable", "stable"),
             Column("score", "score", "pct"), Column("t_matched", "at t", "num3"),
             Column("position", "position", "num3", low="position_low",
                    high="position_high"), Column("where", "where"),
             Column("axis_ends", "axis ends")), res.placement))
    unplaced = _unplaced(res)
    if unplaced.height:
        out.append(Bullets(tuple(f"{r['guard']}: not placed — {r['why']}"
                                 for r in unplaced.iter_rows(named=True))))
    return out
