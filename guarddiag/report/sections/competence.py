"""The competence gate in words: the caution that opens "At a glance" and closes the disclosure
card when the reference recipe detects too little clear harm, and its table and payload.
The numbers come from :mod:`guarddiag.analyses.competence`; this module only formats them."""

from __future__ import annotations

from typing import Any

from guarddiag.analyses.competence import CompetenceResult
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


def competence_caution(ctx: ReportContext) -> str | None:
    """The plain caution, or None where the guards pass the floor (or no reference was
    scored on a clear-harm benchmark)."""
    c = ctx.results.competence
    if c is None or not c.below_floor:
        return None
    return (f"Caution: these guards detect too little harm for a capability-load call to mean "
            f"detection. On the study's clearly harmful benchmarks ({c.subset} prompts, "
            f"{c.mapping} mapping) the {c.branch} recipe's mean CAP is {_size_words(c)}, below "
            f"the {pct(c.floor)} floor (the study's branches caught 80–91%). "
            "Here 'capability-load' says only that label policy moved a score no more than "
            "retraining with another seed did; it does not say these guards detect that "
            "benchmark's harms, and a guard that misses most of them can look 'capability-load' "
            "everywhere.")


def competence_summary(ctx: ReportContext) -> str:
    """One line for the summary whatever the outcome."""
    c = ctx.results.competence
    if c is None:
        return ("Competence gate: not computed — no run of the reference recipe was scored on "
                "a clear-harm benchmark of the study.")
    verdict = "below" if c.below_floor else "at or above"
    return (f"Competence gate: the {c.branch} recipe's mean CAP on the clear-harm study "
            f"benchmarks is {_size_words(c)}, {verdict} the {pct(c.floor)} floor"
            + (f"; not scored here: {', '.join(c.missing)}" if c.missing else "") + ".")


def competence_blocks(ctx: ReportContext) -> list[Block]:
    """The gate's summary and per-benchmark table, for the disclosure card (its caution opens
    the card, with the other cautions: :func:`~.provenance.provenance_blocks`)."""
    c = ctx.results.competence
    if c is None:
        return [Paragraph(competence_summary(ctx))]
    excluded = "; ".join(f"{b} left out: {why}" for b, why in c.excluded)
    cols = (Column("size", "size"), Column("benchmark", "benchmark"),
            Column("n_scored", "prompts", "int"),
            Column("score", "reference CAP", "pct", low="low", high="high"),
            Column("n_runs", "seeds", "int"))
    return [
        Paragraph(competence_summary(ctx) + f" {excluded}."),
        Table("competence", f"Competence gate: CAP of the {c.branch} recipe on the clear-harm "
              f"study benchmarks ({c.subset} prompts, {c.mapping} mapping). "
              f"{hull_words(ctx.options.confidence)}", cols, one_interval_kind(c.table)),
    ]


def competence_payload(ctx: ReportContext) -> dict[str, Any] | None:
    c = ctx.results.competence
    if c is None:
        return None
    return jsonable({
        "branch": c.branch, "subset": c.subset, "mapping": c.mapping, "floor": c.floor,
        "benchmarks": list(c.benchmarks), "missing": list(c.missing),
        "excluded": dict(c.excluded), "below_floor": c.below_floor,
        "lowest_mean": c.lowest_mean, "sizes": records(c.sizes),
        "rows": records(one_interval_kind(c.table)),
        "caution": competence_caution(ctx)})
