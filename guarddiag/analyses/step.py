"""The analysis step of ``guarddiag report``: load every input once, run every analysis once.

:func:`run_analyses` = :func:`~guarddiag.analyses.inputs.load_inputs` + :func:`analyse`, which
runs every analysis of the registry (:mod:`~guarddiag.analyses.registry`; the analyses
themselves are listed in :mod:`~guarddiag.analyses.catalog`) once, each after what it needs.
The result, :class:`AnalysisResults`, holds each analysis's frozen result by name (None where
its inputs are absent; ``omitted`` and ``notes`` say why); the report's section builders only
turn these into document blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import polars as pl

from guarddiag.analyses.inputs import ReportInputs, load_inputs
from guarddiag.analyses.options import ReportOptions
from guarddiag.analyses.registry import (
    ANALYSES,
    Analysis,
    AnalysisContext,
    AnalysisOmitted,
    AnalysisRegistry,
)
from guarddiag.analyses.scores import SUBSETS
from guarddiag.analyses.variants import without_variants
from guarddiag.errors import GuarddiagError
from guarddiag.labels import get_mapping

R = TypeVar("R")

@dataclass(frozen=True)
class AnalysisResults:
    """Every registered analysis computed once, read by its typed handle: ``results[SCORES]``
    (None where its inputs are absent; ``omitted`` and ``notes`` say why)."""

    options: ReportOptions
    inputs: ReportInputs
    """The saved tables, sensitivity variants taken out."""
    values: Mapping[str, Any] = field(repr=False)
    """Analysis name → its result (or None), in registration order."""
    omitted: Mapping[str, str] = field(default_factory=dict)
    """Analysis name → why it has no result (it raised
    :class:`~guarddiag.analyses.registry.AnalysisOmitted`)."""
    notes: tuple[str, ...] = ()

    def __getitem__(self, analysis: Analysis[R]) -> R | None:
        if analysis.name not in self.values:
            raise GuarddiagError(f"analysis {analysis.name!r} is not registered: register it "
                                 f"before the report step runs")
        value: R | None = self.values[analysis.name]
        return value

    @property
    def rank_note(self) -> str | None:
        """Why the rank test is absent (its group or benchmark was not scored), or None."""
        return self.omitted.get("rank")

    @property
    def benchmarks(self) -> list[str]:
        """Scored benchmarks (not the pool's val split), in name order."""
        return sorted(set(self.values["scores"].binary()["benchmark"].to_list()))


def analyse(inputs: ReportInputs, options: ReportOptions, *,
            registry: AnalysisRegistry = ANALYSES) -> AnalysisResults:
    """Run every registered analysis once (pure functions of the inputs and options): the
    built-in ones (:data:`~guarddiag.analyses.catalog.BUILT_IN`, registered when the package
    is imported) and any registered since."""
    get_mapping(options.mapping)
    if options.primary_subset not in SUBSETS:
        raise GuarddiagError(f"primary subset {options.primary_subset!r} is not one of "
                             f"{', '.join(SUBSETS)}")
    # Sensitivity variants enter only the analyses that read ``all_inputs`` (distill).
    predictions = without_variants(inputs.predictions)
    clean = replace(inputs, predictions=predictions,
                    run_meta=(None if inputs.run_meta is None else inputs.run_meta.filter(
                        pl.col("run_id").is_in(predictions["run_id"].unique().to_list()))))
    done: dict[str, Any] = {}
    omitted: dict[str, str] = {}
    ctx = AnalysisContext(options=options, inputs=clean, all_inputs=inputs, done=done)
    for entry in registry.entries():
        try:
            done[entry.name] = entry.compute(ctx)
        except AnalysisOmitted as why:
            done[entry.name], omitted[entry.name] = None, why.note
    return AnalysisResults(options=options, inputs=clean, values=dict(done),
                           omitted=omitted, notes=tuple(inputs.notes))


def run_analyses(options: ReportOptions) -> AnalysisResults:
    """Load the saved tables named by ``options`` and run every analysis once."""
    return analyse(load_inputs(options), options)
