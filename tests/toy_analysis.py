"""A toy analysis: the registry's acceptance case (tests/test_analysis_registry.py). Its result
is declared once, here; its section (tests/toy_section.py) writes ``payload_of(result)``, and
results.json's model and JSON Schema entry are derived from this declaration."""

from __future__ import annotations

from dataclasses import dataclass

from guarddiag.analyses import AnalysisContext, register_analysis


@dataclass(frozen=True)
class UnsafeShareResult:
    """How many predictions read unsafe at the report's threshold."""

    n_predictions: int
    n_above: int
    """Predictions whose P(unsafe) class mass (HARMFUL + COMPOUND) is at least the threshold."""
    threshold: float


def _unsafe_share(ctx: AnalysisContext) -> UnsafeShareResult:
    p = ctx.inputs.predictions
    mass = (p["p_HARMFUL"] + p["p_COMPOUND"]).to_list()
    threshold = ctx.options.threshold
    return UnsafeShareResult(n_predictions=len(mass), n_above=sum(m >= threshold for m in mass),
                             threshold=threshold)


UNSAFE_SHARE = register_analysis("toy_unsafe_share", _unsafe_share, result=UnsafeShareResult)
