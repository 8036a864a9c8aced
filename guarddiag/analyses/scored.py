"""The score tables of the report step: every run's scores, the same without the sensitivity
variants (what every other analysis reads), and the variants' own table.

Sensitivity variants (``E6-a05``, :mod:`~guarddiag.analyses.variants`) appear only in
``distill``, never among the ten branches.
"""

from __future__ import annotations

from dataclasses import replace

from guarddiag.analyses.contamination import CONTAMINATION
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scores import ScoresResult, compute_scores
from guarddiag.analyses.variants import (
    DistillSensitivityResult,
    distill_sensitivity,
    without_variants,
)
from guarddiag.labels import MAPPINGS, get_mapping


def _all_scores(ctx: AnalysisContext) -> ScoresResult:
    """CAP / OVER-REF / VAL of every run, sensitivity variants included, under every mapping
    (the primary one first)."""
    o, inputs = ctx.options, ctx.all_inputs
    sha = dict(inputs.manifest_sha256)
    contamination = ctx.get(CONTAMINATION)
    if contamination is not None:
        sha.update({k: v for k, v in contamination.sha256().items() if v})
    mapping = get_mapping(o.mapping)
    others = [m for m in MAPPINGS.values() if m.name != mapping.name]
    return compute_scores(
        inputs.predictions, kinds=inputs.kinds, pool=inputs.pool, mappings=(mapping, *others),
        threshold=o.threshold, n_resamples=o.n_resamples, seed=o.seed,
        confidence=o.confidence, benchmark_sha256=sha, source=str(o.runs_dir))


ALL_SCORES = register_analysis("all_scores", _all_scores, result=ScoresResult,
                               needs=(CONTAMINATION,))


def _scores(ctx: AnalysisContext) -> ScoresResult:
    """The scores every other analysis reads: sensitivity variants taken out."""
    all_scores = ctx[ALL_SCORES]
    return replace(all_scores, table=without_variants(all_scores.table))


SCORES = register_analysis("scores", _scores, result=ScoresResult, needs=(ALL_SCORES,))


def _distill(ctx: AnalysisContext) -> DistillSensitivityResult | None:
    """Sensitivity variants beside their base branches; None without variants."""
    return distill_sensitivity(ctx[ALL_SCORES], subset=ctx.options.primary_subset,
                               mapping=ctx.options.mapping, run_meta=ctx.all_inputs.run_meta)


DISTILL = register_analysis("distill", _distill, result=DistillSensitivityResult,
                            needs=(ALL_SCORES,))
