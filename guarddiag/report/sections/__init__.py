"""Section builders: each turns the analysis results into one report section's blocks.

Modules: :mod:`~.overview` (summary, the study's numbers, disclosure card), :mod:`~.scores`
(Table 1, span vs seed floor, outside guards), :mod:`~.effects` (rank test, mapping effect,
VAL correlation), :mod:`~.data` (contamination, validation split, pool), :mod:`~.sorry`
(SORRY-Bench categories, robustness, balance), :mod:`~.threshold_free` (F1, AUPRC, over-refusal
at 95 % capture), :mod:`~.provenance` (the demo banner and what was measured),
:mod:`~.common` (shared helpers, the bold rule, the one interval of a score cell) and
:mod:`~.order` (the sections in report order).
"""

from guarddiag.report.sections.order import DEFAULT_SECTIONS, default_sections, with_sections
from guarddiag.report.sections.sorry import SORRY_SECTIONS

__all__ = ["DEFAULT_SECTIONS", "SORRY_SECTIONS", "default_sections", "with_sections"]
