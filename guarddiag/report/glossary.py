"""The report's glossary: every symbol and abbreviation it uses, defined once.

The "Branches and terms" section shows it; the HTML and Markdown renderers link the first use
of each term in the report's prose and captions to its definition (:func:`link_first_uses`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from guarddiag.analyses.callwords import at_cutoff

GLOSSARY: tuple[tuple[str, str], ...] = (
    ("CAP", "capture: the share of a harmful benchmark's prompts read as unsafe (higher catches "
            "more)."),
    ("OVER-REF", "over-refusal: the share of a benign benchmark's prompts read as unsafe "
                 "(lower refuses less)."),
    ("OR-H", "OVER-REF on OR-Bench-hard, benign prompts that look harmful."),
    ("COPY", "CAP on HarmBench-copyright (song lyrics and book passages)."),
    ("VAL", "4-class accuracy on the pool's validation split, under policy A."),
    ("A-last", "a student branch whose last label signal is policy A (its spec's last_policy); "
               "the A-last group is read from the branch specs, not from the 'labels' column."),
    ("B-last", "every other student branch (last label signal policy B)."),
    ("last policy", "the policy (A or B) of the last label signal that reached a model: a "
                    "distilled branch's is its teacher's, a recalibrated one's its calibration "
                    "labels'."),
    ("labels", "the policy mix of a run's training labels as its run records it; it can differ "
               "from its last policy (a branch trained on B and recalibrated on A shows B here "
               "but is A-last)."),
    ("route", "how the last label signal reached the model: hard labels, distillation from a "
              "teacher, or a head-only recalibration."),
    ("Δb", "label-supervision span of benchmark b: the range of the branches' seed-mean scores, "
           "averaged over model sizes (teachers left out)."),
    ("Φb", "seed floor of benchmark b: the range of one recipe's scores over its seeds; the "
           "tables give its median and widest value over the recipes."),
    ("seed SD", "pooled within-recipe standard deviation of a benchmark's scores over seeds: "
                "the seed noise a single run's interval does not hold."),
    ("policy-neutral rows", "the pool's val rows that both policies label safe under the "
                            "mapping and that have no copy in the train split: flags on them "
                            "are false flags whatever policy a run learnt, on prompts it was "
                            "not trained on."),
    ("matched threshold", "a run's threshold that gives it the reference recipe's false-flag "
                          "rate at {cut} on the policy-neutral rows; the calls read every run "
                          "there, so a guard that flags more of everything gains nothing."),
    ("route-matched", "an A-last branch compared with the runs that took its route with "
                      "policy-B labels: its control (head-only) or the reference (distillation)."),
    ("degenerate run", "a run whose matched threshold lies within 0.001 of 0 or 1, or whose "
                       "clear-harm capture at it is below the TF-IDF baseline's; every pair "
                       "using it is left out of the contrasts, and named."),
    ("A flags more", "call: a route's A-last branches flag more of the benchmark than their "
                     "route-matched controls at the matched threshold, beyond seed noise (level "
                     "α). On prompts only policy A blocks, the policy content the study means."),
    ("A flags less", "call: they flag less at the matched threshold: the A-last heads rank these "
                     "prompts lower against the neutral rows. On prompts both policies call "
                     "unsafe, a ranking loss, not policy content."),
    ("threshold shift", "call: the A-last branches differ at {cut} but not at the matched "
                        "threshold: they flag more (or less) of everything."),
    ("capability", "call: an equivalence test (TOST) shows the route-matched A − B contrast "
                   "within ±margin at the matched threshold on every route: label policy does "
                   "not move the score, so it measures detection — if the guards pass the "
                   "competence gate."),
    ("route-sensitive", "call: recipes differ beyond seed noise, but no route shows an A/B "
                        "contrast."),
    ("routes disagree", "call: the routes show different calls (e.g. distillation 'A flags "
                        "more', head-only 'capability'): no one call holds."),
    ("distill only", "a call carried by the distillation route alone (the head-only route "
                     "showed nothing); 'head_only only' likewise."),
    ("stable", "the benchmark's call and every route's call are the same in every cell of "
               "mapping × decontamination × threshold."),
    ("TOST", "two one-sided tests: equivalence within ±margin is shown when both reject at "
             "level α."),
    ("MDE", "minimum detectable effect: the |A − B| a two-sided level-α test detects with 80 % "
            "power, (t₁₋α/₂ + t₀.₈) · se."),
    ("uninformative", "call: every run scores the same, so nothing can be read."),
    ("undetermined", "call: nothing above was shown — low power (see the MDE), degenerate runs, "
                     "or too few seeds or prompts; the reason is given."),
    ("seed-range+wilson", "the interval of a seed-mean cell: lowest to highest 95% Wilson bound "
                          "of the row's runs (for one run, its Wilson interval)."),
    ("Wilson interval", "the interval of one run's share on its prompts; it holds prompt "
                        "sampling, not seed noise."),
    ("BH q", "Benjamini–Hochberg adjusted p-value over one table's benchmarks."),
    ("Holm p", "Holm-adjusted p-value over the comparisons of one table (family-wise level)."),
    ("McNemar", "exact test on the prompts two guards read differently."),
    ("kept", "the prompts left in a benchmark's decontaminated subset after the audit removed "
             "the overlap kinds the table names."),
    ("decontaminated", "a benchmark's kept prompts; each table names which overlap kinds were "
                       "removed (exact only, or exact + near + template + contained)."),
    ("loose mapping", "unsafe = HARMFUL or COMPOUND; BOUNDARY_SAFE counts as safe."),
    ("strict mapping", "unsafe = HARMFUL, COMPOUND or BOUNDARY_SAFE."),
    ("competence gate", "the reference recipe's mean CAP on the study's clearly harmful "
                        "benchmarks must reach the floor, and its AUROC beat TF-IDF's by the "
                        "margin on every same-source pair that label policy does not move, for "
                        "a capability call to mean detection."),
    ("policy tilt", "on a same-source pair, the AUROC of TF-IDF trained on the other label "
                    "policy minus that of TF-IDF trained on the reference's; where its one-sided "
                    "bound lies beyond the margin, policy moves the pair, and the competence "
                    "gate shows it without counting it."),
)
"""(term, definition), in the order a reader meets them; ``{cut}`` stands for the protocol's
cut-off (:func:`glossary` writes it in)."""


def glossary() -> tuple[tuple[str, str], ...]:
    """:data:`GLOSSARY` as the report prints it: ``{cut}`` is the protocol's cut-off."""
    cut = at_cutoff()
    return tuple((term, meaning.replace("{cut}", cut)) for term, meaning in GLOSSARY)


def anchor(term: str) -> str:
    """The anchor id of a glossary term (``gl-`` + its letters, digits and dashes)."""
    slug = re.sub(r"[^0-9a-zA-Zα-ωΑ-Ω]+", "-", term.replace("Δ", "Delta-").replace("Φ", "Phi-"))
    return "gl-" + slug.strip("-").lower()


def _pattern(term: str, escape: Callable[[str], str]) -> re.Pattern[str]:
    # A whole term: not inside a longer word or a hyphenated name (OR-H is not OR).
    # Lower-case terms also match at the start of a sentence ("Competence gate: …").
    flags = re.IGNORECASE if term.islower() else 0
    return re.compile(r"(?<![\w\-])" + re.escape(escape(term)) + r"(?![\w\-+])", flags)


def link_first_uses(texts: list[str], escape: Callable[[str], str],
                    link: Callable[[str, str], str]) -> list[str]:
    """Already-escaped ``texts`` in reading order, with the first use of each glossary term
    wrapped by ``link(shown, anchor)``; text inside markup tags is left alone."""
    pending = {term: _pattern(term, escape) for term, _ in GLOSSARY}
    out = []
    for text in texts:
        for term in list(pending):
            pieces = re.split(r"(<[^>]*>|\]\([^)]*\))", text)
            for i in range(0, len(pieces), 2):
                hit = pending[term].search(pieces[i])
                if hit:
                    pieces[i] = (pieces[i][:hit.start()] + link(hit.group(0), anchor(term))
                                 + pieces[i][hit.end():])
                    del pending[term]
                    break
            text = "".join(pieces)
        out.append(text)
    return out
