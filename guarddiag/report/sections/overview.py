"""Study-level sections: the plain-language summary, the study's numbers beside this run's, and
the disclosure card."""

from __future__ import annotations

import polars as pl

from guarddiag.analyses.loadtest import MIN_PROMPTS
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
from guarddiag.report.sections.first_screen import call_table
from guarddiag.report.sections.provenance import provenance_blocks, provenance_payload


def load_lists(ctx: ReportContext) -> dict[str, list[str]]:
    """Benchmarks per calibrated call (primary subset and mapping), in name order."""
    o = ctx.options
    loads = ctx.results.load.loads(subset=o.primary_subset, mapping=o.mapping)
    out = {call: sorted(b for b, v in loads.items() if v == call)
           for call in ("policy", "route-sensitive", "capability", "uninformative")}
    out["undetermined"] = sorted(b for b in ctx.benchmarks
                                 if loads.get(b, "undetermined") == "undetermined")
    return out


def _load_bullets(ctx: ReportContext, lists: dict[str, list[str]]) -> list[str]:
    o, alpha = ctx.options, ctx.results.load.alpha
    policy, route, capability = (lists["policy"], lists["route-sensitive"],
                                 lists["capability"])
    uninformative, undetermined = lists["uninformative"], lists["undetermined"]
    items: list[str] = []
    if policy:
        items.append(f"Policy-load here: {', '.join(policy)}. On these, the branches whose "
                     "last policy signal is A score differently from the others by more than "
                     f"seed noise (BH q < {alpha:g}): the score measures which moderation "
                     "policy the guard's labels encoded, not how well it detects harm. A "
                     "higher number is not a better guard.")
    if route:
        items.append(f"Route-sensitive here: {', '.join(route)}. The branches differ by more "
                     "than seed noise, but not along the A/B line: how a policy reached the "
                     "model moves these scores. Read them as neither policy nor capability.")
    if capability:
        items.append(f"Capability-load here: {', '.join(capability)}. No difference between "
                     "branches beyond seed noise was detected, so differences between guards "
                     "larger than the seed noise can be read as detection capability; with few "
                     "seed groups the test has little power, so this is absence of evidence, "
                     "not proof that policy does not matter.")
    if uninformative:
        items.append(f"Uninformative: {', '.join(uninformative)} — every run scores the same "
                     "(e.g. all 0), so these say nothing about policy or capability.")
    if undetermined:
        items.append(f"Undetermined: {', '.join(undetermined)} — fewer than two seed groups "
                     f"of at least {o.min_seeds} seeds, fewer than two branches, or fewer than "
                     f"{MIN_PROMPTS} prompts, so noise cannot be told from policy; do not read "
                     "these as either.")
    return items


_CALL_WORDS = {
    "policy content": "the route-matched A-last vs B-last contrast is beyond seed noise at "
                      "thresholds matched on policy-neutral rows: the score carries the content "
                      "of the labelling policy, not only how well the guard detects harm",
    "threshold shift": "the A-last branches differ at 0.5 but not at matched thresholds: they "
                       "flag more (or less) of everything, a moved threshold, not policy content",
    "route-sensitive": "branches differ beyond seed noise, but not along A/B within a route: "
                       "how a policy reached the model moves these scores",
    "capability": "an equivalence test puts the policy contrast within the stated margin at "
                  "matched thresholds",
    "undetermined": "none of the above was shown (low power, too few seeds or prompts; see the "
                    "calls section's reasons); read these as neither policy nor capability",
    "uninformative": "every run scores the same, so these say nothing about policy or "
                     "capability",
}


def _call_bullets(ctx: ReportContext, lists: dict[str, list[str]]) -> list[str]:
    """The first screen's calls, grouped by call, each with what it showed (one source: the
    first screen's table, so the two cannot disagree); the span test's ``lists`` where there
    is no calls analysis."""
    table, source = call_table(ctx)
    if source != "calls":
        return _load_bullets(ctx, lists)
    items = []
    for call, words in _CALL_WORDS.items():
        rows = table.filter(pl.col("call") == call)
        if not rows.height:
            continue
        stable = rows.filter(pl.col("stable") == "yes")["benchmark"].to_list()
        items.append(f"{call.capitalize()} ({rows.height}): {', '.join(rows['benchmark'])} — "
                     f"{words}. Stable under every analyst choice: "
                     f"{', '.join(stable) or 'none'}.")
    items.append("The older span test (Δb against the seed floor Φb, at 0.5) is in 'Policy or "
                 "capability?': it cannot tell policy content from a moved threshold, so it "
                 "makes no call here.")
    return items


def section_summary(ctx: ReportContext) -> Section:
    o = ctx.options
    lists = load_lists(ctx)
    runs = ctx.results.scores.table.select("run_id", "guard_kind", "size").unique()
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
    items = [competence_summary(ctx), *_call_bullets(ctx, lists)]
    missing = missing_steps_sentence(ctx)
    if missing:
        items.append(missing)
    if ctx.results.contamination is not None:
        t = ctx.results.contamination.table.filter(pl.col("n_exact") > 0).sort(
            ["share_exact", "benchmark"], descending=[True, False])
        if t.height:
            worst = ", ".join(f"{r['benchmark']} {pct(r['share_exact'])} "
                              f"({r['n_exact']:,}/{r['n']:,})"
                              for r in t.head(5).iter_rows(named=True))
            items.append(f"Contamination: {t.height} of {ctx.results.contamination.table.height} "
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
                 "policy-content or threshold-shift score as capability.")
    payload = {"policy_load": lists["policy"], "capability_load": lists["capability"],
               "route_sensitive": lists["route-sensitive"],
               "uninformative": lists["uninformative"], "undetermined": lists["undetermined"],
               "alpha": ctx.results.load.alpha, "subset": o.primary_subset,
               "mapping": o.mapping, "threshold": o.threshold,
               "competence": competence_payload(ctx),
               "provenance": provenance_payload(ctx)}
    return Section("summary", "At a glance",
                   (*provenance_blocks(ctx, caution=caution, banner=False),
                    *(Paragraph(p) for p in paras),
                    Bullets(tuple(items))), payload)


def section_study(ctx: ReportContext) -> Section:
    t = ctx.results.study.table
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
    study = ctx.results.study
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
    study = ctx.results.study
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
    o = ctx.options
    calls = ctx.results.values.get("calls")
    reasons = ({r["benchmark"]: r["reason"] for r in calls.primary().iter_rows(named=True)}
               if calls is not None else {})
    load = ctx.results.load.table.filter((pl.col("subset") == o.primary_subset)
                                         & (pl.col("mapping") == o.mapping))
    for r in load.iter_rows(named=True):
        reasons.setdefault(r["benchmark"], r["load_reason"])
    why = []
    for r in card.iter_rows(named=True):
        steps = missing_steps(ctx, r["benchmark"])
        determined = r.get("call") not in (None, "undetermined", "uninformative")
        why.append("; ".join(steps) if steps else
                   None if determined else reasons.get(r["benchmark"]) or "no call computed")
    return card.with_columns(pl.Series("why", why, dtype=pl.String))


def section_disclosure(ctx: ReportContext) -> Section:
    d = ctx.results.disclosure
    cols = (Column("benchmark", "benchmark"), Column("n", "n", "int"),
            Column("share_exact", "prior overlap, exact", "pct"),
            Column("share_near", "near", "pct"),
            Column("floor_median", "seed floor median (pp)", "pp"),
            Column("floor_widest", "seed floor widest (pp)", "pp"),
            Column("n_groups", "seed groups", "int"), Column("delta", "Δb (pp)", "pp"),
            Column("call", "call"), Column("call_stable", "stable?"),
            Column("q_contrast", "q (A-last vs B-last)", "p"), Column("load", "span test"),
            Column("why", "why no call"))
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
                 "Call: the span test's (no calls analysis); ")
              + "span test: the calibrated load test at 0.5 (A-last vs B-last contrast and "
              "span against seed noise; see 'Policy or capability?'), which cannot tell "
              "policy content from a moved threshold; q: BH q-value of the contrast; the "
              "study's rule (Δb > widest seed floor, load_study) is in the CSV. No intervals.",
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
