"""The report's built-in sections, registered in report order with their results.json payloads,
and how to add more.

Importing this module registers every built-in section in the section registry
(:mod:`~guarddiag.report.sections.registry`): the study-level ones (:data:`DEFAULT_SECTIONS`),
then the SORRY-Bench ones (:data:`~guarddiag.report.sections.sorry.SORRY_SECTIONS`, which omit
themselves when their inputs are absent), and the disclosure card, always last. A section
registered anywhere else (an analysis of one's own with its section) is found through the
registry by :func:`default_sections` and results.json's schema; :func:`with_sections` instead
inserts extra builders for one report only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from guarddiag.analyses.correlation import CorrelationResult
from guarddiag.analyses.pool import PoolStatsResult
from guarddiag.analyses.rank import BranchRankResult
from guarddiag.analyses.sorry import SorryCategoriesResult
from guarddiag.analyses.threshold_free import ThresholdFreeResult
from guarddiag.analyses.variants import DistillSensitivityResult
from guarddiag.report import schema_payloads as p
from guarddiag.report.context import SectionBuilder
from guarddiag.report.sections.branches import section_branches
from guarddiag.report.sections.calls import section_calls
from guarddiag.report.sections.data import section_contamination, section_pool, section_val
from guarddiag.report.sections.effects import section_correlation, section_mapping, section_rank
from guarddiag.report.sections.first_screen import section_first_screen
from guarddiag.report.sections.overview import (
    section_disclosure,
    section_study,
    section_summary,
)
from guarddiag.report.sections.registry import SECTIONS, register_section
from guarddiag.report.sections.scores import section_load, section_outside, section_scores
from guarddiag.report.sections.sorry import (
    SORRY_SECTIONS,
    sorry_balance,
    sorry_categories,
    sorry_robustness,
)
from guarddiag.report.sections.threshold_free import section_threshold_free
from guarddiag.report.sections.variants import section_distill

BUILT_IN_SECTIONS: tuple[SectionBuilder, ...] = (
    register_section("first_screen", section_first_screen, payload=p.FirstScreenJson),
    register_section("summary", section_summary, payload=p.SummaryJson),
    register_section("branches", section_branches, payload=p.BranchesJson),
    register_section("contamination", section_contamination, payload=p.ContaminationJson),
    register_section("scores", section_scores, payload=p.ScoresJson),
    register_section("load", section_load, payload=p.LoadJson),
    register_section("calls", section_calls, payload=p.CallsJson),
    register_section("rank", section_rank, payload=BranchRankResult),
    register_section("distill", section_distill, payload=DistillSensitivityResult),
    register_section("mapping", section_mapping, payload=p.MappingJson),
    register_section("outside", section_outside, payload=p.OutsideJson),
    register_section("threshold_free", section_threshold_free, payload=ThresholdFreeResult),
    register_section("correlation", section_correlation, payload=CorrelationResult),
    register_section("val", section_val, payload=p.ValJson),
    register_section("pool", section_pool, payload=PoolStatsResult),
    register_section("study", section_study, payload=p.StudyJson),
    register_section("sorry_categories", sorry_categories, payload=SorryCategoriesResult),
    register_section("sorry_robustness", sorry_robustness, payload=p.SorryRobustnessJson),
    register_section("sorry_balance", sorry_balance, payload=p.SorryBalanceJson),
    register_section("disclosure", section_disclosure, payload=p.DisclosureJson, last=True),
)
"""Every built-in section, in report order."""
DEFAULT_SECTIONS: tuple[SectionBuilder, ...] = tuple(
    b for b in BUILT_IN_SECTIONS if b not in SORRY_SECTIONS)
"""The study-level sections, in order (SORRY-Bench ones aside); the disclosure card is last."""


def with_sections(extra: Iterable[SectionBuilder],
                  base: Sequence[SectionBuilder] = DEFAULT_SECTIONS
                  ) -> tuple[SectionBuilder, ...]:
    """``base`` with ``extra`` sections inserted just before the disclosure card."""
    base = tuple(base)
    return (*base[:-1], *extra, base[-1])


def default_sections() -> tuple[SectionBuilder, ...]:
    """Every registered section in report order: :data:`DEFAULT_SECTIONS`, the SORRY-Bench
    breakdowns (categories, mutation robustness, benchmark balance), then any section
    registered elsewhere, and the disclosure card last."""
    return tuple(e.builder for e in SECTIONS.entries())
