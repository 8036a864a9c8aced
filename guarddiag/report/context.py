"""What the section builders read: the report's options and the analysis results.

:class:`~guarddiag.analyses.options.ReportOptions` (declared once, in the analyses layer)
are the options; :class:`ReportContext` pairs them with the
:class:`~guarddiag.analyses.step.AnalysisResults` computed once for the report. A section builder
is a function ``(ReportContext) -> Section``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from guarddiag.analyses.options import ReportOptions
from guarddiag.analyses.step import AnalysisResults
from guarddiag.report.document import Section


@dataclass(frozen=True)
class ReportContext:
    """Everything the section builders read: options and each analysis computed once."""

    options: ReportOptions
    results: AnalysisResults

    @property
    def notes(self) -> tuple[str, ...]:
        return self.results.notes

    @property
    def benchmarks(self) -> list[str]:
        """Scored benchmarks (not the pool's val split), in name order."""
        return self.results.benchmarks


SectionBuilder = Callable[[ReportContext], Section]
