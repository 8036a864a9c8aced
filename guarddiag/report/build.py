"""Building the report: run the section builders over the analysis results and assemble the
content of results.json (:mod:`guarddiag.report.schema` describes it)."""

from __future__ import annotations

from collections.abc import Sequence

from guarddiag.analyses.rank import RANK
from guarddiag.errors import GuarddiagError
from guarddiag.report.context import ReportContext, SectionBuilder
from guarddiag.report.document import Report
from guarddiag.report.jsonable import jsonable
from guarddiag.report.schema import SCHEMA_VERSION
from guarddiag.report.schema_payloads import OptionsJson
from guarddiag.report.sections.order import DEFAULT_SECTIONS, SECTIONS


def build_report(ctx: ReportContext, *,
                 sections: Sequence[SectionBuilder] = DEFAULT_SECTIONS) -> Report:
    """Run each builder once, in order, and assemble results.json's content
    (:func:`~guarddiag.report.schema.results_model`; ``options`` holds the
    :class:`~guarddiag.report.schema_payloads.OptionsJson` fields of the report's options);
    two sections may not share an id, and a registered section builds the id it was
    registered under."""
    built = []
    seen: set[str] = set()
    registered = {e.builder: e.id for e in SECTIONS.entries()}
    for builder in sections:
        section = builder(ctx)
        if registered.get(builder, section.id) != section.id:
            raise GuarddiagError(f"report: the section registered as "
                                 f"{registered[builder]!r} built {section.id!r}")
        if section.id in seen:
            raise GuarddiagError(f"report: two sections share the id {section.id!r}")
        seen.add(section.id)
        built.append(section)
    o, i = ctx.options, ctx.results.inputs

    def ref(x: tuple[str, str] | None) -> dict[str, str] | None:
        return {"path": x[0], "sha256": x[1]} if x else None

    options = {k: getattr(o, k) for k in OptionsJson.model_fields}
    rank = ctx.get(RANK)
    if rank is not None and not options["rank_group"]:
        # The default group is read from the runs' roles: record the branches it held.
        options["rank_group"] = list(rank.group)
    results = {
        "schema_version": SCHEMA_VERSION,
        "title": o.title,
        "options": options,
        "inputs": {"predictions": [ref(x) for x in i.prediction_files],
                   "pool": ref(i.pool_file), "agreement": ref(i.agreement_file),
                   "audit_summary": ref(i.audit_file)},
        "notes": list(ctx.notes),
        "sections": [{"id": s.id, "title": s.title, "omitted": s.omitted} for s in built],
        "results": {s.id: s.results for s in built if s.omitted is None},
    }
    return Report(title=o.title, sections=tuple(built), results=jsonable(results),
                  notes=ctx.notes)
