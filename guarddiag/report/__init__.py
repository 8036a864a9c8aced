"""The diagnostic report: saved tables in, HTML / Markdown / JSON / CSV / LaTeX / figures out.

``make_report(options)`` runs the analysis step of :mod:`guarddiag.analyses.step` (which reads
the saved hand-off files only — predictions, ``pool.parquet`` with its ``agreement.json``, the
audit's ``summary.json``, benchmark manifests and frames — and runs every analysis once), lets
each *section builder* turn the results into document blocks, and renders them. The report
itself reads nothing but those results, retrains or re-scores nothing and computes no
statistics.

Modules: :mod:`~.document` (blocks, sections, the report), :mod:`~.context` (what builders
read), :mod:`~.sections` (the builders and their registry), :mod:`~.build` (sections →
results.json content), :mod:`~.render` (HTML, Markdown, LaTeX, CSV), :mod:`~.write` (the output
folder), :mod:`~.make` (the verb), :mod:`~.schema_payloads` (results.json as typed models) and
:mod:`~.schema` (the assembled document model, its generated JSON Schema, validation).

Sections. A report is a list of :data:`SectionBuilder` functions ``(ReportContext) -> Section``,
each registered with its id and results.json payload type in the section registry
(:mod:`~.sections.registry`); :func:`default_sections` is every registered one in order (the
built-in ones, the SORRY-Bench ones, any registered elsewhere, the disclosure card last). A
builder whose inputs are absent returns ``Section.omit(...)`` with a note; the report shows the
note and carries on. To add a section with its own analysis, write one module that declares
its result and registers the analysis (:func:`guarddiag.analyses.register_analysis`) and one
that registers its section (:func:`~.sections.registry.register_section`, ``payload=`` the
result type: its results.json model is derived, :mod:`guarddiag.analyses.payload`) and import
it; ``sections=with_sections([b])``
adds a builder to one report only.

Output folder (``--out``)::

    report.html        one self-contained page: figures as data: URIs, inline CSS, no scripts,
                       no external resources, a Content-Security-Policy that forbids both, and
                       every string from the inputs HTML-escaped
    report.md          the same content as Markdown (figures linked from figures/)
    results.json       every number, with its cohort (:mod:`guarddiag.report.schema`)
    tables/<name>.csv  raw values (fractions, not percent), one file per table
    tables/<name>.tex  the same table for LaTeX (booktabs; best value per column in bold),
                       except for the long machine-readable tables (scores_long,
                       mapping_effect_runs), which are CSV only
    figures/<name>.png, figures/<name>.pdf
    meta.json          input digests, versions, git sha (the only file with run-dependent data)

Re-running on the same inputs and options gives byte-identical results.json, tables and
figures (no dates, sorted keys, seeded bootstrap).
"""

from guarddiag.analyses.inputs import ReportInputs
from guarddiag.analyses.options import ReportOptions
from guarddiag.analyses.step import AnalysisResults
from guarddiag.report.build import build_report
from guarddiag.report.context import ReportContext, SectionBuilder
from guarddiag.report.document import (
    Block,
    Bullets,
    Column,
    Examples,
    FigureBlock,
    Paragraph,
    Report,
    Section,
    Table,
)
from guarddiag.report.make import make_report, render_report
from guarddiag.report.render import render_csv, render_html, render_latex, render_markdown
from guarddiag.report.schema import SCHEMA_VERSION, json_schema, results_model, validate_results
from guarddiag.report.sections import (
    DEFAULT_SECTIONS,
    SORRY_SECTIONS,
    default_sections,
    with_sections,
)
from guarddiag.report.sections.common import pivot_by_cohort
from guarddiag.report.sections.registry import SECTIONS, register_section
from guarddiag.report.write import ReportResult, write_report

__all__ = [
    "DEFAULT_SECTIONS",
    "SCHEMA_VERSION",
    "SECTIONS",
    "SORRY_SECTIONS",
    "AnalysisResults",
    "Block",
    "Bullets",
    "Column",
    "Examples",
    "FigureBlock",
    "Paragraph",
    "Report",
    "ReportContext",
    "ReportInputs",
    "ReportOptions",
    "ReportResult",
    "Section",
    "SectionBuilder",
    "Table",
    "build_report",
    "default_sections",
    "json_schema",
    "make_report",
    "pivot_by_cohort",
    "register_section",
    "render_csv",
    "render_html",
    "render_latex",
    "render_markdown",
    "render_report",
    "results_model",
    "validate_results",
    "with_sections",
    "write_report",
]
