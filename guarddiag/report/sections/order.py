"""The report's sections in order, and how to add more.

:data:`DEFAULT_SECTIONS` are the study-level sections; :func:`default_sections` adds the
SORRY-Bench ones (:data:`~guarddiag.report.sections.sorry.SORRY_SECTIONS`), which omit
themselves when their inputs are absent. :func:`with_sections` inserts extra builders before the
disclosure card, which stays last.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from guarddiag.report.context import SectionBuilder
from guarddiag.report.sections.data import section_contamination, section_pool, section_val
from guarddiag.report.sections.effects import section_correlation, section_mapping, section_rank
from guarddiag.report.sections.overview import (
    section_disclosure,
    section_study,
    section_summary,
)
from guarddiag.report.sections.scores import section_load, section_outside, section_scores
from guarddiag.report.sections.sorry import SORRY_SECTIONS
from guarddiag.report.sections.threshold_free import section_threshold_free
from guarddiag.report.sections.variants import section_distill

DEFAULT_SECTIONS: tuple[SectionBuilder, ...] = (
    section_summary, section_contamination, section_scores, section_load, section_rank,
    section_distill, section_mapping, section_outside, section_threshold_free,
    section_correlation, section_val,
    section_pool,
    section_study, section_disclosure,
)
"""The report's sections, in order; the disclosure card is always last."""


def with_sections(extra: Iterable[SectionBuilder],
                  base: Sequence[SectionBuilder] = DEFAULT_SECTIONS
                  ) -> tuple[SectionBuilder, ...]:
    """``base`` with ``extra`` sections inserted just before the disclosure card."""
    base = tuple(base)
    return (*base[:-1], *extra, base[-1])


def default_sections() -> tuple[SectionBuilder, ...]:
    """:data:`DEFAULT_SECTIONS` plus the SORRY-Bench breakdowns (categories, mutation
    robustness, benchmark balance), which omit themselves when their inputs are absent."""
    return with_sections(SORRY_SECTIONS)
