"""The analysis registry: every analysis of the report step declares itself here.

An analysis is one module that ends with one explicit registration call::

    def _run(ctx: AnalysisContext) -> LoadResult | None:
        return benchmark_load(ctx[SCORES], alpha=ctx.options.alpha)

    LOAD = register_analysis("load", _run, result=LoadResult, needs=(SCORES,))

``needs`` names the analyses whose results it reads (as their handles, so importing the module
registers them first); ``result`` is its result type. The step
(:func:`guarddiag.analyses.step.analyse`) runs every registered analysis once, each after what
it needs, and the results are read by handle (``results[LOAD]``, typed by the handle; a report
section reads ``ctx.result(LOAD)``). An analysis whose inputs are absent returns None, or raises
:class:`AnalysisOmitted` with the reason, which the results keep (``results.omitted``).

Registration is an explicit call, not reflection over module contents: the step, results.json
and the report sections see exactly what was registered, in registration order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from guarddiag.errors import GuarddiagError

if TYPE_CHECKING:
    from guarddiag.analyses.inputs import ReportInputs
    from guarddiag.analyses.options import ReportOptions

R = TypeVar("R")


class AnalysisOmitted(Exception):  # noqa: N818 - a signal with a note, not an error
    """Raised by an analysis whose inputs are absent: its result is None and ``note`` says
    why (shown by the report)."""

    def __init__(self, note: str):
        super().__init__(note)
        self.note = note


@dataclass(frozen=True, eq=False)
class Analysis(Generic[R]):
    """One registered analysis: its name, what it reads and what it returns."""

    name: str
    compute: Callable[[AnalysisContext], R | None] = field(repr=False)
    result: type
    """Its result type (the value is this type, or None where its inputs are absent)."""
    needs: tuple[Analysis[Any], ...] = ()
    """Analyses whose results it reads (``ctx[need]``)."""
    description: str = ""


@dataclass(frozen=True)
class AnalysisContext:
    """What an analysis reads: the options, the inputs, and the results it needs."""

    options: ReportOptions
    inputs: ReportInputs
    """The saved tables, sensitivity variants taken out (every analysis but ``distill``)."""
    all_inputs: ReportInputs
    """The saved tables as loaded, sensitivity variants included."""
    done: Mapping[str, Any]

    def __getitem__(self, analysis: Analysis[R]) -> R:
        """The result of a needed analysis; an error where it is absent (check
        :meth:`get` when the analysis may be omitted)."""
        value = self.get(analysis)
        if value is None:
            raise GuarddiagError(f"analysis {analysis.name!r} has no result")
        return value

    def get(self, analysis: Analysis[R]) -> R | None:
        if analysis.name not in self.done:
            raise GuarddiagError(f"analysis {analysis.name!r} was read before it ran: "
                                 f"declare it in needs")
        value: R | None = self.done[analysis.name]
        return value


class AnalysisRegistry:
    """Registered analyses by name, in registration order."""

    def __init__(self) -> None:
        self._entries: dict[str, Analysis[Any]] = {}

    def register(self, name: str, compute: Callable[[AnalysisContext], R | None], *,
                 result: type, needs: tuple[Analysis[Any], ...] = (),
                 description: str = "") -> Analysis[R]:
        """Register ``compute`` as the analysis ``name`` (unique) and return its handle."""
        if name in self._entries:
            raise GuarddiagError(f"analysis {name!r} is registered twice")
        for need in needs:
            if self._entries.get(need.name) is not need:
                raise GuarddiagError(f"analysis {name!r} needs {need.name!r}, which is not "
                                     f"registered")
        entry: Analysis[R] = Analysis(name=name, compute=compute, result=result, needs=needs,
                                      description=description or (compute.__doc__ or ""))
        self._entries[name] = entry
        return entry

    def entries(self) -> tuple[Analysis[Any], ...]:
        """Every analysis, in registration order (each after what it needs, since a need must
        be registered first)."""
        return tuple(self._entries.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    @contextmanager
    def scoped(self) -> Iterator[AnalysisRegistry]:
        """Registrations made inside the block are undone when it ends (tests, plug-ins tried
        out in one session)."""
        saved = dict(self._entries)
        try:
            yield self
        finally:
            self._entries = saved


ANALYSES = AnalysisRegistry()
"""The report step's analyses."""

register_analysis = ANALYSES.register
