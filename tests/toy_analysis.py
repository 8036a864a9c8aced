"""A toy analysis and its report section, in one file: the registry's acceptance case
(tests/test_analysis_registry.py). Importing it is its one registration line."""

from __future__ import annotations

from dataclasses import dataclass

from guarddiag.analyses import AnalysisContext, register_analysis
from guarddiag.report import Paragraph, ReportContext, Section, register_section
from guarddiag.typed import Model


@dataclass(frozen=True)
class UnsafeShareResult:
    n_predictions: int
    n_above: int
    """Predictions whose P(unsafe) class mass (HARMFUL + COMPOUND) is at least the threshold."""


def _unsafe_share(ctx: AnalysisContext) -> UnsafeShareResult:
    p = ctx.inputs.predictions
    mass = (p["p_HARMFUL"] + p["p_COMPOUND"]).to_list()
    return UnsafeShareResult(n_predictions=len(mass),
                             n_above=sum(m >= ctx.options.threshold for m in mass))


UNSAFE_SHARE = register_analysis("toy_unsafe_share", _unsafe_share, result=UnsafeShareResult)


class UnsafeShareJson(Model):
    n_predictions: int
    n_above: int
    threshold: float


def section_unsafe_share(ctx: ReportContext) -> Section:
    r = ctx.results[UNSAFE_SHARE]
    assert r is not None
    return Section("toy_unsafe_share", "Toy: predictions above the threshold",
                   (Paragraph(f"{r.n_above} of {r.n_predictions} predictions"),),
                   {"n_predictions": r.n_predictions, "n_above": r.n_above,
                    "threshold": ctx.options.threshold})


register_section("toy_unsafe_share", section_unsafe_share, payload=UnsafeShareJson)
