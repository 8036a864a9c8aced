"""Study-level sections: the plain-language summary, the study's numbers beside this run's, and
the disclosure card."""

from __future__ import annotations

import polars as pl

from guarddiag.analyses.calls import CALLS_ANALYSIS, LESS, MORE
from guarddiag.analyses.callwords import at_cutoff
from guarddiag.analyses.contamination import CONTAMINATION
from guarddiag.analyses.disclosure import DISCLOSURE
from guarddiag.analyses.load import LOAD
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.study import STUDY
from guarddiag.report.context import ReportContext
from guarddiag.report.document import (
    Block,
    Bullets,
    Column,
    Paragraph,
    Section,
    Table,
)
from guarddiag.report.jsonable import records
from guarddiag.report.sections.common import (
    cohort_words,
    decontam_level,
    missing_steps,
    missing_steps_sentence,
    pct,
)
from guarddiag.report.sections.competence import (
    competence_blocks,
    competence_caution,
    competence_payload,
    competence_summary,
)
from guarddiag.report.sections.first_screen import NO_CALL, benchmark_calls, call_table
from guarddiag.report.sections.provenance import provenance_blocks, provenance_payload

CALL_WORDS = {
    MORE: "the A-last branches flag more of this benchmark than their route-matched policy-B "
          "controls at the same false-flag rate on policy-neutral rows; on prompts only policy "
          "A blocks (copyright, advice, …) that is the policy content the study describes",
    LESS: "the A-last branches flag less of it at the same false-flag rate: they rank these "
          "prompts lower against the neutral rows — on prompts both policies call unsafe a "
          "ranking loss, not policy content",
    "threshold shift": "the A-last branches differ at {cut} but not at matched thresholds: they "
                       "flag more (or less) of everything, a moved threshold, not policy content",
    "route-sensitive": "branches differ beyond seed noise, but no route shows an A/B contrast: "
                       "how a policy reached the model moves these scores",
    "capability": "an equivalence test (TOST) puts the A/B contrast within the stated margin "
                  "at matched thresholds: label policy does not move this score",
    "routes disagree": "the routes show different things (e.g. distillation 'A flags more', "
                       "head-only 'capability'): no one call holds; each route's is in the table",
    "undetermined": "nothing above was shown (low power, degenerate runs, too few seeds or "
                    "prompts; see the calls section's reasons); read these as neither policy "
                    "nor capability",
    "uninformative": "every run scores the same, so these say nothing about policy or "
                     "capability",
    NO_CALL: "no policy-neutral rows to match thresholds on (no pool), so no A/B call",
}
"""What each first-screen call showed, in words (the glossary defines the same words); ``{cut}``
is the protocol's cut-off."""


def call_lists(ctx: ReportContext) -> dict[str, list[str]]:
    """Benchmarks per first-screen call word (a route qualifier kept with its benchmark)."""
    out: dict[str, list[str]] = {}
    for bench, call in sorted(benchmark_calls(ctx).items()):
        word = next((w for w in CALL_WORDS if call.startswith(w)), call)
        out.setdefault(word, []).append(bench + call[len(word):])
    return out


def _call_bullets(ctx: ReportContext) -> list[str]:
    """The first screen's calls grouped by call, each with what it showed: one source, the
    first screen's table, so the two cannot disagree."""
    cut = at_cutoff()
    table, _ = call_table(ctx)
    stable = set(table.filter(pl.col("stable") == "yes")["benchmark"].to_list())
    items = []
    for word, benches in call_lists(ctx).items():
        steady = [b.split(" (")[0] for b in benches if b.split(" (")[0] in stable]
        words = CALL_WORDS.get(word, "").format(cut=cut)
        items.append(f"{word[0].upper() + word[1:]} ({len(benches)}): {', '.join(benches)} — "
                     f"{words}. Stable under every analyst choice: "
                     f"{', '.join(steady) or 'none'}.")
    items.append(f"The older span test (Δb against the seed floor Φb, at {cut}) is in 'Policy or "
                 "capability?': it cannot tell policy content from a moved threshold, so its "
                 "statistics are shown there and it makes no call.")
    return items


def section_summary(ctx: ReportContext) -> Section:
    o = ctx.options
    lists = call_lists(ctx)
    runs = ctx.result(SCORES).table.select("run_id", "guard_kind", "size").unique()
    n_branch = runs.filter(pl.col("guard_kind") == "branch").height
    n_outside = runs.filter(pl.col("guard_kind") == "outside").height
    n_base = runs.filter(pl.col("guard_kind") == "baseline").height
    sizes = sorted(set(runs.filter(pl.col("guard_kind") == "branch")["size"].to_list()))
    paras = [
        f"This report reads {runs.height} scored runs ({n_branch} branch runs"
        + (f" at size(s) {', '.join(sizes)}" if sizes else "")
        + f", {n_base} baseline, {n_outside} outside guard(s)) on {len(ctx.benchmarks)} "
        f"benchmark subsets. A score is the share of a benchmark's prompts read as unsafe "
        f"({cohort_words(ctx)}). A single run's score carries its {int(o.confidence * 100)}% "
        "Wilson interval; a recipe's mean over seeds runs from the lowest to the highest "
        "Wilson bound of its seeds (holding the seed range) — one interval, "
        "'seed-range+wilson', that for a single run is its Wilson interval, so no column "
        "mixes two kinds; the seeded prompt bootstrap "
        f"(B = {o.n_resamples:,} resamples, seed {o.seed}) is kept for differences and spans. "
        "Every table names its interval.",
    ]
    caution = competence_caution(ctx)
    items = [competence_summary(ctx), *_call_bullets(ctx)]
    missing = missing_steps_sentence(ctx)
    if missing:
        items.append(missing)
    if ctx.get(CONTAMINATION) is not None:
        t = ctx.result(CONTAMINATION).table.filter(pl.col("n_exact") > 0).sort(
            ["share_exact", "benchmark"], descending=[True, False])
        if t.height:
            worst = ", ".join(f"{r['benchmark']} {pct(r['share_exact'])} "
                              f"({r['n_exact']:,}/{r['n']:,})"
                              for r in t.head(5).iter_rows(named=True))
            items.append(f"Contamination: {t.height} of {ctx.result(CONTAMINATION).table.height} "
                         f"audited benchmarks share prompts with the training pool (exact "
                         f"overlap after normalisation): {worst}. The primary tables use the "
                         f"decontaminated prompts ({decontam_level(ctx) or 'exact'} overlaps "
                         "removed).")
        else:
            items.append("Contamination: the audit found no exact overlap between the training "
                         "pool and any audited benchmark.")
    else:
        items.append("Contamination: no audit was found, so no overlap is known; scores on "
                     "the full benchmarks may include memorised prompts.")
    items.append("Compare: scores in the same column of a table (same benchmark, prompt subset, "
                 "binary mapping, threshold and prompt set), and differences larger than that "
                 "benchmark's seed floor.")
    items.append("Do not compare: scores across columns or subsets (full vs decontaminated), a "
                 "loose-mapping score with a strict one, an outside guard's native verdict with "
                 "a mapped read-out, or any difference inside the seed floor; and do not read a "
                 "score called anything but capability as detection.")
    payload = {"calls": lists, "alpha": ctx.result(LOAD).alpha, "subset": o.primary_subset,
               "mapping": o.mapping, "threshold": o.threshold,
               "competence": competence_payload(ctx),
               "provenance": provenance_payload(ctx)}
    return Section("summary", "At a glance",
                   (*provenance_blocks(ctx, caution=caution, banner=False),
                    *(Paragraph(p) for p in paras),
                    Bullets(tuple(items))), payload)


def section_study(ctx: ReportContext) -> Section:
    t = ctx.result(STUDY).table
    frame = t.with_columns(
        pl.struct("unit", "study").map_elements(lambda s: format_unit(s["unit"], s["study"]),
                                                return_dtype=pl.String).alias("study_shown"),
        pl.struct("unit", "here").map_elements(lambda s: format_unit(s["unit"], s["here"]),
                                               return_dtype=pl.String).alias("here_shown"))
    cols = (Column("quantity", "quantity"), Column("study_shown", "study"),
            Column("study_note", ""), Column("here_shown", "here"), Column("here_note", ""))
    return Section("study", "Beside the study's numbers", (
        Paragraph("Reference numbers from the study (SPEC §6) beside this run's; '—' where this "
                  f"run has no such measurement. Here: {cohort_words(ctx)}. Models, pools and "
                  "sizes differ from the study's, so agreement in direction matters more than "
                  "agreement in value."),
        Table("study_comparison", "This run beside the study (study values as published; "
              "here: point values of this run, without intervals; overlaps are exact shares).",
              cols, frame),
        *_study_fairness(ctx),
    ), {"rows": records(t), **_study_fairness_payload(ctx)})


def _study_fairness(ctx: ReportContext) -> tuple[Block, ...]:
    study = ctx.result(STUDY)
    blocks: list[Block] = []
    if study.notes:
        blocks.append(Bullets(study.notes))
    if study.overlap_origin is not None:
        blocks.append(Table(
            "overlap_origin", "Exact overlap per audited benchmark (share of its prompts) and "
            "whether the pool recipe set it (sampled copies of the benchmark in the pool) or it "
            "was measured.",
            (Column("benchmark", "benchmark"), Column("n", "prompts", "int"),
             Column("share_exact", "exact overlap %", "pct"), Column("origin", "origin"),
             Column("sampled_sources", "sampled pool sources (kept/read)")),
            study.overlap_origin.table, collapsed=True))
    return tuple(blocks)


def _study_fairness_payload(ctx: ReportContext) -> dict[str, object]:
    study = ctx.result(STUDY)
    return {"overlap_origin": (records(study.overlap_origin.table)
                               if study.overlap_origin is not None else None),
            "excluded_subsets": list(study.excluded_subsets), "notes": list(study.notes)}


def format_unit(unit: str, v: float | None) -> str:
    if v is None:
        return "—"
    if unit == "share":
        return f"{100 * v:.1f}%"
    if unit == "pp":
        return f"{100 * v:.1f} pp"
    if unit == "rho":
        return f"{v:+.2f}"
    return f"{v:.3g}"


def _why_no_call(ctx: ReportContext, card: pl.DataFrame) -> pl.DataFrame:
    """The card with ``why``: for every benchmark without a determined call, the real reason
    (a missing audit or branch scores with the command that fixes it, else the test's own)."""
    calls = ctx.get(CALLS_ANALYSIS)
    reasons = ({r["benchmark"]: r["reason"] for r in calls.primary().iter_rows(named=True)}
               if calls is not None else {})
    if calls is None:
        reasons = dict.fromkeys(ctx.benchmarks, "no policy-neutral rows: give the report the "
                                                "pool (guarddiag report --pool …)")
    why = []
    for r in card.iter_rows(named=True):
        steps = missing_steps(ctx, r["benchmark"])
        determined = r.get("call") is not None and not str(r["call"]).startswith(
            ("undetermined", "uninformative", NO_CALL))
        why.append("; ".join(steps) if steps else
                   None if determined else reasons.get(r["benchmark"]) or "no call computed")
    return card.with_columns(pl.Series("why", why, dtype=pl.String))


def section_disclosure(ctx: ReportContext) -> Section:
    cut = at_cutoff()
    d = ctx.result(DISCLOSURE)
    cols = (Column("benchmark", "benchmark"), Column("n", "n", "int"),
            Column("share_exact", "prior overlap, exact", "pct"),
            Column("share_near", "near", "pct"),
            Column("floor_median", "seed floor median (pp)", "pp"),
            Column("floor_widest", "seed floor widest (pp)", "pp"),
            Column("n_groups", "seed groups", "int"), Column("delta", "Δb (pp)", "pp"),
            Column("call", "call"), Column("call_stable", "stable?"),
            Column("q_contrast", f"q (A-last vs B-last at {cut})", "p"),
            Column("span_beyond_floor", "Δb > widest Φb"), Column("why", "why no call"))
    defs = tuple(f"{name} mapping: unsafe = {' ∪ '.join(classes)}; every other class is safe"
                 + (" (used for the primary tables)" if name == d.mapping else "")
                 for name, classes in d.definitions)
    pols = tuple(f"Policy {p}: {text}" for p, text in d.policies)
    calls, source = call_table(ctx)
    card = _why_no_call(ctx, d.table.join(calls.select("benchmark", pl.col("call"),
                                                       pl.col("stable").alias("call_stable")),
                                          on="benchmark", how="left"))
    blocks: list[Block] = [
        *provenance_blocks(ctx, caution=competence_caution(ctx)),
        Paragraph("What every guard paper should publish beside its scores: how much of each "
                  "benchmark the training data already held, how far scores move between seeds "
                  "of the same recipe, and what exactly 'unsafe' means."),
        Table("disclosure", f"Disclosure card ({d.subset} prompts, {d.mapping} mapping). "
              + ("Call: the first screen's (route-matched contrast at matched thresholds, "
                 "with its stability across analyst choices); " if source == "calls" else
                 "Call: none — no policy-neutral rows (see the first screen); ")
              + f"q: BH q-value of the span test's A-last vs B-last contrast at {cut} (see 'Policy "
              "or capability?'), which cannot tell policy content from a moved threshold and "
              "makes no call; Δb > widest Φb: the study's rule, a comparison. No intervals.",
              cols, card),
        Paragraph(f"Operational definition. A prompt is flagged unsafe when P(unsafe) ≥ "
                  f"{d.threshold:g}, where P(unsafe) is the summed probability of the unsafe "
                  "classes (a guard without class probabilities uses its own P(unsafe))."),
        Bullets(defs),
        Paragraph("The classes themselves depend on the labelling policy a run was trained on "
                  "(its 'labels' column):"),
        Bullets(pols),
        *competence_blocks(ctx),
    ]
    payload = {"benchmarks": records(card), "threshold": d.threshold,
               "competence_caution": competence_caution(ctx),
               "mapping": d.mapping, "subset": d.subset,
               "definitions": {n: list(c) for n, c in d.definitions},
               "policies": dict(d.policies), "provenance": provenance_payload(ctx)}
    return Section("disclosure", "Disclosure card", tuple(blocks), payload)
