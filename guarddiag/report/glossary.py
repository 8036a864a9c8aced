"""The report's glossary: every symbol and abbreviation it uses, defined once.

The "Branches and terms" section shows it; the HTML and Markdown renderers link the first use
of each term in the report's prose and captions to its definition (:func:`link_first_uses`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

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
    ("policy-load", "call: the A-last and B-last branches differ by more than seed noise (BH "
                    "q < α): the score measures the labels' moderation policy."),
    ("capability-load", "call: no difference between branches beyond seed noise was detected; "
                        "absence of evidence, not proof that policy does not matter."),
    ("route-sensitive", "call: branches differ beyond seed noise, but not along the A/B line."),
    ("uninformative", "call: every run scores the same, so nothing can be read."),
    ("undetermined", "call: too few seed groups, branches or prompts to tell noise from "
                     "policy."),
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
                        "benchmarks must reach the floor for a capability call to mean "
                        "detection."),
)
"""(term, definition), in the order a reader meets them."""


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
