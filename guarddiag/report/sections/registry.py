"""The section registry: every report section, its builder and its results.json payload.

A section registers itself with one call, :func:`register_section`, naming its id, its builder
``(ReportContext) -> Section`` and the type of its payload under results.json
``results[<id>]``: the analysis result it writes (a result dataclass, whose payload and model
are derived from its declaration, :mod:`guarddiag.analyses.payload`; the builder writes
``payload_of(result)``), or a model of its own (:mod:`guarddiag.report.schema_payloads`) for a
payload that gathers several results. The report's default sections,
results.json's schema and its validation all read this registry: the built-in sections are
registered in report order by :mod:`~guarddiag.report.sections.order`; a section registered
anywhere else joins them just before the disclosure card, which stays last.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from guarddiag.analyses.payload import payload_model
from guarddiag.errors import GuarddiagError
from guarddiag.report.context import SectionBuilder
from guarddiag.typed import Model


@dataclass(frozen=True)
class SectionEntry:
    id: str
    builder: SectionBuilder = field(repr=False)
    payload: type | None
    """Type of ``results[id]`` in results.json: a typed model, or a result dataclass whose
    model is derived (:func:`~guarddiag.analyses.payload.payload_model`); None: a payload the
    schema allows but does not describe."""
    last: bool = False
    """Always the last section (the disclosure card)."""


class SectionRegistry:
    """Registered sections by id, in registration order (the ``last`` one at the end)."""

    def __init__(self) -> None:
        self._entries: dict[str, SectionEntry] = {}

    def register(self, id: str, builder: SectionBuilder, *,
                 payload: type | None = None, last: bool = False) -> SectionBuilder:
        """Register ``builder`` as section ``id`` (unique) and return it."""
        if id in self._entries:
            raise GuarddiagError(f"report section {id!r} is registered twice")
        if payload is not None and not issubclass(payload, Model):
            payload_model(payload)  # a result type with no JSON form is refused here
        if last and any(e.last for e in self._entries.values()):
            raise GuarddiagError(f"report section {id!r}: another section is already last")
        self._entries[id] = SectionEntry(id=id, builder=builder, payload=payload, last=last)
        return builder

    def entries(self) -> tuple[SectionEntry, ...]:
        """Every section in report order: registration order, the ``last`` one at the end."""
        entries = list(self._entries.values())
        return (*(e for e in entries if not e.last), *(e for e in entries if e.last))

    def payloads(self) -> dict[str, type[Model]]:
        """Section id → payload model, for the sections that declare one (a result
        dataclass's derived)."""
        return {e.id: e.payload if issubclass(e.payload, Model) else payload_model(e.payload)
                for e in self.entries() if e.payload is not None}

    @contextmanager
    def scoped(self) -> Iterator[SectionRegistry]:
        """Registrations made inside the block are undone when it ends."""
        saved = dict(self._entries)
        try:
            yield self
        finally:
            self._entries = saved


SECTIONS = SectionRegistry()
"""The report's sections."""

register_section = SECTIONS.register
