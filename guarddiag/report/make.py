"""The ``guarddiag report`` verb: run the analysis step, then build and write the report.

:func:`make_report` = :func:`guarddiag.analyses.step` (load every input once, run every analysis
once) + :func:`render_report` (section builders, renderers, files), which reads nothing but the
analysis results.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from guarddiag.analyses.inputs import load_inputs
from guarddiag.analyses.step import AnalysisResults, analyse
from guarddiag.report.build import build_report
from guarddiag.report.context import ReportContext, ReportOptions, SectionBuilder
from guarddiag.report.sections.order import default_sections
from guarddiag.report.write import ReportResult, write_report

logger = logging.getLogger(__name__)


def render_report(results: AnalysisResults, options: ReportOptions, *,
                  sections: Sequence[SectionBuilder] | None = None) -> ReportResult:
    """Build the sections from ``results`` and write every output file to
    ``options.out_dir``; ``sections`` defaults to
    :func:`~guarddiag.report.sections.order.default_sections`."""
    ctx = ReportContext(options=options, results=results)
    report = build_report(ctx, sections=default_sections() if sections is None else sections)
    logger.info(f"report: writing {options.out_dir}")
    inputs = results.inputs
    digests = dict(inputs.prediction_files)
    for ref in (inputs.pool_file, inputs.agreement_file, inputs.audit_file):
        if ref:
            digests[ref[0]] = ref[1]
    return write_report(report, options.out_dir, inputs=digests)


def make_report(options: ReportOptions, *,
                sections: Sequence[SectionBuilder] | None = None) -> ReportResult:
    """Load the saved tables, analyse, render, write (see :func:`render_report`)."""
    logger.info(f"report: reading {options.runs_dir}")
    inputs = load_inputs(options)
    logger.info(f"report: {inputs.predictions.height:,} predictions; analysing "
                f"(bootstrap B = {options.n_resamples:,})")
    return render_report(analyse(inputs, options), options, sections=sections)
