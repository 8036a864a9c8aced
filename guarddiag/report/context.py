"""What the section builders read: the report's options and the analysis results.

:class:`~guarddiag.analyses.options.ReportOptions` (declared once, in the analyses layer)
are the options; :class:`ReportContext` pairs them with the
:class:`~guarddiag.analyses.step.AnalysisResults` computed once for the report. A section builder
is a function ``(ReportContext) -> Section``; it reads each analysis through its typed handle:
``ctx.result(RANK)`` (the result, which must be there) or ``ctx.get(RANK)`` (None where the
analysis has no result).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from guarddiag.analyses.options import ReportOptions
from guarddiag.analyses.registry import Analysis
from guarddiag.analyses.step import AnalysisResults
from guarddiag.errors import GuarddiagError
from guarddiag.report.document import Section

R = TypeVar("R")


@dataclass(frozen=True)
class ReportContext:
    """Everything the section builders read: options and each analysis computed once."""

    options: ReportOptions
    results: AnalysisResults

    def get(self, analysis: Analysis[R]) -> R | None:
        """The result of ``analysis``, or None where its inputs are absent."""
        return self.results[analysis]

    def result(self, analysis: Analysis[R]) -> R:
        """The result of ``analysis``; an error where it has none (read :meth:`get` when the
        analysis may be absent)."""
        value = self.results[analysis]
        if value is None:
            why = self.results.omitted.get(analysis.name, "its inputs are absent")
            raise GuarddiagError(f"report: a section read analysis {analysis.name!r}, which "
                                 f"has no result ({why})")
        return value

    @property
    def notes(self) -> tuple[str, ...]:
        return self.results.notes

    @property
    def benchmarks(self) -> list[str]:
        """Scored benchmarks (not the pool's val split), in name order."""
        return self.results.benchmarks


SectionBuilder = Callable[[ReportContext], Section]
