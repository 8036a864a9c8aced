"""The competence gate in words: the caution that opens "At a glance" and closes the disclosure
card when the reference recipe detects too little clear harm, and its table and payload.

The numbers come from :mod:`guarddiag.analyses.competence`; this module only formats them."""

from __future__ import annotations

from typing import Any

import polars as pl

from guarddiag.analyses.competence import COMPETENCE, CompetenceResult, ranking_shortfalls
from guarddiag.report.context import ReportContext
from guarddiag.report.document import Block, Column, Paragraph, Table
from guarddiag.report.jsonable import jsonable, records
from guarddiag.report.sections.common import hull_words, one_interval_kind, pct


def _size_words(c: CompetenceResult) -> str:
    parts = []
    for r in c.sizes.iter_rows(named=True):
        spread = (f", seeds {pct(r['seed_low'])}–{pct(r['seed_high'])}"
                  if r["seed_low"] is not None else "")
        parts.append(f"{pct(r['mean_cap'])} at {r['size']} ({r['n_benchmarks']} benchmarks"
                     f"{spread})")
    return "; ".join(parts)


def _ranking_words(c: CompetenceResult, *, failing_only: bool) -> str:
    r = c.ranking
    if r is None or r.height == 0:
        return ""
    parts = []
    for row in (ranking_shortfalls(r) if failing_only else r).iter_rows(named=True):
        base = (f" vs TF-IDF {row['baseline_auroc']:.3f}" if row["baseline_auroc"] is not None
                else " (no TF-IDF baseline scored)")
        moved = " (moved by policy, not counted)" if row["policy_moved"] else ""
        parts.append(f"{row['pair']} {row['auroc']:.3f}{base}{moved} at {row['size']}")
    return "; ".join(parts)


def _moved_words(c: CompetenceResult, *, alpha: float) -> str:
    """The sentence naming the pairs label policy moves, or ""."""
    r = c.ranking
    if r is None or not c.policy_moved_pairs():
        return ""
    tilts = r.filter(pl.col("policy_moved")).unique("pair", keep="first", maintain_order=True)
    each = "; ".join(
        f"{row['pair']} {row['policy_tilt']:+.3f} (one-sided {1 - alpha:.0%} bound "
        f"{row['policy_tilt_low' if row['policy_tilt'] > 0 else 'policy_tilt_high']:+.3f})"
        for row in tilts.iter_rows(named=True))
    return (f" Label policy moves {', '.join(c.policy_moved_pairs())} by more than the "
            f"{c.auroc_margin:.2f} margin; AUROC of TF-IDF trained on the other policy minus "
            f"TF-IDF trained on the recipe's: {each}. There a shortfall may be policy, not "
            "detection, so it is shown and not counted.")


def competence_caution(ctx: ReportContext) -> str | None:
    """The plain caution naming the measure that failed (CAP below the floor, AUROC not above
    the TF-IDF baseline), or None where both pass (or no reference was scored on a clear-harm
    benchmark)."""
    c = ctx.get(COMPETENCE)
    if c is None or not c.failed_measures():
        return None
    why = []
    if c.below_floor:
        why.append(f"CAP: on the study's clearly harmful benchmarks ({c.subset} prompts, "
                   f"{c.mapping} mapping) the {c.branch} recipe's mean CAP is {_size_words(c)}, "
                   f"below the {pct(c.floor)} floor (the study's branches caught 80–91%)")
    if c.ranks_below_baseline:
        failing = _ranking_words(c, failing_only=True)
        why.append(f"AUROC: on same-source harmful/benign pairs the {c.branch} recipe does not "
                   f"rank {c.auroc_margin:.2f} above a TF-IDF word-count baseline on the same "
                   f"prompts ({failing})" if failing else
                   "AUROC: label policy moves every same-source pair scored, so none is left "
                   "to show that the recipe ranks harm above word counts")
    return (f"Caution ({' and '.join(c.failed_measures())} failed): these guards detect too "
            "little harm for a capability call to mean detection. " + ". ".join(why) + ". "
            "Here 'capability' says only that label policy moves a score by less than the "
            "equivalence margin; it does not say these guards detect that benchmark's harms, "
            "and a guard that misses most of them can be called capability everywhere.")


def competence_summary(ctx: ReportContext) -> str:
    """One line for the summary whatever the outcome."""
    c = ctx.get(COMPETENCE)
    if c is None:
        return ("Competence gate: not computed — no run of the reference recipe was scored on "
                "a clear-harm benchmark of the study.")
    verdict = "below" if c.below_floor else "at or above"
    ranking = _ranking_words(c, failing_only=False)
    return (f"Competence gate: the {c.branch} recipe's mean CAP on the clear-harm study "
            f"benchmarks is {_size_words(c)}, {verdict} the {pct(c.floor)} floor"
            + (f"; not scored here: {', '.join(c.missing)}" if c.missing else "") + "."
            + (f" Ranking (AUROC, harmful vs benign of the same source): {ranking}; "
               + _ranking_verdict(c) + _moved_words(c, alpha=ctx.options.alpha)
               if ranking else ""))


def _ranking_verdict(c: CompetenceResult) -> str:
    """The ranking measure's verdict, ending the summary's ranking sentence."""
    margin = f"the TF-IDF baseline by the {c.auroc_margin:.2f} margin"
    if c.ranking is not None and ranking_shortfalls(c.ranking).height:
        return f"below {margin} on some pair."
    if c.ranks_below_baseline:
        return "no pair is left to count: label policy moves every one."
    return f"above {margin} on every pair{' counted' if c.policy_moved_pairs() else ''}."


def competence_blocks(ctx: ReportContext) -> list[Block]:
    """The gate's summary and per-benchmark table, for the disclosure card (its caution opens
    the card, with the other cautions: :func:`~.provenance.provenance_blocks`)."""
    c = ctx.get(COMPETENCE)
    if c is None:
        return [Paragraph(competence_summary(ctx))]
    excluded = "; ".join(f"{b} left out: {why}" for b, why in c.excluded)
    cols = (Column("size", "size"), Column("benchmark", "benchmark"),
            Column("n_scored", "prompts", "int"),
            Column("score", "reference CAP", "pct", low="low", high="high"),
            Column("baseline_score", "TF-IDF CAP", "pct"),
            Column("n_runs", "seeds", "int"))
    blocks: list[Block] = [
        Paragraph(competence_summary(ctx) + f" {excluded}."),
        Table("competence", f"Competence gate: CAP of the {c.branch} recipe on the clear-harm "
              f"study benchmarks ({c.subset} prompts, {c.mapping} mapping), beside the TF-IDF "
              f"baseline of its label policy on the same prompts. "
              f"{hull_words(ctx.options.confidence)}", cols, one_interval_kind(c.table)),
    ]
    if c.ranking is not None and c.ranking.height:
        rcols = (Column("size", "size"), Column("pair", "pair"),
                 Column("n_harmful", "harmful", "int"), Column("n_benign", "benign", "int"),
                 Column("auroc", "reference AUROC", "num3", low="auroc_low",
                        high="auroc_high"),
                 Column("baseline_auroc", "TF-IDF AUROC", "num3"),
                 Column("margin", "margin", "num3"),
                 Column("policy_tilt", "policy tilt", "num3", low="policy_tilt_low",
                        high="policy_tilt_high"),
                 Column("n_runs", "seeds", "int"))
        blocks.append(Table(
            "competence_ranking", f"Competence gate, ranking: AUROC of the {c.branch} recipe's "
            f"P(unsafe) on harmful vs benign prompts of the same source ({c.subset} prompts, "
            f"{c.mapping} mapping; seed mean, range over seeds), beside the TF-IDF baseline on "
            f"the same prompts; it passes where the margin is at least {c.auroc_margin:.2f}. "
            f"Policy tilt: the AUROC of TF-IDF trained on the other label policy minus that "
            f"of TF-IDF trained on the recipe's, with its prompt-bootstrap interval (each "
            f"bound one-sided at the report's alpha); a pair whose bound on the tilt's side "
            f"lies {c.auroc_margin:.2f} or more from 0 is moved by policy and not counted "
            f"(policy, not detection, may decide it).",
            rcols, c.ranking))
    return blocks


def competence_payload(ctx: ReportContext) -> dict[str, Any] | None:
    c = ctx.get(COMPETENCE)
    if c is None:
        return None
    return jsonable({
        "branch": c.branch, "subset": c.subset, "mapping": c.mapping, "floor": c.floor,
        "benchmarks": list(c.benchmarks), "missing": list(c.missing),
        "excluded": dict(c.excluded), "below_floor": c.below_floor,
        "lowest_mean": c.lowest_mean, "sizes": records(c.sizes),
        "rows": records(one_interval_kind(c.table)),
        "ranking": records(c.ranking) if c.ranking is not None else None,
        "auroc_margin": c.auroc_margin, "failed": list(c.failed_measures()),
        "policy_moved": list(c.policy_moved_pairs()),
        "caution": competence_caution(ctx)})
